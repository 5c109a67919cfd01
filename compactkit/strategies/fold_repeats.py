"""fold-repeats (arrival): lines a tool output repeats from an earlier output, or from itself,
become one reference line: `[same as lines 12-40 of the result of call X]`.

What it folds: an agent re-reads a file it read before (the whole file again, an overlapping
range, the file after a one-line edit), re-runs a command whose output barely changed, or gets an
output that repeats a block of its own (a diff of a file and of its build copy). A run of at least
`min_lines` lines (and `min_block_chars` characters) equal to consecutive lines of an earlier
tool output still shown in full in the context (one of the last `lookback`), or of the lines
shown above it in the same output, is replaced by one line naming where the same lines are. The
fold is lossless for a reader of the context (the lines are there, at the place named), and the
original output is recoverable by its etag. Lines are compared exactly; a run is found from an
anchor of `ANCHOR` equal lines and extended as far as the lines stay equal.

It folds only what it can name: an earlier output shown in full (text parts only, never one
already folded or masked). When the output it names is dropped or masked later, at a
compaction, etag-collapse puts the folded output back (`restore_orphaned_folds`).
"""

from __future__ import annotations

from bisect import bisect_left
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from itertools import compress, count, takewhile
from operator import eq, truth

from pydantic import Field

from ..context import AgentContext, Message, TextBlock, ToolResultBlock
from ..strategy import ARRIVAL, Strategy
from .fold_common import Fold, FoldOptions, Output, fold_new_results

ANCHOR = 4
"""Equal consecutive lines that start a run (a run is then extended line by line)."""


class FoldRepeatsOptions(FoldOptions):
    min_lines: int = Field(
        default=8, ge=ANCHOR, description="Shortest run of repeated lines that is folded."
    )
    min_block_chars: int = Field(
        default=300, ge=0, description="Fewest characters a folded run of lines must hold."
    )
    lookback: int = Field(
        default=40,
        ge=0,
        description="How many of the newest earlier tool outputs (shown in full) are searched "
        "for the lines an output repeats; 0 folds repeats within one output only.",
    )


def _keys(lines: Sequence[str]) -> list[int]:
    """The hash of the `ANCHOR` consecutive lines from each line (all made at once)."""
    return list(map(hash, zip(*(lines[k:] for k in range(ANCHOR)), strict=False)))


def _anchors(lines: Sequence[str]) -> dict[int, int]:
    """hash of `ANCHOR` consecutive lines -> the first line where they start."""
    keys = _keys(lines)
    return dict(zip(reversed(keys), range(len(keys) - 1, -1, -1), strict=True))


@dataclass
class _Source:
    """An earlier output shown in full: its lines, anchors, and how to name it."""

    lines: list[str]
    anchors: dict[int, int]
    name: str  # "the result of call X"


def _source(result: ToolResultBlock) -> _Source | None:
    """An earlier result as a source of repeats (its lines and anchors remembered on the block,
    which never changes), or None when it is not shown in full as text."""
    held = result.__dict__
    found = held.get("_fold_source")
    if found is None:
        if not result.content or not all(isinstance(p, TextBlock) for p in result.content):
            return None
        lines = result.text.split("\n")
        found = _Source(lines, _anchors(lines), f"the result of call {result.tool_call_id}")
        held["_fold_source"] = found
    return found if isinstance(found, _Source) else None


def _earlier(ctx: AgentContext, lookback: int) -> list[_Source]:
    """The newest `lookback` earlier outputs shown in full, newest first."""
    out: list[_Source] = []
    messages = ctx.messages
    for at in range(len(messages) - 2, -1, -1):  # no copy of the history
        if len(out) >= lookback:
            break
        msg = messages[at]
        if msg.role == "tool":
            out.extend(_sources(msg))
    return out[:lookback]


def _sources(msg: Message) -> list[_Source]:
    """The outputs of a tool message shown in full, last first (remembered on the message,
    which never changes)."""
    held = msg.__dict__
    found = held.get("_fold_sources")
    if not isinstance(found, list):
        blocks = [b for b in reversed(msg.content) if isinstance(b, ToolResultBlock)]
        found = held["_fold_sources"] = [s for s in map(_source, blocks) if s is not None]
    return found


def _equal_run(a: list[str], i: int, b: list[str], j: int, most: int) -> int:
    """How many lines from `a[i]` equal those from `b[j]`, at most `most`: compared a slice at a
    time (twice as long each time), each slice in one pass."""
    n, step = 0, 2 * ANCHOR
    while n < most:
        k = min(step, most - n)
        same = len(list(takewhile(truth, map(eq, a[i + n : i + n + k], b[j + n : j + n + k]))))
        n += same
        if same < k:
            break
        step *= 2
    return n


@dataclass
class _Run:
    source: _Source | None  # None: this output, above
    start: int
    length: int


class _Folding:
    """One output folded line by line, left to right."""

    def __init__(
        self, lines: list[str], keys: list[int], sources: list[_Source], opts: FoldRepeatsOptions
    ) -> None:
        self.lines = lines
        self.opts = opts
        self.keys = keys
        self.sources = sources
        self.shown: list[str] = []
        self.shown_at: dict[int, int] = {}  # line of this output -> its line as shown
        self.own: dict[int, int] = {}  # anchors of the lines shown verbatim so far
        self.folded = 0
        # anchors worth asking about: seen in an earlier output, or twice in this one
        counts = Counter(keys)
        self.twice = {k for k, n in counts.items() if n > 1}
        self.twice_at = list(compress(count(), map(self.twice.__contains__, keys)))
        self.hits = self.twice.union(*(s.anchors.keys() & counts.keys() for s in sources))
        self.first_kept: Callable[[int, int], int] = lambda i, j: j
        """The first kept line (`kept_lines`) of lines `i` to `j` (excluded), or `j`: no run
        takes one in."""
        self._known = (0, -1, False)
        """What `kept_before` found last: no kept line from the first line to the second, which
        is kept when the third is true."""

    def run(self) -> list[str]:
        lines = self.lines
        at = self.asked()
        i, h = 0, 0
        while i < len(lines):
            h = bisect_left(at, i, h)
            j = at[h] if h < len(at) else len(lines)
            if j > i:  # no line to ask about before `j`: shown as they are, at once
                self.shown_through(i, j)
                i = j
                continue
            best = self.best(i)
            if best is None:
                self.verbatim(i)
                i += 1
                continue
            self.shown.append(self.reference(best))
            self.folded += best.length
            i += best.length
        return self.shown

    def asked(self) -> list[int]:
        """The lines a run may start at, in order: a run of `min_lines` repeats the
        `min_lines - ANCHOR + 1` anchors it begins with, each one seen before (`hits`), so a
        line whose next anchors are not all hits starts none (found all at once)."""
        flags = bytes(map(self.hits.__contains__, self.keys))
        need = self.opts.min_lines - ANCHOR + 1
        at: list[int] = []
        pos = flags.find(1)
        while pos >= 0:
            end = flags.find(0, pos)
            end = len(flags) if end < 0 else end
            if end - pos >= need:
                at.extend(range(pos, end - need + 1))
            pos = flags.find(1, end)
        return at

    def best(self, i: int) -> _Run | None:
        key, lines, found = self.keys[i], self.lines, None
        candidates: list[tuple[_Source | None, list[str], int]] = []
        start = self.own.get(key)
        if start is not None:
            candidates.append((None, lines, start))
        candidates.extend((s, s.lines, s.anchors[key]) for s in self.sources if key in s.anchors)
        least = self.opts.min_lines
        # a run is asked how far it goes only when its first `min_lines` repeat, and no
        # further than a kept line found already
        firsts = [
            _equal_run(lines, i, other, start, min(least, (i if s is None else len(other)) - start))
            for s, other, start in candidates
        ]
        if max(firsts, default=0) < least:
            return None
        bound = self.kept_bound(i)
        if bound - i < least:
            return None
        runs = [
            _equal_run(
                lines, i, other, start, min(bound - i, (i if s is None else len(other)) - start)
            )
            if first == least
            else first
            for (s, other, start), first in zip(candidates, firsts, strict=True)
        ]
        kept = self.kept_before(i, i + max(runs))  # a run stops before a kept line
        runs = [min(n, kept - i) for n in runs]
        for (source, _, start), n in zip(candidates, runs, strict=True):
            if source is None:  # only lines shown verbatim and together can be named
                n = self.contiguous(start, n)
            if n >= self.opts.min_lines and (found is None or n > found.length):
                found = _Run(source, start, n)
        if found is None:
            return None
        chars = sum(len(x) + 1 for x in lines[i : i + found.length])
        return found if chars >= self.opts.min_block_chars else None

    def kept_bound(self, i: int) -> int:
        """A line no run from line `i` reaches: the first kept line at or after `i` when one was
        found already, else past the last line."""
        begin, end, hit = self._known
        return end if hit and begin <= i <= end else len(self.lines)

    def kept_before(self, i: int, j: int) -> int:
        """The first kept line of lines `i` to `j` (excluded), or `j`; what it found is kept for
        the lines after `i` (no kept line lies between `i` and it)."""
        begin, end, hit = self._known
        if begin <= i <= end and (j <= end or hit):
            return min(end, j)
        found = self.first_kept(i, j)
        self._known = (i, found, found < j)
        return found

    def contiguous(self, start: int, n: int) -> int:
        """How many of the `n` lines from `start` were shown verbatim, one after another."""
        first = self.shown_at.get(start)
        if first is None:
            return 0
        k = 1
        while k < n and self.shown_at.get(start + k) == first + k:
            k += 1
        return k

    def verbatim(self, i: int) -> None:
        self.shown_through(i, i + 1)

    def shown_through(self, i: int, j: int) -> None:
        """Lines `i` to `j` (excluded) shown as they are; the anchors of this output they end,
        shown verbatim and together, named for the lines below."""
        base = len(self.shown)
        self.shown.extend(self.lines[i:j])
        self.shown_at.update(zip(range(i, j), range(base, base + j - i), strict=True))
        at = self.twice_at
        for k in range(bisect_left(at, i - ANCHOR + 1), bisect_left(at, j - ANCHOR + 1)):
            begin = at[k]
            if self.shown_at.get(begin) == self.shown_at[begin + ANCHOR - 1] - ANCHOR + 1:
                self.own.setdefault(self.keys[begin], begin)

    def reference(self, run: _Run) -> str:
        if run.source is None:
            first = self.shown_at[run.start] + 1
            return f"[same as lines {first}-{first + run.length - 1} above]"
        first = run.start + 1
        return f"[same as lines {first}-{first + run.length - 1} of {run.source.name}]"


def fold_repeats(output: Output, opts: FoldRepeatsOptions) -> Fold | None:
    view = output.lines()
    lines = view.lines
    if len(lines) < opts.min_lines:
        return None
    keys = _keys(lines)
    wanted = set(keys)
    # only outputs sharing an anchor with this one are asked about each line (the smaller of
    # the two looked through)
    sources = [
        s for s in _earlier(output.ctx, opts.lookback) if not s.anchors.keys().isdisjoint(wanted)
    ]
    if not sources and len(wanted) == len(keys):
        return None  # no anchor seen before, here or in an earlier output: nothing repeats
    folding = _Folding(lines, keys, sources, opts)
    folding.first_kept = lambda i, j: view.first_kept(i, j, output.failed)
    shown = folding.run()
    if not folding.folded:
        return None
    return Fold("\n".join(shown), f"{folding.folded} repeated lines named where they are shown")


class FoldRepeats(Strategy):
    """Arrival: runs of lines a new tool output repeats from an earlier output shown in full, or
    from itself, become `[same as lines A-B of the result of call X]`."""

    name = "fold-repeats"
    description = "Repeated lines of a tool output become a reference to where they are."
    Options = FoldRepeatsOptions
    options: FoldRepeatsOptions
    stage = ARRIVAL

    def compact(self, ctx: AgentContext) -> AgentContext:
        opts = self.options
        folder = lambda out: fold_repeats(out, opts)  # noqa: E731
        return fold_new_results(ctx, opts, self.name, folder, reads=True)
