"""What a strategy time limit costs: a plugin strategy in its worker process against the same
strategy in-process, over the whole corpus bench (target <= 1.3x) and per call on the largest
session, and built-in strategies with and without a limit (they always run in-process)."""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from typing import Any

from compactkit.bench.jobs import Job, JobResult, run_job
from compactkit.context import AgentContext, Message, TextBlock
from compactkit.pipeline import PLUGIN_TIMEOUT, Pipeline, get_strategy
from compactkit.registry import get_counter, make_registry
from compactkit.spec import parse_pipeline
from compactkit.strategy import Strategy
from compactkit.tokens import DEFAULT_TOKENIZER
from tests.conftest import corpus_files

from .conftest import largest_context

MAX_RATIO = 1.3
"""The corpus bench of a plugin under the default time limit, at most this times the same bench
with `--timeout 0`."""


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


def _rows(result: JobResult) -> list[dict[str, Any]]:
    """A job's figures without its timings."""
    assert result.error is None and not result.failures, (result.error, result.failures)
    return [{**r.as_json(), "seconds": 0} for r in result.results]


def test_a_plugin_under_the_default_time_limit_over_the_corpus_bench(benchmark: Any) -> None:
    """`bench CORPUS -s cap-output` (the bundled plugin, replay mode as the command line runs it)
    with the default `--timeout` against `--timeout 0`: each session file is timed both ways in
    turn, the order alternating, so that machine load falls on both; the reports are the same."""
    registry = make_registry()
    assert "cap-output" in registry.strategies, "pip install -e plugins/compactkit-cap-output"
    spec = parse_pipeline("cap-output", None)
    paths = [str(p) for p in corpus_files()]
    seconds = {0.0: 0.0, PLUGIN_TIMEOUT: 0.0}
    rows: dict[float, list[dict[str, Any]]] = {0.0: [], PLUGIN_TIMEOUT: []}

    def corpus() -> None:
        for n, path in enumerate(paths):
            for timeout in (0.0, PLUGIN_TIMEOUT)[:: 1 if n % 2 else -1]:
                profiles = ["anthropic", "openai"]
                job = Job(
                    path, [spec], "replay", profiles, 30_000, DEFAULT_TOKENIZER, timeout or None
                )
                start = time.perf_counter()
                result = run_job(job, registry)
                seconds[timeout] += time.perf_counter() - start
                rows[timeout].extend(_rows(result))

    benchmark.pedantic(corpus, rounds=1)
    ratio = seconds[PLUGIN_TIMEOUT] / seconds[0.0]
    figures = {
        "session_files": len(paths),
        "in_process_s": round(seconds[0.0], 2),
        "isolated_s": round(seconds[PLUGIN_TIMEOUT], 2),
        "ratio": round(ratio, 3),
    }
    benchmark.extra_info.update(figures)
    print(f"\ncap-output over the corpus bench, --timeout {PLUGIN_TIMEOUT:g} vs 0: {figures}")
    assert rows[PLUGIN_TIMEOUT] == rows[0.0], "the worker's results differ from in-process"
    assert ratio <= MAX_RATIO, f"a plugin under --timeout takes {ratio:.2f}x its in-process time"


def test_a_plugin_in_its_worker_costs_what_crosses_and_what_it_changed() -> None:
    name, ctx = largest_context()
    counter = get_counter("o200k_base")
    counter.context(ctx)
    inline = Pipeline([Note()])
    isolated = Pipeline([Note()], timeout=60)
    t_in, t_worker = _alternate(
        lambda: inline.run(ctx, counter), lambda: isolated.run(ctx, counter), rounds=15
    )
    print(
        f"\n{name}: {len(ctx.messages)} messages; plugin step in-process {t_in * 1000:.1f} ms, "
        f"in its worker {t_worker * 1000:.1f} ms ({(t_worker - t_in) * 1000:+.1f} ms per call)"
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
