"""The `compactkit` command line: a thin layer over the Python API, built by a factory.

Commands live at module level, one module per command or small group (`inspect`, `convert`,
`run`, `validate`, `listing`, `bench`, `new_strategy`); `make_cli(registry_factory)` attaches them
to a fresh group, so tests build their own CLI around their own registry with no reloads and no
globals. Shared options are in `_options`, the one output helper in `_output`.

Exit codes: 0 ok; 1 budget exceeded or regression; 2 bad input, usage or configuration;
3 a plugin failed to load or a strategy broke its contract. Errors are one line on stderr;
`--debug` (before or after the command name) adds the traceback.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence

import click

from .._version import __version__
from ..errors import EXIT_BAD_INPUT, CompactkitError
from ..registry import Registry, make_registry
from ._app import EXIT_CODES, CompactkitGroup, State, fail
from .bench import bench
from .check import check
from .convert import convert, expand
from .gateway import gateway
from .inspect import inspect
from .listing import formats, plugins, strategies
from .mcp_proxy import mcp_proxy
from .new_strategy import new_strategy
from .run import run
from .validate import diff_cmd, validate_cmd

COMMANDS: tuple[click.Command, ...] = (
    inspect,
    convert,
    run,
    expand,
    validate_cmd,
    diff_cmd,
    bench,
    check,
    strategies,
    formats,
    plugins,
    new_strategy,
    mcp_proxy,
    gateway,
)
"""Every command `make_cli` attaches (`compactkit --help` lists them by name)."""


@click.command(name="compactkit")
@click.version_option(__version__, prog_name="compactkit")
@click.option("--debug", is_flag=True, help="Show tracebacks for errors.")
@click.option(
    "--plugins-dir",
    default=None,
    metavar="DIR",
    type=click.Path(exists=True, file_okay=False),
    help="Also load each *.py file in DIR as a plugin (default: $COMPACTKIT_PLUGINS_DIR).",
)
@click.pass_obj
def _root(state: State, debug: bool, plugins_dir: str | None) -> None:
    """Pluggable context compaction for LLM agents.

    \b
    Example:
      compactkit inspect session.jsonl
      compactkit run session.jsonl --budget 30000 -o small.json
    """
    state.debug = state.debug or debug
    state.plugins_dir = plugins_dir


def make_cli(registry_factory: Callable[..., Registry] | None = None) -> click.Group:
    """Build the CLI around a registry factory (tests pass their own; nothing is global).

    The factory is called once per invocation, when a command first needs the registry, with
    `plugins_dir=DIR` when `--plugins-dir DIR` is given (`make_registry` takes it).
    """
    group = CompactkitGroup(
        registry_factory or make_registry,
        name="compactkit",
        callback=_root.callback,
        params=list(_root.params),
        help=_root.help,
        epilog=f"Exit codes: {EXIT_CODES}.",
        context_settings={"help_option_names": ["-h", "--help"]},
    )
    for command in COMMANDS:
        group.add_command(command)
    return group


def main(argv: Sequence[str] | None = None) -> None:
    """Console-script entry point."""
    cli = make_cli()
    try:
        cli.main(args=list(argv) if argv is not None else None, prog_name="compactkit")
    except CompactkitError as exc:  # raised outside a command (e.g. while building the group)
        fail(exc, "--debug" in (argv or sys.argv))
    except click.exceptions.Exit as exc:
        sys.exit(exc.exit_code)
    except BrokenPipeError:  # output piped into `head` and friends: not an error
        sys.stderr.close()
        sys.exit(0)


__all__ = ["COMMANDS", "EXIT_BAD_INPUT", "main", "make_cli"]
