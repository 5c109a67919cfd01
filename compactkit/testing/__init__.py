"""The conformance kit: check that a strategy keeps compactkit's contract.

Strategy authors call `check_strategy(strategy, ctx)` (or `assert_conforms`) on real sessions and on
generated ones (`compactkit.testing.generate.contexts()`, a hypothesis strategy). The pytest plugin
(`compactkit.testing.pytest_plugin`, loaded automatically when compactkit is installed) offers the same
as fixtures.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping

from ..arrival import grown
from ..context import AgentContext
from ..pipeline import builtin_strategies
from ..recovery import expand
from ..strategy import ARRIVAL, Strategy
from ..validate import validate, validate_arrival
from .formats import check_format, first_difference, pairing_problems

__all__ = [
    "RUNS",
    "assert_conforms",
    "check_format",
    "check_strategy",
    "first_difference",
    "pairing_problems",
]


RUNS = 20
"""Runs of a strategy per check: a strategy whose output differs on half of its runs goes unnoticed
with probability 2 * 0.5 ** (RUNS - 1), about one in half a million."""


def _differs(a: AgentContext, b: AgentContext) -> str:
    return first_difference(a.to_native(), b.to_native()) or "the value"


def check_strategy(
    strategy: Strategy,
    ctx: AgentContext,
    *,
    recoverable: bool = True,
    stash: Mapping[str, str] | None = None,
    runs: int = RUNS,
) -> list[str]:
    """Every way `strategy` breaks the contract on `ctx` (empty when it keeps it):

    input unchanged; deterministic over `runs` runs on fresh copies of the input; idempotent;
    validator clean; and (when `recoverable`) `expand(compact(ctx)) == expand(ctx)`, which for a
    session as loaded (a fixed point of `expand`) is `expand(compact(ctx)) == ctx`. Each problem
    names the first place (message index and field) where two values differ.

    An arrival strategy (`stage == "arrival"`) is run as a pipeline runs it: on each message of
    `ctx` as it arrives, the context before it being its own earlier outputs. Each step must
    change only the new message, be idempotent (`validate_arrival`) and deterministic; the
    context it builds must then be valid and (when `recoverable`) expand back to `ctx`.
    """
    if strategy.stage == ARRIVAL:
        return _check_arrival(strategy, ctx, recoverable, stash)
    problems: list[str] = []
    before = ctx.to_json()
    first = strategy.compact(ctx)
    if ctx.to_json() != before:
        problems.append(
            f"mutated its input at {_differs(AgentContext.from_native(json.loads(before)), ctx)}"
        )
    native = ctx.to_native()
    for run in range(2, runs + 1):
        other = strategy.compact(AgentContext.from_native(native))
        if other != first:
            problems.append(
                f"not deterministic: run {run} differs from run 1 at {_differs(first, other)}"
            )
            break
    again = strategy.compact(first)
    if again != first:
        problems.append(
            f"not idempotent: compact(compact(x)) != compact(x) at {_differs(first, again)}"
        )
    # pins are checked for every strategy but compactkit's own reference policies of other tools
    pins = strategy.keeps_pins or type(strategy) not in builtin_strategies()
    problems.extend(f"invalid output: {v}" for v in validate(first, ctx, stash=stash, pins=pins))
    if recoverable:
        store = {**(stash or {})}
        expanded, original = expand(first, store), expand(ctx, store)
        if expanded != original:
            problems.append(
                "not recoverable: expand(compact(x)) != expand(x) at "
                f"{_differs(original, expanded)}"
            )
    return problems


def _check_arrival(
    strategy: Strategy, ctx: AgentContext, recoverable: bool, stash: Mapping[str, str] | None
) -> list[str]:
    problems: list[str] = []
    before = ctx.to_json()
    history = ctx.replace(messages=())
    for k, msg in enumerate(ctx.messages):
        given = grown(history, msg)
        out = strategy.compact(given)
        again = strategy.compact(out)
        problems.extend(f"arrival of message {k}: {v}" for v in validate_arrival(out, given, again))
        if out is not given:
            other = strategy.compact(AgentContext.from_native(given.to_native()))
            if other != out:
                problems.append(
                    f"not deterministic: arrival of message {k} differs at {_differs(out, other)}"
                )
        if problems:
            return problems
        history = out
    if ctx.to_json() != before:
        problems.append(
            f"mutated its input at {_differs(AgentContext.from_native(json.loads(before)), ctx)}"
        )
    problems.extend(f"invalid output: {v}" for v in validate(history, ctx, stash=stash))
    if recoverable:
        store = {**(stash or {})}
        expanded, original = expand(history, store), expand(ctx, store)
        if expanded != original:
            problems.append(
                f"not recoverable: expand(arrived) != expand(x) at {_differs(original, expanded)}"
            )
    return problems


def assert_conforms(
    strategy: Strategy,
    contexts: Iterable[AgentContext],
    *,
    recoverable: bool = True,
    runs: int = RUNS,
) -> None:
    """Raise AssertionError listing every contract violation over `contexts`."""
    failures = []
    for n, ctx in enumerate(contexts):
        for problem in check_strategy(strategy, ctx, recoverable=recoverable, runs=runs):
            failures.append(f"context {n}: {problem}")
    if failures:
        raise AssertionError(f"{strategy.label} breaks the contract:\n" + "\n".join(failures))
