"""Cursor agent transcripts (`~/.cursor/projects/<project>/agent-transcripts/<id>/<id>.jsonl`).

Upstream: Cursor is closed; the transcript is documented by the public readers of it (e.g. the
transcript adapters in mnemon/agentos-community, codemie, and tools that recover files from it):
one JSON object per line, `{"role": "user" | "assistant", "message": {"content": [...]}}`, the
content Anthropic-style blocks (`text`, `tool_use {name, input}` with or without an `id`,
`tool_result {content}` with or without a `tool_use_id`), and marker lines such as
`{"type": "turn_ended"}`. What the user typed is wrapped in `<user_query>` tags; other user text
(`<attached_files>`, `<system_reminder>`, rules, open-file context) is what Cursor added.

Mapping: assistant lines -> assistant messages (text, thinking, calls; a call without an id gets
`cursor-<line>-<n>`); a `tool_result` -> the result of the call it names, else of the oldest call
still open; user text -> a user message, the human's words when it holds a `<user_query>` (kept
whole, tags included, as the model got it), origin `harness` when it is only text Cursor added
(whole tagged sections, `<system_reminder>...</system_reminder>`; text that merely starts with `<`
stays the human's).
Marker lines and unknown lines are counted in `skipped_records`. Calls with no recorded result
get a synthesized error result, except the calls of the last assistant message.
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
    TextBlock,
    ToolCallBlock,
    ToolResultBlock,
)
from ..errors import BadInputError
from ._chat import anthropic_block
from ._pairing import Turn, repair_pairing
from ._util import (
    as_dict,
    as_list,
    as_text,
    context_metadata,
    note_repairs,
    note_skipped,
    parts_from_content,
)
from .base import Document, Format

_KEYS = frozenset({"role", "message", "type", "timestamp"})
_QUERY = "<user_query>"
_TAGGED = re.compile(r"(?:\s*<([A-Za-z_][\w.-]*)(?:\s[^>]*)?>.*?</\1>)+\s*", re.DOTALL)


class CursorFormat(Format):
    name = "cursor"
    description = "Cursor agent transcript JSONL (agent-transcripts/<id>/<id>.jsonl)"
    extension = ".jsonl"
    priority = 5  # bare role/message lines: the formats with richer records win

    def sniff(self, doc: Document) -> bool:
        try:
            records = [r for r in _records(doc)[:20] if isinstance(r, dict)]
            lines = [r for r in records if "role" in r]
            return (
                bool(lines)
                and all(set(r) <= _KEYS for r in records)
                and all(
                    r.get("role") in ("user", "assistant")
                    and isinstance(r.get("message"), dict)
                    and isinstance(r["message"].get("content"), (list, str))
                    for r in lines
                )
            )
        except Exception:
            return False

    def load(self, doc: Document) -> list[AgentContext]:
        if not self.sniff(doc):
            raise BadInputError(
                "not a Cursor agent transcript (lines of {role, message: {content}})", path=doc.path
            )
        builder = _CursorContextBuilder()
        for number, record in enumerate(_records(doc), start=1):
            builder.add(number, record)
        return [builder.context()]


class _CursorContextBuilder:
    def __init__(self) -> None:
        self.turns: list[Turn] = []
        self.skipped: Counter[str] = Counter()
        self.open_calls: list[str] = []

    def add(self, number: int, record: Any) -> None:
        if not isinstance(record, dict) or record.get("role") not in ("user", "assistant"):
            kind = record.get("type") if isinstance(record, dict) else None
            self.skipped[as_text(kind) or "unknown"] += 1
            return
        content = as_dict(record.get("message")).get("content")
        items = (
            [{"type": "text", "text": content}] if isinstance(content, str) else as_list(content)
        )
        meta: dict[str, JsonValue] = {"line": number}
        if record["role"] == "assistant":
            self.assistant(number, [as_dict(i) for i in items], meta)
        else:
            self.user([as_dict(i) for i in items], meta)

    def assistant(
        self, number: int, items: list[dict[str, Any]], meta: dict[str, JsonValue]
    ) -> None:
        blocks: list[Block] = []
        for n, item in enumerate(items):
            if item.get("type") == "tool_use":
                call_id = as_text(item.get("id")) or f"cursor-{number}-{n}"
                value = item.get("input")
                blocks.append(
                    ToolCallBlock(
                        id=call_id,
                        name=as_text(item.get("name")) or "unknown",
                        input=value if value is not None else {},
                    )
                )
                self.open_calls.append(call_id)
            elif item.get("type") == "text" and not as_text(item.get("text")):
                continue
            else:
                block = anthropic_block(item)
                blocks.append(block)
        if blocks:
            self.turns.append(Turn("assistant", blocks, meta))
        else:
            self.skipped["assistant (empty)"] += 1

    def user(self, items: list[dict[str, Any]], meta: dict[str, JsonValue]) -> None:
        results: list[Block] = []
        blocks: list[Block] = []
        for item in items:
            if item.get("type") == "tool_result":
                call_id = as_text(item.get("tool_use_id"))
                if call_id in self.open_calls:
                    self.open_calls.remove(call_id)
                elif self.open_calls:
                    call_id = self.open_calls.pop(0)
                results.append(
                    ToolResultBlock(
                        tool_call_id=call_id or "unknown",
                        content=parts_from_content(item.get("content")),
                        is_error=item.get("is_error") is True,
                    )
                )
            elif item.get("type") == "text" and not as_text(item.get("text")).strip():
                continue
            else:
                blocks.append(anthropic_block(item))
        if results:
            self.turns.append(Turn("tool", results, dict(meta)))
        if blocks:
            texts = [b.text for b in blocks if isinstance(b, TextBlock)]
            if texts and not any(_QUERY in t for t in texts) and all(map(_only_tags, texts)):
                meta[ORIGIN_KEY] = "harness"
            self.turns.append(Turn("user", blocks, meta))
        if not results and not blocks:
            self.skipped["user (empty)"] += 1

    def context(self) -> AgentContext:
        repaired = repair_pairing(
            [t.freeze() for t in self.turns],
            close="unless_answered",
            keep_pending="last_assistant",
            orphan_results="user_message_each",
        )
        meta = context_metadata(CursorFormat.name)
        note_repairs(meta, repaired)
        note_skipped(meta, self.skipped)
        return AgentContext(messages=tuple(repaired.messages), metadata=meta)


def _only_tags(text: str) -> bool:
    """Text made only of whole tagged sections (`<system_reminder>...</system_reminder>`), as
    Cursor adds it; text the user typed that merely starts with `<` (`<Button> renders twice`)
    or has words after the tags is not."""
    return _TAGGED.fullmatch(text) is not None


def _records(doc: Document) -> list[Any]:
    if doc.kind == "jsonl":
        return list(doc.data)
    return [doc.data] if isinstance(doc.data, dict) else []


only_tags = _only_tags
"""Whether user text is only the tagged sections Cursor adds (see `_only_tags`)."""

USER_QUERY = _QUERY
"""The tag around what the user typed in a Cursor transcript."""

__all__ = ["USER_QUERY", "CursorFormat", "only_tags"]
