"""Claude Code headless output: `claude -p --output-format stream-json` (JSONL), and
`--output-format json` (one result object; with `--verbose`, the array of the stream's messages).
The Claude Agent SDK reads the same messages from the CLI, so a log of them is this format too.

Upstream: the messages the CLI prints, as the Claude Agent SDK parses them
(anthropics/claude-agent-sdk-python `src/claude_agent_sdk/_internal/message_parser.py` and
`types.py`, commit e8bde60164f9ef820068ec36ffe6b7be6bd8fd26): `system` (subtype `init` with
`session_id`, `cwd`, `model`, `tools`; `task_*`, `hook_*` and other subtypes), `assistant` and
`user` holding one API message each (`message.content` with `text`, `thinking`, `tool_use`,
`tool_result` blocks; `parent_tool_use_id` set on a subagent's messages; `uuid`), `result`
(`subtype`, `is_error`, `num_turns`, `result`, `total_cost_usd`, `usage`,
`permission_denials`), and `stream_event`, `rate_limit_event`, `conversation_reset`.

Mapping: the `user` and `assistant` messages are the records Claude Code writes to its session
file, without the links: each is chained to the one before it in its thread (the main one, or one
per `parent_tool_use_id`), then read exactly as a session file (`claude_code`), so one API
response split over several messages (one `message.id`) is one assistant message, tool results
pair by id, text Claude Code injected is `origin: harness` and the user's words inside tool
results are pinned the same way. A subagent's messages (`parent_tool_use_id`) are a conversation
of their own after the main one. Every other message is counted in `skipped_records` by type and
subtype; `init` gives `session_id`, `cwd` and `model`, the last `result` gives
`metadata["result"]` (`subtype`, `is_error`, `num_turns`, `total_cost_usd`, `duration_ms`).

Qwen Code's `--output-format stream-json` / `json` print the same messages
(QwenLM/qwen-code `packages/cli/src/nonInteractive/io/BaseJsonOutputAdapter.ts`, commit
0816e573c2e769efa3280449a5c61b9a4f82666f: one block type per assistant message, each its own
`message.id`; the prompt as a `user` message; `init` fields under `data`), read the same way.

The prompt given to `claude -p` is not in the stream (the CLI prints only what the agent and
its tools produced; `--replay-user-messages` echoes user messages sent on stdin, which are read
as the user's). A lone `--output-format json` result holds only the final answer: it loads as the harness note
and one assistant message with that text, `claude_layout: "result"`; the whole session is the session
file the result's `session_id` names. A line that is not JSON is skipped, as the SDK skips what it
cannot parse.
"""

from __future__ import annotations

from typing import Any

from pydantic import JsonValue

from ..context import ORIGIN_KEY, AgentContext, Message, TextBlock
from ..errors import BadInputError
from ._util import (
    REPAIR_KEYS,
    SKIPPED_KEY,
    as_list,
    as_text,
    context_metadata,
    note_skipped,
    str_or_none,
)
from .base import Document, Format
from .claude_code import message_records_contexts

_SNIFF_LIMIT = 50
PROMPT_NOT_RECORDED = (
    "[the prompt of this run is not in its output: it was given on the command line]"
)
"""The harness note a thread starts with when the stream holds no prompt of it."""
_RESULT_KEYS = ("subtype", "is_error", "num_turns", "total_cost_usd", "duration_ms")


class ClaudeCodeStreamFormat(Format):
    name = "claude-code-stream"
    description = "Claude Code -p --output-format stream-json / json output (Agent SDK messages)"
    extension = ".jsonl"
    priority = 10
    prompt_optional = True  # the prompt is on the command line, not in the output
    malformed_lines = "skip"

    def sniff(self, doc: Document) -> bool:
        try:
            records = _records(doc)
            return any(isinstance(r, dict) and _is_stream(r) for r in records[:_SNIFF_LIMIT])
        except Exception:
            return False

    def load(self, doc: Document) -> list[AgentContext]:
        if not self.sniff(doc):
            raise BadInputError(
                "not Claude Code stream-json output (no messages with session_id)",
                path=doc.path,
                hint="expected the output of claude -p --output-format stream-json or json",
            )
        records = [r for r in _records(doc) if isinstance(r, dict)]
        linked = _linked(records)
        head = _head(records)
        if not any(r.get("type") in ("user", "assistant") for r in linked):
            return [_result_only(records, head)]
        contexts = message_records_contexts(linked)
        return [_retag(ctx, head) for ctx in contexts]


def _is_stream(record: dict[str, Any]) -> bool:
    """A message of the stream: it names its session `session_id` (a session file's records
    say `sessionId` and carry `parentUuid`)."""
    if "session_id" not in record or "parentUuid" in record or "sessionId" in record:
        return False
    kind = record.get("type")
    if kind in ("user", "assistant"):
        return isinstance(record.get("message"), dict)
    if kind == "system":
        return isinstance(record.get("subtype"), str)
    return kind == "result" and isinstance(record.get("subtype"), str)


def _records(doc: Document) -> list[Any]:
    if doc.kind == "jsonl":
        return list(doc.data)
    if isinstance(doc.data, list):
        return doc.data
    return [doc.data] if isinstance(doc.data, dict) else []


def _linked(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The messages as session records: each user/assistant message chained to the one before it
    in its thread (`uuid`, `parentUuid`, `sessionId`; a subagent's thread `isSidechain` with its
    `parent_tool_use_id` as `agentId`); the other messages without a `uuid`, so that they are
    counted, not linked."""
    last: dict[str | None, str] = {}
    out: list[dict[str, Any]] = []
    prompted = _prompted_threads(records)
    for number, record in enumerate(records):
        kind = record.get("type")
        if kind not in ("user", "assistant") or not isinstance(record.get("message"), dict):
            out.append({k: v for k, v in record.items() if k != "uuid"})
            continue
        thread = str_or_none(record.get("parent_tool_use_id"))
        if thread not in last and thread not in prompted:
            note = _note(record, thread, f"stream-prompt-{number}")
            last[thread] = note["uuid"]
            out.append(note)
        uuid = str_or_none(record.get("uuid")) or f"stream-{number}"
        linked = dict(record)
        linked.update(uuid=uuid, parentUuid=last.get(thread), sessionId=record.get("session_id"))
        linked["isSidechain"] = thread is not None
        if thread is not None:
            linked["agentId"] = thread
        last[thread] = uuid
        out.append(linked)
    return out


def _prompted_threads(records: list[dict[str, Any]]) -> set[str | None]:
    """The threads whose first message is a prompt (user text, not only tool results)."""
    first: dict[str | None, dict[str, Any]] = {}
    for record in records:
        if record.get("type") in ("user", "assistant") and isinstance(record.get("message"), dict):
            first.setdefault(str_or_none(record.get("parent_tool_use_id")), record)
    return {thread for thread, record in first.items() if _is_prompt(record)}


def _is_prompt(record: dict[str, Any]) -> bool:
    """A user message holding text (a prompt), not only tool results."""
    if record.get("type") != "user":
        return False
    content = record["message"].get("content")
    if isinstance(content, str):
        return bool(content)
    return any(
        not (isinstance(b, dict) and b.get("type") == "tool_result") for b in as_list(content)
    )


def _note(record: dict[str, Any], thread: str | None, uuid: str) -> dict[str, Any]:
    """A harness user record saying the thread's prompt is not in the stream (`isMeta`)."""
    note: dict[str, Any] = {
        "type": "user",
        "isMeta": True,
        "message": {"role": "user", "content": PROMPT_NOT_RECORDED},
        "uuid": uuid,
        "parentUuid": None,
        "sessionId": record.get("session_id"),
        "isSidechain": thread is not None,
    }
    if thread is not None:
        note["agentId"] = thread
    return note


def _head(records: list[dict[str, Any]]) -> dict[str, JsonValue]:
    """What the `init` message and the last `result` say about the run."""
    head: dict[str, JsonValue] = {}
    for record in records:
        if record.get("type") == "system" and record.get("subtype") == "init":
            data = record.get("data")  # Qwen Code puts the init fields in `data`
            for key in ("session_id", "cwd", "model"):
                value = str_or_none(record.get(key))
                if value is None and isinstance(data, dict):
                    value = str_or_none(data.get(key))
                if value is not None:
                    head.setdefault(key, value)
        elif record.get("type") == "result":
            result: dict[str, JsonValue] = {
                k: record[k]
                for k in _RESULT_KEYS
                if isinstance(record.get(k), (str, int, float, bool))
            }
            head["result"] = result
            session = str_or_none(record.get("session_id"))
            if session is not None:
                head.setdefault("session_id", session)
    return head


def _retag(ctx: AgentContext, head: dict[str, JsonValue]) -> AgentContext:
    """`ctx` named this format's, with what `head` adds before the repair and skip counts."""
    tail = (*REPAIR_KEYS, SKIPPED_KEY)
    meta = {k: v for k, v in ctx.metadata.items() if k not in tail}
    meta["source_format"] = ClaudeCodeStreamFormat.name
    for key, value in head.items():
        if meta.get(key) is None:
            meta[key] = value
    meta.update((k, ctx.metadata[k]) for k in tail if k in ctx.metadata)
    return ctx.replace(metadata=meta)


def _result_only(records: list[dict[str, Any]], head: dict[str, JsonValue]) -> AgentContext:
    """`--output-format json` without `--verbose`: the final answer only."""
    results = [r for r in records if r.get("type") == "result"]
    text = as_text(results[-1].get("result")) if results else ""
    note = Message(
        role="user",
        content=(TextBlock(text=PROMPT_NOT_RECORDED),),
        metadata={ORIGIN_KEY: "harness"},
    )
    answer = (Message(role="assistant", content=(TextBlock(text=text),)),) if text else ()
    messages = (note, *answer)
    meta = context_metadata(
        ClaudeCodeStreamFormat.name,
        session_id=head.get("session_id"),
        cwd=head.get("cwd"),
        model=head.get("model"),
        claude_layout="result",
        result=head.get("result"),
    )
    skipped: dict[str, int] = {}
    for record in records:
        kind = as_text(record.get("type")) or "unknown"
        sub = record.get("subtype")
        name = f"{kind}/{sub}" if isinstance(sub, str) and kind != "result" else kind
        if kind != "result":
            skipped[name] = skipped.get(name, 0) + 1
    note_skipped(meta, skipped)
    return AgentContext(messages=messages, metadata=meta)


__all__ = ["ClaudeCodeStreamFormat"]
