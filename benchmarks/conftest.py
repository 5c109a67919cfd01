"""Benchmarks run on the full corpus when present (COMPACTKIT_CORPUS or ../shared/corpus), else on
the bundled sample sessions."""

from __future__ import annotations

import sys
from functools import lru_cache
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import compactkit  # noqa: E402
from compactkit import AgentContext  # noqa: E402
from tests.conftest import corpus_files  # noqa: E402


@lru_cache(maxsize=1)
def corpus_contexts() -> list[tuple[str, AgentContext]]:
    out = []
    for path in corpus_files():
        for n, ctx in enumerate(compactkit.load(path)):
            out.append((f"{path.name}#{n}", ctx))
    return out


def largest_context() -> tuple[str, AgentContext]:
    return max(corpus_contexts(), key=lambda item: compactkit.count_tokens(item[1]))
