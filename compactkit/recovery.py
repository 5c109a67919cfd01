"""Keeping compaction recoverable: a content-addressed store of what markers replaced, and `expand`.

A marker's `etag` is the key of a JSON array in `AgentContext.recovery` (or a stash file): the blocks it
replaced (block markers) or the messages it replaced (`summary` and `omitted` markers, which stand alone
in their own message). `expand` puts everything back.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping, MutableMapping
from typing import Any

from pydantic import TypeAdapter

from .context import (
    MARKER_TYPES,
    AgentContext,
    Block,
    ContentPart,
    Message,
    OmittedBlock,
    SummaryBlock,
    ToolResultBlock,
    canonical_json,
    etag_of,
)
from .errors import BadInputError

_blocks = TypeAdapter(list[Block])
_parts = TypeAdapter(list[ContentPart])
_messages = TypeAdapter(list[Message])


def put(store: MutableMapping[str, str], items: Iterable[Any]) -> str:
    """Store blocks or messages under their content address; return the etag."""
    payload = canonical_json([item.model_dump(mode="json", exclude_none=True) for item in items])
    key = etag_of(payload)
    store.setdefault(key, payload)
    return key


def payload_etag(items: Iterable[Any]) -> str:
    """The etag `put` would give these items, without storing them."""
    return etag_of(
        canonical_json([item.model_dump(mode="json", exclude_none=True) for item in items])
    )


def is_marker(block: Any) -> bool:
    return getattr(block, "type", None) in MARKER_TYPES


def message_marker(msg: Message) -> SummaryBlock | OmittedBlock | None:
    """The marker a message stands for, when the message replaced whole messages."""
    if len(msg.content) == 1 and isinstance(msg.content[0], (SummaryBlock, OmittedBlock)):
        block = msg.content[0]
        if msg.metadata.get("compactkit_marker"):
            return block
    return None


def markers(ctx: AgentContext) -> list[tuple[int, Any]]:
    """(message index, marker block) for every marker, tool-result parts included."""
    out: list[tuple[int, Any]] = []
    for i, msg in enumerate(ctx.messages):
        for block in msg.content:
            if is_marker(block):
                out.append((i, block))
            elif isinstance(block, ToolResultBlock):
                out.extend((i, part) for part in block.content if is_marker(part))
    return out


class _Expander:
    def __init__(self, store: Mapping[str, str]) -> None:
        self.store = store
        self.used: set[str] = set()
        self.missing: set[str] = set()

    def _load(self, etag: str) -> list[Any] | None:
        raw = self.store.get(etag)
        if raw is None:
            self.missing.add(etag)
            return None
        self.used.add(etag)
        value: list[Any] = json.loads(raw)
        return value

    def parts(self, parts: tuple[Any, ...], depth: int) -> tuple[Any, ...]:
        out: list[Any] = []
        for part in parts:
            data = self._load(part.etag) if is_marker(part) else None
            if data is None:
                out.append(part)
            else:
                out.extend(self.parts(tuple(_parts.validate_python(data)), depth + 1))
        return tuple(out)

    def blocks(self, blocks: tuple[Any, ...], depth: int) -> tuple[Any, ...]:
        out: list[Any] = []
        for block in blocks:
            if isinstance(block, ToolResultBlock):
                parts = self.parts(block.content, depth)
                out.append(
                    block if parts == block.content else block.model_copy(update={"content": parts})
                )
                continue
            data = self._load(block.etag) if is_marker(block) else None
            if data is None:
                out.append(block)
            else:
                out.extend(self.blocks(tuple(_blocks.validate_python(data)), depth + 1))
        return tuple(out)

    def messages(self, messages: Iterable[Message], depth: int = 0) -> list[Message]:
        if depth > 500:
            raise BadInputError("recovery store nests deeper than 500 levels (a cycle?)")
        out: list[Message] = []
        for msg in messages:
            marker = message_marker(msg)
            data = self._load(marker.etag) if marker is not None else None
            if data is not None:
                out.extend(self.messages(_messages.validate_python(data), depth + 1))
                continue
            content = self.blocks(msg.content, depth)
            out.append(
                msg if content == msg.content else msg.model_copy(update={"content": content})
            )
        return out


def flatten(messages: Iterable[Message], store: Mapping[str, str]) -> list[Message]:
    """`messages` with every message-level marker (summary, omitted) replaced by the messages it
    stands for, so that a new marker over them stores one flat window instead of nesting one level
    deeper at every compaction."""
    out: list[Message] = []
    for msg in messages:
        marker = message_marker(msg)
        raw = store.get(marker.etag) if marker is not None else None
        if raw is None:
            out.append(msg)
        else:
            out.extend(flatten(_messages.validate_python(json.loads(raw)), store))
    return out


def expand(ctx: AgentContext, stash: Mapping[str, str] | None = None) -> AgentContext:
    """Undo compaction: every marker replaced by what it stood for (recursively).

    Entries used are removed from `recovery`; markers whose etag is in neither `recovery` nor
    `stash` are left in place (see `unrecoverable`).
    """
    store = {**(stash or {}), **ctx.recovery}
    expander = _Expander(store)
    messages = expander.messages(ctx.messages)
    recovery = {k: v for k, v in ctx.recovery.items() if k not in expander.used}
    return ctx.replace(messages=tuple(messages), recovery=recovery)


def unrecoverable(ctx: AgentContext, stash: Mapping[str, str] | None = None) -> list[str]:
    """Etags of markers that `expand` could not restore."""
    store = {**(stash or {}), **ctx.recovery}
    return sorted({m.etag for _, m in markers(ctx) if m.etag not in store})


_ETAG_IN_JSON = re.compile(r'"etag":"([0-9a-f]{16})"')


def prune(ctx: AgentContext) -> AgentContext:
    """Drop recovery entries no marker refers to (directly, or through another stored payload)."""
    if not ctx.recovery:
        return ctx
    live: set[str] = set()
    todo = [m.etag for _, m in markers(ctx)]
    while todo:
        etag = todo.pop()
        if etag in live or etag not in ctx.recovery:
            continue
        live.add(etag)
        todo.extend(_ETAG_IN_JSON.findall(ctx.recovery[etag]))
    if len(live) == len(ctx.recovery):
        return ctx
    return ctx.replace(recovery={k: v for k, v in ctx.recovery.items() if k in live})


def split_stash(ctx: AgentContext) -> tuple[AgentContext, dict[str, str]]:
    """Move the recovery store out of the context (for `--stash FILE`)."""
    return ctx.replace(recovery={}), dict(ctx.recovery)


STASH_TAG = "compactkit.stash/1"


def stash_json(entries: Mapping[str, str]) -> str:
    return (
        json.dumps(
            {"format": STASH_TAG, "entries": dict(sorted(entries.items()))},
            ensure_ascii=False,
            indent=1,
        )
        + "\n"
    )


def read_stash(text: str, path: str) -> dict[str, str]:
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise BadInputError(f"stash is not JSON: {exc.msg}", path=path, line=exc.lineno) from None
    if not isinstance(data, dict) or data.get("format") != STASH_TAG:
        raise BadInputError(
            "not a compactkit stash file", path=path, hint=f"expected format {STASH_TAG!r}"
        )
    entries = data.get("entries")
    if not isinstance(entries, dict) or not all(isinstance(v, str) for v in entries.values()):
        raise BadInputError("stash entries must map etags to strings", path=path)
    return dict(entries)
