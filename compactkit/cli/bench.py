"""`compactkit bench`: measure pipelines on sessions."""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Sequence
from typing import Any

import click

from ..defaults import DEFAULT_TRIGGER
from ..errors import BadInputError
from ._app import State, command
from ._options import (
    SPEC_HELP,
    STDIO,
    check_one_stdout,
    executor_option,
    json_file_option,
    pin_option,
    pipeline_option,
    policy_option,
    pricing_option,
    timeout_option,
    tokenizer_option,
    workers_option,
)
from ._output import Outputs, say


@command(
    exit_codes="0 ok (sessions that do not load are listed); 2 bad option or pipeline, an "
    "unknown tokenizer, or no session loaded; 3 a strategy or plugin failed on a session (its "
    "row is marked failed)"
)
@click.argument("paths", nargs=-1, required=True)
@pipeline_option(
    help="A pipeline to compare; repeat to compare several ('none' is always included). "
    + SPEC_HELP
)
@click.option(
    "--mode",
    type=click.Choice(["replay", "view", "persistent", "oneshot"]),
    default="replay",
    show_default=True,
    help="replay = persistent compaction; view = pipeline before every call.",
)
@pricing_option(help="Pricing profile (anthropic, openai, nocache); repeatable.")
@click.option(
    "--trigger",
    "triggers",
    default=str(DEFAULT_TRIGGER),
    show_default=True,
    metavar="TOKENS[,TOKENS...]",
    callback=lambda ctx, param, value: parse_triggers(value),
    help="Compact when the history exceeds this (every pipeline, the peers too); several, "
    "comma-separated, run each and report the cost-retention frontier.",
)
@policy_option(
    help="Persistent mode: keep a compaction only when it pays for itself under the pricing "
    "(pays; what Session and the gateway do), or whenever over the trigger (always)."
)
@json_file_option(help="Write the report (compactkit.bench/1) to FILE ('-': stdout).")
@click.option("--markdown", "md_out", default=None, metavar="FILE|-", help="Write markdown.")
@click.option("--html", "html_out", default=None, metavar="FILE|-", help="Write an HTML page.")
@pin_option
@workers_option
@executor_option
@timeout_option
@tokenizer_option
@click.pass_obj
def bench(
    state: State,
    paths: Sequence[str],
    specs: Sequence[str],
    mode: str,
    pricing: Sequence[str],
    triggers: list[int],
    policy: str,
    json_out: str | None,
    md_out: str | None,
    html_out: str | None,
    pins: tuple[str, ...],
    workers: int,
    executor: str,
    timeout: float,
    ray_address: str | None,
    tokenizer: str,
) -> None:
    """Measure pipelines on sessions: tokens, cache-adjusted cost, retention, speed.

    PATHS are session files, FILE#N, or folders (every session file under them; files that
    do not load are listed, not fatal). The table goes to stdout, or to stderr when a report
    does.

    \b
    Example:
      compactkit bench examples/sessions -s default -s observation-mask+sliding-window \\
          --json bench.json --markdown bench.md
      compactkit bench corpus/ --executor ray --workers 8
    """
    from ..bench.jobs import collect_sessions
    from ..bench.report import render_html, render_markdown, render_terminal
    from ..bench.runner import nothing_loaded, plugin_failure, run_frontier
    from ..spec import parse_pipelines

    check_one_stdout(json=json_out, markdown=md_out, html=html_out)
    sessions = collect_sessions(paths)  # once: the outputs must not overwrite any of them
    outputs = Outputs([*paths, *sessions], json=json_out, markdown=md_out, html=html_out)
    progress = _BenchProgress(len(paths))
    report = run_frontier(
        paths,
        lambda trigger: parse_pipelines(specs or ("default",), trigger=trigger, pins=pins),
        triggers,
        mode="persistent" if mode == "replay" else mode,
        profiles=tuple(pricing) or ("anthropic", "openai"),
        tokenizer=tokenizer,
        workers=workers,
        executor=executor,
        ray_address=ray_address,
        registry=state.registry,
        progress=progress,
        timeout=timeout,
        sessions=sessions,
        policy="always" if policy == "always" else "pays",
    )
    progress.close()
    nothing = nothing_loaded(report, paths)
    if nothing:
        raise BadInputError(nothing)
    with outputs:
        if json_out:
            outputs.emit(report, json_out, lines=True)
        if md_out:
            outputs.emit(render_markdown(report), md_out)
        if html_out:
            outputs.emit(render_html(report), html_out)
    table_to_stderr = STDIO in (json_out, md_out, html_out)
    with contextlib.redirect_stdout(sys.stderr) if table_to_stderr else contextlib.nullcontext():
        render_terminal(report)
    failure = plugin_failure(report)
    if failure:  # a failed row fails the run: CI never reads exit 0 over a broken measurement
        line, code = failure
        say(f"compactkit: error: {line}", err=True)
        sys.exit(code)


def parse_triggers(value: str) -> list[int]:
    """`--trigger 30000,60000`: positive token counts, each once, in the order given."""
    out: list[int] = []
    for part in (p.strip().replace("_", "") for p in str(value).split(",")):
        if not part.isdigit() or int(part) < 1:
            raise click.BadParameter(
                f"{part!r} is not a positive number of tokens (e.g. --trigger 30000,60000)"
            )
        if int(part) not in out:
            out.append(int(part))
    return out


class _BenchProgress:
    """A progress bar on stderr over session files; nothing when stderr is not a terminal."""

    def __init__(self, total: int) -> None:
        self.bar: Any = None
        if sys.stderr.isatty():
            from rich.console import Console
            from rich.progress import Progress

            self.bar = Progress(console=Console(file=sys.stderr), transient=True)
            self.bar.start()
            self.task = self.bar.add_task("benchmarking", total=None)

    def __call__(self, result: Any) -> None:
        if self.bar is not None:
            self.bar.update(self.task, advance=1, description=result.address[-50:])

    def close(self) -> None:
        if self.bar is not None:
            self.bar.stop()
