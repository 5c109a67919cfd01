"""Helpers shared by the format adapters: JSON values as text and blocks, and the context
metadata every loader writes the same way (`context_metadata`, `note_repairs`, `note_skipped`)."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pydantic import JsonValue

from ..context import AgentContext, Block, ContentPart, ImageBlock, TextBlock, ThinkingBlock
from ._pairing import RepairCounts, Turn, repair_pairing

_DATA_URL = re.compile(r"^data:(?P<type>[^;,]*)(?:;[^,]*)?;base64,(?P<data>.*)$", re.DOTALL)


def as_text(value: Any) -> str:
    """Render an arbitrary JSON value as text (strings pass through unchanged)."""
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False)


def as_dict(value: Any) -> dict[str, Any]:
    """`value` when it is a JSON object, else an empty dict."""
    return value if isinstance(value, dict) else {}


def as_list(value: Any) -> list[Any]:
    """`value` when it is a JSON array, else an empty list."""
    return value if isinstance(value, list) else []


def parse_arguments(raw: Any) -> Any:
    """Tool-call arguments as a JSON value: JSON strings are parsed, other text kept as a string."""
    if isinstance(raw, str):
        try:
            return json.loads(raw) if raw.strip() else {}
        except json.JSONDecodeError:
            return raw
    return {} if raw is None else raw


def parts_from_content(content: Any) -> tuple[ContentPart, ...]:
    """Tool-result or message content (a string, or a list of text/image parts) as content parts."""
    if content is None:
        return ()
    if isinstance(content, str):
        return (TextBlock(text=content),) if content else ()
    if not isinstance(content, list):
        content = [content]
    parts: list[ContentPart] = []
    for item in content:
        if isinstance(item, str):
            parts.append(TextBlock(text=item))
        elif isinstance(item, dict):
            kind = item.get("type")
            if kind in ("text", "input_text", "output_text"):
                parts.append(TextBlock(text=as_text(item.get("text"))))
            elif kind in ("image", "image_url", "input_image"):
                parts.append(image_from(item))
            else:
                parts.append(TextBlock(text=as_text(item)))
        else:
            parts.append(TextBlock(text=as_text(item)))
    return tuple(parts)


def nonempty_parts(content: Any) -> list[Block]:
    """`parts_from_content` without its empty text parts."""
    return [p for p in parts_from_content(content) if not (isinstance(p, TextBlock) and not p.text)]


def content_text(content: Any) -> str:
    """A message's content as plain text: a string as it is; a list through `parts_from_content`,
    its text parts joined with newlines (images left out, parts of other types as their JSON);
    anything else via `as_text`."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(p.text for p in parts_from_content(content) if isinstance(p, TextBlock))
    return as_text(content)


def text_of(content: Any) -> str:
    """Chat-API message content as plain text: None gives "", a string stays as it is, a list
    joins with newlines the `text` of its `text` / `input_text` / untyped parts and its non-dict
    items (other parts are left out); anything else via `as_text`."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(
            as_text(p.get("text")) if isinstance(p, dict) else as_text(p)
            for p in content
            if not isinstance(p, dict) or p.get("type") in ("text", "input_text", None)
        )
    return as_text(content)


def thinking_from(message: dict[str, Any]) -> list[ThinkingBlock]:
    """Reasoning recorded on an (OpenAI/OpenRouter/litellm shaped) assistant message:
    `thinking_blocks`, else `reasoning_details`, else `reasoning_content` / `reasoning`."""
    blocks = message.get("thinking_blocks")
    if isinstance(blocks, list) and blocks:
        out: list[ThinkingBlock] = []
        for item in blocks:
            if not isinstance(item, dict):
                continue
            if item.get("type") == "redacted_thinking":
                out.append(
                    ThinkingBlock(thinking="", signature=as_text(item.get("data")), redacted=True)
                )
            else:
                out.append(
                    ThinkingBlock(
                        thinking=as_text(item.get("thinking")),
                        signature=item.get("signature") or None,
                    )
                )
        return out
    details = message.get("reasoning_details")
    if isinstance(details, list) and details:
        texts = [
            as_text(d.get("text") or d.get("summary"))
            for d in details
            if isinstance(d, dict) and d.get("type") in ("reasoning.text", "reasoning.summary")
        ]
        sealed = [
            as_text(d.get("data"))
            for d in details
            if isinstance(d, dict) and d.get("type") == "reasoning.encrypted"
        ]
        text = "".join(texts) or as_text(message.get("reasoning"))
        signature = "".join(sealed) or None
        if text:
            return [ThinkingBlock(thinking=text, signature=signature)]
        if signature:
            return [ThinkingBlock(thinking="", signature=signature, redacted=True)]
        return []
    for key in ("reasoning_content", "reasoning"):
        value = message.get(key)
        if isinstance(value, str) and value:
            return [ThinkingBlock(thinking=value)]
    return []


def image_from(item: dict[str, Any]) -> ImageBlock:
    """An image part from the OpenAI (`image_url`) or Anthropic (`source`) shapes."""
    if item.get("type") == "image_url":
        url = item.get("image_url")
        url = url.get("url") if isinstance(url, dict) else url
        return ImageBlock(url=url)
    if item.get("type") == "input_image":
        return ImageBlock(url=item.get("image_url"))
    source = item.get("source") or {}
    if source.get("type") == "base64":
        return ImageBlock(media_type=source.get("media_type"), data=source.get("data"))
    return ImageBlock(media_type=source.get("media_type"), url=source.get("url"))


def image_from_url(url: Any) -> ImageBlock:
    """An image from a URL (or `{"url": ...}`); a base64 `data:` URL becomes inline data with its
    media type."""
    if isinstance(url, dict):
        url = url.get("url")
    text = url if isinstance(url, str) else ""
    match = _DATA_URL.match(text)
    if match:
        return ImageBlock(media_type=match.group("type") or None, data=match.group("data"))
    return ImageBlock(url=text or None)


def str_or_none(value: Any) -> str | None:
    """`value` when it is a string (empty or not), else None."""
    return value if isinstance(value, str) else None


def nonempty_str(value: Any) -> str | None:
    """`value` when it is a non-empty string, else None."""
    return value if isinstance(value, str) and value else None


# --------------------------------------------------------------------------- context metadata

SOURCE_FORMAT_KEY = "source_format"
"""Context metadata: the name of the format that loaded the context (every loader sets it)."""

REPAIR_KEYS = ("synthesized_results", "synthesized_calls", "renamed_calls", "orphan_results")
"""Context metadata: what keeping calls and results paired did (see `RepairCounts`)."""

SKIPPED_KEY = "skipped_records"
"""Context metadata: how many records of each type the loader read and left out, so that a silent
drop shows in `compactkit inspect` (`{"event_msg/token_count": 41, ...}`)."""


def context_metadata(fmt: str, /, **fields: JsonValue) -> dict[str, JsonValue]:
    """The metadata a loader starts a context with: `source_format` first, then `fields` in the
    order given, the None ones left out.

    The names every format uses for the same fact (see `Format`): `session_id`, `cwd`, `model`,
    `title`, `instance_id`, `conversation` (the index of a conversation in a file holding
    several); a format adds its own after them. Repair counts (`note_repairs`) and skipped records
    (`note_skipped`) follow, in that order.
    """
    meta: dict[str, JsonValue] = {SOURCE_FORMAT_KEY: fmt}
    meta.update((key, value) for key, value in fields.items() if value is not None)
    return meta


def note_repairs(meta: dict[str, JsonValue], repaired: RepairCounts) -> None:
    """Write what pairing repair did into context metadata: each non-zero count of
    `REPAIR_KEYS`, in that order."""
    for key in REPAIR_KEYS:
        count = getattr(repaired, key)
        if count:
            meta[key] = count


def note_skipped(meta: dict[str, Any], skipped: Mapping[str, int]) -> None:
    """Write the skipped-record counts into context metadata (sorted, zero counts left out)."""
    counts = {kind: n for kind, n in sorted(skipped.items()) if n}
    if counts:
        meta[SKIPPED_KEY] = counts


def turns_context(
    fmt: str, turns: list[Turn], skipped: Mapping[str, int], /, **fields: JsonValue
) -> AgentContext:
    """The context of an agent session's `turns`: pairing repaired as the agents' own session
    readers need it (a call with no result is answered by a synthesized error unless it is a
    call of the last assistant message, which stays pending; a result whose call is not open
    becomes a user message of its own), with `context_metadata(fmt, **fields)`, the repair
    counts and the `skipped` records."""
    repaired = repair_pairing(
        [t.freeze() for t in turns],
        close="unless_answered",
        keep_pending="last_assistant",
        orphan_results="user_message_each",
    )
    meta = context_metadata(fmt, **fields)
    note_repairs(meta, repaired)
    note_skipped(meta, skipped)
    return AgentContext(messages=tuple(repaired.messages), metadata=meta)


def number_conversations(contexts: list[Any]) -> list[Any]:
    """`contexts` of one file, each with its index as `metadata["conversation"]` when there are
    several (a file of one conversation has no such key)."""
    if len(contexts) < 2:
        return contexts
    return [c.replace(metadata={**c.metadata, "conversation": n}) for n, c in enumerate(contexts)]


# --------------------------------------------------------------------------- SQLite session stores

SQLITE_MAGIC = b"SQLite format 3\x00"


def is_sqlite(path: Path) -> bool:
    """True when `path` is a file that begins as an SQLite database does."""
    if not path.is_file():
        return False
    with path.open("rb") as handle:
        return handle.read(len(SQLITE_MAGIC)) == SQLITE_MAGIC


def sqlite_read_only(path: Path) -> Any:
    """A connection to the database at `path` that cannot write to it (a session store is read,
    never changed), rows as `sqlite3.Row`."""
    import sqlite3

    db = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True)
    db.row_factory = sqlite3.Row
    return db


def sqlite_tables(db: Any) -> set[str]:
    """The names of the tables of an open database."""
    return {r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type='table'")}


def session_uuid(ctx: Any) -> str:
    """The id a session written back into its agent takes: the context's `session_id` when it is
    a UUID (the agent finds a session by it), else a UUID derived from the content, so that the
    same context always gives the same id."""
    import uuid

    value = ctx.metadata.get("session_id")
    if isinstance(value, str):
        try:
            return str(uuid.UUID(value))
        except ValueError:
            pass
    return str(uuid.uuid5(uuid.NAMESPACE_URL, "compactkit:" + ctx.to_json()))
