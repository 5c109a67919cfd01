"""sliding-window before every model call of a growing session, against LangChain's
`trim_messages` over the same calls: the way a LangChain user trims, each call given the whole
history so far. Measured per session on the corpus conversation with the most model calls (pi's
983-message session), where a cost that grows with the square of the session shows most.

A window stored again on every call dumped every dropped message again, hashed every part of it
again, and the pins of every dropped turn were looked up twice: 4.4x-6.8x here (a 2-core machine
under load), 23.3x once the JSON of a message and the parts of a window are remembered. The target
catches a cost that grows with the square of the session again.
"""

from __future__ import annotations

import gc
import time
from typing import Any

from compactkit import AgentContext
from compactkit.registry import make_registry, use_registry
from compactkit.strategies.sliding_window import SlidingWindow

from .conftest import corpus_contexts
from .test_agent_loop_bench import BUDGET, _lc_history, _trim

CALLS = 120
"""Model calls replayed, spread evenly over the whole session (trim_messages over all 471 of
pi's takes a minute)."""
TARGET = 15


def _turns(ctx: AgentContext) -> list[int]:
    """Indexes of the assistant messages: a model call is made with everything before each."""
    return [i for i, m in enumerate(ctx.messages) if m.role == "assistant" and i > 0]


def _calls(ctx: AgentContext) -> list[int]:
    """`CALLS` model calls spread evenly over the whole session, the last one included."""
    turns = _turns(ctx)
    if len(turns) <= CALLS:
        return turns
    return [turns[(len(turns) - 1) * k // (CALLS - 1)] for k in range(CALLS)]


def _ours(ctx: AgentContext, calls: list[int]) -> None:
    # a fresh registry (so fresh counters) per round: cold counts are part of the cost
    with use_registry(make_registry(entry_points=False)):
        window = SlidingWindow(max_tokens=BUDGET)
        for index in calls:
            window.compact(ctx.replace(messages=ctx.messages[:index]))


def _seconds(fn: Any, *args: Any) -> float:
    gc.collect()
    t0 = time.perf_counter()
    fn(*args)
    return time.perf_counter() - t0


def test_sliding_window_per_call_vs_trim_messages(benchmark: Any) -> None:
    name, ctx = max(corpus_contexts(), key=lambda item: len(_turns(item[1])))
    calls = _calls(ctx)
    lc, offsets = _lc_history(ctx)

    def peer() -> None:
        for index in calls:
            _trim(lc[: offsets[index]])

    # rounds alternate, so a change of the machine's load falls on both sides; each round of ours
    # gets new values, so nothing a message remembered of itself carries over from the last
    mine, theirs = float("inf"), float("inf")
    for _ in range(2):
        fresh = AgentContext.model_validate_json(ctx.model_dump_json())
        mine = min(mine, _seconds(_ours, fresh, calls))
        theirs = min(theirs, _seconds(peer))
    fresh = AgentContext.model_validate_json(ctx.model_dump_json())
    benchmark.pedantic(_ours, args=(fresh, calls), rounds=1, iterations=1)
    ratio = theirs / mine
    benchmark.extra_info.update(
        {
            "conversation": name,
            "messages": len(ctx.messages),
            "model_calls": len(calls),
            "budget": BUDGET,
            "sliding_window_s": round(mine, 3),
            "trim_messages_s": round(theirs, 3),
            "speedup": round(ratio, 1),
        }
    )
    print(
        f"\n{name}: {len(ctx.messages)} messages, {len(calls)} model calls, budget {BUDGET:,}: "
        f"sliding-window {mine:.3f}s vs trim_messages {theirs:.3f}s: {ratio:.1f}x "
        f"(target >= {TARGET}x)"
    )
    assert ratio >= TARGET
