"""Keeping compaction recoverable: a content-addressed store of what markers replaced, and `expand`.

A marker's `etag` is the key of a JSON array in `AgentContext.recovery` (or a stash file): the blocks it
replaced (block markers) or the messages it replaced (`summary` and `omitted` markers, which stand alone
in their own message). `expand` puts everything back.

Public for strategy and tool authors: the names in `__all__` (`put` keeps a removal recoverable; see
docs/strategies.md, "Keeping a removal recoverable"). The rest is compactkit's own and may change.
"""

from __future__ import annotations

import codecs
import contextlib
import hashlib
import json
import os
import re
import sys
import tempfile
import threading
import weakref
from collections.abc import Callable, Hashable, Iterable, Iterator, Mapping, MutableMapping
from contextvars import ContextVar
from json.encoder import encode_basestring_ascii as _ascii_json
from pathlib import Path
from typing import IO, Any, TextIO

from pydantic import TypeAdapter, ValidationError

from .context import (
    ETAG_CHARS,
    MARKER_TYPES,
    AgentContext,
    Block,
    CollapsedBlock,
    ContentPart,
    Message,
    OmittedBlock,
    SummaryBlock,
    TextBlock,
    ToolResultBlock,
    canonical_json,
    etag_of,
    marker_meta,
)
from .errors import BadInputError, RecoveryError
from .jsonio import loads

_blocks = TypeAdapter(list[Block])
_parts = TypeAdapter(list[ContentPart])
_messages = TypeAdapter(list[Message])


CHUNK_MARKER = "recovery-chunk"
"""`compactkit_marker` of the messages that stand for the parts of a very large stored window."""
# characters of JSON above which a window of messages is stored in parts, so that no command holds
# a large window's text whole (one entry under 8M: a 10 MiB Codex rollout's took run 30 MiB, expand 80;
# under 1M: a 1.4 MiB rollout's took expand 7 MiB)
_CHUNK_ABOVE = 1 << 18
_CHUNK = 1 << 16  # characters of JSON in each further part


def _array(dumps: list[str]) -> list[str]:
    """The pieces of the JSON array of `dumps` (`[`, the items with `,` between them, `]`)."""
    pieces = ["["]
    for index, text in enumerate(dumps):
        if index:
            pieces.append(",")
        pieces.append(text)
    pieces.append("]")
    return pieces


def _etag(pieces: Iterable[str]) -> str:
    """`etag_of` the text the pieces join to, without joining or encoding it whole."""
    digest = hashlib.sha256()
    for piece in pieces:
        digest.update(piece.encode("utf-8"))
    return digest.hexdigest()[:ETAG_CHARS]


_REMEMBER_CHARS = 1 << 23
"""Characters of JSON each `_Remembered` holds at most."""


class _Remembered:
    """JSON texts made lately, by a key whose `anchor` proves it still names the same content.

    A window stored again (sliding-window run before every model call of a growing session drops
    the same oldest messages on every call) dumped each of its messages and hashed each of its
    parts again: the cost grew with the square of the session. Values are frozen, so what a
    value's text was stays true while it lives. At most `_REMEMBER_CHARS` characters are held, the
    oldest forgotten first, and nothing while a command spills (its windows are too large to hold
    twice, and it stores each once)."""

    def __init__(self, limit: int) -> None:
        self._limit = limit
        self._held: dict[Hashable, tuple[Any, Any, int]] = {}  # by age, oldest first
        self._chars = 0
        self._lock = threading.RLock()  # a weakref callback may run inside a locked section
        if hasattr(os, "register_at_fork"):  # a forked worker never inherits a held lock
            os.register_at_fork(after_in_child=self._after_fork)

    def _after_fork(self) -> None:
        self._lock = threading.RLock()

    def get(self, key: Hashable) -> tuple[Any, Any] | None:
        """(anchor, value) kept under `key`, if any."""
        held = self._held.get(key)
        return None if held is None else (held[0], held[1])

    def keep(self, key: Hashable, anchor: Any, value: Any, chars: int) -> None:
        if chars > self._limit // 8 or _SPILL.get() is not None:
            return
        with self._lock:
            self._drop(key)
            self._held[key] = (anchor, value, chars)
            self._chars += chars
            while self._chars > self._limit:
                self._drop(next(iter(self._held)))

    def _drop(self, key: Hashable) -> None:
        held = self._held.pop(key, None)
        if held is not None:
            self._chars -= held[2]

    def forget(self, key: Hashable, anchor: Any) -> None:
        """Drop `key` if `anchor` is still what it is kept with (a value died)."""
        with self._lock:
            held = self._held.get(key)
            if held is not None and held[0] is anchor:
                self._drop(key)


_DUMPS = _Remembered(_REMEMBER_CHARS)  # a message's JSON, by the message's identity
_PARTS = _Remembered(_REMEMBER_CHARS)  # a part's (text, etag), by its dumps' identities


def _dump(item: Any) -> str:
    """`canonical_json` of an item's JSON form; a message's is remembered while it lives."""
    if not isinstance(item, Message):
        return canonical_json(item.model_dump(mode="json", exclude_none=True))
    key = id(item)
    held = _DUMPS.get(key)
    if held is not None and held[0]() is item:
        return held[1]  # type: ignore[no-any-return]  # kept below, a str
    text = canonical_json(item.model_dump(mode="json", exclude_none=True))
    _DUMPS.keep(key, weakref.ref(item, lambda ref: _DUMPS.forget(key, ref)), text, len(text))
    return text


def _pieces(
    items: Iterable[Any], keep: Callable[[str, str], object] | None = None
) -> tuple[list[str], str]:
    """The text of the entry for `items` in pieces, and its etag.

    The text is exactly `canonical_json` of the list of the items' dumps, made one item at a
    time and hashed piece by piece (no dump of the whole window and no encoded copy of it). A
    window of messages whose JSON passes `_CHUNK_ABOVE` characters is stored in parts instead:
    each part (about `_CHUNK` characters of messages) is an entry of its own, given to `keep`
    (etag, text) as it is made, and the window's entry lists one `omitted` marker message per
    part, which `expand` and `flatten` follow like any other. The parts of a huge session then
    take a few bytes a character in memory each (a single emoji makes a whole Python string four
    bytes a character) and are checked one by one; while a command spills (`spilling`), they
    are kept in its temporary file instead of in memory.
    """
    items = list(items)
    messages = all(isinstance(item, Message) for item in items)
    dumps: list[str] = []
    parts: list[Message] = []
    pending = total = 0
    for item in items:
        text = _dump(item)
        dumps.append(text)
        pending += len(text)
        total += len(text)
        if messages and total > _CHUNK_ABOVE and pending >= _CHUNK:
            dumps = _parts_of(dumps, keep, parts)
            pending = sum(map(len, dumps))
    if parts and dumps:
        parts.append(_part(dumps, keep, len(parts) + 1))
    if parts:
        dumps = [canonical_json(m.model_dump(mode="json", exclude_none=True)) for m in parts]
    pieces = _array(dumps)
    return pieces, _etag(pieces)


def _parts_of(
    dumps: list[str], keep: Callable[[str, str], object] | None, parts: list[Message]
) -> list[str]:
    """Store `dumps` as parts of about `_CHUNK` characters each; return the rest (shorter)."""
    group: list[str] = []
    size = 0
    for text in dumps:
        group.append(text)
        size += len(text)
        if size >= _CHUNK:
            parts.append(_part(group, keep, len(parts) + 1))
            group, size = [], 0
    return group


def _escape_wide(error: UnicodeError) -> tuple[str, int]:
    """Codec error handler: the characters Latin-1 cannot hold as JSON escapes (what `json.dumps`
    writes for them, without its quotes), so encoding runs at memory speed and calls back once a
    run of wide characters."""
    if not isinstance(error, UnicodeEncodeError):
        raise error
    return _ascii_json(error.object[error.start : error.end])[1:-1], error.end


_ESCAPE_WIDE = "compactkit.json-escape"
codecs.register_error(_ESCAPE_WIDE, _escape_wide)


def _narrow(text: str) -> str:
    """`text` (JSON) with every character outside Latin-1 written as a JSON escape when that
    makes the Python string smaller: one emoji makes a whole string take four bytes a character,
    and parsing gives back the same value either way."""
    if text.isascii():
        return text
    try:
        text.encode("latin-1")  # a copy at memory speed; max(text) walked it a character at a time
    except UnicodeEncodeError:
        escaped = text.encode("latin-1", _ESCAPE_WIDE).decode("latin-1")
    else:
        return text
    return escaped if sys.getsizeof(escaped) < sys.getsizeof(text) else text


def _part(dumps: list[str], keep: Callable[[str, str], object] | None, number: int) -> Message:
    key = tuple(map(id, dumps))  # kept with the dumps themselves, so no id is reused meanwhile
    held = _PARTS.get(key)
    if held is not None:
        text, etag = held[1]
    else:
        text = _narrow("".join(_array(dumps)))
        etag = etag_of(text)
        _PARTS.keep(key, tuple(dumps), (text, etag), 2 * len(text))
    if keep is not None:
        keep(etag, text)
    return Message(
        role="user",
        content=(OmittedBlock(etag=etag, messages=len(dumps), label=f"part {number}"),),
        metadata={"compactkit_marker": CHUNK_MARKER},
    )


def put(store: MutableMapping[str, str], items: Iterable[Any]) -> str:
    """Store blocks or messages under their content address; return the etag."""
    spill = _SPILL.get()
    pieces, key = _pieces(items, spill.add if spill is not None else store.setdefault)
    if key not in store:
        store[key] = "".join(pieces)
    return key


def payload_etag(items: Iterable[Any]) -> str:
    """The etag `put` would give these items, without storing them."""
    return _pieces(items)[1]


def payload_entry(items: Iterable[Any]) -> tuple[str, str]:
    """The entry `put` would store for items that are not messages, and its etag: stored by
    `store.setdefault(etag, text)`, made once when the etag is needed before it is stored."""
    items = list(items)
    if any(isinstance(item, Message) for item in items):
        raise TypeError("payload_entry takes blocks, not messages (put stores those in parts)")
    pieces, etag = _pieces(items)
    return "".join(pieces), etag


def result_etag(block: ToolResultBlock) -> str:
    """`payload_etag` of a tool result's content, remembered on the block: a block is a value
    whose content never changes (a copy with changes drops it), and strategies ask for it on every
    compaction of a growing session."""
    held = block.__dict__
    etag = held.get("_etag")
    if etag is None:
        etag = held["_etag"] = payload_etag(block.content)
    return etag


def entry(store: Mapping[str, str], etag: str) -> str | None:
    """The text stored under `etag`: in `store`, or (a part of a huge window, while a command
    spills) in the command's temporary file."""
    raw = store.get(etag)
    if raw is None:
        spill = _SPILL.get()
        if spill is not None:
            return spill.get(etag)
    return raw


def is_marker(block: Any) -> bool:
    return getattr(block, "type", None) in MARKER_TYPES


def message_marker(msg: Message) -> SummaryBlock | OmittedBlock | None:
    """The marker a message stands for, when the message replaced whole messages. Text blocks after
    the marker are pinned words carried from the replaced messages (`compactkit.pins.carry`):
    copies of what the stored messages hold, so expanding the marker restores them in place."""
    if not msg.content or not marker_meta(msg):
        return None
    block = msg.content[0]
    if not isinstance(block, (SummaryBlock, OmittedBlock)):
        return None
    if any(not isinstance(b, TextBlock) for b in msg.content[1:]):
        return None
    return block


def markers(ctx: AgentContext) -> list[tuple[int, Any]]:
    """(message index, marker block) for every marker, tool-result parts included."""
    return [(i, block) for i, msg in enumerate(ctx.messages) for block in _markers_of(msg)]


def _markers_of(msg: Message) -> Iterator[Any]:
    for block in msg.content:
        if is_marker(block):
            yield block
        elif isinstance(block, ToolResultBlock):
            yield from (part for part in block.content if is_marker(part))


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


def context_copies(ctx: AgentContext) -> dict[str, str]:
    """Store entries for the tool-result payloads `ctx` holds in full: a collapsed marker whose
    etag names one of them stands for that copy (it is "in the context")."""
    copies: dict[str, str] = {}
    for msg in ctx.messages:
        for block in msg.tool_results:
            if not any(is_marker(p) or p.type == "elided" for p in block.content):
                put(copies, block.content)
    return copies


class _Expander:
    def __init__(self, store: Mapping[str, str], context: AgentContext | None = None) -> None:
        self.store = store
        self.context = context
        self._copies: dict[str, str] | None = None
        self.used: set[str] = set()
        self.missing: set[str] = set()

    def _load(self, marker: Any) -> list[Any] | None:
        etag = marker.etag
        raw = entry(self.store, etag)
        if raw is None and self.context is not None and marker.type == "collapsed":
            if self._copies is None:  # only when a collapse is not in the store (rare)
                self._copies = context_copies(self.context)
            raw = None if is_field_marker(marker) else self._copies.get(etag)
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

    def messages(self, messages: Iterable[Message], depth: int = 0) -> Iterator[Message]:
        """The messages restored one at a time (a window of stored parts is read a part at a
        time, so only the part being restored is ever held)."""
        if depth > 500:
            raise BadInputError("recovery store nests deeper than 500 levels (a cycle?)")
        for msg in messages:
            marker = message_marker(msg)
            data = self._load(marker) if marker is not None else None
            if marker is not None and data is not None:
                found = _shaped(_messages, data, marker.etag, "messages")
                del data
                yield from self.messages(found, depth + 1)
                continue
            content = self.blocks(msg.content, depth)
            yield msg if content == msg.content else msg.model_copy(update={"content": content})


def unparted(messages: Iterable[Message], store: Mapping[str, str]) -> Iterator[Message]:
    """`messages` (a stored window's) with each part marker (`CHUNK_MARKER`) replaced by the
    messages of its part: the window as stored whole, whatever its size (other markers kept)."""
    for msg in messages:
        marker = message_marker(msg)
        chunk = marker is not None and msg.metadata.get("compactkit_marker") == CHUNK_MARKER
        raw = entry(store, marker.etag) if marker is not None and chunk else None
        if raw is None:
            yield msg
        else:
            yield from _messages.validate_python(json.loads(raw))


def flatten(messages: Iterable[Message], store: Mapping[str, str]) -> list[Message]:
    """`messages` with every message-level marker (summary, omitted) replaced by the messages it
    stands for, so that a new marker over them stores one flat window instead of nesting one level
    deeper at every compaction."""
    out: list[Message] = []
    for msg in messages:
        marker = message_marker(msg)
        raw = entry(store, marker.etag) if marker is not None else None
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
    `RecoveryError` naming the etag, and nothing is restored from it. A collapsed marker whose
    etag is in no store but names a payload the context holds in full is that payload.
    """
    expansion = Expansion(ctx, stash)
    messages = tuple(expansion.messages())
    return ctx.replace(messages=messages, recovery=expansion.recovery())


class Expansion:
    """`expand(ctx, stash)` a message at a time, for a context too large to hold expanded (the
    `expand` command writes each message as it comes): iterate `messages()` once; then
    `recovery()` is the store the expanded context keeps and `left_over` the etags of the
    markers it still holds (what `left_over(expand(ctx, stash))` gives)."""

    def __init__(self, ctx: AgentContext, stash: Mapping[str, str] | None = None) -> None:
        self._ctx = ctx
        store = _Overlay(ctx.recovery, stash) if stash else ctx.recovery
        self._expander = _Expander(store, ctx)
        self._left: set[str] = set()

    def messages(self) -> Iterator[Message]:
        for msg in self._expander.messages(self._ctx.messages):
            self._left.update(m.etag for m in _markers_of(msg))
            yield msg

    def recovery(self) -> dict[str, str]:
        return {k: v for k, v in self._ctx.recovery.items() if k not in self._expander.used}

    @property
    def left_over(self) -> list[str]:
        return sorted(self._left)


class _Overlay(Mapping[str, str]):
    """`{**under, **over}` without copying either (a `SidecarStore` reads an entry when asked)."""

    def __init__(self, over: Mapping[str, str], under: Mapping[str, str]) -> None:
        self._over, self._under = over, under

    def __getitem__(self, etag: str) -> str:
        raw = self._over.get(etag)
        return self._under[etag] if raw is None else raw

    def __iter__(self) -> Iterator[str]:
        yield from self._over
        yield from (etag for etag in self._under if etag not in self._over)

    def __len__(self) -> int:
        return sum(1 for _ in self)


def dangling(ctx: AgentContext, stash: Mapping[str, str] | None = None) -> list[tuple[int, Any]]:
    """(message index, marker) of every marker of `ctx` whose etag is neither in its recovery
    store (or `stash`) nor, for a collapsed marker, the etag of a full copy the context holds."""
    store = ctx.recovery if not stash else {**stash, **ctx.recovery}
    full_copies: set[str] | None = None
    out: list[tuple[int, Any]] = []
    for i, block in markers(ctx):
        if block.etag in store:
            continue
        if isinstance(block, CollapsedBlock):
            if full_copies is None:
                full_copies = _full_copies(ctx)
            if block.etag in full_copies:
                continue
        out.append((i, block))
    return out


def _full_copies(ctx: AgentContext) -> set[str]:
    """Etags of the tool-result payloads the context holds in full (a collapsed marker may point
    at one of them instead of the store)."""
    return {
        result_etag(b)
        for m in ctx.messages
        for b in m.tool_results
        if not any(p.type in ("collapsed", "masked", "elided") for p in b.content)
    }


def unrecoverable(ctx: AgentContext, stash: Mapping[str, str] | None = None) -> list[str]:
    """Etags of markers that `expand` could not restore, markers inside restored content (a
    summary of an older summary, a collapse inside an omitted window) included."""
    return left_over(expand(ctx, stash))


def left_over(expanded: AgentContext) -> list[str]:
    """Etags of the markers an expanded context still holds: what its stores did not have."""
    return sorted({m.etag for _, m in markers(expanded)})


_ETAG_IN_JSON = re.compile(r'"etag":"([0-9a-f]{16})"')


def prune(ctx: AgentContext) -> AgentContext:
    """Drop recovery entries no marker refers to (directly, or through another stored payload)."""
    if not ctx.recovery:
        return ctx
    live = _reached([m.etag for _, m in markers(ctx)], ctx.recovery)
    if len(live) == len(ctx.recovery):
        return ctx
    return ctx.replace(recovery={k: v for k, v in ctx.recovery.items() if k in live})


def _reached(todo: list[str], store: Mapping[str, str]) -> set[str]:
    """The etags of `store` that `todo` names, directly or through stored payloads (and through
    the parts a command spilled, which are not in `store`)."""
    spill = _SPILL.get()
    live: set[str] = set()
    spilled: set[str] = set()
    while todo:
        etag = todo.pop()
        if etag in live or etag in spilled:
            continue
        raw = store.get(etag)
        if raw is not None:
            live.add(etag)
            todo.extend(_ETAG_IN_JSON.findall(raw))
        elif spill is not None and etag in spill:
            spilled.add(etag)
            todo.extend(spill.refs(etag))
    return live


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


# --------------------------------------------------------------------------- spilling


class Spill:
    """The parts of huge windows (`_pieces`) that `put` stores while a command runs, kept in an
    unnamed temporary file instead of in memory: the store a command writes is as large as what
    it removed, and the context it removed that from is in memory already. Only the command's
    own strategies see it (through `put`, `entry`, `flatten`, `prune` and `expand`); `stored`
    gives the store with them, to write."""

    def __init__(self, folder: str | None = None) -> None:
        self._folder = folder
        self._file: IO[bytes] | None = None
        self._where: dict[str, tuple[int, int, tuple[str, ...]]] = {}

    def add(self, etag: str, text: str) -> None:
        if etag not in self._where:
            if self._file is None:  # made on the first part: most runs spill nothing
                # closed by close(): it outlives this call
                self._file = tempfile.TemporaryFile(dir=self._folder, prefix=".compactkit-")  # noqa: SIM115
            data = text.encode("utf-8")
            offset = self._file.seek(0, 2)
            self._file.write(data)
            refs = tuple(dict.fromkeys(_ETAG_IN_JSON.findall(text)))
            self._where[etag] = (offset, len(data), refs)

    def __contains__(self, etag: object) -> bool:
        return etag in self._where

    def get(self, etag: str) -> str | None:
        where = self._where.get(etag)
        if where is None or self._file is None:
            return None
        offset, size, _ = where
        self._file.seek(offset)
        return self._file.read(size).decode("utf-8")

    def refs(self, etag: str) -> tuple[str, ...]:
        """The etags the part stored under `etag` names."""
        return self._where[etag][2]

    def stored(self, store: Mapping[str, str]) -> Mapping[str, str]:
        """`store` with the spilled parts its entries reach: what it would hold had nothing been
        spilled (a part is read from the file only when asked for)."""
        reached = _spilled_reach(store, self) - store.keys()
        return _WithParts(store, self, sorted(reached)) if reached else store

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None
        self._where.clear()


def _spilled_reach(store: Mapping[str, str], spill: Spill) -> set[str]:
    """The spilled etags that the entries of `store` name, directly or through other parts."""
    found: set[str] = set()
    todo = [e for raw in store.values() for e in _ETAG_IN_JSON.findall(raw) if e in spill]
    while todo:
        etag = todo.pop()
        if etag not in found:
            found.add(etag)
            todo.extend(e for e in spill.refs(etag) if e in spill)
    return found


class _WithParts(Mapping[str, str]):
    """A store and the spilled parts it reaches, as one mapping (what `Spill.stored` gives)."""

    def __init__(self, store: Mapping[str, str], spill: Spill, parts: list[str]) -> None:
        self._store, self._spill, self._parts = store, spill, parts
        self._part_set = set(parts)

    def __getitem__(self, etag: str) -> str:
        raw = self._store.get(etag)
        if raw is None and etag in self._part_set:
            raw = self._spill.get(etag)
        if raw is None:
            raise KeyError(etag)
        return raw

    def __iter__(self) -> Iterator[str]:
        yield from self._store
        yield from self._parts

    def __len__(self) -> int:
        return len(self._store) + len(self._parts)


_SPILL: ContextVar[Spill | None] = ContextVar("compactkit_spill", default=None)


@contextlib.contextmanager
def spilling(folder: str | None = None) -> Iterator[Spill]:
    """While the block runs, `put` keeps the parts of huge windows in a temporary file in
    `folder` (removed at the end, and by the system if the process dies); see `Spill`."""
    spill = Spill(folder)
    token = _SPILL.set(spill)
    try:
        yield spill
    finally:
        _SPILL.reset(token)
        spill.close()


# --------------------------------------------------------------------------- the sidecar store

SIDECAR_TAG = "compactkit.recovery/1"
SIDECAR_SUFFIX = ".recovery.jsonl"
_SLICE = 1 << 20  # characters of a payload escaped at a time when writing


def sidecar_path(output: str) -> str:
    """Where `run -o OUTPUT` keeps what compaction removed: `OUTPUT.recovery.jsonl`."""
    return output + SIDECAR_SUFFIX


def write_sidecar(entries: Mapping[str, str], handle: TextIO) -> None:
    """Write a recovery store as JSON Lines: a header `{"format": "compactkit.recovery/1",
    "entries": N}`, then one `{"etag": ..., "payload": ...}` line per entry in etag order.

    A payload is written a slice at a time, so no escaped copy of a large one is ever built."""
    header = {"format": SIDECAR_TAG, "entries": len(entries)}
    handle.write(json.dumps(header) + "\n")
    for etag in sorted(entries):
        payload = entries[etag]
        handle.write('{"etag":' + json.dumps(etag) + ',"payload":"')
        for start in range(0, len(payload), _SLICE):
            handle.write(json.dumps(payload[start : start + _SLICE], ensure_ascii=False)[1:-1])
        handle.write('"}\n')


def is_sidecar(path: str | Path) -> bool:
    """True when the file at `path` starts with a recovery-store header."""
    try:
        with open(path, "rb") as handle:
            first = handle.readline(4096)
    except OSError:
        return False
    try:
        header = json.loads(first)
    except (ValueError, RecursionError):
        return False
    return isinstance(header, dict) and header.get("format") == SIDECAR_TAG


def read_sidecar(path: str | Path, display: str | None = None) -> dict[str, str]:
    """The entries of a recovery store written by `write_sidecar`, read one line at a time.

    Entries are not verified here: `expand` and `validate` check each one they use against its
    etag (`check_entry`). A line that is not an entry, or a count of entries other than the
    header's (a line removed, duplicated or added), is a one-line `BadInputError`."""
    store = SidecarStore(path, display)
    return {etag: store[etag] for etag in store}


class SidecarStore(Mapping[str, str]):
    """The entries of a recovery store file, each read from the file only when asked for, so that
    `expand` never holds the store whole (it restores a part of a window at a time). Opening it
    reads every line once and checks it as `read_sidecar` does, keeping only where each entry is."""

    def __init__(self, path: str | Path, display: str | None = None) -> None:
        self._path = path
        self._where = display or str(path)
        self._lines = dict(_sidecar_lines(path, self._where))

    def __getitem__(self, etag: str) -> str:
        offset, size, number = self._lines[etag]
        with open(self._path, "rb") as handle:
            handle.seek(offset)
            raw = handle.read(size)
        found, payload = _entry_line(_decoded(raw, self._where, number), self._where, number)
        if found != etag:  # the file was replaced since it was opened
            raise BadInputError(
                f"recovery store line is not the entry {etag} it held when opened",
                path=self._where,
                line=number,
            )
        return payload

    def __iter__(self) -> Iterator[str]:
        return iter(self._lines)

    def __len__(self) -> int:
        return len(self._lines)


_Line = tuple[int, int, int]
"""Where an entry is in a store file: (byte offset, byte length, line number)."""


def _sidecar_lines(path: str | Path, where: str) -> Iterator[tuple[str, _Line]]:
    """(etag, where it is) of each entry line of the store at `path`, read and checked one line
    at a time (see `read_sidecar`); the count of entries is checked after the last."""
    counted: object = None
    lines = offset = 0
    etags: set[str] = set()
    with open(path, "rb") as handle:
        for number, raw in enumerate(handle, start=1):
            start, offset = offset, offset + len(raw)
            line = _decoded(raw, where, number)
            if not line.strip():
                continue
            if number == 1:
                value = _json_line(line, where, number)
                if not isinstance(value, dict) or value.get("format") != SIDECAR_TAG:
                    raise BadInputError(
                        "not a compactkit recovery store",
                        path=where,
                        hint=f"expected format {SIDECAR_TAG!r}",
                    )
                counted = value.get("entries")
                continue
            etag = _etag_of_line(line, where, number)
            etags.add(etag)
            lines += 1
            yield etag, (start, len(raw), number)
    if counted is not None and (counted != lines or lines != len(etags)):
        raise BadInputError(
            f"the store's header counts {counted!r} entries, but it holds {lines} line(s) of "
            f"{len(etags)} etag(s): lines removed, duplicated or added",
            path=where,
            hint="use the store written with the output, as it was written",
        )


def _decoded(raw: bytes, where: str, number: int) -> str:
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise BadInputError(
            f"not UTF-8 text (bad byte at offset {exc.start} of the line)", path=where, line=number
        ) from None


def _json_line(line: str, where: str, number: int) -> Any:
    try:
        return loads(line, where, number)
    except json.JSONDecodeError as exc:
        raise BadInputError(
            f"recovery store line is not JSON: {exc.msg}", path=where, line=number
        ) from None


def _etag_of_line(line: str, where: str, number: int) -> str:
    """The etag of an entry line, the line checked as `_entry_line` checks it. A line of strings
    alone is read by `json` directly: its payload is not kept, so the lone surrogates `loads`
    mends (a pass over every escape) do not matter here."""
    try:
        value = json.loads(line)
    except (ValueError, RecursionError):
        value = None
    if isinstance(value, dict) and all(isinstance(v, str) for v in value.values()):
        etag = value.get("etag")
        if isinstance(etag, str) and etag.isascii() and "payload" in value:
            return etag
    return _entry_line(line, where, number)[0]  # its one-line error, or an etag it mends


def _entry_line(line: str, where: str, number: int) -> tuple[str, str]:
    """(etag, payload) of an entry line of a store."""
    value = _json_line(line, where, number)
    etag = value.get("etag") if isinstance(value, dict) else None
    payload = value.get("payload") if isinstance(value, dict) else None
    if not isinstance(etag, str) or not isinstance(payload, str):
        raise BadInputError(
            "recovery store lines must be {etag, payload} strings", path=where, line=number
        )
    return etag, payload


def read_store(path: str, *, lazy: bool = False) -> Mapping[str, str]:
    """The entries of a stash file (`compactkit.stash/1`) or a recovery store
    (`compactkit.recovery/1`), whichever `path` holds; with `lazy`, a recovery store is opened
    as a `SidecarStore` (an entry read when asked for)."""
    if is_sidecar(path):
        return SidecarStore(path) if lazy else read_sidecar(path)
    try:
        text = Path(path).read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise BadInputError(f"not UTF-8 text (bad byte at offset {exc.start})", path=path) from None
    return read_stash(text, path)


def write_stash(entries: Mapping[str, str], handle: TextIO) -> None:
    """`stash_json(entries)` written to `handle` an entry at a time (same text)."""
    handle.write('{\n "format": ' + json.dumps(STASH_TAG) + ',\n "entries": {')
    for index, etag in enumerate(sorted(entries)):
        payload = entries[etag]
        handle.write(("," if index else "") + "\n  " + json.dumps(etag) + ': "')
        for start in range(0, len(payload), _SLICE):
            handle.write(json.dumps(payload[start : start + _SLICE], ensure_ascii=False)[1:-1])
        handle.write('"')
    handle.write("\n }\n}\n" if entries else "}\n}\n")


__all__ = ["expand", "payload_etag", "put", "split_stash", "unrecoverable"]
