"""Pins: content that is never the compactor's to touch.

A pinned span is never removed, summarized or rewritten by any strategy: it stays, verbatim, in
what is sent to the model. The validator checks every pin after every step of every pipeline, like
tool pairing (rule ``pin-broken``), so a strategy that drops or alters a pinned span breaks the
contract whoever wrote it.

Where pins come from:

* **derived from the context** (always on): every text block of a message in the human's own words
  (`Message.is_human`), the task, the last request, and a pending call (a call of the final
  assistant turn still waiting for its result);
* **marked by adapters** (`AgentContext.pins`): the user's words an agent stored inside a tool
  result (approvals with text, corrections, answers to the agent's questions, rejection feedback);
  see docs/formats.md for what each format marks;
* **user rules** (`AgentContext.pin_rules`, `--pin RULE`): ``tool=NAME`` (the calls of a tool and
  their results), ``path=GLOB`` (results showing a file whose path matches, e.g.
  ``path=**/CLAUDE.md``), ``re=REGEX`` (text blocks the pattern matches) and ``origin=NAME`` (user
  turns of that origin, e.g. ``origin=harness``). Names and globs match like shell globs.

A pinned text is a whole text block, of a message or of a tool result, named by its content
address, so it is found wherever a strategy moved it. A strategy that removes the turns holding
pinned text keeps the text by *carrying* it: the message it writes in their place (a summary or an
omitted marker) holds the pinned blocks verbatim after its marker (`carry`). A pinned call of a
rule may be carried as its rendering (`call_text`); a pending call stays where it is.
"""

from __future__ import annotations

import bisect
import fnmatch
import functools
import re
from collections import Counter
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Literal

from .context import (
    HARNESS_BLOCKS_KEY,
    ORIGINS,
    AgentContext,
    Message,
    Pin,
    TextBlock,
    ToolCallBlock,
    ToolResultBlock,
    canonical_json,
    etag_of,
    marker_meta,
    text_utf8,
)
from .errors import ConfigError, redact

REASONS: dict[str, str] = {
    "task": "the task: the first message in the human's words",
    "last-request": "the human's last message",
    "user": "a message in the human's own words",
    "user-feedback": "the human's words stored in a tool result: an approval with text, a "
    "correction or the feedback given when rejecting a call",
    "user-answer": "the human's answer to a question the agent asked, stored in a tool result",
    "user-command": "a command the human ran through the agent (e.g. Claude Code's `!` commands)",
    "pending-call": "a call of the final assistant turn still waiting for its result",
    "carried": "pinned text a summary or omitted marker carries for the turns it replaced",
    "rule": "a user rule (--pin)",
}
"""Every reason a pin can carry, with what it means."""

PASTE_CHARS = 32_000
"""A pinned text longer than this (a pasted log, say) may be carried cut: its first
`PASTE_HEAD` and last `PASTE_TAIL` characters around a note, the whole recoverable from the marker
that carries it. The one exception to keeping pinned words verbatim; see `cut_paste`."""
PASTE_HEAD = 16_000
PASTE_TAIL = 8_000

RULE_KINDS = ("tool", "path", "re", "origin")
"""The kinds of user pin rules: `KIND=VALUE`."""

ORIGIN_NAMES = ("human", *ORIGINS)


# --------------------------------------------------------------------------- user rules


@dataclass(frozen=True)
class PinRule:
    """One parsed `--pin` rule."""

    kind: Literal["tool", "path", "re", "origin"]
    value: str

    def __str__(self) -> str:
        return f"{self.kind}={self.value}"


def parse_rule(text: str) -> PinRule:
    """`KIND=VALUE` as a `PinRule`; a `ConfigError` (exit 2) naming what is wrong otherwise."""
    kind, sep, value = text.partition("=")
    kind = kind.strip()
    if not sep or kind not in RULE_KINDS or not value:
        raise ConfigError(
            f"pin rule {redact(text)!r} is not KIND=VALUE with KIND one of "
            f"{', '.join(RULE_KINDS)} (e.g. tool=TodoWrite, path=**/CLAUDE.md, re=TODO, "
            "origin=harness)"
        )
    if kind == "re":
        try:
            re.compile(value)
        except re.error as exc:
            raise ConfigError(
                f"pin rule {redact(text)!r}: bad regular expression ({exc})"
            ) from None
    if kind == "origin" and value not in ORIGIN_NAMES:
        raise ConfigError(
            f"pin rule {redact(text)!r}: unknown origin (known: {', '.join(ORIGIN_NAMES)})"
        )
    return PinRule(kind, value)  # type: ignore[arg-type]  # kind checked against RULE_KINDS


def with_rules(ctx: AgentContext, rules: Iterable[str]) -> AgentContext:
    """`ctx` with the user pin `rules` added (each checked; duplicates kept once)."""
    rules = [str(parse_rule(r)) for r in rules]
    merged = tuple(dict.fromkeys((*ctx.pin_rules, *rules)))
    return ctx if merged == ctx.pin_rules else ctx.replace(pin_rules=merged)


def path_matches(path: str, pattern: str) -> bool:
    """Whether a file path matches a pin glob: `**/CLAUDE.md` and `CLAUDE.md` both match
    `/repo/CLAUDE.md`; a pattern without `/` is matched against the file name."""
    path = path.replace("\\", "/")
    if "/" not in pattern:
        return fnmatch.fnmatchcase(path.rsplit("/", 1)[-1], pattern)
    return fnmatch.fnmatchcase(path, pattern) or fnmatch.fnmatchcase("/" + path, pattern)


# --------------------------------------------------------------------------- adapters


def mark(text: str, message: int, reason: str) -> Pin:
    """The pin an adapter stores for `text`, a whole text block of message `message` holding the
    user's words (`reason`: one of `REASONS`, usually 'user-feedback' or 'user-answer')."""
    if reason not in REASONS:
        raise ValueError(f"unknown pin reason {reason!r}")
    return Pin(etag=etag_of(text), chars=len(text), reason=reason, message=message)


def split_lines(text: str, start: int, end: int) -> tuple[tuple[str, ...], int]:
    """Cut `text` at line breaks so that the lines holding `text[start:end]` form one part.

    Returns the parts and the index of that part; ``"\\n".join(parts) == text``, so a tool result
    whose text is split this way renders exactly as before. Adapters use it to make the user's
    words inside a longer tool output a text block of their own, which they can pin.
    """
    line_start = text.rfind("\n", 0, start) + 1
    line_end = text.find("\n", max(end, line_start))
    if end > start and text[end - 1 : end] == "\n":
        line_end = end - 1
    if line_end < 0:
        line_end = len(text)
    parts: list[str] = []
    if line_start > 0:
        parts.append(text[: line_start - 1])
    index = len(parts)
    parts.append(text[line_start:line_end])
    if line_end < len(text):
        parts.append(text[line_end + 1 :])
    return tuple(parts), index


# --------------------------------------------------------------------------- resolving


@dataclass(frozen=True)
class Resolved:
    """A pin as found in one context: a text block (by length and etag) or a call (by id)."""

    kind: Literal["text", "call"]
    etag: str
    chars: int
    reason: str
    message: int
    preview: str
    call_id: str | None = None
    movable: bool = True  # a call that may be carried as its rendering (rule pins)
    cut_etag: str | None = None  # a long paste: the etag of its carried cut form

    def describe(self) -> str:
        what = f"call {self.call_id!r}" if self.kind == "call" else f"text {self.preview!r}"
        return f"{self.reason} pin on {what} (input message {self.message})"


def _cut_note(chars: int, etag: str) -> str:
    cut = chars - PASTE_HEAD - PASTE_TAIL
    return (
        f"\n[… {cut:,} characters of this pasted text cut here; the whole text (etag {etag}) "
        "is recoverable by expanding the marker above]\n"
    )


def cut_paste(text: str) -> str:
    """How a pinned text over `PASTE_CHARS` is carried: head, a note, tail (unchanged when
    shorter). The note names the text's etag; the whole text is in the stored turns."""
    if len(text) <= PASTE_CHARS:
        return text
    return text[:PASTE_HEAD] + _cut_note(len(text), etag_of(text)) + text[-PASTE_TAIL:]


def call_text(call: ToolCallBlock) -> str:
    """How a pinned call is carried when the turn holding it is summarized or dropped."""
    return f"[pinned call {call.name}] {canonical_json(call.input)}"


def _call_etag(call: ToolCallBlock) -> str:
    return etag_of(canonical_json({"id": call.id, "name": call.name, "input": call.input}))


def _preview(text: str) -> str:
    line = " ".join(text.split())
    return redact(line[:40] + ("..." if len(line) > 40 else ""))


@functools.lru_cache(maxsize=256)
def _text_pin(text: str, reason: str, message: int) -> Resolved:
    """A text's pin (remembered: each call of an agent loop resolves the pins of a context one
    message longer, whose human texts are the last call's)."""
    cut = etag_of(cut_paste(text)) if len(text) > PASTE_CHARS else None
    return Resolved("text", etag_of(text), len(text), reason, message, _preview(text), cut_etag=cut)


def _text_blocks(msg: Message) -> Iterator[TextBlock]:
    """Every text block of `msg`, tool-result parts included."""
    for block in msg.content:
        if isinstance(block, TextBlock):
            yield block
        elif isinstance(block, ToolResultBlock):
            yield from (part for part in block.content if isinstance(part, TextBlock))


def _may_be_as_long(block: TextBlock, lengths: Sequence[int]) -> bool:
    """False when no length in `lengths` (sorted) can be the length of a block kept as UTF-8 (a
    character is one to four bytes), so that its text is not decoded to be measured."""
    data = text_utf8(block)
    if data is None:
        return True
    k = bisect.bisect_left(lengths, -(-len(data) // 4))
    return k < len(lengths) and lengths[k] <= len(data)


def _texts(msg: Message) -> Iterator[str]:
    """Every non-empty text block of `msg`, tool-result parts included."""
    for block in msg.content:
        if isinstance(block, TextBlock):
            if block.text.strip():
                yield block.text
        elif isinstance(block, ToolResultBlock):
            for part in block.content:
                if isinstance(part, TextBlock) and part.text.strip():
                    yield part.text


def _derived(ctx: AgentContext) -> Iterator[Resolved]:
    messages = ctx.messages
    task = ctx.first_user_index
    human = [i for i, m in enumerate(messages) if m.is_human]
    last = human[-1] if human else None
    for i in human:
        reason = "task" if i == task else "last-request" if i == last else "user"
        harness = _harness_blocks(messages[i])
        for j, block in enumerate(messages[i].content):
            if isinstance(block, TextBlock) and block.text.strip() and j not in harness:
                yield _text_pin(block.text, reason, i)
    if task is not None and not messages[task].is_human:
        for block in messages[task].content:
            if isinstance(block, TextBlock) and block.text.strip():
                yield _text_pin(block.text, "task", task)
    for i, msg in enumerate(messages):
        if marker_meta(msg):
            for block in msg.content[1:]:
                if isinstance(block, TextBlock) and block.text.strip():
                    yield _text_pin(block.text, "carried", i)
    yield from _pending(messages)


def _harness_blocks(msg: Message) -> set[int]:
    """Indexes of the blocks an agent harness added to a message in the human's words."""
    value = msg.metadata.get(HARNESS_BLOCKS_KEY)
    return {v for v in value if isinstance(v, int)} if isinstance(value, list) else set()


def _pending(messages: Sequence[Message]) -> Iterator[Resolved]:
    last = max((i for i, m in enumerate(messages) if m.role == "assistant"), default=None)
    if last is None or not messages[last].tool_calls:
        return
    answered = {r.tool_call_id for m in messages[last + 1 :] for r in m.tool_results}
    for call in messages[last].tool_calls:
        if call.id not in answered:
            preview = _preview(call.name)
            yield Resolved(
                "call", _call_etag(call), 0, "pending-call", last, preview, call.id, False
            )


def _by_rules(ctx: AgentContext) -> Iterator[Resolved]:
    rules = [parse_rule(r) for r in ctx.pin_rules]
    if not rules:
        return
    from .toolcall import path_arg, payload_path

    calls: dict[str, ToolCallBlock] = {}
    for i, msg in enumerate(ctx.messages):
        for rule in rules:
            reason = f"rule {rule}"
            if rule.kind == "re":
                pattern = re.compile(rule.value)
                for text in _texts(msg):
                    if pattern.search(text):
                        yield _text_pin(text, reason, i)
            elif rule.kind == "origin" and msg.role == "user":
                origin = "human" if msg.origin is None else msg.origin
                if origin == rule.value:
                    for text in _texts(msg):
                        yield _text_pin(text, reason, i)
            elif rule.kind == "path" and msg.role == "user" and msg.origin is not None:
                # instruction files an agent injects into a user turn (Claude Code's
                # "Contents of /repo/CLAUDE.md (project instructions ...):")
                for text in _texts(msg):
                    if any(path_matches(p, rule.value) for p in _INJECTED.findall(text)):
                        yield _text_pin(text, reason, i)
            elif rule.kind == "tool":
                for call in msg.tool_calls:
                    if fnmatch.fnmatchcase(call.name, rule.value):
                        yield Resolved(
                            "call", _call_etag(call), 0, reason, i, _preview(call.name), call.id
                        )
        for call in msg.tool_calls:
            calls[call.id] = call
        for result in msg.tool_results:
            called = calls.get(result.tool_call_id)
            if called is None:
                continue
            for rule in rules:
                hit = (rule.kind == "tool" and fnmatch.fnmatchcase(called.name, rule.value)) or (
                    rule.kind == "path"
                    and any(
                        p and path_matches(p, rule.value)
                        for p in (path_arg(called), payload_path(called))
                    )
                )
                if hit:
                    for part in result.content:
                        if isinstance(part, TextBlock) and part.text.strip():
                            yield _text_pin(part.text, f"rule {rule}", i)


_INJECTED = re.compile(r"Contents of (\S+?)[:\s]")


def _stored(ctx: AgentContext) -> Iterator[Resolved]:
    if not ctx.pins:
        return
    wanted = {(p.chars, p.etag): p for p in ctx.pins}
    lengths = {p.chars for p in ctx.pins}
    ordered = sorted(lengths)
    for i, msg in enumerate(ctx.messages):
        for block in _text_blocks(msg):
            if not _may_be_as_long(block, ordered):
                continue
            text = block.text
            if len(text) in lengths and text.strip():
                pin = wanted.get((len(text), etag_of(text)))
                if pin is not None:
                    yield _text_pin(text, pin.reason, i)


def resolve(ctx: AgentContext) -> tuple[Resolved, ...]:
    """Every pin of `ctx`: derived, marked by its adapter and from its rules (cached on the value).

    A text pinned for several reasons counts once per block holding it; the most specific reason
    is kept."""
    cached = ctx.__dict__.get("_pins")
    if cached is not None:
        return cached  # type: ignore[no-any-return]  # set below, always this tuple
    seen: dict[tuple[str, int, str | None], Resolved] = {}
    for pin in (*_derived(ctx), *_stored(ctx), *_by_rules(ctx)):
        key = (pin.etag, pin.message, pin.call_id)
        if key not in seen:
            seen[key] = pin
    found = _counted(ctx, seen.values())
    ctx.__dict__["_pins"] = found
    return found


def _counted(ctx: AgentContext, pins: Iterable[Resolved]) -> tuple[Resolved, ...]:
    """One entry per pinned block: a message holding the same pinned text twice needs both.

    Each message's texts are read once, whatever the number of its pins (a summary carrying
    thousands of user messages holds thousands of pins), and only texts as long as one of
    them are hashed."""
    pins = tuple(pins)
    lengths: dict[int, set[int]] = {}
    for pin in pins:
        if pin.kind == "text":
            lengths.setdefault(pin.message, set()).add(pin.chars)
    copies: dict[int, Counter[tuple[int, str]]] = {}
    for index, wanted in lengths.items():
        copies[index] = Counter(
            (len(t), etag_of(t)) for t in _texts(ctx.messages[index]) if len(t) in wanted
        )
    out: list[Resolved] = []
    for pin in pins:
        if pin.kind == "text":
            out.extend([pin] * max(copies[pin.message][(pin.chars, pin.etag)], 1))
        else:
            out.append(pin)
    return tuple(out)


# --------------------------------------------------------------------------- for strategies


class PinSet:
    """What a strategy must leave alone in one context: ask before removing or rewriting."""

    def __init__(self, ctx: AgentContext) -> None:
        self.pins = resolve(ctx)
        self._texts = {(p.chars, p.etag) for p in self.pins if p.kind == "text"}
        self._lengths = {p.chars for p in self.pins if p.kind == "text"}
        self._sorted_lengths = sorted(self._lengths)
        self._calls = {p.call_id: p for p in self.pins if p.kind == "call"}
        self._carried: dict[int, tuple[Message, tuple[tuple[str | None, TextBlock], ...]]] = {}

    def __bool__(self) -> bool:
        return bool(self.pins)

    def text(self, text: str) -> bool:
        """Whether a text block with this text is pinned."""
        return len(text) in self._lengths and (len(text), etag_of(text)) in self._texts

    def part(self, part: object) -> bool:
        """Whether a content block (or tool-result part) is pinned text."""
        return (
            isinstance(part, TextBlock)
            and _may_be_as_long(part, self._sorted_lengths)
            and self.text(part.text)
        )

    def call(self, call: ToolCallBlock) -> bool:
        return call.id in self._calls

    def fixed_call(self, call: ToolCallBlock) -> bool:
        """A pinned call that must stay where it is (a pending call)."""
        pin = self._calls.get(call.id)
        return pin is not None and not pin.movable

    def message(self, msg: Message) -> bool:
        """Whether `msg` holds anything pinned."""
        return any(self.text(t) for t in _texts(msg)) or any(self.call(c) for c in msg.tool_calls)

    def result(self, block: ToolResultBlock) -> bool:
        return any(self.part(p) for p in block.content)

    def carry(self, messages: Iterable[Message]) -> tuple[TextBlock, ...]:
        """The pinned text of `messages`, in order, as the blocks a marker replacing them carries
        (already carried blocks of earlier markers included; calls carried as `call_text`).

        A pinned text the user sent again word for word (a re-sent prompt template, a log pasted
        twice) is carried once: each later copy becomes `repeat_note`, which points at it (the
        validator counts it as a copy while the text itself is there)."""
        out: list[TextBlock] = []
        seen: set[str] = set()
        for msg in messages:
            # a strategy asks twice (what dropping would carry, then what it carries): the
            # answer of a message is kept, with the message so its id stays its own
            held = self._carried.get(id(msg))
            if held is None or held[0] is not msg:
                held = self._carried[id(msg)] = (msg, self._carry_one(msg))
            for text, block in held[1]:
                if text is None:
                    out.append(block)
                    continue
                etag = etag_of(text)
                note = repeat_note(text)
                if etag in seen and len(note) < len(text) and not REPEAT.match(text):
                    out.append(TextBlock(text=note))
                else:
                    seen.add(etag)
                    out.append(block)
        return tuple(out)

    def _carry_one(self, msg: Message) -> tuple[tuple[str | None, TextBlock], ...]:
        """What `msg` carries: (the pinned text, the block carrying it), or (None, a call's
        rendering)."""
        out: list[tuple[str | None, TextBlock]] = []
        for block in msg.content:
            if isinstance(block, TextBlock):
                if self.part(block):
                    out.append((block.text, _carried(block)))
            elif isinstance(block, ToolCallBlock):
                if self.call(block):
                    out.append((None, TextBlock(text=call_text(block))))
            elif isinstance(block, ToolResultBlock):
                out.extend(
                    (p.text, _carried(p))
                    for p in block.content
                    if isinstance(p, TextBlock) and self.part(p)
                )
        return tuple(out)


REPEAT = re.compile(r"^\[the same \d[\d,]*-character text as pinned above \(etag ([0-9a-f]+)\)\]$")


def repeat_note(text: str) -> str:
    """What a marker carries for a pinned text it already carries once (`PinSet.carry`)."""
    return f"[the same {len(text):,}-character text as pinned above (etag {etag_of(text)})]"


def _carried(block: TextBlock) -> TextBlock:
    return block if len(block.text) <= PASTE_CHARS else TextBlock(text=cut_paste(block.text))


def pinned(ctx: AgentContext) -> PinSet:
    """The pins of `ctx` as strategies ask about them (cached on the value)."""
    cached = ctx.__dict__.get("_pinset")
    if cached is None:
        cached = ctx.__dict__["_pinset"] = PinSet(ctx)
    assert isinstance(cached, PinSet)
    return cached


# --------------------------------------------------------------------------- checking


def broken(out: AgentContext, original: AgentContext) -> list[tuple[int | None, str]]:
    """(message, detail) for every pin of `original` that `out` does not keep verbatim, and for
    pins or pin rules a strategy changed."""
    problems: list[tuple[int | None, str]] = []
    if not set(original.pins) <= set(out.pins) or not set(original.pin_rules) <= set(out.pin_rules):
        problems.append((None, "pins or pin rules of the context were dropped"))
    pins = resolve(original)
    if not pins:
        return problems
    need = Counter((p.chars, p.etag) for p in pins if p.kind == "text")
    lengths = {chars for chars, _ in need}
    # a long paste may be there in its cut form (`cut_paste`)
    cuts = {p.cut_etag: (p.chars, p.etag) for p in pins if p.cut_etag}
    lengths.update(
        PASTE_HEAD + PASTE_TAIL + len(_cut_note(chars, etag)) for chars, etag in cuts.values()
    )
    have: Counter[tuple[int, str]] = Counter()
    calls: dict[str, str] = {}
    carried_calls: set[str] = set()
    repeats: Counter[str] = Counter()
    for msg in out.messages:
        for text in _texts(msg):
            if text.startswith("[the same ") and (note := REPEAT.match(text)):
                key = (len(text), etag_of(text))
                spare = have[key] - need[key] if key in need else 0
                have[key] += 1
                if spare >= 0:  # a note beyond the copies of itself the input pinned
                    repeats[note.group(1)] += 1
            elif len(text) in lengths:
                key = (len(text), etag_of(text))
                have[cuts.get(key[1], key)] += 1
        for call in msg.tool_calls:
            calls[call.id] = _call_etag(call)
    for key in need:  # a repeat note stands for a copy of a text that is there verbatim
        if have[key] and repeats[key[1]]:
            have[key] += repeats[key[1]]
    movable = [p for p in pins if p.kind == "call" and p.movable]
    if movable:
        carried_calls = {etag_of(t) for m in out.messages for t in _texts(m)}
    reported: set[tuple[int, str]] = set()
    for pin in pins:
        if pin.kind == "text":
            key = (pin.chars, pin.etag)
            if have[key] < need[key] and key not in reported:
                reported.add(key)
                missing = need[key] - have[key]
                more = f" ({missing} of {need[key]} copies missing)" if need[key] > 1 else ""
                problems.append((pin.message, f"{pin.describe()} was removed or changed{more}"))
        elif calls.get(pin.call_id or "") != pin.etag:
            if pin.movable and pin.call_id is not None:
                found = _find_call(original, pin.call_id)
                if found is not None and etag_of(call_text(found)) in carried_calls:
                    continue
            problems.append((pin.message, f"{pin.describe()} was removed or changed"))
    return problems


def _find_call(ctx: AgentContext, call_id: str) -> ToolCallBlock | None:
    for msg in ctx.messages:
        for call in msg.tool_calls:
            if call.id == call_id:
                return call
    return None


__all__ = [
    "REASONS",
    "RULE_KINDS",
    "PinRule",
    "PinSet",
    "Resolved",
    "broken",
    "call_text",
    "cut_paste",
    "mark",
    "parse_rule",
    "path_matches",
    "pinned",
    "repeat_note",
    "resolve",
    "split_lines",
    "with_rules",
]
