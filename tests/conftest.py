"""Shared fixtures: the bundled sample sessions and, where present, the full shared corpus."""

from __future__ import annotations

import os
import signal
from collections.abc import Sequence
from functools import lru_cache
from pathlib import Path

import pytest

import compactkit
from compactkit import AgentContext
from compactkit.registry import Registry, make_registry
from compactkit.strategy import Strategy
from compactkit.testing import check_strategy
from compactkit.tokens import TiktokenTokenizer

ROOT = Path(__file__).resolve().parent.parent


def pytest_configure(config: pytest.Config) -> None:
    # pytest-xdist workers ignore SIGINT and a program started from one inherits that: the tests
    # that send a real Ctrl-C to a program they start need the default back
    if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)


SAMPLES = ROOT / "examples" / "sessions"


def corpus_dir() -> Path | None:
    """`COMPACTKIT_CORPUS`, else `../shared/corpus` beside the checkout; None when neither exists."""
    env = os.environ.get("COMPACTKIT_CORPUS")
    candidates = [Path(env)] if env else []
    candidates.append(ROOT.parent / "shared" / "corpus")
    for candidate in candidates:
        if candidate.is_dir():
            return candidate
    return None


def sample_files() -> list[Path]:
    return sorted(p for p in SAMPLES.iterdir() if p.is_file() and p.name != "NOTICE")


def corpus_files() -> list[Path]:
    """Every session file of the full corpus (or the bundled samples when no corpus is present)."""
    root = corpus_dir()
    if root is None:
        return sample_files()
    return sorted(
        p for p in root.rglob("*") if p.is_file() and p.suffix in {".json", ".jsonl", ".traj"}
    )


@lru_cache(maxsize=1)
def every_conversation() -> list[tuple[str, AgentContext]]:
    """(name, context) for every conversation of the bundled samples and the full corpus."""
    out: list[tuple[str, AgentContext]] = []
    for path in dict.fromkeys([*sample_files(), *corpus_files()]):
        for n, ctx in enumerate(compactkit.load(path)):
            out.append((f"{path.parent.name}/{path.name}#{n}", ctx))
    return out


def contract_failures(strategy: Strategy) -> list[str]:
    """Every contract violation of `strategy` over every sample and corpus conversation (three runs
    each: over 180 conversations a coin-flip non-determinism still cannot hide)."""
    return [
        f"{name}: {problem}"
        for name, ctx in every_conversation()
        for problem in check_strategy(strategy, ctx, runs=3)
    ]


CORPUS = corpus_dir()
IN_CI = os.environ.get("CI") == "true"


def pytest_sessionstart(session: pytest.Session) -> None:
    if IN_CI and CORPUS is None:
        raise pytest.UsageError(
            "CI=true but no corpus found: set COMPACTKIT_CORPUS or place ../shared/corpus"
        )


@pytest.fixture(scope="session")
def registry() -> Registry:
    return make_registry(entry_points=False)


@pytest.fixture(scope="session")
def samples() -> Path:
    return SAMPLES


def sample(name_part: str) -> Path:
    """The bundled sample whose file name contains `name_part`."""
    matches = [p for p in sample_files() if name_part in p.name]
    assert len(matches) == 1, f"{name_part!r} matches {matches}"
    return matches[0]


def corpus_file(name_part: str) -> Path:
    """The full-corpus file whose name contains `name_part` (its bundled copy when no corpus)."""
    matches = [p for p in corpus_files() if name_part in p.name]
    if not matches:
        pytest.skip(f"{name_part} is only in the full corpus, which is not present here")
    assert len(matches) == 1, f"{name_part!r} matches {matches}"
    return matches[0]


class RecordingTokenizer:
    """o200k_base that records every text it is asked to tokenize (to prove what was recounted)."""

    name = "recording"
    description = "test double"

    def __init__(self) -> None:
        self.inner = TiktokenTokenizer("o200k_base")
        self.seen: list[str] = []

    def count(self, text: str) -> int:
        self.seen.append(text)
        return self.inner.count(text)

    def count_many(self, texts: Sequence[str]) -> list[int]:
        self.seen.extend(texts)
        return self.inner.count_many(texts)
