"""fold-logs (arrival): build, install and test output with its noise folded.

What it folds (the noise of terminals written to a file):

* carriage-return rewrites: a line a progress bar redrew with `\\r` is shown as the terminal
  showed it last (the text after its last `\\r`);
* progress and spinner lines (`Downloading ...`, `45%|████`, `Collecting ...`, `Receiving
  objects: ...`): a run of at least `min_run` becomes its first and last line around a count;
* a line repeated on consecutive lines: kept once, with the count;
* a warning repeated anywhere in the output: kept where it first appears, with the count.

Every error line, traceback and summary line stays whole (`fold_common.kept_lines`; only exact
repeats of a warning are dropped, and they are counted). The original output is recoverable by
its etag.
"""

from __future__ import annotations

import operator
import re
from bisect import bisect_left, bisect_right
from collections import Counter
from collections.abc import Iterable, Iterator

from pydantic import Field

from ..context import AgentContext
from ..strategy import ARRIVAL, Strategy
from .fold_common import (
    Fold,
    FoldOptions,
    Lines,
    Output,
    fold_new_results,
    lines_with,
    matching_lines,
)

PROGRESS_STARTS = (
    "Downloading", "Collecting", "Installing", "Fetching", "Resolving", "Building", "Compiling",
    "Checking", "Processing", "Unpacking", "Preparing", "Progress", "Receiving objects",
    "Resolving deltas", "Counting objects", "Compressing objects", "Writing objects", "remote:",
    "Get:", "Hit:", "Ign:", "Selecting previously", "Setting up", "Requirement already satisfied",
    "Using cached", "Obtaining", "Looking in indexes", "Created wheel", "Stored in directory",
    "Attempting uninstall", "Found existing installation", "Uninstalling", "npm http",
    "npm timing", "npm sill", "npm verb",
)  # fmt: skip
"""How lines of progress a package manager or a build prints while it works begin."""
PERCENT = re.compile(r"\d{1,3}(?:\.\d+)?\s?%")
BARS = re.compile(r"[█▉▊▋▌▍▎▏■━─]{3,}")
_GLYPHS = frozenset("█▉▊▋▌▍▎▏■━─")


_STARTS = re.compile(r"\n[^\S\n]*(?:" + "|".join(map(re.escape, PROGRESS_STARTS)) + ")")
"""A line beginning as in `PROGRESS_STARTS`, searched for in the whole text after a newline put
before it (a pattern beginning with a character is searched for that character first)."""


def progress_lines(lines: list[str], view: Lines | None = None) -> set[int]:
    """Indexes of the lines that report progress: those starting as in `PROGRESS_STARTS`, and
    those holding a percentage or a bar (`45%`, `█████`, `[=====>   ]`, `#####`). `view`: the
    `Lines` of `lines` when at hand. Each is looked for in the whole text at once."""
    view = Lines("\n".join(lines)) if view is None else view
    text, starts = view.text, view.starts
    # the newline found is put before the text or ends the line before: the line starts there
    out = {bisect_right(starts, m.start()) - 1 for m in _STARTS.finditer("\n" + text)}
    pos = text.find("%")
    while pos >= 0:  # a line with a percent sign: is it a percentage?
        i = bisect_right(starts, pos) - 1
        end = starts[i + 1] - 1 if i + 1 < len(lines) else len(text)
        if PERCENT.search(text, starts[i], end):
            out.add(i)
        pos = text.find("%", end)
    for bar in ("=====", "#####"):
        lines_with(text, starts, bar, out)
    if any(glyph in text for glyph in _GLYPHS):
        out |= matching_lines(BARS, text, lines, starts)
    return out


WARNING = re.compile(r"warn", re.I)


class FoldLogsOptions(FoldOptions):
    min_run: int = Field(
        default=4, ge=3, description="Fewest consecutive progress or equal lines that are folded."
    )


def _rewritten(line: str) -> str:
    """What a terminal shows of a line a progress bar redrew with carriage returns."""
    if "\r" not in line:
        return line
    shown = [seg for seg in line.split("\r") if seg.strip()]
    return shown[-1] if shown else ""


def _progress_runs(
    lines: list[str], progress: set[int], kept: frozenset[int], min_run: int
) -> list[str]:
    """`lines` with runs of at least `min_run` progress lines, or of equal lines, folded (`lines`
    itself when there is none). Only the lines a run may start at are looked at one by one."""
    starts = _starts_of_runs(lines, progress, min_run)
    if not starts:
        return lines
    out: list[str] = []
    i, c = 0, 0
    while i < len(lines):
        c = bisect_left(starts, i, c)
        at = starts[c] if c < len(starts) else len(lines)
        out.extend(lines[i:at])  # no run starts before `at`
        i = at
        if i == len(lines):
            break
        j = i
        while j in progress:
            j += 1
        if j - i >= min_run:
            out.append(lines[i])
            out.append(f"[{j - i - 2} more progress lines]")
            out.append(lines[j - 1])
            i = j
            continue
        k = i + 1  # equal consecutive lines
        while k < len(lines) and lines[k] == lines[i] and (k not in kept or not lines[i].strip()):
            k += 1
        if k - i >= min_run and lines[i].strip():
            out.append(lines[i])
            out.append(f"[the line above repeats {k - i - 1} more times]")
            i = k
            continue
        out.append(lines[i])
        i += 1
    return out


def _filled(lines: list[str], min_run: int) -> bytes | None:
    """`filled[q]`: line q + 1 is line q, with content (compared all at once); None when no
    `min_run` lines are equal."""
    equal = bytes(map(operator.eq, lines[1:], lines[:-1]))
    if b"\x01" * (min_run - 1) not in equal:
        return None
    return bytes(map(operator.and_, equal, map(bool, map(str.strip, lines[1:]))))


def _spans(flags: bytes) -> Iterator[tuple[int, int]]:
    """The runs of ones in `flags`, as (first, past the last)."""
    pos = flags.find(1)
    while pos >= 0:
        end = flags.find(0, pos)
        end = len(flags) if end < 0 else end
        yield pos, end
        pos = flags.find(1, end)


def _equal_lines(lines: list[str], min_run: int) -> set[int]:
    """The lines of runs of `min_run` or more equal lines with content."""
    filled = _filled(lines, min_run)
    out: set[int] = set()
    for first, end in _spans(filled) if filled is not None else ():
        if end - first >= min_run - 1:
            out.update(range(first, end + 1))
    return out


def _starts_of_runs(lines: list[str], progress: set[int], min_run: int) -> list[int]:
    """The lines, in order, that begin `min_run` progress lines, or a line with content and
    as many equal to it (compared all at once)."""
    found: list[int] = []
    ordered = sorted(progress)
    first = 0
    for k in range(1, len(ordered) + 1):  # runs of consecutive progress lines
        if k == len(ordered) or ordered[k] != ordered[k - 1] + 1:
            if k - first >= min_run:
                found.extend(range(ordered[first], ordered[k - 1] - min_run + 2))
            first = k
    filled = _filled(lines, min_run)
    for first, end in _spans(filled) if filled is not None else ():
        found.extend(range(first, end - min_run + 2))
    return sorted(set(found))


def _runs(lines: list[str], progress: set[int], min_run: int) -> bool:
    """Whether `lines` may hold a run to fold: `min_run` consecutive progress lines, or as many
    equal lines (compared all at once)."""
    ordered = sorted(progress)
    if any(b - a == min_run - 1 for a, b in zip(ordered, ordered[min_run - 1 :], strict=False)):
        return True
    filled = _filled(lines, min_run)  # only lines with content: a run of blank lines stays
    return filled is not None and b"\x01" * (min_run - 1) in filled


def _counted_warnings(lines: list[str], warned: Iterable[int] | None = None) -> list[str]:
    """Warnings kept where each first appears, later exact repeats dropped and counted (`lines`
    itself when no warning repeats). `warned`: the indexes of the lines naming a warning, when
    known."""
    if warned is None:
        warned = (i for i, line in enumerate(lines) if WARNING.search(line))
    counts = Counter(lines[i] for i in warned)
    if not counts or max(counts.values()) < 2:
        return lines
    seen: set[str] = set()
    out: list[str] = []
    for line in lines:
        if counts.get(line, 0) > 1:
            if line in seen:
                continue
            seen.add(line)
            out.append(line)
            out.append(f"[this warning appears {counts[line]} times in this output]")
            continue
        out.append(line)
    return out


def fold_logs(output: Output, opts: FoldLogsOptions) -> Fold | None:
    text = output.text
    view = output.lines()
    original = view.lines
    if "\r" in text:
        view = Lines("\n".join(_rewritten(line) for line in original))
    lines = view.lines
    progress = progress_lines(lines, view)
    redrawn = lines != original
    if not redrawn and not progress and len(set(original)) == len(original):
        return None  # nothing to fold: no redrawn line, no progress, no line repeated
    runs = lines
    if _runs(lines, progress, opts.min_run):  # with every progress line: kept ones excluded next
        # only the progress lines and the lines of equal runs are asked whether they are kept
        kept = view.kept_of(progress | _equal_lines(lines, opts.min_run), output.failed)
        runs = _progress_runs(lines, progress - kept, kept, opts.min_run)
    warned: set[int] = set()  # the lines naming a warning, found in the whole text at once
    lines_with(view.lower, view.lower_starts, "warn", warned)
    if runs is not lines:  # the lines of `runs` are some of `lines` (and notes without one)
        repeated = len({lines[i] for i in warned}) < len(warned)
        shown = Lines("\n".join(runs)) if repeated else None
        warned = set()
        if shown is not None:
            lines_with(shown.lower, shown.lower_starts, "warn", warned)
    folded = _counted_warnings(runs, warned)
    if folded == original:
        return None
    what = "progress lines, repeated lines and warnings counted"
    if redrawn:
        what = "lines redrawn with \\r shown as last drawn; " + what
    return Fold("\n".join(folded), what)


class FoldLogs(Strategy):
    """Arrival: progress and spinner lines of a build, install or test output collapsed, equal
    lines and repeated warnings counted; errors, tracebacks and summaries stay whole."""

    name = "fold-logs"
    description = "Log/build/test output with progress lines and repeats counted."
    Options = FoldLogsOptions
    options: FoldLogsOptions
    stage = ARRIVAL

    def compact(self, ctx: AgentContext) -> AgentContext:
        opts = self.options
        return fold_new_results(ctx, opts, self.name, lambda out: fold_logs(out, opts))
