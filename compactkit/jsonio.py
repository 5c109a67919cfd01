"""Reading JSON text with one-line errors: the one JSON reader of sessions, stashes, recovery
stores and option values (the ground floor: it needs nothing of compactkit but its errors)."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
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


def loads(
    text: str, path: str, line: int | None = None, *, object_hook: Callable[..., Any] | None = None
) -> Any:
    """`json.loads`, with JSON nested deeper than `MAX_DEPTH` and numbers longer than Python reads
    as one-line `BadInputError`s; `json.JSONDecodeError` passes through. A lone UTF-16 surrogate
    escape (`"\\ud83d"` without its pair, as a string cut in JavaScript leaves) reads as U+FFFD,
    so that every string read can be written as UTF-8."""
    too_deep = BadInputError(f"JSON nested deeper than {MAX_DEPTH} levels", path=path, line=line)
    if "\\ud" in text or "\\uD" in text:  # a lone surrogate escape is no text: U+FFFD instead
        text = _ESCAPE.sub(_lone_surrogate, text)
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
