"""Request bodies parsed and serialized as `json.loads` and `json.dumps` do, reusing what a recent
request of the same client held as the very same text.

An agent re-sends its whole history on every call: most of a body is text the gateway parsed (and
serialized) one request before. A JSON object or array or string is a function of its text alone
(its end is its closing delimiter), so a raw item of `messages`/`input`, or a top-level field,
whose text equals the one a recent body held at the same place is that body's object, and its
serialization that body's bytes. Anything unusual (a body not starting with `{`, not strict UTF-8,
not well formed) is left to `json.loads`, which then parses it or raises as it always did.
"""

from __future__ import annotations

import json
import operator
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


def dumps(value: Any) -> bytes:
    """What the gateway sends for a value it wrote: compact JSON, UTF-8, non-ASCII as it is."""
    return json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode("utf-8")


@dataclass
class _Parsed:
    """One body as scanned: its text, where each top-level value and raw item lies in it, and
    the bytes of those serialized so far (by object id; the objects are held here)."""

    body: dict[str, Any]
    text: str
    fields: dict[str, tuple[int, int, Any]] = field(default_factory=dict)
    items: list[tuple[int, int, Any]] = field(default_factory=list)
    dumped: dict[int, bytes | None] = field(default_factory=dict)
    """Serializations of the top-level values (None: not yet), by object id."""
    item_dumps: list[bytes | None] = field(default_factory=list)
    """Serializations of the raw items, as `items` holds them (None: not yet)."""
    raw: bytes | None = None
    """The body's bytes when they are ASCII (each character one byte, at the same offset):
    compared with the next body's without copying (`_holds`)."""

    @property
    def size(self) -> int:
        """The bytes it holds, counted: its text twice (the text and what it parsed to), and
        its raw bytes."""
        return 2 * len(self.text) + (len(self.raw) if self.raw is not None else 0)


class Bodies:
    """The last bodies parsed (at most `limit`, least recently used dropped)."""

    def __init__(self, limit: int = 32, max_bytes: int | None = None) -> None:
        """At most `limit` bodies, of at most `max_bytes` in all (each counted twice its size:
        its text and what it parsed to)."""
        self._recent: OrderedDict[bytes, _Parsed] = OrderedDict()
        self._limit = limit
        self._max_bytes = max_bytes
        self._bytes = 0
        self._lock = threading.Lock()

    def loads(self, raw: bytes) -> Any | None:
        """`json.loads(raw)`, or None when `raw` is left to `json.loads` (call it then)."""
        if not raw.startswith(b"{"):
            return None
        key = raw[:_KEY_BYTES]
        with self._lock:
            before = self._recent.get(key)
        try:
            parsed = _scan(raw.decode("utf-8"), before, raw)
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
        """The bytes held (the bodies' text, twice)."""
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
                    where = {id(item): k for k, (_, _, item) in enumerate(parsed.items)}
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


def _ws(text: str, at: int) -> int:
    match = _WS.match(text, at)
    return match.end() if match else at


def _holds(parsed: _Parsed, at: int, before: _Parsed, start: int, end: int) -> bool:
    """Whether `parsed`'s text holds `before.text[start:end]` at `at`: compared as bytes, with no
    copy of either, when both are ASCII (a re-sent history is most of a body: copying it to
    compare costs four times the comparison)."""
    if parsed.raw is not None and before.raw is not None:
        return parsed.raw.startswith(memoryview(before.raw)[start:end], at)
    return parsed.text.startswith(before.text[start:end], at)


def _scan(text: str, before: _Parsed | None, raw: bytes | None = None) -> _Parsed | None:
    """`text` (a JSON object; `raw`, its bytes) parsed as `json.loads` parses it, values and
    items whose text equals the one `before` held at the same place being `before`'s objects;
    None when unsure."""
    body: dict[str, Any] = {}
    parsed = _Parsed(body, text, raw=raw if raw is not None and len(raw) == len(text) else None)
    i = _ws(text, 1)
    if text[i : i + 1] == "}":
        return parsed if _ws(text, i + 1) == len(text) else None
    while True:
        if text[i : i + 1] != '"':
            return None
        key, i = _STRING(text, i + 1, True)
        i = _ws(text, i)
        if text[i : i + 1] != ":":
            return None
        i = _ws(text, i + 1)
        if key in _ITEM_KEYS and text[i : i + 1] == "[":
            value, end = _items(text, i, parsed, before)
        else:
            old = before.fields.get(key) if before is not None else None
            value, end = _value(parsed, i, before, old)
            if text[i : i + 1] in _DELIMITED:
                parsed.fields[key] = (i, end, value)
                _carry(parsed, before, value)
        body[key] = value
        i = _ws(text, end)
        sep = text[i : i + 1]
        if sep == "}":
            break
        if sep != ",":
            return None
        i = _ws(text, i + 1)
    return parsed if _ws(text, i + 1) == len(text) else None


def _value(
    parsed: _Parsed, at: int, before: _Parsed | None, old: tuple[int, int, Any] | None
) -> tuple[Any, int]:
    """The value at `at` of `parsed`'s text: `old`'s object when its text is the same (a
    delimited value), else parsed."""
    text = parsed.text
    if old is not None and before is not None and text[at : at + 1] in _DELIMITED:
        start, end, value = old
        if _holds(parsed, at, before, start, end):
            return value, at + end - start
    return _SCAN(text, at)  # type: ignore[no-any-return]


def _items(text: str, at: int, parsed: _Parsed, before: _Parsed | None) -> tuple[list[Any], int]:
    """The array at `at` (`[` there), each object whose text is the one at the same index of
    `before`'s array being `before`'s object."""
    items: list[Any] = []
    olds = before.items if before is not None else []
    i = _ws(text, at + 1)
    if text[i : i + 1] == "]":
        return items, i + 1
    if before is not None:
        i = _same_items(text, i, parsed, before, items)
        if text[i : i + 1] == "]":
            return items, i + 1
    while True:
        index = len(items)
        old = olds[index] if index < len(olds) else None
        if text[i : i + 1] == "{":
            value, end = _value(parsed, i, before, old)
            parsed.items.append((i, end, value))
            parsed.item_dumps.append(
                before.item_dumps[index]
                if before is not None and old is not None and value is old[2]
                else None
            )
        else:
            value, end = _SCAN(text, i)
        items.append(value)
        i = _ws(text, end)
        sep = text[i : i + 1]
        if sep == "]":
            return items, i + 1
        if sep != ",":
            raise ValueError("not an array")
        i = _ws(text, i + 1)


def _same_items(text: str, at: int, parsed: _Parsed, before: _Parsed, items: list[Any]) -> int:
    """Where scanning the array whose first item is at `at` goes on, after taking in one step
    every item of `before` the text holds as it was, at the same place: the text up to the end
    of one of them equal to `before`'s (a single comparison) makes them all `before`'s, so a
    body re-sending a long history costs a comparison, not a scan of each item."""
    olds = before.items
    if not olds or olds[0][0] != at:
        return at
    lo, hi = 0, len(olds)  # the most items whose text up to their end is `before`'s
    if _holds(parsed, at, before, at, olds[-1][1]):
        lo = hi  # all of them, as an agent's next request has them
    else:
        hi -= 1
    while lo < hi:
        mid = (lo + hi + 1) // 2
        end = olds[mid - 1][1]
        if _holds(parsed, at, before, at, end):
            lo = mid
        else:
            hi = mid - 1
    if lo == 0:
        return at
    same = olds[:lo]
    parsed.items.extend(same)
    values = list(map(operator.itemgetter(2), same))
    items.extend(values)
    parsed.item_dumps.extend(before.item_dumps[:lo])
    i = _ws(text, same[-1][1])
    if text[i : i + 1] == ",":
        i = _ws(text, i + 1)
    elif text[i : i + 1] != "]":
        raise ValueError("not an array")
    return i


def _carry(parsed: _Parsed, before: _Parsed | None, value: Any) -> None:
    """`value` is one of `parsed`'s (held by it); a serialization `before` holds is its too."""
    parsed.dumped[id(value)] = before.dumped.get(id(value)) if before is not None else None
