"""Continue sessions (`~/.continue/sessions/<session id>.json`).

Upstream: continuedev/continue, commit d0a3c0b626b5bebc3bef4742eec05a0242be0bab:
`core/util/history.ts` (`HistoryManager.save` writes `{sessionId, title, workspaceDirectory,
history, mode?, chatModelTitle?, usage?}` to `sessions/<id>.json` and lists every session in
`sessions/sessions.json`, `{sessionId, title, dateCreated, workspaceDirectory, messageCount}`;
`load` reads a session file back whole), `core/index.d.ts` (`Session`, `ChatHistoryItem`:
`message`, `contextItems`, `toolCallStates` (one `toolCallState` before July 2025),
`conversationSummary`; `ChatMessage` of role user / assistant / thinking / system / tool, content
a string or `text` / `imageUrl` parts, `toolCalls`), and `gui/src/redux/util/constructMessages.ts`,
which turns the history into what the model is sent. The reader follows it:

* a user item -> its `contextItems` (what the user attached with @: files, terminal output, docs;
  Continue puts their `content` before the user's text) as a user message with origin `harness`,
  then the user's words (text, `imageUrl` parts as images) as a user message of their own;
* an assistant item -> text and `toolCalls` (`function.name`, `function.arguments`), `usage` in
  metadata; each of its `toolCallStates` -> the result of its call, as constructMessages renders
  it: the `output` context items' content joined by blank lines (`run_terminal_command`'s with
  their `[Status: ...]`), "The user cancelled this tool call." for a `canceled` one, "There was an
  error calling the tool." for an `errored` one without output, else "No tool output";
* a `thinking` item -> a thinking block (`signature`, or `redactedThinking` sealed) at the head of
  the next assistant message;
* an item's `conversationSummary` (Continue's compaction: the model is then sent the summary in
  its system message and only the items after it) -> a user message holding the summary, origin
  `summary`, after that item; the items before it stay loaded, so the context is the full history.
  The `cn` CLI (`extensions/cli/src/compaction.ts`) replaces the history with an assistant item
  whose content is the summary: that message is kept as it is, marked `continue_summary`.

`tool` items (Continue re-inserts results from `toolCallStates`) are read only for a call no state
answers (older histories); `system` items (never sent) and empty messages are left out. What is
left out is counted in `skipped_records` (`message/<role>`, `unknown`). `sessions.json`, the
index, is refused with one line naming the session files beside it.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

from pydantic import JsonValue

from ..context import (
    ORIGIN_KEY,
    AgentContext,
    Block,
    TextBlock,
    ThinkingBlock,
    ToolCallBlock,
    ToolResultBlock,
)
from ..errors import BadInputError
from ._pairing import Turn
from ._util import (
    as_dict,
    as_list,
    as_text,
    image_from_url,
    parse_arguments,
    str_or_none,
    turns_context,
)
from .base import Document, Format

INDEX_FILE = "sessions.json"
_ROLES = frozenset({"user", "assistant", "thinking", "system", "tool"})
_CANCELLED = "The user cancelled this tool call."
_ERRORED = "There was an error calling the tool."
_NO_OUTPUT = "No tool output"
"""`core/tools/constants.ts`: what the model is told for a call with no output."""
_TERMINAL_TOOL = "run_terminal_command"
"""`BuiltInToolNames.RunTerminalCommand`: its output items carry a status constructMessages shows."""


class ContinueFormat(Format):
    name = "continue"
    description = "Continue (continue.dev) sessions (~/.continue/sessions/<id>.json)"
    extension = ".json"
    priority = 10

    def sniff(self, doc: Document) -> bool:
        if doc.kind != "json":
            return False
        return _is_session(doc.data) or _is_index(doc.data)

    def load(self, doc: Document) -> list[AgentContext]:
        data = doc.data
        if doc.kind == "json" and _is_index(data):
            raise BadInputError(
                f"this is Continue's session index ({INDEX_FILE}, {len(data)} sessions), "
                "not a session",
                path=doc.path,
                hint=f"load one of the session files beside it ({Path(doc.path).parent}/<id>.json)",
            )
        if doc.kind != "json" or not _is_session(data):
            raise BadInputError(
                "not a Continue session (no history of chat messages)",
                path=doc.path,
                hint="expected ~/.continue/sessions/<session id>.json",
            )
        builder = _ContinueSessionContextBuilder()
        for item in doc.take(data["history"]):
            builder.add(item)
        if not builder.turns:
            raise BadInputError("a Continue session with no messages", path=doc.path)
        return [builder.context(data)]


# --------------------------------------------------------------------------- history -> turns


class _ContinueSessionContextBuilder:
    """Turns the history items of one session, in order, into turns."""

    def __init__(self) -> None:
        self.turns: list[Turn] = []
        self.skipped: Counter[str] = Counter()
        self.thinking: list[Block] = []
        self.answered: set[str] = set()

    def add(self, item: Any) -> None:
        item = as_dict(item)
        message = as_dict(item.get("message"))
        role = message.get("role")
        if not isinstance(role, str) or role not in _ROLES:
            self.skipped[f"message/{role}" if isinstance(role, str) else "unknown"] += 1
            return
        handler = getattr(self, f"on_{role}")
        if not handler(item, message):
            self.skipped[f"message/{role}"] += 1
        summary = as_text(item.get("conversationSummary"))
        if not summary.strip():
            return
        said = next((t for t in reversed(self.turns) if t.role == "assistant"), None)
        if role == "assistant" and message.get("content") == summary and said is not None:
            said.metadata["continue_summary"] = True  # the cn CLI's compaction: the item is it
            return
        meta: dict[str, JsonValue] = {ORIGIN_KEY: "summary", "continue_summary": True}
        self.turns.append(Turn("user", [TextBlock(text=summary)], meta))

    def on_user(self, item: dict[str, Any], message: dict[str, Any]) -> bool:
        blocks = _content_blocks(message.get("content"))
        if not blocks:
            return False
        attached = [as_dict(c) for c in as_list(item.get("contextItems"))]
        texts = [TextBlock(text=as_text(c.get("content"))) for c in attached]
        texts = [t for t in texts if t.text.strip()]
        if texts:
            names: list[JsonValue] = [as_text(c.get("name")) for c in attached]
            meta: dict[str, JsonValue] = {ORIGIN_KEY: "harness", "context_items": names}
            self.turns.append(Turn("user", list(texts), meta))
        self.turns.append(Turn("user", blocks, _stamp(message)))
        return True

    def on_thinking(self, item: dict[str, Any], message: dict[str, Any]) -> bool:
        parts = _content_blocks(message.get("content"))
        text = "".join(b.text for b in parts if isinstance(b, TextBlock))
        sealed = str_or_none(message.get("redactedThinking"))
        if not text and not sealed:
            return False
        signature = sealed or str_or_none(message.get("signature"))
        self.thinking.append(ThinkingBlock(thinking=text, signature=signature, redacted=not text))
        return True

    def on_assistant(self, item: dict[str, Any], message: dict[str, Any]) -> bool:
        blocks: list[Block] = [*self.thinking]
        blocks += [b for b in _content_blocks(message.get("content")) if not _is_empty(b)]
        calls = [as_dict(c) for c in as_list(message.get("toolCalls"))]
        for call in calls:
            function = as_dict(call.get("function"))
            blocks.append(
                ToolCallBlock(
                    id=as_text(call.get("id")),
                    name=as_text(function.get("name")) or "unknown",
                    input=parse_arguments(function.get("arguments")),
                )
            )
        if not blocks:
            return False
        self.thinking = []
        meta = _stamp(message)
        if isinstance(message.get("usage"), dict):
            meta["usage"] = message["usage"]
        self.turns.append(Turn("assistant", blocks, meta))
        states = as_list(item.get("toolCallStates")) or [item.get("toolCallState")]
        results = [_result(as_dict(s)) for s in states if isinstance(s, dict)]
        results = [r for r in results if r.tool_call_id]
        if results:
            self.answered.update(r.tool_call_id for r in results)
            self.turns.append(Turn("tool", list(results)))
        return True

    def on_tool(self, item: dict[str, Any], message: dict[str, Any]) -> bool:
        call_id = as_text(message.get("toolCallId"))
        if not call_id or call_id in self.answered:
            return False  # re-inserted from the call's state, as constructMessages does
        text = as_text(message.get("content"))
        result = ToolResultBlock(
            tool_call_id=call_id, content=(TextBlock(text=text),) if text else ()
        )
        self.answered.add(call_id)
        last = self.turns[-1] if self.turns else None
        if last is not None and last.role == "tool":
            last.blocks.append(result)
        else:
            self.turns.append(Turn("tool", [result], _stamp(message)))
        return True

    def on_system(self, item: dict[str, Any], message: dict[str, Any]) -> bool:
        return False  # constructMessages never sends a system item of the history

    def context(self, session: dict[str, Any]) -> AgentContext:
        if self.thinking:  # thinking with no answer after it
            self.turns.append(Turn("assistant", self.thinking))
        return turns_context(
            ContinueFormat.name,
            self.turns,
            self.skipped,
            session_id=str_or_none(session.get("sessionId")),
            cwd=str_or_none(session.get("workspaceDirectory")) or None,
            model=str_or_none(session.get("chatModelTitle")),
            title=str_or_none(session.get("title")),
            continue_mode=str_or_none(session.get("mode")),
        )


# --------------------------------------------------------------------------- helpers


def _is_session(data: Any) -> bool:
    """A `Session`: `history`, a list of items each holding a `message`, beside `sessionId`."""
    if not isinstance(data, dict) or not isinstance(data.get("history"), list):
        return False
    if not isinstance(data.get("sessionId"), str) or "workspaceDirectory" not in data:
        return False
    return all(
        isinstance(item, dict) and isinstance(item.get("message"), dict)
        for item in data["history"][:20]
    )


def _is_index(data: Any) -> bool:
    """`sessions.json`: `BaseSessionMetadata` entries (older releases wrote `session_id`)."""
    items = data[:20] if isinstance(data, list) else []
    return bool(items) and all(
        isinstance(m, dict)
        and ("sessionId" in m or "session_id" in m)
        and "dateCreated" in m
        and "title" in m
        for m in items
    )


def _stamp(message: dict[str, Any]) -> dict[str, JsonValue]:
    """What a message recorded about itself: the `id` of its `metadata`, when there is one."""
    meta: dict[str, JsonValue] = {}
    ident = as_dict(message.get("metadata")).get("id")
    if isinstance(ident, str):
        meta["id"] = ident
    return meta


def _content_blocks(content: Any) -> list[Block]:
    """`MessageContent`: a string, or `text` / `imageUrl` parts (others as their JSON)."""
    if isinstance(content, str):
        return [TextBlock(text=content)] if content.strip() else []
    blocks: list[Block] = []
    for part in as_list(content):
        part = as_dict(part)
        if part.get("type") == "imageUrl":
            blocks.append(image_from_url(part.get("imageUrl")))
        elif part.get("type") == "text":
            blocks.append(TextBlock(text=as_text(part.get("text"))))
        elif part:
            blocks.append(TextBlock(text=as_text(part)))
    return blocks if any(not _is_empty(b) for b in blocks) else []


def _is_empty(block: Block) -> bool:
    return isinstance(block, TextBlock) and not block.text.strip()


def _result(state: dict[str, Any]) -> ToolResultBlock:
    """A `ToolCallState` as the tool message constructMessages sends for it."""
    call = as_dict(state.get("toolCall"))
    call_id = as_text(call.get("id")) or as_text(state.get("toolCallId"))
    status = state.get("status")
    output = [as_dict(o) for o in as_list(state.get("output"))]
    error = status in ("canceled", "errored")
    if status == "canceled":
        text = _CANCELLED
    elif output:
        terminal = as_dict(call.get("function")).get("name") == _TERMINAL_TOOL
        text = "\n\n".join(_item_text(o, terminal) for o in output)
    else:
        text = _ERRORED if status == "errored" else _NO_OUTPUT
    return ToolResultBlock(
        tool_call_id=call_id, content=(TextBlock(text=text),) if text else (), is_error=error
    )


def _item_text(item: dict[str, Any], with_status: bool) -> str:
    """A context item of a tool's output as rendered (`renderContextItems[WithStatus]`)."""
    text = as_text(item.get("content"))
    status = item.get("status")
    if with_status and status:
        text += f"\n[Status: {as_text(status)}]"
    return text


__all__ = ["ContinueFormat"]
