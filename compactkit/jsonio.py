"""Reading JSON text with one-line errors: the one JSON reader of sessions, stashes, recovery
stores and option values (the ground floor: it needs nothing of compactkit but its errors)."""

from __future__ import annotations

import codecs
import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

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
    surrogates_fixed: bool = False,
) -> Any:
    """`json.loads`, with JSON nested deeper than `MAX_DEPTH` and numbers longer than Python reads
    as one-line `BadInputError`s; `json.JSONDecodeError` passes through. A lone UTF-16 surrogate
    escape (`"\\ud83d"` without its pair, as a string cut in JavaScript leaves) reads as U+FFFD,
    so that every string read can be written as UTF-8 (`surrogates_fixed`: `read_text` did it)."""
    too_deep = BadInputError(f"JSON nested deeper than {MAX_DEPTH} levels", path=path, line=line)
    if not surrogates_fixed and ("\\ud" in text or "\\uD" in text):
        text = _fix_surrogates(text)
    try:
        value = json.loads(text, object_hook=object_hook)
    except json.JSONDecodeError:
        raise
    except RecursionError:  # deeper than the interpreter parses, so deeper than MAX_DEPTH
        raise too_deep from None
    except ValueError:  # an integer of more digits than int() converts
        raise BadInputError("a number has too many digits to read", path=path, line=line) from None
    level = [value]
    for _ in range(MAX_DEPTH):
        level = [
            child
            for item in level
            if isinstance(item, (dict, list))
            for child in (item.values() if isinstance(item, dict) else item)
            if isinstance(child, (dict, list))
        ]
        if not level:
            return value
    raise too_deep


_READ = 1 << 20  # bytes read at a time by `read_text`
_WIDE = re.compile(r"[^\x00-\xff]+")
_ESCAPED_WIDE = re.compile(r"(?<!\\)(?:\\\\)*\\[^\x00-\xff]")
"""A character above U+00FF right after an escaping backslash: invalid JSON, left as it is."""
_BACKSLASH_WIDE = re.compile(r"\\[^\x00-\xff]")  # what `_ESCAPED_WIDE` needs, found fast
_CUT_BEFORE = '",:{}[] \n'
"""Characters that no escape holds (`\\\\`, `\\uXXXX`): text cut before one is cut between
escapes, so each piece can be narrowed on its own."""


def _narrow(piece: str) -> str:
    """`piece` of JSON text with its lone surrogate escapes made U+FFFD and each character above
    U+00FF written as a JSON escape (same value once parsed, one byte a character as a string)."""
    if "\\ud" in piece or "\\uD" in piece:
        piece = _fix_surrogates(piece)
    if piece.isascii() or not _WIDE.search(piece):
        return piece
    if _BACKSLASH_WIDE.search(piece) and _ESCAPED_WIDE.search(piece):
        return piece
    return _WIDE.sub(lambda m: json.dumps(m[0])[1:-1], piece)


def not_utf8(offset: int, display: str) -> BadInputError:
    """The one-line error of a session file holding a byte that is not UTF-8 at `offset`."""
    return BadInputError(
        f"not UTF-8 text (bad byte at offset {offset})",
        path=display,
        hint="expected a JSON or JSONL session file",
    )


def read_text(path: Path, display: str) -> str:
    """The JSON text of the file at `path` (UTF-8, a BOM dropped) for `loads(...,
    surrogates_fixed=True)`, made a megabyte at a time: every character above U+00FF is written
    as its JSON escape, because one emoji makes a Python string four bytes a character, and a
    whole session read as one such string took four times the file in memory (each string
    parsed from the text is wide only when it holds such a character). The value parsed is the
    same; positions in a parse error are not (parse the plain text again to report one).
    Raises `BadInputError` for binary data and a byte that is not UTF-8 (its offset);
    `OSError` passes through."""
    decoder = codecs.getincrementaldecoder("utf-8-sig")()
    pieces: list[str] = []
    carry = ""
    offset = 0
    with path.open("rb") as handle:
        while True:
            raw = handle.read(_READ)
            if offset == 0 and b"\x00" in raw[:65536]:
                raise BadInputError(
                    "binary data, not a text session file",
                    path=display,
                    hint="expected JSON or JSONL",
                )
            pending = len(decoder.getstate()[0])  # bytes of a character the last read cut
            try:
                text = carry + decoder.decode(raw, final=not raw)
            except UnicodeDecodeError as exc:
                raise not_utf8(offset - pending + exc.start, display) from None
            offset += len(raw)
            if not raw:
                pieces.append(_narrow(text))
                break
            end = max(text.rfind(c) for c in _CUT_BEFORE)
            end = max(end, 0)
            pieces.append(_narrow(text[:end]))
            carry = text[end:]
    return "".join(pieces)
