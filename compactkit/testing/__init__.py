"""The conformance kit: check that a strategy keeps compactkit's contract.

Strategy authors call `check_strategy(strategy, ctx)` (or `assert_conforms`) on real sessions and on
generated ones (`compactkit.testing.generate.contexts()`, a hypothesis strategy). The pytest plugin
(`compactkit.testing.pytest_plugin`, loaded automatically when compactkit is installed) offers the same
as fixtures.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from ..context import AgentContext
from ..recovery import expand
from ..strategy import Strategy
from ..validate import validate

__all__ = ["assert_conforms", "check_strategy"]


def check_strategy(
    strategy: Strategy,
    ctx: AgentContext,
    *,
    recoverable: bool = True,
    stash: Mapping[str, str] | None = None,
) -> list[str]:
    """Every way `strategy` breaks the contract on `ctx` (empty when it keeps it):

    input unchanged, deterministic, idempotent, validator clean, and (when `recoverable`)
    `expand(compact(ctx)) == expand(ctx)`.
    """
    problems: list[str] = []
    before = ctx.to_json()
    first = strategy.compact(ctx)
    if ctx.to_json() != before:
        problems.append("mutated its input")
    second = strategy.compact(AgentContext.from_native(ctx.to_native()))
    if first != second:
        problems.append("not deterministic: two runs on the same input differ")
    again = strategy.compact(first)
    if again != first:
        problems.append("not idempotent: compact(compact(x)) != compact(x)")
    problems.extend(f"invalid output: {v}" for v in validate(first, ctx, stash=stash))
    if recoverable:
        store = {**(stash or {})}
        if expand(first, store) != expand(ctx, store):
            problems.append("not recoverable: expand(compact(x)) != expand(x)")
    return problems


def assert_conforms(
    strategy: Strategy, contexts: Iterable[AgentContext], *, recoverable: bool = True
) -> None:
    """Raise AssertionError listing every contract violation over `contexts`."""
    failures = []
    for n, ctx in enumerate(contexts):
        for problem in check_strategy(strategy, ctx, recoverable=recoverable):
            failures.append(f"context {n}: {problem}")
    if failures:
        raise AssertionError(f"{strategy.label} breaks the contract:\n" + "\n".join(failures))
