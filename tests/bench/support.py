"""What bench and check tests share: reports compared without their timings, and plugins folders
that fail on chosen sessions.

`failing_plugins`: the strategy `fails-on:word=W` raises on every session whose task (first user
message) contains W, and on every session when W is empty; elsewhere it returns the context
unchanged. `crashing_plugins`: a retention scorer that ends the process it runs in (as a crashing
extension module would) on the sessions whose task contains "game".
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

FAILS_ON = '''
from compactkit import AgentContext, Strategy, StrategyOptions, hookimpl


class WordOptions(StrategyOptions):
    word: str = ""


class FailsOn(Strategy):
    """Raises on the sessions whose task holds `word`."""

    name = "fails-on"
    description = "raises on chosen sessions"
    Options = WordOptions

    def compact(self, ctx: AgentContext) -> AgentContext:
        if self.options.word in ctx.task:
            raise RuntimeError(f"boom on {self.options.word!r}")
        return ctx


@hookimpl
def register_strategies(register):
    register(FailsOn)
'''

CRASHES_ON = """
import os

from compactkit import hookimpl


class CrashesOn:
    name = "crashes-on-game"
    description = "ends its process on the sessions whose task holds 'game'"

    def score(self, original, compacted, stash=None):
        if "game" in original.task:
            os._exit(1)
        raise ValueError("not a real scorer")  # reported in the row, never fatal


@hookimpl
def register_scorers(register):
    register(CrashesOn())
"""


def _plugins(folder: Path, name: str, source: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"{name}.py").write_text(source, encoding="utf-8")
    return folder


def failing_plugins(folder: Path) -> Path:
    """`folder/plugins` holding `fails-on` (for `--plugins-dir`)."""
    return _plugins(folder / "plugins", "failing", FAILS_ON)


def crashing_plugins(folder: Path) -> Path:
    """`folder/crashing` holding the scorer that ends its process on one session."""
    return _plugins(folder / "crashing", "crashing", CRASHES_ON)


def without_timings(value: Any) -> Any:
    """A bench or check report without its wall-clock figures (every `seconds` key, a check's
    `seconds` rows)."""
    if isinstance(value, dict):
        return {k: without_timings(v) for k, v in value.items() if k != "seconds"}
    if isinstance(value, list):
        return [
            without_timings(v)
            for v in value
            if not (isinstance(v, dict) and v.get("metric") == "seconds")
        ]
    return value
