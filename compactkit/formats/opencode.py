"""OpenCode sessions: the SQLite `opencode.db` and the older `storage/` JSON files.

Upstream: anomalyco/opencode (formerly sst/opencode) `packages/opencode/src/session/session.sql.ts`
(tables `session`, `message` and `part`, each `message` / `part` row holding its JSON in `data`),
`src/session/message-v2.ts` (`MessageV2.Info` and `Part`, and `toModelMessages`, what the model is
sent) and the older storage layout under `~/.local/share/opencode/storage/`:
`session/<project>/<session>.json`, `message/<session>/<message>.json`,
`part/<message>/<part>.json` (the same JSON, one file each); before that, a project's
`storage/session/` with `info/`, `message/` and, later, `part/` folders, its first messages holding
their parts inline (see `_opencode_legacy`).

Given `opencode.db`, or the `storage` folder (or a session's `session/<project>/<id>.json`), every
session is a conversation (`FILE#N`, oldest first; a sub-agent's session records `parent_session`).
Messages are read in id order (OpenCode's ids ascend with time), parts in id order, and mapped as
`toModelMessages` maps them:

* a user message -> its `text` parts (not `ignored`) as the human's words; parts OpenCode wrote
  itself (`synthetic: true`, e.g. the content of a file the user @-mentioned) go to a user message
  of their own after it, origin `harness`; `file` parts -> images (`image/*`) or a line naming the
  file; a `compaction` part -> the text OpenCode sends, "What did we do so far?", and a `subtask`
  part -> "The following tool was executed by the user", both origin `harness`;
* an assistant message -> `reasoning` parts as thinking, `text` parts as text, each `tool` part as a
  call (`callID`, `tool`, `state.input`) whose result follows in a tool message: `completed` ->
  `state.output` ("[Old tool result content cleared]" once OpenCode pruned it,
  `state.time.compacted`), `error` -> `state.error` (`is_error`; a call interrupted after it printed,
  `state.metadata.interrupted`, -> that `metadata.output`), `pending` / `running` ->
  "[Tool execution was interrupted]" (`is_error`); an assistant message with `summary: true` is
  OpenCode's compaction summary (message metadata `opencode_summary`). An assistant message that
  ended in an error is left out, as OpenCode leaves it out, unless the user aborted it
  (`MessageAbortedError`) after it produced more than step markers and reasoning;
* `step-start`, `step-finish`, `snapshot`, `patch`, `agent`, `retry` parts never reach the model:
  counted by type in `skipped_records`.

The user's words inside tool results are pinned (`AgentContext.pins`, see `_users_words`): the
feedback typed when rejecting a call and the answers to the question tool.
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
    ImageBlock,
    TextBlock,
    ThinkingBlock,
    ToolCallBlock,
    ToolResultBlock,
)
from ..errors import BadInputError
from ._marks import Span, Where, find_after, mark_words
from ._opencode_legacy import is_project_storage, project_storage_sessions
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
from .base import Document, Format, read_document

DB_FILE = "opencode.db"
COMPACTION_TEXT = "What did we do so far?"
SUBTASK_TEXT = "The following tool was executed by the user"
PRUNED_TEXT = "[Old tool result content cleared]"
INTERRUPTED_TEXT = "[Tool execution was interrupted]"
_KEY = "opencode_sessions"


class OpenCodeFormat(Format):
    name = "opencode"
    description = "OpenCode sessions (opencode.db, or the storage/ JSON folder)"
    extension = ".db"
    priority = 10

    def read_layout(self, path: Path) -> Document | None:
        if is_sqlite(path) and _has_tables(path, ("session", "message", "part")):
            return Document(str(path), "json", {_KEY: _Database.open(path)})
        first, only = _project_storage_of(path)
        if first is not None:
            return Document(str(path), "json", {_KEY: project_storage_sessions(first, only)})
        storage, only = _storage_of(path)
        if storage is None:
            return None
        return Document(str(path), "json", {_KEY: _from_storage(storage, only)})

    def sniff(self, doc: Document) -> bool:
        return doc.kind == "json" and isinstance(doc.data, dict) and _KEY in doc.data

    def load(self, doc: Document) -> list[AgentContext]:
        sessions = doc.data.get(_KEY) if isinstance(doc.data, dict) else None
        if isinstance(sessions, _Database):
            infos = sessions.sessions
            builders = [_OpenCodeContextBuilder() for _ in infos]
            of_session: dict[Any, list[_OpenCodeContextBuilder]] = {}
            for info, builder in zip(infos, builders, strict=True):
                of_session.setdefault(info.get("id"), []).append(builder)
            for session_id, info, parts in sessions.messages():  # converted as each is read
                for builder in of_session.get(session_id, ()):
                    builder.add(info, parts)
        elif isinstance(sessions, list):  # the storage folders: a file a message or part
            infos, builders = [], []
            for session in sessions:
                session = as_dict(session)
                builder = _OpenCodeContextBuilder()
                given = session.get("messages")
                messages = given if isinstance(given, _StoredMessages) else as_list(given)
                for message in messages:
                    message = as_dict(message)
                    parts = [as_dict(p) for p in as_list(message.get("parts"))]
                    builder.add(as_dict(message.get("info")), parts)
                infos.append(as_dict(session.get("info")))
                builders.append(builder)
        else:
            raise BadInputError(
                "not an OpenCode session store",
                path=doc.path,
                hint="give opencode.db or the storage/ folder (~/.local/share/opencode/)",
            )
        contexts = [b.context(i) for i, b in zip(infos, builders, strict=True) if b.turns]
        return number_conversations(contexts)


# --------------------------------------------------------------------------- messages -> turns


class _OpenCodeContextBuilder:
    """Turns the messages of one session, in order, into turns."""

    def __init__(self) -> None:
        self.turns: list[Turn] = []
        self.skipped: Counter[str] = Counter()
        self.model: str | None = None

    def add(self, info: dict[str, Any], parts: list[dict[str, Any]]) -> None:
        role = info.get("role")
        if role == "user":
            self.user(info, parts)
        elif role == "assistant":
            self.assistant(info, parts)
        else:
            self.skipped[f"message/{role}"] += 1

    def user(self, info: dict[str, Any], parts: list[dict[str, Any]]) -> None:
        human: list[Block] = []
        harness: list[Block] = []
        for part in parts:
            kind = part.get("type")
            if kind == "text" and not part.get("ignored"):
                (harness if part.get("synthetic") else human).append(
                    TextBlock(text=as_text(part.get("text")))
                )
            elif kind == "file":
                mime = as_text(part.get("mime"))
                if mime in ("text/plain", "application/x-directory"):
                    self.skipped["part/file (sent as text)"] += 1
                elif mime.startswith("image/"):
                    human.append(ImageBlock(url=str_or_none(part.get("url")), media_type=mime))
                else:
                    name = as_text(part.get("filename")) or "file"
                    human.append(TextBlock(text=f"[Attached {mime}: {name}]"))
            elif kind == "compaction":
                harness.append(TextBlock(text=COMPACTION_TEXT))
            elif kind == "subtask":
                harness.append(TextBlock(text=SUBTASK_TEXT))
            else:
                self.skipped[f"part/{kind}"] += 1
        meta = _stamp(info)
        if human:
            self.turns.append(Turn("user", human, meta))
        if harness:
            extra: dict[str, JsonValue] = {} if human else dict(meta)
            extra[ORIGIN_KEY] = "harness"
            self.turns.append(Turn("user", harness, extra))
        if not human and not harness:
            self.skipped["message/user (empty)"] += 1

    def assistant(self, info: dict[str, Any], parts: list[dict[str, Any]]) -> None:
        substance = any(p.get("type") not in ("step-start", "reasoning") for p in parts)
        if info.get("error") and not (_aborted(info["error"]) and substance):
            self.skipped["message/assistant (error)"] += 1  # toModelMessages leaves it out
            return
        blocks: list[Block] = []
        results: list[Block] = []
        for part in parts:
            kind = part.get("type")
            if kind == "text":
                blocks.append(TextBlock(text=as_text(part.get("text"))))
            elif kind == "reasoning":
                blocks.append(ThinkingBlock(thinking=as_text(part.get("text"))))
            elif kind == "tool":
                call, result = _tool(part)
                blocks.append(call)
                results.append(result)
            else:
                self.skipped[f"part/{kind}"] += 1
        if not blocks:
            self.skipped["message/assistant (empty)"] += 1
            return
        meta = _stamp(info)
        for source, target in (("modelID", "model"), ("providerID", "provider"), ("mode", "mode")):
            if isinstance(info.get(source), str):
                meta[target] = info[source]
        if isinstance(info.get("tokens"), dict):
            meta["usage"] = info["tokens"]
        if info.get("summary") is True:
            meta["opencode_summary"] = True
        self.model = str_or_none(info.get("modelID")) or self.model
        self.turns.append(Turn("assistant", blocks, meta))
        if results:
            self.turns.append(Turn("tool", results))

    def context(self, session: dict[str, Any]) -> AgentContext:
        ctx = turns_context(
            OpenCodeFormat.name,
            self.turns,
            self.skipped,
            session_id=str_or_none(session.get("id")),
            cwd=str_or_none(session.get("directory")),
            model=self.model,
            title=str_or_none(session.get("title")),
            parent_session=str_or_none(session.get("parentID") or session.get("parent_id")),
            version=str_or_none(session.get("version")),
        )
        return mark_words(ctx, _users_words)


# --------------------------------------------------------------------------- reading the stores


def _has_tables(path: Path, tables: tuple[str, ...]) -> bool:
    try:
        with sqlite_read_only(path) as db:
            names = sqlite_tables(db)
    except sqlite3.Error:
        return False
    return set(tables) <= names


def _json(text: Any, where: str, path: Path) -> dict[str, Any]:
    try:
        value = json.loads(text) if isinstance(text, (str, bytes)) else text
    except json.JSONDecodeError as exc:
        raise BadInputError(f"{where}: its data is not JSON ({exc.msg})", path=str(path)) from None
    return value if isinstance(value, dict) else {}


@dataclass(frozen=True)
class _Database:
    """An `opencode.db`: its sessions, read whole (a row each), and its messages with their parts,
    read a row at a time as they are converted (every row fetched and parsed at once, kept beside
    the context, took four times the file)."""

    path: Path
    sessions: list[dict[str, Any]]

    @classmethod
    def open(cls, path: Path) -> _Database:
        try:
            with sqlite_read_only(path) as db:
                columns = {r[1] for r in db.execute("PRAGMA table_info(session)")}
                order = "time_created, id" if "time_created" in columns else "id"
                sessions = [dict(r) for r in db.execute(f"SELECT * FROM session ORDER BY {order}")]
        except sqlite3.Error as exc:
            raise BadInputError(
                f"cannot read the OpenCode database: {exc}", path=str(path)
            ) from None
        for session in sessions:
            session["parentID"] = session.pop("parent_id", None)
        return cls(path, sessions)

    def messages(self) -> Iterator[tuple[Any, dict[str, Any], list[dict[str, Any]]]]:
        """(session id, message, its parts in id order) of every message, in id order; a part
        whose message is not in the table is not read."""
        path = self.path
        query = (
            "SELECT m.id, m.session_id, m.data, p.message_id, p.id AS part_id, p.data AS part"
            " FROM message m LEFT JOIN part p ON p.message_id = m.id ORDER BY m.id, p.id"
        )
        try:
            with sqlite_read_only(path) as db:
                held: tuple[Any, dict[str, Any], list[dict[str, Any]]] | None = None
                for row in db.execute(query):
                    if held is None or row["id"] != held[1]["id"]:
                        if held is not None:
                            yield held
                        info = {**_json(row["data"], f"message {row['id']}", path), "id": row["id"]}
                        held = (row["session_id"], info, [])
                    if row["message_id"] is not None:
                        part = _json(row["part"], f"part {row['part_id']}", path)
                        held[2].append({**part, "id": row["part_id"]})
                if held is not None:
                    yield held
        except sqlite3.Error as exc:
            raise BadInputError(
                f"cannot read the OpenCode database: {exc}", path=str(path)
            ) from None


def _storage_of(path: Path) -> tuple[Path | None, str | None]:
    """(the `storage` folder, the one session to read or None for all) for a path inside it."""

    def is_storage(folder: Path) -> bool:
        return all((folder / sub).is_dir() for sub in ("session", "message", "part"))

    if path.is_dir() and is_storage(path):
        return path, None
    if path.is_file() and path.suffix == ".json" and len(path.parents) >= 3:
        root = path.parents[2]
        if path.parents[1].name == "session" and is_storage(root):
            return root, path.stem
    return None, None


def _project_storage_of(path: Path) -> tuple[Path | None, str | None]:
    """(the first layout's `storage/session/` folder, the one session to read or None for all)
    for that folder, the `storage/` holding it, or a session's `info/<id>.json`."""
    for folder in (path, path / "session"):
        if path.is_dir() and is_project_storage(folder):
            return folder, None
    info_file = path.is_file() and path.suffix == ".json" and path.parent.name == "info"
    if info_file and is_project_storage(path.parents[1]):
        return path.parents[1], path.stem
    return None, None


def _from_storage(storage: Path, only: str | None) -> list[dict[str, Any]]:
    infos = [read_document(f).data for f in sorted((storage / "session").glob("*/*.json"))]
    infos = [i for i in infos if isinstance(i, dict) and (only is None or i.get("id") == only)]
    infos.sort(key=lambda i: (as_dict(i.get("time")).get("created") or 0, as_text(i.get("id"))))
    return [{"info": info, "messages": _StoredMessages(storage, info)} for info in infos]


@dataclass(frozen=True)
class _StoredMessages:
    """A session's messages in the `storage/` folder, each with its parts, read a message at a
    time as they are converted (every file read at once and kept beside the context took about
    three times the files)."""

    storage: Path
    session: dict[str, Any]

    def __iter__(self) -> Iterator[dict[str, Any]]:
        """{"info", "parts"} of every message, in id order; its parts in id order."""
        folder = self.storage / "message" / as_text(self.session.get("id"))
        infos = [read_document(file).data for file in sorted(folder.glob("*.json"))]
        messages = [m for m in infos if isinstance(m, dict)]
        messages.sort(key=lambda m: as_text(m.get("id")))
        for message in messages:
            parts = [
                p
                for f in sorted((self.storage / "part" / as_text(message.get("id"))).glob("*.json"))
                if isinstance(p := read_document(f).data, dict)
            ]
            yield {"info": message, "parts": sorted(parts, key=lambda p: as_text(p.get("id")))}


# --------------------------------------------------------------------------- helpers


def _stamp(info: dict[str, Any]) -> dict[str, JsonValue]:
    meta: dict[str, JsonValue] = {}
    if isinstance(info.get("id"), str):
        meta["id"] = info["id"]
    created = as_dict(info.get("time")).get("created")
    if isinstance(created, (int, float)):
        meta["timestamp"] = created
    return meta


def _aborted(error: Any) -> bool:
    """`MessageV2.AbortedError` (the user stopped the reply), as `toObject()` stores it."""
    return isinstance(error, dict) and error.get("name") == "MessageAbortedError"


def _tool(part: dict[str, Any]) -> tuple[ToolCallBlock, ToolResultBlock]:
    state = as_dict(part.get("state"))
    call_id = as_text(part.get("callID")) or as_text(part.get("id"))
    raw_input = state.get("input")
    call = ToolCallBlock(
        id=call_id,
        name=as_text(part.get("tool")) or "unknown",
        input=raw_input if raw_input is not None else {},
    )
    status = state.get("status")
    if status == "completed":
        pruned = as_dict(state.get("time")).get("compacted")
        text, error = (PRUNED_TEXT if pruned else as_text(state.get("output"))), False
    elif status == "error":
        details = as_dict(state.get("metadata"))
        if details.get("interrupted") is True and isinstance(details.get("output"), str):
            text, error = details["output"], False  # what it printed before the interrupt
        else:
            text, error = as_text(state.get("error")), True
    else:
        text, error = INTERRUPTED_TEXT, True
    content = (TextBlock(text=text),) if text else ()
    attachments = [
        ImageBlock(url=str_or_none(a.get("url")), media_type=str_or_none(a.get("mime")))
        for a in as_list(state.get("attachments"))
        if isinstance(a, dict) and as_text(a.get("mime")).startswith("image/")
    ]
    return call, ToolResultBlock(
        tool_call_id=call_id, content=(*content, *attachments), is_error=error
    )


# --------------------------------------------------------------------------- the user's words

_CORRECTED = (
    "The user rejected permission to use this specific tool call with the following feedback: "
)
"""`PermissionNext.CorrectedError` (packages/opencode/src/permission/): a call the user rejected
with a message, which the model is sent as the call's error."""
_ANSWERED = "User has answered your questions: "
_ANSWERED_END = ". You can now continue with the user's answers in mind."
"""The question tool's output (packages/opencode/src/tool/question.ts): the answers between the
two."""


def _users_words(where: Where, text: str) -> list[Span]:
    """The user's words in tool results: the feedback given when rejecting a call, and the
    answers to the question tool."""
    if where.result is None:
        return []
    corrected = find_after(text, _CORRECTED)
    if corrected is not None:
        return [Span(*corrected, "user-feedback")]
    answered = find_after(text, _ANSWERED, (_ANSWERED_END,))
    return [Span(*answered, "user-answer")] if answered is not None else []


__all__ = ["OpenCodeFormat"]
