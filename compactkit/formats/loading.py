"""Sessions in: a session address (`FILE`, `FILE#N`, `-` for stdin) parsed once into a frozen
`SessionAddress`, and read into `AgentContext`s: a layout of files or one file (or stdin), read as
the format that recognises it; one conversation picked by `FILE#N`; a compacted output read with
the recovery store written beside it, so that Python (`compactkit.load`) and the command line read
one file the same way."""

from __future__ import annotations

import dataclasses
import logging
import re
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

from ..context import AgentContext
from ..errors import BadInputError, CompactkitError, ConfigError, PluginError
from ..recovery import dangling, read_sidecar, sidecar_path, verify
from ..registry import Registry, current_registry
from ._sqlite import refuse_sqlite, sidecar_of
from ._util import SKIPPED_KEY, is_sqlite
from .base import BadLine, Document, Format, parse_text, read_document

STDIN = "-"
"""The address, and the file of `-#N`, that names standard input."""

STDIN_NAME = "<stdin>"
"""What errors about standard input name as its path."""

_INDEXED = re.compile(r"^(?P<path>.+)#(?P<index>-?\d+)$")


@dataclasses.dataclass(frozen=True)
class SessionAddress:
    """A session address, parsed: `text` as given, the `file` it names (`-` for stdin) and the
    0-based `index` of the one conversation it picks (None: every conversation of the file).

    Build one with `SessionAddress.parse(text)`; an address parsed once is passed on, never its
    text parsed again."""

    text: str
    file: str
    index: int | None = None

    @classmethod
    def parse(cls, address: str | Path | SessionAddress) -> SessionAddress:
        """`"FILE#N"` -> file FILE, index N; a plain path, or the name of a file that really ends
        in `#N`, -> that path, no index. Only a name holding `#` is looked up on disk.

        Args:
            address: the text a user gave (a `SessionAddress` is returned as it is).

        Returns:
            The parsed address.

        Raises:
            BadInputError: FILE exists but what follows its `#` is not a conversation number."""
        if isinstance(address, SessionAddress):
            return address
        text = str(address)
        if "#" not in text or Path(text).exists():
            return cls(text, text)
        match = _INDEXED.match(text)
        if match is None:
            file, _, suffix = text.rpartition("#")
            if file and (file == STDIN or Path(file).is_file()):
                raise BadInputError(
                    f"FILE#N selects the N-th conversation (0-based) of FILE; got '#{suffix}'",
                    path=file,
                )
            return cls(text, text)
        return cls(text, match.group("path"), int(match.group("index")))

    @property
    def stdin(self) -> bool:
        """Whether the session is read from standard input."""
        return self.file == STDIN

    @property
    def sidecar(self) -> str | None:
        """Where a compacted output at this address keeps what compaction removed
        (`FILE.recovery.jsonl`, whether or not it exists); None for stdin."""
        return None if self.stdin else sidecar_path(self.file)

    def __str__(self) -> str:
        return self.text


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


def read_stdin() -> str:
    """All of standard input as text, with the one-line errors of a file."""
    raw: bytes = sys.stdin.buffer.read()
    if b"\x00" in raw[:65536]:
        raise BadInputError("binary data, not a text session file", path=STDIN_NAME)
    try:
        return raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise BadInputError(
            f"not UTF-8 text (bad byte at offset {exc.start})", path=STDIN_NAME
        ) from None


def load_address(
    address: str | Path | SessionAddress,
    format: str | None = None,
    registry: Registry | None = None,
    *,
    recovery: bool = True,
    restorable: bool = False,
) -> tuple[Format, list[AgentContext]]:
    """The session an address names, read as a compacted output is read.

    Args:
        address: `FILE`, `FILE#N` (that one conversation) or `-` (stdin), as text or parsed.
        format: the format to read it as (default: the one that recognises it).
        registry: the plugins' registry (default: the current one).
        recovery: add the entries of the recovery store written beside the file
            (`FILE.recovery.jsonl`, each checked against its etag) to each conversation's
            recovery store, so that its markers can be expanded and compacting it again keeps
            what the first run removed.
        restorable: refuse a conversation holding a marker whose content is in no store.

    Returns:
        (the format it was read as, its conversations).

    Raises:
        BadInputError: an unreadable session, a conversation number out of range, a recovery
            store entry that does not match its etag, or (with `restorable`) a marker that
            cannot be restored, the error naming the store that lacks it."""
    where = SessionAddress.parse(address)
    if where.stdin:
        fmt, contexts = load_document(parse_text(read_stdin(), STDIN_NAME), format, registry)
    else:
        fmt, contexts = load_session(where.file, format, registry)
    if where.index is not None:
        contexts = [pick(contexts, where.index, where.file)]
    store = where.sidecar if recovery else None
    if store is not None and Path(store).is_file():
        contexts = _with_store(contexts, store)
    if restorable:
        for ctx in contexts:
            _check_restorable(ctx, where)
    return fmt, contexts


def _with_store(contexts: list[AgentContext], store: str) -> list[AgentContext]:
    """`contexts`, each with the entries of the recovery store at `store` added to its own (a
    bad entry is never copied into a context: exit 2 naming the store and its etag)."""
    entries = read_sidecar(store)
    try:
        verify(entries)
    except BadInputError as exc:
        raise BadInputError(exc.what, path=store) from None
    return [ctx.replace(recovery={**entries, **ctx.recovery}) for ctx in contexts]


def _check_restorable(ctx: AgentContext, where: SessionAddress) -> None:
    """Refuse `ctx` when one of its markers stands for content in no store (its recovery store
    beside the file missing, empty or not the one written with it): compacting it again would
    lose what that marker stands for."""
    lost = sorted({marker.etag for _, marker in dangling(ctx)})
    if not lost:
        return
    store = where.sidecar
    hint = "put back the store written with it, or expand it with --stash first"
    if store is None:
        reason = "the context's recovery store lacks them"
        hint = "expand it with --stash first, or compact with --embed-recovery"
    elif not Path(store).is_file():
        reason = f"its recovery store {store} is missing"
    elif not read_sidecar(store):
        reason = f"its recovery store {store} is empty"
    else:
        reason = f"its recovery store {store} lacks them"
    raise BadInputError(
        f"{len(lost)} marker(s) cannot be restored (etag {', '.join(lost[:3])}"
        f"{' ...' if len(lost) > 3 else ''}): {reason}",
        path=where.file,
        hint=hint,
    )


def load(
    path: str | Path | SessionAddress,
    *,
    format: str | None = None,
    registry: Registry | None = None,
    recovery: bool = True,
    restorable: bool = False,
) -> list[AgentContext]:
    """Every conversation of a session (or the one a `FILE#N` address names; `-` reads stdin).

    A compacted output is read with the recovery store written beside it: `load("out.json")`
    reads what `compactkit run out.json` reads.

    Args:
        path: `FILE`, `FILE#N` or `-`.
        format: the format to read it as (default: the one that recognises it).
        registry: the plugins' registry (default: the current one).
        recovery: add the entries of the recovery store beside the file (`FILE.recovery.jsonl`)
            to each conversation's recovery store (False: read the file alone).
        restorable: refuse a conversation holding a marker whose content is in no store.

    Returns:
        The conversations, in file order.

    Raises:
        BadInputError: the session cannot be read (one line naming the file; see
            `load_address`)."""
    return load_address(path, format, registry, recovery=recovery, restorable=restorable)[1]


def load_one(
    path: str | Path | SessionAddress,
    *,
    format: str | None = None,
    registry: Registry | None = None,
    recovery: bool = True,
    restorable: bool = False,
) -> AgentContext:
    """The one conversation `FILE#N` names; a plain `FILE` must hold exactly one. Read as `load`
    reads it (same arguments).

    Raises:
        BadInputError: the session cannot be read, or `FILE` holds several conversations (the
            error says how to pick one)."""
    _, contexts = load_address(path, format, registry, recovery=recovery, restorable=restorable)
    return single(contexts, str(path))  # `FILE#N` gives one: only a plain FILE can hold more


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
