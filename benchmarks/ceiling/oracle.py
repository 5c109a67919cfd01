"""Oracle arrival strategies that bound what any arrival compressor can save (not products).

`oracle-outputs` empties every tool output of 400 characters or more, except the text of a file
the agent read, leaving only the fold note; `oracle-all-outputs` empties file reads too. No
compressor that keeps errors, paths and the lines the agent edits by can save more than the first;
`benchmarks/arrival_ceiling.py` runs them beside the default.
"""

from __future__ import annotations

from typing import Any

import compactkit
from compactkit import AgentContext, StrategyOptions
from compactkit.strategies.fold_common import Fold, FoldOptions, Output, fold_new_results

_EVERY = FoldOptions(min_chars=400, min_saving=0.0)


def _nothing(output: Output) -> Fold:
    return Fold("", "the whole output (an oracle)")


@compactkit.strategy("oracle-outputs", stage="arrival")
def oracle_outputs(ctx: AgentContext, options: StrategyOptions) -> AgentContext:
    """Every tool output of 400+ characters emptied on arrival, file reads left whole."""
    return fold_new_results(ctx, _EVERY, "oracle-outputs", _nothing, reads=False)


@compactkit.strategy("oracle-all-outputs", stage="arrival")
def oracle_all_outputs(ctx: AgentContext, options: StrategyOptions) -> AgentContext:
    """Every tool output of 400+ characters emptied on arrival, file reads too."""
    return fold_new_results(ctx, _EVERY, "oracle-all-outputs", _nothing, reads=True)


@compactkit.hookimpl
def register_strategies(register: Any) -> None:
    register(oracle_outputs)
    register(oracle_all_outputs)
