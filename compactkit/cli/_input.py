"""How commands read what they are given: session addresses (`FILE`, `FILE#N`, `-` for stdin)
and stash files."""

from __future__ import annotations

import contextlib
import ctypes
import logging
from collections.abc import Iterator, Mapping
from pathlib import Path

import click

from ..context import AgentContext
from ..errors import BadInputError
from ..formats.loading import STDIN_NAME as STDIN_NAME  # where the commands find it
from ..formats.loading import SessionAddress, load_address, load_one
from ..formats.loading import read_stdin as read_stdin  # read by the stash options too
from ._app import State
from ._options import STDIO


class _WarningLine(logging.Handler):
    def emit(self, record: logging.LogRecord) -> None:
        click.echo(f"compactkit: warning: {record.getMessage()}", err=True)


@contextlib.contextmanager
def warnings_on_stderr() -> Iterator[None]:
    """What reading a session warns about (a malformed line skipped), one line each on stderr."""
    logger = logging.getLogger("compactkit.formats")
    handler, propagate = _WarningLine(logging.WARNING), logger.propagate
    logger.addHandler(handler)
    logger.propagate = False
    try:
        yield
    finally:
        logger.removeHandler(handler)
        logger.propagate = propagate


@contextlib.contextmanager
def _reading() -> Iterator[None]:
    """While a session is read: its warnings on stderr; after: the memory of the file as
    parsed given back (`return_freed_memory`)."""
    with warnings_on_stderr():
        yield
    return_freed_memory()


def load(
    state: State,
    address: str | SessionAddress,
    format: str | None,
    *,
    restorable: bool = False,
) -> tuple[str, list[AgentContext]]:
    """(format name, contexts) of `FILE`, `FILE#N` or `-` (stdin, `-#N` for one conversation).
    With `restorable`, read as `run` reads a compacted output: with the recovery store beside it,
    and refused when a marker's content is in no store (`compactkit.formats.loading.load`)."""
    with _reading():
        fmt, contexts = load_address(
            address, format, state.registry, recovery=restorable, restorable=restorable
        )
    return fmt.name, contexts


def return_freed_memory() -> None:
    """Give the pages the C heap holds free back to the system (glibc's `malloc_trim`; elsewhere
    nothing). A session's parsed strings freed once it is loaded leave holes in the heap that the
    process keeps and that nothing after loading fits in (the tokenizer's vocabulary is allocated
    in large blocks): kept, they stayed counted in every later peak, about the session's size."""
    try:
        trim = ctypes.CDLL(None).malloc_trim
    except (OSError, AttributeError, TypeError):  # not glibc, or no symbols of the process
        return
    trim(0)


def load_single(
    state: State,
    address: str | SessionAddress,
    format: str | None = None,
    *,
    restorable: bool = False,
) -> AgentContext:
    """The one conversation `address` names (read as `load` reads it)."""
    with _reading():
        return load_one(
            address,
            format=format,
            registry=state.registry,
            recovery=restorable,
            restorable=restorable,
        )


def read_stash_text(path: str) -> str:
    """A stash file's text, or stdin for `-`."""
    if path == STDIO:
        return read_stdin()
    file = Path(path)
    if not file.is_file():
        raise BadInputError("no such stash file", path=path)
    try:
        return file.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise BadInputError(f"not UTF-8 text (bad byte at offset {exc.start})", path=path) from None


def check_one_stdin(*paths: str | SessionAddress | None) -> None:
    """Refuse reading stdin twice (a session and a stash both given as `-`)."""
    if sum(1 for p in paths if p is not None and SessionAddress.parse(p).stdin) > 1:
        raise BadInputError("stdin ('-') can be read only once", path=STDIN_NAME)


def sidecar_of(address: str | SessionAddress) -> str | None:
    """The recovery store `run -o FILE` wrote beside FILE (`FILE.recovery.jsonl`), if any."""
    path = SessionAddress.parse(address).sidecar
    return path if path is not None and Path(path).is_file() else None


def read_entries(
    stash: str | None, address: str | None = None, *, lazy: bool = False
) -> Mapping[str, str]:
    """What markers stand for: the `--stash` file (a stash or a recovery store; `-`: stdin),
    else the store beside `address` (`FILE.recovery.jsonl`), else nothing. With `lazy`, a
    recovery store's entries are read from its file only when asked for (`SidecarStore`)."""
    from ..recovery import SidecarStore, read_sidecar, read_stash, read_store

    if stash == STDIO:
        return read_stash(read_stdin(), STDIN_NAME)
    if stash:
        if not Path(stash).is_file():
            raise BadInputError("no such stash file", path=stash)
        return read_store(stash, lazy=lazy)
    path = sidecar_of(address) if address else None
    if path is None:
        return {}
    return SidecarStore(path) if lazy else read_sidecar(path)
