"""Reading JSON and JSON Lines text with one-line errors: the one JSON reader of sessions, stashes,
recovery stores and option values (the ground floor: it needs nothing of compactkit but its errors)."""

from __future__ import annotations

import codecs
import json
import re
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, BinaryIO, NoReturn

from .errors import BadInputError

MAX_DEPTH = 100
"""Arrays and objects nested deeper than this in a session, stash or option value are refused as
bad input (real sessions nest about 12 levels)."""


_ESCAPE = re.compile(
    r"\\(?:\\|u[dD][89abAB][0-9a-fA-F]{2}\\u[dD][c-fC-F][0-9a-fA-F]{2}|u[dD][89a-fA-F][0-9a-fA-F]{2})"
)
"""An escaped backslash, a surrogate pair, or a lone surrogate escape (scanned left to right, so
that `\\\\ud800` stays a backslash and text)."""


def _lone_surrogate(match: re.Match[str]) -> str:
    escape = match.group()
    return "\\ufffd" if len(escape) == 6 else escape


def _fix_surrogates(text: str) -> str:
    """`text` with each lone surrogate escape (no text: nothing can write it as UTF-8) made U+FFFD."""
    return _ESCAPE.sub(_lone_surrogate, text)


def loads(
    text: str,
    path: str,
    line: int | None = None,
    *,
    object_hook: Callable[..., Any] | None = None,
) -> Any:
    """`json.loads`, with JSON nested deeper than `MAX_DEPTH` and numbers longer than Python reads
    as one-line `BadInputError`s; `json.JSONDecodeError` passes through. A lone UTF-16 surrogate
    escape (`"\\ud83d"` without its pair, as a string cut in JavaScript leaves) reads as U+FFFD,
    so that every string read can be written as UTF-8."""
    too_deep = BadInputError(f"JSON nested deeper than {MAX_DEPTH} levels", path=path, line=line)
    if "\\ud" in text or "\\uD" in text:
        text = _fix_surrogates(text)
    try:
        value = json.loads(text, object_hook=object_hook)
    except json.JSONDecodeError:
        raise
    except RecursionError:  # deeper than the interpreter parses, so deeper than MAX_DEPTH
        raise too_deep from None
    except ValueError:  # an integer of more digits than int() converts
        raise BadInputError("a number has too many digits to read", path=path, line=line) from None
    if _deeper(value, MAX_DEPTH):
        raise too_deep
    return value


def _deeper(value: Any, levels: int) -> bool:
    """Whether arrays and objects nest in `value` (one itself) more than `levels` levels."""
    level = [value] if isinstance(value, (dict, list)) else []
    for _ in range(levels):
        level = [
            child
            for item in level
            for child in (item.values() if isinstance(item, dict) else item)
            if isinstance(child, (dict, list))
        ]
        if not level:
            return False
    return True


_READ = 1 << 16  # bytes read at a time by `read_value` (its text's copies are a few times that)
_IN_ESCAPES = frozenset("\\u0123456789abcdefABCDEF")
"""The characters of the escapes `_fix_surrogates` reads: text cut before any other character is
cut between two of them, so each piece can have its lone surrogates fixed on its own."""
_WHITESPACE = re.compile(r"[ \t\n\r]*")  # what JSON skips between values (as `json` does)
_STREAMED_DEPTH = 3
"""The outer levels parsed a member at a time: the top-level value, and containers held by an
object up to this depth (`{"messages": [...]}`, `{"info": {...}, "history": [...]}`); every
other value (a message, a record: an element of such an array) is parsed whole."""


def not_utf8(offset: int, display: str) -> BadInputError:
    """The one-line error of a session file holding a byte that is not UTF-8 at `offset`."""
    return BadInputError(
        f"not UTF-8 text (bad byte at offset {offset})",
        path=display,
        hint="expected a JSON or JSONL session file",
    )


class _Text:
    """The text of a UTF-8 file (a BOM dropped), a piece at a time, each piece with its lone
    surrogate escapes made U+FFFD (as `loads` does: same length, so positions stay the file's)."""

    def __init__(self, handle: BinaryIO, display: str) -> None:
        self.handle, self.display = handle, display
        self.decoder = codecs.getincrementaldecoder("utf-8-sig")()
        self.carry = ""  # decoded text after the last cut between escapes
        self.offset = 0  # bytes read
        self.done = False

    def read(self, want: int) -> str:
        """At least `want` more characters (fewer only at the end of the file, "" after it).
        Raises `BadInputError` for binary data and a byte that is not UTF-8 (its offset)."""
        pieces: list[str] = []
        got = 0
        while got < want and not self.done:
            raw = self.handle.read(max(_READ, want - got))
            if self.offset == 0 and b"\x00" in raw[:65536]:
                raise BadInputError(
                    "binary data, not a text session file",
                    path=self.display,
                    hint="expected JSON or JSONL",
                )
            pending = len(self.decoder.getstate()[0])  # bytes of a character the last read cut
            try:
                text = self.carry + self.decoder.decode(raw, final=not raw)
            except UnicodeDecodeError as exc:
                raise not_utf8(self.offset - pending + exc.start, self.display) from None
            self.offset += len(raw)
            end = len(text) if not raw else _last_cut(text)
            self.carry, self.done = text[end:], not raw
            piece = text[:end]
            if "\\ud" in piece or "\\uD" in piece:
                piece = _fix_surrogates(piece)
            pieces.append(piece)
            got += len(piece)
        return "".join(pieces)


def _last_cut(text: str) -> int:
    """Where to cut `text` between escapes: before the last of its last 64 characters that no
    escape holds (0, nothing to cut off, when there is none)."""
    for end in range(len(text) - 1, max(len(text) - 64, 0) - 1, -1):
        if text[end] not in _IN_ESCAPES:
            return end
    return 0


class _Parser:
    """One JSON value parsed from `_Text` with no copy of the whole text ever held: the outer
    levels (`_STREAMED_DEPTH`) a member at a time, each other value whole by `json`'s own
    scanner from a buffer that holds it. A value cut at the end of the buffer is parsed again
    once the buffer holds at least twice as much (so the work stays linear in the file)."""

    def __init__(self, text: _Text, path: str, object_hook: Callable[..., Any] | None) -> None:
        self.text, self.path, self.object_hook = text, path, object_hook
        self.decoder = json.JSONDecoder(object_hook=object_hook)
        self.buf = ""
        self.pos = 0
        self.too_deep = False  # a value nested deeper than MAX_DEPTH: refused once all parses

    def more(self) -> bool:
        """Drop what is parsed and read at least as much text as is left (a value cut again
        and again is parsed on a buffer doubled each time); False at the end of the file."""
        rest = self.buf[self.pos :]
        added = self.text.read(max(_READ, len(rest)))
        if not added:
            return False
        self.buf, self.pos = rest + added, 0
        return True

    def peek(self) -> str:
        """The next character that is not whitespace ("" at the end of the text)."""
        while True:
            self.pos = _skip_whitespace(self.buf, self.pos)
            if self.pos < len(self.buf):
                return self.buf[self.pos]
            if not self.more():
                return ""

    def error(self, what: str) -> json.JSONDecodeError:
        return json.JSONDecodeError(what, self.buf, self.pos)

    def document(self) -> Any:
        value = self.value(1, in_object=True)
        if self.peek():
            raise self.error("Extra data")
        if self.too_deep:
            raise BadInputError(f"JSON nested deeper than {MAX_DEPTH} levels", path=self.path)
        return value

    def value(self, depth: int, *, in_object: bool) -> Any:
        """The value at the next character, `depth` levels down (the top-level value is 1)."""
        first = self.peek()
        if in_object and depth <= _STREAMED_DEPTH and first in ("[", "{"):
            self.pos += 1
            return self.array(depth) if first == "[" else self.object(depth)
        return self.whole(depth)

    def array(self, depth: int) -> list[Any]:
        items: list[Any] = []
        if self.peek() == "]":
            self.pos += 1
            return items
        while True:
            items.append(self.value(depth + 1, in_object=False))
            if not self.after_member("]"):
                return items

    def object(self, depth: int) -> Any:
        members: dict[str, Any] = {}
        if self.peek() == "}":
            self.pos += 1
            return self.object_hook(members) if self.object_hook else members
        while True:
            if self.peek() != '"':
                raise self.error("Expecting property name enclosed in double quotes")
            key = self.whole(depth + 1)
            if self.peek() != ":":
                raise self.error("Expecting ':' delimiter")
            self.pos += 1
            members[key] = self.value(depth + 1, in_object=True)
            if not self.after_member("}"):
                return self.object_hook(members) if self.object_hook else members

    def after_member(self, close: str) -> bool:
        """True after a comma (another member follows), False after `close` (the end)."""
        found = self.peek()
        if found in (",", close):
            self.pos += 1
            return found == ","
        raise self.error("Expecting ',' delimiter")

    def whole(self, depth: int) -> Any:
        """The value at the next character, parsed whole by `json` (its objects through
        `object_hook`); a number is read on only once text follows it (`1` may go on `.5`)."""
        self.peek()
        while True:
            try:
                value, end = self.decoder.raw_decode(self.buf, self.pos)
            except json.JSONDecodeError as exc:
                if self.cut(exc) and self.more():
                    continue
                raise
            except RecursionError:  # deeper than the interpreter parses, so than MAX_DEPTH
                self.refuse(f"JSON nested deeper than {MAX_DEPTH} levels")
            except ValueError:  # an integer of more digits than int() converts
                self.refuse("a number has too many digits to read")
            if value.__class__ in (int, float) and len(self.buf) - end < 3 and self.more():
                continue
            self.pos = end
            if _deeper(value, MAX_DEPTH - depth + 1):
                self.too_deep = True
            return value

    def cut(self, exc: json.JSONDecodeError) -> bool:
        """Whether `exc` may come from a value cut at the end of the buffer (it is at the end:
        every value `json` reads ends in a few characters it checks, and a string runs on to
        its closing quote), not from text that is not JSON."""
        return exc.pos >= len(self.buf) - 16 or exc.msg.startswith("Unterminated string")

    def refuse(self, what: str) -> NoReturn:
        """A one-line `BadInputError`, once the rest of the file is read: a byte further on that
        is not UTF-8 is the error a whole read gives."""
        while self.text.read(_READ):
            pass
        raise BadInputError(what, path=self.path)


def _skip_whitespace(text: str, pos: int) -> int:
    match = _WHITESPACE.match(text, pos)
    return match.end() if match else pos


def read_value(path: Path, display: str, object_hook: Callable[..., Any] | None = None) -> Any:
    """The one JSON value of the file at `path` (UTF-8, a BOM dropped), `loads` of its text,
    read `_READ` bytes at a time: no copy of the whole text is ever held beside the value (a
    session's text takes as much memory as the file, four times that with one emoji).
    `json.JSONDecodeError` when the text is not one JSON value (its position is not the file's:
    parse the text again to report one); `BadInputError` for binary data, a byte that is not
    UTF-8 (its offset), nesting deeper than `MAX_DEPTH` and a number too long to read;
    `OSError` passes through."""
    with path.open("rb") as handle:
        return _Parser(_Text(handle, display), display, object_hook).document()


# --------------------------------------------------------------------------- reading JSON Lines

_BOM = b"\xef\xbb\xbf"
_SHORT = 40


def interned(obj: dict[str, Any]) -> dict[str, Any]:
    """A decoded JSON object with its keys and short string values (record types, roles, session
    ids, model names) interned: a long session repeats them in every record, and one shared string
    instead of one per record saves a fifth of the parsed size."""
    intern = sys.intern
    return {
        intern(k): intern(v) if v.__class__ is str and len(v) <= _SHORT else v
        for k, v in obj.items()
    }


def stream_jsonl(path: Path, display: str) -> tuple[list[Any], list[tuple[int, str, bool]]] | None:
    """The records of a JSON Lines file, read one line at a time (no copy of the whole file, as
    bytes, text or lines, is ever held), and its lines that are not JSON (number, reason, whether
    it is the last non-blank line); None when the file is not JSON Lines, that is when its first
    line is not one whole JSON object followed by at least one more line (the caller then reads
    it as one JSON value). Errors are the one-line `BadInputError`s of a whole read: binary data,
    a byte that is not UTF-8 (its offset in the file).
    """
    records: list[Any] = []
    bad: list[tuple[int, str, bool]] = []
    last_line = 0
    offset = 0
    with path.open("rb") as handle:
        head = handle.read(65536)
        if b"\x00" in head or _not_jsonl(head, handle):
            return None  # the whole read says "binary data", or reads the one JSON value
        handle.seek(0)
        for number, raw in enumerate(handle, start=1):
            start = len(_BOM) if number == 1 and raw.startswith(_BOM) else 0
            try:
                line = raw[start:].decode("utf-8")
            except UnicodeDecodeError as exc:
                if number == 1:
                    return None
                raise not_utf8(offset + start + exc.start, display) from None
            offset += len(raw)
            if number == 1:
                if not line.lstrip().startswith("{"):
                    return None
                try:
                    records.append(loads(line, display, 1, object_hook=interned))
                except json.JSONDecodeError:
                    return None  # maybe one JSON value over several lines
                last_line = 1
                continue
            if line.strip():
                last_line = number
                try:
                    records.append(jsonl_record(line, display, number))
                except BadJsonLine as exc:
                    bad.append((number, exc.reason, False))
    if bad and bad[-1][0] == last_line:
        bad[-1] = (*bad[-1][:2], True)
    return (records, bad) if len(records) + len(bad) > 1 else None


def _not_jsonl(head: bytes, handle: BinaryIO) -> bool:
    """True when the file whose first bytes are `head` is surely not JSON Lines (its text does not
    start with `{`, or it holds one line only), told without reading its first line whole: a
    JSON document written on one line is that line (Cline's, a provider request)."""
    start = head[len(_BOM) :] if head.startswith(_BOM) else head
    if start.lstrip()[:1] not in (b"{", b""):
        return True
    handle.seek(0)
    while b"\n" not in (chunk := handle.read(1 << 20)):
        if not chunk:
            return True
    rest = chunk[chunk.index(b"\n") + 1 :]
    while not rest.strip():  # only ASCII whitespace: blank lines, as `str.strip` says too
        if not (rest := handle.read(1 << 20)):
            return True
    return False


class BadJsonLine(ValueError):
    """A JSONL line that is not JSON (`reason` says why); `error()` is the one-line refusal."""

    def __init__(self, reason: str, path: str, line: int) -> None:
        super().__init__(reason)
        self.reason, self.path, self.line = reason, path, line

    def error(self) -> Exception:
        return BadInputError(
            f"invalid or truncated JSONL record: {self.reason}",
            path=self.path,
            line=self.line,
            hint="repair or remove that line",
        )


def jsonl_record(line: str, path: str, number: int) -> Any:
    """One JSONL record (its keys interned), or `BadJsonLine` when the line is not JSON (a
    record nested too deep or a number too long is a one-line `BadInputError`, whatever the
    format)."""
    try:
        return loads(line, path, number, object_hook=interned)
    except json.JSONDecodeError as exc:
        raise BadJsonLine(json_error_text(exc), path, number) from None


def json_error_text(exc: json.JSONDecodeError, *, line: bool = False) -> str:
    """What is wrong and where: "Expecting ',' delimiter at column 12"; json's messages for a cut
    string or a stray control character end in "at" ("Unterminated string starting at column 7",
    not "... at at column 7")."""
    where = f"line {exc.lineno} column {exc.colno}" if line else f"column {exc.colno}"
    return f"{exc.msg} {where}" if exc.msg.endswith(" at") else f"{exc.msg} at {where}"
