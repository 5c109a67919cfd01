"""Loading and writing sessions: `FILE#N` addresses, format detection, atomic writes."""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import os
import re
import signal
import tempfile
import threading
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import TextIO

from .context import AgentContext
from .errors import BadInputError, CompactkitError, ConfigError, PluginError
from .formats._sqlite import refuse_sqlite, sidecar_of
from .formats._util import SKIPPED_KEY, is_sqlite
from .formats.base import BadLine, Document, Format, read_document
from .formats.export import Export, ExportNotes, NotingWriter, WriterOptions
from .registry import Registry, current_registry

_ADDRESS = re.compile(r"^(?P<path>.+)#(?P<index>-?\d+)$")


def split_address(address: str | Path) -> tuple[str, int | None]:
    """`"FILE#N"` -> ("FILE", N); a plain path (or one whose file really ends in #N) -> (path, None)."""
    text = str(address)
    if Path(text).exists():
        return text, None
    match = _ADDRESS.match(text)
    if match is None:
        file, hash, suffix = text.rpartition("#")
        if hash and file and (file == "-" or Path(file).is_file()):
            raise BadInputError(
                f"FILE#N selects the N-th conversation (0-based) of FILE; got '#{suffix}'",
                path=file,
            )
        return text, None
    return match.group("path"), int(match.group("index"))


def detect_format(doc: Document, registry: Registry | None = None) -> Format:
    """The format that recognises `doc` (the highest-priority one when several do)."""
    return detect_formats(doc, registry)[0]


def detect_formats(doc: Document, registry: Registry | None = None) -> list[Format]:
    """Every format that recognises `doc`, highest priority first (ties by name)."""
    registry = registry or current_registry()
    matches: list[Format] = []
    for _, fmt in registry.formats.items():
        try:
            if fmt.sniff(doc):
                matches.append(fmt)
        except Exception:  # a sniffer that crashes just does not match
            continue
    if not matches:
        known = ", ".join(registry.formats.names())
        raise BadInputError(
            "unknown session format",
            path=doc.path,
            hint=f"known formats: {known}; pass --format NAME if it is one of them",
        )
    matches.sort(key=lambda f: (-f.priority, f.name))
    return matches


def load_document(
    doc: Document,
    format: str | None = None,
    registry: Registry | None = None,
    *,
    reread: Callable[[], Document] | None = None,
) -> tuple[Format, list[AgentContext]]:
    """(format, conversations) of `doc`: read as `format`, else as each format that recognises
    it in turn (`detect_formats`) until one loads it; the error names every format tried.

    `reread` reads `doc` again: given, `doc` is the loading's own, so a format lets go of each
    raw record as it converts it (`Document.take`), and a format tried after one that failed
    is given the document read again, never one that an attempt left half taken."""
    registry = registry or current_registry()
    candidates = [registry.formats.get(format)] if format else detect_formats(doc, registry)
    failures: list[CompactkitError] = []
    for number, fmt in enumerate(candidates):
        if reread is not None:
            doc = dataclasses.replace(reread() if number else doc, reread=reread)
        try:
            return fmt, _load_as(fmt, doc)
        except CompactkitError as exc:
            failures.append(exc)
    if len(failures) == 1:
        raise failures[0]
    tried = "; ".join(
        f"{fmt.name}: {exc.what if isinstance(exc, BadInputError) else exc}"
        for fmt, exc in zip(candidates, failures, strict=True)
    )
    raise BadInputError(f"no format that recognises it could load it ({tried})", path=doc.path)


def _load_as(fmt: Format, doc: Document) -> list[AgentContext]:
    skipped = _skippable(fmt, doc)
    try:
        contexts = fmt.load(doc)
    except (BadInputError, ConfigError, PluginError):
        raise
    except Exception as exc:
        raise BadInputError(
            f"cannot load as {fmt.name}: {type(exc).__name__}: {exc}".splitlines()[0],
            path=doc.path,
        ) from exc
    if not contexts:
        raise BadInputError(f"no conversation found (read as {fmt.name})", path=doc.path)
    if skipped:
        _warn_skipped(doc.path, skipped, fmt.name)
        contexts = [_count_skipped(ctx, len(skipped)) for ctx in contexts]
    return contexts


MALFORMED_LINE = "malformed line"
"""The `skipped_records` kind of a JSONL line that was not JSON, skipped as its agent skips it."""


def _skippable(fmt: Format, doc: Document) -> tuple[BadLine, ...]:
    """The lines of `doc` that are not JSON and that `fmt` skips; an error naming the first one
    when `fmt` refuses it (as its agent does)."""
    bad = doc.bad_lines
    if not bad or fmt.malformed_lines == "skip":
        return bad
    if fmt.malformed_lines == "skip-last" and len(bad) == 1 and bad[0].last:
        return bad
    first = bad[0] if fmt.malformed_lines == "refuse" else next(b for b in bad if not b.last)
    raise BadInputError(
        f"invalid or truncated JSONL record: {first.reason}",
        path=first.path or doc.path,
        line=first.line,
        hint="repair or remove that line"
        + (" (only a torn last line is skipped)" if fmt.malformed_lines == "skip-last" else ""),
    )


def _warn_skipped(path: str, bad: tuple[BadLine, ...], fmt: str) -> None:
    """One warning (logger `compactkit.formats`) naming the file and the lines skipped."""
    if len(bad) == 1:
        where, what = f"{bad[0].path or path}:{bad[0].line}", f"a malformed line ({bad[0].reason})"
    else:
        numbers = ", ".join(f"{b.path}:{b.line}" if b.path else str(b.line) for b in bad[:10]) + (
            ", ..." if len(bad) > 10 else ""
        )
        where, what = path, f"{len(bad)} malformed lines ({numbers})"
    logging.getLogger("compactkit.formats").warning(
        "%s: skipped %s, as the %s agent does", where, what, fmt
    )


def _count_skipped(ctx: AgentContext, count: int) -> AgentContext:
    meta = dict(ctx.metadata)
    raw = meta.pop(SKIPPED_KEY, None)
    counts = dict(raw) if isinstance(raw, dict) else {}
    counts[MALFORMED_LINE] = int(counts.get(MALFORMED_LINE) or 0) + count  # type: ignore[arg-type]
    meta[SKIPPED_KEY] = dict(sorted(counts.items()))
    return ctx.replace(metadata=meta)


def read_session(path: str | Path, registry: Registry | None = None) -> Document:
    """The session at `path`: a layout of several files a format recognises (`read_layout`: an
    OpenHands conversation directory, a Claude Code session with its subagents' files), else the
    one file `read_document` reads."""
    registry = registry or current_registry()
    target = Path(path)
    for _, fmt in registry.formats.items():
        try:
            doc: Document | None = fmt.read_layout(target)
        except (BadInputError, ConfigError, PluginError):
            raise
        except OSError as exc:
            raise BadInputError(f"cannot read: {exc.strerror}", path=str(path)) from None
        except Exception as exc:
            raise BadInputError(
                f"cannot read as {fmt.name}: {type(exc).__name__}: {exc}".splitlines()[0],
                path=str(path),
            ) from exc
        if doc is not None:
            return doc
    if is_sqlite(target):  # no reader took it: say what it is, never "binary data"
        raise refuse_sqlite(target, SQLITE_READERS)
    sidecar = sidecar_of(target)
    if sidecar is not None:
        raise sidecar
    return read_document(path)


SQLITE_READERS = (
    "Crush's crush.db, OpenCode's opencode.db (sst's and the Go OpenCode's), Goose's sessions.db"
    " and cursor-agent's store.db"
)
"""What the built-in readers read in SQLite, named when a SQLite file is refused."""


def load_session(
    path: str | Path, format: str | None = None, registry: Registry | None = None
) -> tuple[Format, list[AgentContext]]:
    """(format, conversations) of the session at `path` (a file or a layout, no `#N`): read for
    this loading alone, so that its raw records are let go of as they are converted."""
    return load_document(
        read_session(path, registry), format, registry, reread=lambda: read_session(path, registry)
    )


def load(
    path: str | Path, *, format: str | None = None, registry: Registry | None = None
) -> list[AgentContext]:
    """Every conversation in a session file (or the one a `FILE#N` address names)."""
    file, index = split_address(path)
    _, contexts = load_session(file, format, registry)
    if index is None:
        return contexts
    return [pick(contexts, index, file)]


def load_one(
    path: str | Path, *, format: str | None = None, registry: Registry | None = None
) -> AgentContext:
    """The one conversation `FILE#N` names; a plain `FILE` must hold exactly one."""
    file, index = split_address(path)
    _, contexts = load_session(file, format, registry)
    if index is None:
        return single(contexts, file)
    return pick(contexts, index, file)


def single(contexts: Sequence[AgentContext], file: str) -> AgentContext:
    """The only conversation of a file, or a one-line error saying how to pick one."""
    if len(contexts) != 1:
        raise BadInputError(
            f"holds {len(contexts)} conversations",
            path=file,
            hint=f"pick one with {file}#N, N from 0 to {len(contexts) - 1}",
        )
    return contexts[0]


def pick(contexts: Sequence[AgentContext], index: int, file: str) -> AgentContext:
    if not 0 <= index < len(contexts):
        raise BadInputError(
            f"conversation #{index} out of range",
            path=file,
            hint=f"the file holds {len(contexts)}; use #0 to #{len(contexts) - 1}",
        )
    return contexts[index]


def _writer(format: str, registry: Registry | None) -> Format:
    registry = registry or current_registry()
    fmt: Format = registry.formats.get(format)
    if not fmt.can_write:
        writers = ", ".join(n for n, f in registry.formats.items() if f.can_write)
        raise ConfigError(f"format {format!r} cannot be written (writers: {writers})")
    return fmt


def render(
    contexts: AgentContext | Sequence[AgentContext],
    format: str = "compactkit",
    registry: Registry | None = None,
) -> str:
    """File text for `contexts` in `format`."""
    items = [contexts] if isinstance(contexts, AgentContext) else list(contexts)
    text: str = _writer(format, registry).dump(items)
    return text


def export(
    contexts: AgentContext | Sequence[AgentContext],
    format: str,
    options: WriterOptions | None = None,
    registry: Registry | None = None,
) -> Export:
    """`contexts` written in `format` with what writing them dropped or changed (`Export.notes`;
    `Export.warning(format)` says it in one line): with `WriterOptions(request=True)` a provider
    format gives a request its API accepts."""
    fmt = _writer(format, registry)
    items = [contexts] if isinstance(contexts, AgentContext) else list(contexts)
    if isinstance(fmt, NotingWriter):
        return fmt.export(items, options)
    if options is not None and options != WriterOptions():
        raise ConfigError(f"format {format!r} takes no writer options (they are for providers)")
    return Export(text=fmt.dump(items), notes=ExportNotes())


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


def dump(
    contexts: AgentContext | Sequence[AgentContext],
    path: str | Path,
    *,
    format: str = "compactkit",
    registry: Registry | None = None,
) -> None:
    """Write `contexts` to `path` in `format`, atomically."""
    write_atomic(path, render(contexts, format, registry))
