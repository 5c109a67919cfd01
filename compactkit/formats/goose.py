"""Goose sessions: `sessions.db` (SQLite) and the legacy `.jsonl` session files.

Upstream: block/goose `crates/goose/src/session/session_manager.rs` (the `sessions` table:
`id`, `name` / `description`, `working_dir`, `created_at`, token counts, ...; the `messages` table:
`message_id`, `session_id`, `role`, `content_json`, `created_timestamp`, `metadata_json`),
`crates/goose/src/session/legacy.rs` (`read_messages`: the first line of a `.jsonl` session is its
metadata, every other line one message; a line that does not parse is skipped) and
`crates/goose/src/conversation/message.rs` (`Message { role, created, content: [MessageContent],
metadata: { userVisible, agentVisible } }`, the `MessageContent` variants, serde-tagged by `type`).

Given `sessions.db`, every session is a conversation (`FILE#N`, in creation order); a legacy
`.jsonl` file is one. Content maps:

* `text` -> text; `image` (`data`, `mimeType`) -> an image; `thinking` / `redactedThinking` ->
  thinking blocks (with `signature` / `data`);
* `toolRequest` (`id`, `toolCall: {status, value: {name, arguments}}`) -> a tool call (a request
  whose call failed to parse, `status: "error"`, becomes a call named `unknown` with the error as
  its input); `toolResponse` (`id`, `toolResult: {status, value}`) -> its result: `value` is a list
  of MCP content or `{content, isError}`, an `error` status an error result. A user message
  holding only responses is a tool message;
* a user message's text is the human's words unless Goose hid it from the user
  (`metadata.userVisible: false`: the summary or context it injected), which gets origin
  `summary` when it carries a compaction summary and `harness` otherwise;
* `toolConfirmationRequest`, `frontendToolRequest`, `actionRequired`, `systemNotification`,
  `conversationCompacted` and other UI content never reach the model: counted as
  `"content/<type>"` in `skipped_records`.

Sessions Goose runs for itself (`session_type` `sub_agent` or `hidden`; its session lists show
only `user` and `scheduled` ones) come after the user's own conversations, each marked
`sidechain: True` with its `goose_session_type`, and, when known, `parent_session_id` and the
`parent_tool_call_id` of the call that delegated to it (the one tool call of the parent's message
named in `parent_delegation.parent_delegate_message_id`).

Messages Goose keeps only for display after a compaction (`agentVisible: false`) stay loaded, so
the context is the full history; they carry `metadata["agent_visible"] = False`.
"""

from __future__ import annotations

import json
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
    canonical_json,
)
from ..errors import BadInputError
from ._pairing import Turn
from ._util import (
    as_dict,
    as_list,
    as_text,
    is_sqlite,
    number_conversations,
    sqlite_read_only,
    sqlite_tables,
    str_or_none,
    turns_context,
)
from .base import Document, Format

_KEY = "goose_sessions"
_CONTENT = ("text", "image", "thinking", "redactedThinking", "toolRequest", "toolResponse")
_SUMMARY_MARKERS = ("summary", "summarized", "compacted")


class GooseFormat(Format):
    name = "goose"
    description = "Goose sessions (sessions.db, or a legacy session .jsonl)"
    extension = ".jsonl"
    priority = 10
    malformed_lines = "skip"  # legacy.rs: `if let Ok(message) = serde_json::from_str(&line)`

    def read_layout(self, path: Path) -> Document | None:
        if not is_sqlite(path):
            return None
        try:
            with sqlite_read_only(path) as db:
                tables = sqlite_tables(db)
        except sqlite3.Error as exc:  # not known to be Goose's yet: an SQLite file, damaged
            raise BadInputError(f"cannot read the SQLite database: {exc}", path=str(path)) from None
        try:
            with sqlite_read_only(path) as db:
                if not {"sessions", "messages"} <= tables:
                    return None
                columns = {r[1] for r in db.execute("PRAGMA table_info(messages)")}
                if "content_json" not in columns:
                    return None
                sessions = [
                    dict(r) for r in db.execute("SELECT * FROM sessions ORDER BY created_at, id")
                ]
        except sqlite3.Error as exc:
            raise BadInputError(f"cannot read the Goose database: {exc}", path=str(path)) from None
        return Document(str(path), "json", {_KEY: _Database(path, sessions)})

    def sniff(self, doc: Document) -> bool:
        if doc.kind == "json":
            return isinstance(doc.data, dict) and isinstance(doc.data.get(_KEY), _Database)
        try:
            records = [r for r in doc.data[:20] if isinstance(r, dict)]
            if not records:
                return False
            body = records[1:] if _is_metadata(records[0]) else records
            return (
                bool(body)
                and all(_is_message(r) for r in body)
                and (_is_metadata(records[0]) or any(_goose_content(r) for r in body))
            )
        except Exception:
            return False

    def load(self, doc: Document) -> list[AgentContext]:
        database = doc.data.get(_KEY) if isinstance(doc.data, dict) else None
        if doc.kind == "json" and isinstance(database, _Database):
            infos, messages = database.sessions, database.messages()
        elif doc.kind == "jsonl":
            records = [r for r in doc.data if isinstance(r, dict)]
            info = records[0] if records and _is_metadata(records[0]) else {}
            infos = [info]
            messages = ((info.get("id"), r) for r in records if r is not info)
        else:
            raise BadInputError(
                "not a Goose session (sessions.db or a legacy .jsonl)", path=doc.path
            )
        infos = [as_dict(i) for i in infos]
        builders = [_GooseContextBuilder() for _ in infos]
        of_session: dict[Any, list[_GooseContextBuilder]] = {}
        for info, builder in zip(infos, builders, strict=True):
            of_session.setdefault(_key(info.get("id")), []).append(builder)
        # the messages that delegated to a sub-agent: the tool calls each holds (see `_run_of`)
        delegations = {_key(_delegation_of(i)) for i in infos} - {None}
        calls: dict[tuple[Any, Any], list[Any]] = {}
        for session_id, message in messages:  # one at a time, each converted as it is read
            for builder in of_session.get(_key(session_id), ()):
                builder.add(message)
            if isinstance(message, dict) and (held := _key(message.get("id"))) in delegations:
                calls.setdefault((_key(session_id), held), _calls_in(message))
        by_id = {str_or_none(i.get("id")): i for i in infos}
        own: list[AgentContext] = []
        runs: list[AgentContext] = []
        for info, builder in zip(infos, builders, strict=True):
            if not builder.turns:
                continue
            ctx = builder.context(info)
            kind = info.get("session_type")
            if kind in _AGENT_SESSIONS:
                meta = _run_of(info, by_id, calls)
                runs.append(ctx.replace(metadata={**ctx.metadata, **meta}))
            else:
                own.append(ctx)
        if not own and not runs and doc.kind == "jsonl":
            raise BadInputError("not a Goose session: no messages", path=doc.path)
        return number_conversations(own + runs)


@dataclass(frozen=True)
class _Database:
    """A `sessions.db`: its sessions, read whole (a row each), and its messages, read a row at a
    time as they are converted (all of them read and parsed at once took five times the file)."""

    path: Path
    sessions: list[dict[str, Any]]

    def messages(self) -> Iterator[tuple[Any, Any]]:
        """(session id, message) of every row of `messages`, in row order."""
        path = self.path
        try:
            with sqlite_read_only(path) as db:
                for row in db.execute("SELECT * FROM messages ORDER BY id"):
                    row = dict(row)
                    yield (
                        row["session_id"],
                        {
                            # schema 7 added `message_id`, filled in as `msg_<session>_<row id>`; the
                            # databases of Goose releases before it have no such column
                            "id": row.get("message_id") or f"msg_{row['session_id']}_{row['id']}",
                            "role": row["role"],
                            "created": row["created_timestamp"],
                            "content": _json(row["content_json"], f"message {row['id']}", path),
                            "metadata": _json(row["metadata_json"], f"message {row['id']}", path)
                            if row.get("metadata_json")
                            else {},
                        },
                    )
        except sqlite3.Error as exc:
            raise BadInputError(f"cannot read the Goose database: {exc}", path=str(path)) from None


# --------------------------------------------------------------------------- messages -> turns


class _GooseContextBuilder:
    """Turns the messages of one session, in order, into turns."""

    def __init__(self) -> None:
        self.turns: list[Turn] = []
        self.skipped: Counter[str] = Counter()

    def add(self, message: Any) -> None:
        if not _is_message(message):
            self.skipped["unknown"] += 1
            return
        role = message["role"]
        blocks: list[Block] = []
        results: list[Block] = []
        for item in message["content"]:
            item = as_dict(item)
            kind = item.get("type")
            if kind == "toolResponse":
                results.append(_result(item))
            elif kind in _CONTENT:
                blocks.append(_block(item))
            else:
                self.skipped[f"content/{kind}"] += 1
        meta = _stamp(message)
        visible = as_dict(message.get("metadata"))
        if visible.get("agentVisible") is False:
            meta["agent_visible"] = False
        if results:
            self.turns.append(Turn("tool", results, dict(meta)))
        if not blocks:
            if not results:
                self.skipped[f"message/{role} (empty)"] += 1
            return
        if role == "user" and visible.get("userVisible") is False:
            text = " ".join(b.text for b in blocks if isinstance(b, TextBlock)).lower()
            meta[ORIGIN_KEY] = "summary" if any(m in text for m in _SUMMARY_MARKERS) else "harness"
        self.turns.append(Turn("assistant" if role == "assistant" else "user", blocks, meta))

    def context(self, info: dict[str, Any]) -> AgentContext:
        return turns_context(
            GooseFormat.name,
            self.turns,
            self.skipped,
            session_id=str_or_none(info.get("id")),
            cwd=str_or_none(info.get("working_dir")),
            title=str_or_none(info.get("name")) or str_or_none(info.get("description")),
            model=str_or_none(
                as_dict(_maybe_json(info.get("model_config_json"))).get("model_name")
            ),
        )


# --------------------------------------------------------------------------- helpers


_AGENT_SESSIONS = ("sub_agent", "hidden")
"""`SessionType` values (serde snake_case) of sessions Goose runs for itself: a sub-agent's
(`SubAgent`) and internal ones (`Hidden`); its session lists show `user` and `scheduled` ones."""


def _key(value: Any) -> Any:
    """`value` (an id read from the session: any JSON value) as a dictionary key, equal to
    another's where the values are equal: a list or an object as its canonical JSON."""
    if value is None or isinstance(value, (str, int, float)):
        return value
    return ("json", canonical_json(value))


def _delegation_of(info: dict[str, Any]) -> Any:
    """The id of the message that delegated to this session, when its session record names one."""
    delegation = as_dict(_maybe_json(info.get("parent_delegation")))
    return delegation.get("parent_delegate_message_id")


def _calls_in(message: dict[str, Any]) -> list[Any]:
    """The call ids of a message's tool requests and responses."""
    items = [as_dict(i) for i in as_list(message.get("content"))]
    return [i.get("id") for i in items if i.get("type") in ("toolRequest", "toolResponse")]


def _run_of(
    info: dict[str, Any],
    by_id: dict[str | None, dict[str, Any]],
    calls: dict[tuple[Any, Any], list[Any]],
) -> dict[str, JsonValue]:
    """How a sub-agent or hidden session hangs on the session that ran it: `sidechain`, its
    `goose_session_type`, `parent_session_id`, and `parent_tool_call_id` when the parent's
    delegation message (`parent_delegation.parent_delegate_message_id`, its tool calls in
    `calls` by (session id, message id)) holds one tool call."""
    meta: dict[str, JsonValue] = {
        "sidechain": True,
        "goose_session_type": str(info.get("session_type")),
    }
    parent = str_or_none(info.get("parent_session_id"))
    if parent is None:
        return meta
    meta["parent_session_id"] = parent
    held = calls.get((_key(as_dict(by_id.get(parent)).get("id")), _key(_delegation_of(info))), [])
    if held and isinstance(held[0], str) and all(h == held[0] for h in held):
        meta["parent_tool_call_id"] = held[0]
    return meta


def _json(text: Any, where: str, path: Path) -> Any:
    try:
        return json.loads(text) if isinstance(text, (str, bytes)) else text
    except json.JSONDecodeError as exc:
        raise BadInputError(
            f"{where}: content_json is not JSON ({exc.msg})", path=str(path)
        ) from None


def _maybe_json(text: Any) -> Any:
    try:
        return json.loads(text) if isinstance(text, str) else text
    except json.JSONDecodeError:
        return None


def _is_metadata(record: dict[str, Any]) -> bool:
    """The first line of a legacy session: `SessionMetadata` (`working_dir`, `description`, ...)."""
    return "working_dir" in record and "role" not in record and "content" not in record


def _is_message(record: Any) -> bool:
    return (
        isinstance(record, dict)
        and record.get("role") in ("user", "assistant")
        and isinstance(record.get("content"), list)
    )


def _goose_content(record: dict[str, Any]) -> bool:
    """Content only Goose writes: tool requests / responses in its own shape, or `created`."""
    return "created" in record or any(
        isinstance(c, dict) and c.get("type") in ("toolRequest", "toolResponse")
        for c in record["content"]
    )


def _stamp(message: dict[str, Any]) -> dict[str, JsonValue]:
    meta: dict[str, JsonValue] = {}
    if isinstance(message.get("id"), str):
        meta["id"] = message["id"]
    if isinstance(message.get("created"), (int, float)):
        meta["timestamp"] = message["created"]
    return meta


def _block(item: dict[str, Any]) -> Block:
    kind = item.get("type")
    if kind == "text":
        return TextBlock(text=as_text(item.get("text")))
    if kind == "image":
        return ImageBlock(
            data=str_or_none(item.get("data")), media_type=str_or_none(item.get("mimeType"))
        )
    if kind == "thinking":
        return ThinkingBlock(
            thinking=as_text(item.get("thinking")), signature=str_or_none(item.get("signature"))
        )
    if kind == "redactedThinking":
        return ThinkingBlock(thinking="", signature=str_or_none(item.get("data")), redacted=True)
    call = as_dict(item.get("toolCall"))
    value = as_dict(call.get("value"))
    if call.get("status") == "error" or not value:
        return ToolCallBlock(
            id=as_text(item.get("id")), name="unknown", input={"error": as_text(call.get("error"))}
        )
    arguments = value.get("arguments")
    return ToolCallBlock(
        id=as_text(item.get("id")),
        name=as_text(value.get("name")) or "unknown",
        input=arguments if arguments is not None else {},
    )


def _result(item: dict[str, Any]) -> ToolResultBlock:
    result = as_dict(item.get("toolResult"))
    value = result.get("value")
    error = result.get("status") == "error"
    if isinstance(value, dict):
        error = error or value.get("isError") is True
        value = value.get("content")
    parts: list[ContentPart] = []
    if error and not value:
        parts.append(TextBlock(text=as_text(result.get("error"))))
    for content in as_list(value):
        content = as_dict(content)
        if content.get("type") == "image":
            parts.append(
                ImageBlock(
                    data=str_or_none(content.get("data")),
                    media_type=str_or_none(content.get("mimeType")),
                )
            )
        elif content.get("type") == "text":
            parts.append(TextBlock(text=as_text(content.get("text"))))
        elif content:
            resource = as_dict(content.get("resource"))
            parts.append(TextBlock(text=as_text(resource.get("text")) or json.dumps(content)))
    return ToolResultBlock(
        tool_call_id=as_text(item.get("id")), content=tuple(parts), is_error=error
    )


__all__ = ["GooseFormat"]
