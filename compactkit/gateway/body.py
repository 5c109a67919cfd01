"""Request bodies parsed and serialized as `json.loads` and `json.dumps` do, reusing what a recent
request of the same client held as the very same bytes.

An agent re-sends its whole history on every call: most of a body is bytes the gateway parsed (and
serialized) one request before. A JSON object or array or string is a function of its text alone
(its end is its closing delimiter), so a raw item of `messages`/`input`, or a top-level field,
whose bytes equal the ones a recent body held at the same place is that body's object, and its
serialization that body's bytes. Bodies are compared as bytes, where they lie (no copy), and only
what follows the re-sent items is decoded: reading a request costs what it adds, not its length.
Anything unusual (a body not starting with `{`, not strict UTF-8, not well formed, a key given
twice) is left to `json.loads`, which then parses it or raises as it always did.
"""

from __future__ import annotations

import json
import re
import threading
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any

_DECODER = json.JSONDecoder()
_SCAN: Any = getattr(_DECODER, "scan_once")  # noqa: B009  (json's scanner, as json.loads uses it: untyped)
_STRING: Any = getattr(json.decoder, "scanstring")  # noqa: B009  (likewise)
_WS = re.compile(r"[ \t\n\r]*")
_ITEM_KEYS = frozenset({"messages", "input"})
_DELIMITED = ("{", "[", '"')
_KEY_BYTES = 512
"""Bodies are matched with a recent one by their first bytes (the model and the first message)."""

_Span = tuple[int, int, int, Any]
"""Where a value lies in a body: its first byte, the byte after it, its length in characters, and
the value."""


def dumps(value: Any) -> bytes:
    """What the gateway sends for a value it wrote: compact JSON, UTF-8, non-ASCII as it is."""
    return json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode("utf-8")


@dataclass
class _Parsed:
    """One body as scanned: its bytes, where each top-level value and raw item lies in them, and
    the bytes of those serialized so far (by object id; the objects are held here)."""

    body: dict[str, Any]
    raw: bytes
    fields: dict[str, _Span] = field(default_factory=dict)
    """The top-level values that are objects, arrays or strings."""
    head: list[str] = field(default_factory=list)
    """The keys before the items' array, in order."""
    item_key: str | None = None
    """The key of the items' array (`messages` or `input`)."""
    items: list[_Span] = field(default_factory=list)
    values: list[Any] = field(default_factory=list)
    """The items' values (the body's array itself)."""
    dumped: dict[int, bytes | None] = field(default_factory=dict)
    """Serializations of the top-level values (None: not yet), by object id."""
    item_dumps: list[bytes | None] = field(default_factory=list)
    """Serializations of the raw items, as `items` holds them (None: not yet)."""

    @property
    def size(self) -> int:
        """The bytes it holds, counted: its bytes, and as much again for what they parsed to."""
        return 2 * len(self.raw)


class Bodies:
    """The last bodies parsed (at most `limit`, least recently used dropped)."""

    def __init__(self, limit: int = 32, max_bytes: int | None = None) -> None:
        """At most `limit` bodies, of at most `max_bytes` in all (each counted twice its size:
        its bytes and what they parsed to)."""
        self._recent: OrderedDict[bytes, _Parsed] = OrderedDict()
        self._limit = limit
        self._max_bytes = max_bytes
        self._bytes = 0
        self._lock = threading.Lock()

    def loads(self, raw: bytes) -> Any | None:
        """`json.loads(raw)`, or None when `raw` is left to `json.loads` (call it then). What it
        returns is read only: its objects are the next body's too, where it re-sends them."""
        if not raw.startswith(b"{"):
            return None
        key = raw[:_KEY_BYTES]
        with self._lock:
            before = self._recent.get(key)
        try:
            parsed = _scan(raw, before)
        except (ValueError, StopIteration, IndexError, RecursionError):
            return None
        if parsed is None:
            return None
        with self._lock:
            old = self._recent.pop(key, None)
            self._bytes += parsed.size - (old.size if old is not None else 0)
            self._recent[key] = parsed
            while len(self._recent) > self._limit or (
                self._max_bytes is not None and self._bytes > self._max_bytes and self._recent
            ):
                _, gone = self._recent.popitem(last=False)
                self._bytes -= gone.size
        return parsed.body

    @property
    def held(self) -> int:
        """The bytes held (the bodies' bytes, twice)."""
        with self._lock:
            return self._bytes

    def dumps(self, body: dict[str, Any], source: Any) -> bytes:
        """`dumps(body)` for a body written from `source` (a body `loads` returned): values and
        raw items of `source` that `body` holds cost their serialization once."""
        with self._lock:
            parsed = next((p for p in self._recent.values() if p.body is source), None)
        if parsed is None:
            return dumps(body)
        try:
            parts = []
            for key, value in body.items():
                if key in _ITEM_KEYS and isinstance(value, list):
                    where = {id(item[3]): k for k, item in enumerate(parsed.items)}
                    text = b"[" + b",".join(_item(parsed, where, item) for item in value) + b"]"
                else:
                    text = _dumped(parsed, value)
                parts.append(dumps(key) + b":" + text)
        except Exception:  # serialized whole, it raises as it always did
            return dumps(body)
        return b"{" + b",".join(parts) + b"}"


def _item(parsed: _Parsed, where: dict[int, int], item: Any) -> bytes:
    """`dumps(item)`, once for a raw item of `parsed` (at `where[id(item)]` in its items)."""
    k = where.get(id(item))
    if k is None:  # written by the gateway, not read
        return dumps(item)
    known = parsed.item_dumps[k]
    if known is None:
        known = parsed.item_dumps[k] = dumps(item)
    return known


def _dumped(parsed: _Parsed, value: Any) -> bytes:
    if id(value) not in parsed.dumped:  # written by the gateway, not read
        return dumps(value)
    known = parsed.dumped[id(value)]
    if known is None:
        known = parsed.dumped[id(value)] = dumps(value)
    return known


class _Text:
    """The part of a body's bytes from `start` on, decoded, and where its characters lie in the
    bytes (each character one byte when it is ASCII; else counted as the scan goes on)."""

    def __init__(self, raw: bytes, start: int) -> None:
        self.raw = raw
        self.text = raw[start:].decode("utf-8")  # strict: anything else is json.loads's
        self.start = start
        self.ascii = self.text.isascii()
        self._at = (0, start)  # a character and the byte it begins at

    def byte(self, i: int) -> int:
        """The offset in the body's bytes of character `i`."""
        if self.ascii:
            return self.start + i
        at, byte = self._at
        if i < at:
            at, byte = 0, self.start
        byte += len(self.text[at:i].encode("utf-8"))
        self._at = (i, byte)
        return byte

    def holds(self, at: int, before: _Parsed, start: int, end: int) -> bool:
        """Whether the body holds `before`'s bytes `start:end` at byte `at` (compared where they
        lie: a re-sent history is most of a body, copying it to compare costs more than the
        comparison)."""
        return self.raw.startswith(memoryview(before.raw)[start:end], at)

    def known(self, i: int, byte: int) -> None:
        """Character `i` begins at `byte` (found by a comparison): no need to count to it."""
        if not self.ascii:
            self._at = (i, byte)


def _ws(text: str, at: int) -> int:
    match = _WS.match(text, at)
    return match.end() if match else at


def _scan(raw: bytes, before: _Parsed | None) -> _Parsed | None:
    """`raw` (a JSON object) parsed as `json.loads` parses it, values and items whose bytes equal
    the ones `before` held at the same place being `before`'s objects; None when unsure. The
    bytes up to the end of the items `raw` re-sends are not decoded."""
    parsed = _Parsed({}, raw)
    kept = _kept(raw, before) if before is not None else 0
    if before is None or not kept:
        text = _Text(raw, 0)
        return _members(text, _ws(text.text, 1), parsed, before, first=True)
    # the bytes up to the end of item `kept` are `before`'s: so is everything they hold
    for key in before.head:
        value = parsed.body[key] = before.body[key]
        if key in before.fields:
            parsed.fields[key] = before.fields[key]
            _carry(parsed, before, value)
    parsed.head, parsed.item_key = list(before.head), before.item_key
    same = before.items[:kept]
    parsed.items.extend(same)
    parsed.item_dumps.extend(before.item_dumps[:kept])
    items = parsed.values = parsed.body[str(before.item_key)] = before.values[:kept]
    text = _Text(raw, same[-1][1])
    src = text.text
    i = _ws(src, 0)
    sep = src[i : i + 1]
    if sep == ",":
        i = _items(text, _ws(src, i + 1), parsed, before, items)
    elif sep == "]":
        i += 1
    else:
        return None
    return _members(text, _ws(src, i), parsed, before, first=False)


def _kept(raw: bytes, before: _Parsed) -> int:
    """How many of `before`'s items `raw` holds as they were, with every byte before them: the
    most whose last byte ends a prefix `raw` shares with `before`. All of them (an agent's next
    request) and all but the last (a cache breakpoint moved on) are tried first; each
    comparison goes on from the end of a prefix already found shared and stops at the first
    byte that differs, so a re-sent history costs about one comparison, not one per item."""
    olds, old = before.items, memoryview(before.raw)
    lo, hi, shared = 0, len(olds), 0  # `shared`: the bytes found equal, to the end of item `lo`
    for probe in (hi, hi - 1):
        if probe > 0 and raw.startswith(old[: olds[probe - 1][1]]):
            return probe
        hi = probe - 1
    while lo < hi:
        mid = (lo + hi + 1) // 2
        end = olds[mid - 1][1]
        if raw.startswith(old[shared:end], shared):
            lo, shared = mid, end
        else:
            hi = mid - 1
    return max(lo, 0)


def _members(
    text: _Text, i: int, parsed: _Parsed, before: _Parsed | None, first: bool
) -> _Parsed | None:
    """The object's members from `i` (after its `{`, or after a member when not `first`) to its
    `}`, which must end the body."""
    src, body = text.text, parsed.body
    if src[i : i + 1] == "}":
        return parsed if _ws(src, i + 1) == len(src) else None
    if not first:
        if src[i : i + 1] != ",":
            return None
        i = _ws(src, i + 1)
    while True:
        if src[i : i + 1] != '"':
            return None
        key, i = _STRING(src, i + 1, True)
        if key in body:  # given twice: json.loads's (the last one wins)
            return None
        i = _ws(src, i)
        if src[i : i + 1] != ":":
            return None
        i = _ws(src, i + 1)
        if parsed.item_key is None and key in _ITEM_KEYS and src[i : i + 1] == "[":
            parsed.item_key = key
            items: list[Any] = []
            body[key] = parsed.values = items
            i = _ws(src, i + 1)
            end = i + 1 if src[i : i + 1] == "]" else _items(text, i, parsed, before, items)
        else:
            old = before.fields.get(key) if before is not None else None
            value, end, span = _value(text, i, before, old)
            body[key] = value
            if src[i : i + 1] in _DELIMITED:
                parsed.fields[key] = span
                _carry(parsed, before, value)
            if parsed.item_key is None:
                parsed.head.append(key)
        i = _ws(src, end)
        sep = src[i : i + 1]
        if sep == "}":
            return parsed if _ws(src, i + 1) == len(src) else None
        if sep != ",":
            return None
        i = _ws(src, i + 1)


def _value(
    text: _Text, at: int, before: _Parsed | None, old: _Span | None
) -> tuple[Any, int, _Span]:
    """The value at character `at`, the character after it, and its span: `old`'s object when
    its bytes are there (a delimited value), else parsed."""
    byte = text.byte(at)
    if old is not None and before is not None and text.text[at : at + 1] in _DELIMITED:
        start, end, chars, value = old
        if text.holds(byte, before, start, end):
            text.known(at + chars, byte + end - start)
            return value, at + chars, (byte, byte + end - start, chars, value)
    value, stop = _SCAN(text.text, at)
    return value, stop, (byte, text.byte(stop), stop - at, value)


def _items(text: _Text, i: int, parsed: _Parsed, before: _Parsed | None, items: list[Any]) -> int:
    """The array's items from `i` (an item there) to the character after its `]`, each whose
    bytes are the ones at the same index of `before`'s array being its object."""
    src = text.text
    olds = before.items if before is not None else []
    while True:
        index = len(items)
        old = olds[index] if index < len(olds) else None
        value, end, span = _value(text, i, before, old)
        parsed.items.append(span)
        parsed.item_dumps.append(
            before.item_dumps[index]
            if before is not None and old is not None and value is old[3]
            else None
        )
        items.append(value)
        i = _ws(src, end)
        sep = src[i : i + 1]
        if sep == "]":
            return i + 1
        if sep != ",":
            raise ValueError("not an array")
        i = _ws(src, i + 1)


def _carry(parsed: _Parsed, before: _Parsed | None, value: Any) -> None:
    """`value` is one of `parsed`'s (held by it); a serialization `before` holds is its too."""
    parsed.dumped[id(value)] = before.dumped.get(id(value)) if before is not None else None
