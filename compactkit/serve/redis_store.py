"""Serve states in a Redis database (`compactkit[redis]`, the official `redis` client): what
`compactkit gateway --state redis://...` resets and `compactkit mcp-proxy --state redis://...`
serves from, so replicas of both share them.

A session is two keys: its call count and a hash of its entries by serve key (the entry as JSON,
as `SqliteServeStore` keeps it). A serve or a keep is one optimistic transaction over both
(WATCH, retried when another process wrote in between), so concurrent writers never lose an
update.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from typing import Any
from urllib.parse import urlsplit

from pydantic import ValidationError

from ..errors import ConfigError
from ..events import Event
from .state import Served, ServedPayload, ServeState, compaction_loss
from .store import _holds

log = logging.getLogger("compactkit.serve")

PREFIX = "compactkit:serve:"


def is_redis(state: str | None) -> bool:
    """Whether a `--state` value names a Redis database rather than a SQLite file."""
    return bool(state) and urlsplit(str(state)).scheme in ("redis", "rediss")


def client(url: str) -> Any:
    """A client of the Redis database at `url` (`ConfigError` without the `redis` package)."""
    try:
        import redis
    except ImportError as exc:
        raise ConfigError(
            "--state redis://... needs the redis client: pip install 'compactkit[redis]'"
        ) from exc
    return redis.Redis.from_url(url, socket_timeout=5, socket_connect_timeout=5)


class RedisServeStore:
    """Serve states by session in the Redis database at `url` (see the module docs)."""

    def __init__(self, url: str) -> None:
        self._redis = client(url)

    @staticmethod
    def _keys(session: str) -> tuple[str, str]:
        return PREFIX + session + ":calls", PREFIX + session + ":entries"

    @staticmethod
    def _entry(session: str, key: Any, text: Any) -> ServedPayload | None:
        try:
            return ServedPayload.model_validate_json(text)
        except ValidationError:
            log.warning("serve state of session %r: an entry cannot be read; forgotten", session)
            return None

    def _one(self, r: Any, session: str, key: str) -> ServeState:
        calls, entries = self._keys(session)
        text = r.hget(entries, key)
        entry = None if text is None else self._entry(session, key, text)
        return ServeState(
            calls=int(r.get(calls) or 0), served={} if entry is None else {key: entry}
        )

    def load(self, session: str) -> ServeState:
        calls, entries = self._keys(session)
        served = {}
        for key, text in self._redis.hgetall(entries).items():
            name = key.decode("utf-8")
            entry = self._entry(session, name, text)
            if entry is not None:
                served[name] = entry
        return ServeState(calls=int(self._redis.get(calls) or 0), served=served)

    def peek(self, session: str, key: str, payload: str, **options: Any) -> Served:
        return self._one(self._redis, session, key).serve(key, payload, **options)

    def serve(self, session: str, key: str, payload: str, **options: Any) -> Served:
        """`ServeState.serve` on the session's call count and this key's entry; the `Served`
        state holds that key only."""
        out: list[Served] = []

        def change(pipe: Any) -> None:
            out.clear()
            served = self._one(pipe, session, key).serve(key, payload, **options)
            self._write(pipe, session, served.state.calls, key, served.state.served[key])
            out.append(served)

        self._redis.transaction(change, *self._keys(session))
        return out[0]

    def keep(self, session: str, key: str, served: Served) -> bool:
        kept: list[bool] = []

        def change(pipe: Any) -> None:
            kept.clear()
            if int(pipe.get(self._keys(session)[0]) or 0) != served.call - 1:
                kept.append(False)
                return
            self._write(pipe, session, served.call, key, served.state.served[key])
            kept.append(True)

        self._redis.transaction(change, *self._keys(session))
        return kept[0]

    def _write(self, pipe: Any, session: str, calls: int, key: str, entry: ServedPayload) -> None:
        count, entries = self._keys(session)
        pipe.multi()
        pipe.set(count, calls)
        pipe.hset(entries, key, entry.model_dump_json())

    def reset(self, session: str, etags: Iterable[str] | None = None) -> None:
        entries = self._keys(session)[1]
        if etags is None:
            self._redis.delete(entries)
            return
        gone = frozenset(etags)
        stored = self._redis.hgetall(entries)
        drop = [key for key, text in stored.items() if _holds(text.decode("utf-8"), gone)]
        if drop:
            self._redis.hdel(entries, *drop)

    def compacted(self, session: str, event: Event) -> None:
        lost = compaction_loss(event)
        if lost is not False:
            self.reset(session, lost)

    def close(self) -> None:
        self._redis.close()
