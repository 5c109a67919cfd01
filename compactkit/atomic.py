"""Files written atomically: a reader sees the old file or the new one, never a mix, and a set of
files is renamed together or not at all (an interrupt included)."""

from __future__ import annotations

import contextlib
import os
import signal
import tempfile
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TextIO


def stage_file(path: str | Path, text: str | Callable[[TextIO], None]) -> str:
    """Write `text` to a new temporary file beside `path` (same folder, so a rename replaces
    `path` atomically) with the mode of the file it will replace; return the temporary name.
    `text` may be a function that writes the file to the handle it is given (streamed, for
    output too large to hold as one string)."""
    target = Path(path)
    directory = target.parent if str(target.parent) else Path(".")
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=directory)
    try:
        try:  # keep the mode of a file being replaced; a new file gets the umask's default
            mode = target.stat().st_mode & 0o7777
        except FileNotFoundError:
            umask = os.umask(0)
            os.umask(umask)
            mode = 0o666 & ~umask
        os.chmod(tmp, mode)
        with os.fdopen(fd, "w", encoding="utf-8", newline="") as handle:
            if callable(text):
                text(handle)
            else:
                handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise
    return tmp


def write_atomic(path: str | Path, text: str) -> None:
    """Write `text` to `path` so that readers see the old file or the new one, never a mix."""
    with OutputSet() as outputs:
        outputs.add(path, text)


class OutputSet:
    """Files written together: `add` stages each in a temporary file beside its target,
    `commit` renames them all once every one is staged, `discard` removes the temporary files.
    As a context manager it commits when the block ends normally and discards on any exception
    (an interrupt too), so a failure leaves the old files and no partial set.

    A rename that fails during `commit` raises `OSError` whose `filename` is the target (never
    the temporary name); the files not yet renamed are discarded."""

    def __init__(self) -> None:
        self._staged: list[tuple[str, Path]] = []

    def add(self, path: str | Path, text: str | Callable[[TextIO], None]) -> None:
        self._staged.append((stage_file(path, text), Path(path)))

    def commit(self) -> None:
        with _signals_held():
            try:
                while self._staged:
                    tmp, target = self._staged[0]
                    try:
                        os.replace(tmp, target)
                    except OSError as exc:
                        raise OSError(exc.errno, exc.strerror, str(target)) from None
                    self._staged.pop(0)
            finally:
                self.discard()

    def discard(self) -> None:
        staged, self._staged = self._staged, []
        for tmp, _ in staged:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(tmp)

    def __enter__(self) -> OutputSet:
        return self

    def __exit__(self, kind: type[BaseException] | None, *_: object) -> None:
        if kind is None:
            self.commit()
        else:
            self.discard()


@contextlib.contextmanager
def _signals_held() -> Iterator[None]:
    """SIGINT and SIGTERM held back (delivered right after) while a set of files is renamed, so
    an interrupt cannot leave half of it; a no-op off the main thread or without signal masks."""
    if not hasattr(signal, "pthread_sigmask") or threading.current_thread() is not (
        threading.main_thread()
    ):
        yield
        return
    held = {signal.SIGINT, signal.SIGTERM}
    old = signal.pthread_sigmask(signal.SIG_BLOCK, held)
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, old)
