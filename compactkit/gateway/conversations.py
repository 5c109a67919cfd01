"""Per-conversation state and the persistent policy, as `compactkit bench --mode persistent`
replays it: the history is the compacted context plus what the client sent since; when it grows
past the trigger the pipeline runs on it and its output becomes the new compacted base.

What a conversation keeps between requests is only that base (the context the last compaction
returned) and how many of the client's raw items it stands for (with their digest, so a client
that rewrote its history starts over). Requests in between are the base, re-sent byte for byte,
plus the client's new items as sent. State is bounded (least recently used first, and a time to
live) and, given a sqlite file, survives a restart.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import logging
import secrets
import sqlite3
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..context import AgentContext
from ..errors import BadInputError

log = logging.getLogger("compactkit.gateway")

DB_WAIT = 0.25
"""Seconds a request waits for a state database another process holds locked."""
DB_PAUSE = 30.0
"""Seconds the gateway leaves a state database alone after it could not use it."""


@dataclass(frozen=True)
class Arrived:
    """A prompt the arrival stage made: `context` (messages through the arrival strategies) for
    the first `items` raw items of the client's request, on top of the compacted `base` it was
    made from (None: from the first message)."""

    context: AgentContext
    items: int
    base: AgentContext | None


@dataclass
class Usage:
    """What the provider reported, summed over a conversation's responses."""

    responses: int = 0
    input_tokens: int = 0
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0
    output_tokens: int = 0

    def add(self, other: Usage) -> None:
        self.responses += other.responses
        self.input_tokens += other.input_tokens
        self.cache_read_tokens += other.cache_read_tokens
        self.cache_write_tokens += other.cache_write_tokens
        self.output_tokens += other.output_tokens


@dataclass
class Conversation:
    """One conversation: the compacted base (None until the first compaction) and figures."""

    key: str
    owner: str = ""
    """The salted hash of the credential that sent it (`Conversations.tag`)."""
    base: AgentContext | None = None
    base_items: int = 0
    base_digest: str = ""
    base_read: bool = False
    """The reader has read every request since the base was made (so the base still stands
    while requests extend each other, without a digest)."""
    requests: int = 0
    compactions: int = 0
    passed_through: int = 0
    failures: int = 0
    """Requests whose compaction failed (sent as they came) or whose upstream answered an error."""
    summary_calls: int = 0
    """Summary requests sent upstream (`--summarizer upstream`, `compactkit.gateway.summary`)."""
    summaries_used: int = 0
    summary_fallbacks: int = 0
    """Compactions that kept the extractive summary (the model's not ready, failed, malformed)."""
    summary_usage: Usage = field(default_factory=Usage)
    """What the provider reported for the summary requests."""
    prepared: Any = field(default=None, repr=False)
    """The summary being prepared for the next compaction (memory only)."""
    tokens_sent: int = 0
    """Tokens of every prompt sent upstream, by compactkit's count."""
    tokens_client: int = 0
    """Tokens of every prompt as the client sent it, by compactkit's count."""
    cached_tokens: int = 0
    """Tokens of each prompt's prefix equal to the previous prompt's (what a cache can hold)."""
    last_prompt: AgentContext | None = field(default=None, repr=False)
    usage: Usage = field(default_factory=Usage)
    touched: float = field(default_factory=time.time)
    reader: Any = field(default=None, repr=False)
    """The `wire.Reader` of this conversation's requests (memory only)."""
    tally: Any = field(default=None, repr=False)
    """What the policy counted last for this conversation (memory only)."""
    ledger: Any = field(default=None, repr=False)
    """The compaction policy's `Ledger` of this conversation (memory only: after a restart the
    policy starts a new one, which only makes it wait longer)."""
    answered: int = 0
    """Messages of the client's last request: what came after them in the next one holds the
    model's answer to it (memory only)."""
    arrived: Arrived | None = field(default=None, repr=False)
    """The last prompt the arrival stage made (memory only: arrival runs again after a
    restart)."""
    folded: bool = False
    """Whether arrival changed a message of the conversation (memory only): until it does,
    requests go as they came."""
    size: int = field(default=0, repr=False)
    """The bytes it holds in memory, estimated (`Conversations.sized`)."""

    def figures(self) -> dict[str, Any]:
        return {
            "requests": self.requests,
            "compactions": self.compactions,
            "passed_through": self.passed_through,
            "failures": self.failures,
            "summary_calls": self.summary_calls,
            "summaries_used": self.summaries_used,
            "summary_fallbacks": self.summary_fallbacks,
            "summary_usage": dict(self.summary_usage.__dict__),
            "tokens_client": self.tokens_client,
            "tokens_sent": self.tokens_sent,
            "cached_tokens": self.cached_tokens,
            "usage": {
                "responses": self.usage.responses,
                "input_tokens": self.usage.input_tokens,
                "cache_read_tokens": self.usage.cache_read_tokens,
                "cache_write_tokens": self.usage.cache_write_tokens,
                "output_tokens": self.usage.output_tokens,
            },
        }

    def dump(self) -> str:
        data = {
            "base": None if self.base is None else self.base.model_dump(mode="json"),
            "base_items": self.base_items,
            "base_digest": self.base_digest,
            "owner": self.owner,
            "figures": self.figures(),
            "last_prompt": None
            if self.last_prompt is None
            else self.last_prompt.model_dump(mode="json"),
        }
        return json.dumps(data, ensure_ascii=False)

    @classmethod
    def load(cls, key: str, text: str, touched: float) -> Conversation:
        data = json.loads(text)
        conv = cls(key, touched=touched)
        if data.get("base") is not None:
            conv.base = AgentContext.model_validate(data["base"])
        if data.get("last_prompt") is not None:
            conv.last_prompt = AgentContext.model_validate(data["last_prompt"])
        conv.base_items = int(data.get("base_items", 0))
        conv.base_digest = str(data.get("base_digest", ""))
        conv.owner = str(data.get("owner", ""))
        figures = data.get("figures", {})
        for name in (
            "requests",
            "compactions",
            "passed_through",
            "failures",
            "summary_calls",
            "summaries_used",
            "summary_fallbacks",
            "tokens_client",
            "tokens_sent",
            "cached_tokens",
        ):
            setattr(conv, name, int(figures.get(name, 0)))
        conv.usage = Usage(**figures.get("usage", {}))
        conv.summary_usage = Usage(**figures.get("summary_usage", {}))
        return conv


class Conversations:
    """Conversations by key: at most `limit` in memory, dropped after `ttl` seconds unused; with
    `path`, kept in a sqlite file too (written when a conversation changes)."""

    def __init__(
        self,
        limit: int = 1000,
        ttl: float = 24 * 3600,
        path: str | None = None,
        *,
        dropped: Callable[[str], None] | None = None,
        max_bytes: int | None = None,
    ):
        """`dropped(key)` is told of each conversation let go from memory (what else holds
        something of it lets go too); `max_bytes` bounds the sizes of those held (`sized`)."""
        self.limit = limit
        self.max_bytes = max_bytes
        self._bytes = 0
        self.ttl = ttl
        self._dropped = dropped
        self.salt = secrets.token_bytes(32)
        """The key of every hash naming a conversation or a credential: random per gateway, or
        per state file (kept in it, so conversations resume after a restart)."""
        self._held: OrderedDict[str, Conversation] = OrderedDict()
        self._lock = threading.Lock()
        self._db: sqlite3.Connection | None = None
        self._paused_until = 0.0
        if path is not None:
            Path(path).parent.mkdir(parents=True, exist_ok=True)
            try:
                self._db = sqlite3.connect(path, check_same_thread=False, isolation_level=None)
                self._db.execute("PRAGMA journal_mode=WAL")
                self._db.execute(
                    "CREATE TABLE IF NOT EXISTS conversations "
                    "(key TEXT PRIMARY KEY, touched REAL, state TEXT)"
                )
                self._db.execute(
                    "DELETE FROM conversations WHERE touched < ?", (time.time() - ttl,)
                )
                self._db.execute(
                    "CREATE TABLE IF NOT EXISTS salt (id INTEGER PRIMARY KEY, salt BLOB)"
                )
                self._db.execute(
                    "INSERT OR IGNORE INTO salt (id, salt) VALUES (1, ?)",
                    (secrets.token_bytes(32),),
                )
                row = self._db.execute("SELECT salt FROM salt WHERE id = 1").fetchone()
                self.salt = bytes(row[0])
                # from now on a locked database costs a request this long, not 5 s
                self._db.execute(f"PRAGMA busy_timeout = {int(DB_WAIT * 1000)}")
            except sqlite3.DatabaseError as exc:  # not SQLite, or a path SQLite cannot open
                raise BadInputError(
                    f"not a usable gateway state database ({exc})",
                    path=path,
                    hint="remove it to start afresh, or name another --state file",
                ) from None

    def tag(self, text: str) -> str:
        """A salted hash of `text` (a credential, a conversation's shape): equal texts give equal
        tags in this gateway (or state file) alone, and a tag tells nothing of its text."""
        return hmac.new(self.salt, text.encode("utf-8"), hashlib.sha256).hexdigest()[:32]

    def get(self, key: str) -> Conversation:
        now = time.time()
        with self._lock:
            conv = self._held.pop(key, None)
            if conv is not None and now - conv.touched > self.ttl:
                self._drop(conv)
                conv = None
            if conv is None:
                row = self._use(
                    "read",
                    lambda db: db.execute(
                        "SELECT touched, state FROM conversations WHERE key = ?", (key,)
                    ).fetchone(),
                )
                if row is not None:
                    conv = self._loaded(key, row, now)
            if conv is None:
                conv = Conversation(key)
            conv.touched = now
            self._held[key] = conv
            self._evict(now)
            return conv

    def sized(self, conv: Conversation, size: int) -> None:
        """Conversation `conv` holds about `size` bytes now: past `max_bytes` in all, the least
        recently used others are let go (the newest is kept, whatever its size)."""
        with self._lock:
            if self._held.get(conv.key) is conv:
                self._bytes += size - conv.size
            conv.size = size
            self._evict(time.time())

    def _evict(self, now: float) -> None:
        """Let go of the least recently used conversations over the limits or past their time."""
        while len(self._held) > 1:  # the newest stays
            oldest = next(iter(self._held.values()))
            over = len(self._held) > self.limit or now - oldest.touched > self.ttl
            if not over and (self.max_bytes is None or self._bytes <= self.max_bytes):
                break
            self._held.popitem(last=False)
            self._drop(oldest)

    def _drop(self, conv: Conversation) -> None:
        self._bytes -= conv.size
        if self._dropped is not None:
            self._dropped(conv.key)

    def held(self, key: str) -> Conversation | None:
        """Conversation `key` if memory holds it (nothing loaded, nothing touched)."""
        with self._lock:
            return self._held.get(key)

    def _loaded(self, key: str, row: tuple[Any, Any], now: float) -> Conversation | None:
        """The saved conversation, if it is still alive; a row that cannot be read (an edited or
        damaged file) is forgotten with a warning: the conversation starts afresh."""
        try:
            if now - row[0] > self.ttl:
                return None
            return Conversation.load(key, row[1], row[0])
        except (ValueError, TypeError, AttributeError) as exc:
            log.warning(
                "saved state of conversation %s cannot be read (%s); it starts afresh",
                key,
                type(exc).__name__,
            )
            self._use(
                "write", lambda db: db.execute("DELETE FROM conversations WHERE key = ?", (key,))
            )
            return None

    def _use(self, what: str, run: Callable[[sqlite3.Connection], Any]) -> Any:
        """`run(db)` on the state database (under `_lock`); None without one. A database locked
        by another process, or damaged, costs this request `DB_WAIT` seconds and a warning: the
        gateway then keeps conversations in memory only for `DB_PAUSE` seconds, so the requests
        after it do not wait too."""
        db = self._db
        if db is None or time.monotonic() < self._paused_until:
            return None
        try:
            return run(db)
        except sqlite3.Error as exc:
            self._paused_until = time.monotonic() + DB_PAUSE
            log.warning(
                "the state database could not be %s (%s: %s); conversations are kept in memory "
                "only for the next %g s",
                "read" if what == "read" else "written",
                type(exc).__name__,
                exc,
                DB_PAUSE,
            )
            return None

    def save(self, conv: Conversation) -> None:
        if self._db is None:
            return
        if time.monotonic() < self._paused_until:
            return
        text = conv.dump()
        with self._lock:
            self._use(
                "write",
                lambda db: db.execute(
                    "INSERT OR REPLACE INTO conversations (key, touched, state) VALUES (?, ?, ?)",
                    (conv.key, conv.touched, text),
                ),
            )

    def all(self) -> list[Conversation]:
        with self._lock:
            return list(self._held.values())

    def close(self) -> None:
        if self._db is not None:
            self._db.close()
            self._db = None


__all__ = ["Conversation", "Conversations", "Usage"]
