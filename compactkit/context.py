"""The context value: an immutable, JSON-serializable picture of an agent conversation.

Every provider's quirks end at the format adapters; strategies only ever see these types.
"""

from __future__ import annotations

import hashlib
import json
import math
import sys
from collections.abc import Iterator, Mapping
from functools import cached_property
from typing import TYPE_CHECKING, Annotated, Any, ClassVar, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    JsonValue,
    SerializerFunctionWrapHandler,
    model_serializer,
)

NATIVE_FORMAT_TAG = "compactkit.context/1"

Role = Literal["system", "user", "assistant", "tool"]


_FIELDS_SETS: dict[frozenset[str], set[str]] = {}
"""One set of field names per distinct combination: see `_Value.model_post_init`."""


class _Value(BaseModel):
    """Base of every value type: frozen, strict about unknown keys."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    def model_post_init(self, context: Any, /) -> None:
        """Every value shares one set of the names of the fields it was given with every other
        value given the same names, instead of a set of its own (216 bytes each, as much as the
        value's own dictionary: a fifth of a loaded session's objects). Values are frozen, so
        pydantic never adds to it; a copy with changes gets a set of its own."""
        names = self.__pydantic_fields_set__
        shared = _FIELDS_SETS.get(key := frozenset(names))
        if shared is None:
            shared = _FIELDS_SETS.setdefault(key, names)
        object.__setattr__(self, "__pydantic_fields_set__", shared)

    def model_copy(self, *, update: Mapping[str, Any] | None = None, deep: bool = False) -> Any:
        """A copy with `update` applied; per-instance caches (rendered text, token counts) are
        dropped so they can never describe the old content."""
        copied = super().model_copy(update=update, deep=deep)
        fields = type(self).model_fields
        for key in [k for k in copied.__dict__ if k not in fields and k != _UTF8]:
            del copied.__dict__[key]
        return copied


_CANONICAL = json.JSONEncoder(sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def canonical_json(value: Any) -> str:
    """JSON with sorted keys and no whitespace: the form hashed for etags and cache keys (what
    `json.dumps` gives with those options, by one encoder made once instead of one a call)."""
    return _CANONICAL.encode(value)


ETAG_CHARS = 16
"""An etag's length: the first hex digits of a sha256."""


def etag_of(text: str) -> str:
    """Content address of a payload: the first `ETAG_CHARS` hex digits of its sha256."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:ETAG_CHARS]


# --------------------------------------------------------------------------- content blocks


_UTF8 = "_utf8"
"""Where a text block keeps its text as UTF-8 (see `TextBlock`)."""
_LEAN_ABOVE = 1024
"""Characters from which a text may be kept as UTF-8 (below, decoding it on every read costs
more than it saves)."""


def _lean_form(text: str) -> bytes | None:
    """`text` as UTF-8 when that is at most three quarters of what Python holds it in, else None.

    Python keeps a string at one, two or four bytes a character, by its widest character: one
    emoji or box-drawing character makes a whole tool output two or four bytes a character, while
    its UTF-8 (the session file's own encoding) is one for all the rest. Which form a text gets
    depends on the text alone, so equal texts are always held alike.
    """
    if len(text) < _LEAN_ABOVE or text.isascii():
        return None
    held = sys.getsizeof(text)
    if held < 2 * len(text):  # Latin-1: one byte a character already
        return None
    try:
        data = text.encode()
    except UnicodeEncodeError:  # a lone surrogate has no UTF-8 form
        return None
    return data if 4 * len(data) <= 3 * held else None


def text_utf8(block: object) -> bytes | None:
    """The UTF-8 a text block keeps its text in, when it does (else None): what a reader that
    wants bytes (a tokenizer, a hash) takes instead of decoding `block.text`."""
    data = getattr(block, "__dict__", {}).get(_UTF8)
    return data if isinstance(data, bytes) else None


class _Lean(_Value):
    """A value that may keep one field (`_lean_field`) in a leaner form in its instance dict, under
    `_lean_key` instead of the field's name, made by `_lean` when it is created and turned back by
    `_unlean` on every read of the field; serialization sees the field as given."""

    _lean_field: ClassVar[str]
    _lean_key: ClassVar[str]

    @staticmethod
    def _lean(value: Any) -> Any:
        """The leaner form of the field's value, or None to keep it as given."""
        raise NotImplementedError

    @staticmethod
    def _unlean(held: Any) -> Any:
        raise NotImplementedError

    def model_post_init(self, context: Any, /) -> None:
        super().model_post_init(context)
        held = self.__dict__
        name = self._lean_field
        if name in held and (lean := self._lean(held[name])) is not None:
            del held[name]
            held[self._lean_key] = lean

    if not TYPE_CHECKING:

        def __getattr__(self, name: str) -> Any:
            if name == self._lean_field:
                lean = self.__dict__.get(self._lean_key)
                if lean is not None:
                    return self._unlean(lean)
            return super().__getattr__(name)

    @model_serializer(mode="wrap")
    def _serialize(self, handler: SerializerFunctionWrapHandler):  # type: ignore[no-untyped-def]  # no return type: the serialization schema stays the value's own
        lean = self.__dict__.get(self._lean_key)
        if lean is None:
            return handler(self)
        # serialized as the same value holding the field as given, so every option of the
        # serialization (include, exclude, exclude_unset, ...) applies as to any other value
        fields = {k: v for k, v in self.__dict__.items() if k in type(self).model_fields}
        fields[self._lean_field] = self._unlean(lean)
        twin = object.__new__(type(self))
        object.__setattr__(twin, "__dict__", fields)
        object.__setattr__(twin, "__pydantic_fields_set__", self.__pydantic_fields_set__)
        object.__setattr__(twin, "__pydantic_extra__", None)
        object.__setattr__(twin, "__pydantic_private__", None)
        return handler(twin)

    def __repr_args__(self) -> Any:
        yield from super().__repr_args__()
        if self._lean_key in self.__dict__:
            yield self._lean_field, getattr(self, self._lean_field)


class TextBlock(_Lean):
    """Plain text."""

    # A long text that Python would hold at two or four bytes a character (it has a character
    # above U+00FF) is kept as UTF-8 when that is smaller (`_lean_form`), and decoded each time
    # `text` is read: a session's tool outputs take about half the memory. Nothing else differs:
    # `text`, equality, hashing, copies, pickling and serialization give the same str.

    type: Literal["text"] = "text"
    text: str

    _lean_field: ClassVar[str] = "text"
    _lean_key: ClassVar[str] = _UTF8

    @staticmethod
    def _lean(value: Any) -> bytes | None:
        return _lean_form(value) if isinstance(value, str) else None

    @staticmethod
    def _unlean(held: Any) -> str:
        return held.decode()  # type: ignore[no-any-return]  # the UTF-8 `_lean` made

    def _held(self) -> object:
        held = self.__dict__
        return held["text"] if "text" in held else held.get(_UTF8)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, TextBlock):
            return super().__eq__(other)
        if type(self) is not type(other):
            return False
        mine, theirs = self._held(), other._held()
        if type(mine) is type(theirs):
            return mine == theirs
        return self.text == other.text

    def __hash__(self) -> int:
        return hash((self.type, self._held()))

    def model_copy(self, *, update: Mapping[str, Any] | None = None, deep: bool = False) -> Any:
        if update and "text" in update:
            copied = TextBlock.model_validate({**self.model_dump(), **update})
            return copied
        return super().model_copy(update=update, deep=deep)


class ImageBlock(_Value):
    """An image, by URL or inline base64 data (kept as-is, never decoded)."""

    type: Literal["image"] = "image"
    media_type: str | None = None
    url: str | None = None
    data: str | None = None


class ThinkingBlock(_Value):
    """Model reasoning. `signature` carries a provider's opaque verification token when present;
    `redacted` marks encrypted reasoning whose text is not readable."""

    type: Literal["thinking"] = "thinking"
    thinking: str
    signature: str | None = None
    redacted: bool = False


class CollapsedBlock(_Value):
    """Marker left by etag-collapse: this payload is identical to one sent earlier."""

    type: Literal["collapsed"] = "collapsed"
    etag: str
    path: str | None = None
    field: str | None = None
    unchanged: bool = True
    label: str = ""


class ElidedBlock(_Value):
    """Marker left by static-elision: text whose static parts repeat text kept elsewhere.

    `text` is what the model is shown: the original with each repeated static paragraph replaced by
    a one-line reference (empty when the whole block was a repeat of `ref`). `etag` recovers the
    original block.
    """

    type: Literal["elided"] = "elided"
    etag: str
    ref: str = Field(description="Where the kept copy lives, e.g. 'message 0'.")
    text: str = ""
    label: str = ""


class MaskedBlock(_Value):
    """Marker left by observation-mask: an old tool output replaced by a short description."""

    type: Literal["masked"] = "masked"
    etag: str
    label: str


class SummaryBlock(_Value):
    """Marker left by llm-summary: a window of turns replaced by a summary of them."""

    type: Literal["summary"] = "summary"
    text: str
    etag: str
    summarized_messages: int = 0
    backend: str = ""


class OmittedBlock(_Value):
    """Marker left where a strategy dropped whole messages (sliding-window)."""

    type: Literal["omitted"] = "omitted"
    etag: str
    messages: int
    label: str = ""


ContentPart = Annotated[
    TextBlock | ImageBlock | CollapsedBlock | ElidedBlock | MaskedBlock,
    Field(discriminator="type"),
]
"""What a tool result may hold."""


class ToolCallBlock(_Value):
    """A call the assistant made. `input` is the parsed argument object (or, for tools that take
    free text, a string)."""

    type: Literal["tool_call"] = "tool_call"
    id: str
    name: str
    input: JsonValue = Field(default_factory=dict)


class ToolResultBlock(_Value):
    """The result of the tool call whose id is `tool_call_id`."""

    type: Literal["tool_result"] = "tool_result"
    tool_call_id: str
    content: tuple[ContentPart, ...] = ()
    is_error: bool = False

    @property
    def text(self) -> str:
        """The text parts of the result joined with newlines."""
        return _joined(self, (p for p in self.content if isinstance(p, TextBlock)))


def _joined(value: _Value, blocks: Iterator[TextBlock | SummaryBlock]) -> str:
    """The texts of `blocks` joined with newlines, remembered on `value` unless one of them is kept
    as UTF-8 (remembering its decoded text would keep the copy that form saves)."""
    held = value.__dict__
    known = held.get("_text")
    if known is not None:
        return known  # type: ignore[no-any-return]  # set below, always a str
    parts = list(blocks)
    out = "\n".join(b.text for b in parts)
    if not any(_UTF8 in b.__dict__ for b in parts):
        held["_text"] = out
    return out


Block = Annotated[
    TextBlock
    | ImageBlock
    | ThinkingBlock
    | ToolCallBlock
    | ToolResultBlock
    | CollapsedBlock
    | ElidedBlock
    | MaskedBlock
    | SummaryBlock
    | OmittedBlock,
    Field(discriminator="type"),
]

MARKER_TYPES = ("collapsed", "elided", "masked", "summary", "omitted")

ORIGIN_KEY = "origin"
"""Message metadata naming where a user-role message came from when it is not the human's own words.

Absent means the human typed (or attached) it. Adapters set one of `ORIGINS` on every other user-role
message, so summaries, retention and the validator can tell the user's words from what an agent
harness put in a user turn."""

HARNESS_BLOCKS_KEY = "harness_blocks"
"""Message metadata on a message in the human's words that also holds text the agent harness
added to the same turn (Cline's `<environment_details>`, say): the indexes of those content blocks.
They are not the user's words, so they are not pinned (`compactkit.pins`); the rest of the message
is."""

COMMAND_KEY = "command"
"""Message metadata on a human message that is only a command to the agent program (a bare `/clear`,
`/init`): the user's words, but the task is looked for after it."""

ORIGINS = {
    "summary": "a summary the source agent wrote itself (Claude Code /compact, pi, Codex compaction)",
    "demonstration": "a worked example shown to the model before the task (SWE-agent demos)",
    "tool-output": "tool output the agent carried in a user turn (no tool call to pair it with)",
    "harness": "text the agent harness injected: reminders, environment details, command output",
}
Marker = CollapsedBlock | ElidedBlock | MaskedBlock | SummaryBlock | OmittedBlock

MARKER_META_KEY = "compactkit_marker"
"""Message metadata on a message a strategy wrote in place of whole messages (a summary or an
omitted marker); its value names the strategy."""


_META = "_meta"
"""Where a message keeps its metadata as JSON text (see `Message`)."""
_LEAN_META = json.JSONEncoder(separators=(",", ":"), allow_nan=False)  # ASCII: a byte a character


def _plain_json(value: Any, depth: int = 0) -> bool:
    """Whether `value` comes back equal (same types, same order) from its JSON."""
    kind = type(value)
    if kind is str or kind is int or kind is bool or value is None:
        return True
    if kind is float:
        return math.isfinite(value)
    if depth > 32:
        return False
    if kind is dict:
        return all(type(k) is str and _plain_json(v, depth + 1) for k, v in value.items())
    if kind is list:
        return all(_plain_json(v, depth + 1) for v in value)
    return False


def _lean_metadata(metadata: object) -> str | None:
    """`metadata` as JSON text when it holds nested dicts or lists (a turn's token usage and its
    details: a dict of dicts takes five to ten times its JSON) and its JSON gives it back exactly;
    else None. A marker's metadata is never held so: it is read on every walk over a context."""
    if type(metadata) is not dict or MARKER_META_KEY in metadata:
        return None
    if not any(type(v) in (dict, list) and v for v in metadata.values()):
        return None
    if not _plain_json(metadata):
        return None
    return _LEAN_META.encode(metadata)


def marker_meta(msg: Message) -> JsonValue:
    """`msg.metadata.get("compactkit_marker")` without parsing metadata held as JSON (which never
    holds that key: see `_lean_metadata`), for walks over every message of a context."""
    if _META in msg.__dict__:
        return None
    return msg.metadata.get(MARKER_META_KEY)


class Message(_Lean):
    """One turn. Tool results live in `tool` messages (several results of parallel calls may share
    one); `metadata` keeps what a format recorded about the turn (ids, timestamps, usage)."""

    # Metadata holding nested dicts or lists (a turn's usage figures) is kept as its JSON text
    # (`_lean_metadata`) and parsed each time `metadata` is read: a loaded session's metadata
    # takes a fifth of the memory. Nothing else differs: `metadata`, equality, copies, pickling
    # and serialization give the same dict (a new one on each read: a message is a value, and
    # changing the dict it gives changes nothing).

    role: Role
    content: tuple[Block, ...] = ()
    name: str | None = None
    metadata: dict[str, JsonValue] = Field(default_factory=dict)

    _lean_field: ClassVar[str] = "metadata"
    _lean_key: ClassVar[str] = _META

    @staticmethod
    def _lean(value: Any) -> str | None:
        return _lean_metadata(value)

    @staticmethod
    def _unlean(held: Any) -> Any:
        return json.loads(held)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Message) or (
            _META not in self.__dict__ and _META not in other.__dict__
        ):
            return super().__eq__(other)
        if type(self) is not type(other):
            return False
        mine, theirs = self.__dict__.get(_META), other.__dict__.get(_META)
        for name in type(self).model_fields:
            if name != "metadata":
                if getattr(self, name) != getattr(other, name):
                    return False
            elif (mine is None or mine != theirs) and self.metadata != other.metadata:
                return False
        return True

    def __hash__(self) -> int:
        # as a message holding its metadata as a dict: unhashable (a dict is)
        return hash((self.role, self.content, self.name, self.metadata))

    def model_copy(self, *, update: Mapping[str, Any] | None = None, deep: bool = False) -> Any:
        copied = super().model_copy(update=update, deep=deep)  # drops what is not a field
        text = self.__dict__.get(_META)
        if text is not None and not (update and "metadata" in update):
            copied.__dict__[_META] = text
        return copied

    @property
    def text(self) -> str:
        """Text and summary blocks joined with newlines."""
        return _joined(self, (b for b in self.content if isinstance(b, (TextBlock, SummaryBlock))))

    @cached_property
    def origin(self) -> str | None:
        """Where a user-role message came from when it is not the human's words (see `ORIGINS`)."""
        value = self.metadata.get(ORIGIN_KEY)
        if isinstance(value, str):
            return value
        return "demonstration" if self.metadata.get("is_demo") else None

    @cached_property
    def is_human(self) -> bool:
        """A user message holding what the human typed or attached (not harness or tool text)."""
        return (
            self.role == "user"
            and self.origin is None
            and (_META in self.__dict__ or MARKER_META_KEY not in self.metadata)
            and not self.tool_results
            and any(
                (isinstance(b, TextBlock) and b.text.strip()) or isinstance(b, ImageBlock)
                for b in self.content
            )
        )

    @property
    def tool_calls(self) -> tuple[ToolCallBlock, ...]:
        # worked out on each read, not kept: two tuples and a larger dict on every message of a
        # loaded session (a third of what a message holds besides its text)
        return tuple(b for b in self.content if isinstance(b, ToolCallBlock))

    @property
    def tool_results(self) -> tuple[ToolResultBlock, ...]:
        return tuple(b for b in self.content if isinstance(b, ToolResultBlock))


# --------------------------------------------------------------------------- pins


class Pin(_Value):
    """A span of text that no strategy may remove, summarize or rewrite: the user's words an adapter
    found inside a tool result (an approval with text, a correction, an answer to the agent's
    question, rejection feedback). The pinned text is a whole text block (of a message or of a tool
    result) and is named by its content address, so it is found wherever a strategy moved it.

    Pins derived from the context itself (user messages, the task, the last request, a pending call)
    and from user rules (`pin_rules`) are not stored; see `compactkit.pins`.
    """

    etag: str = Field(description="etag_of(text) of the pinned text block.")
    chars: int = Field(ge=0, description="Length of the pinned text, in characters.")
    reason: str = Field(description="Why it is pinned, e.g. 'user-feedback' (see compactkit.pins).")
    message: int = Field(ge=0, description="Index of the message it was found in, when pinned.")


# --------------------------------------------------------------------------- the context


class AgentContext(_Value):
    """A whole agent context: what would be sent to a model, plus what keeps compaction recoverable.

    `recovery` maps an etag to the JSON of the block(s) a marker replaced; it is never sent to a model.
    `pins` and `pin_rules` name what no strategy may touch (see `compactkit.pins`); neither is sent
    to a model.
    """

    system_instruction: str | None = None
    messages: tuple[Message, ...] = ()
    activated_skills: dict[str, str] = Field(default_factory=dict)
    metadata: dict[str, JsonValue] = Field(default_factory=dict)
    recovery: dict[str, str] = Field(default_factory=dict)
    pins: tuple[Pin, ...] = ()
    pin_rules: tuple[str, ...] = ()

    # ----------------------------------------------------------------- construction helpers

    @classmethod
    def from_native(cls, data: Mapping[str, Any]) -> AgentContext:
        """Load the native JSON shape (`{"format": "compactkit.context/1", ...}`)."""
        body = dict(data)
        tag = body.pop("format", None)
        if tag != NATIVE_FORMAT_TAG:
            raise ValueError(f"not a compactkit context (format tag {tag!r})")
        return cls.model_validate(body)

    def to_native(self) -> dict[str, Any]:
        """The native JSON shape, format tag first (`pins` and `pin_rules` only when set, so files
        written before pins existed read and write the same)."""
        data = self.model_dump(mode="json", exclude_none=True)
        for key in ("pins", "pin_rules"):
            if not data.get(key):
                data.pop(key, None)
        return {"format": NATIVE_FORMAT_TAG, **data}

    def to_json(self, indent: int | None = None) -> str:
        return json.dumps(self.to_native(), ensure_ascii=False, indent=indent)

    def replace(self, **changes: Any) -> AgentContext:
        """A copy with some fields changed (validated like any new value)."""
        data = {name: getattr(self, name) for name in type(self).model_fields}
        data.update(changes)
        return type(self).model_validate(data)

    def with_messages(self, messages: tuple[Message, ...] | list[Message]) -> AgentContext:
        return self.replace(messages=tuple(messages))

    def append(self, *messages: Message) -> AgentContext:
        return self.replace(messages=(*self.messages, *messages))

    def fork(self, **changes: Any) -> AgentContext:
        """A copy with changes; the original is untouched because values never change."""
        return self.replace(**changes)

    # ----------------------------------------------------------------- queries

    def iter_blocks(self) -> Iterator[tuple[int, int, Block]]:
        """(message index, block index, block) for every block."""
        for i, msg in enumerate(self.messages):
            for j, block in enumerate(msg.content):
                yield i, j, block

    @property
    def first_user_index(self) -> int | None:
        """The first message in the human's words that is more than a bare command (`/clear`);
        failing that, the first human message; failing that, the first user text that is not a
        demonstration (a session that starts from a summary has its task there)."""
        command: int | None = None
        fallback: int | None = None
        for i, msg in enumerate(self.messages):
            if msg.is_human:
                if COMMAND_KEY not in msg.metadata:
                    return i
                command = i if command is None else command
            elif (
                fallback is None
                and msg.role == "user"
                and msg.text.strip()
                and msg.origin != "demonstration"
            ):
                fallback = i
        return command if command is not None else fallback

    @property
    def task(self) -> str:
        """The first user message's text: the task the agent was given."""
        i = self.first_user_index
        return "" if i is None else self.messages[i].text


# --------------------------------------------------------------------------- diff


class BlockChange(_Value):
    message: int
    block: int
    change: Literal["added", "removed", "changed"]
    before_type: str | None = None
    after_type: str | None = None


class MessageChange(_Value):
    before_index: int | None
    after_index: int | None
    change: Literal["added", "removed", "changed"]
    role: Role
    blocks: tuple[BlockChange, ...] = ()


class ContextDiff(_Value):
    """What differs between two contexts, message by message."""

    system_instruction_changed: bool = False
    skills_changed: tuple[str, ...] = ()
    metadata_changed: tuple[str, ...] = ()
    messages: tuple[MessageChange, ...] = ()

    @property
    def empty(self) -> bool:
        return not (
            self.system_instruction_changed
            or self.skills_changed
            or self.metadata_changed
            or self.messages
        )

    def summary(self) -> str:
        counts = {"added": 0, "removed": 0, "changed": 0}
        for m in self.messages:
            counts[m.change] += 1
        parts = [f"{n} message(s) {kind}" for kind, n in counts.items() if n]
        if self.system_instruction_changed:
            parts.append("system instruction changed")
        if self.skills_changed:
            parts.append(f"skills changed: {', '.join(self.skills_changed)}")
        if self.metadata_changed:
            parts.append(f"metadata changed: {', '.join(self.metadata_changed)}")
        return "; ".join(parts) if parts else "no differences"


def _changed_keys(a: Mapping[str, Any], b: Mapping[str, Any]) -> tuple[str, ...]:
    return tuple(sorted(k for k in set(a) | set(b) if a.get(k) != b.get(k)))


def _diff_blocks(i: int, a: Message, b: Message) -> tuple[BlockChange, ...]:
    changes: list[BlockChange] = []
    for j in range(max(len(a.content), len(b.content))):
        x = a.content[j] if j < len(a.content) else None
        y = b.content[j] if j < len(b.content) else None
        if x == y:
            continue
        kind: Literal["added", "removed", "changed"] = (
            "added" if x is None else "removed" if y is None else "changed"
        )
        changes.append(
            BlockChange(
                message=i,
                block=j,
                change=kind,
                before_type=None if x is None else x.type,
                after_type=None if y is None else y.type,
            )
        )
    return tuple(changes)


def diff(a: AgentContext, b: AgentContext) -> ContextDiff:
    """Say which messages and blocks differ between `a` (before) and `b` (after).

    Messages are aligned by a longest-common-subsequence over their content, so a message
    dropped from the middle shows as one removal, not as every later message changed.
    """
    from difflib import SequenceMatcher

    def key(m: Message) -> str:
        return canonical_json(m.model_dump(mode="json", exclude={"metadata"}))

    ka = [key(m) for m in a.messages]
    kb = [key(m) for m in b.messages]
    out: list[MessageChange] = []
    matcher = SequenceMatcher(a=ka, b=kb, autojunk=False)
    for op, a0, a1, b0, b1 in matcher.get_opcodes():
        if op == "equal":
            continue
        paired = min(a1 - a0, b1 - b0) if op == "replace" else 0
        for k in range(paired):
            ma, mb = a.messages[a0 + k], b.messages[b0 + k]
            out.append(
                MessageChange(
                    before_index=a0 + k,
                    after_index=b0 + k,
                    change="changed",
                    role=mb.role,
                    blocks=_diff_blocks(b0 + k, ma, mb),
                )
            )
        for k in range(a0 + paired, a1):
            out.append(
                MessageChange(
                    before_index=k, after_index=None, change="removed", role=a.messages[k].role
                )
            )
        for k in range(b0 + paired, b1):
            out.append(
                MessageChange(
                    before_index=None, after_index=k, change="added", role=b.messages[k].role
                )
            )
    return ContextDiff(
        system_instruction_changed=a.system_instruction != b.system_instruction,
        skills_changed=_changed_keys(a.activated_skills, b.activated_skills),
        metadata_changed=_changed_keys(a.metadata, b.metadata),
        messages=tuple(out),
    )


# --------------------------------------------------------------------------- rendering


def marker_text(block: Marker) -> str:
    """The text a model is shown in place of a marker block (writers and token counts use it)."""
    if isinstance(block, CollapsedBlock):
        fields: dict[str, Any] = {"path": block.path, "etag": block.etag}
        if block.field:
            fields["field"] = block.field
        fields["unchanged"] = block.unchanged
        if block.label:
            fields["same_as"] = block.label
        return canonical_json(fields)
    if isinstance(block, ElidedBlock):
        if block.text:
            return block.text
        label = f": {block.label}" if block.label else ""
        return f"[static text elided{label}; same as {block.ref}, etag {block.etag}]"
    if isinstance(block, MaskedBlock):
        return f"[{block.label}; etag {block.etag}]"
    if isinstance(block, OmittedBlock):
        label = f": {block.label}" if block.label else ""
        return f"[{block.messages} earlier messages omitted{label}; etag {block.etag}]"
    return f"[summary of {block.summarized_messages} earlier messages]\n{block.text}"


def _tool_input_json(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)


def render_block(block: Block) -> tuple[str, ...]:
    """The strings a model sees for `block` (cached on the block, which never changes)."""
    cached = block.__dict__.get("_rendered")
    if cached is not None:
        return cached  # type: ignore[no-any-return]  # set below, always a tuple of str
    out: tuple[str, ...]
    if isinstance(block, TextBlock):
        return (block.text,)  # nothing to work out; and a text kept as UTF-8 is decoded each time
    if isinstance(block, ThinkingBlock):
        out = (block.thinking,)
    elif isinstance(block, ToolCallBlock):
        out = (block.name, _tool_input_json(block.input))
        if len(out[1]) >= _LEAN_ABOVE:
            return out  # a copy of the input as JSON: made again when read, not kept beside it
    elif isinstance(block, ToolResultBlock):
        out = tuple(t for part in block.content for t in render_block(part))
        if any(_UTF8 in part.__dict__ for part in block.content):
            return out
    elif isinstance(block, ImageBlock):
        out = ()
    else:
        out = (marker_text(block),)
    # frozen models forbid attribute assignment, not a cache entry in their instance dict
    block.__dict__["_rendered"] = out
    return out


def message(role: Role, *content: Block | str, **kw: Any) -> Message:
    """Convenience constructor: strings become text blocks."""
    blocks = tuple(TextBlock(text=c) if isinstance(c, str) else c for c in content)
    return Message(role=role, content=blocks, **kw)
