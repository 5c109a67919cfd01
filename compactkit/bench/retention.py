"""Retention: which facts of the original session a model can still see after compaction.

Facts (deterministic, extracted from the original context):

* ``task``: the first user message;
* ``user``: every later user message (its text);
* ``last_instruction``: the last user message;
* ``path``: every file path in a tool call's input (keys such as ``path``, ``file_path``, and the file of
  ``cat``/``sed -n``/``head`` commands);
* ``error``: each distinct error: for every failed tool result (flagged as an error, or reporting a
  non-zero exit code), the line that says what went wrong: its last ``...Error: ...`` /
  ``...Exception: ...`` line, else the last line naming an error, else its first line
  (`compactkit.summarize.extractive.error_line`).

A fact is *retained* when its text (whitespace folded, the first 200 characters of long ones) occurs
in what the model is shown: message text,
summaries, marker labels, tool-call names and inputs. The recovery store does not count; what `expand`
could restore is reported apart as *recoverability*.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from ..context import AgentContext, ToolResultBlock, render_block
from ..recovery import expand
from ..strategies._common import payload_path
from ..summarize.extractive import error_line, exit_code

FACT_KINDS = ("task", "user", "last_instruction", "path", "error")
_PATH_KEYS = ("path", "file_path", "filepath", "filename", "notebook_path", "absolute_path")
_SPACE = re.compile(r"\s+")
_MAX_FACT = 200


@dataclass(frozen=True)
class Fact:
    kind: str
    text: str


def _fold(text: str) -> str:
    return _SPACE.sub(" ", text).strip()


def _clip(text: str) -> str:
    """Long facts are matched by their first 200 characters (after folding whitespace)."""
    return _fold(text)[:_MAX_FACT]


def _error_of(block: ToolResultBlock) -> str | None:
    code = exit_code(block.text)
    if not (block.is_error or (code is not None and code != 0)):
        return None
    return error_line(block.text) or None


def extract_facts(ctx: AgentContext) -> list[Fact]:
    """The facts of a session, in order of first appearance, without duplicates."""
    facts: dict[tuple[str, str], Fact] = {}

    def add(kind: str, text: str) -> None:
        clipped = _clip(text)
        if clipped:
            facts.setdefault((kind, clipped), Fact(kind, clipped))

    task_index = ctx.first_user_index
    user_texts = [
        (i, m.text)
        for i, m in enumerate(ctx.messages)
        if m.role == "user"
        and m.text.strip()
        and not m.metadata.get("is_demo")
        and not m.metadata.get("compactkit_marker")
    ]
    if task_index is not None:
        add("task", ctx.messages[task_index].text)
    for i, text in user_texts:
        if i != task_index:
            add("user", text)
    if user_texts:
        add("last_instruction", user_texts[-1][1])
    for msg in ctx.messages:
        for call in msg.tool_calls:
            if isinstance(call.input, dict):
                for key in _PATH_KEYS:
                    value = call.input.get(key)
                    if isinstance(value, str) and value.strip():
                        add("path", value)
            path = payload_path(call)
            if path:
                add("path", path)
        for result in msg.tool_results:
            error = _error_of(result)
            if error:
                add("error", error)
    return list(facts.values())


def visible_text(ctx: AgentContext) -> str:
    """Everything a model is shown, whitespace folded (the recovery store excluded)."""
    parts: list[str] = []
    if ctx.system_instruction:
        parts.append(ctx.system_instruction)
    parts.extend(ctx.activated_skills.values())
    for msg in ctx.messages:
        for block in msg.content:
            if block.type == "tool_call":
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
        if fact.text in text:
            entry[0] += 1
    return score


class FactRetention:
    """The built-in retention scorer (see the module docs)."""

    name = "facts"
    description = "task, user messages, last instruction, file paths and errors still visible"

    def score(
        self,
        original: AgentContext,
        compacted: AgentContext,
        stash: Mapping[str, str] | None = None,
    ) -> tuple[RetentionScore, RetentionScore]:
        """(retention, recoverability) of `compacted` against `original`."""
        facts = extract_facts(original)
        retained = score_facts(facts, visible_text(compacted))
        recovered = score_facts(facts, visible_text(expand(compacted, stash)))
        return retained, recovered
