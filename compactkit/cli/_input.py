"""How commands read what they are given: session addresses (`FILE`, `FILE#N`, `-` for stdin)
and stash files."""

from __future__ import annotations

import contextlib
import ctypes
import logging
import sys
from collections.abc import Iterator, Mapping
from pathlib import Path

import click

from ..context import AgentContext
from ..errors import BadInputError
from ..formats.base import parse_text
from ..io import load_document, load_session, pick, single, split_address
from ._app import State
from ._options import STDIO

STDIN_NAME = "<stdin>"


def read_stdin() -> str:
    """All of stdin as text, with the same one-line errors as a file."""
    raw: bytes = sys.stdin.buffer.read()
    if b"\x00" in raw[:65536]:
        raise BadInputError("binary data, not a text session file", path=STDIN_NAME)
    try:
        return raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise BadInputError(
            f"not UTF-8 text (bad byte at offset {exc.start})", path=STDIN_NAME
        ) from None


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


def load(state: State, address: str, format: str | None) -> tuple[str, list[AgentContext]]:
    """(format name, contexts) of `FILE`, `FILE#N` or `-` (stdin, `-#N` for one conversation)."""
    file, index = split_address(address)
    with warnings_on_stderr():
        if file == STDIO:
            doc = parse_text(read_stdin(), STDIN_NAME)
            fmt, contexts = load_document(doc, format, state.registry)
            del doc  # before the heap is trimmed
        else:
            fmt, contexts = load_session(file, format, state.registry)
    return_freed_memory()  # the file as parsed, gone once loaded
    if index is not None:
        contexts = [pick(contexts, index, file)]
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


def load_single(state: State, address: str, format: str | None = None) -> AgentContext:
    """The one conversation `address` names."""
    return single(load(state, address, format)[1], address)


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


def check_one_stdin(*paths: str | None) -> None:
    """Refuse reading stdin twice (a session and a stash both given as `-`)."""
    if sum(1 for p in paths if p is not None and split_address(p)[0] == STDIO) > 1:
        raise BadInputError("stdin ('-') can be read only once", path=STDIN_NAME)


def sidecar_of(address: str) -> str | None:
    """The recovery store `run -o FILE` wrote beside FILE (`FILE.recovery.jsonl`), if any."""
    from ..recovery import sidecar_path

    file, _ = split_address(address)
    if file == STDIO:
        return None
    path = sidecar_path(file)
    return path if Path(path).is_file() else None


def with_sidecar(ctx: AgentContext, address: str) -> AgentContext:
    """`ctx` with the entries of the store beside its file added to its recovery store, so that
    compacting a compacted output again keeps what the first run removed. Each entry is checked
    against its etag first (exit 2 naming the store and a tampered etag): a bad entry is never
    copied into a new output's store. A marker whose content is in no store (the store beside
    the file missing, empty or not the one written with it) is exit 2 naming that store, before
    any strategy runs: compacting it again would lose what it stands for."""
    from ..recovery import read_sidecar, sidecar_path, verify
    from ..validate import dangling

    path = sidecar_of(address)
    entries: dict[str, str] = {}
    if path is not None:
        entries = read_sidecar(path)
        try:
            verify(entries)
        except BadInputError as exc:
            raise BadInputError(exc.what, path=path) from None
        ctx = ctx.replace(recovery={**entries, **ctx.recovery})
    lost = sorted({marker.etag for _, marker in dangling(ctx)})
    if not lost:
        return ctx
    file, _ = split_address(address)
    hint = "put back the store written with it, or expand it with --stash first"
    if file == STDIO:
        where = "the context's recovery store lacks them"
        hint = "expand it with --stash first, or compact with --embed-recovery"
    elif path is None:
        where = f"its recovery store {sidecar_path(file)} is missing"
    elif not entries:
        where = f"its recovery store {path} is empty"
    else:
        where = f"its recovery store {path} lacks them"
    raise BadInputError(
        f"{len(lost)} marker(s) cannot be restored (etag {', '.join(lost[:3])}"
        f"{' ...' if len(lost) > 3 else ''}): {where}",
        path=file,
        hint=hint,
    )


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
