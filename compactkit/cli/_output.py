"""The one way commands write results: text, versioned JSON or rich tables, to stdout or a file.

`-` (or no path) is stdout; a path is written atomically (readers see the old file or the new one).
Machine output is versioned: a JSON object must carry a `schema` field such as
`compactkit.inspect/1`.
"""

from __future__ import annotations

import io
import json
from collections.abc import Mapping
from typing import Any

import click

from ..errors import BadInputError
from ..io import write_atomic
from ._options import STDIO


def emit(
    value: str | Mapping[str, Any] | Any, to: str | None = None, *, lines: bool = False
) -> None:
    """Write `value` to `to` (None or `-`: stdout).

    A string is written as it is; a mapping as versioned JSON (indented, or on one line with
    `lines=True` for JSON Lines); anything else is a rich renderable (a table, a group of them),
    rendered without colour when it goes to a file.
    """
    if isinstance(value, str):
        text = value
    elif isinstance(value, Mapping):
        if "schema" not in value:
            raise ValueError("machine output must name its schema")  # a bug in a command
        text = json.dumps(value, ensure_ascii=False, indent=None if lines else 2) + "\n"
    else:
        rendered = _render(value, to)
        if rendered is None:
            return
        text = rendered
    if to is None or to == STDIO:
        click.echo(text, nl=False)
        return
    try:
        write_atomic(to, text)
    except OSError as exc:
        raise BadInputError(f"cannot write: {exc.strerror or exc}", path=to) from None


def _render(renderable: Any, to: str | None) -> str | None:
    """Rich output: printed to the terminal directly (None), or as plain text for a file."""
    from rich.console import Console

    if to is None or to == STDIO:
        Console(highlight=False).print(renderable)
        return None
    buffer = io.StringIO()
    Console(file=buffer, highlight=False, width=120, color_system=None).print(renderable)
    return buffer.getvalue()


def say(line: str, *, err: bool = False) -> None:
    """One human line (a summary, a warning) on stdout or stderr."""
    click.echo(line, err=err)
