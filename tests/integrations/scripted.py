"""The scripted session every framework test and benchmark runs: an agent reads twelve modules of
the repository one tool call at a time, then answers; the budget makes it compact."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Generic, TypeVar

import compactkit

from ..conftest import ROOT

FILES = sorted((ROOT / "compactkit").glob("*.py"), key=lambda p: p.name)[:12]
SYSTEM = "You are a code reviewer."
TASK = "Where does compactkit write files? Read the modules."
ANSWER = "The atomic write is in io.py; nothing else touches the disk."


def read_file(path: str) -> str:
    """Read a file of the repository."""
    return Path(path).read_text(encoding="utf-8")


def budget() -> tuple[int, int]:
    """(trigger, target): a third and a sixth of what the files hold."""
    total = sum(compactkit.count_tokens(read_file(str(p))) for p in FILES)
    return total // 3, total // 6


def assert_bounded(sizes: list[int], plain_sizes: list[int], trigger: int) -> None:
    """Without compaction the prompt keeps growing; with it, it never goes far past the trigger
    (by one file read at most)."""
    assert max(plain_sizes) > 2 * trigger
    biggest = max(compactkit.count_tokens(read_file(str(p))) for p in FILES)
    assert max(sizes) <= trigger + biggest + 200


def assert_nothing_lost(whole: compactkit.AgentContext) -> None:
    """Every file read is in the expanded context."""
    texts = "\n".join(b.text for m in whole.messages for b in m.tool_results)
    assert all(read_file(str(p)) in texts for p in FILES)


R = TypeVar("R")
C = TypeVar("C")


@dataclass
class Runs(Generic[R, C]):
    """The scripted session run without and with an adapter: results, what the model was sent at
    each call, and the adapter's events."""

    trigger: int
    adapter: Any
    plain: R
    plain_calls: list[C]
    result: R
    calls: list[C]
    events: list[Any]


def run_both(run: Callable[[list[Any]], tuple[R, list[C]]], make: Callable[..., Any]) -> Runs[R, C]:
    """`run([])`, then `run([adapter])` with `make(trigger=..., target=...)` at `budget()`."""
    trigger, target = budget()
    plain, plain_calls = run([])
    adapter = make(trigger=trigger, target=target)
    events: list[Any] = []
    adapter.subscribe(events.append)
    result, calls = run([adapter])
    assert len(calls) == len(plain_calls) == len(FILES) + 1
    return Runs(trigger, adapter, plain, plain_calls, result, calls, events)
