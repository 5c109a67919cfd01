"""What real clients send beyond the documented API survives compaction: a Claude Code 2.1-shaped
conversation (system blocks with `cache_control`, `role: "system"` messages inside `messages`,
`context_management`, `output_config`, thinking blocks with signatures before their tool calls,
images, a breakpoint moved to the newest message on every request)."""

from __future__ import annotations

import base64
import json
from typing import Any

import httpx

from compactkit.formats.provider_rules import anthropic_rule_problems

from .conftest import chunk
from .upstream import FakeModel

TASK = "Make the sphinx autodoc test pass; do not change the public API."
PNG = base64.b64encode(b"\x89PNG\r\n\x1a\n" + bytes(range(64))).decode()
TRIGGER = 6000


def _strip_breakpoints(messages: list[dict[str, Any]]) -> None:
    for m in messages:
        for b in m["content"] if isinstance(m["content"], list) else []:
            b.pop("cache_control", None)


def claude_code_requests(turns: int) -> list[bytes]:
    """The bodies a Claude Code-like client sends over `turns` tool calls."""
    messages: list[dict[str, Any]] = [
        {
            "role": "user",
            "content": [
                {"type": "text", "text": TASK},
                {
                    "type": "image",
                    "source": {"type": "base64", "media_type": "image/png", "data": PNG},
                },
            ],
        },
        {"role": "system", "content": "The user has CLAUDE.md instructions: run tests with tox."},
    ]
    bodies = []
    for n in range(turns):
        _strip_breakpoints(messages)
        messages[-1]["content"] = (
            [{"type": "text", "text": messages[-1]["content"]}]
            if isinstance(messages[-1]["content"], str)
            else messages[-1]["content"]
        )
        messages[-1]["content"][-1]["cache_control"] = {"type": "ephemeral"}
        body = {
            "model": "claude-sonnet-4-5",
            "max_tokens": 32000,
            "system": [
                {
                    "type": "text",
                    "text": "You are Claude Code.",
                    "cache_control": {"type": "ephemeral"},
                },
                {"type": "text", "text": "Use the tools to read files."},
            ],
            "tools": [{"name": "Read", "input_schema": {"type": "object"}}],
            "metadata": {"user_id": json.dumps({"session_id": "cc-5f1c", "device_id": "d1"})},
            "thinking": {"type": "enabled", "budget_tokens": 1024},
            "context_management": {"edits": [{"type": "clear_thinking_20251015", "keep": "all"}]},
            "output_config": {"effort": "medium"},
            "stream": False,
            "messages": json.loads(json.dumps(messages)),
        }
        bodies.append(json.dumps(body).encode())
        messages.append(
            {
                "role": "assistant",
                "content": [
                    {
                        "type": "thinking",
                        "thinking": f"I should read chunk {n}.",
                        "signature": f"sig-{n}-" + "A" * 40,
                    },
                    {"type": "text", "text": "Reading the next part."},
                    {
                        "type": "tool_use",
                        "id": f"toolu_{n:04d}",
                        "name": "Read",
                        "input": {"path": f"chunk{n}"},
                    },
                ],
            }
        )
        messages.append(
            {
                "role": "user",
                "content": [
                    {
                        "type": "tool_result",
                        "tool_use_id": f"toolu_{n:04d}",
                        "content": chunk(f"chunk{n}"),
                    }
                ],
            }
        )
    return bodies


def _thinking_turns(messages: list[dict[str, Any]]) -> list[list[dict[str, Any]]]:
    return [
        m["content"]
        for m in messages
        if m["role"] == "assistant" and any(b.get("type") == "thinking" for b in m["content"])
    ]


def test_claude_code_shaped_requests_keep_what_the_gateway_does_not_understand(
    model: FakeModel, start_gateway
) -> None:
    base = start_gateway(trigger=TRIGGER, target=3000)
    sent = claude_code_requests(14)
    with httpx.Client(timeout=60) as client:
        for body in sent:
            assert client.post(base + "/v1/messages", content=body).status_code == 200
    received = [json.loads(r.body) for r in model.received]
    compacted = [
        (json.loads(s), r) for s, r in zip(sent, received, strict=True) if json.loads(s) != r
    ]
    assert compacted, "the conversation passed the trigger but nothing was compacted"
    client_assistant = {
        json.dumps(m["content"])
        for s in sent
        for m in json.loads(s)["messages"]
        if m["role"] == "assistant"
    }
    for original, got in compacted:
        assert (
            anthropic_rule_problems(
                {**got, "messages": [m for m in got["messages"] if m["role"] != "system"]}
            )
            == []
        )
        for key in (
            "system",
            "tools",
            "metadata",
            "thinking",
            "context_management",
            "output_config",
        ):
            assert got[key] == original[key]
        # thinking blocks keep their signatures and their tool turn: kept turns are as sent
        for turn in _thinking_turns(got["messages"]):
            assert json.dumps(turn) in client_assistant
        # the newest messages (with the client's breakpoint) are the client's own, as sent
        assert got["messages"][-1] == original["messages"][-1]
        assert got["messages"][-1]["content"][-1]["cache_control"] == {"type": "ephemeral"}
        breakpoints = json.dumps(got).count('"cache_control"')
        assert 2 <= breakpoints <= 4
        # the task and its image, and the user's words, are kept
        first = got["messages"][0]["content"]
        assert first[0]["text"] == TASK and first[1] == original["messages"][0]["content"][1]
    # a system message inside `messages` passes as sent (role and all) while it is kept
    kept = [
        m
        for r in received
        for m in r["messages"]
        if "run tests with tox" in json.dumps(m["content"])
    ]
    assert kept and all(m["role"] == "system" for m in kept)
