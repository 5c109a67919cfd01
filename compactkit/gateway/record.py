"""`--record DIR`: each conversation as the client sent it (uncompacted), as a compactkit
session log, so `compactkit bench` and `check` replay real traffic later."""

from __future__ import annotations

import hashlib
import os
import threading
from pathlib import Path
from typing import Any

from ..context import AgentContext, Message
from ..formats.session_log import append_record, chained, start_record
from .wire import SPAN_KEY


def _clean(msg: Message) -> Message:
    if SPAN_KEY not in msg.metadata:
        return msg
    meta = {k: v for k, v in msg.metadata.items() if k != SPAN_KEY}
    cleaned: Message = msg.model_copy(update={"metadata": meta})
    return cleaned


class Recorder:
    """One log per conversation: a start line, then the messages each request adds. A client
    that rewrites its history (what was recorded is no longer its prefix) starts a new log, and
    so does a conversation the gateway let go of (`forget`) and then saw again. What it holds of
    a conversation goes when the gateway lets go of the conversation."""

    def __init__(self, folder: str) -> None:
        self.folder = Path(folder)
        self.folder.mkdir(parents=True, exist_ok=True)
        self._written: dict[str, tuple[Path, tuple[Message, ...]]] = {}
        self._heads: dict[Path, str] = {}  # each log's records are chained (see session_log)
        self._lock = threading.Lock()

    def record(self, key: str, ctx: AgentContext) -> None:
        messages = tuple(_clean(m) for m in ctx.messages)
        with self._lock:
            known = self._written.get(key)
            if known is not None and messages[: len(known[1])] == known[1]:
                path, done = known
                new = messages[len(done) :]
                if new:
                    self._write(path, append_record(new))
            else:
                if known is not None:
                    self._heads.pop(known[0], None)
                name = hashlib.sha256(key.encode()).hexdigest()[:16]
                path = self.folder / f"{name}.jsonl"
                n = 1
                while path.exists():  # a log is never written over
                    path = self.folder / f"{name}-{n}.jsonl"
                    n += 1
                start = ctx.replace(messages=())
                self._heads[path] = ""
                self._write(path, start_record(start, {}), fresh=True)
                if messages:
                    self._write(path, append_record(messages))
            self._written[key] = (path, messages)

    def forget(self, key: str) -> None:
        """Let go of conversation `key` (the gateway did): its log is done; should it come back,
        it is written whole in a new log."""
        with self._lock:
            known = self._written.pop(key, None)
            if known is not None:
                self._heads.pop(known[0], None)

    def _write(self, path: Path, record: dict[str, Any], *, fresh: bool = False) -> None:
        text, self._heads[path] = chained(record, self._heads[path])
        _append(path, text, fresh=fresh)


def _append(path: Path, text: str, *, fresh: bool = False) -> None:
    flags = os.O_WRONLY | os.O_CREAT | (os.O_TRUNC if fresh else os.O_APPEND)
    fd = os.open(path, flags, 0o644)
    try:
        os.write(fd, text.encode("utf-8"))
    finally:
        os.close(fd)


__all__ = ["Recorder"]
