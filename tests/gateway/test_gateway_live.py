"""The real Claude Code and Codex CLIs (npm) through the gateway to the scripted fake model of
tests/live: the agent finishes, its tools really run, and every request the upstream received
keeps the provider's rules, the tool pairs and the user's words, stays under the trigger after the
first compaction, and shares the previous request's prefix except at compactions."""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from compactkit.formats.provider_rules import anthropic_rule_problems
from compactkit.gateway import GatewayConfig, create_app, wire
from compactkit.gateway.summary import INSTRUCTION
from compactkit.registry import get_counter
from tests.live import clis
from tests.live import upstream as live
from tests.live.clis import CLAUDE_CODE, CODEX, Sandbox, codex_final_message, run_claude, run_codex
from tests.live.upstream import FakeUpstream, RecordedRequest, answer, call

from .test_gateway_visible import _gateway as start_gateway
from .test_gateway_visible import _stop as stop_gateway
from .upstream import is_summary_request, serving

pytestmark = pytest.mark.live

TASK = "List every seventh number with seq, six times, then say done."
TRIGGER, TARGET = 30_000, 18_000
UPSTREAM_OPTIONS = (
    "--trigger", str(TRIGGER), "--target", str(TARGET), "--policy", "always",
    "--summarizer", "upstream",
)  # fmt: skip
"""`compactkit gateway` as a user runs it with the agent's own model writing the summaries."""


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


# --- the agent's own model writes the summary (`--summarizer upstream`) ------------------------

SUMMARY = (
    "## Task\n- list every seventh number with seq, six times (UPSTREAM-SUMMARY-51d0)\n"
    "## Commands and outcomes\n- seq ran, ok\n## Open items\n- the runs left"
)


def _summarizing(turns: list[live.Turn]) -> live.Script:
    """The script, with the gateway's summary requests answered with `SUMMARY` (they offer the
    client's tools too, but are no turn of the agent's)."""
    return live.Script(
        turns,
        is_turn=lambda r: live.offers_tools(r) and not is_summary_request(r.body),
        side_text=SUMMARY,
    )


def _through_upstream_summarizer(
    run: Callable[..., clis.CliRun],
    executable: Path,
    fake: FakeUpstream,
    sandbox: Sandbox,
    turns: list[live.Turn],
) -> tuple[clis.CliRun, str]:
    """`run` (`run_claude`, `run_codex`) of the task through `compactkit gateway --summarizer
    upstream` (in its own process), which completes its seven turns: the run and the log."""
    proc, url, _ = start_gateway(fake.url, *UPSTREAM_OPTIONS)
    try:
        done = run(
            TASK,
            sandbox,
            upstream=fake,
            script=_summarizing(turns),
            base_url=url,
            executable=executable,
        )
    finally:
        log = stop_gateway(proc)
    assert done.returncode == 0, done.describe()
    assert fake.problems == []
    assert len(done.turn_requests()) == 7
    return done, log


def check_upstream_summary(api: wire.Api, fake: FakeUpstream, log: str) -> None:
    """A compaction kept the model's summary, the gateway's log says so, and each summary
    request was a prompt the gateway had sent (the client's, before any compaction) plus the
    instruction: the provider's cached prefix, byte for byte in content."""
    assert re.search(r"compacted conversation \S+: \d+ -> \d+ tokens.*summary by upstream", log), (
        log
    )
    asks = [r for r in fake.requests if is_summary_request(r.body)]
    assert asks, "the gateway asked for no summary"
    key = "input" if api == "openai-responses" else "messages"
    turns = fake.turn_requests()
    for ask in asks:
        # the summary is asked beside the request whose prompt it extends: either may arrive first
        prompt = next(r.body for r in turns if r.body[key] == ask.body[key][:-1])
        for part in ("system", "instructions", "tools", "model"):
            assert ask.body.get(part) == prompt.get(part)
        assert ask.body[key][-1]["content"] == INSTRUCTION
    sent = [json.dumps(r.body, ensure_ascii=False) for r in turns]
    assert any("UPSTREAM-SUMMARY-51d0" in text for text in sent)
    assert all(TASK in text for text in sent)
    assert all(_calls_answered(api, r.body) for r in turns)


def test_claude_code_through_the_upstream_summarizer(
    claude_cli: Path, fake_upstream: FakeUpstream, sandbox: Sandbox
) -> None:
    turns = [
        call("Bash", command=f"seq {i} 7 20000", description=f"every seventh from {i}")
        for i in range(6)
    ] + [answer("done")]
    run, log = _through_upstream_summarizer(run_claude, claude_cli, fake_upstream, sandbox, turns)
    assert run.output["result"] == "done"
    for request in run.turn_requests():
        kept = [m for m in request.body["messages"] if m.get("role") != "system"]
        assert anthropic_rule_problems({**request.body, "messages": kept}) == []
    check_upstream_summary("anthropic", fake_upstream, log)


def test_codex_through_the_upstream_summarizer(
    codex_cli: Path, fake_upstream: FakeUpstream, sandbox: Sandbox
) -> None:
    turns = [call("exec_command", cmd=f"seq {i} 7 20000") for i in range(6)] + [answer("done")]
    run, log = _through_upstream_summarizer(run_codex, codex_cli, fake_upstream, sandbox, turns)
    assert codex_final_message(run) == "done"
    check_upstream_summary("openai-responses", fake_upstream, log)
