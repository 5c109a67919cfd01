"""Marking the user's words an agent stored outside plain user messages (inside a tool result, or
in a user turn the agent wrote itself): each adapter says where they are, this cuts them out as
text blocks of their own and pins them (`compactkit.pins.mark`).

An adapter passes `mark_words` a finder: for one text block, where the user's words are in it
(`Span`s). The block is cut at line breaks (`compactkit.pins.split_lines`) into consecutive text
blocks whose texts joined with newlines give the block back, so the context renders exactly as
before (`ToolResultBlock.text` is unchanged), and the part holding the words is pinned.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence, Set
from dataclasses import dataclass
from typing import TypeVar

from ..context import (
    AgentContext,
    Block,
    ContentPart,
    Message,
    Pin,
    TextBlock,
    ToolResultBlock,
    etag_of,
)
from ..pins import mark, split_lines


@dataclass(frozen=True)
class Span:
    """The user's words at `text[start:end]` of one text block, and why they are pinned."""

    start: int
    end: int
    reason: str


@dataclass(frozen=True)
class Where:
    """A text block a finder is asked about: its message, and the tool result holding it (with
    the name of the call it answers, when known)."""

    index: int
    message: Message
    result: ToolResultBlock | None = None
    tool: str | None = None


Finder = Callable[[Where, str], Sequence[Span]]
P = TypeVar("P", Block, ContentPart)


def split_marked(text: str, spans: Sequence[Span]) -> list[tuple[str, str | None]]:
    """`text` cut so that the lines holding each span form one part: (part, reason or None) in
    order, with ``"\\n".join(parts) == text`` and no empty part (a span overlapping the lines of
    an earlier one goes with them)."""
    return _no_empty(_split(text, sorted(spans, key=lambda s: s.start)))


def _split(text: str, spans: list[Span]) -> list[tuple[str, str | None]]:
    spans = [s for s in spans if 0 <= s.start < s.end <= len(text)]
    if not spans:
        return [(text, None)]
    first = spans[0]
    parts, at = split_lines(text, first.start, first.end)
    out: list[tuple[str, str | None]] = [(p, None) for p in parts[:at]]
    out.append((parts[at], first.reason))
    if at + 1 < len(parts):
        shift = sum(len(p) + 1 for p in parts[: at + 1])
        later = [Span(s.start - shift, s.end - shift, s.reason) for s in spans[1:]]
        out.extend(_split(parts[at + 1], later))
    return out


def _no_empty(parts: list[tuple[str, str | None]]) -> list[tuple[str, str | None]]:
    """Fold an empty part into its neighbour (an API refuses an empty text block): joined with
    newlines, ``[a, ""]`` is ``a + "\\n"`` and ``["", a]`` is ``"\\n" + a``."""
    out: list[tuple[str, str | None]] = []
    pending_newlines = 0
    for part, reason in parts:
        if part == "":
            if out:
                last, why = out[-1]
                out[-1] = (last + "\n", why)
            else:
                pending_newlines += 1
            continue
        out.append(("\n" * pending_newlines + part, reason))
        pending_newlines = 0
    if pending_newlines and not out:
        return [("\n" * (pending_newlines - 1), None)]
    return out


def mark_words(ctx: AgentContext, find: Finder) -> AgentContext:
    """`ctx` with the user's words `find` points at cut into text blocks of their own and pinned
    (`AgentContext.pins`); `ctx` itself when there are none."""
    names = {c.id: c.name for m in ctx.messages for c in m.tool_calls}
    pins: list[Pin] = list(ctx.pins)
    messages: list[Message] = []
    changed = False
    for index, msg in enumerate(ctx.messages):
        blocks: list[Block] = []
        touched = False
        for block in msg.content:
            if isinstance(block, TextBlock):
                parts = _cut(block, Where(index, msg), find, pins)
                touched = touched or parts is not None
                blocks.extend(parts if parts is not None else [block])
            elif isinstance(block, ToolResultBlock):
                where = Where(index, msg, block, names.get(block.tool_call_id))
                content: list[ContentPart] = []
                cut = False
                for part in block.content:
                    pieces = _cut(part, where, find, pins) if isinstance(part, TextBlock) else None
                    cut = cut or pieces is not None
                    content.extend(pieces if pieces is not None else [part])
                touched = touched or cut
                blocks.append(
                    block.model_copy(update={"content": tuple(content)}) if cut else block
                )
            else:
                blocks.append(block)
        if touched:
            changed = True
            msg = msg.model_copy(update={"content": tuple(blocks)})
        messages.append(msg)
    if not changed:
        return ctx
    return ctx.replace(messages=tuple(messages), pins=tuple(dict.fromkeys(pins)))


def _cut(block: TextBlock, where: Where, find: Finder, pins: list[Pin]) -> list[TextBlock] | None:
    spans = find(where, block.text)
    if not spans:
        return None
    parts = split_marked(block.text, spans)
    for text, reason in parts:
        if reason is not None and text.strip():
            pins.append(mark(text, where.index, reason))
    if len(parts) == 1 and parts[0][1] is not None:
        return [block]  # the whole block is the user's words: pinned as it is
    return [TextBlock(text=text) for text, _ in parts]


def rejoin(parts: Sequence[P], pinned: Set[str], where: Where, find: Finder) -> list[P]:
    """`parts` (text blocks of a message or of a tool result) with each pinned text joined back to
    the neighbours `mark_words` cut it from, for a writer: a run of text blocks is joined (with
    newlines) only when `find` and `split_marked` cut the joined text into exactly those blocks
    again, so what was one block is written as one, and reads back cut and pinned the same.
    `pinned` holds the etags of the pinned texts."""
    out: list[P] = []
    k = 0
    while k < len(parts):
        part = parts[k]
        if isinstance(part, TextBlock) and etag_of(part.text) in pinned:
            joined = _joinable(parts, k, out, where, find)
            if joined is not None:
                lo, hi, text = joined
                if lo < k:
                    out.pop()
                out.append(TextBlock(text=text))
                k = hi + 1
                continue
        out.append(part)
        k += 1
    return out


def _joinable(
    parts: Sequence[object], k: int, out: Sequence[object], where: Where, find: Finder
) -> tuple[int, int, str] | None:
    for lo, hi in ((k - 1, k + 1), (k - 1, k), (k, k + 1)):
        if lo < 0 or hi >= len(parts) or (lo < k and (not out or out[-1] is not parts[lo])):
            continue
        window = parts[lo : hi + 1]
        texts = [w.text for w in window if isinstance(w, TextBlock)]
        if len(texts) != len(window):
            continue
        text = "\n".join(texts)
        if [t for t, _ in split_marked(text, find(where, text))] == texts:
            return lo, hi, text
    return None


def find_after(text: str, prefix: str, ends: Sequence[str] = ()) -> tuple[int, int] | None:
    """(start, end) of what follows `prefix` at the start of `text` (leading whitespace allowed)
    up to the first of `ends` after it, else to the end; None without the prefix or words."""
    head = len(text) - len(text.lstrip())
    if not text.startswith(prefix, head):
        return None
    start = head + len(prefix)
    end = len(text)
    for marker in ends:
        at = text.find(marker, start)
        if at >= 0:
            end = min(end, at)
    if not text[start:end].strip():
        return None
    return start, end


__all__ = ["Finder", "Span", "Where", "find_after", "mark_words", "rejoin", "split_marked"]
