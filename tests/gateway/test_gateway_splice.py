"""`--summarizer upstream` when the agent worked on while its model wrote the summary: the
summary covers the prompt it was asked over, the compaction at the trigger wants to replace
more. The prepared summary is spliced (the later messages follow it verbatim, or summarized
extractively when they do not fit the target) instead of being thrown away; only a history
that no longer begins with the summary's prompt (rewound) falls back to the extractive one."""

from __future__ import annotations

import json
import logging
import time
from typing import Any

import httpx
import pytest

from compactkit.context import SummaryBlock, TextBlock
from compactkit.gateway import GatewayConfig, summary, wire
from compactkit.gateway.app import SESSION_HEADER, Gateway, Policy
from compactkit.validate import validate

from .agents import SYSTEM, TOOL
from .conftest import KEY, Start, chunk
from .upstream import FakeModel, is_summary_request

TASK = "Find why sphinx drops the alias docstring and fix it; keep the public API."
SUMMARY = "## Task\n- fix the alias docstring (UPSTREAM-SUMMARY-7f3a)\n## Open items\n- none"
TRIGGER = 18_000


def _words(n: int) -> str:
    return f"USER-WORDS-{n}: also keep the changelog entry to one line, please."


def _turn(messages: list[dict[str, Any]], n: int) -> None:
    """One call of the agent and its result; every third result comes with the user's words
    (as Claude Code sends what the user types while the agent works)."""
    call = {"type": "tool_use", "id": f"toolu_call_{n}", "name": "read_file",
            "input": {"path": f"chunk{n}"}}  # fmt: skip
    messages.append({"role": "assistant", "content": [call]})
    content: list[dict[str, Any]] = [
        {"type": "tool_result", "tool_use_id": f"toolu_call_{n}", "content": chunk(f"chunk{n}")}
    ]
    if n % 3 == 2:
        content.append({"type": "text", "text": _words(n)})
    messages.append({"role": "user", "content": content})


def _body(messages: list[dict[str, Any]]) -> dict[str, Any]:
    return {"model": "claude-test", "max_tokens": 256, "system": SYSTEM, "tools": [TOOL],
            "messages": messages}  # fmt: skip


def _conversation(base: str) -> dict[str, Any]:
    stats = httpx.get(base + "/compactkit/stats", headers={"x-api-key": KEY}).json()
    (conv,) = stats["conversations"].values()
    figures: dict[str, Any] = conv
    return figures


def test_a_summary_prepared_before_the_agent_worked_on_is_spliced_not_waited_for(
    model: FakeModel, start_gateway: Start, caplog: pytest.LogCaptureFixture
) -> None:
    """The summary is ready; the agent makes several more calls before the trigger. The
    crossing request asks for no new summary: it sends the model's summary, then every message
    the client added after the summary's prompt as the client sent it (the user's words among
    them), and the conversation counts the summary used, no fallback."""
    model.summary = SUMMARY
    base = start_gateway(trigger=TRIGGER, summarizer="upstream")
    messages: list[dict[str, Any]] = [{"role": "user", "content": TASK}]
    headers = {"x-api-key": KEY, SESSION_HEADER: "splice"}
    with (
        caplog.at_level(logging.INFO, logger="compactkit.gateway"),
        httpx.Client(timeout=60) as client,
    ):
        for n in range(80):
            got = client.post(base + "/v1/messages", json=_body(messages), headers=headers)
            assert got.status_code == 200
            conv = _conversation(base)
            if conv["compactions"]:
                break
            while conv["summary_calls"] and not conv["summary_usage"]["responses"]:
                time.sleep(0.05)  # the summary gets ready while the agent works
                conv = _conversation(base)
            _turn(messages, n)
    assert conv["compactions"] == 1
    assert (conv["summary_calls"], conv["summaries_used"], conv["summary_fallbacks"]) == (1, 1, 0)
    bodies = [r.json() for r in model.received if r.path == "/v1/messages"]
    asks = [i for i, body in enumerate(bodies) if is_summary_request(body)]
    assert len(asks) == 1  # the crossing request asked for none
    prompt = bodies[asks[0]]["messages"][:-1]
    assert messages[: len(prompt)] == prompt
    later = messages[len(prompt) :]
    crossing = bodies[-1]
    assert not is_summary_request(crossing) and crossing["messages"] != messages
    sent = json.dumps(crossing)
    assert "UPSTREAM-SUMMARY-7f3a" in sent and TASK in sent
    # the window moved past the summary's prompt: more than the kept turns came after it
    assert len(later) > 2 * 3 + 1
    assert crossing["messages"][-len(later) :] == later
    typed = [b["text"] for m in messages if isinstance(m["content"], list)
             for b in m["content"] if b.get("type") == "text"]  # fmt: skip
    assert typed and all(words in sent for words in typed)
    assert "summary by upstream" in caplog.text


def _conversation_of(turns: int) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = [{"role": "user", "content": TASK}]
    for n in range(turns):
        _turn(messages, n)
    return messages


@pytest.mark.parametrize(("target", "how"), [(9_000, "verbatim"), (2_500, "extractive")])
def test_the_spliced_context_validates_and_keeps_the_users_words(target: int, how: str) -> None:
    """The summary covers the first 40 turns; the compaction replaces all but the last 3 of
    50. Within the target, the 7 turns between follow a marker of what the summary covers as
    they were; over it, they are summarized extractively after the model's summary (in the
    marker of the whole window). Either way the validator finds nothing, and every word the
    user typed is there."""
    policy = Policy(
        GatewayConfig(trigger=TRIGGER, target=target, summarizer="upstream", policy="always")
    )
    body = _body(_conversation_of(50))
    before = wire.read("anthropic", body).context
    covered = len(wire.read("anthropic", _body(_conversation_of(40))).context.messages)
    prepared = summary.Prepared(before.messages[:covered], text=SUMMARY)
    after = policy.pipeline.run(before, policy.counter).context
    spliced, why = summary.swap(
        before, after, prepared, policy.counter, target=target, pins=policy.pipeline.pins
    )
    assert why == ""
    assert validate(spliced, before) == []
    text = json.dumps(spliced.model_dump(mode="json"))
    typed = [b.text for m in before.messages for b in m.content if isinstance(b, TextBlock)]
    assert all(words in text for words in typed if words.startswith("USER-WORDS-"))
    (block,) = [b for m in spliced.messages for b in m.content if isinstance(b, SummaryBlock)]
    assert block.text.startswith(SUMMARY)
    verbatim, summarized = prepared.spliced
    later = before.messages[covered : covered + verbatim + summarized]
    assert len(later) >= 2 * 7  # a call and its result a turn, the user's words besides
    if how == "verbatim":
        assert block.backend == "upstream" and summarized == 0
        assert all(any(m is k for k in spliced.messages) for m in later)
    else:
        assert block.backend == "upstream+extractive" and verbatim == 0
        assert "## Since the summary above (extractive)" in block.text
        assert not any(any(m is k for k in spliced.messages) for m in later)
    assert policy.counter.context(spliced) <= target


def test_a_rewound_history_falls_back_to_the_extractive_summary() -> None:
    """The client dropped turns the summary covers: the summary describes a history that no
    longer is, so the compaction (made again, in the background, over the history as it is
    now) keeps the extractive summary and counts it."""
    gateway = Gateway(GatewayConfig(trigger=TRIGGER, summarizer="upstream", policy="always"))
    policy = gateway.policy
    messages: list[dict[str, Any]] = [{"role": "user", "content": TASK}]
    asked = None
    for n in range(80):
        body = _body(messages)
        raw = json.dumps(body).encode()
        plan = policy.plan("anthropic", json.loads(raw), "key", raw, "s1", "owner")
        conv = plan.conversation
        assert conv is not None
        if plan.prepare is not None:  # what the gateway does in the background
            assert plan.prompt is not None
            gateway._compaction(plan.prepare, plan.prompt)
            if not plan.compact_only:
                plan.prepare.text, asked = SUMMARY, n
        if conv.compactions:
            break
        if asked is not None and n - asked == 1:
            del messages[-4:]  # the client rewinds two turns and goes on from there
        _turn(messages, n)
    assert conv.compactions == 1
    assert (conv.summaries_used, conv.summary_fallbacks) == (0, 1)
    (block,) = [b for m in conv.base.messages for b in m.content if isinstance(b, SummaryBlock)]
    assert "7f3a" not in block.text and block.backend == "extractive"
    assert validate(conv.base, wire.read("anthropic", body).context) == []


def _jump(messages: list[dict[str, Any]], n: int, chunks: int) -> None:
    """One call whose result is `chunks` files at once (a large output the agent read)."""
    _turn(messages, n)
    text = "".join(chunk(f"chunk{k}") for k in range(n, n + chunks))
    messages[-1]["content"][0]["content"] = text


@pytest.mark.parametrize(("chunks", "deferred"), [(8, True), (22, False)])
def test_a_history_that_jumps_past_the_trigger_is_compacted_off_the_request_path(
    chunks: int, deferred: bool
) -> None:
    """Below 85% of the trigger, then one large output past it. Up to 1.5x the trigger the
    request goes as the client sent it and starts the preparation (the summary and the
    compaction, in the background); the next request sends that compaction, the model's
    summary in it, without running the pipeline itself. Past 1.5x the pipeline runs in the
    request, as without the upstream summarizer."""
    config = GatewayConfig(trigger=TRIGGER, target=12_000, summarizer="upstream", policy="always")
    gateway = Gateway(config)
    policy = gateway.policy
    runs: list[int] = []
    run = policy.pipeline.run

    def counted(*args: Any, **kwargs: Any) -> Any:
        runs.append(1)
        return run(*args, **kwargs)

    messages = _conversation_of(20)  # 14k tokens: below 85% of the trigger
    _jump(messages, 20, chunks)  # to 20k (deferred), to 29k (over 1.5x the trigger)
    plans = []
    for n in (21, 22):
        body = _body(messages)
        raw = json.dumps(body).encode()
        policy.pipeline.run = counted  # type: ignore[method-assign]
        plan = policy.plan("anthropic", json.loads(raw), "key", raw, "s1", "owner")
        policy.pipeline.run = run  # type: ignore[method-assign]
        plans.append((plan, len(runs)))
        if plan.prepare is not None:  # what the gateway does in the background
            assert plan.prompt is not None
            gateway._compaction(plan.prepare, plan.prompt)
            plan.prepare.text = SUMMARY
        _turn(messages, n)
    conv = plans[0][0].conversation
    assert conv is not None and conv.compactions == 1
    (first, runs_first), (second, runs_second) = plans
    if deferred:
        assert first.body == json.dumps(_body(messages[:-4])).encode()  # as the client sent it
        assert first.prepare is not None and runs_first == 0
        assert runs_second == 0 and second.body != first.body
        assert (conv.summaries_used, conv.summary_fallbacks) == (1, 0)
        assert b"UPSTREAM-SUMMARY-7f3a" in second.body
    else:
        assert runs_first == 1 and (conv.summaries_used, conv.summary_fallbacks) == (0, 1)
    assert validate(conv.base, wire.read("anthropic", _body(messages[:-2])).context) == []
