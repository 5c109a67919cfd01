"""Codex headless output: `codex exec --json` (JSONL events on stdout).

Upstream: openai/codex `codex-rs/exec/src/exec_events.rs` (`ThreadEvent`, `ThreadItem`, read at
commit 08a1f30ca23f51922d1a4a4965b5ab999b64bead) and its writer
`event_processor_with_jsonl_output.rs`. Three generations:

* **thread events** (current): `thread.started` (`thread_id`), `turn.started`,
  `item.started` / `item.updated` / `item.completed` (`item: {id, type, ...}`),
  `turn.completed` (`usage`), `turn.failed`, `error`, `request_user_input`, `item.plan.delta`.
  Item types: `agent_message` and `plan` (`text`), `reasoning` (`text`), `command_execution`
  (`command`, `aggregated_output`, `exit_code`, `status` in_progress / completed / failed /
  declined), `file_change` (`changes: [{path, kind}]`, `status`), `mcp_tool_call` (`server`,
  `tool`, `arguments`, `result: {content, structured_content}`, `error: {message}`),
  `collab_tool_call`, `web_search` (`query`, `action`), `todo_list` (`items: [{text,
  completed}]`), `error` (`message`);
* **conversation events** (late 2025, `event_processor_with_json_output.rs`): `session.created`
  (`session_id`) and `item.completed` with the same items (`assistant_message` for
  `agent_message`);
* **raw protocol events** (2025 releases): a config summary object, `{"prompt": ...}`, then
  `{"id", "msg": {"type", ...}}` for every protocol event (`agent_message`, `agent_reasoning`,
  `exec_command_begin` / `_end`, `patch_apply_begin` / `_end`, `mcp_tool_call_begin` / `_end`,
  `web_search_end`, `plan_update`, `token_count`, `task_complete`, `error`, ...).

Mapping: text and reasoning items -> assistant text and thinking; every tool-like item -> a call
and its result, the calls between two model texts in one assistant message: `command_execution`
-> `shell` with `{command}`, the output (`is_error` when failed, declined or a non-zero exit code);
`file_change` -> `apply_patch` with `{changes}`, the status; `mcp_tool_call` -> `server.tool`
with its arguments, the result's text content or the error; `web_search` -> `web_search`
with `{query}`, its action; `todo_list` -> `update_plan` with `{items}`, "Plan updated" (what
Codex's plan tool answers); `collab_tool_call` -> the collab tool with `{prompt, receivers}`.
An item that started and never completed is a call with no result (the pairing repair answers
it, unless it is the last). `turn.completed.usage` goes on the turn's last assistant message.
`error` items and events, failed turns, `request_user_input`, deltas and started / updated
events are counted in `skipped_records` (`error`s also in `metadata["codex_errors"]`).

The user's words: `codex exec` takes the prompt on its command line and the thread events do
not repeat it, so a thread-event stream holds no user message: it starts with a harness note saying so
(`PROMPT_NOT_RECORDED`, `origin: harness`); the raw-protocol generation
prints it (`{"prompt": ...}`) and user messages (`user_message`), loaded as the user's. No
result of these events holds words of the user. A line that is not JSON is refused, named.
"""

from __future__ import annotations

import json
from collections import Counter
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
from ._events import built
from ._pairing import Turn
from ._util import (
    as_dict,
    as_list,
    as_text,
    str_or_none,
    turns_context,
)
from .base import Document, Format

_THREAD_EVENTS = frozenset(
    {
        "thread.started",
        "turn.started",
        "turn.completed",
        "turn.failed",
        "item.started",
        "item.updated",
        "item.completed",
        "item.plan.delta",
        "request_user_input",
        "session.created",
    }
)
_TEXT_ITEMS = {"agent_message": "text", "assistant_message": "text", "plan": "text"}
_FAILED = ("failed", "declined")
_PLAN_UPDATED = "Plan updated"
PROMPT_NOT_RECORDED = (
    "[the prompt of this run is not in its output: it was given on the command line]"
)
"""The harness note a thread-event stream starts with: `codex exec` does not print its prompt."""


class CodexExecFormat(Format):
    name = "codex-exec"
    description = "Codex codex exec --json events (JSONL)"
    extension = ".jsonl"
    priority = 10
    prompt_optional = True  # the prompt is on the command line, not in the output

    def sniff(self, doc: Document) -> bool:
        try:
            records = [r for r in _records(doc)[:20] if isinstance(r, dict)]
            if any(r.get("type") in _THREAD_EVENTS for r in records):
                return all(isinstance(r.get("type"), str) for r in records)
            protocol = [r for r in records if isinstance(r.get("msg"), dict) and "id" in r]
            return bool(protocol) and any(
                set(r) == {"prompt"} or as_dict(r.get("msg")).get("type") == "session_configured"
                for r in records
            )
        except Exception:
            return False

    def load(self, doc: Document) -> list[AgentContext]:
        what = "codex exec --json output (thread.started / item.completed events)"
        return built(self, doc, what, _records, _CodexExecContextBuilder())


class _CodexExecContextBuilder:
    def __init__(self) -> None:
        self.turns: list[Turn] = []
        self.skipped: Counter[str] = Counter()
        self.blocks: list[Block] = []
        self.results: list[Block] = []
        self.started: dict[str, dict[str, Any]] = {}
        self.done: set[str] = set()
        self.errors: list[JsonValue] = []
        self.head: dict[str, JsonValue] = {}
        self.begun: dict[str, dict[str, Any]] = {}  # raw protocol: call id -> its begin event

    # ----------------------------------------------------------------- thread events

    def add(self, record: Any) -> None:
        if not isinstance(record, dict):
            self.skipped["unknown"] += 1
            return
        if isinstance(record.get("msg"), dict):
            self.protocol(record["msg"])
            return
        kind = as_text(record.get("type"))
        item = as_dict(record.get("item"))
        if kind == "item.completed" and item:
            self.item(item)
        elif kind == "item.started" and item:
            self.skipped[kind] += 1
            if isinstance(item.get("id"), str):
                self.started.setdefault(item["id"], item)
        elif kind in ("thread.started", "session.created"):
            self.skipped[kind] += 1
            self.remember(
                "session_id", str_or_none(record.get("thread_id") or record.get("session_id"))
            )
        elif kind == "turn.completed":
            self.skipped[kind] += 1
            self.flush()
            self.usage(record.get("usage"))
        elif kind in ("turn.failed", "error"):
            self.skipped[kind] += 1
            error = record.get("error") if kind == "turn.failed" else record
            self.errors.append(as_text(as_dict(error).get("message")))
        elif kind == "turn.started":
            self.skipped[kind] += 1
            self.flush()
        elif "prompt" in record and set(record) == {"prompt"}:
            self.user(as_text(record["prompt"]))
        elif not kind and ("model" in record or "workdir" in record):
            self.skipped["config summary"] += 1
            self.remember("model", str_or_none(record.get("model")))
            self.remember("cwd", str_or_none(record.get("workdir")))
        else:
            self.skipped[kind or "unknown"] += 1

    def item(self, item: dict[str, Any]) -> None:
        kind = as_text(item.get("type") or item.get("item_type"))
        item_id = as_text(item.get("id")) or f"item_{len(self.done)}"
        self.done.add(item_id)
        if kind in _TEXT_ITEMS:
            self.say(TextBlock(text=as_text(item.get("text"))))
        elif kind == "reasoning":
            self.say(ThinkingBlock(thinking=as_text(item.get("text"))))
        elif kind == "error":
            self.skipped["item/error"] += 1
            self.errors.append(as_text(item.get("message")))
        else:
            call = _call(kind, item_id, item)
            if call is None:
                self.skipped[f"item/{kind or 'unknown'}"] += 1
                return
            self.call(*call)

    def call(self, block: ToolCallBlock, result: str, error: bool) -> None:
        self.blocks.append(block)
        self.results.append(
            ToolResultBlock(
                tool_call_id=block.id, content=(TextBlock(text=result),), is_error=error
            )
        )

    def remember(self, key: str, value: str | None) -> None:
        if value is not None:
            self.head.setdefault(key, value)

    def say(self, block: Block) -> None:
        if self.results:
            self.flush()
        if not (isinstance(block, TextBlock) and not block.text):
            self.blocks.append(block)

    def user(self, text: str) -> None:
        self.flush()
        if text:
            self.turns.append(Turn("user", [TextBlock(text=text)]))

    def usage(self, usage: Any) -> None:
        if not isinstance(usage, dict):
            return
        for turn in reversed(self.turns):
            if turn.role == "user":
                return
            if turn.role == "assistant":
                turn.metadata["usage"] = usage
                return

    def flush(self) -> None:
        if self.blocks:
            self.turns.append(Turn("assistant", list(self.blocks)))
        if self.results:
            self.turns.append(Turn("tool", list(self.results)))
        self.blocks, self.results = [], []

    # ----------------------------------------------------------------- raw protocol events

    def protocol(self, msg: dict[str, Any]) -> None:
        kind = as_text(msg.get("type"))
        call_id = as_text(msg.get("call_id"))
        if kind == "agent_message":
            self.say(TextBlock(text=as_text(msg.get("message"))))
        elif kind in ("agent_reasoning", "agent_reasoning_raw_content"):
            self.say(ThinkingBlock(thinking=as_text(msg.get("text"))))
        elif kind == "user_message":
            self.user(as_text(msg.get("message")))
        elif kind.endswith("_begin") and call_id:
            self.skipped[kind] += 1
            self.begun[call_id] = msg
        elif kind.endswith("_end") and call_id:
            self.protocol_call(kind, call_id, msg)
        elif kind == "plan_update":
            plan_id = f"plan-{sum(self.skipped.values())}-{len(self.blocks)}"
            plan: Any = msg.get("plan")
            self.call(
                ToolCallBlock(id=plan_id, name="update_plan", input={"plan": plan}),
                _PLAN_UPDATED,
                False,
            )
        elif kind == "session_configured":
            self.skipped[kind] += 1
            self.remember("session_id", str_or_none(msg.get("session_id")))
            self.remember("model", str_or_none(msg.get("model")))
        elif kind in ("error", "stream_error"):
            self.skipped[kind] += 1
            self.errors.append(as_text(msg.get("message")))
        else:
            self.skipped[kind or "unknown"] += 1

    def protocol_call(self, kind: str, call_id: str, end: dict[str, Any]) -> None:
        begin = self.begun.pop(call_id, {})
        if kind == "exec_command_end":
            command = begin.get("command")
            text = (
                " ".join(map(as_text, command)) if isinstance(command, list) else as_text(command)
            )
            output = end.get("aggregated_output", end.get("formatted_output"))
            if output is None:
                output = as_text(end.get("stdout")) + as_text(end.get("stderr"))
            block, result, error = (
                ToolCallBlock(id=call_id, name="shell", input={"command": text}),
                as_text(output),
                end.get("exit_code") not in (0, None),
            )
        elif kind == "patch_apply_end":
            changes = begin.get("changes")
            block = ToolCallBlock(
                id=call_id,
                name="apply_patch",
                input={"changes": changes if changes is not None else {}},
            )
            result = as_text(end.get("stdout")) + as_text(end.get("stderr"))
            error = end.get("success") is False
        elif kind == "mcp_tool_call_end":
            invocation = as_dict(end.get("invocation") or begin.get("invocation"))
            name = ".".join(
                filter(None, (as_text(invocation.get("server")), as_text(invocation.get("tool"))))
            )
            arguments = invocation.get("arguments")
            block = ToolCallBlock(
                id=call_id,
                name=name or "mcp",
                input=arguments if isinstance(arguments, dict) else {},
            )
            outcome = as_dict(end.get("result"))
            error = "Err" in outcome
            result = (
                as_text(outcome["Err"])
                if error
                else _mcp_text(as_dict(outcome.get("Ok")).get("content"))
            )
        elif kind == "web_search_end":
            block = ToolCallBlock(
                id=call_id, name="web_search", input={"query": as_text(end.get("query"))}
            )
            result, error = as_text(end.get("query")), False
        else:
            self.skipped[kind] += 1
            return
        self.call(block, result, error)

    def context(self) -> AgentContext:
        for item_id, item in self.started.items():  # started, never completed: no result
            if item_id not in self.done:
                call = _call(as_text(item.get("type")), item_id, item)
                if call is not None:
                    self.blocks.append(call[0])
        self.flush()
        if not any(t.role == "user" for t in self.turns):
            note = Turn("user", [TextBlock(text=PROMPT_NOT_RECORDED)], {ORIGIN_KEY: "harness"})
            self.turns.insert(0, note)
        return turns_context(
            CodexExecFormat.name,
            self.turns,
            self.skipped,
            session_id=self.head.get("session_id"),
            cwd=self.head.get("cwd"),
            model=self.head.get("model"),
            codex_errors=[e for e in self.errors if e] or None,
        )


def _call(kind: str, item_id: str, item: dict[str, Any]) -> tuple[ToolCallBlock, str, bool] | None:
    """A tool-like item as (its call, its result text, whether it failed); None for others."""
    status = as_text(item.get("status"))
    failed = status in _FAILED
    if kind == "command_execution":
        exit_code = item.get("exit_code")
        return (
            ToolCallBlock(
                id=item_id, name="shell", input={"command": as_text(item.get("command"))}
            ),
            as_text(item.get("aggregated_output")),
            failed or (isinstance(exit_code, int) and exit_code != 0),
        )
    if kind == "file_change":
        changes = as_list(item.get("changes"))
        return (
            ToolCallBlock(id=item_id, name="apply_patch", input={"changes": changes}),
            status,
            failed,
        )
    if kind == "mcp_tool_call":
        arguments = item.get("arguments")
        error = as_dict(item.get("error"))
        name = ".".join(filter(None, (as_text(item.get("server")), as_text(item.get("tool")))))
        text = (
            as_text(error.get("message"))
            if error
            else _mcp_text(as_dict(item.get("result")).get("content"))
        )
        return (
            ToolCallBlock(
                id=item_id,
                name=name or "mcp",
                input=arguments if isinstance(arguments, dict) else {},
            ),
            text,
            failed or bool(error),
        )
    if kind == "web_search":
        action = item.get("action")
        return (
            ToolCallBlock(
                id=item_id, name="web_search", input={"query": as_text(item.get("query"))}
            ),
            json.dumps(action) if action is not None else "",
            False,
        )
    if kind == "todo_list":
        items = as_list(item.get("items"))
        plan = ToolCallBlock(id=item_id, name="update_plan", input={"items": items})
        return plan, _PLAN_UPDATED, False
    if kind == "collab_tool_call":
        receivers: list[Any] = [as_text(r) for r in as_list(item.get("receiver_thread_ids"))]
        states = item.get("agents_states")
        return (
            ToolCallBlock(
                id=item_id,
                name=as_text(item.get("tool")) or "collab",
                input={"prompt": as_text(item.get("prompt")), "receivers": receivers},
            ),
            json.dumps(states) if states is not None else status,
            failed,
        )
    return None


def _mcp_text(content: Any) -> str:
    """An MCP result's content blocks as text (text blocks joined; others as JSON)."""
    parts = []
    for block in as_list(content):
        block = as_dict(block)
        parts.append(
            as_text(block.get("text")) if block.get("type") == "text" else json.dumps(block)
        )
    return "\n".join(parts)


def _records(doc: Document) -> list[Any]:
    if doc.kind == "jsonl":
        return list(doc.data)
    return [doc.data] if isinstance(doc.data, dict) else []


__all__ = ["CodexExecFormat"]
