"""Qwen Code chats (`~/.qwen/projects/<project>/chats/<session id>.jsonl`), a fork of Gemini CLI.

Upstream: QwenLM/qwen-code `packages/core/src/services/chatRecordingService.ts` (`ChatRecord`,
read at commit 015346f1d5d7312fddaf84a7ef1f83c7d217d389) and `sessionService.ts` /
`session-api-history.ts` (`buildApiHistoryFromConversation`: what a resumed session sends).

What differs from Gemini CLI (read by `gemini-cli`): Qwen Code replaced the `ConversationRecord`
JSON (messages of type user / gemini with `toolCalls`) by an append-only JSONL of `ChatRecord`s,
shaped like Claude Code's records: `uuid`, `parentUuid` (a tree, for branches and rewinds),
`sessionId`, `timestamp`, `cwd`, `version`, `gitBranch`, `type` user / assistant / tool_result /
system, `subtype`, `provenance` (`real_user`, `system`, `goal_runtime`, ...), and `message`: the
Gemini API `Content` (`{role, parts}`) exactly as sent, so a call is a `functionCall` part of an
assistant record and its result a `functionResponse` part of the `tool_result` record after it
(`toolCallResult` repeats it for the UI). A compression is a `system` record of subtype
`chat_compression` whose `systemPayload.compressedHistory` replaces the history before it.

Mapping: the conversation is the path from the file's last record to the root through
`parentUuid` (a parent missing from the file is bridged to the record before it, where Qwen Code
would show a gap and lose what came before); on that path, the history a resume sends: from the
last `chat_compression` (its `compressedHistory`, whose first user turn is the summary, `origin:
summary`) or from the start, every user, assistant and tool_result record's `message`, read as
Gemini API content (`gemini_cli.history_turns`: thoughts, text, calls; `functionResponse` parts
answer the calls they name). A user record is the user's words unless Qwen Code wrote it
(`provenance` system / goal_runtime / goal_control, or subtype `notification` / `cron`): then
`origin: harness`. System records (titles, telemetry, slash and @ commands, snapshots, ...) and
records off the path are counted in `skipped_records`. The user's words inside tool results are
pinned: the answers of Qwen Code's `ask_user_question` (after "User has provided the following
answers:"), `user-answer`, and what Gemini CLI's finder pins (content the user rewrote before
approving an edit, a shell-mode command). A line that is not JSON is skipped, as its JSONL reader skips it.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from pydantic import JsonValue

from ..context import ORIGIN_KEY, AgentContext
from ._events import refuse_unless
from ._marks import Span, Where, find_after, mark_words
from ._util import (
    as_dict,
    as_list,
    as_text,
    str_or_none,
    turns_context,
)
from .base import Document, Format
from .gemini_cli import history_turns, users_words

_MESSAGE_TYPES = ("user", "assistant", "tool_result")
_HARNESS_PROVENANCE = ("system", "goal_runtime", "goal_control")
_HARNESS_SUBTYPES = ("notification", "cron")


class QwenCodeFormat(Format):
    name = "qwen-code"
    description = "Qwen Code chat JSONL (~/.qwen/projects/<project>/chats/<id>.jsonl)"
    extension = ".jsonl"
    priority = 11  # its records carry Claude Code's keys too; the `message.parts` are Qwen's
    malformed_lines = "skip"

    def sniff(self, doc: Document) -> bool:
        try:
            records = [r for r in _records(doc)[:50] if isinstance(r, dict)]
            messages = [r for r in records if r.get("type") in _MESSAGE_TYPES]
            return bool(messages) and all(_is_record(r) for r in messages)
        except Exception:
            return False

    def load(self, doc: Document) -> list[AgentContext]:
        refuse_unless(
            self, doc, "a Qwen Code chat (records with uuid, sessionId and message.parts)"
        )
        records = [r for r in _records(doc) if isinstance(r, dict)]
        skipped: Counter[str] = Counter()
        path = _path(records, skipped)
        history, metas = _history(path, skipped)
        first = path[0] if path else (records[0] if records else {})
        models = [m for r in path if isinstance(m := r.get("model"), str)]
        ctx = turns_context(
            self.name,
            history_turns(history, metas),
            skipped,
            session_id=str_or_none(first.get("sessionId")),
            cwd=str_or_none(first.get("cwd")),
            model=models[-1] if models else None,
            version=str_or_none(first.get("version")),
            git_branch=str_or_none(first.get("gitBranch")),
        )
        return [mark_words(ctx, _users_words)]


_ANSWERS = "User has provided the following answers:\n\n"
"""How `ask_user_question`'s result begins (packages/core/src/tools/askUserQuestion.ts,
`AskUserQuestionToolInvocation.execute`): the user's answers follow, `**header**: answer` a line."""


def _users_words(where: Where, text: str) -> list[Span]:
    """Qwen Code's `ask_user_question` answers, else what Gemini CLI's finder finds (Qwen Code
    keeps its edit and shell-mode texts)."""
    if where.result is not None:
        answers = find_after(text, _ANSWERS)
        if answers is not None:
            return [Span(*answers, "user-answer")]
    return users_words(where, text)


def _path(records: list[dict[str, Any]], skipped: Counter[str]) -> list[dict[str, Any]]:
    """The records from the root to the file's last record through `parentUuid` (a record
    written again under its uuid replaces the earlier copy); the others are counted."""
    by_uuid: dict[str, int] = {}
    previous: dict[int, int] = {}
    last: int | None = None
    for index, record in enumerate(records):
        uuid = record.get("uuid")
        if not isinstance(uuid, str):
            skipped[_kind(record)] += 1
            continue
        if uuid in by_uuid:
            skipped[f"{_kind(records[by_uuid[uuid]])} (rewritten)"] += 1
        by_uuid[uuid] = index
        if last is not None:
            previous[index] = last
        last = index
    kept: list[int] = []
    seen: set[int] = set()
    current = last
    while current is not None and current not in seen:
        seen.add(current)
        kept.append(current)
        link = records[current].get("parentUuid")
        if not isinstance(link, str):
            break
        current = by_uuid.get(link, previous.get(current))
    for index in by_uuid.values():
        if index not in seen:
            skipped[f"off-path/{_kind(records[index])}"] += 1
    return [records[i] for i in reversed(kept)]


def _history(
    path: list[dict[str, Any]], skipped: Counter[str]
) -> tuple[list[dict[str, Any]], list[dict[str, JsonValue]]]:
    """The Gemini API history a resume sends, with each content's metadata."""
    start = 0
    history: list[dict[str, Any]] = []
    metas: list[dict[str, JsonValue]] = []
    for index, record in enumerate(path):
        payload = as_dict(record.get("systemPayload"))
        if record.get("subtype") == "chat_compression" and isinstance(
            payload.get("compressedHistory"), list
        ):
            start = index + 1
            history = [as_dict(c) for c in payload["compressedHistory"]]
            metas = [{} for _ in history]
            summary = next((i for i, c in enumerate(history) if c.get("role") == "user"), None)
            if summary is not None:
                metas[summary] = {ORIGIN_KEY: "summary", "compact_summary": True}
    for record in path[:start]:
        if record.get("type") != "system":
            skipped[f"compressed/{_kind(record)}"] += 1
    for record in path[start:]:
        message = record.get("message")
        if record.get("type") not in _MESSAGE_TYPES or not isinstance(message, dict):
            skipped[_kind(record)] += 1
            continue
        history.append({"role": message.get("role"), "parts": as_list(message.get("parts"))})
        metas.append(_meta(record))
    return history, metas


def _meta(record: dict[str, Any]) -> dict[str, JsonValue]:
    meta: dict[str, JsonValue] = {}
    for key in ("uuid", "timestamp", "model"):
        value = str_or_none(record.get(key))
        if value is not None:
            meta[key] = value
    usage = record.get("usageMetadata")
    if isinstance(usage, dict):
        meta["usage"] = usage
    if record.get("type") == "user" and (
        record.get("provenance") in _HARNESS_PROVENANCE
        or record.get("subtype") in _HARNESS_SUBTYPES
    ):
        meta[ORIGIN_KEY] = "harness"
    return meta


def _is_record(record: dict[str, Any]) -> bool:
    message = record.get("message")
    return (
        isinstance(record.get("uuid"), str)
        and "parentUuid" in record
        and isinstance(record.get("sessionId"), str)
        and isinstance(message, dict)
        and isinstance(message.get("parts"), list)
        and "content" not in message
    )


def _kind(record: dict[str, Any]) -> str:
    kind = as_text(record.get("type")) or "unknown"
    sub = record.get("subtype")
    return f"{kind}/{sub}" if isinstance(sub, str) and sub else kind


def _records(doc: Document) -> list[Any]:
    if doc.kind == "jsonl":
        return list(doc.data)
    return [doc.data] if isinstance(doc.data, dict) else []


__all__ = ["QwenCodeFormat"]
