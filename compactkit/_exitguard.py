"""Plugin code cannot end compactkit's process with an exit status of its choosing.

`sys.exit` raises `SystemExit`, which every place that runs plugin code contains; `os._exit`
ends the process at once, without output and with whatever status it is given (`os._exit(0)`
in a strategy, or at import, made a run that wrote nothing exit 0). While `no_process_exit()`
is active (the command line around every command, the registry around plugin imports, a
pipeline around a plugin strategy run in-process), `os._exit` called in this process raises
`ProcessExitCalled` instead, a `BaseException` that the caller turns into a plugin failure
(exit 3). A forked child (a strategy's isolated process, a worker of a pool) still exits as
asked: the replacement checks the process id. A strategy isolated by `--timeout` runs in a
child process already, whose death without a result is a plugin failure in the parent.

What this cannot stop: a reference to the real function taken before the guard was installed
(`from os import _exit` at a plugin's import, when the import itself was not guarded), or C
code calling `_exit(2)` directly; an isolated strategy (the default `--timeout`) is safe from
both, since only its child process ends.
"""

from __future__ import annotations

import os
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
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
