"""Where serve states live between calls: in memory, or in SQLite for servers that run several
processes (one transaction per serve, so concurrent writers never lose an update).

`peek` says what a serve would send without recording it: a server that records a serve only once
its answer is on the wire (`serve` after sending) never holds a marker for content the client did
not receive."""

from __future__ import annotations

import json
import logging
import sqlite3
import threading
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Protocol

from pydantic import ValidationError

from ..errors import BadInputError, ConfigError
from ..events import Event
from .state import Served, ServedPayload, ServeState, compaction_loss

log = logging.getLogger("compactkit.serve")


class ServeStore(Protocol):
    """Serve states by session id."""

    def load(self, session: str) -> ServeState:
        """The session's state (empty when it has none)."""
        ...

    def serve(self, session: str, key: str, payload: str, **options: Any) -> Served:
        """`ServeState.serve` on the session's state, saving the result."""
        ...

    def peek(self, session: str, key: str, payload: str, **options: Any) -> Served:
        """What `serve` would send, without recording it."""
        ...

    def keep(self, session: str, key: str, served: Served) -> bool:
        """Record a `peek` result as served; False (nothing recorded) when the session served
        anything since that peek: then `serve` again."""
        ...

    def reset(self, session: str, etags: Iterable[str] | None = None) -> None:
        """`ServeState.reset` on the session's state."""
        ...

    def compacted(self, session: str, event: Event) -> None:
        """`ServeState.after_compaction` on the session's state."""
        ...


def observer(store: ServeStore, session: str) -> Callable[[Event], None]:
    """An observer for `Pipeline.subscribe` that forgets what a compaction removed."""

    def observe(event: Event) -> None:
        store.compacted(session, event)

    return observe


class MemoryServeStore:
    """Serve states held in this process (thread-safe). A serve touches its own key's entry only,
    so its cost does not grow with what the session served before."""

    def __init__(self) -> None:
        self._calls: dict[str, int] = {}
        self._entries: dict[str, dict[str, ServedPayload]] = {}
        self._lock = threading.Lock()

    def load(self, session: str) -> ServeState:
        with self._lock:
            served = dict(self._entries.get(session, {}))
            return ServeState(calls=self._calls.get(session, 0), served=served)

    def _one(self, session: str, key: str) -> ServeState:
        entry = self._entries.get(session, {}).get(key)
        served = {} if entry is None else {key: entry}
        return ServeState(calls=self._calls.get(session, 0), served=served)

    def peek(self, session: str, key: str, payload: str, **options: Any) -> Served:
        with self._lock:
            return self._one(session, key).serve(key, payload, **options)

    def serve(self, session: str, key: str, payload: str, **options: Any) -> Served:
        """`ServeState.serve` on the session's call count and this key's entry; the `Served`
        state holds that key only."""
        with self._lock:
            served = self._one(session, key).serve(key, payload, **options)
            self._calls[session] = served.state.calls
            self._entries.setdefault(session, {})[key] = served.state.served[key]
            return served

    def keep(self, session: str, key: str, served: Served) -> bool:
        with self._lock:
            if self._calls.get(session, 0) != served.call - 1:
                return False
            self._calls[session] = served.call
            self._entries.setdefault(session, {})[key] = served.state.served[key]
            return True

    def reset(self, session: str, etags: Iterable[str] | None = None) -> None:
        gone = None if etags is None else list(etags)
        with self._lock:
            state = ServeState(served=self._entries.get(session, {})).reset(gone)
            self._entries[session] = dict(state.served)

    def compacted(self, session: str, event: Event) -> None:
        lost = compaction_loss(event)
        if lost is not False:
            self.reset(session, lost)


class SqliteServeStore:
    """Serve states in a SQLite file (stdlib `sqlite3`), shared by every process that opens it.

    One row per session (its call count) and one per served key, so a serve reads and writes the
    rows of its own key: its cost does not grow with what the session served before. Each
    operation is one `BEGIN IMMEDIATE` transaction, so two processes serving the same session at
    once are serialized, never interleaved. A file that is not such a database is a
    `BadInputError` naming it; a row that cannot be read is forgotten with a warning (what it
    recorded is sent in full again; an unreadable call count forgets its whole session).
    """

    def __init__(self, path: str | Path, *, timeout: float = 30.0) -> None:
        self.path = str(path)
        if not self.path:  # SQLite would open a private temporary database: shared with no one
            raise ConfigError(
                "the serve-state file path is empty (is the variable it came from unset?)"
            )
        self.timeout = timeout
        self._local = threading.local()
        with self._guard():
            db = self._connect()
            db.execute("PRAGMA journal_mode=WAL")
            db.execute("BEGIN IMMEDIATE")
            try:
                db.execute(
                    "CREATE TABLE IF NOT EXISTS serve_session "
                    "(session TEXT PRIMARY KEY, calls INTEGER NOT NULL) WITHOUT ROWID"
                )
                db.execute(
                    "CREATE TABLE IF NOT EXISTS serve_entry (session TEXT NOT NULL, "
                    "key TEXT NOT NULL, entry TEXT NOT NULL, PRIMARY KEY (session, key)) "
                    "WITHOUT ROWID"
                )
                self._migrate(db)
                db.execute("COMMIT")
            except BaseException:
                db.execute("ROLLBACK")
                raise

    @contextmanager
    def _guard(self) -> Iterator[None]:
        try:
            yield
        except sqlite3.DatabaseError as exc:
            raise BadInputError(
                f"not a usable serve-state database ({exc})",
                path=self.path,
                hint="remove it to start afresh, or name another --state file",
            ) from exc

    def _migrate(self, db: sqlite3.Connection) -> None:
        """Import the states of the first layout (one JSON row per session)."""
        old = db.execute(
            "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'serve_state'"
        ).fetchone()
        if old is None:
            return
        for session, text in db.execute("SELECT session, state FROM serve_state").fetchall():
            try:
                state = ServeState.model_validate_json(text)
            except ValidationError:
                self._warn(session, "its saved state")
                continue
            self._write(db, session, state.calls, state.served.items())
        db.execute("DROP TABLE serve_state")

    def _warn(self, session: str, what: str) -> None:
        log.warning(
            "%s: serve state of session %r: %s cannot be read; forgotten (sent in full again)",
            self.path,
            session,
            what,
        )

    def _connect(self) -> sqlite3.Connection:
        db: sqlite3.Connection | None = getattr(self._local, "db", None)
        if db is None:
            db = sqlite3.connect(self.path, timeout=self.timeout, isolation_level=None)
            # WAL without a sync per commit: a power cut may lose the last serves recorded, and a
            # serve not recorded is only sent in full again
            db.execute("PRAGMA synchronous=NORMAL")
            self._local.db = db
        return db

    def _calls(self, db: sqlite3.Connection, session: str) -> int:
        """The session's call count; one that cannot be read forgets the session (markers name
        calls by number), with a warning."""
        row = db.execute("SELECT calls FROM serve_session WHERE session = ?", (session,)).fetchone()
        if row is None:
            return 0
        if isinstance(row[0], int) and row[0] >= 0:
            return row[0]
        self._warn(session, "its call count")
        db.execute("DELETE FROM serve_entry WHERE session = ?", (session,))
        db.execute("DELETE FROM serve_session WHERE session = ?", (session,))
        return 0

    def _entry(self, session: str, key: str, text: str) -> ServedPayload | None:
        try:
            return ServedPayload.model_validate_json(text)
        except ValidationError:
            self._warn(session, f"the entry of key {key!r}")
            return None

    def _one(self, db: sqlite3.Connection, session: str, key: str) -> ServeState:
        """The session's call count and what it served under `key` (all a serve reads)."""
        calls = self._calls(db, session)  # first: an unreadable count forgets the entries
        row = db.execute(
            "SELECT entry FROM serve_entry WHERE session = ? AND key = ?", (session, key)
        ).fetchone()
        entry = None if row is None else self._entry(session, key, row[0])
        served = {} if entry is None else {key: entry}
        return ServeState(calls=calls, served=served)

    def _all(self, db: sqlite3.Connection, session: str) -> ServeState:
        calls = self._calls(db, session)
        rows = db.execute(
            "SELECT key, entry FROM serve_entry WHERE session = ?", (session,)
        ).fetchall()
        served = {}
        for key, text in rows:
            entry = self._entry(session, key, text)
            if entry is not None:
                served[key] = entry
        return ServeState(calls=calls, served=served)

    @staticmethod
    def _write(
        db: sqlite3.Connection,
        session: str,
        calls: int,
        entries: Iterable[tuple[str, ServedPayload]],
    ) -> None:
        db.execute(
            "INSERT OR REPLACE INTO serve_session (session, calls) VALUES (?, ?)", (session, calls)
        )
        db.executemany(
            "INSERT OR REPLACE INTO serve_entry (session, key, entry) VALUES (?, ?, ?)",
            [(session, key, entry.model_dump_json()) for key, entry in entries],
        )

    def _transaction(self, change: Callable[[sqlite3.Connection], Any]) -> Any:
        with self._guard():
            db = self._connect()
            db.execute("BEGIN IMMEDIATE")
            try:
                result = change(db)
                db.execute("COMMIT")
            except BaseException:
                db.execute("ROLLBACK")
                raise
            return result

    def load(self, session: str) -> ServeState:
        with self._guard():
            return self._all(self._connect(), session)

    def peek(self, session: str, key: str, payload: str, **options: Any) -> Served:
        with self._guard():
            return self._one(self._connect(), session, key).serve(key, payload, **options)

    def serve(self, session: str, key: str, payload: str, **options: Any) -> Served:
        """`ServeState.serve` on the session's call count and this key's entry; the `Served`
        state holds that key only."""

        def change(db: sqlite3.Connection) -> Served:
            served = self._one(db, session, key).serve(key, payload, **options)
            self._write(db, session, served.state.calls, [(key, served.state.served[key])])
            return served

        served: Served = self._transaction(change)
        return served

    def keep(self, session: str, key: str, served: Served) -> bool:
        def change(db: sqlite3.Connection) -> bool:
            if self._calls(db, session) != served.call - 1:
                return False
            self._write(db, session, served.call, [(key, served.state.served[key])])
            return True

        kept: bool = self._transaction(change)
        return kept

    def reset(self, session: str, etags: Iterable[str] | None = None) -> None:
        gone = None if etags is None else frozenset(etags)

        def change(db: sqlite3.Connection) -> None:
            if gone is None:
                db.execute("DELETE FROM serve_entry WHERE session = ?", (session,))
                return
            rows = db.execute(
                "SELECT key, entry FROM serve_entry WHERE session = ?", (session,)
            ).fetchall()
            drop = [(session, key) for key, text in rows if _holds(text, gone)]
            db.executemany("DELETE FROM serve_entry WHERE session = ? AND key = ?", drop)

        self._transaction(change)

    def compacted(self, session: str, event: Event) -> None:
        lost = compaction_loss(event)
        if lost is not False:
            self.reset(session, lost)

    def close(self) -> None:
        db: sqlite3.Connection | None = getattr(self._local, "db", None)
        if db is not None:
            db.close()
            self._local.db = None


def _holds(text: str, etags: frozenset[str]) -> bool:
    """Whether a saved entry (or one that cannot be read: forget it) names one of `etags`."""
    try:
        entry = json.loads(text)
        fields = entry.get("fields") or {}
        return entry.get("etag") in etags or any(f.get("etag") in etags for f in fields.values())
    except (ValueError, AttributeError, TypeError):
        return True
