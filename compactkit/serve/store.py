"""Where serve states live between calls: in memory, or in SQLite for servers that run several
processes (one transaction per serve, so concurrent writers never lose an update)."""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any, Protocol

from ..events import Event
from .state import Served, ServeState


class ServeStore(Protocol):
    """Serve states by session id."""

    def load(self, session: str) -> ServeState:
        """The session's state (empty when it has none)."""
        ...

    def serve(self, session: str, key: str, payload: str, **options: Any) -> Served:
        """`ServeState.serve` on the session's state, saving the result."""
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
    """Serve states held in this process (thread-safe)."""

    def __init__(self) -> None:
        self._states: dict[str, ServeState] = {}
        self._lock = threading.Lock()

    def load(self, session: str) -> ServeState:
        with self._lock:
            return self._states.get(session, ServeState())

    def _update(self, session: str, change: Callable[[ServeState], ServeState]) -> None:
        with self._lock:
            self._states[session] = change(self._states.get(session, ServeState()))

    def serve(self, session: str, key: str, payload: str, **options: Any) -> Served:
        with self._lock:
            served = self._states.get(session, ServeState()).serve(key, payload, **options)
            self._states[session] = served.state
            return served

    def reset(self, session: str, etags: Iterable[str] | None = None) -> None:
        gone = None if etags is None else list(etags)
        self._update(session, lambda s: s.reset(gone))

    def compacted(self, session: str, event: Event) -> None:
        self._update(session, lambda s: s.after_compaction(event))


class SqliteServeStore:
    """Serve states in a SQLite file (stdlib `sqlite3`), shared by every process that opens it.

    Each operation is one `BEGIN IMMEDIATE` transaction: read the session's state, change it, write
    it back, so two processes serving the same session at once are serialized, never interleaved.
    """

    def __init__(self, path: str | Path, *, timeout: float = 30.0) -> None:
        self.path = str(path)
        self.timeout = timeout
        self._local = threading.local()
        with self._connect() as db:
            db.execute("PRAGMA journal_mode=WAL")
            db.execute(
                "CREATE TABLE IF NOT EXISTS serve_state (session TEXT PRIMARY KEY, state TEXT)"
            )

    def _connect(self) -> sqlite3.Connection:
        db: sqlite3.Connection | None = getattr(self._local, "db", None)
        if db is None:
            db = sqlite3.connect(self.path, timeout=self.timeout, isolation_level=None)
            self._local.db = db
        return db

    def _read(self, db: sqlite3.Connection, session: str) -> ServeState:
        row = db.execute("SELECT state FROM serve_state WHERE session = ?", (session,)).fetchone()
        return ServeState() if row is None else ServeState.model_validate_json(row[0])

    def _transaction(self, session: str, change: Callable[[ServeState], Any]) -> Any:
        db = self._connect()
        db.execute("BEGIN IMMEDIATE")
        try:
            result = change(self._read(db, session))
            state = result.state if isinstance(result, Served) else result
            db.execute(
                "INSERT OR REPLACE INTO serve_state (session, state) VALUES (?, ?)",
                (session, state.model_dump_json()),
            )
            db.execute("COMMIT")
        except BaseException:
            db.execute("ROLLBACK")
            raise
        return result

    def load(self, session: str) -> ServeState:
        return self._read(self._connect(), session)

    def serve(self, session: str, key: str, payload: str, **options: Any) -> Served:
        served: Served = self._transaction(session, lambda s: s.serve(key, payload, **options))
        return served

    def reset(self, session: str, etags: Iterable[str] | None = None) -> None:
        gone = None if etags is None else list(etags)
        self._transaction(session, lambda s: s.reset(gone))

    def compacted(self, session: str, event: Event) -> None:
        self._transaction(session, lambda s: s.after_compaction(event))

    def close(self) -> None:
        db: sqlite3.Connection | None = getattr(self._local, "db", None)
        if db is not None:
            db.close()
            self._local.db = None
