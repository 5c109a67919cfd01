"""sliding-window on real sessions: fits the budget, keeps pairs whole, stays recoverable."""

from __future__ import annotations

import pytest
from hypothesis import given, settings

import compactkit
from compactkit import AgentContext
from compactkit.recovery import expand
from compactkit.strategies.sliding_window import SlidingWindow
from compactkit.testing import check_strategy
from compactkit.testing.generate import contexts
from compactkit.validate import validate

from ..conftest import every_conversation as corpus_contexts
from ..conftest import sample


def test_every_corpus_conversation_keeps_the_contract() -> None:
    failures = []
    for name, ctx in corpus_contexts():
        tokens = compactkit.count_tokens(ctx)
        for budget in (tokens // 2, 4000):
            problems = check_strategy(SlidingWindow(max_tokens=max(budget, 1)), ctx)
            failures.extend(f"{name} @ {budget}: {p}" for p in problems)
    assert failures == []


def test_output_fits_the_budget_whenever_the_newest_turn_does() -> None:
    checked = 0
    for name, ctx in corpus_contexts():
        tokens = compactkit.count_tokens(ctx)
        budget = tokens // 2
        out = SlidingWindow(max_tokens=budget).compact(ctx)
        after = compactkit.count_tokens(out)
        if after > budget:
            # only allowed when the head plus the newest turn alone exceed it
            marker = out.messages[len(out.messages) - 1]
            assert marker is ctx.messages[-1], name
            continue
        checked += 1
        assert after <= budget, name
        assert out.messages[-1] is ctx.messages[-1], name  # the newest turn stays
    assert checked > 0


def test_dropped_turns_become_one_recoverable_marker() -> None:
    ctx = compactkit.load_one(sample("sphinx-doc"))
    out = SlidingWindow(max_tokens=20_000).compact(ctx)
    markers = [m for m in out.messages if m.content and m.content[0].type == "omitted"]
    assert len(markers) == 1
    omitted = markers[0].content[0]
    assert omitted.type == "omitted"
    assert omitted.messages == len(ctx.messages) - len(out.messages) + 1
    assert "20,000" in omitted.label
    assert out.messages[: ctx.first_user_index + 1] == ctx.messages[: ctx.first_user_index + 1]
    assert expand(out) == ctx
    assert compactkit.count_tokens(out) <= 20_000


def test_a_context_within_budget_is_returned_as_is() -> None:
    ctx = compactkit.load_one(sample("test-repo-i1"))
    strat = SlidingWindow(max_tokens=10**6)
    assert strat.compact(ctx) is ctx
    assert SlidingWindow().compact(ctx) is ctx  # no budget, no change


def test_keep_first_keeps_turns_after_the_task() -> None:
    ctx = compactkit.load_one(sample("sphinx-doc"))
    out = SlidingWindow(max_tokens=20_000, keep_first=2).compact(ctx)
    task = ctx.first_user_index
    assert task is not None
    # the task plus the first two units (assistant call + its result each) survive
    assert out.messages[: task + 5] == ctx.messages[: task + 5]
    assert validate(out, ctx) == []


@settings(max_examples=60, deadline=None)
@given(ctx=contexts())
def test_generated_contexts_keep_the_contract(ctx: AgentContext) -> None:
    budget = max(compactkit.count_tokens(ctx) // 3, 50)
    assert check_strategy(SlidingWindow(max_tokens=budget), ctx) == []


@pytest.mark.parametrize("budget", [1, 100])
def test_impossible_budgets_terminate_and_stay_valid(budget: int) -> None:
    ctx = compactkit.load_one(sample("sphinx-doc"))
    out = SlidingWindow(max_tokens=budget).compact(ctx)
    assert validate(out, ctx) == []
    assert SlidingWindow(max_tokens=budget).compact(out) == out
