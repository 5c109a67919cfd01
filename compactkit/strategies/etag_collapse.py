"""etag-collapse: a payload that repeats unchanged collapses to a `{path, etag, unchanged}` marker.

Tool results are visited in order. A result whose content parts are identical to a full copy
earlier in the context (same etag, `compactkit.recovery.payload_etag`) becomes one `CollapsedBlock`
naming that copy, with the file path when one can be told (`payload_path`: a path argument,
`cat FILE`, `sed -n 'a,bp' FILE`, ...). The one exception: when the same call (same tool, same
arguments) returned different content in between, the repeat is a new version (the file changed
back) and stays in full, because "unchanged" would tell the model the wrong thing.

Per-field split: a result whose text is a JSON object with at least two top-level keys, from the
same tool on the same path (or, without a path, the same call) as an earlier full JSON-object
result (the *base*), keeps only what changed. It becomes an `ElidedBlock` carrier whose `text` is
a JSON object of the fields that changed (and of unchanged fields too small to be worth a marker),
followed by one `CollapsedBlock(field=KEY)` per unchanged field.
The carrier's etag recovers the exact original parts; each field marker's etag is the content
address of that field's value (`field_etag`) and maps to an empty list in the recovery
store, so `expand` turns the whole result back into the original, byte for byte. A field only counts
as unchanged while no result of that tool and path since the base changed it.

Repairs: outputs folded on arrival that name lines of an output no longer shown in full are put
back whole (`restore_orphaned_folds`); whole-payload markers whose full copy is gone (dropped or
masked by another strategy) are expanded back in place of the newest such marker
(`restore_orphaned_collapses`); per-field results whose base is gone are expanded back and
compacted again against what is left. The walk itself
never leaves a whole-payload marker without its full copy: a full copy that an earlier marker
names stays in full (it is not split per field), and a marker whose every full copy was split
earlier in the walk is expanded back and compacted again like a full result. Without that, a repair
that gives a per-field result a new base could split the one copy a later marker names, and the
next compaction would change its own output.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from pydantic import Field, TypeAdapter

from ..context import (
    AgentContext,
    Block,
    CollapsedBlock,
    ContentPart,
    ElidedBlock,
    MaskedBlock,
    Message,
    TextBlock,
    ToolCallBlock,
    ToolResultBlock,
    canonical_json,
    etag_of,
)
from ..pins import pinned
from ..recovery import is_marker, payload_etag, prune, put, result_etag
from ..strategy import Strategy
from ..tokens import TokenCounter
from ..toolcall import payload_path
from ._common import (
    TokenizerOption,
    counter_for,
    restore_orphaned_collapses,
    restore_orphaned_folds,
)

_PARTS = TypeAdapter(list[ContentPart])
EMPTY = "[]"
"""What the recovery store holds under a field marker's etag (the carrier restores the field)."""


class EtagCollapseOptions(TokenizerOption):
    min_tokens: int = Field(
        default=32,
        ge=0,
        description="Tool results smaller than this many tokens are never collapsed. A result is "
        "also kept when its marker would not be smaller than it.",
    )
    per_field: bool = Field(
        default=True,
        description="Split JSON-object results per top-level field: when the same tool on the "
        "same path (without a path: the same call) returned a full JSON object before, unchanged "
        "fields become field markers and only the changed fields are resent.",
    )


def field_etag(key: str, canonical_value: str) -> str:
    """The etag of one top-level field of a JSON payload (`canonical_value`: its canonical JSON)."""
    return etag_of("compactkit.field\x1f" + key + "\x1f" + canonical_value)


def _is_full(parts: tuple[ContentPart, ...]) -> bool:
    return not any(is_marker(p) for p in parts)


def json_object(parts: tuple[ContentPart, ...]) -> dict[str, Any] | None:
    """The JSON object a result's one text part holds, if it is one."""
    if len(parts) != 1 or not isinstance(parts[0], TextBlock):
        return None
    text = parts[0].text.strip()
    if not (text.startswith("{") and text.endswith("}")):
        return None
    try:
        value = json.loads(text)
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


def _canonical_fields(obj: Mapping[str, Any]) -> dict[str, str]:
    return {k: canonical_json(v) for k, v in obj.items()}


def _split_markers(
    parts: tuple[ContentPart, ...],
) -> tuple[ElidedBlock, tuple[CollapsedBlock, ...]] | None:
    """(carrier, field markers) when `parts` is a per-field result this strategy wrote."""
    if len(parts) < 2 or not isinstance(parts[0], ElidedBlock):
        return None
    fields = parts[1:]
    if not all(isinstance(p, CollapsedBlock) and p.field is not None for p in fields):
        return None
    return parts[0], tuple(p for p in fields if isinstance(p, CollapsedBlock))


def _original(parts: tuple[ContentPart, ...], store: Mapping[str, str], depth: int = 0) -> Any:
    """The parts `parts` stand for, markers resolved through `store`; None when one is missing."""
    out: list[ContentPart] = []
    for part in parts:
        if not isinstance(part, (CollapsedBlock, ElidedBlock, MaskedBlock)):
            out.append(part)
            continue
        raw = store.get(part.etag)
        if raw is None or depth > 32:
            return None
        inner = _original(tuple(_PARTS.validate_python(json.loads(raw))), store, depth + 1)
        if inner is None:
            return None
        out.extend(inner)
    return tuple(out)


@dataclass
class _Base:
    """The latest full JSON-object result of a source."""

    tool: str
    message: int
    call_id: str
    fields: dict[str, str]  # key -> canonical JSON of the value
    dirty: set[str] = field(default_factory=set)  # keys some later version changed

    def observe(self, fields: Mapping[str, str]) -> None:
        """A later version of the source (not shown in full) had `fields`."""
        for key in self.fields.keys() | fields.keys():
            if self.fields.get(key) != fields.get(key):
                self.dirty.add(key)


@dataclass(frozen=True)
class _Keys:
    """What a tool result is about."""

    call: str  # the call: tool name and arguments (versions are tracked per call)
    base: str  # tool and path, else the call (per-field bases are tracked per this key)
    tool: str
    path: str | None


class _Pass:
    """One walk over the tool results, in order."""

    def __init__(self, options: EtagCollapseOptions, ctx: AgentContext) -> None:
        self.options = options
        self.ctx = ctx
        self.counter: TokenCounter = counter_for(options.tokenizer)
        self.calls = {
            b.id: b for m in ctx.messages for b in m.content if isinstance(b, ToolCallBlock)
        }
        self.full_at: dict[str, int] = {}  # etag -> message of its first full copy
        self.full_call: dict[str, str] = {}  # etag -> tool call id of its first full copy
        self.version: dict[str, str] = {}  # call key -> etag of the content it returned last
        self.bases: dict[str, _Base] = {}  # base key -> latest full JSON-object result
        # etag -> position of the last full copy in the input (whole markers name a full copy)
        self.last_full: dict[str, tuple[int, int]] = {}
        for i, msg in enumerate(ctx.messages):
            for j, block in enumerate(msg.content):
                if isinstance(block, ToolResultBlock) and _is_full(block.content):
                    self.last_full[result_etag(block)] = (i, j)
        # etags that whole markers visited so far name, with no full copy kept yet: the next full
        # copy is the one they name, so it stays in full
        self.waiting: set[str] = set()
        self.recovery: dict[str, str] | None = None
        self.pins = pinned(ctx)

    # ------------------------------------------------------------------ walking

    def run(self) -> AgentContext:
        replaced: dict[int, dict[int, Block]] = {}
        for i, msg in enumerate(self.ctx.messages):
            for j, block in enumerate(msg.content):
                if isinstance(block, ToolResultBlock):
                    new = self.visit(i, j, block)
                    if new is not None:
                        replaced.setdefault(i, {})[j] = new
        if not replaced:
            return self.ctx
        messages = _apply(self.ctx.messages, replaced)
        return prune(self.ctx.replace(messages=messages, recovery=self.store))

    @property
    def store(self) -> dict[str, str]:
        if self.recovery is None:
            self.recovery = dict(self.ctx.recovery)
        return self.recovery

    def keys(self, result: ToolResultBlock) -> _Keys:
        call = self.calls.get(result.tool_call_id)
        if call is None:
            key = "result\x1f" + result.tool_call_id
            return _Keys(key, key, "", None)
        path = payload_path(call)
        key = "call\x1f" + call.name + "\x1f" + canonical_json(call.input)
        base = "path\x1f" + call.name + "\x1f" + path if path else key
        return _Keys(key, base, call.name, path)

    def visit(self, i: int, j: int, result: ToolResultBlock) -> ToolResultBlock | None:
        """The replacement of `result` (block `j` of message `i`), or None to keep it."""
        keys = self.keys(result)
        parts = result.content
        if _is_full(parts):
            return self.visit_full(i, result, parts, keys)
        if len(parts) == 1 and isinstance(parts[0], CollapsedBlock) and parts[0].field is None:
            etag = parts[0].etag
            original = self.original(parts)
            if etag in self.full_at or original is None:
                self.later_version(keys, etag, original)
                return None
            if self.last_full.get(etag, (-1, -1)) > (i, j):  # names a later full copy
                self.waiting.add(etag)
                self.later_version(keys, etag, original)
                return None
            # every full copy it named was split earlier in this walk: show it again, compact afresh
            return self.visit_full(i, result, original, keys) or _with_parts(result, original)
        split = _split_markers(parts)
        if split is not None:
            carrier, markers = split
            original = self.original(parts)
            if original is not None and self.split_still_valid(keys, markers):
                self.later_version(keys, carrier.etag, original)
                return None
            if original is not None:  # its base is gone: show it again, then compact afresh
                return self.visit_full(i, result, original, keys) or _with_parts(result, original)
        # another strategy's marker (masked, elided): a version the model cannot read in full
        original = self.original(parts)
        self.version[keys.call] = payload_etag(original if original is not None else parts)
        self.bases.pop(keys.base, None)
        return None

    def visit_full(
        self, i: int, result: ToolResultBlock, parts: tuple[ContentPart, ...], keys: _Keys
    ) -> ToolResultBlock | None:
        etag = result_etag(result) if parts is result.content else payload_etag(parts)
        tokens = sum(self.counter.block(p) for p in parts)
        # a result holding pinned text (the user's words, a pinned file) is always shown in full
        if tokens >= self.options.min_tokens and not (self.pins and self.pins.result(result)):
            collapsed = self.collapse_whole(parts, etag, tokens, keys)
            # a copy that earlier whole markers name stays in full, or they would name nothing
            if collapsed is None and self.options.per_field and etag not in self.waiting:
                collapsed = self.collapse_fields(parts, etag, tokens, keys)
            if collapsed is not None:
                self.later_version(keys, etag, parts)
                return _with_parts(result, collapsed)
        # stays in full: the first copy of its etag, the newest version of its call
        self.full_at.setdefault(etag, i)
        self.full_call.setdefault(etag, result.tool_call_id)
        self.waiting.discard(etag)
        self.version[keys.call] = etag
        obj = json_object(parts)
        if obj is None:
            self.bases.pop(keys.base, None)
        else:
            self.bases[keys.base] = _Base(keys.tool, i, result.tool_call_id, _canonical_fields(obj))
        return None

    def later_version(
        self, keys: _Keys, etag: str, original: tuple[ContentPart, ...] | None
    ) -> None:
        """Record content of a call that a marker stands for (it is not shown in full)."""
        self.version[keys.call] = etag
        base = self.bases.get(keys.base)
        if base is None:
            return
        obj = json_object(original) if original is not None else None
        if obj is None:
            self.bases.pop(keys.base, None)
        else:
            base.observe(_canonical_fields(obj))

    def original(self, parts: tuple[ContentPart, ...]) -> tuple[ContentPart, ...] | None:
        found: tuple[ContentPart, ...] | None = _original(parts, self.store)
        return found

    # ------------------------------------------------------------------ collapsing

    def collapse_whole(
        self, parts: tuple[ContentPart, ...], etag: str, tokens: int, keys: _Keys
    ) -> tuple[ContentPart, ...] | None:
        first = self.full_at.get(etag)
        if first is None:
            return None
        latest = self.version.get(keys.call)
        if latest is not None and latest != etag:
            return None  # the call returned something else in between: a new version
        # named by call id, which stays true when other strategies drop or merge messages
        label = f"same as the result of call {self.full_call[etag]}"
        marker = CollapsedBlock(etag=etag, path=keys.path or None, unchanged=True, label=label)
        if self.counter.block(marker) >= tokens:
            return None
        put(self.store, parts)
        return (marker,)

    def collapse_fields(
        self, parts: tuple[ContentPart, ...], etag: str, tokens: int, keys: _Keys
    ) -> tuple[ContentPart, ...] | None:
        base = self.bases.get(keys.base)
        if base is None or base.tool != keys.tool:
            return None
        obj = json_object(parts)
        if obj is None or len(obj) < 2:
            return None
        label = f"same as the result of call {base.call_id}"
        markers: list[CollapsedBlock] = []
        kept: dict[str, Any] = {}
        for key, value in obj.items():
            canonical = canonical_json(value)
            if base.fields.get(key) == canonical and key not in base.dirty:
                marker = CollapsedBlock(
                    etag=field_etag(key, canonical),
                    path=keys.path or None,
                    field=key,
                    unchanged=True,
                    label=label,
                )
                shown = json.dumps({key: value}, ensure_ascii=False)[1:-1]
                if self.counter.block(marker) < self.counter.text(shown):
                    markers.append(marker)
                    continue
            kept[key] = value
        if not markers:
            return None
        carrier = ElidedBlock(
            etag=etag,
            ref=f"the result of call {base.call_id}",
            text=json.dumps(kept, ensure_ascii=False),
            label=f"fields changed since the result of call {base.call_id}",
        )
        split: tuple[ContentPart, ...] = (carrier, *markers)
        if sum(self.counter.block(p) for p in split) >= tokens:
            return None
        store = self.store
        put(store, parts)
        for marker in markers:
            store.setdefault(marker.etag, EMPTY)
        return split

    def split_still_valid(self, keys: _Keys, markers: tuple[CollapsedBlock, ...]) -> bool:
        """True while every field marker of a per-field result names a value of its base that no
        later version changed."""
        base = self.bases.get(keys.base)
        if base is None or base.tool != keys.tool:
            return False
        for marker in markers:
            key = marker.field
            if key is None or key in base.dirty or key not in base.fields:
                return False
            if field_etag(key, base.fields[key]) != marker.etag:
                return False
        return True


class EtagCollapse(Strategy):
    """Collapse tool results that repeat a full copy still in the context to `{path, etag,
    unchanged}` markers (the first copy stays); split JSON objects per field so a change in one
    field resends only that field; expand markers back when the copy they refer to is gone."""

    name = "etag-collapse"
    description = "Collapse payloads that repeat unchanged to {path, etag, unchanged} markers."
    Options = EtagCollapseOptions
    options: EtagCollapseOptions

    def compact(self, ctx: AgentContext) -> AgentContext:
        repaired = restore_orphaned_collapses(restore_orphaned_folds(ctx))
        if repaired is not ctx:
            repaired = _refreshed(ctx, repaired)
        return _Pass(self.options, repaired).run()


# --------------------------------------------------------------------------- building values
# `model_copy` would carry over cached renderings and properties of the original (`text`,
# `tool_results`, `render_block`'s cache), so changed values are built afresh.


def _with_parts(result: ToolResultBlock, parts: tuple[ContentPart, ...]) -> ToolResultBlock:
    return ToolResultBlock(
        tool_call_id=result.tool_call_id, content=parts, is_error=result.is_error
    )


def _with_content(msg: Message, content: tuple[Block, ...]) -> Message:
    return Message(role=msg.role, content=content, name=msg.name, metadata=msg.metadata)


def _apply(
    messages: tuple[Message, ...], replaced: Mapping[int, Mapping[int, Block]]
) -> tuple[Message, ...]:
    out = list(messages)
    for i, blocks in replaced.items():
        msg = messages[i]
        out[i] = _with_content(msg, tuple(blocks.get(j, b) for j, b in enumerate(msg.content)))
    return tuple(out)


def _refreshed(before: AgentContext, after: AgentContext) -> AgentContext:
    """`after` with the messages `restore_orphaned_collapses` rebuilt (by `model_copy`) built
    afresh, so no stale cached rendering of the marker they held survives."""
    old = {id(m) for m in before.messages}
    messages = tuple(
        m
        if id(m) in old
        else _with_content(
            m,
            tuple(
                _with_parts(b, b.content) if isinstance(b, ToolResultBlock) else b
                for b in m.content
            ),
        )
        for m in after.messages
    )
    return after.replace(messages=messages)
