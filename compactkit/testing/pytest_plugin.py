"""pytest plugin for strategy authors: fixtures that check the compactkit contract.

Loaded through the `pytest11` entry point when compactkit is installed::

    def test_my_strategy_conforms(compactkit_check):
        compactkit_check(MyStrategy(), compactkit.load_one("session.jsonl"))
"""

from __future__ import annotations

from collections.abc import Callable

import pytest

from ..context import AgentContext
from ..strategy import Strategy
from . import check_strategy


@pytest.fixture
def compactkit_check() -> Callable[..., None]:
    """A function `(strategy, ctx, recoverable=True)` that fails the test on any violation."""

    def check(strategy: Strategy, ctx: AgentContext, *, recoverable: bool = True) -> None:
        problems = check_strategy(strategy, ctx, recoverable=recoverable)
        if problems:
            pytest.fail(f"{strategy.label} breaks the contract: " + "; ".join(problems))

    return check
