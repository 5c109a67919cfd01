"""What a strategy time limit costs: a plugin strategy in a child process against the same strategy
in-process, and built-in strategies with and without a limit (they always run in-process)."""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable

from compactkit.context import AgentContext, Message, TextBlock
from compactkit.pipeline import Pipeline, get_strategy
from compactkit.registry import get_counter
from compactkit.strategy import Strategy

from .conftest import largest_context


class Note(Strategy):
    """A plugin-like strategy doing almost nothing: adds one message after the task."""

    name = "note"

    def compact(self, ctx: AgentContext) -> AgentContext:
        note = Message(role="user", content=(TextBlock(text="a note"),))
        return ctx.replace(messages=(*ctx.messages[:1], note, *ctx.messages[1:]))


def _alternate(
    a: Callable[[], object], b: Callable[[], object], rounds: int
) -> tuple[float, float]:
    """Median seconds of `a` and of `b`, run in alternate rounds so machine load falls on both."""
    ta: list[float] = []
    tb: list[float] = []
    for _ in range(rounds):
        for fn, times in ((a, ta), (b, tb)):
            t0 = time.perf_counter()
            fn()
            times.append(time.perf_counter() - t0)
    return statistics.median(ta), statistics.median(tb)


def test_a_plugin_in_a_child_process_costs_a_fork_and_what_it_changed() -> None:
    name, ctx = largest_context()
    counter = get_counter("o200k_base")
    counter.context(ctx)
    inline = Pipeline([Note()])
    isolated = Pipeline([Note()], timeout=60)
    t_in, t_child = _alternate(
        lambda: inline.run(ctx, counter), lambda: isolated.run(ctx, counter), rounds=15
    )
    print(
        f"\n{name}: {len(ctx.messages)} messages; plugin step in-process {t_in * 1000:.1f} ms, "
        f"in a child {t_child * 1000:.1f} ms (+{(t_child - t_in) * 1000:.1f} ms per call)"
    )
    assert isolated.run(ctx, counter).context == inline.run(ctx, counter).context


def test_a_time_limit_does_not_slow_builtins() -> None:
    name, ctx = largest_context()
    counter = get_counter("o200k_base")
    counter.context(ctx)
    steps = [
        get_strategy("etag-collapse"),
        get_strategy("observation-mask"),
        get_strategy("sliding-window", max_tokens=20_000),
    ]
    plain = Pipeline(steps)
    limited = Pipeline(steps, timeout=60)
    t_plain, t_limited = _alternate(
        lambda: plain.run(ctx, counter), lambda: limited.run(ctx, counter), rounds=9
    )
    ratio = t_limited / t_plain
    print(
        f"\n{name}: built-ins {t_plain * 1000:.1f} ms, with --timeout {t_limited * 1000:.1f} ms "
        f"(ratio {ratio:.2f})"
    )
    assert ratio < 1.25
