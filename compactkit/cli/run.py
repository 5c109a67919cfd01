"""`compactkit run`: compact a session with a pipeline of strategies."""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Sequence
from functools import partial
from typing import Any

import click

from ..errors import EXIT_BUDGET, ConfigError
from ..formats.loading import SessionAddress
from ..recovery import sidecar_path
from ._app import State, command
from ._input import load_single
from ._options import (
    SESSION,
    SPEC_HELP,
    STDIO,
    check_one_stdout,
    format_option,
    json_file_option,
    output_option,
    pin_option,
    pipeline_option,
    stash_option,
    timeout_option,
    to_option,
    tokenizer_option,
)
from ._output import Outputs, say, written


@command(
    exit_codes="0 ok; 1 the output is still over --budget (it is written all the same); "
    "2 bad input or a bad strategy spec; 3 a plugin failed or a strategy broke its contract"
)
@click.argument("file", type=SESSION)
@pipeline_option(
    help="The pipeline to run; repeat to add steps (order is pipeline order). " + SPEC_HELP
)
@click.option(
    "--budget",
    type=click.IntRange(min=1),
    default=None,
    help="Token count the output must fit; fills each strategy's budget option (the default "
    "pipeline keeps the newest turns verbatim up to it: the output ends near the budget).",
)
@click.option(
    "--target",
    type=click.IntRange(min=1),
    default=None,
    help="Compact toward this many tokens instead, below --budget (which the output must "
    "still fit).",
)
@to_option()
@output_option
@stash_option(help="Write what was removed to this stash file instead of OUTPUT.recovery.jsonl.")
@click.option(
    "--embed-recovery",
    is_flag=True,
    help="Keep what was removed inside the output context instead of OUTPUT.recovery.jsonl.",
)
@click.option("--explain", is_flag=True, help="Say which messages each strategy changed and why.")
@json_file_option(
    "--report-json", help="Write the run report (compactkit.run/1) to FILE ('-': stdout)."
)
@pin_option
@format_option
@tokenizer_option
@timeout_option
@click.pass_obj
def run(
    state: State,
    file: SessionAddress,
    specs: Sequence[str],
    budget: int | None,
    target: int | None,
    to: str,
    output: str | None,
    stash: str | None,
    embed_recovery: bool,
    explain: bool,
    json_out: str | None,
    format_: str | None,
    pins: tuple[str, ...],
    tokenizer: str,
    timeout: float,
) -> None:
    """Compact a session (FILE, FILE#N, or - for stdin) with a pipeline of strategies.

    With no -s, the default pipeline runs: etag-collapse, and under --budget also llm-summary
    (extractive, offline) and sliding-window: old turns become one summary and the newest are
    kept verbatim as far as the budget allows, so a session larger than N ends between about
    0.7 N and N (--target asks for less). Without -o the context goes to stdout and the
    summary to stderr. What compaction removed goes to OUTPUT.recovery.jsonl beside the
    output (a content-addressed store that expand finds by itself), to --stash PATH, or with
    --embed-recovery (and on stdout) into the context.

    \b
    Example:
      compactkit run session.jsonl -s observation-mask:keep_last=3 -s sliding-window \\
          --budget 30000 -o small.json --explain
    """
    from ..observers import ProgressDisplay, StatsRecorder
    from ..pipeline import build_pipeline
    from ..spec import one_pipeline

    check_one_stdout(output=output or STDIO, stash=stash, json=json_out)
    if embed_recovery and stash:
        raise ConfigError("--embed-recovery and --stash are two places for one store: give one")
    if target is not None and budget is not None and target > budget:
        raise ConfigError(f"--target {target:,} is above --budget {budget:,}: give a lower target")
    sidecar = None if embed_recovery or stash or output in (None, STDIO) else sidecar_path(output)
    with Outputs([file], output=output, stash=stash, json=json_out, sidecar=sidecar) as outputs:
        ctx = load_single(state, file, format_, restorable=True)
        if not state.registry.formats.get(to).can_write:
            raise ConfigError(f"format {to!r} cannot be written")
        aim = target if target is not None else budget
        spec = one_pipeline(specs or ["default"], budget=aim, trigger=None)
        pipeline = build_pipeline(
            spec, registry=state.registry, tokenizer=tokenizer, timeout=timeout, pins=pins
        )
        stats = StatsRecorder()
        pipeline.subscribe(stats)
        pipeline.subscribe(ProgressDisplay())
        with _spilling(stash or sidecar, pipeline) as spill:
            result = pipeline.run(ctx, state.counter(tokenizer))
            del ctx  # the input: what the output and its store need is in the result
            context = _stashed(result.context, stash, sidecar, to, outputs, spill)
        outputs.emit(written(context, to, state.registry), output, verbatim=True)
        limit, whose = _limit(budget if budget is not None else target, pipeline)
        over = result.tokens_after - limit if limit is not None else 0
        if json_out:
            report = stats.report()
            report.update({"input": file.text, "budget": budget, "output": output, "format": to})
            report["over_budget"] = max(over, 0)
            outputs.emit(report, json_out)
    if sidecar and not result.context.recovery:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(sidecar)  # an older run's store: this output has nothing recoverable
    to_stderr = output in (None, STDIO) or json_out == STDIO
    print_summary(stats, result.tokens_before, result.tokens_after, explain, to_stderr)
    say_extractive(pipeline, to_stderr)
    if limit is not None and over > 0:
        say(
            f"compactkit: over budget: {result.tokens_after:,} tokens, "
            f"{over:,} over {whose} of {limit:,}",
            err=True,
        )
        sys.exit(EXIT_BUDGET)


def say_extractive(pipeline: Any, to_stderr: bool) -> None:
    """Name the strategies whose summaries the offline extractive backend wrote."""
    names = [
        s.name for s in pipeline.strategies if getattr(s.options, "backend", "") == "extractive"
    ]
    if names:
        say(
            f"  ({', '.join(dict.fromkeys(names))}: summaries by the offline extractive backend, "
            "no model called; backend=openai or backend=anthropic asks a model)",
            err=to_stderr,
        )


def _spilling(store: str | None, pipeline: Any) -> contextlib.AbstractContextManager[Any]:
    """While the store is written to a file (`store`) and every strategy is compactkit's own,
    the parts of huge removed windows wait in a temporary file in the store's folder instead of
    in memory (`compactkit.recovery.spilling`); the store written is the same."""
    from ..recovery import spilling

    if store is None or not pipeline.builtin:
        return contextlib.nullcontext()
    return spilling(None if store == STDIO else os.path.dirname(os.path.abspath(store)))


def _stashed(
    ctx: Any, stash: str | None, sidecar: str | None, to: str, outputs: Outputs, spill: Any = None
) -> Any:
    """The context to write: its recovery store (with the parts `spill` holds) moved to `stash`
    or to the `sidecar` store (streamed, staged with the output), else kept (with a warning when
    the target format cannot carry it)."""
    from ..recovery import split_stash, write_sidecar, write_stash

    if stash or (sidecar and ctx.recovery):
        out, entries = split_stash(ctx)
        if spill is not None:
            entries = spill.stored(entries)
        if stash:
            outputs.stream(stash, partial(write_stash, entries))
        elif sidecar:
            outputs.stream(sidecar, partial(write_sidecar, entries))
        return out
    if ctx.recovery and to != "compactkit":
        say(
            f"compactkit: warning: {to} cannot carry the recovery store "
            f"({len(ctx.recovery)} entries); pass --stash PATH to keep what was removed",
            err=True,
        )
    return ctx


def print_summary(stats: Any, before: int, after: int, explain: bool, to_stderr: bool) -> None:
    """Tokens before and after, one line per strategy, and under `explain` what each changed."""
    saved = before - after
    share = f" ({saved / before:.1%} saved)" if before else ""
    say(f"tokens: {before:,} -> {after:,}{share}", err=to_stderr)
    for step in stats.applied:
        note = f"  [{step.note}]" if step.note else ""
        say(
            f"  {step.strategy:<32} {step.tokens_before:>10,} -> {step.tokens_after:>10,}"
            f"  {len(step.changes):>4} change(s){note}",
            err=to_stderr,
        )
        if explain:
            for action, first, last, reason in _ranges(step.changes):
                where = f"message {first}" if first == last else f"messages {first}-{last}"
                say(f"      {action:<8} {where}: {reason}", err=to_stderr)


def _ranges(changes: Sequence[Any]) -> list[tuple[str, int, int, str]]:
    """Consecutive changes with the same action and reason, folded into index ranges."""
    out: list[tuple[str, int, int, str]] = []
    for c in changes:
        if (
            out
            and out[-1][0] == c.action
            and out[-1][3] == c.reason
            and out[-1][2] == c.message - 1
        ):
            out[-1] = (c.action, out[-1][1], c.message, c.reason)
        else:
            out.append((c.action, c.message, c.message, c.reason))
    return out


def _limit(budget: int | None, pipeline: Any) -> tuple[int | None, str]:
    """The budget the output must fit, and whose it is: `--budget`, and every budget option a
    strategy was given (`sliding-window:max_tokens=N`); the smallest holds, one rule for both."""
    limits = [(budget, "the budget")] if budget is not None else []
    for strat in pipeline.strategies:
        value = getattr(strat.options, strat.budget_option or "", None)
        if isinstance(value, int) and not isinstance(value, bool):
            limits.append((value, f"{strat.name}'s {strat.budget_option}"))
    if not limits:
        return None, ""
    return min(limits, key=lambda item: item[0])
