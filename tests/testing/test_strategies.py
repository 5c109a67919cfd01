"""The conformance kit a strategy author runs: what it catches and how it says where."""

from __future__ import annotations

import random

import compactkit
from compactkit import AgentContext, Strategy, TextBlock
from compactkit.testing import check_strategy

from ..conftest import sample

CTX = compactkit.load_one(sample("test-repo-i1"))


class Coin(Strategy):
    """Rewrites the task on half of its runs: the kind of bug a set iteration order causes."""

    name = "coin"

    def __init__(self, rng: random.Random) -> None:
        super().__init__()
        self.rng = rng

    def compact(self, ctx: AgentContext) -> AgentContext:
        if self.rng.random() < 0.5:
            return ctx
        i = ctx.first_user_index
        assert i is not None
        messages = list(ctx.messages)
        messages[i] = messages[i].model_copy(update={"content": (TextBlock(text="heads"),)})
        return ctx.with_messages(messages)


def test_a_strategy_that_differs_on_half_its_runs_is_caught_every_time() -> None:
    task = CTX.first_user_index
    for seed in range(50):
        problems = check_strategy(Coin(random.Random(seed)), CTX, recoverable=False)
        nondeterministic = [p for p in problems if p.startswith("not deterministic")]
        assert nondeterministic, f"seed {seed} went unnoticed"
        assert f"messages[{task}].content[0].text" in nondeterministic[0]


def test_a_deterministic_strategy_passes() -> None:
    assert check_strategy(compactkit.SlidingWindow(max_tokens=6000), CTX) == []
