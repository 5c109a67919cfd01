"""mcp-proxy's per-call overhead: every corpus read replayed through the proxy and directly against
the reference filesystem server, in one run (median and p99 per call, and their ratios; target
<= 1.1x median), plus the in-process cost of one `ServeState.serve`."""

from __future__ import annotations

import json
import shutil
from typing import Any

import pytest

from compactkit.serve import ServeState, serve_key

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


def test_serve_state_cost_per_call(benchmark: Any) -> None:
    payload = "def handler(event):\n    return event\n" * 200
    key, path = serve_key("read_text_file", {"path": "/src/app.py"})
    state = ServeState().serve(key, payload, path=path).state
    served = benchmark(state.serve, key, payload, path=path)
    assert not served.full
