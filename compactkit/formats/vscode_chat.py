"""VS Code chat sessions (GitHub Copilot Chat, agent mode included):
`workspaceStorage/<hash>/chatSessions/<id>.json` and, in later releases, `<id>.jsonl`.

Upstream, microsoft/vscode `src/vs/workbench/contrib/chat/common/`: `model/chatModel.ts` (commit
8c0354598aa91fc764e1b00707fcc376250e1cc6; `ISerializableChatData` versions 1 to 3: `sessionId`,
`creationDate`, `computedTitle` (2) / `customTitle` (3), `requests[]` of
`ISerializableChatRequestData`: `requestId`, `message` (`{text, parts}`, a string in old data),
`variableData`, `response[]` (markdown strings, `thinking`, `toolInvocationSerialized`, ...),
`result`, `modelId`, `shouldBeRemovedOnSend` / old `isHidden`; `normalizeSerializableChatData`
and `ChatModel._deserialize` read them back), `model/chatSessionStore.ts` and
`model/chatSessionOperationLog.ts` (commit 98227ed5a5f50a4ef316aa545f8606850e41778a: the `.jsonl`
form is an `ObjectMutationLog` of the same data, `model/objectMutationLog.ts` at
ce1580aa66c166f369325f5dcaa55db7701cf6cc: a first line `{"kind": 0, "v": <state>}`, then
`kind` 1 (set `v` at path `k`), 2 (push `v` onto the array at `k`, after cutting it to `i` when
given) and 3 (delete `k`); a line that is not JSON fails the whole read). The model's own turns
are in what Copilot Chat returns as the request's `result.metadata` (microsoft/vscode-copilot-chat
`src/extension/prompt/common/conversation.ts` at 9ef5db9935dc6fd2bf51a2c8b3bf7b787708f1b3,
`IResultMetadata`: `toolCallRounds` of `{response, toolCalls: [{id, name, arguments}],
thinking}`, `toolCallResults` by call id, `renderedUserMessage`, `summary`), which Copilot Chat
reads back to build the history it sends.

Mapping, per request in order:

* `message.text` -> a user message, the user's words (`renderedUserMessage`, what the model got
  with Copilot's wrapping, kept in message metadata `rendered_user_message`; the names of the
  attached `variableData.variables` in `attachments`; `modelId` as `model`), unless VS Code sent
  it itself (`isSystemInitiated`, later releases): then origin `harness`;
* with `result.metadata.toolCallRounds` (agent mode) -> per round an assistant message (thinking,
  `response` text, each tool call), then a tool message with each call's result from
  `toolCallResults` (`content` parts: text `value`s, and prompt-tsx trees as the text of their
  leaves); `metadata.summary` (Copilot's compaction of the history) -> a user message with its
  text, origin `summary`, after the round it names. The `response` parts, the chat panel's view of
  the same turn, are then counted as `panel/<kind>`;
* otherwise (ask mode, old data) -> the `response` parts: markdown text (and `thinking`) as an
  assistant message, each `toolInvocationSerialized` as a call (`toolId`, its input from
  `resultDetails.input` or `toolSpecificData.rawInput`) with the text of its
  `resultDetails.output` as the result (an error when `isError`, or when the user denied it);
  other parts (references, edits, progress, confirmations) are counted as `panel/<kind>`.

A request the user undid (`shouldBeRemovedOnSend`, or old `isHidden`) is never sent again: it is
left out, counted as `request (removed)`, its id listed in `metadata["vscode_removed_requests"]`.
The requests the user queued while the agent worked (`pendingRequests`, later releases), not sent
yet, are user messages after the others, marked `vscode_pending` with their `kind`. A log line of
an unknown kind, or whose path is not in the state, is counted as `log/<kind>`.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from pydantic import JsonValue

from ..context import (
    ORIGIN_KEY,
    AgentContext,
    Block,
    ContentPart,
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
    parse_arguments,
    str_or_none,
    turns_context,
)
from .base import Document, Format

_LOG_KINDS = (0, 1, 2, 3)
"""`EntryKind` of objectMutationLog.ts: Initial, Set, Push, Delete."""
_DENIED = 0
"""`ToolConfirmKind.Denied` (chatService.ts); `isConfirmed: false` before VS Code 1.104."""


class VSCodeChatFormat(Format):
    name = "vscode-chat"
    description = (
        "VS Code chat sessions, GitHub Copilot Chat (workspaceStorage/<hash>/chatSessions/<id>.json"
        " or .jsonl)"
    )
    extension = ".json"
    priority = 10

    def sniff(self, doc: Document) -> bool:
        if doc.kind == "json":
            return _is_chat_data(doc.data)
        records = doc.data if doc.kind == "jsonl" else []
        head = [r for r in records[:20] if isinstance(r, dict)]
        return (
            bool(head)
            and head[0].get("kind") == 0
            and _is_chat_data(head[0].get("v"))
            and all(isinstance(r.get("kind"), int) for r in head)
        )

    def load(self, doc: Document) -> list[AgentContext]:
        skipped: Counter[str] = Counter()
        if doc.kind == "jsonl" and self.sniff(doc):
            data = _replay(doc.data, skipped)
        elif doc.kind == "json" and _is_chat_data(doc.data):
            data = doc.data
        else:
            raise BadInputError(
                "not a VS Code chat session (no requests)",
                path=doc.path,
                hint="expected workspaceStorage/<hash>/chatSessions/<id>.json or .jsonl",
            )
        builder = _VSCodeChatContextBuilder(skipped)
        for request in doc.take(as_list(data.get("requests"))):
            builder.add(request)
        for pending in as_list(data.get("pendingRequests")):
            builder.pending(pending)
        if not any(t.role == "user" for t in builder.turns):
            raise BadInputError("a VS Code chat session with no request", path=doc.path)
        return [builder.context(data)]


# --------------------------------------------------------------------------- requests -> turns


class _VSCodeChatContextBuilder:
    """Turns the requests of one session, in order, into turns."""

    def __init__(self, skipped: Counter[str]) -> None:
        self.turns: list[Turn] = []
        self.skipped = skipped
        self.removed: list[JsonValue] = []
        self.model: str | None = None

    def add(self, request: Any) -> None:
        if not isinstance(request, dict):
            self.skipped["unknown"] += 1
            return
        if request.get("shouldBeRemovedOnSend") or request.get("isHidden") is True:
            self.skipped["request (removed)"] += 1
            self.removed.append(as_text(request.get("requestId")))
            return
        message = request.get("message")
        text = message if isinstance(message, str) else as_text(as_dict(message).get("text"))
        result = as_dict(request.get("result"))
        metadata = as_dict(result.get("metadata"))
        self.model = str_or_none(request.get("modelId")) or self.model
        if text.strip():
            self.turns.append(Turn("user", [TextBlock(text=text)], _user_meta(request, metadata)))
        else:
            self.skipped["request (no text)"] += 1
        response = request.get("response")  # a string in the oldest data (`readSession`)
        parts = [response] if isinstance(response, str) else as_list(response)
        rounds = [as_dict(r) for r in as_list(metadata.get("toolCallRounds"))]
        if rounds:
            self.rounds(rounds, metadata, request, _panel_results(parts))
            for part in parts:
                self.skipped[f"panel/{_kind(part)}"] += 1
        else:
            self.parts(parts, request)
        details = result.get("errorDetails", request.get("responseErrorDetails"))  # the old key
        error = str_or_none(as_dict(details).get("message"))
        if error and self.turns and self.turns[-1].role == "assistant":
            self.turns[-1].metadata["vscode_error"] = error

    def pending(self, pending: Any) -> None:
        """A request the user typed while the agent worked, queued and not sent yet
        (`pendingRequests`: `{id, request, kind}`): the user's words, after the others."""
        request = as_dict(as_dict(pending).get("request"))
        message = request.get("message")
        text = message if isinstance(message, str) else as_text(as_dict(message).get("text"))
        if not text.strip():
            self.skipped["pending request (no text)"] += 1
            return
        meta = _user_meta(request, {})
        kind = as_dict(pending).get("kind")
        plain = isinstance(kind, (str, int)) and not isinstance(kind, bool)
        meta["vscode_pending"] = kind if plain else True
        self.turns.append(Turn("user", [TextBlock(text=text)], meta))

    def stamp(self, request: dict[str, Any]) -> dict[str, JsonValue]:
        meta: dict[str, JsonValue] = {}
        if isinstance(request.get("responseId"), str):
            meta["id"] = request["responseId"]
        if self.model:
            meta["model"] = self.model
        return meta

    def rounds(
        self,
        rounds: list[dict[str, Any]],
        metadata: dict[str, Any],
        request: dict[str, Any],
        panel: dict[str, ToolResultBlock],
    ) -> None:
        """Agent mode: the rounds Copilot Chat recorded, each call answered from
        `toolCallResults`, else from the panel's record of the call (`panel`, by call id)."""
        outputs = as_dict(metadata.get("toolCallResults"))
        summary = as_dict(metadata.get("summary"))
        for round_ in rounds:
            blocks: list[Block] = _thinking(as_dict(round_.get("thinking")))
            if as_text(round_.get("response")).strip():
                blocks.append(TextBlock(text=as_text(round_.get("response"))))
            calls = [as_dict(c) for c in as_list(round_.get("toolCalls"))]
            for call in calls:
                blocks.append(
                    ToolCallBlock(
                        id=as_text(call.get("id")),
                        name=as_text(call.get("name")) or "unknown",
                        input=parse_arguments(call.get("arguments")),
                    )
                )
            if blocks:
                self.turns.append(Turn("assistant", blocks, self.stamp(request)))
            results = [
                _tool_result(c["id"], outputs[c["id"]]) if c["id"] in outputs else panel[c["id"]]
                for c in calls
                if isinstance(c.get("id"), str) and (c["id"] in outputs or c["id"] in panel)
            ]
            if results:
                self.turns.append(Turn("tool", list(results)))
            said = as_text(round_.get("summary")) or (
                as_text(summary.get("text"))
                if isinstance(round_.get("id"), str)
                and summary.get("toolCallRoundId") == round_.get("id")
                else ""
            )
            if said.strip():
                meta: dict[str, JsonValue] = {ORIGIN_KEY: "summary", "vscode_summary": True}
                self.turns.append(Turn("user", [TextBlock(text=said)], meta))

    def parts(self, parts: list[Any], request: dict[str, Any]) -> None:
        """Ask mode and old data: the response as the chat panel recorded it."""
        blocks: list[Block] = []
        results: list[ToolResultBlock] = []
        text = ""

        def flush_text() -> None:
            nonlocal text
            if text.strip():
                blocks.append(TextBlock(text=text))
            text = ""

        def flush() -> None:
            nonlocal blocks, results
            flush_text()
            if blocks:
                self.turns.append(Turn("assistant", blocks, self.stamp(request)))
            if results:
                self.turns.append(Turn("tool", list(results)))
            blocks, results = [], []

        for part in parts:
            kind = _kind(part)
            if kind == "markdownContent":
                if results:  # text after a call answers its result: a new round
                    flush()
                text += _markdown(part)
            elif kind == "thinking":
                flush_text()
                value = as_dict(part).get("value")
                thought = "".join(as_text(v) for v in value) if isinstance(value, list) else value
                if as_text(thought).strip():
                    blocks.append(ThinkingBlock(thinking=as_text(thought)))
            elif kind == "toolInvocationSerialized":
                flush_text()
                call, result = _invocation(as_dict(part))
                blocks.append(call)
                if result is not None:
                    results.append(result)
            else:
                self.skipped[f"panel/{kind}"] += 1
        flush()

    def context(self, data: dict[str, Any]) -> AgentContext:
        version = data.get("version")
        return turns_context(
            VSCodeChatFormat.name,
            self.turns,
            self.skipped,
            session_id=str_or_none(data.get("sessionId")),
            model=self.model,
            title=str_or_none(data.get("customTitle")) or str_or_none(data.get("computedTitle")),
            vscode_version=version
            if isinstance(version, int) and not isinstance(version, bool)
            else None,
            vscode_responder=str_or_none(data.get("responderUsername")),
            vscode_removed_requests=self.removed or None,
        )


# --------------------------------------------------------------------------- the mutation log


def _replay(records: list[Any], skipped: Counter[str]) -> dict[str, Any]:
    """The state an `ObjectMutationLog` file holds: its first entry, each later one applied."""
    state: dict[str, Any] = records[0]["v"]
    for entry in records[1:]:
        kind = entry.get("kind") if isinstance(entry, dict) else None
        if kind == 0 and isinstance(entry.get("v"), dict):
            state = entry["v"]
        elif kind not in _LOG_KINDS or not _apply(state, entry):
            skipped[f"log/{kind}"] += 1
    return state


def _apply(state: dict[str, Any], entry: dict[str, Any]) -> bool:
    """Apply one Set / Push / Delete entry; False when its path is not in the state."""
    path = entry.get("k")
    if not isinstance(path, list) or not path:
        return False
    holder: Any = state
    for step in path[:-1]:
        holder = _child(holder, step)
        if holder is None:
            return False
    last = path[-1]
    if not _can_hold(holder, last):
        return False
    kind = entry["kind"]
    if kind == 1:
        _put(holder, last, entry.get("v"))
    elif kind == 3:
        _put(holder, last, None)
    else:
        array = _child(holder, last)
        array = array if isinstance(array, list) else []
        cut = entry.get("i")
        if isinstance(cut, int) and not isinstance(cut, bool) and cut >= 0:
            del array[cut:]
        array.extend(as_list(entry.get("v")))
        _put(holder, last, array)
    return True


def _child(holder: Any, step: Any) -> Any:
    if isinstance(holder, dict) and isinstance(step, str):
        return holder.get(step)
    if isinstance(holder, list) and type(step) is int and 0 <= step < len(holder):
        return holder[step]
    return None


def _can_hold(holder: Any, step: Any) -> bool:
    if isinstance(holder, dict):
        return isinstance(step, str)
    return isinstance(holder, list) and type(step) is int and 0 <= step <= len(holder)


def _put(holder: Any, step: Any, value: Any) -> None:
    if isinstance(holder, dict):
        if value is None:
            holder.pop(step, None)
        else:
            holder[step] = value
    elif step == len(holder):
        holder.append(value)
    else:
        holder[step] = value


# --------------------------------------------------------------------------- helpers


def _is_chat_data(data: Any) -> bool:
    """`isExportableSessionData`: `requests` (an array of request objects) and
    `responderUsername`, or, as the store writes it, `sessionId` with `creationDate`."""
    if not isinstance(data, dict) or not isinstance(data.get("requests"), list):
        return False
    stored = isinstance(data.get("sessionId"), str) and "creationDate" in data
    if not stored and not isinstance(data.get("responderUsername"), str):
        return False
    return all(
        isinstance(r, dict) and "requestId" in r and "message" in r for r in data["requests"][:20]
    )


def _user_meta(request: dict[str, Any], metadata: dict[str, Any]) -> dict[str, JsonValue]:
    meta: dict[str, JsonValue] = {}
    if isinstance(request.get("requestId"), str):
        meta["id"] = request["requestId"]
    if isinstance(request.get("timestamp"), (int, float)):
        meta["timestamp"] = request["timestamp"]
    variables = [as_dict(v) for v in as_list(as_dict(request.get("variableData")).get("variables"))]
    names: list[JsonValue] = [as_text(v.get("name")) for v in variables if v.get("name")]
    if names:
        meta["attachments"] = names
    rendered = "\n".join(
        as_text(p.get("text"))
        for p in map(as_dict, as_list(metadata.get("renderedUserMessage")))
        if isinstance(p.get("text"), str)
    )
    if rendered:
        meta["rendered_user_message"] = rendered
    agent = str_or_none(as_dict(request.get("agent")).get("id"))
    if agent:
        meta["vscode_agent"] = agent
    if request.get("isSystemInitiated") is True:  # sent by VS Code, not typed by the user
        meta[ORIGIN_KEY] = "harness"
        label = str_or_none(request.get("systemInitiatedLabel"))
        if label:
            meta["vscode_system_label"] = label
    return meta


def _kind(part: Any) -> str:
    """A response part's kind; a markdown string (`{value, isTrusted, ...}` or, in old data, a
    plain string) has none of its own."""
    if isinstance(part, str):
        return "markdownContent"
    part = as_dict(part)
    kind = part.get("kind")
    if isinstance(kind, str):
        return kind
    return "markdownContent" if isinstance(part.get("value"), str) else "unknown"


def _markdown(part: Any) -> str:
    if isinstance(part, str):
        return part
    part = as_dict(part)
    content = part.get("content")
    if isinstance(content, dict):
        return as_text(content.get("value"))
    return as_text(part.get("value"))


def _thinking(thinking: dict[str, Any]) -> list[Block]:
    """A round's `ThinkingData`: `text` (a string or a list of them), `encrypted`."""
    raw = thinking.get("text")
    text = "".join(as_text(t) for t in raw) if isinstance(raw, list) else as_text(raw)
    sealed = str_or_none(thinking.get("encrypted"))
    if not text and not sealed:
        return []
    return [ThinkingBlock(thinking=text, signature=sealed, redacted=not text)]


def _panel_results(parts: list[Any]) -> dict[str, ToolResultBlock]:
    """The results the chat panel recorded for its tool invocations, by call id."""
    found: dict[str, ToolResultBlock] = {}
    for part in parts:
        if _kind(part) == "toolInvocationSerialized":
            _, result = _invocation(as_dict(part))
            if result is not None:
                found[result.tool_call_id] = result
    return found


def _tool_result(call_id: str, output: Any) -> ToolResultBlock:
    """A `LanguageModelToolResult` (`{content: [{value}]}`) as a result block."""
    content: list[ContentPart] = []
    for part in as_list(as_dict(output).get("content")):
        value = as_dict(part).get("value")
        text = value if isinstance(value, str) else _tsx_text(value)
        if text:
            content.append(TextBlock(text=text))
    return ToolResultBlock(tool_call_id=call_id, content=tuple(content))


def _tsx_text(value: Any) -> str:
    """The text a prompt-tsx element tree (`{node: {children: [...]}}`) renders: its text leaves
    in order, a line break before those that ask for one; another value as its JSON."""
    if not isinstance(value, dict) or not isinstance(value.get("node"), dict):
        return as_text(value) if value is not None else ""
    out: list[str] = []
    stack: list[Any] = [value["node"]]
    while stack:
        node = stack.pop()
        if not isinstance(node, dict):
            continue
        if isinstance(node.get("text"), str):
            out.append(("\n" if node.get("lineBreakBefore") else "") + node["text"])
        stack.extend(reversed(as_list(node.get("children"))))
    return "".join(out)


def _invocation(part: dict[str, Any]) -> tuple[ToolCallBlock, ToolResultBlock | None]:
    """A `toolInvocationSerialized` part: the call, and its result when the panel recorded one."""
    call_id = as_text(part.get("toolCallId"))
    details = part.get("resultDetails")
    details = details if isinstance(details, dict) else {}
    data = as_dict(part.get("toolSpecificData"))
    raw = details.get("input")
    arguments: Any = parse_arguments(raw) if isinstance(raw, str) else data.get("rawInput", {})
    call = ToolCallBlock(id=call_id, name=as_text(part.get("toolId")) or "unknown", input=arguments)
    confirmed = part.get("isConfirmed")
    denied = confirmed is False or as_dict(confirmed).get("type") == _DENIED
    output = details.get("output")
    if isinstance(output, str):
        texts = [output]
    else:
        items = [as_dict(o) for o in as_list(output)]
        texts = [as_text(o.get("value")) for o in items if o.get("isText") and o.get("value")]
    if not texts and not denied:
        return call, None
    error = details.get("isError") is True or denied
    content = tuple(TextBlock(text=t) for t in texts)
    return call, ToolResultBlock(tool_call_id=call_id, content=content, is_error=error)


__all__ = ["VSCodeChatFormat"]
