"""aider chat history (`.aider.chat.history.md` in the repository aider ran in).

Upstream: Aider-AI/aider `aider/io.py` (`InputOutput.user_input` writes what the user typed as
`#### ` lines, one per line of input, joined by Markdown hard breaks `"  \\n"`;
`tool_output` / `tool_error` / `tool_warning` write aider's own messages as `> ` block quotes;
`ai_output` writes the model's reply as plain lines; each run starts with
`# aider chat started at <YYYY-MM-DD HH:MM:SS>`) and `aider/utils.py`
(`split_chat_history_markdown`, the loader behind `--restore-chat-history`: `# ` lines are
skipped, `> ` lines are tool output, `#### ` lines the user, every other line the assistant).

This format reads the file as that loader does, with each run (`# aider chat started at`) its own
conversation (`FILE#N`, `metadata["started"]`), since every aider run starts a new chat:

* `#### ` lines -> one user message per block of consecutive lines, the human's words (the hard
  break aider appended to each line is removed); a message that is a `/command` is marked
  `metadata["command"]` (the task is looked for after it);
* plain lines -> assistant text;
* `> ` lines (aider's own output: files added, edits applied, token counts, errors) -> left out,
  as `split_chat_history_markdown` leaves them out unless asked, and counted in
  `skipped_records` as `"tool output"`; other `# ` headings likewise as `"heading"`; a run with
  no message at all (aider quit before any) is counted in the first conversation as
  `"run without a message"`.

The history holds no tool calls (aider's edits are text blocks in the reply) and no system prompt.
"""

from __future__ import annotations

import codecs
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from pydantic import JsonValue

from ..context import COMMAND_KEY, AgentContext, TextBlock
from ..errors import BadInputError
from ._pairing import Turn
from ._util import context_metadata, note_skipped
from .base import Document, Format

HISTORY_FILE = ".aider.chat.history.md"
STARTED = "# aider chat started at"
_MAX_BYTES = 256 * 1024 * 1024


class AiderFormat(Format):
    name = "aider"
    description = "aider chat history Markdown (.aider.chat.history.md)"
    extension = ".md"
    priority = 10

    def read_layout(self, path: Path) -> Document | None:
        """The history file (a Markdown file, not JSON): by its name, or by its first line."""
        if not path.is_file():
            return None
        if path.name != HISTORY_FILE and not path.name.endswith(".md"):
            return None
        with path.open("rb") as handle:
            head = handle.read(len(STARTED) + 8).lstrip(b"\xef\xbb\xbf\r\n")
        if path.name != HISTORY_FILE and not head.startswith(STARTED.encode()):
            return None
        if path.stat().st_size > _MAX_BYTES:
            raise BadInputError("aider history larger than 256 MB", path=str(path))
        return Document(path=str(path), kind="text", data=_History.check(path))

    def sniff(self, doc: Document) -> bool:
        return doc.kind == "text" and isinstance(doc.data, _History) and doc.data.looks_like_history

    def load(self, doc: Document) -> list[AgentContext]:
        if doc.kind != "text" or not isinstance(doc.data, _History):
            raise BadInputError(
                "not an aider chat history (expected .aider.chat.history.md)", path=doc.path
            )
        every_run = _split_runs(doc.data.lines())
        runs = [r for r in every_run if any(t.role == "user" for t in r.turns)]
        if runs and len(runs) < len(every_run):  # runs of aider's own output only (^C at start)
            runs[0].skipped["run without a message"] += len(every_run) - len(runs)
        if not runs:
            raise BadInputError("not an aider chat history: no '#### ' user lines", path=doc.path)
        return [run.context(n if len(runs) > 1 else None) for n, run in enumerate(runs)]


# --------------------------------------------------------------------------- lines -> turns


class _AiderRunContextBuilder:
    """Turns the lines of one aider run into turns, as `split_chat_history_markdown` reads them."""

    def __init__(self, started: str | None) -> None:
        self.started = started
        self.turns: list[Turn] = []
        self.skipped: Counter[str] = Counter()
        self.role: str | None = None  # what the lines being gathered are
        self.lines: list[str] = []

    def add(self, line: str) -> None:
        if line.startswith("> "):
            self.flush()
            self.skipped["tool output"] += 1  # counted per line, as the loader drops each
            return
        if line.startswith("#### "):
            if self.role != "user":
                self.flush()
            self.role = "user"
            self.lines.append(_unbreak(line[5:]))
            return
        if self.role != "assistant":
            self.flush()
        self.role = "assistant"
        self.lines.append(line)

    def flush(self) -> None:
        text = "".join(self.lines)
        text = text.rstrip("\n") if self.role == "user" else text.strip()
        if text.strip() and self.role is not None:
            meta: dict[str, JsonValue] = {}
            if self.role == "user" and text.lstrip().startswith("/"):
                meta[COMMAND_KEY] = True
            self.turns.append(
                Turn("user" if self.role == "user" else "assistant", [TextBlock(text=text)], meta)
            )
        self.role, self.lines = None, []

    def context(self, number: int | None) -> AgentContext:
        self.flush()
        meta = context_metadata(AiderFormat.name, conversation=number, started=self.started)
        note_skipped(meta, self.skipped)
        return AgentContext(messages=tuple(t.freeze() for t in self.turns), metadata=meta)


# --------------------------------------------------------------------------- helpers


def _unbreak(line: str) -> str:
    """A user line without the Markdown hard break (`"  "` before the newline) aider added."""
    body = line[:-1] if line.endswith("\n") else line
    return (body[:-2] if body.endswith("  ") else body) + ("\n" if line.endswith("\n") else "")


def _split_runs(lines: Iterator[str]) -> list[_AiderRunContextBuilder]:
    runs: list[_AiderRunContextBuilder] = []
    current: _AiderRunContextBuilder | None = None
    for line in lines:
        if line.startswith(STARTED):
            if current is not None:
                current.flush()
            current = _AiderRunContextBuilder(line[len(STARTED) :].strip() or None)
            runs.append(current)
            continue
        if current is None:
            if not line.strip():
                continue  # aider starts the file with a blank line
            current = _AiderRunContextBuilder(None)
            runs.append(current)
        if line.startswith("# "):
            current.flush()
            current.skipped["heading"] += 1
            continue
        current.add(line)
    if current is not None:
        current.flush()
    return runs


@dataclass(frozen=True)
class _History:
    """The history file, read a line at a time (its whole text, split, took 13 times its size)."""

    path: Path
    looks_like_history: bool

    @classmethod
    def check(cls, path: Path) -> _History:
        """The file, its UTF-8 checked, and whether its text, past the blank lines and byte order
        marks it may start with, starts as a history does."""
        looks: bool | None = None
        for line in cls(path, False).decoded():
            if looks is None and (head := line.lstrip("\ufeff\r\n")):
                looks = head.startswith(STARTED) or (head.startswith("#### ") and "\n" in head)
        return cls(path, bool(looks))

    def decoded(self) -> Iterator[str]:
        """The lines of the file as written (the last one may not end in "\\n"), decoded as
        "utf-8-sig" decodes the whole file: a byte order mark left out, not counted in the offset
        of a bad byte."""
        offset = 0
        with self.path.open("rb") as handle:
            for number, raw in enumerate(handle):
                first = number == 0
                try:
                    yield raw.decode("utf-8-sig" if first else "utf-8")
                except UnicodeDecodeError as exc:
                    raise BadInputError(
                        f"not UTF-8 text (bad byte at offset {offset + exc.start})",
                        path=str(self.path),
                    ) from None
                offset += len(raw) - (3 if first and raw.startswith(codecs.BOM_UTF8) else 0)

    def __iter__(self) -> Iterator[str]:
        """Its lines: a format given the file by `--format` that reads records sees no record."""
        return self.lines()

    def lines(self) -> Iterator[str]:
        """Every line of the text, each ending in "\\n" (the last one too, as after `split`), a
        "\\r" before it removed. Only "\\n" ends a line: aider writes no other break, and text
        may hold U+0085 or U+2028."""
        ended = True
        for line in self.decoded():
            ended = line.endswith("\n")
            if not ended:
                yield line + "\n"
            else:
                yield line[:-2] + "\n" if line.endswith("\r\n") else line
        if ended:  # the empty text after the last "\n", as `split` gives it
            yield "\n"


__all__ = ["AiderFormat"]
