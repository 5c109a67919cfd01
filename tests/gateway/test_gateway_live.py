"""The real Claude Code and Codex CLIs (npm) through the gateway to the scripted fake model of
tests/live: the agent finishes, its tools really run, and every request the upstream received
keeps the provider's rules, the tool pairs and the user's words, stays under the trigger after the
first compaction, and shares the previous request's prefix except at compactions."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from compactkit.formats.provider_rules import anthropic_rule_problems
from compactkit.gateway import GatewayConfig, create_app, wire
from compactkit.registry import get_counter
from tests.live.clis import CLAUDE_CODE, CODEX, Sandbox, codex_final_message, run_claude, run_codex
from tests.live.upstream import FakeUpstream, RecordedRequest, answer, call

from .upstream import serving

pytestmark = pytest.mark.live

TASK = "List every seventh number with seq, six times, then say done."
TRIGGER, TARGET = 30_000, 18_000


@pytest.fixture
def gateway(fake_upstream: FakeUpstream) -> Iterator[str]:
    config = GatewayConfig(
        upstream_anthropic=fake_upstream.url,
        upstream_openai=fake_upstream.url,
        trigger=TRIGGER,
        target=TARGET,
    )
    with serving(create_app(config)) as url:
        yield url


def _items(api: wire.Api, body: dict[str, Any]) -> list[Any]:
    return wire.strip_cache_control(body["input" if api == "openai-responses" else "messages"])


def _calls_answered(api: wire.Api, body: dict[str, Any]) -> bool:
    seen: set[str] = set()
    for item in _items(api, body):
        blocks = item.get("content") if api == "anthropic" else [item]
        for b in blocks if isinstance(blocks, list) else []:
            if not isinstance(b, dict):
                continue
            if b.get("type") == "tool_use":
                seen.add(b["id"])
            if b.get("type") == "function_call":
                seen.add(b["call_id"])
            if b.get("type") == "tool_result" and b["tool_use_id"] not in seen:
                return False
            if b.get("type") == "function_call_output" and b["call_id"] not in seen:
                return False
    return True


def check_live(api: wire.Api, turns: list[RecordedRequest], stats: dict[str, Any]) -> None:
    counter = get_counter()
    assert stats["counters"]["compacted_requests"] > 0, "the session never passed the trigger"
    assert stats["counters"]["failed"] == stats["counters"]["unreadable"] == 0
    compacted = False
    previous: list[Any] | None = None
    for request in turns:
        body = request.body
        tokens = counter.context(wire.read(api, body).context)
        if api == "anthropic":
            kept = [m for m in body["messages"] if m.get("role") != "system"]
            assert anthropic_rule_problems({**body, "messages": kept}) == []
        assert _calls_answered(api, body), [
            (i.get("type"), i.get("role"), i.get("call_id")) for i in _items(api, body)
        ]
        assert TASK in json.dumps(body, ensure_ascii=False)
        now = _items(api, body)
        shares = previous is not None and now[: len(previous)] == previous
        if previous is not None and not shares:
            compacted = True  # only a compaction rewrites the prefix
            assert tokens <= TRIGGER
        if compacted:
            assert tokens <= TRIGGER, "a request after the first compaction is over the trigger"
        previous = now


def test_claude_code_through_the_gateway(
    claude_cli: Path, fake_upstream: FakeUpstream, sandbox: Sandbox, gateway: str
) -> None:
    script = [
        call("Bash", command=f"seq {i} 7 20000", description=f"every seventh from {i}")
        for i in range(6)
    ] + [answer("done")]
    run = run_claude(
        TASK,
        sandbox,
        upstream=fake_upstream,
        script=script,
        base_url=gateway,
        executable=claude_cli,
    )
    assert run.returncode == 0, run.describe()
    assert fake_upstream.problems == []
    assert run.output["result"] == "done"
    turns = run.turn_requests()
    assert len(turns) == 7
    assert all(
        r.headers["user-agent"].startswith(f"claude-cli/{CLAUDE_CODE.version}") for r in turns
    )
    check_live("anthropic", turns, httpx.get(gateway + "/compactkit/stats").json())


def test_codex_through_the_gateway(
    codex_cli: Path, fake_upstream: FakeUpstream, sandbox: Sandbox, gateway: str
) -> None:
    script = [call("exec_command", cmd=f"seq {i} 7 20000") for i in range(6)] + [answer("done")]
    run = run_codex(
        TASK, sandbox, upstream=fake_upstream, script=script, base_url=gateway, executable=codex_cli
    )
    assert run.returncode == 0, run.describe()
    assert fake_upstream.problems == []
    assert codex_final_message(run) == "done"
    turns = run.turn_requests()
    assert len(turns) == 7
    assert all(f"codex_exec/{CODEX.version}" in r.headers["user-agent"] for r in turns)
    assert all(r.body["stream"] is True for r in turns)
    check_live("openai-responses", turns, httpx.get(gateway + "/compactkit/stats").json())
