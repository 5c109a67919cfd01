"""OpenAI Codex CLI rollout JSONL.

A rollout is one session: a `session_meta` record (session id, cwd, the base instructions), one
`turn_context` per user turn (model, policies), `response_item` records holding exactly what went
to and came from the model (messages, reasoning, function calls and their outputs) and `event_msg`
records for the UI (duplicated messages, exec/patch events, token counts).

Mapping:
- `session_meta.payload.base_instructions.text` -> `system_instruction`;
- developer messages -> `Message(role="system")` in place, user messages -> user;
- reasoning, assistant text and the tool calls of one model response -> one assistant message
  (a response ends at its `token_count` event or at the next non-assistant item); its
  `last_token_usage` becomes the message's `metadata["usage"]`;
- `function_call_output` / `custom_tool_call_output` -> tool results (consecutive outputs share one
  tool message);
- `web_search_call` (a server-side tool whose results the rollout never records) -> a
  `web_search` tool call that gets a synthesized "[no result recorded]" result;
- a call with no output anywhere in the rollout gets that synthesized error result too (tool
  message metadata `{"synthesized": true}`, after the tool messages that follow its call), except
  the calls of the last assistant message when nothing but tool messages follows it (a run may
  end on a call);
- every other `event_msg` is UI only and skipped.
"""

from __future__ import annotations

from typing import Any

from pydantic import JsonValue

from ..context import (
    AgentContext,
    Block,
    ContentPart,
    Role,
    TextBlock,
    ThinkingBlock,
    ToolCallBlock,
    ToolResultBlock,
)
from ..errors import BadInputError
from ._pairing import Turn, repair_pairing
from ._util import as_text, nonempty_parts, parse_arguments, parts_from_content
from .base import Document, Format

_RECORD_TYPES = {"session_meta", "response_item", "turn_context", "event_msg", "compacted"}
_CALL_ITEMS = {"function_call", "custom_tool_call", "local_shell_call", "web_search_call"}
_OUTPUT_ITEMS = {"function_call_output", "custom_tool_call_output"}


# --------------------------------------------------------------------------- the format


def _is_record(value: Any) -> bool:
    return (
        isinstance(value, dict)
        and value.get("type") in _RECORD_TYPES
        and isinstance(value.get("payload"), dict)
    )


def _output_parts(output: Any) -> tuple[tuple[ContentPart, ...], bool]:
    """A function-call output (a string, a list of content items, or {content, success})."""
    is_error = False
    if isinstance(output, dict) and ("content" in output or "success" in output):
        is_error = output.get("success") is False
        output = output.get("content")
    if isinstance(output, (str, list, dict)) or output is None:
        return parts_from_content(output), is_error
    return (TextBlock(text=as_text(output)),), is_error


class _Builder:
    def __init__(self) -> None:
        self.turns: list[Turn] = []
        self.current: Turn | None = None  # the assistant message of the response in progress
        self.known_calls: set[str] = set()
        self.n_calls = 0
        self.orphans = 0
        self.model: str | None = None
        self.web_search_ids: list[tuple[Any, str]] = []  # (action, call_id) from web_search_end

    def close(self) -> None:
        self.current = None

    def assistant(self, timestamp: Any) -> Turn:
        if self.current is None:
            meta: dict[str, JsonValue] = {}
            if isinstance(timestamp, str):
                meta["timestamp"] = timestamp
            if self.model:
                meta["model"] = self.model
            self.current = Turn("assistant", metadata=meta)
            self.turns.append(self.current)
        return self.current

    def plain(self, role: Role, blocks: list[Block], timestamp: Any, **extra: JsonValue) -> None:
        self.close()
        meta: dict[str, JsonValue] = {"timestamp": timestamp} if isinstance(timestamp, str) else {}
        meta.update(extra)
        self.turns.append(Turn(role, blocks, meta))

    def call_id(self, raw: Any) -> str:
        self.n_calls += 1
        if isinstance(raw, str) and raw:
            return raw
        return f"call_{self.n_calls}"

    def add_call(self, payload: dict[str, Any], timestamp: Any) -> None:
        kind = payload.get("type")
        turn = self.assistant(timestamp)
        if kind == "function_call":
            call = ToolCallBlock(
                id=self.call_id(payload.get("call_id")),
                name=str(payload.get("name") or "function"),
                input=parse_arguments(payload.get("arguments")),
            )
        elif kind == "custom_tool_call":
            call = ToolCallBlock(
                id=self.call_id(payload.get("call_id")),
                name=str(payload.get("name") or "custom_tool"),
                input=as_text(payload.get("input")),
            )
        elif kind == "local_shell_call":
            call = ToolCallBlock(
                id=self.call_id(payload.get("call_id") or payload.get("id")),
                name="local_shell",
                input=payload.get("action") or {},
            )
        else:  # web_search_call: the id is on the web_search_end event logged just before
            action = payload.get("action")
            raw_id = payload.get("id")
            for i, (ws_action, ws_id) in enumerate(self.web_search_ids):
                if ws_action == action:
                    raw_id = ws_id
                    del self.web_search_ids[i]
                    break
            call = ToolCallBlock(
                id=self.call_id(raw_id), name="web_search", input=action if action else {}
            )
        self.known_calls.add(call.id)
        turn.blocks.append(call)

    def add_output(self, payload: dict[str, Any], timestamp: Any) -> None:
        call_id = payload.get("call_id")
        parts, is_error = _output_parts(payload.get("output"))
        if not isinstance(call_id, str) or call_id not in self.known_calls:
            self.orphans += 1
            self.plain(
                "user",
                [p for p in parts if isinstance(p, TextBlock)] or [TextBlock(text="")],
                timestamp,
                orphan_tool_result=call_id if isinstance(call_id, str) else None,
            )
            return
        self.close()
        result = ToolResultBlock(tool_call_id=call_id, content=parts, is_error=is_error)
        last = self.turns[-1] if self.turns else None
        if last is not None and last.role == "tool" and not last.metadata.get("synthesized"):
            last.blocks.append(result)
        else:
            meta: dict[str, JsonValue] = {}
            if isinstance(timestamp, str):
                meta["timestamp"] = timestamp
            self.turns.append(Turn("tool", [result], meta))

    def add_usage(self, info: Any) -> None:
        if not isinstance(info, dict):
            return
        usage = info.get("last_token_usage")
        if not isinstance(usage, dict):
            return
        last = next((t for t in reversed(self.turns) if t.role == "assistant"), None)
        if last is not None and "usage" not in last.metadata:
            last.metadata["usage"] = usage
        self.close()


class CodexRolloutFormat(Format):
    name = "codex-rollout"
    description = "OpenAI Codex CLI rollout JSONL"
    extension = ".jsonl"
    priority = 10

    def sniff(self, doc: Document) -> bool:
        if doc.kind != "jsonl" or not isinstance(doc.data, list):
            return False
        head = doc.data[:20]
        return any(
            _is_record(r) and r.get("type") in ("session_meta", "response_item") for r in head
        )

    def load(self, doc: Document) -> list[AgentContext]:
        records = doc.data if doc.kind == "jsonl" and isinstance(doc.data, list) else []
        if not any(_is_record(r) and r.get("type") != "event_msg" for r in records):
            raise BadInputError(
                "not a Codex rollout: no session_meta/response_item records",
                path=doc.path,
                hint="expected ~/.codex/sessions/.../rollout-*.jsonl",
            )
        b = _Builder()
        system: str | None = None
        meta: dict[str, JsonValue] = {"source_format": self.name}
        for record in records:
            if not _is_record(record):
                continue
            kind = record["type"]
            payload: dict[str, Any] = record["payload"]
            ts = record.get("timestamp")
            if kind == "session_meta":
                if "session_id" in meta:
                    continue  # a resumed/forked session repeats its parent's header
                if isinstance(payload.get("id"), str):
                    meta["session_id"] = payload["id"]
                if isinstance(payload.get("cwd"), str):
                    meta["cwd"] = payload["cwd"]
                if isinstance(payload.get("cli_version"), str):
                    meta["cli_version"] = payload["cli_version"]
                base = payload.get("base_instructions")
                text = base.get("text") if isinstance(base, dict) else None
                if isinstance(text, str) and system is None:
                    system = text
            elif kind == "turn_context":
                if isinstance(payload.get("model"), str):
                    b.model = payload["model"]
                    meta.setdefault("model", b.model)
            elif kind == "event_msg":
                if payload.get("type") == "token_count":
                    b.add_usage(payload.get("info"))
                elif payload.get("type") == "web_search_end" and isinstance(
                    payload.get("call_id"), str
                ):
                    b.web_search_ids.append((payload.get("action"), payload["call_id"]))
            elif kind == "compacted":
                text = as_text(payload.get("message"))
                b.plain("user", [TextBlock(text=text)], ts, compacted=True)
            else:
                self._response_item(b, payload, ts)
        repaired = repair_pairing(
            [t.freeze() for t in b.turns],
            close="unless_answered",
            keep_pending="last_assistant",
            orphan_results="keep",  # add_output made the outputs of unknown calls user text
        )
        if repaired.synthesized_results:
            meta["synthesized_results"] = repaired.synthesized_results
        if b.orphans:
            meta["orphan_results"] = b.orphans
        return [
            AgentContext(
                system_instruction=system, messages=tuple(repaired.messages), metadata=meta
            )
        ]

    @staticmethod
    def _response_item(b: _Builder, payload: dict[str, Any], ts: Any) -> None:
        kind = payload.get("type")
        if kind == "message":
            role = payload.get("role")
            blocks = nonempty_parts(payload.get("content"))
            if role == "assistant":
                b.assistant(ts).blocks.extend(blocks)
            elif role in ("developer", "system"):
                b.plain("system", blocks, ts)
            else:
                b.plain("user", blocks, ts)
        elif kind == "reasoning":
            b.assistant(ts).blocks.append(_thinking(payload))
        elif kind in _CALL_ITEMS:
            b.add_call(payload, ts)
        elif kind in _OUTPUT_ITEMS:
            b.add_output(payload, ts)
        # other item types (ghost snapshots, unknown future items) carry no conversation content


def _thinking(payload: dict[str, Any]) -> ThinkingBlock:
    def texts(items: Any) -> list[str]:
        if not isinstance(items, list):
            return []
        return [str(i.get("text")) for i in items if isinstance(i, dict) and i.get("text")]

    text = "\n\n".join(texts(payload.get("summary")) or texts(payload.get("content")))
    encrypted = payload.get("encrypted_content")
    signature = encrypted if isinstance(encrypted, str) and encrypted else None
    return ThinkingBlock(thinking=text, signature=signature, redacted=not text and bool(signature))
