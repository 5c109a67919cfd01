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

from pydantic import TypeAdapter, ValidationError

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
from .errors import BadInputError, RecoveryError
from .formats.base import loads

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


FIELD_PLACEHOLDER = "[]"
"""What the store holds under a field marker's etag: nothing (the result's carrier restores the
field). The one entry that is not the content address of its key; only field markers may use it."""


def is_field_marker(block: Any) -> bool:
    return getattr(block, "type", None) == "collapsed" and getattr(block, "field", None) is not None


def check_entry(etag: str, raw: object, *, placeholder: bool = False) -> list[Any]:
    """The JSON list stored under `etag`, verified: `raw` must be JSON and its content address must
    be `etag` (or, with `placeholder`, the field placeholder). Raises `RecoveryError` otherwise."""
    if not isinstance(raw, str):
        raise RecoveryError(etag, f"is a {type(raw).__name__}, not a JSON string")
    try:
        data = json.loads(raw)
    except ValueError as exc:
        raise RecoveryError(etag, f"is not JSON ({str(exc).splitlines()[0]})") from None
    except RecursionError:
        raise RecoveryError(etag, "nests too deeply to read") from None
    if not isinstance(data, list):
        raise RecoveryError(etag, "is not a JSON list of blocks or messages")
    if etag_of(raw) != etag and not (placeholder and raw == FIELD_PLACEHOLDER):
        raise RecoveryError(
            etag,
            "does not match its etag (changed after compaction, or from another context); "
            "nothing restored",
        )
    return data


def verify(store: Mapping[str, str], ctx: AgentContext | None = None) -> None:
    """Check every entry of `store` against its etag (see `check_entry`); raise `RecoveryError`
    naming the first bad one. With `ctx`, an entry its non-field markers name may not be the
    field placeholder."""
    strict = {m.etag for _, m in markers(ctx) if not is_field_marker(m)} if ctx else set()
    for etag, raw in store.items():
        check_entry(etag, raw, placeholder=etag not in strict)


def _shaped(adapter: TypeAdapter[Any], data: list[Any], etag: str, what: str) -> Any:
    try:
        return adapter.validate_python(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"])
        raise RecoveryError(
            etag, f"is not a list of {what} (at {where or 'top'}: {first['msg']})"
        ) from None


class _Expander:
    def __init__(self, store: Mapping[str, str]) -> None:
        self.store = store
        self.used: set[str] = set()
        self.missing: set[str] = set()

    def _load(self, marker: Any) -> list[Any] | None:
        etag = marker.etag
        raw = self.store.get(etag)
        if raw is None:
            self.missing.add(etag)
            return None
        value = check_entry(etag, raw, placeholder=is_field_marker(marker))
        self.used.add(etag)
        return value

    def parts(self, parts: tuple[Any, ...], depth: int) -> tuple[Any, ...]:
        out: list[Any] = []
        for part in parts:
            data = self._load(part) if is_marker(part) else None
            if data is None:
                out.append(part)
            else:
                found = _shaped(_parts, data, part.etag, "tool-result parts")
                out.extend(self.parts(tuple(found), depth + 1))
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
            data = self._load(block) if is_marker(block) else None
            if data is None:
                out.append(block)
            else:
                found = _shaped(_blocks, data, block.etag, "blocks")
                out.extend(self.blocks(tuple(found), depth + 1))
        return tuple(out)

    def messages(self, messages: Iterable[Message], depth: int = 0) -> list[Message]:
        if depth > 500:
            raise BadInputError("recovery store nests deeper than 500 levels (a cycle?)")
        out: list[Message] = []
        for msg in messages:
            marker = message_marker(msg)
            data = self._load(marker) if marker is not None else None
            if marker is not None and data is not None:
                found = _shaped(_messages, data, marker.etag, "messages")
                out.extend(self.messages(found, depth + 1))
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
    `stash` are left in place (see `unrecoverable`). Every entry used is checked against its etag
    first: one that does not match, is not JSON or is not what its marker stands for raises
    `RecoveryError` naming the etag, and nothing is restored from it.
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
        data = loads(text, path)
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
