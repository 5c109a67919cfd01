"""Planner processes (`--processes`): a client's requests are read, planned and compacted in a
process of their own, and what the gateway's process learns after (the provider's usage, the
upstream summary) reaches the conversation there."""

from __future__ import annotations

from typing import Any

import httpx

from .agents import anthropic_agent
from .conftest import KEY, Start
from .test_gateway_summary import SUMMARY, TASK, TRIGGER
from .upstream import FakeModel, is_summary_request


def test_the_upstream_summary_and_usage_reach_a_planners_conversation(
    model: FakeModel, start_gateway: Start
) -> None:
    """With the conversation in a planner process, the summary the agent's model writes (asked
    by the gateway's process) is swapped into the compaction, and the usage of every response,
    and of the summary calls, is counted in the conversation's figures."""
    model.turns, model.summary = 16, SUMMARY
    base = start_gateway(trigger=TRIGGER, summarizer="upstream", processes=2)
    run = anthropic_agent(base, TASK)
    assert run.answer == "All done."
    stats: dict[str, Any] = httpx.get(base + "/compactkit/stats", headers={"x-api-key": KEY}).json()
    (conv,) = stats["conversations"].values()
    asks = [r for r in model.received if is_summary_request(r.json())]
    assert conv["summary_calls"] == len(asks) >= 1 and conv["summaries_used"] >= 1
    assert conv["summary_usage"]["responses"] == len(asks)
    assert conv["usage"]["responses"] == conv["requests"] == len(run.sent)
    assert stats["counters"]["requests"] == len(run.sent)
    assert stats["counters"]["compacted_requests"] >= 1
    compacted = [r.body.decode() for r in model.received if b"7f3a" in r.body]
    assert compacted and all(TASK in text for text in compacted)
    assert not any("7f3a" in sent.decode() for sent in run.sent)  # the client never sees it
