"""Gemini CLI chat sessions (`~/.gemini/tmp/<project>/chats/session-*.json` / `.jsonl`).

Upstream: google-gemini/gemini-cli `packages/core/src/services/chatRecordingService.ts` and
`chatRecordingTypes.ts` (`ConversationRecord`, `MessageRecord`, `ToolCallRecord`,
`loadConversationRecord`). Two shapes:

* older versions write one JSON `ConversationRecord`: `{"sessionId", "projectHash", "startTime",
  "lastUpdated", "summary"?, "messages": [...]}`;
* newer versions append JSONL records: a metadata line (`sessionId`, `projectHash`, ...), message
  records (a message written again under the same `id` replaces the earlier copy in place),
  `{"$set": {...}}` metadata updates (a `messages` list replaces the history, e.g. after a
  compression) and `{"$rewindTo": id}` (the user rewound: that message and all after it go).

A `/chat save` checkpoint (`checkpoint-<tag>.json` beside them, `core/logger.ts`
`saveCheckpoint`: `{"history": [Content], "authType"}`, older CLIs the bare `[Content]` array that
`loadCheckpoint` still reads) is the history as the model got it, read by `_checkpoint`.

Each message has `type` user / gemini / info / error / warning. A user message's `content` is
what the model got (Gemini API parts: text, inline images, files; `displayContent` is only what
the terminal showed). A gemini message holds the model's text (`content`), its thoughts
(`thoughts[]` of `{subject, description}`), its token counts (`tokens`) and the tool calls it made
(`toolCalls[]` of `{id, name, args, result, status}`), each call's `result` being the Gemini API
parts sent back (`functionResponse.response.output` / `.error`).

Mapping: user -> user (each exactly once; a user turn that a `$set` history brought in with a new
id, such as a compression's summary, gets `metadata["origin"] = "summary"`; `functionResponse`
parts answer the calls they name, or are left out when the call already has its result); gemini
-> assistant (thoughts as thinking blocks, then text, then calls), followed by one tool message
with the results of its calls. info / error / warning messages are shown in the terminal only
(never sent to the model): they are left out and counted in `metadata["skipped_records"]`, as are
rewound messages (`"<type> (rewound)"`), unknown record types and `functionResponse` copies. A
call with no result gets a synthesized error result (`"[no result recorded]"`), except the calls of
a final gemini message. The user's words inside tool results are pinned (`AgentContext.pins`,
see `_users_words`): the answers `ask_user` returned and content the user rewrote before approving
an edit, and the command of a shell-mode (`!`) turn, which is a user message holding the command
and its output (`origin: "harness"`).
"""

from __future__ import annotations

import re
from collections import Counter
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
from ._pairing import Turn, freeze_all, repair_pairing
from ._util import as_list, as_text, context_metadata, note_repairs, note_skipped, str_or_none
from .base import Document, Format

_UI_TYPES = ("info", "error", "warning")
_ERROR_STATUSES = ("error", "cancelled")


class GeminiCliFormat(Format):
    name = "gemini-cli"
    description = "Gemini CLI chat session JSON"
    extension = ".json"
    priority = 10
    malformed_lines = "skip"

    def sniff(self, doc: Document) -> bool:
        data = doc.data
        if doc.kind == "json" and _checkpoint_history(data) is not None:
            return True
        if doc.kind == "jsonl":
            head = data[0] if isinstance(data, list) and data else None
            return _is_header(head)
        if not isinstance(data, dict):
            return False
        messages = data.get("messages")
        if not isinstance(messages, list):
            return _is_header(data)  # a JSONL session holding only its metadata line
        if "sessionId" in data and "projectHash" in data:
            return True
        return any(isinstance(m, dict) and m.get("type") == "gemini" for m in messages[:50])

    def load(self, doc: Document) -> list[AgentContext]:
        if not self.sniff(doc):
            raise BadInputError(
                "not a Gemini CLI session (no sessionId/projectHash, no gemini messages)",
                path=doc.path,
                hint="expected ~/.gemini/tmp/<project>/chats/session-*.json or .jsonl",
            )
        history = _checkpoint_history(doc.data) if doc.kind == "json" else None
        if history is not None:
            return [_checkpoint(history)]
        builder = _GeminiCliContextBuilder()
        if doc.kind == "jsonl" or not isinstance(doc.data.get("messages"), list):
            records = doc.records if doc.kind == "jsonl" else [doc.data]
            data, messages = _replay(records, builder.skipped)
        else:
            data, messages = doc.data, doc.data["messages"]
        for msg in doc.take(messages):
            builder.add(msg)
        return [builder.context(data)]


# --------------------------------------------------------------------------- records -> turns


class _GeminiCliContextBuilder:
    """Turns the messages of one session, in order, into turns."""

    def __init__(self) -> None:
        self.turns: list[Turn] = []
        self.skipped: Counter[str] = Counter()
        self.n_calls = 0
        self.model: str | None = None
        self.unanswered: set[str] = set()  # calls a later functionResponse may answer

    def add(self, msg: Any) -> None:
        if not isinstance(msg, dict):
            self.skipped["invalid"] += 1
            return
        kind = msg.get("type")
        if kind in _UI_TYPES or (kind != "gemini" and kind != "user"):
            self.skipped[as_text(kind) or "unknown"] += 1
        elif kind == "user":
            if not self.user(msg):
                self.skipped["user"] += 1
        else:
            self.gemini(msg)

    def user(self, msg: dict[str, Any]) -> bool:
        """A user message (and the results of any `functionResponse` parts it carries); False when
        it adds nothing."""
        content = msg.get("content")
        items = content if isinstance(content, list) else [content]
        responses = [i for i in items if isinstance(i, dict) and "functionResponse" in i]
        rest = [i for i in items if not (isinstance(i, dict) and "functionResponse" in i)]
        added = False
        results: list[Block] = []
        for item in responses:
            response = item["functionResponse"]
            call_id = response.get("id") if isinstance(response, dict) else None
            if isinstance(call_id, str) and call_id in self.unanswered:
                parts, is_error = _function_response(response)
                results.append(
                    ToolResultBlock(tool_call_id=call_id, content=tuple(parts), is_error=is_error)
                )
                self.unanswered.discard(call_id)
        if results:
            self.turns.append(Turn("tool", results))
            added = True
        parts = _parts(rest if isinstance(content, list) else content) if rest else []
        if parts:
            meta = _meta(msg, "id", "timestamp")
            if msg.get("_synthetic"):
                meta[ORIGIN_KEY] = "summary"
            elif all(isinstance(p, TextBlock) and _SHELL_MODE.match(p.text) for p in parts):
                meta[ORIGIN_KEY] = "harness"  # a `!` command and its output: the command is pinned
            self.turns.append(Turn("user", list(parts), meta))
            added = True
        return added

    def gemini(self, msg: dict[str, Any]) -> None:
        """A model turn: thoughts, text and calls, then one tool message with the calls' results."""
        if self.model is None and isinstance(msg.get("model"), str):
            self.model = msg["model"]
        blocks: list[Block] = []
        for thought in as_list(msg.get("thoughts")):
            block = _thought(thought)
            if block is not None:
                blocks.append(block)
        blocks.extend(_parts(msg.get("content")))
        results: list[Block] = []
        for call in as_list(msg.get("toolCalls")):
            if not isinstance(call, dict):
                continue
            self.n_calls += 1
            call_id = call.get("id")
            if not isinstance(call_id, str) or not call_id:
                call_id = f"call_{self.n_calls}"
            args = call.get("args")
            blocks.append(
                ToolCallBlock(
                    id=call_id,
                    name=as_text(call.get("name")) or "tool",
                    input=args if args is not None else {},
                )
            )
            result = call.get("result")
            if result is None:
                self.unanswered.add(call_id)  # a later functionResponse, or repair_pairing, answers
                continue
            parts, is_error = _result_parts(result)
            results.append(
                ToolResultBlock(
                    tool_call_id=call_id,
                    content=parts,
                    is_error=is_error or call.get("status") in _ERROR_STATUSES,
                )
            )
        self.turns.append(
            Turn("assistant", blocks, _meta(msg, "id", "timestamp", "model", "tokens"))
        )
        if results:
            self.turns.append(Turn("tool", results))

    def context(self, data: dict[str, Any]) -> AgentContext:
        """The context, pairing repaired, with the session's metadata from `data`."""
        repaired = repair_pairing(
            freeze_all(self.turns),
            close="unless_answered",
            keep_pending="last_assistant",
            orphan_results="keep",
        )
        meta = context_metadata(
            GeminiCliFormat.name,
            session_id=str_or_none(data.get("sessionId")),
            project_hash=str_or_none(data.get("projectHash")),
            start_time=str_or_none(data.get("startTime")),
            last_updated=str_or_none(data.get("lastUpdated")),
            title=str_or_none(data.get("summary")),
            model=self.model or None,
        )
        note_repairs(meta, repaired)
        note_skipped(meta, self.skipped)
        return mark_words(
            AgentContext(messages=tuple(repaired.messages), metadata=meta), _users_words
        )


# --------------------------------------------------------------------------- helpers


_SETUP_CONTEXT = "This is the Gemini CLI. We are setting up the context for our chat."
"""How the environment context the CLI puts first in every chat history begins."""


def _checkpoint_history(data: Any) -> list[dict[str, Any]] | None:
    """The history of a `/chat save` checkpoint (`checkpoint-<tag>.json`, `Logger.saveCheckpoint`):
    `{"history": [Content], "authType"?}`, or, as older CLIs saved it, the bare `[Content]`;
    each Content `{role: "user" | "model", parts: [Part]}`. None for anything else."""
    history = data.get("history") if isinstance(data, dict) else data
    if isinstance(data, dict) and not set(data) <= {"history", "authType"}:
        return None
    if not isinstance(history, list) or not history:
        return None
    if not all(
        isinstance(c, dict)
        and c.get("role") in ("user", "model")
        and isinstance(c.get("parts"), list)
        for c in history
    ):
        return None
    return history


def _checkpoint(history: list[dict[str, Any]]) -> AgentContext:
    """A checkpoint's history as the model got it (`history_turns`), pairing repaired."""
    repaired = repair_pairing(
        [t.freeze() for t in history_turns(history)],
        close="unless_answered",
        keep_pending="last_assistant",
        orphan_results="user_message_each",
    )
    meta = context_metadata(GeminiCliFormat.name, gemini_layout="checkpoint")
    note_repairs(meta, repaired)
    return AgentContext(messages=tuple(repaired.messages), metadata=meta)


def history_turns(
    history: list[dict[str, Any]], metas: list[dict[str, JsonValue]] | None = None
) -> list[Turn]:
    """A Gemini API history (`[Content]`) as turns: `user` Content -> a user message (its
    `functionResponse` parts the results of the calls they name, by `id`, else by name, else
    the earliest open call; one answering no call is user text, `origin: tool-output`), `model`
    Content -> an assistant message (`thought` parts as thinking, text, `functionCall` parts as
    calls). The environment context the CLI sends first is `origin: harness`. `metas[i]`, when
    given, is the metadata of the messages `history[i]` makes (an `origin` only on user text)."""
    turns: list[Turn] = []
    open_calls: list[tuple[str, str]] = []
    n_calls = 0
    for index, content in enumerate(history):
        given = dict(metas[index]) if metas is not None else {}
        parts = [p for p in as_list(content.get("parts")) if isinstance(p, dict)]
        if content.get("role") == "model":
            blocks: list[Block] = []
            for part in parts:
                call = part.get("functionCall")
                if isinstance(call, dict):
                    cid = str_or_none(call.get("id")) or f"call_{n_calls}"
                    n_calls += 1
                    name = as_text(call.get("name"))
                    args = call.get("args") if isinstance(call.get("args"), dict) else {}
                    blocks.append(ToolCallBlock(id=cid, name=name, input=args))
                    open_calls.append((cid, name))
                elif part.get("thought") is True and isinstance(part.get("text"), str):
                    blocks.append(ThinkingBlock(thinking=part["text"]))
                else:
                    blocks.extend(_parts(part))
            given.pop(ORIGIN_KEY, None)
            turns.append(Turn("assistant", blocks, given))
            continue
        results: list[Block] = []
        for part in parts:
            response = part.get("functionResponse")
            if not isinstance(response, dict):
                continue
            wanted = str_or_none(response.get("id"))
            name = as_text(response.get("name"))
            match = (
                next((c for c in open_calls if c[0] == wanted), None)
                or next((c for c in open_calls if c[1] == name), None)
                or (open_calls[0] if open_calls and wanted is None else None)
            )
            if match is not None:
                open_calls.remove(match)
            found, error = _function_response(response)
            cid = match[0] if match else wanted or f"call_{name}"
            results.append(ToolResultBlock(tool_call_id=cid, content=tuple(found), is_error=error))
        if results:
            turns.append(Turn("tool", results, {k: v for k, v in given.items() if k != ORIGIN_KEY}))
        rest = _parts([p for p in parts if "functionResponse" not in p])
        if rest:
            text = " ".join(b.text for b in rest if isinstance(b, TextBlock))
            if _SETUP_CONTEXT in text or _SETUP_CONTEXT.replace("Gemini CLI", "Qwen Code") in text:
                given[ORIGIN_KEY] = "harness"
            turns.append(Turn("user", list(rest), given))
    return turns


def _is_header(record: Any) -> bool:
    return (
        isinstance(record, dict)
        and isinstance(record.get("sessionId"), str)
        and isinstance(record.get("projectHash"), str)
    )


def _parts(value: Any) -> list[ContentPart]:
    """Gemini API content (a string, a Part, or a list of Parts) as text/image parts."""
    if value is None:
        return []
    if isinstance(value, str):
        return [TextBlock(text=value)] if value else []
    if isinstance(value, dict):
        value = [value]
    if not isinstance(value, list):
        return [TextBlock(text=as_text(value))]
    out: list[ContentPart] = []
    for part in value:
        if isinstance(part, str):
            if part:
                out.append(TextBlock(text=part))
        elif not isinstance(part, dict):
            out.append(TextBlock(text=as_text(part)))
        elif isinstance(part.get("text"), str):
            if part["text"] and not part.get("thought"):
                out.append(TextBlock(text=part["text"]))
        elif isinstance(part.get("inlineData"), dict):
            data = part["inlineData"]
            out.append(ImageBlock(media_type=data.get("mimeType"), data=data.get("data")))
        elif isinstance(part.get("fileData"), dict):
            data = part["fileData"]
            out.append(ImageBlock(media_type=data.get("mimeType"), url=data.get("fileUri")))
        elif "functionResponse" in part:
            out.extend(_function_response(part["functionResponse"])[0])
        else:
            out.append(TextBlock(text=as_text(part)))
    return out


def _function_response(value: Any) -> tuple[list[ContentPart], bool]:
    """The text the model was sent for one functionResponse, and whether it was an error."""
    if not isinstance(value, dict):
        return [TextBlock(text=as_text(value))], False
    response = value.get("response")
    if isinstance(response, dict):
        if "output" in response:
            return _parts(response["output"]) or [TextBlock(text="")], False
        if "error" in response:
            return [TextBlock(text=as_text(response["error"]))], True
        if "content" in response:
            return _parts(response["content"]), False
    out: list[ContentPart] = [TextBlock(text=as_text(response))] if response is not None else []
    out.extend(_parts(value.get("parts")))
    return out, False


def _result_parts(result: Any) -> tuple[tuple[ContentPart, ...], bool]:
    """A tool call's `result` (a list of Parts around a functionResponse)."""
    items = result if isinstance(result, list) else [result]
    parts: list[ContentPart] = []
    is_error = False
    for item in items:
        if isinstance(item, dict) and "functionResponse" in item:
            found, error = _function_response(item["functionResponse"])
            parts.extend(found)
            is_error = is_error or error
        else:
            parts.extend(_parts(item))
    return tuple(parts), is_error


def _thought(value: Any) -> ThinkingBlock | None:
    if isinstance(value, str):
        return ThinkingBlock(thinking=value) if value else None
    if not isinstance(value, dict):
        return None
    subject = as_text(value.get("subject")).strip()
    description = as_text(value.get("description"))
    text = f"**{subject}**\n{description}" if subject else description
    return ThinkingBlock(thinking=text) if text else None


def _meta(msg: dict[str, Any], *keys: str) -> dict[str, JsonValue]:
    out: dict[str, JsonValue] = {}
    for key in keys:
        value = msg.get(key)
        if value is not None:
            out["usage" if key == "tokens" else key] = value
    return out


def _replay(records: list[Any], skipped: Counter[str]) -> tuple[dict[str, Any], list[Any]]:
    """The conversation a JSONL session file holds, replayed as `loadConversationRecord` does:
    metadata lines and `$set` merged, messages upserted by id, `$rewindTo` truncating. A `$set`
    message list replaces the history; the messages it drops (what a compression summarized)
    are kept before it, so no user message is lost, and user turns it brings in under new ids
    are marked synthetic."""
    meta: dict[str, Any] = {}
    messages: dict[str, dict[str, Any]] = {}
    for record in records:
        if not isinstance(record, dict):
            skipped["invalid"] += 1
        elif isinstance(record.get("$rewindTo"), str):
            ids = list(messages)
            cut = ids.index(record["$rewindTo"]) if record["$rewindTo"] in ids else 0
            for gone in ids[cut:]:
                skipped[f"{as_text(messages.pop(gone).get('type'))} (rewound)"] += 1
        elif isinstance(record.get("$set"), dict):
            update = dict(record["$set"])
            history = update.pop("messages", None)
            meta.update(update)
            if isinstance(history, list) and history:
                kept = {k: v for k, v in messages.items()}
                replaced: dict[str, dict[str, Any]] = {}
                for msg in history:
                    if not isinstance(msg, dict) or not isinstance(msg.get("id"), str):
                        continue
                    if msg["id"] not in kept and msg.get("type") == "user":
                        msg = {**msg, "_synthetic": True}
                    replaced[msg["id"]] = msg
                dropped = {k: v for k, v in kept.items() if k not in replaced}
                messages = {**dropped, **replaced}
        elif isinstance(record.get("id"), str) and "type" in record:
            messages[record["id"]] = record  # a rewrite keeps the first position
        elif _is_header(record):
            meta.update({k: v for k, v in record.items() if k != "messages"})
        else:
            skipped["unknown"] += 1
    return meta, list(messages.values())


# --------------------------------------------------------------------------- the user's words

ASK_TOOL = "ask_user"
"""packages/core/src/tools/ask-user.ts (`AskUserInvocation.execute`): the answers as
`{"answers": {...}}`; a dismissed dialog says so in plain text instead."""
_USER_EDIT = re.compile(r"User modified the `\w+` (?:content )?to be: ")
"""packages/core/src/tools/edit.ts and write-file.ts: when the user changed the proposed content
in their editor before approving, the result ends with what they made it."""


_SHELL_MODE = re.compile(
    r"I ran the following shell command:\n```sh\n(.*?)\n```\n\nThis produced the following result:",
    re.DOTALL,
)
"""packages/cli/src/ui/hooks/shellCommandProcessor.ts (`addShellCommandToGeminiHistory`): a command
the user ran in shell mode (`!`) and its output, recorded as a user message."""


def _users_words(where: Where, text: str) -> list[Span]:
    """The user's words in tool results: the answers to `ask_user`, and content the user rewrote
    before approving an edit or a write; and the command of a shell-mode (`!`) turn."""
    if where.result is None:
        shell = _SHELL_MODE.match(text) if where.message.origin == "harness" else None
        if shell is None or not shell.group(1).strip():
            return []
        return [Span(shell.start(1), shell.end(1), "user-command")]
    if where.tool == ASK_TOOL and text.lstrip().startswith('{"answers"'):
        return [Span(0, len(text), "user-answer")]
    edit = _USER_EDIT.search(text)
    if edit is not None and text[edit.end() :].strip():
        end = len(text) - 1 if text.endswith(".") else len(text)
        return [Span(edit.end(), max(end, edit.end() + 1), "user-feedback")]
    return []


users_words = _users_words
"""Where the user's words are in Gemini CLI's tool results and shell-mode turns (a `Finder`)."""

__all__ = ["GeminiCliFormat", "history_turns", "users_words"]
