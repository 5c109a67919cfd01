"""GitHub Copilot CLI sessions (`~/.copilot/session-state/<id>/events.jsonl`).

Upstream: the Copilot CLI is closed; its event schema is published with the official SDKs,
github/copilot-sdk `session-events.schema.json` and the code generated from it
(`python/copilot/generated/session_events.py`, `dotnet/src/Generated/SessionEvents.cs`), which is
what each line of `events.jsonl` holds: `{"type", "data", "id", "timestamp", "parentId"}`.
Older CLIs wrote the same events to `session-state/<id>.jsonl`; both read the same. Older still,
`history-session-state/<id>.json` held the session as one object whose `chatMessages` are the
chat-completions messages the CLI sent (`sessionId`, `startTime`, a display `timeline`): read as
those messages (see `_history_state`). The session
folder itself may be given (its `events.jsonl` is read).

Mapping:

* `session.start` -> context metadata (`sessionId`, `copilotVersion`, `selectedModel`,
  `context.cwd`); `session.model_change` -> the model of later messages;
* `user.message` -> a user message holding `content`, the text the user typed as the timeline
  shows it (`transformedContent`, what the model got with Copilot's wrapping, is kept in message
  metadata `transformed_content`; `attachments` in `attachments`). Its `source` (kept as
  `copilot_source`) says who sent it: `user`, `immediate-prompt` (typed while the agent worked),
  `command` and unknown values are the user's input; a skill (`skill`, `skill-pdf`),
  `autopilot`, `jit-instruction`, `snippy-blocking`, `system` and
  `thinking-exhausted-continuation` are the runtime's, origin `harness`;
* `assistant.message` -> an assistant message: `reasoningText` as a thinking block
  (`reasoningOpaque` / `encryptedContent` as its signature), `content` as text, each of
  `toolRequests` (`toolCallId`, `name`, `arguments`) as a tool call; `outputTokens` in `usage`;
* `tool.execution_complete` -> the result of its `toolCallId`: `result.content` (else
  `detailedContent`), or `error.message` with `is_error` when `success` is false;
* `system.message` -> the first one (role `system`) is the system instruction, later ones
  `system` messages; `system.notification` and `skill.invoked` (content the runtime puts in
  the conversation) -> user messages with origin `harness`;
* `session.compaction_complete` with a `summaryContent` -> a user message with that summary,
  origin `summary` (the events before it stay loaded: the context is the full history).

Events of a sub-agent (a `parentToolCallId` on an assistant message or a tool completion) belong
to the sub-agent's own run and are left out, counted as `"<type> (subagent)"`. Every other event
(deltas, turn and tool progress, permissions, hooks, usage, session bookkeeping) never reaches
the model and is counted by its `type` in `skipped_records`. A call with no completion gets a
synthesized error result, except the calls of the last assistant message.

A `session.snapshot_rewind` (`/rewind`) removes the events it rewound, as the CLI drops them from
the conversation it sends (see `_rewind` for what is assumed of this closed CLI); they are counted
as `"rewound/<type>"` and their ids listed in `metadata["copilot_rewound"]`.
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
    parse_arguments,
    str_or_none,
    turns_context,
)
from .base import Document, Format, read_document
from .openai_chat import OpenAIChatFormat

EVENTS_FILE = "events.jsonl"
_SNIFF_LIMIT = 20
_MESSAGE_TYPES = ("user.message", "assistant.message", "tool.execution_complete")
_HARNESS_SOURCES = frozenset(
    {"autopilot", "jit-instruction", "snippy-blocking", "system", "thinking-exhausted-continuation"}
)
"""`user.message` `source` values (the schema's `Source` enum) of text the runtime sent in the
user's turn, as are those starting with `skill` (`skill`, `skill-pdf`); `user`,
`immediate-prompt`, `command`, `other` and values unknown here are kept as the user's input."""


class CopilotCliFormat(Format):
    name = "copilot-cli"
    description = "GitHub Copilot CLI session events (~/.copilot/session-state/<id>/events.jsonl)"
    extension = ".jsonl"
    priority = 10

    def read_layout(self, path: Path) -> Document | None:
        """A session folder (`session-state/<id>/`): its `events.jsonl`."""
        events = path / EVENTS_FILE
        if path.is_dir() and events.is_file():
            doc = read_document(events)
            return Document(str(path), doc.kind, doc.data, doc.bad_lines)
        return None

    def sniff(self, doc: Document) -> bool:
        if doc.kind == "json":
            return _is_history_state(doc.data)
        try:
            head = [r for r in _records(doc)[:_SNIFF_LIMIT] if isinstance(r, dict)]
            return (
                bool(head)
                and all(_is_event(r) for r in head)
                and any(r["type"] == "session.start" or r["type"] in _MESSAGE_TYPES for r in head)
            )
        except Exception:
            return False

    def load(self, doc: Document) -> list[AgentContext]:
        if doc.kind == "json" and _is_history_state(doc.data):
            return [_history_state(doc)]
        records = _records(doc)
        if not any(_is_event(r) and r["type"] in _MESSAGE_TYPES for r in records):
            raise BadInputError(
                "not a Copilot CLI session: no user.message / assistant.message events",
                path=doc.path,
                hint="expected ~/.copilot/session-state/<id>/events.jsonl",
            )
        builder = _CopilotCliContextBuilder()
        records, rewound = _rewind(records)
        for record in records:
            builder.add(record)
        for record in rewound:
            builder.skipped[f"rewound/{record['type']}"] += 1
        ctx = builder.context()
        if rewound:
            ids: list[JsonValue] = [r["id"] for r in rewound]
            ctx = ctx.replace(metadata={**ctx.metadata, "copilot_rewound": ids})
        return [ctx]


# --------------------------------------------------------------------------- events -> turns


class _CopilotCliContextBuilder:
    """Turns the events of one session, in file order, into turns."""

    def __init__(self) -> None:
        self.turns: list[Turn] = []
        self.skipped: Counter[str] = Counter()
        self.system: str | None = None
        self.session: dict[str, Any] = {}
        self.model: str | None = None

    def add(self, record: Any) -> None:
        if not _is_event(record):
            self.skipped["unknown"] += 1
            return
        kind: str = record["type"]
        data = as_dict(record.get("data"))
        handler = getattr(self, "on_" + kind.replace(".", "_"), None)
        if data.get("parentToolCallId") and kind in _MESSAGE_TYPES:
            self.skipped[f"{kind} (subagent)"] += 1
        elif handler is None or not handler(record, data):
            self.skipped[kind] += 1

    def stamp(self, record: dict[str, Any], **extra: JsonValue) -> dict[str, JsonValue]:
        meta: dict[str, JsonValue] = {}
        for key in ("id", "timestamp"):
            if isinstance(record.get(key), str):
                meta[key] = record[key]
        meta.update({k: v for k, v in extra.items() if v is not None})
        return meta

    def on_session_start(self, record: dict[str, Any], data: dict[str, Any]) -> bool:
        if not self.session:
            self.session = data
            self.model = str_or_none(data.get("selectedModel"))
        return True

    def on_session_model_change(self, record: dict[str, Any], data: dict[str, Any]) -> bool:
        self.model = str_or_none(data.get("newModel")) or self.model
        return True

    def on_user_message(self, record: dict[str, Any], data: dict[str, Any]) -> bool:
        text = as_text(data.get("content"))
        if not text.strip():
            return False
        meta = self.stamp(
            record,
            transformed_content=str_or_none(data.get("transformedContent")),
            attachments=data["attachments"] if as_list(data.get("attachments")) else None,
            agent_mode=str_or_none(data.get("agentMode")),
        )
        source = data.get("source")
        if isinstance(source, str) and source:
            meta["copilot_source"] = source
            if source in _HARNESS_SOURCES or source.startswith("skill"):
                meta[ORIGIN_KEY] = "harness"
        self.turns.append(Turn("user", [TextBlock(text=text)], meta))
        return True

    def on_assistant_message(self, record: dict[str, Any], data: dict[str, Any]) -> bool:
        blocks: list[Block] = []
        sealed = str_or_none(data.get("reasoningOpaque")) or str_or_none(
            data.get("encryptedContent")
        )
        reasoning = as_text(data.get("reasoningText"))
        if reasoning or sealed:
            blocks.append(
                ThinkingBlock(thinking=reasoning, signature=sealed, redacted=not reasoning)
            )
        if as_text(data.get("content")):
            blocks.append(TextBlock(text=as_text(data.get("content"))))
        for request in as_list(data.get("toolRequests")):
            request = as_dict(request)
            blocks.append(
                ToolCallBlock(
                    id=as_text(request.get("toolCallId")),
                    name=as_text(request.get("name")) or "unknown",
                    input=parse_arguments(request.get("arguments")),
                )
            )
        if not blocks:
            return False
        usage = {"output_tokens": data["outputTokens"]} if "outputTokens" in data else None
        meta = self.stamp(record, message_id=str_or_none(data.get("messageId")), model=self.model)
        if usage:
            meta["usage"] = usage
        self.turns.append(Turn("assistant", blocks, meta))
        return True

    def on_tool_execution_complete(self, record: dict[str, Any], data: dict[str, Any]) -> bool:
        call_id = as_text(data.get("toolCallId"))
        if not call_id:
            return False
        result = as_dict(data.get("result"))
        failed = data.get("success") is False
        text = as_text(as_dict(data.get("error")).get("message")) if failed else ""
        text = text or as_text(result.get("content")) or as_text(result.get("detailedContent"))
        block = ToolResultBlock(
            tool_call_id=call_id, content=(TextBlock(text=text),) if text else (), is_error=failed
        )
        last = self.turns[-1] if self.turns else None
        if last is not None and last.role == "tool":
            last.blocks.append(block)
        else:
            self.turns.append(Turn("tool", [block], self.stamp(record)))
        return True

    def on_system_message(self, record: dict[str, Any], data: dict[str, Any]) -> bool:
        text = as_text(data.get("content"))
        if not text:
            return False
        if self.system is None and not self.turns and data.get("role") in (None, "system"):
            self.system = text
        else:
            self.turns.append(Turn("system", [TextBlock(text=text)], self.stamp(record)))
        return True

    def harness(self, record: dict[str, Any], text: str, **extra: JsonValue) -> bool:
        if not text.strip():
            return False
        meta = self.stamp(record, **extra)
        meta[ORIGIN_KEY] = "harness"
        self.turns.append(Turn("user", [TextBlock(text=text)], meta))
        return True

    def on_system_notification(self, record: dict[str, Any], data: dict[str, Any]) -> bool:
        return self.harness(record, as_text(data.get("content")))

    def on_skill_invoked(self, record: dict[str, Any], data: dict[str, Any]) -> bool:
        return self.harness(
            record, as_text(data.get("content")), skill=str_or_none(data.get("name"))
        )

    def on_session_compaction_complete(self, record: dict[str, Any], data: dict[str, Any]) -> bool:
        summary = as_text(data.get("summaryContent"))
        if data.get("success") is False or not summary:
            return False
        meta = self.stamp(record, copilot_compaction=True)
        meta[ORIGIN_KEY] = "summary"
        self.turns.append(Turn("user", [TextBlock(text=summary)], meta))
        return True

    def context(self) -> AgentContext:
        context = as_dict(self.session.get("context"))
        ctx = turns_context(
            CopilotCliFormat.name,
            self.turns,
            self.skipped,
            session_id=str_or_none(self.session.get("sessionId")),
            cwd=str_or_none(context.get("cwd")),
            model=str_or_none(self.session.get("selectedModel")) or self.model,
            copilot_version=str_or_none(self.session.get("copilotVersion")),
            git_branch=str_or_none(context.get("branch")),
        )
        return ctx.replace(system_instruction=self.system) if self.system else ctx


# --------------------------------------------------------------------------- helpers


def _records(doc: Document) -> list[Any]:
    if doc.kind == "jsonl":
        return list(doc.data)
    return [doc.data] if isinstance(doc.data, dict) else []


def _is_history_state(data: Any) -> bool:
    """An older CLI's `history-session-state/<id>.json`: `chatMessages`, the chat-completions
    messages it sent, beside `sessionId` / `startTime` / `timeline`."""
    return (
        isinstance(data, dict)
        and isinstance(data.get("chatMessages"), list)
        and any(k in data for k in ("sessionId", "startTime", "timeline"))
    )


def _history_state(doc: Document) -> AgentContext:
    """An older CLI's session: its `chatMessages` read as the chat-completions messages they are
    (a leading system message is the system instruction, `tool_calls` pair with `tool` results),
    with the session's id and start time."""
    data = doc.data
    messages = [m for m in data["chatMessages"] if isinstance(m, dict)]
    if not messages:
        raise BadInputError(
            "a Copilot CLI history-session-state file with no messages", path=doc.path
        )
    ctx = OpenAIChatFormat().load(Document(doc.path, "json", messages))[0]
    meta: dict[str, JsonValue] = {
        **ctx.metadata,
        "source_format": CopilotCliFormat.name,
        "copilot_layout": "history-session-state",
    }
    for key, field in (("session_id", "sessionId"), ("started", "startTime")):
        value = str_or_none(data.get(field))
        if value is not None:
            meta[key] = value
    return ctx.replace(metadata=meta)


def _rewind(records: list[Any]) -> tuple[list[Any], list[dict[str, Any]]]:
    """The events left after each `session.snapshot_rewind` (`/rewind`), and those it removed.

    The schema: `upToEventId` is "Event ID that was rewound to; all events after this one were
    removed", `eventsRemoved` how many. The events after the target, up to the rewind, are
    removed; the target too when `eventsRemoved` counts it (a rewind to a prompt the user then
    edits). A rewind that lists its removed events (`eventIds`) removes those. A target that is
    not in the file removes nothing (nothing is dropped on a guess)."""
    kept: list[Any] = []
    rewound: list[dict[str, Any]] = []
    for record in records:
        data = as_dict(record.get("data")) if _is_event(record) else {}
        if not _is_event(record) or record["type"] != "session.snapshot_rewind":
            kept.append(record)
            continue
        kept.append(record)  # counted as skipped by its type
        listed = {i for i in as_list(data.get("eventIds")) if isinstance(i, str)}
        if listed:
            gone = [r for r in kept if _is_event(r) and r["id"] in listed]
        else:
            target = data.get("upToEventId")
            at = next((n for n, r in enumerate(kept) if _is_event(r) and r["id"] == target), None)
            if at is None:
                continue
            after = kept[at + 1 : -1]
            removed = data.get("eventsRemoved")
            gone = kept[at:-1] if removed == len(after) + 1 else after
        removed_ids = {id(g) for g in gone}
        kept = [r for r in kept if id(r) not in removed_ids]
        rewound.extend(gone)
    return kept, rewound


def _is_event(record: Any) -> bool:
    """A session event: `type` (dotted), `data`, `id` and a `parentId` key."""
    return (
        isinstance(record, dict)
        and isinstance(record.get("type"), str)
        and isinstance(record.get("data"), dict)
        and isinstance(record.get("id"), str)
        and "parentId" in record
    )


__all__ = ["CopilotCliFormat"]
