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

import re
from collections import Counter

from pydantic import Field

from ..context import AgentContext
from ..strategy import ARRIVAL, Strategy
from .fold_common import (
    Fold,
    FoldOptions,
    Output,
    fold_new_results,
    kept_lines,
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


def progress_lines(lines: list[str]) -> set[int]:
    """Indexes of the lines that report progress: those starting as in `PROGRESS_STARTS`, and
    those holding a percentage or a bar (`45%`, `█████`, `[=====>   ]`, `#####`)."""
    out: set[int] = set()
    for i, line in enumerate(lines):
        if (
            line.lstrip().startswith(PROGRESS_STARTS)
            or ("%" in line and PERCENT.search(line))
            or "=====" in line
            or "#####" in line
            or (not _GLYPHS.isdisjoint(line) and BARS.search(line))
        ):
            out.add(i)
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


def _progress_runs(lines: list[str], progress: set[int], kept: set[int], min_run: int) -> list[str]:
    out: list[str] = []
    i = 0
    while i < len(lines):
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


def _counted_warnings(lines: list[str]) -> list[str]:
    """Warnings kept where each first appears, later exact repeats dropped and counted."""
    counts = Counter(line for line in lines if WARNING.search(line))
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
    original = text.split("\n")
    lines = [_rewritten(line) for line in original] if "\r" in text else original
    progress = progress_lines(lines)
    if lines is original and not progress and len(set(original)) == len(original):
        return None  # nothing to fold: no redrawn line, no progress, no line repeated
    redrawn = lines != original
    kept = kept_lines(lines, output.failed)
    folded = _counted_warnings(_progress_runs(lines, progress - kept, kept, opts.min_run))
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
