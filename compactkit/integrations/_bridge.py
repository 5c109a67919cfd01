"""What the agent-framework adapters share: a record of a framework item kept on the compactkit
messages read from it (so it is written back exactly while they still say the same), and a
`compactkit.Session` fed by a framework's own history (`LiveBridge`), which compacts when the
trigger is passed and hands the framework its items back, the ones a compaction kept as the very
same objects.

A framework adapter is a `Codec`: how one of its items reads as compactkit messages and how
messages are written as its items.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, Generic, Protocol, TypedDict, TypeVar

from ..context import AgentContext, Block, ContentPart, Message, TextBlock, canonical_json
from ..context import render_block as _render_block
from ..registry import Registry
from ..serve.store import ServeStore
from ..session import PipelineArg, Session

T = TypeVar("T")

_REF = "$compactkit_ref"
_MIN_REF = 16  # shorter strings are kept as they are: a reference would not be smaller


def digest(blocks: Sequence[Block]) -> str:
    """A short hash of what `blocks` say (a record is used only while it still matches)."""
    data = canonical_json([b.model_dump(mode="json") for b in blocks])
    return hashlib.sha256(data.encode()).hexdigest()[:24]


def record(native: Any, blocks: Sequence[Block]) -> dict[str, Any]:
    """`native` (plain JSON) kept beside `blocks`: its strings that the blocks hold are references
    into them, so a record does not hold the content twice (and a compaction that removes the
    content removes it from the record's reach too)."""
    index: dict[str, int] = {}
    for n, text in enumerate(_strings(blocks)):
        if len(text) >= _MIN_REF:
            index.setdefault(text, n)
    return {"digest": digest(blocks), "native": _to_refs(native, index)}


def restored(rec: Any, blocks: Sequence[Block]) -> Any | None:
    """The native JSON of `rec` when `blocks` still say what they said when it was recorded."""
    if not isinstance(rec, dict) or rec.get("digest") != digest(blocks):
        return None
    return _from_refs(rec.get("native"), list(_strings(blocks)))


def _strings(blocks: Sequence[Block]) -> Iterator[str]:
    """Every string the blocks hold, depth first, in order."""
    stack: list[Any] = [b.model_dump(mode="json") for b in reversed(blocks)]
    while stack:
        value = stack.pop()
        if isinstance(value, str):
            yield value
        elif isinstance(value, (dict, list)):
            items = list(value.values()) if isinstance(value, dict) else value
            stack.extend(reversed(items))


def _to_refs(value: Any, index: Mapping[str, int]) -> Any:
    if isinstance(value, str):
        n = index.get(value)
        return value if n is None else {_REF: n}
    if isinstance(value, dict):
        return {k: _to_refs(v, index) for k, v in value.items()}
    if isinstance(value, list):
        return [_to_refs(v, index) for v in value]
    return value


def _from_refs(value: Any, strings: list[str]) -> Any:
    if isinstance(value, dict):
        if set(value) == {_REF}:
            return strings[value[_REF]]
        return {k: _from_refs(v, strings) for k, v in value.items()}
    if isinstance(value, list):
        return [_from_refs(v, strings) for v in value]
    return value


def shown(block: Block | ContentPart) -> str:
    """What a model reads of `block` (a marker as its text)."""
    return block.text if isinstance(block, TextBlock) else "\n".join(_render_block(block))


def shown_text(blocks: Sequence[Block | ContentPart]) -> str:
    """What a model reads of `blocks`, one per line."""
    return "\n".join(shown(b) for b in blocks)


def only_text(blocks: Sequence[Block]) -> str | None:
    """The text of `blocks` when they are one text block (what a plain string content says)."""
    return blocks[0].text if len(blocks) == 1 and isinstance(blocks[0], TextBlock) else None


def sorted_json(value: Any) -> str:
    """`value` (any JSON-able Python value) as canonical JSON text."""
    from pydantic_core import to_jsonable_python

    return canonical_json(to_jsonable_python(value))


class SessionOptions(TypedDict, total=False):
    """The options of the `compactkit.Session` an adapter feeds (see `Session`)."""

    trigger: int
    target: int | None
    tokenizer: str
    registry: Registry | None
    pins: Sequence[str]
    serve_state: ServeStore | str | Path | None
    serve_session: str | None


def live_session(pipeline: PipelineArg, options: SessionOptions) -> Session:
    """The session an adapter feeds."""
    return Session(pipeline=pipeline, **options)


def tool_names(messages: Sequence[Message]) -> dict[str, str]:
    """Call id -> tool name, for frameworks whose tool results name their tool."""
    return {c.id: c.name for m in messages for c in m.tool_calls}


class Codec(Protocol[T]):
    """How a framework's items read as compactkit messages and are written back."""

    def read(self, items: Sequence[T]) -> list[tuple[list[T], list[Message]]]:
        """The compactkit messages of `items`, by group of items (what blocks cannot say
        recorded on them)."""

    def group(self, messages: Sequence[Message], start: int) -> int:
        """How many messages from `start` on one item holds."""

    def write(self, group: Sequence[Message], names: Mapping[str, str]) -> list[T]:
        """The items for a group of messages (`names`: call id -> tool name)."""

    def context(self, messages: list[Message]) -> AgentContext:
        """The context of the messages of a whole history (a system instruction lifted out)."""

    def messages(self, ctx: AgentContext) -> list[Message]:
        """The messages of `ctx` as the framework holds them (a system instruction put in)."""


class OneToOne:
    """What a codec whose items each give one message shares: a message per group, the system
    instruction a leading `system` message."""

    def group(self, messages: Sequence[Message], start: int) -> int:
        return 1

    def context(self, messages: list[Message]) -> AgentContext:
        return AgentContext(messages=tuple(messages))

    def messages(self, ctx: AgentContext) -> list[Message]:
        if ctx.system_instruction is None:
            return list(ctx.messages)
        system = Message(role="system", content=(TextBlock(text=ctx.system_instruction),))
        return [system, *ctx.messages]


def write_all(codec: Codec[T], ctx: AgentContext) -> list[T]:
    """Every item for `ctx`."""
    messages = codec.messages(ctx)
    names = tool_names(messages)
    out: list[T] = []
    i = 0
    while i < len(messages):
        n = codec.group(messages, i)
        out.extend(codec.write(messages[i : i + n], names))
        i += n
    return out


def read_all(codec: Codec[T], items: Sequence[T]) -> AgentContext:
    """The context of a whole history of items."""
    return codec.context([m for _, messages in codec.read(items) for m in messages])


class LiveBridge(Generic[T]):
    """A `Session` fed by a framework's history: `view(items)` appends what is new since the last
    call (the history then given either goes on from the items the framework was last handed or
    from the whole history it gave before), compacts past the trigger and returns the items to
    send. Items of messages a compaction kept are the very objects they came from, so the
    prompt prefix stays the same between compactions; a history that goes on from neither
    starts the session over from it."""

    def __init__(self, codec: Codec[T], session: Session) -> None:
        self.codec = codec
        self.session = session
        self._given: list[T] = []  # the history the framework gave last
        self._sent: list[T] = []  # the items it was handed last
        self._items: dict[int, tuple[tuple[Message, ...], list[T]]] = {}  # first message id

    def view(self, items: Sequence[T]) -> list[T]:
        new = self._new_items(items)
        if new is None:
            ctx = self.codec.context(self._read(items))
            self.session.restore(ctx.replace(pin_rules=self.session.context.pin_rules))
        elif new:
            self.session.append(*self._read(new))
        self._given = list(items)
        self.session.compact_if_needed()
        self._sent = self._write(self.session.context)
        return list(self._sent)

    def _new_items(self, items: Sequence[T]) -> Sequence[T] | None:
        if not self._given:
            return None
        for before in (self._given, self._sent):
            if len(items) >= len(before) and all(
                a is b or a == b for a, b in zip(items, before, strict=False)
            ):
                return items[len(before) :]
        return None

    def _read(self, items: Sequence[T]) -> list[Message]:
        out: list[Message] = []
        for group, messages in self.codec.read(items):
            if messages:
                self._items[id(messages[0])] = (tuple(messages), group)
            out.extend(messages)
        return out

    def _write(self, ctx: AgentContext) -> list[T]:
        messages = self.codec.messages(ctx)
        names = tool_names(messages)
        kept: dict[int, tuple[tuple[Message, ...], list[T]]] = {}
        out: list[T] = []
        i = 0
        while i < len(messages):
            known = self._items.get(id(messages[i]))
            if known is not None:
                group, items = known
                span = messages[i : i + len(group)]
                if len(span) == len(group) and all(
                    a is b for a, b in zip(span, group, strict=True)
                ):
                    kept[id(group[0])] = known
                    out.extend(items)
                    i += len(group)
                    continue
            n = self.codec.group(messages, i)
            group = tuple(messages[i : i + n])
            items = self.codec.write(group, names)
            kept[id(group[0])] = (group, items)
            out.extend(items)
            i += n
        self._items = kept
        return out
