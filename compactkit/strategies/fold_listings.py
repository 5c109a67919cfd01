"""fold-listings (arrival): search results grouped by file, path listings by directory, and diffs
with long unchanged context cut.

What it folds:

* `grep -n`/`rg -n` results (`path:line:text`, context lines `path-line-text`): each file's path
  is written once, above its lines (`  12:text`), instead of on every line. Lossless.
* path listings (`find`, `git ls-files`, `rg --files`): consecutive paths in one directory are
  written as `dir/: name1  name2 ...`. Lossless.
* unified diffs: a run of more than `2 * diff_context` unchanged lines inside a hunk keeps
  `diff_context` lines at each end around `[N unchanged lines]` (the one lossy fold: unchanged
  lines are in the file; the whole diff is recoverable by its etag). Changed lines, headers and
  hunk headers stay whole.

Lines that no folder removes (errors, summaries: `fold_common.kept_lines`) stay in place.
"""

from __future__ import annotations

import re

from pydantic import Field

from ..context import AgentContext
from ..strategy import ARRIVAL, Strategy
from .fold_common import Fold, FoldOptions, Output, fold_new_results

GREP = re.compile(r"^(?P<path>[^\s:][^:\n]*?)(?P<sep>[:-])(?P<no>\d+)(?P=sep)(?P<rest>.*)$")
GREP_LINES = re.compile(r"\n[^\s:][^:\n]*?[:-]\d+[:-]")
"""The start of a search-result line, found in a whole output (after a newline put before it)
at once: a pattern that begins with a character is searched for that character first."""
PATH = re.compile(r"^\.{0,2}/?(?:[\w.@+-]+/)+[\w.@+-]+/?$")


class FoldListingsOptions(FoldOptions):
    min_share: float = Field(
        default=0.7,
        ge=0.0,
        le=1.0,
        description="Share of an output's lines that must be search results (or paths) for it "
        "to be folded as such.",
    )
    diff_context: int = Field(
        default=3,
        ge=0,
        description="Unchanged lines a diff keeps on each side of a change; longer runs of "
        "unchanged lines are cut.",
    )


def _grep(lines: list[str], kept: frozenset[int], share: float) -> list[str] | None:
    matches = [GREP.match(line) for line in lines]
    hits = sum(1 for m in matches if m is not None)
    if hits < share * sum(1 for line in lines if line.strip()) or hits < 4:
        return None
    out: list[str] = []
    current = None
    for i, (line, m) in enumerate(zip(lines, matches, strict=True)):
        if m is None or i in kept:  # kept lines stay whole, path and all
            out.append(line)
            current = current if line == "--" else None
            continue
        if m.group("path") != current:
            current = m.group("path")
            out.append(f"{current}:")
        out.append(f"  {m.group('no')}{m.group('sep')}{m.group('rest')}")
    return out


def _paths(text: str, lines: list[str], share: float) -> list[str] | None:
    if text.count("/") < share * len(lines) - 1:  # fewer slashes than lines with one needed
        return None
    if sum(1 for line in lines if "/" in line) < share * len(lines) - 1:
        return None
    paths = [bool(PATH.match(line.strip())) and line == line.strip() for line in lines]
    if sum(paths) < share * sum(1 for line in lines if line.strip()) or sum(paths) < 8:
        return None
    out: list[str] = []
    folder: str | None = None
    for line, is_path in zip(lines, paths, strict=True):
        if not is_path or line.endswith("/"):
            out.append(line)
            folder = None
            continue
        head, _, name = line.rpartition("/")
        if head + "/" == folder:
            out[-1] += "  " + name
        else:
            folder = head + "/"
            out.append(f"{folder}: {name}")
    return out


def _diff(text: str, lines: list[str], keep: int) -> list[str] | None:
    if "\n@@ " not in text and not text.startswith("@@ "):
        return None
    out: list[str] = []
    in_hunk = False
    run = -1  # where the run of unchanged lines being read began
    for at, line in enumerate(lines):
        if in_hunk and line.startswith(" "):
            run = at if run < 0 else run
            continue
        if run >= 0:
            _cut(out, lines[run:at], keep)
            run = -1
        in_hunk = line.startswith("@@ ") or (in_hunk and line[:1] in ("+", "-", "\\"))
        out.append(line)
    if run >= 0:
        _cut(out, lines[run:], keep)
    return out


def _cut(out: list[str], run: list[str], keep: int) -> None:
    """A run of unchanged lines, `keep` at each end around the count of those cut."""
    if len(run) > 2 * keep + 1:
        out.extend(run[:keep])
        out.append(f"[{len(run) - 2 * keep} unchanged lines]")
        out.extend(run[len(run) - keep :])
    else:
        out.extend(run)


def fold_listings(output: Output, opts: FoldListingsOptions) -> Fold | None:
    text = output.text
    view = output.lines()
    lines = view.lines
    wanted = max(4, opts.min_share * len(lines) - 1)
    # each search result names its line between two of `:` and `-`: counted first, at once
    grep_like = (
        text.count(":") + text.count("-") >= 2 * wanted
        and len(GREP_LINES.findall("\n" + text)) >= wanted
    )
    grouped = _grep(lines, view.kept(output.failed), opts.min_share) if grep_like else None
    if grouped is not None:
        return Fold("\n".join(grouped), "search results grouped by file (path once, then lines)")
    listed = _paths(text, lines, opts.min_share)
    if listed is not None:
        return Fold("\n".join(listed), "paths grouped by directory (dir/: name  name ...)")
    cut = _diff(text, lines, opts.diff_context)
    if cut is not None and cut != lines:
        return Fold("\n".join(cut), "unchanged diff context cut")
    return None


class FoldListings(Strategy):
    """Arrival: search results grouped by file, path listings by directory, long unchanged
    diff context cut."""

    name = "fold-listings"
    description = "Grep results by file, path listings by directory, diff context cut."
    Options = FoldListingsOptions
    options: FoldListingsOptions
    stage = ARRIVAL

    def compact(self, ctx: AgentContext) -> AgentContext:
        opts = self.options
        return fold_new_results(ctx, opts, self.name, lambda out: fold_listings(out, opts))
