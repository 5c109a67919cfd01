"""What every command shares: the per-invocation state, error handling and the command decorator."""

from __future__ import annotations

import inspect
import sys
import traceback
from collections.abc import Callable
from typing import Any, NoReturn, TypeVar

import click

from ..errors import EXIT_PLUGIN, CompactkitError
from ..registry import Registry
from ..tokens import TokenCounter

F = TypeVar("F", bound=Callable[..., Any])

EXIT_CODES = (
    "0 ok; 1 budget exceeded or regression; 2 bad input, usage or configuration; "
    "3 a plugin failed to load or a strategy broke its contract"
)


class State:
    """One invocation's registry (built lazily, once), debug flag and plugins folder."""

    def __init__(self, registry_factory: Callable[..., Registry]) -> None:
        self._factory = registry_factory
        self._registry: Registry | None = None
        self.debug = False
        self.plugins_dir: str | None = None

    @property
    def registry(self) -> Registry:
        if self._registry is None:
            self._registry = self._build()
        return self._registry

    def _build(self) -> Registry:
        if self.plugins_dir is None:
            return self._factory()
        params = inspect.signature(self._factory).parameters.values()
        if not any(p.name == "plugins_dir" or p.kind is p.VAR_KEYWORD for p in params):
            raise click.UsageError("--plugins-dir: this CLI was built with a fixed registry")
        return self._factory(plugins_dir=self.plugins_dir)

    def counter(self, name: str) -> TokenCounter:
        return TokenCounter(self.registry.tokenizers.get(name))


def fail(exc: BaseException, debug: bool) -> NoReturn:
    """Print one line (plus the traceback under --debug) and exit with the error's code."""
    if debug:
        traceback.print_exception(exc)
    if isinstance(exc, CompactkitError):
        click.echo(f"compactkit: error: {exc}", err=True)
        sys.exit(exc.exit_code)
    text = str(exc).splitlines()[0] if str(exc) else ""
    click.echo(
        f"compactkit: unexpected error: {type(exc).__name__}: {text} "
        "(run with --debug for the traceback)",
        err=True,
    )
    sys.exit(EXIT_PLUGIN)


class CompactkitGroup(click.Group):
    """The top-level group: gives each invocation a fresh `State` around the registry factory and
    turns errors raised by any command into one-line messages and exit codes."""

    def __init__(self, registry_factory: Callable[..., Registry], **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.registry_factory = registry_factory

    def make_context(
        self,
        info_name: str | None,
        args: list[str],
        parent: click.Context | None = None,
        **extra: Any,
    ) -> click.Context:
        extra.setdefault("obj", State(self.registry_factory))
        return super().make_context(info_name, args, parent, **extra)

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except (click.exceptions.Exit, click.ClickException, click.Abort, SystemExit):
            raise
        except Exception as exc:
            state = ctx.find_object(State)
            fail(exc, bool(state and state.debug))


def _set_debug(ctx: click.Context, _param: click.Parameter, value: bool) -> None:
    state = ctx.find_object(State)
    if value and state is not None:
        state.debug = True


def command(
    name: str | None = None, *, exit_codes: str, **kwargs: Any
) -> Callable[[F], click.Command]:
    """`click.command` for a compactkit command: `-h` for help, `--debug` accepted after the
    command name too (`compactkit inspect FILE --debug`), and the exit codes under the help."""

    def decorate(fn: F) -> click.Command:
        kwargs.setdefault("context_settings", {"help_option_names": ["-h", "--help"]})
        kwargs.setdefault("epilog", f"Exit codes: {exit_codes}.")
        make: Callable[[F], click.Command] = click.command(name, **kwargs)
        cmd = make(fn)
        cmd.params.append(
            click.Option(
                ["--debug"],
                is_flag=True,
                expose_value=False,
                is_eager=True,
                callback=_set_debug,
                help="Show tracebacks for errors.",
            )
        )
        return cmd

    return decorate
