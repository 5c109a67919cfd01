"""The arrival stage's work per appended message, as a ratio to counting the same text cold.

Target (issue 30): at most 2 ms per 10,000 tokens appended. Counting 10,000 tokens cold with the
bundled tokenizer takes 1.6-1.7 ms on one core of the 2-core machine the project is measured on,
so the target is held as a ratio to that count (`BOUND`, 2 ms over 1.65 ms): the default arrival
stage (`default:arrival=on`, checked as a `Session` runs it) over every message of the three
sessions with the most tool output, against one cold count of the same messages, on the same
machine. Measured: 0.98-1.14x a cold count, 1.76-1.83 ms per 10,000 tokens (1.5-2.1x, 3.3 ms,
before the folders worked out what they share once and only when asked).
"""

from __future__ import annotations

import gc
import time
from typing import Any

import compactkit
from compactkit.tokens import TiktokenTokenizer, TokenCounter

from .conftest import corpus_contexts

TOKENIZER = TiktokenTokenizer("o200k_base")
TARGET_MS_PER_10K = 2.0
BOUND = 1.2
"""The target as a multiple of a cold count (see the module docs)."""


def _sessions() -> list[tuple[str, compactkit.AgentContext]]:
    def tool_chars(ctx: compactkit.AgentContext) -> int:
        return sum(len(b.text) for m in ctx.messages for b in m.tool_results)

    return sorted(corpus_contexts(), key=lambda item: -tool_chars(item[1]))[:3]


def test_arrival_work_per_appended_message(benchmark: Any) -> None:
    sessions = _sessions()
    pipeline = compactkit.build_pipeline(["default:arrival=on"], budget=15_000)

    def arrive_all() -> float:
        took = 0.0
        for _, ctx in sessions:
            history = ctx.replace(messages=())
            for msg in ctx.messages:
                t0 = time.perf_counter()
                history = pipeline.arrive(history, [msg])
                took += time.perf_counter() - t0
        return took

    def count_all() -> tuple[float, int]:
        counter = TokenCounter(TOKENIZER)  # cold: nothing cached
        t0 = time.perf_counter()
        tokens = sum(counter.message(m) for _, ctx in sessions for m in ctx.messages)
        return time.perf_counter() - t0, tokens

    def one_round() -> tuple[float, float, float, int]:
        gc.collect()
        gc.disable()
        try:
            counted, tokens = count_all()
            arrival = arrive_all()
        finally:
            gc.enable()
        return arrival / counted, arrival, counted, tokens

    one_round()  # warm-up: imports, vocabulary, thread pool
    rounds = sorted(one_round() for _ in range(3))
    ratio, arrival, counted, tokens = rounds[len(rounds) // 2]
    benchmark.pedantic(arrive_all, rounds=1, iterations=1)
    per_10k = arrival / tokens * 10_000 * 1000
    count_per_10k = counted / tokens * 10_000 * 1000
    # the target, as a ratio to the count on this machine
    allowed = TARGET_MS_PER_10K / count_per_10k
    benchmark.extra_info.update(
        {
            "sessions": [name for name, _ in sessions],
            "tokens": tokens,
            "arrival_over_count": round(ratio, 3),
            "arrival_ms_per_10k_tokens": round(per_10k, 3),
            "count_ms_per_10k_tokens": round(count_per_10k, 3),
        }
    )
    print(
        f"\narrival {per_10k:.2f} ms per 10k tokens appended, {ratio:.2f}x a cold count "
        f"({count_per_10k:.2f} ms per 10k tokens); target {TARGET_MS_PER_10K} ms per 10k tokens "
        f"= {allowed:.2f}x the count here"
    )
    assert ratio <= BOUND
