"""The one way commands write results: text, versioned JSON or rich tables, to stdout or a file.

`-` (or no path) is stdout; a path is written atomically (readers see the old file or the new one).
A command that writes files opens one `Outputs` before its work: it refuses an output that names an
input or another output and checks every output's folder, then stages each file and renames them
all together at the end (a failure or an interrupt leaves no partial set and no temporary file).
Machine output is versioned: a JSON object must carry a `schema` field such as
`compactkit.inspect/1`.

Every report, table and line goes through `compactkit.errors.redact` on its way out (no API key,
URL credential or authorization header is ever written); only a session itself (what `run`,
`convert` and `expand` write, and the stash) is written `verbatim`, since the user's words are
never rewritten.
"""

from __future__ import annotations

import io
import json
import os
import sys
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from types import TracebackType
from typing import Any, TextIO

import click

from ..atomic import OutputSet
from ..context import AgentContext
from ..errors import BadInputError, ConfigError, redact, redact_json, redacted
from ..formats.export import WriterOptions
from ..formats.loading import SessionAddress
from ..formats.writing import export
from ..registry import Registry
from ._options import STDIO


def emit(
    value: str | Mapping[str, Any] | Any,
    to: str | None = None,
    *,
    lines: bool = False,
    verbatim: bool = False,
) -> None:
    """Write `value` to `to` (None or `-`: stdout).

    A string is written as it is; a mapping as versioned JSON (indented, or on one line with
    `lines=True` for JSON Lines); anything else is a rich renderable (a table, a group of them),
    rendered without colour when it goes to a file. Everything is redacted but a session
    (`verbatim=True`). A command writing several files, or one that must be checked before its
    work, uses `Outputs` instead.
    """
    with Outputs() as outputs:
        outputs.emit(value, to, lines=lines, verbatim=verbatim)


def _text(
    value: str | Mapping[str, Any] | Any, to: str | None, lines: bool, verbatim: bool
) -> str | None:
    """`value` as the text `emit` writes (None: rich output already printed to the terminal)."""
    if isinstance(value, str):
        return value if verbatim else redact(value, one_line=False)
    if isinstance(value, Mapping):
        if "schema" not in value:
            raise ValueError("machine output must name its schema")  # a bug in a command
        data = value if verbatim else redact_json(value)
        return json.dumps(data, ensure_ascii=False, indent=None if lines else 2) + "\n"
    return _render(value, to)


def write_error(exc: OSError, path: str) -> BadInputError:
    """An OS error while writing `path`, as a one-line error naming `path` (never a temporary
    file's name)."""
    return BadInputError(f"cannot write: {exc.strerror or type(exc).__name__}", path=path)


class Outputs:
    """Every file one command writes, checked before the work and committed together.

    `Outputs(reads=[FILE, ...], output=PATH, stash=PATH, ...)` (keywords are option names, None
    and `-` are skipped) refuses, with exit 2 before anything runs: an output that names an input
    (`FILE#N` is FILE; the same file by a link counts), two outputs naming one file, an output
    that is a folder, or one whose folder is missing, not a folder or not writable. Used as a
    context manager, `emit` stages each file and the block's normal end renames them all; an
    exception or interrupt removes what was staged."""

    def __init__(self, reads: Iterable[str | SessionAddress] = (), **writes: str | None) -> None:
        self.paths = {name: path for name, path in writes.items() if path not in (None, STDIO)}
        check_outputs(list(reads), self.paths)
        self._set = OutputSet()

    def emit(
        self,
        value: str | Mapping[str, Any] | Any,
        to: str | None,
        *,
        lines: bool = False,
        verbatim: bool = False,
    ) -> None:
        """Like `emit`, but a file is staged, to be renamed with the others at `commit`."""
        text = _text(value, to, lines, verbatim)
        if text is None:
            return
        if to is None or to == STDIO:
            click.echo(text, nl=False)
            return
        try:
            self._set.add(to, text)
        except OSError as exc:
            raise write_error(exc, to) from None

    def stream(self, to: str, write: Callable[[TextIO], None]) -> None:
        """Stage the file `write(handle)` writes (output too large to hold as one string): session
        data (a stash, a recovery store), written verbatim."""
        try:
            self._set.add(to, write)
        except OSError as exc:
            raise write_error(exc, to) from None

    def commit(self) -> None:
        try:
            self._set.commit()
        except OSError as exc:
            raise write_error(exc, str(exc.filename)) from None

    def __enter__(self) -> Outputs:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        _exc: BaseException | None,
        _tb: TracebackType | None,
    ) -> None:
        if kind is None:
            self.commit()
        else:
            self._set.discard()


def _flag(name: str) -> str:
    return f"--{name.replace('_', '-')}"


def _same_file(a: str, b: str) -> bool:
    if os.path.realpath(a) == os.path.realpath(b):
        return True
    try:
        return os.path.samefile(a, b)
    except OSError:  # one of them does not exist (yet)
        return False


def check_outputs(reads: Iterable[str | SessionAddress], writes: Mapping[str, str]) -> None:
    """Refuse outputs that would overwrite an input or each other, or cannot be written."""
    inputs = [a.file for a in map(SessionAddress.parse, reads) if not a.stdin]
    seen: dict[str, str] = {}
    for name, path in writes.items():
        for other, earlier in seen.items():
            if _same_file(path, earlier):
                raise ConfigError(
                    f"{_flag(other)} and {_flag(name)} both name {path!r}: give each its own file"
                )
        for file in inputs:
            if _same_file(path, file):
                raise BadInputError(
                    f"{_flag(name)} names an input file, which is never overwritten",
                    path=path,
                    hint="write the output to another path",
                )
        check_writable(path)
        seen[name] = path


def check_writable(path: str) -> None:
    """An output path whose file can be created or replaced: not a folder, in a folder that
    exists and can be written to."""
    target = Path(path)
    folder = target.parent
    if target.is_dir():
        raise BadInputError("is a directory, not a file", path=path)
    if not folder.exists():
        raise BadInputError(f"cannot write: no such directory {str(folder)!r}", path=path)
    if not folder.is_dir():
        raise BadInputError(f"cannot write: {str(folder)!r} is not a directory", path=path)
    if not os.access(folder, os.W_OK | os.X_OK):
        raise BadInputError(f"cannot write: directory {str(folder)!r} is read-only", path=path)


def _render(renderable: Any, to: str | None) -> str | None:
    """Rich output: printed to the terminal directly (None), or as plain text for a file."""
    from rich.console import Console

    class Terminal(Console):
        def on_broken_pipe(self) -> None:  # rich exits 1 itself; the CLI stops quietly, exit 0
            raise BrokenPipeError

    if to is None or to == STDIO:
        Terminal(file=redacted(sys.stdout), highlight=False).print(renderable)
        return None
    buffer = io.StringIO()
    Console(file=buffer, highlight=False, width=120, color_system=None).print(renderable)
    return redact(buffer.getvalue(), one_line=False)


def written(
    contexts: AgentContext | Sequence[AgentContext],
    to: str,
    registry: Registry,
    options: WriterOptions | None = None,
) -> str:
    """`contexts` as the file text of format `to`; what the format cannot carry or changes is
    said in one warning line on stderr."""
    result = export(contexts, to, options, registry)
    warning = result.warning(to)
    if warning:
        say(f"warning: {warning}", err=True)
    return result.text


def say(line: str, *, err: bool = False) -> None:
    """One human line (a summary, a warning) on stdout or stderr, redacted."""
    click.echo(redact(line, one_line=False), err=err)
