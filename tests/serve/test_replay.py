"""The corpus read replay (benchmarks/serve_replay.py) on a couple of real sessions: the proxy in
front of the filesystem server serves fewer tokens than the server alone, every marker names
content the model was sent in full, and the savings match etag-collapse applied afterwards."""

from __future__ import annotations

import pytest

from benchmarks.serve_replay import run, summary

from ..conftest import every_conversation
from .servers import node

pytest.importorskip("mcp", reason="the mcp extra is not installed: pip install -e '.[test]'")

SESSIONS = (
    "sessions/gemini3pro_sphinx-doc__sphinx-9229.traj.json#0",  # bundled
    "openhands_events/multi_swe_bench_example_output.jsonl#0",  # corpus
)


@pytest.mark.skipif(node() is None, reason="node is not installed on this machine")
def test_replay_serves_fewer_tokens_and_every_marker_is_held() -> None:
    chosen = [(name, ctx) for name, ctx in every_conversation() if name in SESSIONS]
    assert chosen, "the bundled sample session is missing"
    rows = run(chosen)
    total = summary(rows)
    assert total["reads"] > 10 and total["markers"] >= 1
    assert total["bad_markers"] == 0
    assert total["proxy_tokens"] < total["direct_tokens"]
    for row in rows:
        assert row.proxy_tokens <= row.direct_tokens
        # close to what etag-collapse leaves of the same reads afterwards (it also collapses the
        # same content reached through another path or command, which a per-path key does not)
        assert abs(row.proxy_tokens - row.collapse_tokens) <= 0.05 * row.direct_tokens
