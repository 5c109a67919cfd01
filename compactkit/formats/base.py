"""What a format plugin implements, and how a file is read before any format sees it."""

from __future__ import annotations

import contextlib
import json
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, Literal

from ..context import AgentContext
from ..errors import BadInputError
from ..jsonio import MAX_DEPTH as MAX_DEPTH  # re-exported: where readers have always found it
from ..jsonio import (
    BadJsonLine,
    interned,
    json_error_text,
    jsonl_record,
    read_value,
    stream_jsonl,
)
from ..jsonio import loads as loads


@dataclass(frozen=True)
class BadLine:
    """A JSONL line that is not JSON (cut by a crash, two writers interleaved): its 1-based number,
    what is wrong with it, and whether it is the file's last non-blank line (a torn tail)."""

    line: int
    reason: str
    last: bool = False
    path: str | None = None
    """The file holding the line when it is not the document's own (a layout of several files)."""


@dataclass(frozen=True)
class Document:
    """A parsed input file: one JSON value (`kind="json"`), a list of JSONL records, or a file that
    is not JSON (`kind="text"`, which only a format's `read_layout` makes, with what that format
    reads it by: aider's Markdown history, read a line at a time).

    `bad_lines` are the JSONL lines that are not JSON, left out of `data`: a format whose agent
    skips them says so (`Format.malformed_lines`), every other format refuses the file at the
    first one.

    `reread` is set on a document that loading read for itself alone (`formats.loading`): it reads
    the document again, and `take` lets go of each record a loader has converted."""

    path: str
    kind: Literal["json", "jsonl", "text"]
    data: Any
    bad_lines: tuple[BadLine, ...] = ()
    reread: Callable[[], Document] | None = field(default=None, repr=False, compare=False)

    @property
    def records(self) -> list[Any]:
        """JSONL records, or the top-level array of a JSON file (empty otherwise)."""
        if self.kind == "jsonl":
            return list(self.data)
        return list(self.data) if isinstance(self.data, list) else []

    def take(self, items: list[Any]) -> Iterator[Any]:
        """The items of `items` (a list inside `data`), in order. On a document loading read for
        itself (`reread` set), each item leaves the list as it is given: a loader converting
        record by record holds what it made of the records read so far beside the records
        still to read, never both whole (a session's raw records take as much memory as its
        context, or more)."""
        if self.reread is None:
            yield from items
            return
        for index in range(len(items)):
            item, items[index] = items[index], None
            yield item


def parse_text(text: str, path: str) -> Document:
    """Parse file text as JSON, else as JSON Lines; raise a one-line `BadInputError` otherwise."""
    if not text or text.isspace():
        raise BadInputError("file is empty", path=path, hint="expected a JSON or JSONL session")
    try:
        return _one_value(text, path)
    except json.JSONDecodeError:
        pass
    try:  # Unicode whitespace around the value that JSON does not skip (a copy, so only now)
        return _one_value(text.strip(), path)
    except json.JSONDecodeError as whole_error:
        lines = text.splitlines()
        if len(lines) < 2 or not lines[0].lstrip().startswith("{"):
            raise BadInputError(
                f"not JSON: {json_error_text(whole_error, line=True)}",
                path=path,
                line=whole_error.lineno,
                hint="expected a JSON or JSONL session file",
            ) from None
    records: list[Any] = []
    bad: list[BadLine] = []
    numbered = [(n, line) for n, line in enumerate(lines, start=1) if line.strip()]
    for number, line in numbered:
        try:
            records.append(jsonl_record(line, path, number))
        except BadJsonLine as exc:
            if number == 1 and len(bad) == 0 and not _mostly_jsonl(numbered, path):
                raise exc.error() from None  # one JSON value over several lines, broken
            bad.append(BadLine(number, exc.reason, last=number == numbered[-1][0]))
    return Document(path=path, kind="jsonl", data=records, bad_lines=tuple(bad))


def _one_value(text: str, path: str) -> Document:
    """`text` as one JSON value (its keys and short strings interned, as JSONL records'),
    `json.JSONDecodeError` when it is not one."""
    data = loads(text, path, object_hook=interned)
    return Document(path=path, kind="json", data=data)


def _mostly_jsonl(numbered: list[tuple[int, str]], path: str) -> bool:
    """True when most lines after a first line that is not JSON are JSON objects: JSON Lines
    whose first record is damaged, not one JSON value spread over lines."""
    whole = 0
    for number, line in numbered[1:]:
        if line.lstrip().startswith("{"):
            with contextlib.suppress(json.JSONDecodeError, BadInputError):
                whole += isinstance(loads(line, path, number), dict)
    return whole * 2 > len(numbered) - 1 > 0


def read_document(path: str | Path) -> Document:
    """Read and parse a session file, with one-line errors for every way that can fail."""
    display = str(path)
    p = Path(path)
    if not p.exists():
        raise BadInputError("no such file", path=display, hint="check the path")
    if p.is_dir():
        raise BadInputError("is a directory, not a session file", path=display)
    try:
        streamed = stream_jsonl(p, display)
        if streamed is not None:
            records, bad = streamed
            return Document(
                path=display,
                kind="jsonl",
                data=records,
                bad_lines=tuple(BadLine(n, reason, last) for n, reason, last in bad),
            )
        with contextlib.suppress(json.JSONDecodeError):  # a megabyte at a time
            return Document(path=display, kind="json", data=read_value(p, display, interned))
        raw = p.read_bytes()  # not one JSON value: read whole, for the errors' positions and JSONL
    except OSError as exc:
        raise BadInputError(f"cannot read: {exc.strerror}", path=display) from None
    if b"\x00" in raw[:65536]:
        raise BadInputError(
            "binary data, not a text session file", path=display, hint="expected JSON or JSONL"
        )
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise BadInputError(
            f"not UTF-8 text (bad byte at offset {exc.start})",
            path=display,
            hint="expected a JSON or JSONL session file",
        ) from None
    return parse_text(text, display)


class Format:
    """A session format plugin: detects, loads and optionally writes one kind of file.

    Subclasses set `name` (unique, kebab-case), `description` (one line, shown by `compactkit
    formats`), `extension` and `priority`, and implement `sniff` and `load`; writers also set
    `can_write = True` and implement `dump`; one whose format cannot carry everything lists
    what it drops or changes (`export.NotingWriter`: `export` gives the text and `ExportNotes`).
    Register an instance through the `register_formats` hook. `compactkit.testing.check_format`
    checks everything below on real files.

    **sniff(doc)** says whether `doc` is this format's file. It is called on every file whose
    format is not given, so it is cheap (look at the first records of a long JSONL), never raises,
    and is True for this format's files only: a file another format reads must not be claimed
    (when two formats match, the higher `priority` wins; a specific format beats a generic one).

    **load(doc)** returns every conversation of the file, in file order, as `AgentContext`s:

    * a document that is not this format raises `BadInputError` with one line and `path=doc.path`
      (`load` may be called without `sniff`, with `--format NAME`);
    * a long array of records (a whole document's messages) is iterated with `doc.take`, so that
      its records are let go of as they are converted (never looked back at once given);
    * each context passes `compactkit.validate`: every tool result in a `tool` message after the
      call it answers; a call whose result was never recorded gets a synthesized error result
      (except calls of the last assistant message, which may stay pending);
    * nothing in a loaded context is a marker or has a recovery entry, so `expand(ctx) == ctx`
      (a source agent's own summary is plain text with `origin: "summary"`);
    * every conversation has a task: a user message in the human's words (`first_user_index`).
      A user-role message that is NOT the human's words carries `metadata["origin"]`
      (`compactkit.ORIGIN_KEY`), one of `compactkit.ORIGINS`: `"harness"` (text the agent
      program injected: reminders, environment details, command output), `"tool-output"` (tool
      output in a user turn with no call to pair it with), `"summary"` (the source agent's own
      summary of earlier turns), `"demonstration"` (a worked example shown before the task).
      Each user input loads exactly once, however many records repeat it;
    * message metadata keeps what the record said about the turn as recorded (`id`, `timestamp`,
      `model`, `usage`);
    * context metadata (the built-ins write it with `_util.context_metadata`, `note_repairs` and
      `note_skipped`): `source_format` (always, this format's `name`), then what identifies the
      session where the file records it: `session_id`, `cwd`, `model`, `title`, `instance_id`,
      `conversation` (the index, in a file holding several), and the format's own keys; the
      non-zero counts of what pairing repair did, `synthesized_results`, `synthesized_calls`,
      `renamed_calls`, `orphan_results`; last `skipped_records`, the records read and left out,
      counted by kind (`{"event_msg/token_count": 41}`), so that no drop is silent.

    **dump(contexts)** (writers) returns the file text holding `contexts` (a writer may take one
    context only); loading that text with the same format gives the contexts back, up to what the
    format cannot hold, and writing and loading them again changes nothing (a fixed point after
    one round trip). compactkit's native format stores contexts as they are, metadata included.

    The built-in adapters share one layout, so that a new format is a copy of an old one: the
    module docstring (upstream sources read, how records map to messages, which records hold the
    user's words and which origins the others get, what is skipped); constants; the `Format`
    subclass; one context builder class named after what it reads (`_ClineTaskContextBuilder`),
    fed each record by `add` and turning it into `Turn`s, whose `context` method repairs pairing
    and writes the metadata; then private helpers (and, for
    writers, the writing functions). Nothing private of one adapter is imported by another:
    what two share lives in `_util.py`, `_pairing.py`, `_chat.py` or `_marks.py` (the user's
    words an agent stored outside user messages, pinned: each adapter passes `mark_words` a
    finder). A format whose files hold another agent's records in another envelope (a headless
    stream of Claude Code's records, a fork keeping its parent's files) reads them through the
    public functions of that agent's adapter (`claude_code.message_records_contexts`,
    `gemini_cli.history_turns`), or subclasses its format (`kilo_code`).
    """

    name: ClassVar[str] = ""
    description: ClassVar[str] = ""
    can_write: ClassVar[bool] = False
    extension: ClassVar[str] = ".json"
    priority: ClassVar[int] = 0
    """Higher wins when several formats recognise one document (specific beats generic)."""
    malformed_lines: ClassVar[Literal["refuse", "skip", "skip-last"]] = "refuse"
    """What this format's agent does with a JSONL line that is not JSON: `"refuse"` the file (the
    default, an error naming the first such line), `"skip"` every such line, or `"skip-last"` only
    a torn last line. A skipped line gets one warning naming file and line and is counted in
    `skipped_records` as `"malformed line"` (`formats.loading` does both; `load` never sees it)."""
    prompt_optional: ClassVar[bool] = False
    """True for a format whose files may hold no word of the user: a headless run's output,
    whose prompt was given on the command line and is not printed. Its conversations then start
    with a harness note saying so, and the conformance kit accepts one with no message in the
    human's words."""

    def sniff(self, doc: Document) -> bool:
        """True when `doc` is this format's file. Must be cheap and must not raise."""
        raise NotImplementedError

    def read_layout(self, path: Path) -> Document | None:
        """The session at `path` when this format keeps it in several files (a directory, or one
        file of such a layout whose companions are beside it), as one `Document` that `load`
        reads; None otherwise (the path is then read as one file). Called for every path before
        it is read, so it looks at names first; a layout it recognises but cannot read raises
        `BadInputError`."""
        return None

    def load(self, doc: Document) -> list[AgentContext]:
        """Every conversation in `doc`, in file order; `BadInputError` when `doc` is not this
        format."""
        raise NotImplementedError

    def dump(self, contexts: Sequence[AgentContext]) -> str:
        """File text holding `contexts` (a writer need only support one context)."""
        raise NotImplementedError(f"format {self.name!r} has no writer")

    def __repr__(self) -> str:
        return f"<Format {self.name}>"


def require_single(contexts: Sequence[AgentContext], fmt: str) -> AgentContext:
    if len(contexts) != 1:
        raise BadInputError(
            f"the {fmt} writer takes one conversation, got {len(contexts)}",
            hint="select one with FILE#N",
        )
    return contexts[0]
