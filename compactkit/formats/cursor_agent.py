"""cursor-agent CLI chats: `~/.cursor/chats/<workspace hash>/<agent id>/store.db`, with its WAL.

Upstream: Cursor's CLI is closed; its own bundle (`src/state/sqlite-blob-store.ts`,
`SQLiteBlobStoreWithMetadata`, and the chat list, which skips a chat whose metadata names no
`latestRootBlobId`) and the public readers of the store (claudecodeui's
`cursor-sessions.provider.ts`, the sidecar and agentsview readers, and the notes of a reader that
checked every store `agent` 2026.09.15-d2fe57e wrote on one machine) agree on its layout:

* `meta (key TEXT PRIMARY KEY, value TEXT)`: the row `"0"` holds the chat's metadata as JSON,
  hex-encoded (`agentId`, `latestRootBlobId`, `name`, `mode`, `createdAt`, `lastUsedModel`, and a
  `blobEncryptionKey` that compactkit never reads into anything it writes or prints); older
  stores keep one row per key;
* `blobs (id TEXT PRIMARY KEY, data BLOB)`, content-addressed (`id` = SHA-256 of `data`): the
  root blob `latestRootBlobId` is protobuf whose field 1 repeats the 32-byte ids of the
  conversation's blobs, in order (a blob so referenced that is itself such a node is followed);
  each message blob is UTF-8 JSON, an AI SDK model message `{role, content}` (newer stores may
  wrap that JSON in a protobuf field, which is unwrapped).

The store runs in WAL mode and its newest blobs sit in `store.db-wal`: it is read from a copy
with its log (`_sqlite.open_snapshot`), the files untouched. Blobs no longer under the root
(earlier states of the chat) are not read. Mapping, as the model is sent it:

* `system` -> the system instruction (several joined);
* `user` -> a user message: the human's words when it holds `<user_query>` (kept whole, as the
  model got it) or is plain text, origin `harness` when it is only tagged sections Cursor added
  (`<user_info>`, `<system_reminder>`, ...); `image` parts -> images;
* `assistant` -> `text`, `reasoning` (thinking), `redacted-reasoning` (redacted thinking, its
  `data`) and `tool-call` parts (`toolCallId`, `toolName`, `args` / `input`);
* `tool` -> the `tool-result` parts (`result`, or AI SDK 5's `output: {type, value}`, `isError`,
  an `error-*` output an error).

A referenced blob that is missing or is no message is counted in `skipped_records`. Nothing is
known to store the user's words inside a tool result, so nothing there is pinned.
"""

from __future__ import annotations

import json
import re
import sqlite3
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import JsonValue

from ..context import (
    ORIGIN_KEY,
    AgentContext,
    Block,
    ContentPart,
    ImageBlock,
    TextBlock,
    ThinkingBlock,
    ToolCallBlock,
    ToolResultBlock,
)
from ..errors import BadInputError
from ._pairing import Turn
from ._sqlite import open_snapshot, schema_of
from ._util import (
    as_dict,
    as_list,
    as_text,
    is_sqlite,
    parse_arguments,
    str_or_none,
    turns_context,
)
from .base import Document, Format

_KEY = "cursor_agent_store"
_QUERY = "<user_query>"
_TAGGED = re.compile(r"(?:\s*<([A-Za-z_][\w.-]*)(?:\s[^>]*)?>.*?</\1>)+\s*", re.DOTALL)
_ID_BYTES = 32
_MAX_DEPTH = 16
_META_FIELDS = ("agentId", "latestRootBlobId", "name", "mode", "createdAt", "lastUsedModel")
"""The metadata fields read; `blobEncryptionKey` is a secret and is never among them."""


class CursorAgentFormat(Format):
    name = "cursor-agent"
    description = "cursor-agent CLI chats (~/.cursor/chats/<hash>/<id>/store.db, with its WAL)"
    extension = ".db"
    priority = 10

    def read_layout(self, path: Path) -> Document | None:
        if path.is_dir() and (path / "store.db").is_file():  # the chat's folder
            path = path / "store.db"
        if not is_sqlite(path):
            return None
        tables, columns = schema_of(path)
        if not ({"blobs", "meta"} <= tables and {"id", "data"} <= set(columns["blobs"])):
            return None
        meta = _metadata(path)
        if not isinstance(meta.get("latestRootBlobId"), str) or not meta["latestRootBlobId"]:
            return None  # cursor-agent does not list it either: refused as an empty store
        return Document(str(path), "json", {_KEY: _Store(path, meta)})

    def sniff(self, doc: Document) -> bool:
        return isinstance(doc.data, dict) and isinstance(doc.data.get(_KEY), _Store)

    def load(self, doc: Document) -> list[AgentContext]:
        if not self.sniff(doc):
            raise BadInputError(
                "not a cursor-agent store.db",
                path=doc.path,
                hint="give ~/.cursor/chats/*/*/store.db",
            )
        store: _Store = doc.data[_KEY]
        builder = _CursorAgentContextBuilder()
        for message in store.messages(builder.skipped):
            builder.add(message)
        return [builder.context(store.meta)] if builder.turns else []


# --------------------------------------------------------------------------- reading the store


def _metadata(path: Path) -> dict[str, JsonValue]:
    """The chat's metadata: the hex-encoded JSON of row `"0"`, else one row per key; only the
    fields of `_META_FIELDS`."""
    try:
        with open_snapshot(path) as db:
            rows = {str(r[0]): r[1] for r in db.execute("SELECT key, value FROM meta")}
    except sqlite3.Error as exc:
        raise BadInputError(f"cannot read the cursor-agent store: {exc}", path=str(path)) from None
    found: dict[str, Any] = dict(rows)
    if "0" in rows:
        decoded = _json_object(_unhex(rows["0"]))
        if decoded is not None:
            found = decoded
    return {
        k: v for k in _META_FIELDS if isinstance(v := found.get(k), (str, int, float)) and v != ""
    }


def _unhex(value: Any) -> bytes:
    raw = value if isinstance(value, bytes) else str(value).encode("utf-8", "replace")
    try:
        return bytes.fromhex(raw.decode("ascii"))
    except (UnicodeDecodeError, ValueError):
        return raw  # plain JSON


def _json_object(data: bytes) -> dict[str, Any] | None:
    if not data.lstrip().startswith(b"{"):
        return None
    try:
        value = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError, RecursionError):
        return None
    return value if isinstance(value, dict) else None


@dataclass(frozen=True)
class _Store:
    """A `store.db`: its metadata, and the messages under its root blob, read a blob at a time."""

    path: Path
    meta: dict[str, JsonValue]

    def messages(self, skipped: Counter[str]) -> Iterator[dict[str, Any]]:
        """The message of each blob under the root, in order; what is not one counted."""
        root = str(self.meta["latestRootBlobId"])
        try:
            with open_snapshot(self.path) as db:
                data = _blob(db, root)
                if data is None:
                    raise BadInputError(
                        f"the root blob {root[:16]}... that its metadata names is not in the store",
                        path=str(self.path),
                        hint="copy store.db together with its store.db-wal",
                    )
                yield from self._walk(db, data, skipped, {root}, 0)
        except sqlite3.Error as exc:
            raise BadInputError(
                f"cannot read the cursor-agent store: {exc}", path=str(self.path)
            ) from None

    def _walk(
        self, db: sqlite3.Connection, node: bytes, skipped: Counter[str], seen: set[str], depth: int
    ) -> Iterator[dict[str, Any]]:
        """The messages under `node`, in order. A message listed twice is given twice (content
        addressing gives the same words typed twice one blob); a node is followed once."""
        for child in _child_ids(node):
            data = _blob(db, child)
            if data is None:
                skipped["blob (missing)"] += 1
                continue
            message = _message_of(data)
            if message is not None:
                yield message
            elif child not in seen and depth < _MAX_DEPTH and _child_ids(data):
                seen.add(child)
                yield from self._walk(db, data, skipped, seen, depth + 1)
            else:
                skipped["blob (not a message)"] += 1


def _blob(db: sqlite3.Connection, blob_id: str) -> bytes | None:
    row = db.execute("SELECT data FROM blobs WHERE id = ?", (blob_id,)).fetchone()
    if row is None or row[0] is None:
        return None
    value = row[0]
    return value if isinstance(value, bytes) else str(value).encode("utf-8", "replace")


def _fields(data: bytes) -> list[tuple[int, int, Any]] | None:
    """The top-level protobuf fields of `data` as (number, wire type, value); None when it is
    not protobuf."""
    out: list[tuple[int, int, Any]] = []
    at = 0
    try:
        while at < len(data):
            key, at = _varint(data, at)
            number, wire = key >> 3, key & 7
            value: Any
            if number == 0:
                return None
            if wire == 0:
                value, at = _varint(data, at)
            elif wire == 1:
                value, at = data[at : at + 8], at + 8
            elif wire == 2:
                size, at = _varint(data, at)
                value, at = data[at : at + size], at + size
            elif wire == 5:
                value, at = data[at : at + 4], at + 4
            else:
                return None
            if at > len(data):
                return None
            out.append((number, wire, value))
    except IndexError:
        return None
    return out


def _varint(data: bytes, at: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        byte = data[at]
        at += 1
        value |= (byte & 0x7F) << shift
        if byte < 0x80:
            return value, at
        shift += 7
        if shift > 63:
            raise IndexError("varint too long")


def _child_ids(data: bytes) -> list[str]:
    """The blob ids a protobuf node lists in its field 1 (32 bytes each)."""
    if data.lstrip().startswith(b"{"):
        return []
    fields = _fields(data) or []
    return [v.hex() for n, w, v in fields if n == 1 and w == 2 and len(v) == _ID_BYTES]


def _message_of(data: bytes) -> dict[str, Any] | None:
    """The AI SDK message a blob holds: its JSON, or JSON in one of its protobuf fields."""
    message = _json_object(data)
    if message is None:
        for _, wire, value in _fields(data) or []:
            if wire == 2 and (inner := _json_object(value)) is not None and "role" in inner:
                message = inner
                break
    if message is None or not isinstance(message.get("role"), str):
        return None
    return message


# --------------------------------------------------------------------------- messages -> turns


class _CursorAgentContextBuilder:
    """Turns the messages of a chat, in order, into turns."""

    def __init__(self) -> None:
        self.turns: list[Turn] = []
        self.system: list[str] = []
        self.skipped: Counter[str] = Counter()

    def add(self, message: dict[str, Any]) -> None:
        role = message["role"]
        content = message.get("content")
        parts = (
            [{"type": "text", "text": content}]
            if isinstance(content, str)
            else [as_dict(p) for p in as_list(content)]
        )
        meta: dict[str, JsonValue] = {}
        if isinstance(message.get("id"), str):
            meta["id"] = message["id"]
        if role == "system":
            self.system.extend(as_text(p.get("text")) for p in parts if p.get("type") == "text")
        elif role == "user":
            self.user(parts, meta)
        elif role == "assistant":
            self.assistant(parts, meta)
        elif role == "tool":
            results: list[Block] = [_result(p) for p in parts if p.get("type") == "tool-result"]
            for part in parts:
                if part.get("type") != "tool-result":
                    self.skipped[f"part/{part.get('type')}"] += 1
            if results:
                self.turns.append(Turn("tool", results, meta))
            else:
                self.skipped["message/tool (empty)"] += 1
        else:
            self.skipped[f"message/{role}"] += 1

    def user(self, parts: list[dict[str, Any]], meta: dict[str, JsonValue]) -> None:
        blocks: list[Block] = []
        for part in parts:
            kind = part.get("type")
            if kind == "text" and as_text(part.get("text")).strip():
                blocks.append(TextBlock(text=as_text(part.get("text"))))
            elif kind == "image":
                image = part.get("image")
                media = str_or_none(part.get("mediaType") or part.get("mimeType"))
                url = str_or_none(image) if as_text(image).startswith(("http", "data:")) else None
                data = None if url else str_or_none(image)
                blocks.append(ImageBlock(url=url, data=data, media_type=media))
            else:
                self.skipped[f"part/{kind}"] += 1
        if not blocks:
            self.skipped["message/user (empty)"] += 1
            return
        texts = [b.text for b in blocks if isinstance(b, TextBlock)]
        if texts and not any(_QUERY in t for t in texts) and all(map(_only_tags, texts)):
            meta[ORIGIN_KEY] = "harness"
        self.turns.append(Turn("user", blocks, meta))

    def assistant(self, parts: list[dict[str, Any]], meta: dict[str, JsonValue]) -> None:
        blocks: list[Block] = []
        for n, part in enumerate(parts):
            kind = part.get("type")
            if kind == "text" and as_text(part.get("text")).strip():
                blocks.append(TextBlock(text=as_text(part.get("text"))))
            elif kind == "reasoning" and as_text(part.get("text")):
                blocks.append(ThinkingBlock(thinking=as_text(part.get("text"))))
            elif kind == "redacted-reasoning" and as_text(part.get("data")):
                blocks.append(ThinkingBlock(thinking=as_text(part.get("data")), redacted=True))
            elif kind == "tool-call":
                raw = part.get("args", part.get("input"))
                blocks.append(
                    ToolCallBlock(
                        id=as_text(part.get("toolCallId")) or f"cursor-agent-{len(self.turns)}-{n}",
                        name=as_text(part.get("toolName")) or "unknown",
                        input=parse_arguments(raw),
                    )
                )
            elif kind != "text":
                self.skipped[f"part/{kind}"] += 1
        if blocks:
            self.turns.append(Turn("assistant", blocks, meta))
        else:
            self.skipped["message/assistant (empty)"] += 1

    def context(self, info: dict[str, JsonValue]) -> AgentContext:
        ctx = turns_context(
            CursorAgentFormat.name,
            self.turns,
            self.skipped,
            session_id=str_or_none(info.get("agentId")),
            model=str_or_none(info.get("lastUsedModel")),
            title=str_or_none(info.get("name")),
            cursor_mode=str_or_none(info.get("mode")),
            created_at=info.get("createdAt"),
        )
        system = "\n\n".join(t for t in self.system if t) or None
        return ctx.replace(system_instruction=system) if system else ctx


def _only_tags(text: str) -> bool:
    """Text made only of whole tagged sections, as Cursor adds it (`<user_info>...</user_info>`)."""
    return _TAGGED.fullmatch(text) is not None


def _result(part: dict[str, Any]) -> ToolResultBlock:
    error = part.get("isError") is True
    value = part.get("result")
    output = part.get("output")
    if value is None and isinstance(output, dict) and "type" in output:  # AI SDK 5
        error = error or as_text(output.get("type")).startswith("error")
        value = output.get("value")
    elif value is None:
        value = output
    if value in (None, "") and isinstance(part.get("experimental_content"), list):
        value = part["experimental_content"]  # the AI SDK's multi-part tool output
    content: list[ContentPart] = []
    if isinstance(value, str):
        text = value
    elif isinstance(value, list):
        text = "\n".join(as_text(as_dict(v).get("text") or v) for v in value)
    else:
        text = json.dumps(value) if value is not None else ""
    if text:
        content.append(TextBlock(text=text))
    return ToolResultBlock(
        tool_call_id=as_text(part.get("toolCallId")), content=tuple(content), is_error=error
    )


__all__ = ["CursorAgentFormat"]
