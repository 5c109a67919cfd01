"""Plugin code cannot end compactkit's process with an exit status of its choosing, write into
the command line's results on stdout, or hang it at import.

`sys.exit` raises `SystemExit`, which every place that runs plugin code contains; `os._exit`
ends the process at once, without output and with whatever status it is given (`os._exit(0)`
in a strategy, or at import, made a run that wrote nothing exit 0). While `no_process_exit()`
is active (the command line around every command, the registry around plugin imports, a
pipeline around a plugin strategy run in-process), `os._exit` called in this process raises
`ProcessExitCalled` instead, a `BaseException` that the caller turns into a plugin failure
(exit 3). A forked child (a strategy's isolated process, a worker of a pool) still exits as
asked: the replacement checks the process id. A strategy isolated by `--timeout` runs in a
worker process already, whose death without a result is a plugin failure in the caller.

What this cannot stop: a reference to the real function taken before the guard was installed
(`from os import _exit` at a plugin's import, when the import itself was not guarded), or C
code calling `_exit(2)` directly; an isolated strategy (the default `--timeout`) is safe from
both, since only its worker process ends.

`stdout_to_stderr()`: while the command line runs (`protect_stdout`), what plugin code writes to
stdout (`print`, a C library, a process it starts) goes to stderr instead, so it never lands in
the JSON or session the command prints; an isolated strategy's worker process does the same.

`time_limit()`: a plugin's import stops after `COMPACTKIT_PLUGIN_LOAD_TIMEOUT` seconds (default
30) with `PluginLoadTimeout`, so an endless loop at import is a plugin in error, not a hang
(main thread, POSIX timers: a loop in C code that never returns to Python is not stopped).
"""

from __future__ import annotations

import os
import signal
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager, redirect_stdout, suppress
from types import FrameType
from typing import NoReturn

_REAL_EXIT = os._exit
_lock = threading.Lock()
_depth = 0
_owner = 0


class ProcessExitCalled(BaseException):
    """Plugin code called `os._exit(code)` in compactkit's own process."""

    def __init__(self, code: int) -> None:
        self.code = code
        super().__init__(f"it called os._exit({code}), which compactkit does not let plugins do")


def _guarded_exit(code: int) -> NoReturn:
    if os.getpid() != _owner:  # a forked child: exit as asked
        _REAL_EXIT(code)
    raise ProcessExitCalled(code)


def _install(function: object) -> None:
    os._exit = function  # type: ignore[assignment]  # the guard stands in for the real function
    native = sys.modules.get(os.name)  # `posix._exit` is the same function under another name
    if native is not None and hasattr(native, "_exit"):
        setattr(native, "_exit", function)  # noqa: B010  # the module mypy does not know


def _forked() -> None:
    """A forked child starts with no guard of its own (the inherited one lets it exit)."""
    global _lock, _depth
    _lock = threading.Lock()
    _depth = 0


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forked)


@contextmanager
def no_process_exit() -> Iterator[None]:
    """While the body runs, `os._exit` in this process raises `ProcessExitCalled` (nestable,
    from any thread; the real function is back when the last one ends)."""
    global _depth, _owner
    with _lock:
        if _depth == 0:
            _owner = os.getpid()
            _install(_guarded_exit)
        _depth += 1
    try:
        yield
    finally:
        with _lock:
            _depth -= 1
            if _depth == 0:
                _install(_REAL_EXIT)


# --------------------------------------------------------------------------- stdout

_protected = False


def protect_stdout(on: bool) -> None:
    """Whether this process's stdout carries results that plugin code must not write into (the
    command line sets it while a command runs; forked workers inherit it)."""
    global _protected
    _protected = on


def stdout_is_protected() -> bool:
    return _protected


@contextmanager
def stdout_to_stderr() -> Iterator[None]:
    """While the body runs, stdout (Python's and file descriptor 1) is stderr, when stdout is
    protected and this is the main thread; else nothing changes."""
    if not _protected or threading.current_thread() is not threading.main_thread():
        yield
        return
    for stream in (sys.stdout, sys.__stdout__):
        with suppress(Exception):
            if stream is not None:
                stream.flush()
    try:
        saved = os.dup(1)
        os.dup2(2, 1)
    except OSError:  # no file descriptors to move (an embedded interpreter): Python's only
        with redirect_stdout(sys.stderr):
            yield
        return
    try:
        with redirect_stdout(sys.stderr):
            yield
    finally:
        for stream in (sys.stderr, sys.__stderr__):
            with suppress(Exception):
                if stream is not None:
                    stream.flush()
        os.dup2(saved, 1)
        os.close(saved)


def stdout_to_stderr_for_good() -> None:
    """In a strategy's worker process: stdout is stderr from here on (when protected)."""
    if _protected:
        with suppress(OSError):
            os.dup2(2, 1)
        sys.stdout = sys.stderr


# --------------------------------------------------------------------------- load time

LOAD_TIMEOUT_ENV = "COMPACTKIT_PLUGIN_LOAD_TIMEOUT"
DEFAULT_LOAD_TIMEOUT = 30.0


class PluginLoadTimeout(BaseException):
    """A plugin's import ran past its time limit."""


def load_timeout() -> float:
    raw = os.environ.get(LOAD_TIMEOUT_ENV)
    try:
        value = float(raw) if raw else DEFAULT_LOAD_TIMEOUT
    except ValueError:
        return DEFAULT_LOAD_TIMEOUT
    return value if value == value and value > 0 else DEFAULT_LOAD_TIMEOUT  # not NaN


@contextmanager
def time_limit(seconds: float) -> Iterator[None]:
    """Raise `PluginLoadTimeout` in the body once `seconds` have passed (main thread only)."""
    if (
        threading.current_thread() is not threading.main_thread()
        or not hasattr(signal, "setitimer")
        or signal.getitimer(signal.ITIMER_REAL)[0] > 0  # someone else's timer: leave it
    ):
        yield
        return

    def expired(_signum: int, _frame: FrameType | None) -> None:
        raise PluginLoadTimeout(f"it took longer than {seconds:g} s to load ({LOAD_TIMEOUT_ENV})")

    previous = signal.signal(signal.SIGALRM, expired)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
