"""Claude Managed Agents session event logs: the events of one session, as the Sessions API
lists them (`GET /v1/sessions/{id}/events`: a page `{"data": [...]}`, or its events saved as a
JSON array) or streams them (one event a line, the `data:` of each server-sent event).

Upstream: the event types of the API, read in the SDK generated from its OpenAPI spec
(anthropics/anthropic-sdk-python `src/anthropic/types/beta/sessions/`,
`beta_managed_agents_session_event.py` and one module per event, commit
0c20cf40f20edb11ab0453f646bcccf42479d92f) and the platform docs (managed-agents/events-and-
streaming). Every event has `id`, `type` (`{domain}.{action}`) and `processed_at`:

* user events: `user.message` (`content`: text, image and document blocks), `user.interrupt`,
  `user.tool_confirmation` (`tool_use_id`, `result` allow / deny, `deny_message`),
  `user.custom_tool_result` (`custom_tool_use_id`, `content`, `is_error`), `user.tool_result`,
  `user.define_outcome`;
* agent events: `agent.message` (`content`: text blocks), `agent.thinking` (a progress signal
  only, no text), `agent.tool_use` / `agent.mcp_tool_use` / `agent.custom_tool_use` (`id`,
  `name`, `input`, `mcp_server_name`), `agent.tool_result` (`tool_use_id`) /
  `agent.mcp_tool_result` (`mcp_tool_use_id`) with `content` and `is_error`,
  `agent.thread_context_compacted`, `agent.thread_message_sent` / `_received`;
* `session.*` (status running / idle with its `stop_reason` / rescheduled / terminated, error,
  thread events, deleted, updated), `span.*` (model requests, outcome evaluations) and
  `system.message`.

Mapping: `user.message` -> the user's words (text, images, a document's text; a `redacted`
block, content withheld by model policy, is counted); `agent.message` text, then the
calls that follow it -> one assistant message, their results -> a tool message after it. A call's
id is its event's id, which its result names. A denied call (`user.tool_confirmation` with
`result: "deny"`) is answered by the denial: an error result holding the `deny_message` the user
typed, pinned `user-feedback` (or "denied by the user" without one); a later result for it is
counted. A call an interrupt stopped gets the synthesized error result of the pairing repair.
A `system.message` with text is a `system` message in place. Cross-posted subagent events
(`session_thread_id` set) are counted, not loaded twice; `agent.thinking` (no text), the
interrupt (`user.interrupt`, also `metadata["interrupts"]`), compaction notices, status, span and
thread events are counted in `skipped_records`, `session.error` messages also in
`metadata["session_errors"]`. A line that is not JSON is refused, named.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from pydantic import JsonValue

from ..context import (
    AgentContext,
    Block,
    ImageBlock,
    TextBlock,
    ToolCallBlock,
    ToolResultBlock,
)
from ._chat import anthropic_block
from ._events import built
from ._marks import Span, Where, mark_words
from ._pairing import Turn
from ._util import (
    as_dict,
    as_list,
    as_text,
    str_or_none,
    turns_context,
)
from .base import Document, Format

_CALLS = ("agent.tool_use", "agent.mcp_tool_use", "agent.custom_tool_use")
_RESULTS = {
    "agent.tool_result": "tool_use_id",
    "agent.mcp_tool_result": "mcp_tool_use_id",
    "user.custom_tool_result": "custom_tool_use_id",
    "user.tool_result": "tool_use_id",
}
_DOMAINS = ("user.", "agent.", "session.", "span.", "system.")
DENIED = "denied by the user"
"""The result of a denied call whose confirmation carried no message."""
DENIED_PREFIX = "The user denied this tool call: "
"""How a denied call's result begins when the user typed why (the words follow, pinned)."""


class ManagedAgentsFormat(Format):
    name = "claude-managed-agents"
    description = "Claude Managed Agents session events (events list page, array or JSONL)"
    extension = ".jsonl"
    priority = 10

    def sniff(self, doc: Document) -> bool:
        try:
            events = [e for e in _events(doc)[:30] if isinstance(e, dict)]
            return (
                bool(events)
                and all(_is_event(e) for e in events)
                and any(as_text(e.get("type")).startswith(("user.", "agent.")) for e in events)
            )
        except Exception:
            return False

    def load(self, doc: Document) -> list[AgentContext]:
        what = "a Claude Managed Agents event log (events with id, type user.* / agent.*)"
        return built(self, doc, what, _events, _ManagedAgentsContextBuilder())


class _ManagedAgentsContextBuilder:
    def __init__(self) -> None:
        self.turns: list[Turn] = []
        self.skipped: Counter[str] = Counter()
        self.blocks: list[Block] = []
        self.results: list[Block] = []
        self.answered: set[str] = set()
        self.errors: list[JsonValue] = []
        self.interrupts = 0

    def add(self, event: Any) -> None:
        if not _is_event(event):
            self.skipped["unknown"] += 1
            return
        kind = as_text(event["type"])
        if event.get("session_thread_id") and kind.startswith("agent."):
            self.skipped[f"subagent/{kind}"] += 1
        elif kind == "user.message":
            self.flush()
            parts = self.parts(kind, event.get("content"))
            if parts:
                self.turns.append(Turn("user", list(parts), _meta(event)))
            else:
                self.skipped["user.message (empty)"] += 1
        elif kind == "agent.message":
            if self.results:
                self.flush()
            self.blocks.extend(self.parts(kind, event.get("content")))
        elif kind in _CALLS:
            if self.results:
                self.flush()
            self.blocks.append(_call(event))
        elif kind in _RESULTS:
            self.result(kind, event)
        elif kind == "user.tool_confirmation" and event.get("result") == "deny":
            self.deny(event)
        elif kind == "system.message" and as_list(event.get("content")):
            self.flush()
            self.turns.append(Turn("system", self.parts(kind, event["content"]), _meta(event)))
        else:
            self.other(kind, event)

    def parts(self, kind: str, content: Any) -> list[Block]:
        """Message content blocks (text, images, documents' text); a `redacted` block (content
        withheld by model policy) is counted, empty text left out."""
        out: list[Block] = []
        for item in as_list(content):
            block = as_dict(item)
            if block.get("type") == "redacted":
                self.skipped[f"{kind}/redacted"] += 1
            elif not (block.get("type") == "text" and not as_text(block.get("text"))):
                out.append(anthropic_block(block))
        return out

    def result(self, kind: str, event: dict[str, Any]) -> None:
        call_id = as_text(event.get(_RESULTS[kind]))
        if call_id in self.answered:
            self.skipped[f"{kind} (answered)"] += 1
            return
        self.answered.add(call_id)
        self.results.append(
            ToolResultBlock(
                tool_call_id=call_id or "unknown",
                content=tuple(
                    p
                    for p in self.parts(kind, event.get("content"))
                    if isinstance(p, (TextBlock, ImageBlock))
                ),
                is_error=event.get("is_error") is True,
            )
        )

    def deny(self, event: dict[str, Any]) -> None:
        call_id = as_text(event.get("tool_use_id"))
        if call_id in self.answered:
            self.skipped["user.tool_confirmation (answered)"] += 1
            return
        self.answered.add(call_id)
        words = as_text(event.get("deny_message"))
        text = DENIED_PREFIX + words if words.strip() else DENIED
        self.results.append(
            ToolResultBlock(tool_call_id=call_id, content=(TextBlock(text=text),), is_error=True)
        )

    def other(self, kind: str, event: dict[str, Any]) -> None:
        self.skipped[kind] += 1
        if kind == "user.interrupt":
            self.interrupts += 1
        elif kind == "session.error":
            error = as_dict(event.get("error"))
            self.errors.append(as_text(error.get("message") or error.get("type") or event))

    def flush(self) -> None:
        if self.blocks:
            self.turns.append(Turn("assistant", list(self.blocks)))
        if self.results:
            self.turns.append(Turn("tool", list(self.results)))
        self.blocks, self.results = [], []

    def context(self) -> AgentContext:
        self.flush()
        ctx = turns_context(
            ManagedAgentsFormat.name,
            self.turns,
            self.skipped,
            interrupts=self.interrupts or None,
            session_errors=self.errors or None,
        )
        return mark_words(ctx, _users_words)


def _call(event: dict[str, Any]) -> ToolCallBlock:
    value = event.get("input")
    name = as_text(event.get("name")) or "unknown"
    server = str_or_none(event.get("mcp_server_name"))
    return ToolCallBlock(
        id=as_text(event.get("id")) or "unknown",
        name=f"{server}.{name}" if server else name,
        input=value if isinstance(value, dict) else {},
    )


def _meta(event: dict[str, Any]) -> dict[str, JsonValue]:
    out: dict[str, JsonValue] = {}
    for key in ("id", "processed_at"):
        value = str_or_none(event.get(key))
        if value is not None:
            out[key] = value
    return out


def _users_words(where: Where, text: str) -> list[Span]:
    """The words the user typed when denying a call: its result after `DENIED_PREFIX`."""
    if where.result is None or not text.startswith(DENIED_PREFIX):
        return []
    return [Span(len(DENIED_PREFIX), len(text), "user-feedback")]


def _is_event(event: Any) -> bool:
    return (
        isinstance(event, dict)
        and isinstance(event.get("id"), str)
        and as_text(event.get("type")).startswith(_DOMAINS)
        and "processed_at" in event
    )


def _events(doc: Document) -> list[Any]:
    if doc.kind == "jsonl":
        return list(doc.data)
    data = doc.data
    if isinstance(data, dict) and isinstance(data.get("data"), list):
        return as_list(data["data"])
    if isinstance(data, list):
        return data
    return [data] if isinstance(data, dict) else []


__all__ = ["ManagedAgentsFormat"]
