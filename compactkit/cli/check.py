"""`compactkit check`: token-budget and regression gates for CI."""

from __future__ import annotations

import contextlib
import sys
from pathlib import Path
from typing import Any

import click

from ..errors import redacted
from ._app import State, command
from ._options import (
    STDIO,
    check_one_stdout,
    executor_option,
    json_file_option,
    pin_option,
    timeout_option,
    workers_option,
)
from ._output import Outputs, say


@command(
    exit_codes="0 every check passed; 1 a limit or regression failed; 2 bad input or "
    "configuration (a session that does not load); 3 a plugin failed or a strategy broke "
    "its contract"
)
@click.option(
    "--config",
    "config_path",
    default=None,
    metavar="PATH",
    help="pyproject.toml or compactkit.toml (default: the nearest one, from here up).",
)
@click.option(
    "--baseline",
    "baseline_path",
    default=None,
    metavar="FILE",
    help="Baseline JSON (default: compactkit-baseline.json beside the configuration).",
)
@click.option(
    "--update-baseline",
    is_flag=True,
    help="Rewrite the baseline from this run (atomically) and list what changed; exit 0 "
    "unless a session fails to load or run.",
)
@json_file_option(help="Write the report (compactkit.check/1) to FILE ('-': stdout).")
@click.option(
    "--markdown", "md_out", default=None, metavar="FILE|-", help="Write markdown for a PR comment."
)
@click.option("--junit", "junit_out", default=None, metavar="FILE|-", help="Write JUnit XML.")
@pin_option
@workers_option
@executor_option
@timeout_option
@click.pass_obj
def check(
    state: State,
    config_path: str | None,
    baseline_path: str | None,
    update_baseline: bool,
    json_out: str | None,
    md_out: str | None,
    junit_out: str | None,
    pins: tuple[str, ...],
    workers: int,
    executor: str,
    ray_address: str | None,
    timeout: float,
) -> None:
    """Gate a change on token budgets, savings, cost, retention and regressions.

    Runs every [[tool.compactkit.check]] of pyproject.toml (or [[check]] of compactkit.toml)
    and prints a table per check; each failing line names the check, the session, the metric,
    both values, the delta and the limit. See docs/check.md for the configuration.

    \b
    Example:
      compactkit check
      compactkit check --markdown report.md --junit junit.xml --workers 2
      compactkit check --executor ray --ray-address ray://head:10001
      compactkit check --update-baseline
    """
    from rich.console import Console

    from ..check import load_config, read_baseline, run_checks
    from ..check.report import (
        render_json,
        render_junit,
        render_markdown,
        render_terminal,
        summary_line,
    )

    check_one_stdout(json=json_out, markdown=md_out, junit=junit_out)
    file = load_config(config_path)
    if pins:  # --pin adds rules to every check
        file = file.with_pins(pins)
    baseline_file = Path(baseline_path) if baseline_path else file.default_baseline
    reads = [str(file.path), str(baseline_file), *_sessions(file)]
    outputs = Outputs(reads, json=json_out, markdown=md_out, junit=junit_out)
    baseline = read_baseline(baseline_file)
    run = run_checks(
        file,
        baseline=baseline,
        workers=workers,
        executor=executor,
        ray_address=ray_address,
        registry=state.registry,
        timeout=timeout,
    )
    run.baseline_path = baseline_file if baseline is not None or update_baseline else None
    with outputs:
        if json_out:
            outputs.emit(render_json(run), json_out)
        if md_out:
            outputs.emit(render_markdown(run), md_out)
        if junit_out:
            outputs.emit(render_junit(run), junit_out)
    to_stderr = STDIO in (json_out, md_out, junit_out)
    stream = sys.stderr if to_stderr else sys.stdout
    console = Console(
        file=redacted(stream), highlight=False, width=None if stream.isatty() else 160
    )
    render_terminal(run, console)
    if update_baseline:
        _update_baseline(run, baseline, baseline_file, to_stderr)
        return
    say(summary_line(run), err=True)
    if run.exit_code:
        sys.exit(run.exit_code)


def _update_baseline(run: Any, baseline: Any, baseline_file: Path, to_stderr: bool) -> None:
    """Write the run's figures as the new baseline and say what moved; a run where some session
    did not load or run writes nothing and exits with that error's code."""
    from ..check import changes, write_baseline

    new = run.to_baseline()
    errors = max((c for ch in run.checks for _, c in ch.errors.values()), default=0)
    if errors:
        say("compactkit: error: baseline not written: some sessions did not load or run", err=True)
        sys.exit(errors)
    moved = changes(baseline, new)
    write_baseline(baseline_file, new)
    where = run.relative(baseline_file)
    if baseline is None:
        say(f"baseline written: {where} (checks: {', '.join(new.checks)})", err=to_stderr)
    elif not moved:
        say(f"baseline unchanged: {where}", err=to_stderr)
    else:
        say(f"baseline updated: {where}, {len(moved)} changes:", err=to_stderr)
        for line in moved:
            say(f"  {line}", err=to_stderr)


def _sessions(file: Any) -> list[str]:
    """Every session the checks read (an output must not name one); a pattern that matches
    nothing is reported by the run itself."""
    from ..check.config import expand_sessions
    from ..errors import ConfigError

    out: list[str] = []
    for check in file.checks:
        with contextlib.suppress(ConfigError):
            out.extend(expand_sessions(check, file.root))
    return out
