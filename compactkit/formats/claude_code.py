"""Claude Code session JSONL (~/.claude/projects/*/<uuid>.jsonl).

How a file becomes contexts:

* Records without a `uuid` (`summary` titles, `file-history-snapshot`, `queue-operation`) are not
  conversation content. `system` and `progress` records are UI events the model never sees; they
  are skipped too (a `compact_boundary` record only links the chain across a /compact).
* Records with `isSidechain: true` belong to subagents (the Task tool). Each sidechain tree (one
  root) is its own conversation; the main conversation is every non-sidechain record. A file with
  several conversations sets `metadata["conversation"]`; a sidechain also records `sidechain`,
  `agent_id` and, when its prompt matches a Task call of the main conversation in the same file,
  `parent_tool_call_id`.
* The records form a tree through `parentUuid` (`logicalParentUuid` across a compact boundary).
  We take the last user/assistant record in file order as the leaf and keep the path from it to
  the root, plus the records hanging off that path that belong to the same turns: newer Claude
  Code versions write each block of one API response as its own record (same `message.id`) and
  parent each parallel tool result on the record holding its call, so the "path" alone would
  lose them. Records on other branches (rewound or edited turns) are dropped and counted in
  `metadata["off_path_records"]`. Kept records are read in file order.
* Assistant records with one `message.id` merge into one assistant message (thinking, text and
  tool calls in file order; `usage`/`stop_reason` from the last record, which is the final one).
* User records holding `tool_result` blocks become `tool` messages (one per record); the
  `toolUseResult` sidecar duplicates them and is ignored. Other user records (prompts, command
  echoes, `isMeta` caveats and expanded skill/command prompts, which Claude Code sends to the
  model) stay user messages; a `/compact` summary (`isCompactSummary`) becomes a `SummaryBlock`
  whose etag keys, in `recovery`, the text the model was sent (so `expand` restores it).
* A prompt the user queued while the model worked and that Claude Code delivered mid-turn (a
  `queue-operation` `enqueue` later consumed by `remove`) is not stored as a user record; the
  model saw it, so it is added as a user message (`metadata["queued_command"] = True`) before the
  next assistant message.
* Claude Code does not store its system prompt: `system_instruction` stays None.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from pydantic import JsonValue

from ..context import (
    AgentContext,
    Block,
    ContentPart,
    SummaryBlock,
    TextBlock,
    ThinkingBlock,
    ToolCallBlock,
    ToolResultBlock,
)
from ..errors import BadInputError
from ..recovery import put
from ._pairing import NO_RESULT_TEXT, Repaired, Turn, repair_pairing
from ._util import as_text, image_from, parts_from_content
from .base import Document, Format

_SNIFF_LIMIT = 50


def _records(doc: Document) -> list[dict[str, Any]]:
    data: Any = doc.data
    if doc.kind == "json":
        data = [data] if isinstance(data, dict) else data
    if not isinstance(data, list):
        return []
    return [r for r in data if isinstance(r, dict)]


def _is_message_record(record: dict[str, Any]) -> bool:
    """A user/assistant record with the keys only Claude Code writes together."""
    return (
        record.get("type") in ("user", "assistant")
        and isinstance(record.get("message"), dict)
        and isinstance(record.get("uuid"), str)
        and "parentUuid" in record
        and ("sessionId" in record or "isSidechain" in record)
    )


class ClaudeCodeFormat(Format):
    name = "claude-code"
    description = "Claude Code session JSONL (~/.claude/projects/*/<uuid>.jsonl)"
    extension = ".jsonl"
    priority = 10

    def sniff(self, doc: Document) -> bool:
        try:
            data: Any = doc.data
            if doc.kind == "json":
                data = [data] if isinstance(data, dict) else []
            if not isinstance(data, list):
                return False
            return any(isinstance(r, dict) and _is_message_record(r) for r in data[:_SNIFF_LIMIT])
        except Exception:
            return False

    def load(self, doc: Document) -> list[AgentContext]:
        records = _records(doc)
        if not any(_is_message_record(r) for r in records):
            raise BadInputError(
                "not a Claude Code session: no user/assistant records with uuid and parentUuid",
                path=doc.path,
            )
        return _Loader(records).contexts()


# --------------------------------------------------------------------------- the record tree


class _Loader:
    def __init__(self, records: list[dict[str, Any]]) -> None:
        self.records = records
        self.by_uuid: dict[str, int] = {}
        for index, record in enumerate(records):
            uuid = record.get("uuid")
            if isinstance(uuid, str) and uuid not in self.by_uuid:
                self.by_uuid[uuid] = index

    def parent(self, index: int) -> int | None:
        record = self.records[index]
        link = record.get("parentUuid")
        if link is None:
            link = record.get("logicalParentUuid")
        parent = self.by_uuid.get(link) if isinstance(link, str) else None
        return None if parent == index else parent

    def root(self, index: int, memo: dict[int, int]) -> int:
        seen: list[int] = []
        current = index
        while current not in memo:
            seen.append(current)
            parent = self.parent(current)
            if parent is None or parent in seen:
                memo[current] = current
                break
            current = parent
        top = memo[current]
        for i in seen:
            memo[i] = top
        return top

    def groups(self) -> list[list[int]]:
        """Record indices of each conversation (main first when it starts first), file order."""
        main: list[int] = []
        sidechains: dict[int, list[int]] = defaultdict(list)
        memo: dict[int, int] = {}
        for index in self.by_uuid.values():
            if self.records[index].get("isSidechain") is True:
                sidechains[self.root(index, memo)].append(index)
            else:
                main.append(index)
        groups = [sorted(g) for g in (main, *sidechains.values())]
        groups = [g for g in groups if any(_is_message_record(self.records[i]) for i in g)]
        return sorted(groups, key=lambda g: g[0])

    def active(self, group: list[int]) -> tuple[list[int], int]:
        """The kept records of one conversation (file order) and how many were off the path."""
        members = set(group)
        messages = [i for i in group if _is_message_record(self.records[i])]
        leaf = messages[-1]
        kept: set[int] = set()
        current: int | None = leaf
        while current is not None and current in members and current not in kept:
            kept.add(current)
            current = self.parent(current)
        response_ids = {
            _message_id(self.records[i]) for i in kept if self.records[i].get("type") == "assistant"
        }
        response_ids.discard(None)
        calls = {c for i in kept for c in _call_ids(self.records[i])}
        answered = {r for i in kept for r in _result_ids(self.records[i])}
        changed = True
        while changed:
            changed = False
            for i in group:
                if i in kept or self.parent(i) not in kept:
                    continue
                record = self.records[i]
                kind = record.get("type")
                if kind == "assistant":
                    attach = _message_id(record) in response_ids
                elif kind == "user":
                    results = _result_ids(record)
                    attach = (
                        bool(results)
                        and _only_tool_results(record)
                        and all(r in calls and r not in answered for r in results)
                    )
                else:
                    attach = True  # progress/system events: skipped later, kept as links
                if attach:
                    kept.add(i)
                    calls.update(_call_ids(record))
                    answered.update(_result_ids(record))
                    changed = True
        off_path = sum(1 for i in messages if i not in kept)
        return sorted(kept), off_path

    def contexts(self) -> list[AgentContext]:
        groups = self.groups()
        main_first = self.records[groups[0][0]].get("isSidechain") is not True
        task_prompts = self._task_prompts(groups[0]) if main_first else {}
        titles = {
            r["leafUuid"]: r["summary"]
            for r in self.records
            if r.get("type") == "summary"
            and isinstance(r.get("leafUuid"), str)
            and isinstance(r.get("summary"), str)
        }
        queue_ops = [i for i, r in enumerate(self.records) if r.get("type") == "queue-operation"]
        out: list[AgentContext] = []
        for number, group in enumerate(groups):
            kept, off_path = self.active(group)
            sidechain = self.records[group[0]].get("isSidechain") is True
            stream = kept if sidechain else sorted(kept + queue_ops)
            builder = _Builder()
            for i in stream:
                builder.add(self.records[i])
            repaired = builder.finish()
            messages = repaired.messages
            meta = self._metadata(group, kept, titles)
            if len(groups) > 1:
                meta["conversation"] = number
            if sidechain:
                meta["sidechain"] = True
                first = next((m for m in messages if m.role == "user"), None)
                call = task_prompts.get(first.text) if first is not None else None
                if call is not None:
                    meta["parent_tool_call_id"] = call
            if off_path:
                meta["off_path_records"] = off_path
            if repaired.synthesized_results:
                meta["synthesized_results"] = repaired.synthesized_results
            if repaired.synthesized_calls:
                meta["synthesized_calls"] = repaired.synthesized_calls
            if builder.queued_commands:
                meta["queued_commands"] = builder.queued_commands
            out.append(
                AgentContext(messages=tuple(messages), metadata=meta, recovery=builder.recovery)
            )
        return out

    def _task_prompts(self, group: list[int]) -> dict[str, str]:
        prompts: dict[str, str] = {}
        for i in group:
            record = self.records[i]
            if record.get("type") != "assistant":
                continue
            for block in _content_list(record):
                tool_input = block.get("input")
                if (
                    block.get("type") == "tool_use"
                    and isinstance(tool_input, dict)
                    and isinstance(tool_input.get("prompt"), str)
                    and isinstance(block.get("id"), str)
                ):
                    prompts.setdefault(tool_input["prompt"], block["id"])
        return prompts

    def _metadata(
        self, group: list[int], kept: list[int], titles: dict[str, str]
    ) -> dict[str, JsonValue]:
        meta: dict[str, JsonValue] = {"source_format": ClaudeCodeFormat.name}
        first = self.records[group[0]]
        for key, target in (
            ("sessionId", "session_id"),
            ("cwd", "cwd"),
            ("version", "version"),
            ("gitBranch", "git_branch"),
            ("agentId", "agent_id"),
        ):
            value = next(
                (self.records[i][key] for i in group if isinstance(self.records[i].get(key), str)),
                first.get(key),
            )
            if isinstance(value, str) and value:
                meta[target] = value
        slug = next(
            (
                self.records[i]["slug"]
                for i in group
                if isinstance(self.records[i].get("slug"), str)
            ),
            None,
        )
        if slug:
            meta["slug"] = slug
        models = [
            m
            for i in kept
            if self.records[i].get("type") == "assistant"
            and isinstance(m := _message(self.records[i]).get("model"), str)
            and m != "<synthetic>"
        ]
        if models:
            meta["model"] = models[-1]
        for i in reversed(kept):
            title = titles.get(self.records[i].get("uuid", ""))
            if title:
                meta["title"] = title
                break
        return meta


def _message(record: dict[str, Any]) -> dict[str, Any]:
    message = record.get("message")
    return message if isinstance(message, dict) else {}


def _content_list(record: dict[str, Any]) -> list[dict[str, Any]]:
    content = _message(record).get("content")
    if isinstance(content, list):
        return [b for b in content if isinstance(b, dict)]
    return []


def _message_id(record: dict[str, Any]) -> str | None:
    value = _message(record).get("id")
    return value if isinstance(value, str) else None


def _call_ids(record: dict[str, Any]) -> list[str]:
    if record.get("type") != "assistant":
        return []
    return [
        b["id"]
        for b in _content_list(record)
        if b.get("type") == "tool_use" and isinstance(b.get("id"), str)
    ]


def _result_ids(record: dict[str, Any]) -> list[str]:
    if record.get("type") != "user":
        return []
    return [
        b["tool_use_id"]
        for b in _content_list(record)
        if b.get("type") == "tool_result" and isinstance(b.get("tool_use_id"), str)
    ]


def _only_tool_results(record: dict[str, Any]) -> bool:
    return all(b.get("type") == "tool_result" for b in _content_list(record))


# --------------------------------------------------------------------------- records -> messages


class _Builder:
    """Turns the kept records of one conversation, in file order, into messages."""

    def __init__(self) -> None:
        self.drafts: list[Turn] = []
        self.recovery: dict[str, str] = {}
        self.open_response: tuple[int, str] | None = None  # (draft index, message.id)
        self.queue: list[str] = []
        self.injections: list[tuple[str, Any]] = []  # (text, timestamp)
        self.queued_commands = 0

    def add(self, record: dict[str, Any]) -> None:
        kind = record.get("type")
        if kind == "queue-operation":
            self._queue(record)
        elif kind == "assistant" and isinstance(record.get("message"), dict):
            self._assistant(record)
        elif kind == "user" and isinstance(record.get("message"), dict):
            self._user(record)

    # ----------------------------------------------------------------- queued prompts

    def _queue(self, record: dict[str, Any]) -> None:
        operation = record.get("operation")
        content = record.get("content")
        if operation == "enqueue" and isinstance(content, str):
            self.queue.append(content)
        elif operation == "dequeue" and self.queue:
            self.queue.pop(0)  # delivered as an ordinary prompt record
        elif operation == "popAll":
            self.queue.clear()  # taken back into the input box, not sent
        elif operation == "remove" and self.queue:
            # delivered to the model mid-turn, not stored as a user record
            self.injections.append((self.queue.pop(0), record.get("timestamp")))

    # ----------------------------------------------------------------- assistant records

    def _assistant(self, record: dict[str, Any]) -> None:
        message = record["message"]
        blocks = _assistant_blocks(message.get("content"))
        response_id = message.get("id") if isinstance(message.get("id"), str) else None
        if self.open_response is not None and response_id == self.open_response[1]:
            draft = self.drafts[self.open_response[0]]
            known = {b.id for b in draft.blocks if isinstance(b, ToolCallBlock)}
            draft.blocks.extend(
                b for b in blocks if not (isinstance(b, ToolCallBlock) and b.id in known)
            )
            _update_response_metadata(draft.metadata, record)
            return
        if not blocks:
            return
        for text, timestamp in self.injections:
            meta: dict[str, JsonValue] = {"queued_command": True}
            _put(meta, "timestamp", timestamp)
            self._append(Turn("user", [TextBlock(text=text)], meta))
            self.queued_commands += 1
        self.injections.clear()
        meta = {}
        if response_id:
            meta["id"] = response_id
        _put(meta, "uuid", record.get("uuid"))
        _put(meta, "timestamp", record.get("timestamp"))
        _put(meta, "model", message.get("model"))
        _update_response_metadata(meta, record)
        self.drafts.append(Turn("assistant", blocks, meta))
        self.open_response = (len(self.drafts) - 1, response_id) if response_id else None

    # ----------------------------------------------------------------- user records

    def _user(self, record: dict[str, Any]) -> None:
        content = record["message"].get("content")
        meta: dict[str, JsonValue] = {}
        _put(meta, "uuid", record.get("uuid"))
        _put(meta, "timestamp", record.get("timestamp"))
        if record.get("isMeta") is True:
            meta["is_meta"] = True
        items: list[Any] = content if isinstance(content, list) else [content]
        results: list[Block] = []
        rest: list[Block] = []
        for item in items:
            if isinstance(item, str):
                if item:
                    rest.append(TextBlock(text=item))
            elif isinstance(item, dict) and item.get("type") == "tool_result":
                results.append(
                    ToolResultBlock(
                        tool_call_id=as_text(item.get("tool_use_id")),
                        content=_result_parts(item.get("content")),
                        is_error=item.get("is_error") is True,
                    )
                )
            elif isinstance(item, dict) and item.get("type") == "text":
                rest.append(TextBlock(text=as_text(item.get("text"))))
            elif isinstance(item, dict) and item.get("type") == "image":
                rest.append(image_from(item))
            elif item is not None:
                rest.append(TextBlock(text=as_text(item)))
        if results:
            self._append(Turn("tool", results, dict(meta)), keep_response=True)
        if rest:
            if record.get("isCompactSummary") is True:
                text = "\n".join(b.text for b in rest if isinstance(b, TextBlock))
                etag = put(self.recovery, [TextBlock(text=text)])  # what the model was sent
                rest = [SummaryBlock(text=text, etag=etag, backend="claude-code")]
                meta["compact_summary"] = True
            self._append(Turn("user", rest, meta))

    # ----------------------------------------------------------------- pairing

    def _append(self, draft: Turn, keep_response: bool = False) -> None:
        self.drafts.append(draft)
        if not keep_response:
            self.open_response = None

    def finish(self) -> Repaired:
        """Freeze the drafts, closing calls that never got a result and results without a call.

        A call still open when the next non-tool message starts gets a synthesized error result;
        only calls of the last assistant message may stay pending. A result whose call was not
        made yet gets a synthesized call (`name="unknown"`, one message each) just before its
        tool message; a second result for one call is dropped.
        """
        return repair_pairing(
            [draft.freeze() for draft in self.drafts],
            close="all",
            keep_pending="last_output_assistant",
            synthesize_calls="if_not_called_yet",
            one_message_per_call=True,
            unknown_tool_name="unknown",
            orphan_results="drop",
        )


def _result_parts(content: Any) -> tuple[ContentPart, ...]:
    if isinstance(content, (str, list, dict)) or content is None:
        return parts_from_content(content)
    return (TextBlock(text=as_text(content)),)


def _update_response_metadata(meta: dict[str, JsonValue], record: dict[str, Any]) -> None:
    message = record["message"]
    usage = message.get("usage")
    if isinstance(usage, dict):
        meta["usage"] = usage
    _put(meta, "stop_reason", message.get("stop_reason"))
    _put(meta, "request_id", record.get("requestId"))


def _put(meta: dict[str, JsonValue], key: str, value: Any) -> None:
    if isinstance(value, (str, int, float, bool)) and value != "":
        meta[key] = value


def _assistant_blocks(content: Any) -> list[Block]:
    if isinstance(content, str):
        return [TextBlock(text=content)] if content else []
    blocks: list[Block] = []
    for item in content if isinstance(content, list) else []:
        if not isinstance(item, dict):
            blocks.append(TextBlock(text=as_text(item)))
            continue
        kind = item.get("type")
        if kind == "text":
            blocks.append(TextBlock(text=as_text(item.get("text"))))
        elif kind == "thinking":
            signature = item.get("signature")
            blocks.append(
                ThinkingBlock(
                    thinking=as_text(item.get("thinking")),
                    signature=signature if isinstance(signature, str) and signature else None,
                )
            )
        elif kind == "redacted_thinking":
            data = item.get("data")
            blocks.append(
                ThinkingBlock(
                    thinking="", signature=data if isinstance(data, str) else None, redacted=True
                )
            )
        elif kind == "tool_use":
            raw_input = item.get("input")
            blocks.append(
                ToolCallBlock(
                    id=as_text(item.get("id")),
                    name=as_text(item.get("name")),
                    input=raw_input if raw_input is not None else {},
                )
            )
        elif kind == "image":
            blocks.append(image_from(item))
        else:  # server tool use/results and future block types: keep what the model produced
            blocks.append(TextBlock(text=as_text(item)))
    return blocks


__all__ = ["NO_RESULT_TEXT", "ClaudeCodeFormat"]
