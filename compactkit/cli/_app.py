"""What every command shares: the per-invocation state, error handling and the command decorator."""

from __future__ import annotations

import contextlib
import errno
import inspect
import os
import signal
import sys
import threading
import traceback
from collections.abc import Callable, Iterator, Sequence
from types import FrameType
from typing import Any, NoReturn, TypeVar

import click

from .._exitguard import ProcessExitCalled, no_process_exit, protect_stdout
from ..errors import (
    EXIT_BAD_INPUT,
    EXIT_INTERRUPTED,
    EXIT_PLUGIN,
    EXIT_TERMINATED,
    CompactkitError,
    failure_code,
    redact,
)
from ..registry import Registry
from ..tokens import TokenCounter

F = TypeVar("F", bound=Callable[..., Any])

EXIT_CODES = (
    "0 ok; 1 budget exceeded or regression; 2 bad input, usage, configuration or an OS error on "
    "a path given; 3 a plugin failed to load or a strategy broke its contract; 130 interrupted "
    "(Ctrl-C); 143 terminated (SIGTERM)"
)


class Terminated(BaseException):
    """SIGTERM, raised in the main thread so that cleanup (temporary files) runs on the way out.
    A `BaseException`, like `KeyboardInterrupt`, so no `except Exception` swallows it."""


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
        """The registry's shared counter for `name`: the one the pipeline's strategies count with,
        so a context is counted once, and each block remembers one count, not one per counter."""
        return self.registry.counter(name)


def fail(exc: BaseException, debug: bool) -> NoReturn:
    """Print one line (plus the traceback under --debug) and exit with the error's code.

    Every line goes through `redact`: no API key or URL credential is ever printed."""
    if debug:
        traceback.print_exception(exc)
    if isinstance(exc, CompactkitError):
        _error(str(exc))
        sys.exit(failure_code(exc.exit_code))  # never 0, whatever a plugin set
    if isinstance(exc, OSError) and exc.strerror:  # an OS error on a path the user gave
        where = f"{exc.filename}: " if exc.filename else ""
        _error(f"{where}{exc.strerror}")
        sys.exit(EXIT_BAD_INPUT)
    text = str(exc).splitlines()[0] if str(exc) else ""
    click.echo(
        redact(
            f"compactkit: unexpected error: {type(exc).__name__}: {text} "
            "(run with --debug for the traceback)"
        ),
        err=True,
    )
    sys.exit(EXIT_PLUGIN)


def _error(line: str) -> None:
    click.echo(f"compactkit: error: {redact(line)}", err=True)


def interrupted(exc: BaseException) -> NoReturn:
    """Ctrl-C (exit 130) or SIGTERM (exit 143): one line, after cleanup has run."""
    if isinstance(exc, Terminated):
        click.echo("compactkit: terminated", err=True)
        sys.exit(EXIT_TERMINATED)
    click.echo("compactkit: interrupted", err=True)
    sys.exit(EXIT_INTERRUPTED)


def usage_line(exc: click.ClickException) -> str:
    """A click usage error as one line: the message and where help is."""
    text = " ".join(exc.format_message().split())
    ctx = getattr(exc, "ctx", None)
    if isinstance(exc, click.UsageError) and ctx is not None:
        text = f"{text} (see '{ctx.command_path} --help')"
    return text


def _quiet_broken_pipe() -> NoReturn:
    """stdout's reader went away (`| head`): stop quietly, with nothing left to flush."""
    with contextlib.suppress(OSError, ValueError):
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    sys.exit(0)


@contextlib.contextmanager
def _sigterm_raises() -> Iterator[None]:
    """While the CLI runs, SIGTERM raises `Terminated` in the main thread (worker processes it
    forks keep the default action)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    pid = os.getpid()

    def handler(signum: int, _frame: FrameType | None) -> None:
        if os.getpid() != pid:  # a forked worker: die as SIGTERM says
            signal.signal(signum, signal.SIG_DFL)
            os.kill(os.getpid(), signum)
            return
        raise Terminated

    previous = signal.signal(signal.SIGTERM, handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


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
        except (KeyboardInterrupt, Terminated) as exc:
            interrupted(exc)
        except Exception as exc:
            if _is_broken_pipe(exc):
                _quiet_broken_pipe()
            state = ctx.find_object(State)
            fail(exc, bool(state and state.debug))

    def main(
        self,
        args: Sequence[str] | None = None,
        prog_name: str | None = None,
        complete_var: str | None = None,
        standalone_mode: bool = True,
        **extra: Any,
    ) -> Any:
        """click's `main`, with every way out one line and its documented exit code: usage
        errors, Ctrl-C (130), SIGTERM (143, temporary files removed), a closed stdout (quiet)."""
        if not standalone_mode:
            return super().main(args, prog_name, complete_var, False, **extra)
        with _sigterm_raises(), no_process_exit(), _stdout_protected():
            try:
                code = super().main(args, prog_name, complete_var, False, **extra)
                sys.stdout.flush()
            except ProcessExitCalled as exc:  # plugin code outside a strategy (a format, a hook)
                _error(f"a plugin failed: {exc}")
                sys.exit(EXIT_PLUGIN)
            except click.exceptions.NoArgsIsHelpError as exc:
                exc.show()
                sys.exit(exc.exit_code)
            except click.ClickException as exc:
                _error(usage_line(exc))
                sys.exit(exc.exit_code)
            except click.Abort:
                interrupted(KeyboardInterrupt())
            except (KeyboardInterrupt, Terminated) as exc:
                interrupted(exc)
            except OSError as exc:
                if not _is_broken_pipe(exc):
                    raise
                _quiet_broken_pipe()
        sys.exit(code if isinstance(code, int) else 0)


@contextlib.contextmanager
def _stdout_protected() -> Iterator[None]:
    """While a command runs, plugin code writes to stderr, never into its results on stdout."""
    protect_stdout(True)
    try:
        yield
    finally:
        protect_stdout(False)


def _is_broken_pipe(exc: BaseException) -> bool:
    return isinstance(exc, BrokenPipeError) or (
        isinstance(exc, OSError) and exc.errno == errno.EPIPE
    )


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
