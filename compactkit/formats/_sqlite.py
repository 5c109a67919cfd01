"""Reading an agent's SQLite store without touching it, and refusing one no reader knows.

An agent that keeps its sessions in SQLite usually runs it in WAL mode (Crush, cursor-agent):
the newest rows sit in the `-wal` file beside the database until a checkpoint. Opening the
database itself, even read-only, may create or change the `-wal` and `-shm` files, and a
connection that may write checkpoints the log into the database when it closes. So a database in
WAL mode, or with a `-wal` beside it, is copied with its log into a temporary folder and the copy
is opened: the agent's files stay byte for byte as they were, and the log's rows are read.

A SQLite file that no reader takes is refused in one line naming its tables; the stores of known
agents that compactkit does not read say which agent wrote them and what to pass instead.
"""

from __future__ import annotations

import contextlib
import functools
import os
import shutil
import sqlite3
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path

from ..errors import BadInputError
from ._util import SQLITE_MAGIC, sqlite_read_only, sqlite_tables

_WAL_VERSION = 2
"""The file format read/write version bytes (offsets 18 and 19 of the header) of a database in
WAL mode."""


def in_wal_mode(path: Path) -> bool:
    """True when the database at `path` is in WAL mode or has a `-wal` log beside it."""
    if Path(f"{path}-wal").exists():
        return True
    with path.open("rb") as handle:
        header = handle.read(20)
    return header.startswith(SQLITE_MAGIC) and _WAL_VERSION in header[18:20]


@contextlib.contextmanager
def open_snapshot(path: Path) -> Iterator[sqlite3.Connection]:
    """A connection to the database at `path` as it is with its WAL, that changes no file of it:
    the database opened read-only, or, in WAL mode, a copy of it and its log in a temporary folder
    (rows as `sqlite3.Row`). `sqlite3.Error` when it cannot be read."""
    if not in_wal_mode(path):
        db = sqlite_read_only(path)
        try:
            yield db
        finally:
            db.close()
        return
    with tempfile.TemporaryDirectory(prefix="compactkit-sqlite-") as folder:
        copy = Path(folder) / "store.db"
        shutil.copyfile(path, copy)
        wal = Path(f"{path}-wal")
        if wal.exists():
            shutil.copyfile(wal, Path(f"{copy}-wal"))
        db = sqlite3.connect(copy)
        db.row_factory = sqlite3.Row
        try:
            yield db
        finally:
            db.close()


def columns(db: sqlite3.Connection, table: str) -> dict[str, str]:
    """The columns of `table` with their declared types, upper-cased (empty when no such table)."""
    return {r[1]: str(r[2]).upper() for r in db.execute(f"PRAGMA table_info({table})")}


def schema_of(path: Path) -> tuple[frozenset[str], dict[str, dict[str, str]]]:
    """(table names, columns of each) of the database at `path`, read as `open_snapshot` reads it
    (once while its files are unchanged: each reader asks); `BadInputError` when it cannot be
    read."""
    stamp = tuple(
        (s.st_mtime_ns, s.st_size) if (s := _stat(Path(f"{path}{end}"))) else None
        for end in ("", "-wal")
    )
    try:
        return _schema(str(path), stamp)
    except (sqlite3.Error, OSError) as exc:
        raise BadInputError(f"cannot read the SQLite database: {exc}", path=str(path)) from None


def _stat(path: Path) -> os.stat_result | None:
    try:
        return path.stat()
    except OSError:
        return None


@functools.lru_cache(maxsize=8)
def _schema(path: str, _stamp: object) -> tuple[frozenset[str], dict[str, dict[str, str]]]:
    with open_snapshot(Path(path)) as db:
        tables = sqlite_tables(db)
        return frozenset(tables), {t: columns(db, t) for t in tables}


Schema = tuple[frozenset[str], dict[str, dict[str, str]]]

_KNOWN: tuple[tuple[Callable[[Schema], bool], str, str], ...] = (
    (
        lambda schema: "cursorDiskKV" in schema[0],
        "Cursor's editor state database (state.vscdb), not a session compactkit reads",
        "pass the agent's transcript, ~/.cursor/projects/<project>/agent-transcripts/<id>.jsonl,"
        " or a cursor-agent chat, ~/.cursor/chats/<hash>/<id>/store.db",
    ),
    (
        lambda schema: "ItemTable" in schema[0],
        "a VS Code-style state database (state.vscdb), not a session compactkit reads",
        "Cline and Roo Code keep a task in tasks/<id>/api_conversation_history.json;"
        " Cursor's agent in ~/.cursor/projects/<project>/agent-transcripts/<id>.jsonl",
    ),
    (
        lambda schema: "rollout_path" in schema[1].get("threads", {}),
        "Codex's state database (state_<n>.sqlite): it lists the threads, whose messages are in"
        " their rollout files",
        "pass a thread's rollout, ~/.codex/sessions/<yyyy>/<mm>/<dd>/rollout-<...>.jsonl"
        " (its rollout_path)",
    ),
    (
        lambda schema: {"blobs", "meta"} <= schema[0],
        "a cursor-agent store.db with no conversation in it (its meta row names no root blob)",
        "pass the store.db of a chat that has messages, with its store.db-wal beside it",
    ),
)
"""Stores of known agents that no reader takes: (what tells it, what it is, what to pass)."""


_SIDECARS = {
    "-wal": "write-ahead log",
    "-shm": "shared-memory index",
    "-journal": "rollback journal",
}


def sidecar_of(path: Path) -> BadInputError | None:
    """The one-line error for a SQLite database's `-wal`, `-shm` or `-journal` file given in place
    of the database beside it; None for any other path."""
    for end, what in _SIDECARS.items():
        database = Path(str(path)[: -len(end)]) if str(path).endswith(end) else None
        if database is not None and database.is_file() and path.is_file():
            return BadInputError(
                f"the {what} of a SQLite database, not a session",
                path=str(path),
                hint=f"pass the database, {database.name}, with this file beside it",
            )
    return None


def refuse_sqlite(path: Path, readers: str) -> BadInputError:
    """The one-line error for a SQLite file no reader took: the known agent store it is and what
    to pass instead, else that it is a SQLite database, its tables, and `readers` (what compactkit
    reads in SQLite)."""
    schema = schema_of(path)
    tables = schema[0]
    for known, what, hint in _KNOWN:
        if known(schema):
            return BadInputError(what, path=str(path), hint=hint)
    names = ", ".join(sorted(tables)) if tables else "none"
    return BadInputError(
        f"a SQLite database that no compactkit reader knows (tables: {names})",
        path=str(path),
        hint=f"compactkit reads {readers}",
    )


__all__ = [
    "columns",
    "in_wal_mode",
    "open_snapshot",
    "refuse_sqlite",
    "schema_of",
    "sidecar_of",
]
