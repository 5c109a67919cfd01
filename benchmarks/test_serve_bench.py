"""Serving's per-call overhead, every corpus read replayed in one run: through the proxy, through a
do-nothing line relay and directly against the reference filesystem server, and against an MCP
server on the Python SDK with and without `serve_tools` (target: <= 1.05x median in the server);
plus the in-process cost of one `ServeState.serve` and of a store at 100 and 5,000 keys."""

from __future__ import annotations

import json
import shutil
import statistics
import time
from typing import Any

import pytest

from compactkit.serve import MemoryServeStore, ServeState, SqliteServeStore, serve_key

from .conftest import corpus_contexts
from .serve_replay import markdown, run, summary


@pytest.mark.skipif(shutil.which("node") is None, reason="node is not installed on this machine")
def test_proxy_latency_ratio_over_the_corpus_replay(benchmark: Any) -> None:
    rows = benchmark.pedantic(run, args=(corpus_contexts(),), rounds=1, iterations=1)
    total = summary(rows)
    benchmark.extra_info.update(total)
    print("\n" + markdown(rows))
    print(json.dumps(total["latency_ms"], indent=1))
    assert total["bad_markers"] == 0
    assert total["in_server_tokens"] == total["proxy_tokens"]  # the same serving, in the server
    # targets (not met on the loaded 2-core machine; docs/serve.md gives the figures and where the
    # time goes): in the server <= 1.05x the same server, the proxy <= 1.15x the line relay
    latency = total["latency_ms"]
    print(
        f"in-server {latency['in_server_median_ratio']:.2f}x "
        f"(paired {latency['in_server_paired_median_ratio']:.2f}x; target 1.05x), "
        f"proxy {latency['proxy_vs_line_relay_median']:.2f}x the relay "
        f"(paired {latency['proxy_vs_line_relay_paired_median']:.2f}x, "
        f"p99 {latency['proxy_vs_line_relay_p99']:.2f}x; target 1.15x)"
    )


def test_serve_state_cost_per_call(benchmark: Any) -> None:
    payload = "def handler(event):\n    return event\n" * 200
    key, path = serve_key("read_text_file", {"path": "/src/app.py"})
    state = ServeState().serve(key, payload, path=path).state
    served = benchmark(state.serve, key, payload, path=path)
    assert not served.full


@pytest.mark.parametrize("kind", ["memory", "sqlite"])
def test_store_cost_per_call_does_not_grow_with_keys(
    benchmark: Any, kind: str, tmp_path: Any
) -> None:
    """One serve in a session that served 100 keys and in one that served 5,000, same store, same
    run: the per-call cost stays flat (ratio reported, at most 1.5x)."""
    store = MemoryServeStore() if kind == "memory" else SqliteServeStore(tmp_path / "serve.db")
    payload = "def handler(event):\n    return event\n" * 200
    for keys, session in ((100, "small"), (5000, "large")):
        for n in range(keys):
            store.serve(session, f"/src/f{n}.py", payload + str(n))

    def per_call() -> tuple[float, float]:
        """Median seconds of a serve in each session, taken in turn (drift moves both)."""
        times: dict[str, list[float]] = {"small": [], "large": []}
        for n in range(600):
            session = "small" if n % 2 else "large"
            start = time.perf_counter()
            store.serve(session, f"/src/f{n % 50}.py", payload + str(n % 50))
            times[session].append(time.perf_counter() - start)
        return statistics.median(times["small"]), statistics.median(times["large"])

    small, large = benchmark.pedantic(per_call, rounds=1, iterations=1)
    ratio = large / small
    benchmark.extra_info.update(
        {"ms_100_keys": small * 1000, "ms_5000_keys": large * 1000, "ratio": ratio}
    )
    print(
        f"\n{kind}: {small * 1000:.3f} ms at 100 keys, {large * 1000:.3f} ms at 5,000 ({ratio:.2f}x)"
    )
    assert ratio <= 1.5
