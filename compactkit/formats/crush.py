"""Crush's `crush.db` and the Go OpenCode's `opencode.db`: one SQLite schema, two agents.

Upstream: charmbracelet/crush (read at 37f36e93824e5c4f892e4a817f7f628e2682fe14) and its
predecessor opencode-ai/opencode (archived, read at f0571f5f5adef12eba9ddf6d07223a043d63dca8),
which share `internal/db/migrations/` (`sessions`, `messages` with the JSON `parts`, `files`),
`internal/db/sql/messages.sql` (`ListMessagesBySession`: `ORDER BY created_at`),
`internal/message/message.go` (`marshalParts`: `[{"type", "data"}]`, types `reasoning`, `text`,
`image_url`, `binary`, `tool_call`, `tool_result`, `finish`, and Crush's `shell_command`; an
unknown type fails the whole session) and `internal/message/content.go` (the part structs and,
in Crush, `ToAIMessage`, what the model is sent), with Crush's `internal/agent/agent.go`
(`preparePrompt`, `getSessionMessages`).

Which agent wrote the file is told by its schema, never its name: Crush's migrations added
`messages.provider`, `messages.is_summary_message`, `sessions.todos`, the `read_files` table and
made `files.version` an INTEGER; a database with none of them is the Go OpenCode's. (sst
OpenCode's `opencode.db` has tables `session`, `message`, `part`: `opencode.py` reads it.) Both
run the database in WAL mode: it is read from a copy with its `-wal` (`_sqlite.open_snapshot`).

Every session is a conversation (`FILE#N`): the sessions Crush lists (no `parent_session_id`)
in creation order, then the ones it runs for itself, each marked `sidechain: True` with its
`parent_session_id`: a sub-agent's (id `<message id>$$<tool call id>` in Crush, the tool call id
in the Go OpenCode: `parent_tool_call_id`) and a title generation's (id `title-<parent>`,
`crush_session_kind: "title"`). Messages are read a row at a time in `created_at` order (row
order within a second), and mapped as `preparePrompt` / `ToAIMessage` send them:

* a user message -> its text (the human's words) and images (`binary` parts, base64); text
  attachments (`binary` parts of a `text/*` type) go to a user message of their own after it,
  origin `harness`, written as Crush writes them into the prompt; a bang-mode command
  (`shell_command`) -> a user message `$ <command>` + its output + `(exit code N)`, origin
  `harness`, the command pinned as the user's (`user-command`); `image_url` parts are not sent;
* an assistant message -> reasoning (with its signature) as thinking, text, tool calls (`input`
  parsed as JSON); one with none of them (cancelled before it replied) is left out, as Crush
  leaves it out (the Go OpenCode's providers also leave out one holding only reasoning, which
  they never send back); the session's compaction summary (`sessions.summary_message_id`, an assistant
  message that Crush sends as the user's) -> a user message, origin `summary`, metadata
  `crush_summary`;
* a tool message -> its results: `is_error` -> an error result, `data` -> an image
  (`mime_type`; data that is not base64 -> "[Image data could not be loaded]"), else `content`.
  A result whose call is nowhere in the session is dropped, as Crush drops it; a call with no
  result gets a synthesized error result, except the calls of the last assistant message;
* `finish` parts end a message and are not sent: counted by type in `skipped_records`.

The user's words inside tool results are pinned: the answers to Crush's `question` tool
(`internal/agent/tools/question.go`, `formatAnswers`). The Go OpenCode stores none there (a
denied permission is "Permission denied").
"""

from __future__ import annotations

import base64
import binascii
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
from ._marks import Span, Where, mark_words
from ._pairing import Turn, repair_pairing
from ._sqlite import open_snapshot, schema_of
from ._util import (
    as_dict,
    as_text,
    context_metadata,
    is_sqlite,
    note_repairs,
    note_skipped,
    number_conversations,
    parse_arguments,
    str_or_none,
)
from .base import Document, Format

_KEY = "crush_sessions"
CRUSH = "crush"
OPENCODE_GO = "opencode-go"
_PARTS = {
    CRUSH: frozenset(
        {"reasoning", "text", "image_url", "binary", "tool_call", "tool_result", "finish"}
        | {"shell_command"}
    ),
    OPENCODE_GO: frozenset(
        {"reasoning", "text", "image_url", "binary", "tool_call", "tool_result", "finish"}
    ),
}
"""The part types each agent's `unmarshalParts` knows; any other fails its session."""
_AGENT = {CRUSH: "Crush", OPENCODE_GO: "the Go OpenCode"}
ATTACHED_TEXT = (
    "<system_info>The files below have been attached by the user, consider them in your response"
    "</system_info>"
)
MEDIA_FAILED = "[Image data could not be loaded]"
_ANSI = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)")


class _CrushDatabaseFormat(Format):
    """A database of the Crush schema lineage; `name` says which agent's schema it must have."""

    extension = ".db"
    priority = 10

    def read_layout(self, path: Path) -> Document | None:
        for folder, name in ((".crush", "crush.db"), (".opencode", "opencode.db")):
            if path.is_dir() and path.name == folder and (path / name).is_file():
                path = path / name  # the project's data folder
        if not is_sqlite(path) or _lineage(path) != self.name:
            return None
        return Document(str(path), "json", {_KEY: _Database.open(path, self.name)})

    def sniff(self, doc: Document) -> bool:
        database = doc.data.get(_KEY) if isinstance(doc.data, dict) else None
        return isinstance(database, _Database) and database.lineage == self.name

    def load(self, doc: Document) -> list[AgentContext]:
        if not self.sniff(doc):
            raise BadInputError(
                f"not a {_AGENT[self.name]} database", path=doc.path, hint=self._hint()
            )
        database: _Database = doc.data[_KEY]
        builders = {s["id"]: _CrushSessionContextBuilder(s, self.name) for s in database.sessions}
        for row in database.messages():  # converted as each is read
            builder = builders.get(row["session_id"])
            if builder is not None:
                builder.add(row)
        own = [b for b in builders.values() if not b.session.get("parent_session_id")]
        runs = [b for b in builders.values() if b.session.get("parent_session_id")]
        return number_conversations([b.context() for b in own + runs if b.turns])

    def _hint(self) -> str:
        return "give .crush/crush.db" if self.name == CRUSH else "give .opencode/opencode.db"


class CrushFormat(_CrushDatabaseFormat):
    name = CRUSH
    description = "Crush sessions (.crush/crush.db)"


class OpenCodeGoFormat(_CrushDatabaseFormat):
    name = OPENCODE_GO
    description = "The Go OpenCode's sessions (opencode-ai/opencode, .opencode/opencode.db)"


def _lineage(path: Path) -> str | None:
    """`"crush"` or `"opencode-go"` for a database of their schema, None for any other."""
    tables, columns = schema_of(path)
    messages = columns.get("messages", {})
    if "sessions" not in tables or "parts" not in messages or "role" not in messages:
        return None
    crushes = (
        {"provider", "is_summary_message"} & set(messages)
        or "todos" in columns["sessions"]
        or "read_files" in tables
        or columns.get("files", {}).get("version") == "INTEGER"
    )
    return CRUSH if crushes else OPENCODE_GO


# --------------------------------------------------------------------------- reading the store


@dataclass(frozen=True)
class _Database:
    """A database: its sessions, read whole (a row each), and its messages, read a row at a time
    as they are converted."""

    path: Path
    lineage: str
    sessions: list[dict[str, Any]]

    @classmethod
    def open(cls, path: Path, lineage: str) -> _Database:
        try:
            with open_snapshot(path) as db:
                rows = db.execute("SELECT * FROM sessions ORDER BY created_at, rowid")
                sessions = [dict(r) for r in rows]
        except sqlite3.Error as exc:
            raise BadInputError(
                f"cannot read the {_AGENT[lineage]} database: {exc}", path=str(path)
            ) from None
        return cls(path, lineage, sessions)

    def messages(self) -> Iterator[dict[str, Any]]:
        """Every message row, its `parts` parsed, in `created_at` order (row order within a
        second, as SQLite gives rows of one `created_at`)."""
        known = _PARTS[self.lineage]
        try:
            with open_snapshot(self.path) as db:
                for row in db.execute("SELECT * FROM messages ORDER BY created_at, rowid"):
                    message = dict(row)
                    message["parts"] = self._parts(message, known)
                    yield message
        except sqlite3.Error as exc:
            raise BadInputError(
                f"cannot read the {_AGENT[self.lineage]} database: {exc}", path=str(self.path)
            ) from None

    def _parts(self, message: dict[str, Any], known: frozenset[str]) -> list[dict[str, Any]]:
        """A message's parts as (type, data) dicts; `BadInputError` where its agent's
        `unmarshalParts` fails (the session would not open)."""
        where = f"message {message.get('id')}"
        try:
            parts = json.loads(message.get("parts") or "[]")
        except (json.JSONDecodeError, TypeError) as exc:
            raise BadInputError(
                f"{where}: its parts are not JSON ({exc})", path=str(self.path)
            ) from None
        if not isinstance(parts, list):
            raise BadInputError(f"{where}: its parts are not a list", path=str(self.path))
        out = []
        for part in parts:
            part = as_dict(part)
            kind = part.get("type")
            if not isinstance(kind, str) or kind not in known:
                raise BadInputError(
                    f"{where}: part type {kind!r} is not one {_AGENT[self.lineage]} knows"
                    " (it cannot open this session either)",
                    path=str(self.path),
                )
            out.append({"type": kind, "data": as_dict(part.get("data"))})
        return out


# --------------------------------------------------------------------------- messages -> turns


class _CrushSessionContextBuilder:
    """Turns the messages of one session, in order, into turns."""

    def __init__(self, session: dict[str, Any], lineage: str) -> None:
        self.session = session
        self.lineage = lineage
        self.turns: list[Turn] = []
        self.skipped: Counter[str] = Counter()
        self.model: str | None = None

    def add(self, row: dict[str, Any]) -> None:
        role = row.get("role")
        parts: list[dict[str, Any]] = row["parts"]
        if not parts:
            self.skipped[f"message/{role} (empty)"] += 1  # preparePrompt: len(m.Parts) == 0
            return
        for part in parts:
            if part["type"] == "finish":
                self.skipped["part/finish"] += 1
        if role == "user":
            self.user(row, parts)
        elif role == "assistant":
            self.assistant(row, parts)
        elif role == "tool":
            self.tool(row, parts)
        else:
            self.skipped[f"message/{role}"] += 1  # ToAIMessage sends nothing for it

    def user(self, row: dict[str, Any], parts: list[dict[str, Any]]) -> None:
        human: list[Block] = []
        attached: list[str] = []
        shells: list[str] = []
        texts = [p["data"] for p in parts if p["type"] == "text"]
        if texts and as_text(texts[0].get("text")).strip():  # Content(): the first text part
            human.append(TextBlock(text=as_text(texts[0].get("text"))))
        self.skipped["part/text (not sent)"] += max(len(texts) - 1, 0)
        for part in parts:
            kind, data = part["type"], part["data"]
            if kind == "binary":
                mime = as_text(data.get("MIMEType"))
                if mime.startswith("text/"):
                    attached.append(_attachment(data))
                elif mime.startswith("image/"):
                    human.append(ImageBlock(data=as_text(data.get("Data")), media_type=mime))
                else:
                    name = as_text(data.get("Path")) or "file"
                    human.append(TextBlock(text=f"[Attached {mime or 'file'}: {name}]"))
            elif kind == "shell_command":
                shells.append(_shell(data))
            elif kind not in ("text", "finish"):  # ToAIMessage sends no other part of a user's
                self.skipped[f"part/{kind} (not sent)"] += 1
        meta = _stamp(row)
        if human:
            self.turns.append(Turn("user", human, meta))
        if attached:
            text = ATTACHED_TEXT + "\n" + "".join(attached)
            self.turns.append(Turn("user", [TextBlock(text=text)], _harness(meta, human)))
        for shell in shells:
            extra = _harness(meta, human or attached)
            extra["crush_shell_command"] = True
            self.turns.append(Turn("user", [TextBlock(text=shell)], extra))
        if not (human or attached or shells):
            self.skipped["message/user (empty)"] += 1

    def assistant(self, row: dict[str, Any], parts: list[dict[str, Any]]) -> None:
        meta = _stamp(row)
        if row.get("id") is not None and row.get("id") == self.session.get("summary_message_id"):
            text = next((as_text(p["data"].get("text")) for p in parts if p["type"] == "text"), "")
            meta.update({ORIGIN_KEY: "summary", "crush_summary": True})
            if text.strip():  # getSessionMessages: the summary is sent as the user's message
                self.turns.append(Turn("user", [TextBlock(text=text)], meta))
            else:
                self.skipped["message/assistant (empty)"] += 1
            return
        blocks: list[Block] = []
        for part in parts:
            kind, data = part["type"], part["data"]
            if kind == "reasoning" and as_text(data.get("thinking")):
                signature = str_or_none(data.get("signature")) or None
                blocks.append(
                    ThinkingBlock(thinking=as_text(data["thinking"]), signature=signature)
                )
            elif kind == "text" and as_text(data.get("text")).strip():
                blocks.append(TextBlock(text=as_text(data["text"])))
            elif kind in ("binary", "image_url", "tool_result", "shell_command"):
                self.skipped[f"part/{kind} (not sent)"] += 1  # not in an assistant's message
            elif kind == "tool_call":
                call_id = as_text(data.get("id"))
                blocks.append(
                    ToolCallBlock(
                        id=call_id,
                        name=as_text(data.get("name")) or "unknown",
                        input=parse_arguments(data.get("input")),
                    )
                )
        sent = blocks if self.lineage == CRUSH else [b for b in blocks if b.type != "thinking"]
        if not sent:  # cancelled before it replied: preparePrompt / convertMessages leave it out
            self.skipped["message/assistant (empty)"] += 1
            return
        for column in ("model", "provider"):
            if isinstance(row.get(column), str) and row[column]:
                meta[column] = row[column]
        reason = next((p["data"].get("reason") for p in parts if p["type"] == "finish"), None)
        if isinstance(reason, str):
            meta["finish_reason"] = reason
        if row.get("is_summary_message"):
            meta["crush_summary"] = True
        self.model = str_or_none(row.get("model")) or self.model
        self.turns.append(Turn("assistant", blocks, meta))

    def tool(self, row: dict[str, Any], parts: list[dict[str, Any]]) -> None:
        results: list[Block] = [_result(p["data"]) for p in parts if p["type"] == "tool_result"]
        for part in parts:
            if part["type"] not in ("tool_result", "finish"):
                self.skipped[f"part/{part['type']} (not sent)"] += 1
        if results:
            self.turns.append(Turn("tool", results, _stamp(row)))
        else:
            self.skipped["message/tool (empty)"] += 1

    def context(self) -> AgentContext:
        repaired = repair_pairing(
            [t.freeze() for t in self.turns],
            close="unless_answered",
            keep_pending="last_assistant",
            orphan_results="drop",  # filterOrphanedToolResults
        )
        session = self.session
        meta = context_metadata(
            self.lineage,
            session_id=str_or_none(session.get("id")),
            model=self.model,
            title=str_or_none(session.get("title")),
            **_run_of(session),
        )
        note_repairs(meta, repaired)
        note_skipped(meta, self.skipped)
        ctx = AgentContext(messages=tuple(repaired.messages), metadata=meta)
        return mark_words(ctx, _users_words)


# --------------------------------------------------------------------------- helpers


def _stamp(row: dict[str, Any]) -> dict[str, JsonValue]:
    meta: dict[str, JsonValue] = {}
    if isinstance(row.get("id"), str):
        meta["id"] = row["id"]
    if isinstance(row.get("created_at"), (int, float)):
        meta["timestamp"] = row["created_at"]
    return meta


def _harness(meta: dict[str, JsonValue], after: list[Any]) -> dict[str, JsonValue]:
    """The metadata of a harness turn: the message's own stamp unless a turn before it has it."""
    extra: dict[str, JsonValue] = {} if after else dict(meta)
    extra[ORIGIN_KEY] = "harness"
    return extra


def _attachment(data: dict[str, Any]) -> str:
    """A text attachment as `PromptWithTextAttachments` writes it into the prompt."""
    path = as_text(data.get("Path"))
    head = f"<file path='{path}'>\n" if path else "<file>\n"
    return head + "\n" + _decoded(data.get("Data")) + "\n</file>\n"


def _decoded(value: Any) -> str:
    """A Go `[]byte` field (base64 in JSON) as text."""
    try:
        return base64.b64decode(as_text(value), validate=True).decode("utf-8", "replace")
    except (binascii.Error, ValueError):
        return as_text(value)


def _shell(data: dict[str, Any]) -> str:
    """A bang-mode command as `ToAIMessage` sends it."""
    code = data.get("exit_code")
    code = code if isinstance(code, int) and not isinstance(code, bool) else 0
    output = _ANSI.sub("", as_text(data.get("output")))
    return f"$ {as_text(data.get('command'))}\n{output}\n(exit code {code})"


def _result(data: dict[str, Any]) -> ToolResultBlock:
    content: list[ContentPart] = []
    error = data.get("is_error") is True
    media = as_text(data.get("data"))
    if media and not error:
        try:
            base64.b64decode(media, validate=True)
            content.append(ImageBlock(data=media, media_type=str_or_none(data.get("mime_type"))))
        except (binascii.Error, ValueError):
            content.append(TextBlock(text=MEDIA_FAILED))
    elif as_text(data.get("content")):
        content.append(TextBlock(text=as_text(data.get("content"))))
    return ToolResultBlock(
        tool_call_id=as_text(data.get("tool_call_id")), content=tuple(content), is_error=error
    )


def _run_of(session: dict[str, Any]) -> dict[str, JsonValue]:
    """How a session Crush runs for itself hangs on the one that ran it."""
    parent = str_or_none(session.get("parent_session_id"))
    if not parent:
        return {}
    meta: dict[str, JsonValue] = {"sidechain": True, "parent_session_id": parent}
    session_id = as_text(session.get("id"))
    if session_id.startswith("title-"):
        meta["crush_session_kind"] = "title"
    else:
        meta["crush_session_kind"] = "agent"
        meta["parent_tool_call_id"] = session_id.rpartition("$$")[2]
    return meta


_QUESTION = re.compile(r"^Q\d+: [^\n]*\n", re.MULTILINE)
_SKIPPED_ANSWER = "User skipped this question"


def _users_words(where: Where, text: str) -> list[Span]:
    """The user's words in tool results: each answer to the `question` tool (`formatAnswers`:
    "Q<n>: <question>" then the answer: yes / no, the choices, the text typed, notes); and the
    command of a bang-mode turn."""
    if where.result is None:
        if where.message.metadata.get("crush_shell_command") and text.startswith("$ "):
            end = text.find("\n")
            end = len(text) if end < 0 else end
            return [Span(2, end, "user-command")] if text[2:end].strip() else []
        return []
    if where.tool != "question" or where.result.is_error:
        return []
    headers = list(_QUESTION.finditer(text))
    starts = [h.end() for h in headers] or [0]
    ends = [h.start() for h in headers[1:]] + [len(text)]
    spans = []
    for start, end in zip(starts, ends, strict=True):
        answer = text[start:end].rstrip("\n")
        if answer.strip() and answer.strip() != _SKIPPED_ANSWER:
            spans.append(Span(start, start + len(answer), "user-answer"))
    return spans


__all__ = ["CrushFormat", "OpenCodeGoFormat"]
