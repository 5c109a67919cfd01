"""Cursor agent transcripts in their plain-text form
(`~/.cursor/projects/<project>/agent-transcripts/<id>.txt`).

Upstream: Cursor is closed; the text form is documented by the public readers of it and the
transcripts people published (parsers in session-indexing tools, found by their `[Tool call]` /
`[Tool result]` markers in the code corpus): turns start with a line `user:` or `assistant:`
(`A:` in some versions); what the user typed is inside `<user_query>` tags, with what Cursor adds
(`<attached_files>`, `<cursor_commands>`, `<system_reminder>`) beside it; an assistant turn holds
`[Thinking] ...` lines, its text, and `[Tool call] NAME` followed by the arguments one a line,
indented (`  command: ls`); the results follow as `[Tool result] NAME` lines, most often with no
output after them (Cursor keeps the output out of this form).

Mapping: a user turn -> a user message, the human's words when it holds a `<user_query>` or is
anything but whole tagged sections (then `origin: harness`), kept whole as in the JSONL form
(`cursor`); an assistant turn -> assistant messages: each `[Thinking]` line a thinking block
(the form does not mark where a thought ends, so the lines after it are text: nothing is lost,
only the split is a guess), other lines text, each `[Tool call]` a call (`input` the argument
lines as `{name: value}`, an indented line that is no `name: value` continuing the value before
it; ids `cursor-<line>`), each `[Tool result] NAME` the result of the oldest open call of that
name (else the oldest open call) of the same assistant message, its text the lines after it (often
none: an empty result); a result marker that answers no call is counted.
Blank lines around parts are left out. No result holds words of the user.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from pydantic import JsonValue

from ..context import (
    ORIGIN_KEY,
    AgentContext,
    Block,
    TextBlock,
    ThinkingBlock,
    ToolCallBlock,
    ToolResultBlock,
)
from ..errors import BadInputError
from ._pairing import Turn
from ._util import turns_context
from .base import Document, Format
from .cursor import USER_QUERY, only_tags

_ROLES = {"user:": "user", "assistant:": "assistant", "A:": "assistant"}
_CALL = "[Tool call] "
_RESULT = "[Tool result]"
_THINKING = "[Thinking]"
_ARG = re.compile(r"^  (\w[\w.-]*): ?(.*)$")
_MAX_BYTES = 256 * 1024 * 1024


@dataclass(frozen=True)
class _Transcript:
    """The transcript's text (a UTF-8 file, not JSON)."""

    text: str


class CursorTextFormat(Format):
    name = "cursor-text"
    description = "Cursor agent transcript text (agent-transcripts/<id>.txt)"
    extension = ".txt"
    priority = 10

    def read_layout(self, path: Path) -> Document | None:
        """A `.txt` file whose first line is `user:` or `assistant:`."""
        if path.suffix != ".txt" or not path.is_file():
            return None
        with path.open("rb") as handle:
            head = handle.read(64).lstrip(b"\xef\xbb\xbf\r\n\t ")
        if not any(head.startswith(m.encode() + b"\n") for m in ("user:", "assistant:")):
            return None
        if path.stat().st_size > _MAX_BYTES:
            raise BadInputError("Cursor transcript larger than 256 MB", path=str(path))
        raw = path.read_bytes()
        try:
            text = raw.decode("utf-8-sig")
        except UnicodeDecodeError as exc:
            raise BadInputError(
                f"not UTF-8 text (bad byte at offset {exc.start})", path=str(path)
            ) from None
        return Document(path=str(path), kind="text", data=_Transcript(text))

    def sniff(self, doc: Document) -> bool:
        return doc.kind == "text" and isinstance(doc.data, _Transcript)

    def load(self, doc: Document) -> list[AgentContext]:
        if not isinstance(doc.data, _Transcript):
            raise BadInputError(
                "not a Cursor text transcript (lines user: / assistant:)", path=doc.path
            )
        builder = _CursorTextContextBuilder()
        for number, line in enumerate(doc.data.text.splitlines(), start=1):
            builder.add(number, line)
        ctx = builder.context()
        if not ctx.messages:
            raise BadInputError("not a Cursor text transcript: no turns", path=doc.path)
        return [ctx]


class _CursorTextContextBuilder:
    def __init__(self) -> None:
        self.turns: list[Turn] = []
        self.skipped: Counter[str] = Counter()
        self.role: str | None = None
        self.lines: list[str] = []  # text being gathered (a user turn, text, a thought, a result)
        self.part: str = "text"  # what `lines` are: text / thinking / args / result
        self.blocks: list[Block] = []
        self.results: list[Block] = []
        self.open: list[ToolCallBlock] = []
        self.args: dict[str, JsonValue] = {}
        self.arg: str | None = None
        self.result_for: str = ""

    def add(self, number: int, line: str) -> None:
        role = _ROLES.get(line.rstrip())
        if role is not None:
            self.end_part()
            self.flush()
            if self.role != "assistant":
                self.user()
            self.role = role
            return
        if self.role == "assistant":
            self.assistant(number, line)
        else:
            self.lines.append(line)

    def assistant(self, number: int, line: str) -> None:
        if line.startswith(_CALL):
            self.end_part()
            if self.results:
                self.flush()
            call = ToolCallBlock(
                id=f"cursor-{number}", name=line[len(_CALL) :].strip() or "unknown", input={}
            )
            self.blocks.append(call)
            self.open.append(call)
            self.part, self.args, self.arg = "args", {}, None
        elif line.startswith(_RESULT):
            self.end_part()
            self.part, self.result_for = "result", line[len(_RESULT) :].strip()
        elif line.startswith(_THINKING):
            self.end_part()
            if self.results:
                self.flush()
            self.part = "thinking"
            self.lines.append(line[len(_THINKING) :].lstrip())
            self.end_part()
        elif self.part == "args":
            self.argument(number, line)
        else:
            if self.part != "result" and self.results:
                self.flush()
            self.lines.append(line)

    def argument(self, number: int, line: str) -> None:
        match = _ARG.match(line)
        if match is not None:
            self.arg = match.group(1)
            self.args[self.arg] = match.group(2)
        elif line.startswith("  ") and self.arg is not None:
            self.args[self.arg] = f"{self.args[self.arg]}\n{line[2:]}"
        else:
            self.end_part()
            if line.strip():
                self.assistant(number, line)

    def end_part(self) -> None:
        """Close what `lines` gathered in an assistant turn into the block it is (a user turn's
        lines are gathered until the turn ends)."""
        if self.role != "assistant":
            return
        text = "\n".join(self.lines).strip("\n")
        if self.part == "args" and self.open:
            call = self.open[-1]
            index = next(i for i, b in enumerate(self.blocks) if b is call)
            self.blocks[index] = self.open[-1] = call.model_copy(update={"input": dict(self.args)})
        elif self.part == "result":
            self.result(text)
        elif self.part == "thinking" and text:
            self.blocks.append(ThinkingBlock(thinking=text))
        elif text.strip():
            self.blocks.append(TextBlock(text=text))
        self.lines, self.part, self.arg = [], "text", None

    def result(self, text: str) -> None:
        named = [c for c in self.open if c.name == self.result_for]
        call = named[0] if named else (self.open[0] if self.open else None)
        if call is None:
            self.skipped["tool result without a call"] += 1
            return
        self.open.remove(call)
        self.results.append(ToolResultBlock(tool_call_id=call.id, content=(TextBlock(text=text),)))

    def user(self) -> None:
        text = "\n".join(self.lines).strip("\n")
        self.lines = []
        if not text.strip():
            if self.role == "user":
                self.skipped["user (empty)"] += 1
            return
        meta: dict[str, JsonValue] = {}
        if USER_QUERY not in text and only_tags(text):
            meta[ORIGIN_KEY] = "harness"
        self.turns.append(Turn("user", [TextBlock(text=text)], meta))

    def flush(self) -> None:
        if self.blocks:
            self.turns.append(Turn("assistant", list(self.blocks)))
        if self.results:
            self.turns.append(Turn("tool", list(self.results)))
        self.blocks, self.results = [], []
        self.open = []  # a result marker after the next assistant text answers none of them

    def context(self) -> AgentContext:
        self.end_part()
        self.flush()
        if self.role != "assistant":
            self.user()
        return turns_context(CursorTextFormat.name, self.turns, self.skipped)


__all__ = ["CursorTextFormat"]
