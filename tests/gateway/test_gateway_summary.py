"""`--summarizer upstream`: the agent's own model writes the summary, asked in the background
when the conversation passes 85% of the trigger, over the prompt the gateway has just sent (so it
reads from the provider's cache), and swapped in by the request that crosses the trigger without
waiting for it. Against the scripted fake model, which answers the summary request (slowly when
told) and reports as cache reads the prefix a summary request shares with the prompts before."""

from __future__ import annotations

import logging
import statistics
import time
from typing import Any

import httpx
import pytest
from starlette.responses import JSONResponse, Response

from compactkit.gateway.summary import INSTRUCTION

from .agents import SYSTEM, TOOL, anthropic_agent, chat_agent, responses_agent
from .conftest import KEY, Start, chunk
from .upstream import SUMMARY_ASK, FakeModel, is_summary_request

TASK = "Find why sphinx drops the alias docstring and fix it; keep the public API."
TRIGGER = 6000
SUMMARY = "## Task\n- fix the alias docstring (UPSTREAM-SUMMARY-7f3a)\n## Open items\n- none"


def _stats(base: str) -> dict[str, Any]:
    data: dict[str, Any] = httpx.get(base + "/compactkit/stats", headers={"x-api-key": KEY}).json()
    return data


def _items(body: dict[str, Any]) -> list[Any]:
    items: list[Any] = body.get("messages", body.get("input"))
    return items


def test_the_instruction_is_what_the_fake_answers() -> None:
    assert INSTRUCTION.startswith(SUMMARY_ASK)


@pytest.mark.parametrize("stream", [False, True])
@pytest.mark.parametrize("api", ["anthropic", "openai-chat", "openai-responses"])
def test_the_agents_model_writes_the_summary_from_its_cached_prefix(
    model: FakeModel, start_gateway: Start, api: str, stream: bool
) -> None:
    model.turns, model.summary = 16, SUMMARY
    base = start_gateway(trigger=TRIGGER, summarizer="upstream")
    agent = {"anthropic": anthropic_agent, "openai-chat": chat_agent}.get(api, responses_agent)
    run = agent(base, TASK, stream=stream)
    assert run.answer == "All done."
    received = [(r, r.json()) for r in model.received if r.path.startswith("/v1/")]
    asks = [i for i, (_, body) in enumerate(received) if is_summary_request(body)]
    assert asks, "no summary was asked for"
    for at in asks:
        ask = received[at][1]
        assert _items(ask)[-1]["content"] == INSTRUCTION
        assert ask.get("stream") is not True
        # the prompt sent just before, byte for byte in content, then the instruction alone
        sent = [body for _, body in received[:at] if not is_summary_request(body)]
        assert any(_items(body) == _items(ask)[:-1] for body in sent)
        same = next(body for body in sent if _items(body) == _items(ask)[:-1])
        for part in ("system", "instructions", "tools", "model"):
            assert ask.get(part) == same.get(part)
    (conv,) = _stats(base)["conversations"].values()
    assert conv["summary_calls"] == len(asks) and conv["summaries_used"] >= 1
    usage = conv["summary_usage"]
    share = usage["cache_read_tokens"] / (usage["cache_read_tokens"] + usage["input_tokens"])
    assert share >= 0.9, usage
    # the request after the compaction carries the model's summary and the task verbatim
    compacted = [
        r.body.decode()
        for r, body in received
        if not is_summary_request(body) and b"7f3a" in r.body
    ]
    assert compacted and all(TASK in text for text in compacted)
    assert not any("7f3a" in sent.decode() for sent in run.sent)  # the client never sees it


def test_a_malformed_summary_falls_back_to_the_extractive_one(
    model: FakeModel, start_gateway: Start
) -> None:
    model.turns, model.summary = 16, "I cannot summarize this."
    base = start_gateway(trigger=TRIGGER, summarizer="upstream")
    anthropic_agent(base, TASK)
    (conv,) = _stats(base)["conversations"].values()
    assert conv["compactions"] >= 1 and conv["summary_calls"] >= 1
    assert conv["summaries_used"] == 0 and conv["summary_fallbacks"] == conv["compactions"]
    last = [r for r in model.received if not is_summary_request(r.json())][-1].body.decode()
    assert "## Task" in last and "cannot summarize" not in last  # the extractive summary


def test_a_failed_summary_call_falls_back_and_is_counted(
    model: FakeModel, start_gateway: Start, caplog: pytest.LogCaptureFixture
) -> None:
    """The upstream answers the summary request 500: the compaction keeps the extractive summary,
    the conversation counts it, the client never sees the error, and no key reaches the log."""

    def refuse(got: Any) -> Response | None:
        if is_summary_request(got.json()):
            return JSONResponse({"error": {"message": "overloaded"}}, status_code=500)
        return None

    model.turns, model.hook = 16, refuse
    base = start_gateway(trigger=TRIGGER, summarizer="upstream")
    with caplog.at_level(logging.INFO, logger="compactkit.gateway"):
        run = anthropic_agent(base, TASK)
    assert run.answer == "All done."
    (conv,) = _stats(base)["conversations"].values()
    assert conv["summary_calls"] >= 1 and conv["summaries_used"] == 0
    assert conv["summary_fallbacks"] == conv["compactions"] >= 1
    assert conv["failures"] == 0  # the client's requests all went through
    assert "upstream summary failed (HTTP 500)" in caplog.text and KEY not in caplog.text


def _turn(messages: list[dict[str, Any]], n: int) -> None:
    messages.append(
        {
            "role": "assistant",
            "content": [
                {"type": "tool_use", "id": f"toolu_call_{n}", "name": "read_file", "input": {}}
            ],
        }
    )
    messages.append(
        {
            "role": "user",
            "content": [
                {
                    "type": "tool_result",
                    "tool_use_id": f"toolu_call_{n}",
                    "content": chunk(f"chunk{n}"),
                }
            ],
        }
    )


def _send(client: httpx.Client, base: str, messages: list[dict[str, Any]]) -> float:
    body = {"model": "claude-test", "max_tokens": 256, "system": SYSTEM, "tools": [TOOL],
            "messages": messages}  # fmt: skip
    started = time.perf_counter()
    got = client.post(base + "/v1/messages", json=body, headers={"x-api-key": KEY})
    assert got.status_code == 200
    return time.perf_counter() - started


@pytest.mark.parametrize("thinks", [True, False])
def test_the_summary_is_ready_before_it_is_needed_and_never_waited_for(
    model: FakeModel, start_gateway: Start, thinks: bool
) -> None:
    """The fake takes 3 s to summarize: neither the request that asks for the summary nor the
    one that crosses the trigger waits for it (each is within a few relay latencies of the
    requests that only relay). The crossing one swaps it in when it is ready (the agent took its
    time), else keeps the extractive summary (counted) rather than wait."""
    model.summary, model.summary_delay = SUMMARY, 3.0
    base = start_gateway(trigger=TRIGGER, summarizer="upstream")
    messages: list[dict[str, Any]] = [{"role": "user", "content": TASK}]
    relayed: list[float] = []
    asked = crossed = None
    with httpx.Client(timeout=60) as client:
        for n in range(40):
            seconds = _send(client, base, messages)
            conv = next(iter(_stats(base)["conversations"].values()))
            if asked is None and conv["summary_calls"]:
                asked = seconds
                while (
                    thinks
                    and not _stats(base)["conversations"][conv_key(base)]["summary_usage"][
                        "responses"
                    ]
                ):
                    time.sleep(0.05)  # the agent thinks: the summary gets ready meanwhile
            elif conv["compactions"]:
                crossed = seconds
                break
            else:
                relayed.append(seconds)
            _turn(messages, n)
    assert asked is not None and crossed is not None
    assert conv["summary_calls"] == 1
    assert (conv["summaries_used"], conv["summary_fallbacks"]) == ((1, 0) if thinks else (0, 1))
    relay = statistics.median(relayed)
    # waiting for the summary would take summary_delay / relay (hundreds of) relay latencies
    assert asked / relay < 15 and crossed / relay < 15, (asked, crossed, relayed)


def conv_key(base: str) -> str:
    return next(iter(_stats(base)["conversations"]))


@pytest.mark.parametrize(("trigger", "calls"), [(TRIGGER, 1), (100_000, 0)])
def test_a_conversation_that_ends_before_the_trigger_costs_at_most_one_summary(
    model: FakeModel, start_gateway: Start, trigger: int, calls: int
) -> None:
    model.summary = SUMMARY
    base = start_gateway(trigger=trigger, summarizer="upstream")
    messages: list[dict[str, Any]] = [{"role": "user", "content": TASK}]
    with httpx.Client(timeout=60) as client:
        for n in range(40):
            _send(client, base, messages)
            if _stats(base)["conversations"][conv_key(base)]["summary_calls"]:
                break
            _turn(messages, n)
        for extra in range(3):  # on below the trigger: no second summary
            _turn(messages, 100 + extra)
            messages[-1]["content"][0]["content"] = "ok"
            _send(client, base, messages)
    (conv,) = _stats(base)["conversations"].values()
    assert conv["compactions"] == 0 and conv["summary_calls"] == calls
    assert sum(is_summary_request(r.json()) for r in model.received) == calls
