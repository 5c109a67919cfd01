"""static-elision: keep repeated static text once; repeats become references.

Every text block (message text and the text parts of tool results) is split into paragraphs
(blank-line separated). A paragraph that already appeared earlier (in the system instruction, an
activated skill, or an earlier place in the conversation) is a repeat. Consecutive repeats form a
run; a run of at least `min_tokens` tokens whose one-line reference saves at least `min_saved`
tokens is replaced by that reference. A block with such runs becomes one `ElidedBlock` whose
`text` is the original with each run replaced by its reference line (empty when the whole block
was one run) and whose `etag` recovers the original block.

The first occurrence of every paragraph, the system instruction, the skills, the task (first user
message), thinking blocks, tool-call inputs, existing markers and the payloads that collapsed
markers point at are never changed; assistant text only with `include_assistant`. Because a block's
fate depends
only on what comes before it, appending messages never changes how earlier messages are compacted:
the prompt-cache prefix stays stable from one call to the next.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from pydantic import Field

from ..context import (
    AgentContext,
    Block,
    CollapsedBlock,
    ElidedBlock,
    Message,
    TextBlock,
    ToolResultBlock,
)
from ..pins import PinSet, pinned
from ..recovery import payload_etag, prune, put, result_etag
from ..strategy import Strategy
from ..tokens import TokenCounter
from ._common import TokenizerOption, counter_for

# A paragraph break: a line break, optional blank-looking lines, and the whitespace that follows.
# Captured so that the separators are kept exactly in the text the model is shown.
_BREAK = re.compile(r"(\n[ \t\r]*\n\s*)")
# Reference lines this strategy writes (never treated as text worth remembering).
_REF_LINE = re.compile(r"^\[static text elided[:;]")
SNIPPET_CHARS = 32


class StaticElisionOptions(TokenizerOption):
    min_tokens: int = Field(
        default=40,
        ge=1,
        description="Smallest run of repeated paragraphs (in tokens) that is replaced by a "
        "reference; shorter repeats stay in full.",
    )
    min_saved: int = Field(
        default=20,
        ge=1,
        description="Tokens a reference line must save over the run it replaces (the line "
        "itself costs ~35 tokens); a reference that saves less is not worth the model's look-up.",
    )
    include_assistant: bool = Field(
        default=False,
        description="Also elide repeats inside assistant text (code or actions the model sends "
        "again). Off by default: those are the model's own words, not static text, and a "
        "history of assistant turns made of reference lines invites the model to imitate them. "
        "Assistant text always counts as an earlier copy.",
    )
    include_tool_results: bool = Field(
        default=True,
        description="Also elide repeats inside the text parts of tool results (reminders and "
        "instruction footers that tools append, repeated error messages); when false only "
        "message text blocks are compacted (tool results still count as earlier copies).",
    )
    snippet: bool = Field(
        default=True,
        description="Quote the first words of the elided text in each reference line, so the "
        "model can tell what was there without looking it up (costs a few tokens per line).",
    )


@dataclass
class _Para:
    text: str  # the paragraph as written
    key: str  # what identifies it: stripped of surrounding whitespace
    ref: str | None = None  # where the earlier copy is, when this paragraph is a repeat


@dataclass
class _Plan:
    """What becomes of one text block: its pieces (paragraphs and separators, alternating), its
    paragraphs, and the runs of repeats to elide (first and last paragraph index, inclusive, and
    the run's tokens)."""

    pieces: list[str]
    paras: list[_Para]
    runs: list[tuple[int, int, int]]


def split_paragraphs(text: str) -> list[str]:
    """Paragraphs and the separators between them, alternating (even indexes are paragraphs), so
    that `"".join(split_paragraphs(t)) == t`."""
    return _BREAK.split(text)


class StaticElision(Strategy):
    """Keep static text (system prompt copies, instructions, policies, reminders, demonstrations)
    once; later copies of a paragraph become a one-line reference to the first copy. The replaced
    blocks stay recoverable through the `ElidedBlock` etag."""

    name = "static-elision"
    description = "Keep repeated static text once; repeats become references."
    Options = StaticElisionOptions
    options: StaticElisionOptions

    def compact(self, ctx: AgentContext) -> AgentContext:
        counter = counter_for(self.options.tokenizer)
        seen: dict[str, str] = {}  # paragraph key -> where its first copy is
        if ctx.system_instruction:
            self._remember(ctx.system_instruction, "system instruction", seen)
        for name in sorted(ctx.activated_skills):
            self._remember(ctx.activated_skills[name], f"skill {name}", seen)
        task = ctx.first_user_index
        protected = self._protected_payloads(ctx)
        pins = pinned(ctx)  # the user's words and pinned text are never rewritten
        recovery = dict(ctx.recovery)
        messages: list[Message] = list(ctx.messages)
        changed = False
        for i, msg in enumerate(ctx.messages):
            where = f"message {i}"
            editable = i != task and (msg.role != "assistant" or self.options.include_assistant)
            content: list[Block] = []
            touched = False
            for block in msg.content:
                new_block: Block = block
                if isinstance(block, TextBlock):
                    if editable and not pins.part(block):
                        new_block = self._elide(block, where, seen, counter, recovery)
                    else:
                        self._remember(block.text, where, seen)
                elif isinstance(block, ElidedBlock):
                    self._remember(block.text, where, seen)
                elif isinstance(block, ToolResultBlock):
                    elide = (
                        editable
                        and self.options.include_tool_results
                        and not (protected and result_etag(block) in protected)
                    )
                    new_block = self._result(block, where, seen, counter, recovery, elide, pins)
                touched = touched or new_block is not block
                content.append(new_block)
            if touched:
                messages[i] = msg.model_copy(update={"content": tuple(content)})
                changed = True
        if not changed:
            return ctx
        return prune(ctx.replace(messages=tuple(messages), recovery=recovery))

    # ------------------------------------------------------------------ one block

    def _result(
        self,
        block: ToolResultBlock,
        where: str,
        seen: dict[str, str],
        counter: TokenCounter,
        recovery: dict[str, str],
        elide: bool,
        pins: PinSet,
    ) -> ToolResultBlock:
        parts = []
        touched = False
        for part in block.content:
            new_part = part
            if isinstance(part, TextBlock):
                if elide and not pins.part(part):
                    new_part = self._elide(part, where, seen, counter, recovery)
                else:
                    self._remember(part.text, where, seen)
            elif isinstance(part, ElidedBlock):
                self._remember(part.text, where, seen)
            touched = touched or new_part is not part
            parts.append(new_part)
        if not touched:
            return block
        updated: ToolResultBlock = block.model_copy(update={"content": tuple(parts)})
        return updated

    def _elide(
        self,
        block: TextBlock,
        where: str,
        seen: dict[str, str],
        counter: TokenCounter,
        recovery: dict[str, str],
    ) -> TextBlock | ElidedBlock:
        plan = self._plan(block.text, where, seen, counter)
        if plan is None:
            return block
        etag = payload_etag([block])
        # a reference that saves a handful of tokens costs the model more (a look-up) than it saves
        least = self.options.min_saved
        plan.runs = [
            run
            for run in plan.runs
            if run[2] - counter.text(self._line(plan.paras[run[0] : run[1] + 1], etag)) >= least
        ]
        if not plan.runs:
            return block
        put(recovery, [block])
        return self._render(plan, etag)

    def _plan(
        self, text: str, where: str, seen: dict[str, str], counter: TokenCounter
    ) -> _Plan | None:
        """Mark repeats (and remember first copies); return the runs worth eliding, if any."""
        pieces = split_paragraphs(text)
        paras: list[_Para] = []
        for k in range(0, len(pieces), 2):
            raw = pieces[k]
            key = raw.strip()
            para = _Para(raw, key)
            if key and not _REF_LINE.match(key):
                first = seen.get(key)
                if first is None:
                    seen[key] = where
                else:
                    para.ref = first
            paras.append(para)
        runs: list[tuple[int, int, int]] = []
        n = len(paras)
        k = 0
        while k < n:
            if paras[k].ref is None:
                k += 1
                continue
            end = k
            while end + 1 < n and paras[end + 1].ref is not None:
                end += 1
            tokens = sum(counter.text(p.text) for p in paras[k : end + 1])
            if tokens >= self.options.min_tokens:
                runs.append((k, end, tokens))
            k = end + 1
        if not runs:
            return None
        return _Plan(pieces, paras, runs)

    def _render(self, plan: _Plan, etag: str) -> ElidedBlock:
        first_run = plan.paras[plan.runs[0][0] : plan.runs[0][1] + 1]
        label = self._snippet(first_run)
        refs = _refs([plan.paras[k] for s, e, _ in plan.runs for k in range(s, e + 1)])
        nonempty = [k for k, p in enumerate(plan.paras) if p.key]
        start, end, _ = plan.runs[0]
        if len(plan.runs) == 1 and nonempty and start <= nonempty[0] and nonempty[-1] <= end:
            return ElidedBlock(etag=etag, ref=refs, text="", label=label)
        out: list[str] = []
        run_at = {s: e for s, e, _ in plan.runs}
        k = 0
        while k < len(plan.paras):
            if k in run_at:
                end = run_at[k]
                out.append(self._line(plan.paras[k : end + 1], etag))
                if end + 1 < len(plan.paras):
                    out.append(plan.pieces[2 * end + 1])
                k = end + 1
                continue
            out.append(plan.paras[k].text)
            if k + 1 < len(plan.paras):
                out.append(plan.pieces[2 * k + 1])
            k += 1
        return ElidedBlock(etag=etag, ref=refs, text="".join(out), label=label)

    # ------------------------------------------------------------------ helpers

    def _line(self, run: Sequence[_Para], etag: str) -> str:
        """The reference that replaces a run (the same shape `marker_text` gives a whole-block
        elision)."""
        label = self._snippet(run)
        label = f": {label}" if label else ""
        return f"[static text elided{label}; same as {_refs(run)}, etag {etag}]"

    def _snippet(self, run: Sequence[_Para]) -> str:
        if not self.options.snippet:
            return ""
        words = " ".join(run[0].key.split())
        if len(words) > SNIPPET_CHARS:
            cut = words[:SNIPPET_CHARS]
            if " " in cut[SNIPPET_CHARS // 2 :]:
                cut = cut[: cut.rindex(" ")]
            words = cut.rstrip() + "…"
        return f'"{words}"'

    @staticmethod
    def _remember(text: str, where: str, seen: dict[str, str]) -> None:
        for k, raw in enumerate(split_paragraphs(text)):
            if k % 2:
                continue
            key = raw.strip()
            if key and not _REF_LINE.match(key):
                seen.setdefault(key, where)

    @staticmethod
    def _protected_payloads(ctx: AgentContext) -> set[str]:
        """Etags of payloads that collapsed markers stand for: the full copies they point at are
        left whole, so a marker never points at text that is itself elided."""
        out: set[str] = set()
        for msg in ctx.messages:
            for block in msg.content:
                if isinstance(block, CollapsedBlock):
                    out.add(block.etag)
                elif isinstance(block, ToolResultBlock):
                    out.update(p.etag for p in block.content if isinstance(p, CollapsedBlock))
        return out


def _refs(run: Sequence[_Para]) -> str:
    """Where the first copies of a run's paragraphs are, in order of first use, without repeats:
    "message 3", "system instruction and messages 3, 9"."""
    found: list[str] = []
    for para in run:
        if para.ref is not None and para.ref not in found:
            found.append(para.ref)
    if len(found) == 1:
        return found[0]
    shown = found[:3]
    numbers = [r.removeprefix("message ") for r in shown if r.startswith("message ")]
    parts = [r for r in shown if not r.startswith("message ")]
    if numbers:
        parts.append(("message " if len(numbers) == 1 else "messages ") + ", ".join(numbers))
    return " and ".join(parts) + (" and more" if len(found) > 3 else "")
