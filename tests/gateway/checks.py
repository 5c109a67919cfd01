"""What every conversation through the gateway must show, checked on what the upstream got."""

from __future__ import annotations

import json
from typing import Any

from compactkit.formats.provider_rules import anthropic_rule_problems, openai_rule_problems
from compactkit.gateway import wire
from compactkit.registry import get_counter


def tokens(api: wire.Api, body: bytes) -> int:
    return get_counter().context(wire.read(api, json.loads(body)).context)


def items(api: wire.Api, body: bytes) -> list[Any]:
    data = json.loads(body)
    return wire.strip_cache_control(data["input" if api == "openai-responses" else "messages"])


def check_conversation(
    api: wire.Api, sent: list[bytes], received: list[bytes], trigger: int, task: str
) -> int:
    """Assert the gateway's promises over one conversation; returns how many requests it
    compacted (re-encoded)."""
    assert len(sent) == len(received)
    compacted = 0
    started = False
    previous: list[Any] | None = None
    for client, upstream in zip(sent, received, strict=True):
        body = json.loads(upstream)
        if not started and tokens(api, client) <= trigger:
            assert upstream == client, "below the trigger the request must pass byte-identical"
        else:
            started = True
        if upstream != client:
            compacted += 1
            assert tokens(api, upstream) <= trigger, "a compacted request is over the trigger"
        if api == "anthropic":
            assert anthropic_rule_problems(body) == []
        elif api == "openai-chat":
            assert openai_rule_problems(body["messages"], body.get("tools")) == []
        assert task in upstream.decode(), "the user's words are missing"
        now = items(api, upstream)
        if previous is not None and now[: len(previous)] != previous:
            # only a compaction may rewrite the prefix: the prompt shrinks
            assert len(now) < len(previous) or tokens(api, upstream) < trigger
        previous = now
        # every other field as the client sent it
        original = json.loads(client)
        key = "input" if api == "openai-responses" else "messages"
        assert {k: v for k, v in body.items() if k != key} == {
            k: v for k, v in original.items() if k != key
        }
    return compacted
