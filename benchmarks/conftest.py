"""Benchmarks run on the full corpus when present (COMPACTKIT_CORPUS or ../shared/corpus), else on
the bundled sample sessions."""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import compactkit  # noqa: E402
from compactkit import AgentContext  # noqa: E402
from tests.conftest import corpus_files, every_conversation  # noqa: E402


def corpus_contexts() -> list[tuple[str, AgentContext]]:
    """Every corpus conversation (the bundled samples when no corpus is present)."""
    files = set(corpus_files())
    return [
        (name, ctx)
        for name, ctx in every_conversation()
        if any(name.startswith(f"{p.parent.name}/{p.name}#") for p in files)
    ]


def largest_context() -> tuple[str, AgentContext]:
    return max(corpus_contexts(), key=lambda item: compactkit.count_tokens(item[1]))
