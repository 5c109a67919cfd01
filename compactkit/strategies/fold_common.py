"""What the arrival folders share: which new tool results they fold, and the marker they leave.

A folder is a function of one tool output's text (and the context before it) that returns a
shorter text saying the same, or None. `fold_new_results` runs it on each text part of the tool
results of the new (last) message and, where it saves enough, replaces the part by an
`ElidedBlock` whose `text` is the folded text plus a last line naming the etag the original is
recoverable by (`expand` offline, the gateway's recall tool live); `put` stores the original part.

Only tool results are folded, never the user's words: results holding pinned text (the user's
words an adapter marked in them, what a pin rule names) are left whole. Folders compose: a part
another folder folded is folded again from its folded text (the etag still names the original),
and each folder's name is kept in the marker's `label`, so running a folder on its own output
changes nothing (each output is folded once by each folder).
"""

from __future__ import annotations

import itertools
import operator
import re
import threading
from bisect import bisect_left, bisect_right
from collections import OrderedDict
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass
from itertools import accumulate

from pydantic import Field

from ..arrival import FOLD_REF, arrival_pins, new_results, replace_last
from ..context import (
    ETAG_CHARS,
    AgentContext,
    Block,
    ContentPart,
    ElidedBlock,
    TextBlock,
    ToolCallBlock,
)
from ..recovery import payload_entry
from ..strategy import StrategyOptions
from ..toolcall import failed, payload_path
from ._common import ToolNames
from .observation_mask import with_content, with_parts


class FoldOptions(StrategyOptions):
    """Options every arrival folder has."""

    min_chars: int = Field(
        default=400,
        ge=0,
        description="Tool outputs (text parts) shorter than this many characters are left as "
        "they are.",
    )
    min_saving: float = Field(
        default=0.15,
        ge=0.0,
        le=1.0,
        description="A fold is kept only when it removes at least this share of the output's "
        "characters (the note naming the original's etag included).",
    )
    exclude_tools: ToolNames = Field(
        default=(),
        description="Names of tools whose outputs are never folded; on the command line one "
        "string with names separated by '|'.",
    )


@dataclass(frozen=True)
class Fold:
    """A folder's answer: the folded text, and what was folded (shown in the note)."""

    text: str
    what: str


@dataclass(frozen=True)
class Output:
    """One tool output a folder is asked about."""

    text: str
    call: ToolCallBlock | None
    call_id: str
    ctx: AgentContext
    """The context the output arrives in (its last message holds it)."""
    failed: bool = False
    """Whether the call failed (an error result, or a nonzero exit code it reports)."""
    part: ContentPart | None = None
    """The part of the tool result `text` is the text of (None: not told)."""

    def lines(self) -> Lines:
        """The `Lines` of `text`: one for a part, whichever folder asks (they ask in turn)."""
        return Lines(self.text) if self.part is None else _view(self.part, self.text)


Folder = Callable[[Output], Fold | None]

KEEP_WORDS = (
    "error", "exception", "traceback", "fail", "fatal", "panic", "abort", "assert", "denied",
    "not found", "no such", "cannot", "can't", "unable", "invalid", "warn", "deprecat",
    "segmentation", "killed", "timed out", "timeout", "passed", "skipped", "xfail", "summary",
    "total",
)  # fmt: skip
"""Lines holding one of these (in any case) stay whole: errors, tracebacks, warnings, summaries;
and lines holding one of `KEEP_WHOLE_WORDS` as a word (`OK`, `3 tests`; not `token`)."""
KEEP_WHOLE_WORDS = ("ok", "test", "tests")
_MARKUP = re.compile(r"^(?:\s|</?[\w-]+>|\d)*$")


def matching_lines(
    pattern: re.Pattern[str], text: str, lines: Sequence[str], starts: list[int] | None = None
) -> set[int]:
    """Indexes of the `lines` (`text` split at newlines; `starts`, where they start, when at
    hand) `pattern` finds something in, searched in the whole text at once (one search per line
    found, none per line passed over)."""
    starts = _starts(lines) if starts is None else starts
    out: set[int] = set()
    pos = 0
    while (found := pattern.search(text, pos)) is not None:
        i = bisect_right(starts, found.start()) - 1
        out.add(i)
        pos = starts[i + 1] if i + 1 < len(starts) else len(text) + 1
    return out


def _starts(lines: Sequence[str]) -> list[int]:
    """Where each line starts in the lines joined by newlines (and one past the end): the
    lengths before it, and a newline each."""
    return list(map(operator.add, accumulate(map(len, lines), initial=0), itertools.count()))


def lines_with(
    text: str,
    starts: list[int],
    word: str,
    out: set[int],
    whole: bool = False,
    lo: int = 0,
    hi: int | None = None,
) -> None:
    """Add to `out` the lines of `text` (starting at `starts`) holding `word` (as a whole word
    only, with `whole`), found in the whole text (or its characters `lo:hi`) at once."""
    hi = len(text) if hi is None else hi
    pos = text.find(word, lo, hi)
    while pos >= 0:
        end = pos + len(word)
        if whole and (text[pos - 1 : pos].isalnum() or text[end : end + 1].isalnum()):
            pos = text.find(word, pos + 1, hi)
            continue
        i = bisect_right(starts, pos) - 1
        out.add(i)
        pos = text.find(word, starts[i + 1], hi) if i + 1 < len(starts) else -1


def kept_lines(lines: Sequence[str], failed: bool = True) -> set[int]:
    """Indexes of the lines of an output that stay whole: every line `KEEP` matches, every
    line of a traceback, and for a failed call the first and last lines with content (past
    wrapper tags such as `<returncode>1</returncode>`), which say how it failed."""
    return set(Lines("\n".join(lines)).kept(failed))


_BLOCK = 256
"""Lines whose kept lines are looked for together, when a folder asks about some lines only."""


class Lines:
    """One output's text, its lines and what the folders ask of them, each worked out once and
    only when asked (the folders of one arrival ask about the same text: `Output.lines`). Read
    only."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.lines = text.split("\n")
        self._lower: str | None = None
        self._starts: list[int] | None = None
        self._lower_starts: list[int] | None = None
        self._blocks: dict[int, frozenset[int]] = {}
        self._special: dict[bool, list[int]] = {}
        self._kept: dict[bool, frozenset[int]] = {}

    @property
    def lower(self) -> str:
        """The text in lower case (the same lines, at the same offsets unless a character
        lowered to two)."""
        if self._lower is None:
            self._lower = self.text.lower()
        return self._lower

    @property
    def starts(self) -> list[int]:
        """Where each line starts in the text (and one past its end)."""
        if self._starts is None:
            self._starts = _starts(self.lines)
        return self._starts

    @property
    def lower_starts(self) -> list[int]:
        """Where each line starts in `lower`."""
        if self._lower_starts is None:
            same = len(self.lower) == len(self.text)  # else a character lowered to two
            self._lower_starts = self.starts if same else _starts(self.lower.split("\n"))
        return self._lower_starts

    def kept(self, failed: bool) -> frozenset[int]:
        """`kept_lines` of the lines."""
        known = self._kept.get(failed)
        if known is None:
            out = set(self.special(failed))
            if self._blocks:  # some blocks looked at already: the others
                for block in range((len(self.lines) + _BLOCK - 1) // _BLOCK):
                    out |= self._block(block)
            else:
                out |= self._words(0, len(self.lower))
            known = self._kept[failed] = frozenset(out)
        return known

    def kept_of(self, asked: Collection[int], failed: bool) -> frozenset[int]:
        """The lines of `asked` that `kept` holds: each line asked about looked at alone when
        they are few."""
        known = self._kept.get(failed)
        if known is None and len(asked) * 8 > len(self.lines):
            known = self.kept(failed)
        if known is not None:
            return known.intersection(asked)
        special = set(self.special(failed))
        lines = self.lines
        return frozenset(i for i in asked if i in special or _line_kept(lines[i]))

    def first_kept(self, i: int, j: int, failed: bool) -> int:
        """The first of lines `i` to `j` (excluded) that `kept` holds, or `j`: only the lines
        asked about are looked at (a block of lines at a time)."""
        known = self._kept.get(failed)
        special = self.special(failed)
        k = bisect_left(special, i)
        first = special[k] if k < len(special) and special[k] < j else j
        for block in range(i // _BLOCK, (first - 1) // _BLOCK + 1) if first > i else ():
            found = [x for x in (self._block(block) if known is None else known) if i <= x < first]
            if found:
                return min(found)
        return first

    def _block(self, block: int) -> frozenset[int]:
        """The lines of block `block` holding one of `KEEP_WORDS` (or `KEEP_WHOLE_WORDS`)."""
        known = self._blocks.get(block)
        if known is None:
            starts = self.lower_starts
            lo = starts[block * _BLOCK]
            hi = starts[min((block + 1) * _BLOCK, len(self.lines))]
            known = self._blocks[block] = frozenset(self._words(lo, hi))
        return known

    def _words(self, lo: int, hi: int) -> set[int]:
        """The lines holding one of `KEEP_WORDS` (or `KEEP_WHOLE_WORDS`) in `lower[lo:hi]`."""
        whole, starts = self.lower, self.lower_starts
        out: set[int] = set()
        for word in KEEP_WORDS:
            lines_with(whole, starts, word, out, False, lo, hi)
        for word in KEEP_WHOLE_WORDS:
            lines_with(whole, starts, word, out, True, lo, hi)
        return out

    def special(self, failed: bool) -> list[int]:
        """The kept lines no word marks, in order: the first and last with content of a failed
        call's output, the lines of a traceback."""
        known = self._special.get(failed)
        if known is None:
            known = self._special[failed] = sorted(self._traceback() | self._ends(failed))
        return known

    def _ends(self, failed: bool) -> set[int]:
        lines, out = self.lines, set[int]()
        if failed:
            content = (i for i, line in enumerate(lines) if _content(line))
            out.update(itertools.islice(content, 1))
            last = (i for i in range(len(lines) - 1, -1, -1) if _content(lines[i]))
            out.update(itertools.islice(last, 1))
        return out

    def _traceback(self) -> set[int]:
        """The lines of each traceback: from a line beginning `Traceback` to the first line
        with content not indented after it (the exception), found from where each begins."""
        out: set[int] = set()
        lines, text, starts = self.lines, self.text, self.starts
        pos = 0 if text.startswith("Traceback") else text.find("\nTraceback")
        while pos >= 0:
            i = bisect_right(starts, pos + (text[pos] == "\n")) - 1
            while i < len(lines):
                out.add(i)
                line = lines[i]
                i += 1
                if line and not line[0].isspace() and not line.startswith("Traceback"):
                    break  # the exception line ends it
            pos = text.find("\nTraceback", starts[i] - 1) if i < len(lines) else -1
        return out


def _line_kept(line: str) -> bool:
    """Whether one line holds one of `KEEP_WORDS` or `KEEP_WHOLE_WORDS` (`lines_with` on it)."""
    low = line.lower()
    if any(word in low for word in KEEP_WORDS):
        return True
    for word in KEEP_WHOLE_WORDS:
        found: set[int] = set()
        if word in low:
            lines_with(low, [0, len(low) + 1], word, found, True)
        if found:
            return True
    return False


def _content(line: str) -> bool:
    return bool(line.strip()) and not _MARKUP.match(line)


_VIEWS: OrderedDict[int, tuple[ContentPart, Lines]] = OrderedDict()
"""The `Lines` of the last parts folders asked about, by the part's identity (the part held)."""
_VIEWS_LOCK = threading.Lock()


def _view(part: ContentPart, text: str) -> Lines:
    """The `Lines` of `text`, the text of `part`: made once for the folders of one arrival (a
    part's text is a function of the part; looked up by identity, not by hashing the text)."""
    with _VIEWS_LOCK:
        held = _VIEWS.get(id(part))
        if held is not None and held[0] is part:
            _VIEWS.move_to_end(id(part))
            return held[1]
    view = Lines(text)
    with _VIEWS_LOCK:
        _VIEWS[id(part)] = (part, view)
        while len(_VIEWS) > 8:
            _VIEWS.popitem(last=False)
    return view


NOTE_START = "[folded: "


def note(what: str, etag: str) -> str:
    return f"{NOTE_START}{what}; the original output is recoverable by etag {etag}]"


def _body(part: ElidedBlock) -> str:
    """The folded text of a part a folder left, without its note line."""
    body, _, last = part.text.rpartition("\n")
    return body if last.startswith(NOTE_START) else part.text


def _whats(part: ElidedBlock) -> list[str]:
    last = part.text.rpartition("\n")[2]
    if not last.startswith(NOTE_START):
        return []
    inner = last[len(NOTE_START) :].rpartition("; the original output")[0]
    return [inner] if inner else []


def _foldable(part: ContentPart, name: str) -> str | None:
    """The text a folder works on in `part`: a text part's, or a fold of another folder's."""
    if isinstance(part, TextBlock):
        return part.text
    if isinstance(part, ElidedBlock) and part.ref == REF and name not in part.label.split(","):
        return _body(part)
    return None


REF = FOLD_REF
"""The `ref` of the markers the folders leave (what `etag` recovers)."""


def fold_new_results(
    ctx: AgentContext, options: FoldOptions, name: str, folder: Folder, *, reads: bool = False
) -> AgentContext:
    """`ctx` with the tool outputs of its last message folded by `folder` where it saves at
    least `options.min_saving` of their characters (see the module docs). The text of a file
    the agent read (`payload_path`) is folded only with `reads`: the agent edits by it."""
    results = list(new_results(ctx))
    if not results:
        return ctx
    excluded = set(options.exclude_tools)
    store: dict[str, str] | None = None
    replaced: dict[int, Block] = {}
    pins = None
    for j, result, call in results:
        if call is not None and (call.name in excluded or (not reads and payload_path(call))):
            continue
        texts = [_foldable(p, name) for p in result.content]
        if not any(t is not None and len(t) >= options.min_chars for t in texts):
            continue
        pins = arrival_pins(ctx) if pins is None else pins
        if pins and pins.result(result):
            continue
        parts: list[ContentPart] = []
        for part, text in zip(result.content, texts, strict=True):
            found = None
            if text is not None and len(text) >= options.min_chars:
                output = Output(text, call, result.tool_call_id, ctx, failed(result)[0], part)
                found = folder(output)
            made = _marker(part, found, name, options) if found is not None else None
            if made is None:
                parts.append(part)
                continue
            marker, entry = made
            if entry is not None:  # the original part, stored under the marker's etag
                store = dict(ctx.recovery) if store is None else store
                store.setdefault(marker.etag, entry)
            parts.append(marker)
        if any(a is not b for a, b in zip(parts, result.content, strict=True)):
            replaced[j] = with_parts(result, tuple(parts))
    if not replaced:
        return ctx
    last = ctx.messages[-1]
    content = tuple(replaced.get(j, b) for j, b in enumerate(last.content))
    return replace_last(ctx, with_content(last, content), store)


def _marker(
    part: ContentPart, found: Fold, name: str, options: FoldOptions
) -> tuple[ElidedBlock, str | None] | None:
    """The marker for `part` folded to `found` and the recovery entry of a text part (None:
    the etag a folded part names already), or None when that does not save enough (told before
    the part is serialized and hashed: an etag is `ETAG_CHARS` long whatever it is)."""
    entry: str | None = None
    if isinstance(part, ElidedBlock):
        etag, whats, names = part.etag, [*_whats(part), found.what], f"{part.label},{name}"
        size = len(part.text)
    else:
        assert isinstance(part, TextBlock)
        etag, whats, names, size = "0" * ETAG_CHARS, [found.what], name, len(part.text)
    what = "; ".join(whats)
    if len(found.text) + 1 + len(note(what, etag)) > size * (1 - options.min_saving):
        return None
    if isinstance(part, TextBlock):
        entry, etag = payload_entry((part,))
    text = found.text + "\n" + note(what, etag)
    return ElidedBlock(etag=etag, ref=REF, text=text, label=names), entry
