"""`--state redis://HOST:PORT/N`: conversations kept in Redis (the official `redis` client,
`compactkit[redis]`), so several gateways behind a balancer serve one conversation consistently.

Each conversation is a Redis hash (`compactkit:gateway:conversation:KEY`: its state, when it was
last used, a version counted up by every write) that expires after the time to live; the salt of
every conversation and credential name is one key, set by the first gateway, read by the others,
so every replica names a conversation alike. Serve states live beside them
(`compactkit.serve.redis_store`), shared with `compactkit mcp-proxy --state redis://...`. A
gateway keeps the conversations it served in memory and uses its copy while the version in Redis
is the one it read or wrote; when another replica wrote since, it reads the conversation again
(and reads the request whole: its reader starts afresh).
"""

from __future__ import annotations

import logging
import secrets
import time
from collections.abc import Callable

from ..errors import ConfigError
from ..serve.redis_store import client, is_redis
from .conversations import Conversation, Conversations

log = logging.getLogger("compactkit.gateway")

PREFIX = "compactkit:gateway:"
__all__ = ["RedisConversations", "is_redis"]


class RedisConversations(Conversations):
    """`Conversations` kept in the Redis database at `url`, shared by every gateway using it."""

    def __init__(
        self,
        url: str,
        limit: int = 1000,
        ttl: float = 24 * 3600,
        *,
        dropped: Callable[[str], None] | None = None,
        max_bytes: int | None = None,
    ) -> None:
        super().__init__(limit, ttl, None, dropped=dropped, max_bytes=max_bytes)
        self._redis = client(url)
        self._versions: dict[str, int] = {}
        """The version in Redis of each conversation held, as last read or written."""
        try:
            self._redis.set(PREFIX + "salt", secrets.token_bytes(32), nx=True)
            salt = self._redis.get(PREFIX + "salt")
        except Exception as exc:  # redis.RedisError: unreachable, refused, ...
            raise ConfigError(f"--state: Redis unreachable ({type(exc).__name__})") from None
        self.salt = bytes(salt)

    def get(self, key: str) -> Conversation:
        now = time.time()
        name = PREFIX + "conversation:" + key
        try:
            stored = self._redis.hget(name, "version")
        except Exception as exc:
            log.warning("Redis could not be read (%s): memory only", type(exc).__name__)
            return super().get(key)
        version = int(stored) if stored is not None else 0
        with self._lock:
            held = self._held.get(key)
            stale = held is not None and self._versions.get(key, 0) != version
        if stale and held is not None:  # another replica wrote it since
            with self._lock:
                self._held.pop(key, None)
                self._bytes -= held.size
        if (held is None or stale) and stored is not None:
            conv = self._read(key, name, now)
            if conv is not None:
                with self._lock:
                    self._versions[key] = version
                    self._held[key] = conv
        return super().get(key)

    def _read(self, key: str, name: str, now: float) -> Conversation | None:
        data = self._redis.hgetall(name)
        try:
            touched = float(data[b"touched"])
            if now - touched > self.ttl:
                return None
            return Conversation.load(key, data[b"state"].decode("utf-8"), touched)
        except (KeyError, ValueError, TypeError, AttributeError) as exc:
            log.warning(
                "saved state of conversation %s cannot be read (%s); it starts afresh",
                key,
                type(exc).__name__,
            )
            return None

    def save(self, conv: Conversation) -> None:
        name = PREFIX + "conversation:" + conv.key
        text = conv.dump()
        try:
            pipe = self._redis.pipeline()
            pipe.hset(name, mapping={"state": text, "touched": conv.touched})
            pipe.hincrby(name, "version", 1)
            pipe.expire(name, max(int(self.ttl), 1))
            version = int(pipe.execute()[1])
        except Exception as exc:
            log.warning("Redis could not be written (%s): memory only", type(exc).__name__)
            return
        with self._lock:
            self._versions[conv.key] = version

    def close(self) -> None:
        self._redis.close()
