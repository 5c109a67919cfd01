"""cap-output on real sessions, checked with compactkit's conformance kit."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from compactkit_cap_output import CapOutput

import compactkit
from compactkit import build_pipeline, expand

SESSIONS = Path(__file__).resolve().parents[3] / "examples" / "sessions"


def test_registered_through_the_entry_point() -> None:
    registry = compactkit.make_registry()
    assert registry.strategies.owner("cap-output") == "cap_output"
    assert build_pipeline(["cap-output:max_tokens=500"], registry=registry).strategies[0].name == (
        "cap-output"
    )


def test_conforms_on_every_bundled_session(compactkit_check: Any) -> None:
    checked = 0
    for path in sorted(SESSIONS.iterdir()):
        if path.name == "NOTICE":
            continue
        for ctx in compactkit.load(path):
            compactkit_check(CapOutput(max_tokens=300, head_lines=5, tail_lines=5), ctx)
            checked += 1
    assert checked >= 10


def test_caps_long_outputs_and_expand_restores_them() -> None:
    ctx = compactkit.load_one(SESSIONS / "gemini3pro_sphinx-doc__sphinx-9229.traj.json")
    out = CapOutput(max_tokens=500, head_lines=10, tail_lines=10).compact(ctx)
    capped = [
        p for m in out.messages for r in m.tool_results for p in r.content if p.type == "elided"
    ]
    assert capped
    assert all("lines elided by cap-output" in p.text for p in capped)
    assert compactkit.count_tokens(out) < compactkit.count_tokens(ctx)
    assert expand(out) == ctx
