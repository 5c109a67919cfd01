"""Retention: which facts of the original session a model can still see after compaction.

Facts are read only from what the model was shown in the ORIGINAL context (`visible_text`: the system
instruction, activated skills, message text, tool-call names and inputs, tool results, the text of any
marker the session already held), never from metadata or the recovery store. A candidate that is not
in that text is not a fact, so an unchanged context keeps 100% of its facts by construction.

Kinds:

* ``task``: the task (the first message in the user's own words, `AgentContext.task`; its human
  text, as for ``user_message``);
* ``user_message``: every message in the user's own words (`Message.is_human`: not tool output,
  harness text, demonstrations or a source agent's summary carried in a user turn), its human text
  (the text blocks the pins call the user's words: not the harness blocks an adapter marked beside
  them, such as Cline's `<environment_details>`) with whitespace folded, matched by its first 1,000
  characters; and likewise every text the adapter marked as the user's words elsewhere (stored pins:
  feedback, answers, commands kept in a tool result or a turn the agent wrote);
* ``last_instruction``: the last message in the user's own words;
* ``path``: every file path in a tool call's input: the value of a path-like key (``path``,
  ``file_path``, ``filename``, ``notebook_path``, ...), and the file operands of read commands in a
  shell command (``cat``, ``head``, ``tail``, ``nl``, ``less``, ``sed -n``, ...);
* ``error``: for every failed tool result (flagged as an error, or reporting a non-zero exit status
  near its start or end), the line that says what went wrong: the last line shaped like an error
  report (``ValueError: ...``, ``error: ...``, ``error TS2305: ...``, ``fatal: ...``, ``E   ...``,
  ``FAILED ...``), else the last line naming an error or failure, else its first line.

This module reads sessions with its own rules: it imports nothing from the summarizers or strategies it
judges (a test checks it), so a summary cannot match by sharing their code.

A fact is *retained* when its text (whitespace folded; the first 200 characters of a long one, 1,000
for user messages) occurs in what the model is shown after compaction. The recovery store does not
count there; *recoverability* is the same test on the context after `expand` (the recovery store and
any stash put back).
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from ..context import (
    HARNESS_BLOCKS_KEY,
    AgentContext,
    Message,
    TextBlock,
    ToolCallBlock,
    ToolResultBlock,
    etag_of,
    render_block,
)
from ..recovery import expand

FACT_KINDS = ("task", "user_message", "last_instruction", "path", "error")
_SPACE = re.compile(r"\s+")
_MAX_FACT = 200
USER_FACT_CHARS = 1_000
"""A user message is matched by its first 1,000 characters (whitespace folded)."""

_PATH_KEY = re.compile(r"^(?:\w+_)?(?:path|file|filename|filepath)$", re.I)
_PATHLIKE = re.compile(r"^[\w./~+@-]*[./][\w./~+@-]*$")
_COMMAND_KEYS = ("command", "cmd")
_READERS = {"cat", "head", "tail", "nl", "less", "more", "bat", "view", "open"}
_SPLIT = re.compile(r"&&|\|\||[;|\n]")
_STATUS = re.compile(
    r"<returncode>\s*(-?\d+)|\bexit(?:ed with)?[ _](?:code|status)\b\s*:?\s*(-?\d+)", re.I
)
_REPORT = re.compile(
    r"^\s*[\w.]*(?:Error|Exception|Failure)\b(?::|$)"  # Python-style: `ValueError: bad value`
    r"|\berror(?:\[\w+\])?(?: TS\d+)?:\s*\S"  # compilers, CLIs: `error: ...`, `error TS2305: ...`
    r"|^\s*(?:fatal|FATAL|ERROR|FAILED|FAIL)\b"
    r"|^E {2,}\S",  # pytest's assertion lines
)
_MENTION = re.compile(
    r"error|exception|traceback|failed|failure|not found|denied|no such file", re.I
)
_MARKUP = re.compile(r"^(?:\s|</?[\w-]+>|\d)*$")
"""A line of wrapper tags (and a status number): `<returncode>1</returncode>`, `<output>`."""


@dataclass(frozen=True)
class Fact:
    kind: str
    text: str
    parts: tuple[str, ...] = ()
    """For a fact shown in pieces (a user message whose words sit on both sides of a harness
    block): each piece, all of which must be seen; empty when `text` is the one piece."""

    def seen_in(self, text: str) -> bool:
        return all(part in text for part in self.parts) if self.parts else self.text in text


def _fold(text: str) -> str:
    return _SPACE.sub(" ", text).strip()


def _clip(text: str, limit: int = _MAX_FACT) -> str:
    """Long facts are matched by their start (after folding whitespace)."""
    return _fold(text)[:limit]


# --------------------------------------------------------------------------- what the model saw


def visible_text(ctx: AgentContext) -> str:
    """Everything a model is shown, whitespace folded (the recovery store and metadata excluded)."""
    parts: list[str] = []
    if ctx.system_instruction:
        parts.append(ctx.system_instruction)
    parts.extend(ctx.activated_skills.values())
    for msg in ctx.messages:
        for block in msg.content:
            if isinstance(block, ToolCallBlock):
                parts.append(block.name)
                parts.extend(_strings(block.input))
            else:
                parts.extend(render_block(block))
    return _fold("\n".join(parts))


def _strings(value: Any) -> Iterable[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for v in value.values():
            yield from _strings(v)
    elif isinstance(value, list):
        for v in value:
            yield from _strings(v)


# --------------------------------------------------------------------------- reading the session


def human_runs(msg: Message) -> list[str]:
    """The user's words of a message in the human's words, as the pins define them: its text
    blocks but the harness blocks its adapter marked (`HARNESS_BLOCKS_KEY`), each run of
    adjacent ones joined as the model is shown them."""
    marked = msg.metadata.get(HARNESS_BLOCKS_KEY)
    harness = {v for v in marked if isinstance(v, int)} if isinstance(marked, list) else set()
    runs: list[list[str]] = [[]]
    for j, block in enumerate(msg.content):
        if j in harness:
            runs.append([])
        elif isinstance(block, TextBlock):
            runs[-1].append(block.text)
    return [text for run in runs if (text := "\n".join(run)).strip()]


def marked_words(ctx: AgentContext) -> list[str]:
    """The user's words an adapter marked outside the messages in the human's words (stored pins,
    `AgentContext.pins`: an approval with text, rejection feedback, an answer to the agent's
    question kept in a tool result or in a turn the agent wrote), each text block once, in order."""
    if not ctx.pins:
        return []
    wanted = {(p.chars, p.etag) for p in ctx.pins}
    lengths = {chars for chars, _ in wanted}
    out: dict[str, None] = {}
    for msg in ctx.messages:
        if msg.is_human:
            continue
        texts = [b.text for b in msg.content if isinstance(b, TextBlock)]
        for result in msg.tool_results:
            texts += [p.text for p in result.content if isinstance(p, TextBlock)]
        for text in texts:
            if len(text) in lengths and (len(text), etag_of(text)) in wanted and text.strip():
                out.setdefault(text, None)
    return list(out)


def _user_fact(runs: list[str]) -> Fact | None:
    """A user message's fact: its human text folded, clipped to `USER_FACT_CHARS`; the runs
    apart from each other when a harness block stands between them."""
    pieces: list[str] = []
    room = USER_FACT_CHARS
    for run in runs:
        piece = _clip(run, room)
        if piece and room > 0:
            pieces.append(piece)
            room -= len(piece) + 1
    if not pieces:
        return None
    text = " ".join(pieces)
    return Fact("user_message", text, tuple(pieces) if len(pieces) > 1 else ())


def _paths(call: ToolCallBlock) -> Iterator[str]:
    """File paths a tool call names: path-like keys, and the operands of shell read commands."""
    data = call.input
    if isinstance(data, dict):
        for key, value in data.items():
            if _PATH_KEY.match(key) and isinstance(value, str) and "\n" not in value.strip():
                yield value
        commands = [data.get(k) for k in _COMMAND_KEYS]
    else:
        commands = [data]
    for command in commands:
        if isinstance(command, list):
            command = " ".join(str(c) for c in command)
        if isinstance(command, str):
            yield from _read_operands(command)


def _read_operands(command: str) -> Iterator[str]:
    """The files that `cat`/`head`/`sed -n`-style commands in a shell command line read."""
    head, _, _ = command.partition("<<")  # a here-document's body is data, not commands
    for part in _SPLIT.split(head):
        try:
            words = shlex.split(part)
        except ValueError:
            words = part.split()
        while words and ("=" in words[0] or words[0] in ("sudo", "time", "env")):
            words = words[1:]
        if not words:
            continue
        program = words[0].rsplit("/", 1)[-1]
        args: list[str] = []
        skip = False
        for word in words[1:]:
            if skip:
                skip = False
            elif word in (">", ">>", "<", "2>", "&>"):
                skip = True
            elif not word.startswith(("-", ">", "<", "2>")):
                args.append(word)
        if program == "sed" and "-n" in words[1:]:
            args = args[1:]  # the first operand is the script
        elif program not in _READERS:
            continue
        yield from (a for a in args if _PATHLIKE.match(a) and a not in (".", ".."))


def _status(text: str) -> int | None:
    """The exit status a tool output reports near its start or end."""
    for chunk in (text[-500:], text[:500]):
        found = [m for m in _STATUS.finditer(chunk)]
        if found:
            value = found[-1].group(1) or found[-1].group(2)
            return int(value)
    return None


def failure_line(result: ToolResultBlock) -> str | None:
    """What went wrong, for a failed tool result (None when it did not fail)."""
    text = "\n".join(t for part in result.content for t in render_block(part))
    status = _status(text)
    if not result.is_error and not status:
        return None
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    lines = [line for line in lines if not _MARKUP.match(line)]
    for pattern in (_REPORT, _MENTION):
        for line in reversed(lines):
            if pattern.search(line):
                return line
    return lines[0] if lines else None


def extract_facts(ctx: AgentContext) -> list[Fact]:
    """The facts of a session, in order of first appearance, without duplicates; only what the
    model was shown counts (see the module docs)."""
    seen = visible_text(ctx)
    facts: dict[tuple[str, str], Fact] = {}

    def add(kind: str, text: str, limit: int = _MAX_FACT) -> None:
        clipped = _clip(text, limit)
        if clipped and clipped in seen:
            facts.setdefault((kind, clipped), Fact(kind, clipped))

    first = ctx.first_user_index
    if first is not None:
        task = ctx.messages[first]
        runs = human_runs(task) if task.is_human else []
        add("task", runs[0] if runs else ctx.task)
    said = [runs for m in ctx.messages if m.is_human and (runs := human_runs(m))]
    for runs in [*said, *([text] for text in marked_words(ctx))]:
        fact = _user_fact(runs)
        if fact is not None and fact.seen_in(seen):
            facts.setdefault((fact.kind, fact.text), fact)
    if said:
        add("last_instruction", said[-1][0])  # its first words: a harness block may split it
    for msg in ctx.messages:
        for call in msg.tool_calls:
            for path in _paths(call):
                add("path", path)
        for result in msg.tool_results:
            line = failure_line(result)
            if line:
                add("error", line)
    return list(facts.values())


# --------------------------------------------------------------------------- scoring


@dataclass
class RetentionScore:
    """Facts kept per kind: kind -> [kept, total]."""

    by_kind: dict[str, list[int]] = field(default_factory=dict)

    @property
    def kept(self) -> int:
        return sum(k for k, _ in self.by_kind.values())

    @property
    def total(self) -> int:
        return sum(t for _, t in self.by_kind.values())

    @property
    def share(self) -> float:
        return self.kept / self.total if self.total else 1.0

    def kind_share(self, kind: str) -> float:
        kept, total = self.by_kind.get(kind, [0, 0])
        return kept / total if total else 1.0

    def as_json(self) -> dict[str, Any]:
        return {
            "share": round(self.share, 6),
            "kept": self.kept,
            "total": self.total,
            "by_kind": {
                k: {"kept": v[0], "total": v[1], "share": round(v[0] / v[1], 6) if v[1] else 1.0}
                for k, v in sorted(self.by_kind.items())
            },
        }


def score_facts(facts: Iterable[Fact], text: str) -> RetentionScore:
    score = RetentionScore({kind: [0, 0] for kind in FACT_KINDS})
    for fact in facts:
        entry = score.by_kind.setdefault(fact.kind, [0, 0])
        entry[1] += 1
        if fact.seen_in(text):
            entry[0] += 1
    return score


class FactRetention:
    """The built-in retention scorer (see the module docs)."""

    name = "facts"
    description = (
        "task, the user's messages, last instruction, file paths and errors the model saw, "
        "still visible"
    )

    def score(
        self,
        original: AgentContext,
        compacted: AgentContext,
        stash: Mapping[str, str] | None = None,
    ) -> tuple[RetentionScore, RetentionScore]:
        """(retention, recoverability) of `compacted` against `original`: facts visible after
        compaction, and facts visible once the recovery store and `stash` are expanded."""
        facts = extract_facts(original)
        retained = score_facts(facts, visible_text(compacted))
        recovered = score_facts(facts, visible_text(expand(compacted, stash)))
        return retained, recovered
