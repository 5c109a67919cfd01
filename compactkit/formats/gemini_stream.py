"""Gemini CLI headless output: `gemini -p ... --output-format stream-json` (JSONL events), and
`--output-format json` (one object, `packages/core/src/output/json-formatter.ts`: `session_id`,
`response`, `stats`, `error`, `warnings`; the answer only, loaded after a harness note saying the
prompt is not recorded, `gemini_layout: "json"`).

Upstream: google-gemini/gemini-cli `packages/core/src/output/types.ts` (`JsonStreamEvent`) and
the writer `packages/cli/src/nonInteractiveCli.ts` (commit
5411f113cafae26161b4969b0237b8e1e024e2c2). Each line is one event with a `type` and a
`timestamp`:

* `init` (`session_id`, `model`), first;
* `message` with `role: "user"` (the prompt as typed, `content`), and `role: "assistant"` with
  `delta: true`: the model's text, streamed in pieces;
* `tool_use` (`tool_name`, `tool_id`, `parameters`) and `tool_result` (`tool_id`,
  `status` success / error, `output`: the tool's display text, `error: {type, message}`);
* `error` (`severity` warning / error, `message`: a loop detected, the turn limit, a blocked or
  empty response), shown to the user only;
* `result` (`status`, `error`, `stats` with the token counts), last.

Mapping: the user message -> the user's words; consecutive assistant deltas -> one text block
of an assistant message, joined as printed; the `tool_use` events after it -> its calls, the
`tool_result`s -> one tool message answering them (`error.message` when the status is error, else
`output`). `error` events go to `metadata["gemini_errors"]` and are counted with `init` and
`result` in `skipped_records`; `result.stats` is `metadata["usage"]`. The stream carries what
the terminal shows of a result, not the `functionResponse` sent to the model, so no words of the
user are found inside results (`ask_user` answers are in the session file, read by `gemini-cli`).
A line that is not JSON is refused, named: the CLI writes each event whole.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from pydantic import JsonValue

from ..context import ORIGIN_KEY, AgentContext, Block, TextBlock, ToolCallBlock, ToolResultBlock
from ._events import built, refuse_unless
from ._pairing import Turn
from ._util import (
    as_dict,
    as_list,
    as_text,
    str_or_none,
    turns_context,
)
from .base import Document, Format

_TYPES = frozenset({"init", "message", "tool_use", "tool_result", "error", "result"})
_JSON_KEYS = frozenset({"session_id", "response", "stats", "error", "warnings"})
PROMPT_NOT_RECORDED = (
    "[the prompt of this run is not in its output: it was given on the command line]"
)
"""The harness note a `--output-format json` object starts with: it holds only the answer."""


class GeminiCliStreamFormat(Format):
    name = "gemini-cli-stream"
    description = "Gemini CLI --output-format stream-json events (JSONL)"
    extension = ".jsonl"
    priority = 10
    prompt_optional = True  # `--output-format json` prints the answer only

    def sniff(self, doc: Document) -> bool:
        try:
            if _is_json_output(doc.data) and doc.kind == "json":
                return True
            records = _records(doc)[:20]
            return (
                bool(records)
                and all(_is_event(r) for r in records)
                and any(r.get("type") in ("init", "tool_use", "message") for r in records)
            )
        except Exception:
            return False

    def load(self, doc: Document) -> list[AgentContext]:
        what = "Gemini CLI stream-json output (events of type init/message/tool_use/...)"
        if doc.kind == "json" and _is_json_output(doc.data):
            refuse_unless(self, doc, what)
            return [_GeminiStreamContextBuilder().json_output(doc.data)]
        return built(self, doc, what, _records, _GeminiStreamContextBuilder())


class _GeminiStreamContextBuilder:
    def __init__(self) -> None:
        self.turns: list[Turn] = []
        self.skipped: Counter[str] = Counter()
        self.text: list[str] = []
        self.calls: list[Block] = []
        self.results: list[Block] = []
        self.errors: list[JsonValue] = []
        self.head: dict[str, JsonValue] = {}

    def add(self, event: Any) -> None:
        if not _is_event(event):
            self.skipped["unknown"] += 1
            return
        kind = event["type"]
        if kind == "message" and event.get("role") == "assistant":
            if self.results:
                self.flush()
            self.text.append(as_text(event.get("content")))
        elif kind == "message":
            self.flush()
            text = as_text(event.get("content"))
            if text:
                self.turns.append(Turn("user", [TextBlock(text=text)], _when(event)))
        elif kind == "tool_use":
            if self.results:
                self.flush()
            call_id = str_or_none(event.get("tool_id")) or f"gemini-call-{len(self.calls)}"
            params = event.get("parameters")
            self.calls.append(
                ToolCallBlock(
                    id=call_id,
                    name=as_text(event.get("tool_name")) or "unknown",
                    input=params if isinstance(params, dict) else {},
                )
            )
        elif kind == "tool_result":
            self.results.append(_result(event))
        else:
            self.other(kind, event)

    def other(self, kind: str, event: dict[str, Any]) -> None:
        self.skipped[kind] += 1
        if kind == "init":
            for key in ("session_id", "model"):
                value = str_or_none(event.get(key))
                if value is not None:
                    self.head.setdefault(key, value)
        elif kind == "error":
            self.errors.append(
                {
                    "severity": as_text(event.get("severity")),
                    "message": as_text(event.get("message")),
                }
            )
        elif kind == "result":
            stats = event.get("stats")
            if isinstance(stats, dict):
                self.head["usage"] = stats
            self.head["status"] = as_text(event.get("status")) or None

    def json_output(self, data: dict[str, Any]) -> AgentContext:
        """`--output-format json`: `{session_id, response, stats, error, warnings}`, the final
        answer only (the prompt and the calls are not in it)."""
        self.head["session_id"] = str_or_none(data.get("session_id"))
        stats = data.get("stats")
        self.head["usage"] = stats if isinstance(stats, dict) else None
        error = as_dict(data.get("error"))
        if error:
            self.errors.append({"severity": "error", "message": as_text(error.get("message"))})
        self.errors.extend(
            {"severity": "warning", "message": as_text(w)} for w in as_list(data.get("warnings"))
        )
        note = Turn("user", [TextBlock(text=PROMPT_NOT_RECORDED)], {ORIGIN_KEY: "harness"})
        self.turns.append(note)
        self.text.append(as_text(data.get("response")))
        ctx = self.context()
        meta = {**ctx.metadata, "gemini_layout": "json"}
        return ctx.replace(metadata=meta)

    def flush(self) -> None:
        text = "".join(self.text)
        blocks: list[Block] = [TextBlock(text=text)] if text else []
        blocks.extend(self.calls)
        if blocks:
            self.turns.append(Turn("assistant", blocks))
        if self.results:
            self.turns.append(Turn("tool", list(self.results)))
        self.text, self.calls, self.results = [], [], []

    def context(self) -> AgentContext:
        self.flush()
        return turns_context(
            GeminiCliStreamFormat.name,
            self.turns,
            self.skipped,
            session_id=self.head.get("session_id"),
            model=self.head.get("model"),
            gemini_status=self.head.get("status"),
            usage=self.head.get("usage"),
            gemini_errors=self.errors or None,
        )


def _result(event: dict[str, Any]) -> ToolResultBlock:
    error = as_dict(event.get("error"))
    failed = event.get("status") == "error"
    text = as_text(error.get("message")) if failed and error else as_text(event.get("output"))
    return ToolResultBlock(
        tool_call_id=as_text(event.get("tool_id")) or "unknown",
        content=(TextBlock(text=text),),
        is_error=failed,
    )


def _is_json_output(data: Any) -> bool:
    return (
        isinstance(data, dict)
        and bool(data)
        and set(data) <= _JSON_KEYS
        and isinstance(data.get("response", ""), str)
        and ("response" in data or "error" in data)
        and ("stats" in data or "session_id" in data)
    )


def _when(event: dict[str, Any]) -> dict[str, JsonValue]:
    stamp = str_or_none(event.get("timestamp"))
    return {"timestamp": stamp} if stamp else {}


def _is_event(record: Any) -> bool:
    return (
        isinstance(record, dict)
        and record.get("type") in _TYPES
        and isinstance(record.get("timestamp"), str)
        and (record.get("type") != "message" or record.get("role") in ("user", "assistant"))
    )


def _records(doc: Document) -> list[Any]:
    if doc.kind == "jsonl":
        return list(doc.data)
    return [doc.data] if isinstance(doc.data, dict) else []


__all__ = ["GeminiCliStreamFormat"]
