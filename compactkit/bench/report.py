"""Bench reports: a terminal table, markdown, and a self-contained HTML page with SVG charts.

Reports show paths relative (to the working directory, else to the folder above the sessions) and chart
titles are file names, so a report can go into a pull request or a CI artifact as it is. Chart labels are
placed against estimated text boxes so that none covers another; a browser test measures the real ones.
"""

from __future__ import annotations

import html
import math
import os
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path, PurePath
from typing import Any

from ..errors import redacted

_COLORS = ["#444444", "#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2"]
_ADDRESS = re.compile(r"^(?P<path>.*)#(?P<index>\d+)$")
_MD_PUNCTUATION = re.compile(r"([\\`*_\[\]<>|&~])")
_Label = Callable[[float], str]


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{value:.1%}"


def _money(value: float) -> str:
    return f"${value:,.2f}"


def _cost_cells(totals: dict[str, Any], pricing: Sequence[str]) -> dict[str, str]:
    """A pipeline's cost per profile (and against none) and its worst session, as table cells."""
    cells = {
        f"cost {profile}": (
            f"{_money(totals['cost'][profile])} ({_pct(totals['cost_vs_none'].get(profile))})"
        )
        for profile in pricing
    }
    worst = totals.get("worst_session_cost_vs_none")
    cells["worst session"] = _pct(worst["ratio"]) if worst else "-"
    return cells


def summarizer_cell(figures: dict[str, Any] | None, pricing: Sequence[str]) -> str:
    """The summarizer calls a pipeline or session paid for (their cost is in its cost cells):
    `3 calls, $0.21 / $0.17` (per profile), `none (extractive)` when its summaries cost no
    model call, `-` when it wrote none."""
    if not figures:
        return "-"
    if figures.get("calls"):
        money = " / ".join(_money(figures["cost"].get(p, 0.0)) for p in pricing)
        calls = figures["calls"]
        return f"{calls:,} call{'s' if calls != 1 else ''}, {money}"
    return "none (extractive)" if figures.get("note") else "-"


def _tokens_key(report: dict[str, Any]) -> tuple[str, str]:
    """The token figure a report compares: (JSON key, column title)."""
    if report["mode"] == "oneshot":
        return "tokens_after", "tokens after"
    return "prompt_tokens", "prompt tokens"


# -- paths -------------------------------------------------------------------------------------------


def _split_address(address: str) -> tuple[str, str]:
    """`FILE#N` -> ("FILE", "#N"); the file system is not consulted (a report renders anywhere)."""
    match = _ADDRESS.match(address)
    return (match["path"], f"#{match['index']}") if match else (address, "")


def display_paths(addresses: Iterable[str], base: str | Path | None = None) -> dict[str, str]:
    """Each session address as a report shows it: relative to `base` (default: the working directory)
    when under it, else relative to the folder above the other sessions' common folder. Relative
    addresses stay as they were given. No absolute path reaches a report."""
    root = PurePath(os.path.abspath(base if base is not None else os.getcwd()))
    shown: dict[str, str] = {}
    outside: list[str] = []
    for address in dict.fromkeys(addresses):
        path, suffix = _split_address(address)
        pure = PurePath(path)
        if not pure.is_absolute():
            shown[address] = pure.as_posix() + suffix
        elif pure.is_relative_to(root):
            shown[address] = pure.relative_to(root).as_posix() + suffix
        else:
            outside.append(address)
    if outside:
        files = [PurePath(_split_address(a)[0]) for a in outside]
        try:
            anchor = PurePath(os.path.commonpath([str(f.parent) for f in files])).parent
        except ValueError:  # different drives: only the file names are left to show
            anchor = None
        for address, file in zip(outside, files, strict=True):
            relative = file.relative_to(anchor) if anchor is not None else PurePath(file.name)
            shown[address] = relative.as_posix() + _split_address(address)[1]
    return shown


def chart_titles(addresses: Iterable[str], shown: dict[str, str]) -> dict[str, str]:
    """File names (with `#N`) as chart titles; the relative path where two sessions share a name."""
    names = {a: PurePath(_split_address(a)[0]).name + _split_address(a)[1] for a in addresses}
    counts: dict[str, int] = {}
    for name in names.values():
        counts[name] = counts.get(name, 0) + 1
    return {a: name if counts[name] == 1 else shown[a] for a, name in names.items()}


def _saved(totals: dict[str, Any]) -> str:
    """The savings cell: `failed` when the pipeline ran on no session, the share with how many
    sessions it failed on when some."""
    failed = totals.get("failed", 0)
    if not failed:
        return _pct(totals["savings"])
    if not totals["sessions"]:
        return "failed"
    return f"{_pct(totals['savings'])}, failed on {failed}"


def split_failed(report: dict[str, Any]) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The report's `failed` entries as (files that did not load, pipelines that failed on a
    session)."""
    return (
        [f for f in report["failed"] if not f.get("pipeline")],
        [f for f in report["failed"] if f.get("pipeline")],
    )


def _error(failed: dict[str, str], shown: dict[str, str]) -> str:
    """A load error without the path the report already shows beside it (or with it relative)."""
    path, error = failed["path"], failed["error"]
    if error.startswith(f"{path}: "):
        return error[len(path) + 2 :]
    return error.replace(path, shown[path])


# -- tables ------------------------------------------------------------------------------------------


def summary_rows(report: dict[str, Any]) -> list[dict[str, str]]:
    """One row per pipeline, as strings, shared by every renderer."""
    key, title = _tokens_key(report)
    rows = []
    for p in report["pipelines"]:
        t = p["totals"]
        row = {"pipeline": p["name"], title: f"{t[key]:,}", "saved": _saved(t)}
        if report["mode"] != "oneshot":
            row["cached"] = f"{t['cached_tokens']:,}"
            row.update(_cost_cells(t, report["pricing"]))
            row["summarizer"] = summarizer_cell(t.get("summarizer"), report["pricing"])
        row["retention"] = _pct(t["retention"])
        row["recoverable"] = _pct(t["recoverability"])
        row["violations"] = str(t["violations"])
        row["seconds"] = f"{t['seconds']:.1f}"
        if t.get("failed") and not t["sessions"]:  # no figure of a pipeline that never ran
            row = {k: v if k in ("pipeline", "saved") else "-" for k, v in row.items()}
        rows.append(row)
    return rows


PEER_PREFIX = "peer-"
RETENTION_KINDS = ("task", "user_message", "last_instruction", "path", "error")


def is_peer(pipeline: dict[str, Any]) -> bool:
    """A pipeline made only of peer policies (`peer-codex`, `peer-pi:keep_recent_tokens=...`)."""
    specs = pipeline.get("strategies") or []
    return bool(specs) and all(str(s).startswith(PEER_PREFIX) for s in specs)


def peer_rows(report: dict[str, Any]) -> list[dict[str, str]]:
    """The peers table: compactkit's pipelines first (`none` left out), then every peer policy;
    prompt tokens, cost per profile, worst session, retention overall and per kind, compactions
    per session. Empty when the report holds no peer."""
    if report["mode"] == "oneshot" or not any(is_peer(p) for p in report["pipelines"]):
        return []
    ours = [p for p in report["pipelines"] if p["name"] != "none" and not is_peer(p)]
    rows = []
    for p in [*ours, *(p for p in report["pipelines"] if is_peer(p))]:
        t = p["totals"]
        row = {"pipeline": p["name"], "prompt tokens": f"{t['prompt_tokens']:,}"}
        row.update(_cost_cells(t, report["pricing"]))
        row["summarizer"] = summarizer_cell(t.get("summarizer"), report["pricing"])
        row["retention"] = _pct(t["retention"])
        by_kind = t.get("retention_by_kind", {})
        for kind in RETENTION_KINDS:
            row[kind] = _pct(by_kind.get(kind))
        sessions = t["sessions"] or 1
        row["compactions / session"] = f"{t['compactions'] / sessions:.2f}"
        rows.append(row)
    return rows


def frontier_rows(report: dict[str, Any]) -> list[dict[str, str]]:
    """The frontier table: every pipeline at every trigger (cost per profile against `none` at
    the same trigger, its summarizer calls, retention, compactions per session); empty for a
    report of one trigger."""
    frontier = report.get("frontier") or []
    if len(frontier) < 2:
        return []
    rows = []
    for name in (p["name"] for p in report["pipelines"]):
        for point in frontier:
            figures = next((p for p in point["pipelines"] if p["name"] == name), None)
            if figures is None:
                continue
            row = {"pipeline": name, "trigger": f"{point['trigger']:,}"}
            row["prompt tokens"] = f"{figures['prompt_tokens']:,}"
            row.update(_cost_cells(figures, report["pricing"]))
            row["summarizer"] = summarizer_cell(figures.get("summarizer"), report["pricing"])
            row["retention"] = _pct(figures["retention"])
            row["compactions"] = f"{figures['compactions']:,}"
            rows.append(row)
    return rows


def session_rows(report: dict[str, Any], base: str | Path | None = None) -> list[dict[str, str]]:
    """One row per session and pipeline, the session shown by its relative path."""
    key, title = _tokens_key(report)
    shown = display_paths((s["session"] for s in report["sessions"]), base)
    rows = []
    for s in report["sessions"]:
        row = {
            "session": shown[s["session"]],
            "pipeline": s["pipeline"],
            title: f"{s[key]:,}",
            "cached": f"{s['cached_tokens']:,}",
        }
        row.update({f"cost {p}": _money(s["cost"].get(p, 0.0)) for p in report["pricing"]})
        row["summarizer"] = summarizer_cell(s.get("summarizer"), report["pricing"])
        row["retention"] = _pct(s["retention"].get("share"))
        row["violations"] = str(s["violations"])
        rows.append(row)
    return rows


def render_terminal(report: dict[str, Any]) -> None:
    import sys

    from rich.console import Console
    from rich.markup import escape
    from rich.table import Table

    rows = summary_rows(report)
    title = f"compactkit bench: {report['mode']}"
    if report.get("trigger"):
        title += f", trigger {report['trigger']:,} tokens"
    sessions = report["pipelines"][0]["totals"]["sessions"] if report["pipelines"] else 0
    table = Table(title=f"{title}, {sessions} sessions")
    for key in rows[0] if rows else []:
        table.add_column(key, justify="left" if key == "pipeline" else "right")
    for row in rows:
        table.add_row(*(escape(v) for v in row.values()))
    console = Console(
        file=redacted(sys.stdout), highlight=False, width=None if sys.stdout.isatty() else 200
    )
    console.print(table)
    frontier = frontier_rows(report)
    if frontier:
        sweep = Table(title="cost and retention at each trigger (the frontier)")
        for key in frontier[0]:
            sweep.add_column(key, justify="left" if key == "pipeline" else "right")
        for row in frontier:
            sweep.add_row(*(escape(v) for v in row.values()))
        console.print(sweep)
    unloaded, broken = split_failed(report)
    for failed in unloaded:
        path, error = failed["path"], failed["error"]
        said = (
            error if error.startswith(f"{path}:") else f"{path}: {error}"
        )  # errors name their file
        console.print(f"[yellow]not loaded[/]: {escape(said)}")
    for failed in broken:
        console.print(
            f"[red]failed[/]: {escape(failed['pipeline'])} on {escape(failed['path'])}: "
            f"{escape(failed['error'])}"
        )


# -- markdown ----------------------------------------------------------------------------------------


def md_text(text: str) -> str:
    """Text for a markdown table cell: markdown punctuation (pipes, backticks, emphasis) escaped,
    line breaks as `<br>`."""
    lines = str(text).splitlines() or [""]
    return "<br>".join(_MD_PUNCTUATION.sub(r"\\\1", line) for line in lines)


def md_code(text: str, in_table: bool = True) -> str:
    """A code span: fenced by more backticks than any run inside, line breaks shown as `\\n`, and in
    a table cell pipes escaped (GitHub's table rule unescapes them inside code too)."""
    body = re.sub(r"\r\n|\r|\n", r"\\n", str(text))
    fence = "`" * (max((len(run) for run in re.findall(r"`+", body)), default=0) + 1)
    pad = " " if body.startswith("`") or body.endswith("`") else ""
    span = f"{fence}{pad}{body}{pad}{fence}"
    return span.replace("|", r"\|") if in_table else span


def _md_table(rows: list[dict[str, str]], code: Sequence[str] = (), left: int = 1) -> list[str]:
    if not rows:
        return []
    keys = list(rows[0])
    out = ["| " + " | ".join(md_text(k) for k in keys) + " |"]
    out.append("|" + "|".join(["---"] * left + ["---:"] * (len(keys) - left)) + "|")
    for row in rows:
        cells = (md_code(v) if k in code else md_text(v) for k, v in row.items())
        out.append("| " + " | ".join(cells) + " |")
    return out


def render_markdown(report: dict[str, Any], base: str | Path | None = None) -> str:
    """A summary table per pipeline and a table per session; paths relative to `base` (default: the
    working directory), every cell escaped."""
    out = [f"# compactkit bench ({md_text(report['mode'])})", ""]
    if report.get("trigger"):
        out.append(f"Persistent compaction triggered above {report['trigger']:,} tokens. ")
    profiles = ", ".join(md_text(p) for p in report["pricing"])
    tokenizer = md_code(report["tokenizer"], in_table=False)
    out += [f"Pricing profiles: {profiles}; tokenizer {tokenizer}.", ""]
    out += _md_table(summary_rows(report))
    peers = peer_rows(report)
    if peers:
        out += ["", "## Peers", ""]
        out += _md_table(peers)
    frontier = frontier_rows(report)
    if frontier:
        triggers = ", ".join(f"{p['trigger']:,}" for p in report["frontier"])
        out += [
            "",
            "## Frontier",
            "",
            f"Each pipeline at each trigger ({triggers} tokens); the "
            "tables above are at the first.",
        ]
        out += ["", *_md_table(frontier)]
    out += ["", "## Per session", ""]
    out += _md_table(session_rows(report, base), code=("session",), left=2)
    unloaded, broken = split_failed(report)
    shown = display_paths((f["path"] for f in report["failed"]), base)
    for heading, entries in (("Not loaded", unloaded), ("Failed", broken)):
        if entries:
            out += ["", f"## {heading}", ""]
            out += [
                f"- {md_code(shown[f['path']], in_table=False)}"
                + (f" ({md_code(f['pipeline'], in_table=False)})" if f.get("pipeline") else "")
                + f": {md_text(_error(f, shown))}"
                for f in entries
            ]
    return "\n".join(out) + "\n"


# -- SVG charts --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Box:
    """An axis-aligned box in SVG units (x, y is the top-left corner)."""

    x: float
    y: float
    w: float
    h: float

    def overlap(self, other: Box) -> float:
        """The area both boxes cover (0 when they only touch)."""
        dx = min(self.x + self.w, other.x + other.w) - max(self.x, other.x)
        dy = min(self.y + self.h, other.y + other.h) - max(self.y, other.y)
        return dx * dy if dx > 0 and dy > 0 else 0.0

    def within(self, area: Box) -> bool:
        return (
            self.x >= area.x
            and self.y >= area.y
            and self.x + self.w <= area.x + area.w
            and self.y + self.h <= area.y + area.h
        )


def text_width(text: str, size: float) -> float:
    """A generous estimate of a sans-serif label's width (DejaVu Sans, the widest usual default)."""
    em = 0.0
    for char in text:
        if char in "il.,:;|!'()[] 1":
            em += 0.36
        elif char in "mwMW%@":
            em += 0.95
        elif char.isupper() or char.isdigit():
            em += 0.7
        else:
            em += 0.62
    return em * size + 2


def _text(
    x: float,
    y: float,
    text: str,
    *,
    size: int = 10,
    anchor: str = "start",
    cls: str,
    fill: str = "#333",
    **attrs: str,
) -> str:
    """An SVG text element; y is the baseline."""
    attrs["fill"] = fill
    extra = "".join(f' {k.replace("_", "-")}="{html.escape(v)}"' for k, v in attrs.items())
    return (
        f'<text x="{x:.1f}" y="{y:.1f}" font-size="{size}" text-anchor="{anchor}" class="{cls}"'
        f"{extra}>{html.escape(text)}</text>"
    )


def _label_box(x: float, top: float, text: str, size: int) -> Box:
    return Box(x, top, text_width(text, size), size * 1.3)


def nice_ticks(low: float, high: float, count: int, integer: bool = False) -> list[float]:
    """Round tick values from at or below `low` to at or above `high`, at most about `count` steps;
    0 is a tick whenever the range holds it."""
    if high <= low:
        high = low + 1
    raw = (high - low) / max(count, 1)
    magnitude = 10 ** math.floor(math.log10(raw))
    steps = [1.0, 2.0, 5.0, 10.0] if integer and magnitude <= 1 else [1.0, 2.0, 2.5, 5.0, 10.0]
    step = next(m * magnitude for m in steps if (high - low) / (m * magnitude) <= count)
    step = max(step, 1.0) if integer else step
    first = math.floor(low / step + 1e-9)
    last = math.ceil(high / step - 1e-9)
    return [round(i * step, 10) for i in range(first, last + 1)]


def _short_number(value: float) -> str:
    if abs(value) >= 1_000_000:
        return f"{value / 1_000_000:g}M"
    if abs(value) >= 1_000:
        return f"{value / 1_000:g}k"
    return f"{value:g}"


def _percent(value: float) -> str:
    return f"{round(value * 100, 6):g}%"


@dataclass(frozen=True)
class _Frame:
    """A chart's drawing: the SVG size, the plot rectangle inside it, and the axis ranges."""

    width: int
    height: int
    plot: Box
    x_ticks: list[float]
    y_ticks: list[float]

    def x(self, value: float) -> float:
        lo, hi = self.x_ticks[0], self.x_ticks[-1]
        return self.plot.x + (value - lo) / (hi - lo) * self.plot.w

    def y(self, value: float) -> float:
        lo, hi = self.y_ticks[0], self.y_ticks[-1]
        return self.plot.y + self.plot.h - (value - lo) / (hi - lo) * self.plot.h


def _axes(frame: _Frame, x_label: _Label, y_label: _Label, x_title: str, y_title: str) -> list[str]:
    """Grid lines, tick marks and tick labels on both axes, and the axis titles."""
    p = frame.plot
    bottom, right = p.y + p.h, p.x + p.w
    parts = []
    for value in frame.y_ticks:
        y = frame.y(value)
        parts.append(
            f'<line x1="{p.x:.1f}" y1="{y:.1f}" x2="{right:.1f}" y2="{y:.1f}" stroke="#e6e6e6"/>'
            f'<line x1="{p.x - 5:.1f}" y1="{y:.1f}" x2="{p.x:.1f}" y2="{y:.1f}" stroke="#777"/>'
        )
        parts.append(_text(p.x - 8, y + 3.5, y_label(value), anchor="end", cls="tick y-tick"))
    for value in frame.x_ticks:
        x = frame.x(value)
        parts.append(
            f'<line x1="{x:.1f}" y1="{bottom:.1f}" x2="{x:.1f}" y2="{bottom + 5:.1f}" '
            'stroke="#777"/>'
        )
        parts.append(_text(x, bottom + 17, x_label(value), anchor="middle", cls="tick x-tick"))
    parts.append(
        f'<line x1="{p.x:.1f}" y1="{bottom:.1f}" x2="{right:.1f}" y2="{bottom:.1f}" stroke="#777"/>'
        f'<line x1="{p.x:.1f}" y1="{p.y:.1f}" x2="{p.x:.1f}" y2="{bottom:.1f}" stroke="#777"/>'
    )
    parts.append(_text(p.x + p.w / 2, frame.height - 6, x_title, anchor="middle", cls="axis-title"))
    middle = p.y + p.h / 2
    parts.append(
        _text(
            14,
            middle,
            y_title,
            anchor="middle",
            cls="axis-title",
            transform=f"rotate(-90 14 {middle:.1f})",
        )
    )
    return parts


def _fit(text: str, size: int, room: float) -> str:
    """`text` shortened in the middle (with an ellipsis) until its estimated width fits `room`."""
    if text_width(text, size) <= room:
        return text
    keep = len(text)
    while (
        keep > 4 and text_width(text[: keep // 2] + "…" + text[-(keep - keep // 2) :], size) > room
    ):
        keep -= 1
    return text[: keep // 2] + "…" + text[-(keep - keep // 2) :]


def _svg_open(width: int, height: int, label: str, cls: str) -> str:
    return (
        f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {width} {height}" width="{width}" '
        f'height="{height}" role="img" aria-label="{html.escape(label)}" class="{cls}">'
    )


def stroke_widths(count: int) -> list[float]:
    """Widths for lines drawn in order: each narrower than the one under it, so a line that equals
    an earlier one still shows the earlier one along both its edges."""
    step = min(2.0, 6.0 / max(count - 1, 1))
    return [1.5 + step * (count - 1 - k) for k in range(count)]


def _same_lines_note(series: list[tuple[str, list[int]]]) -> str:
    """Which pipelines draw the very same line (stacked, so each still shows along its edges)."""
    same: dict[tuple[int, ...], list[str]] = {}
    for name, values in series:
        same.setdefault(tuple(values), []).append(name)
    groups = [names for names in same.values() if len(names) > 1]
    if len(series) > 1 and len(same) == 1:
        return "every pipeline gives the same prompt tokens here: lines stacked, narrowest on top"
    return ("same line: " + "; ".join(" = ".join(g) for g in groups)) if groups else ""


def line_chart(title: str, path: str, series: list[tuple[str, list[int]]]) -> str:
    """Prompt tokens per model call of one session, one line per pipeline."""
    width, height = 560, 240
    plot = Box(60, 50, width - 60 - 16, height - 50 - 40)
    calls = max((len(v) for _, v in series), default=0)
    top = max((max(v) for _, v in series if v), default=0)
    frame = _Frame(
        width,
        height,
        plot,
        nice_ticks(0, max(calls, 1), max(int(plot.w // 60), 2), integer=True),
        nice_ticks(0, max(top, 1), max(int(plot.h // 34), 2)),
    )
    parts = [_svg_open(width, height, f"prompt tokens per model call: {title}", "session-chart")]
    parts.append(f"<title>{html.escape(path)}</title>")
    parts.append(_text(8, 18, _fit(title, 13, width - 16), size=13, cls="chart-title"))
    note = _same_lines_note(series)
    if note:
        parts.append(_text(8, 35, _fit(note, 10, width - 16), cls="note", fill="#666"))
    parts += _axes(frame, _short_number, _short_number, "model call", "prompt tokens")
    widths = stroke_widths(len(series))
    for k, (name, values) in enumerate(series):
        if not values:
            continue
        points = " ".join(f"{frame.x(i + 1):.1f},{frame.y(v):.1f}" for i, v in enumerate(values))
        parts.append(
            f'<polyline fill="none" stroke="{_COLORS[k % len(_COLORS)]}" '
            f'stroke-width="{widths[k]:g}" stroke-linejoin="round" points="{points}" '
            f'data-pipeline="{html.escape(name)}"><title>{html.escape(name)}</title></polyline>'
        )
    parts.append("</svg>")
    return "".join(parts)


def _candidates(px: float, py: float, w: float, h: float, radius: float) -> list[Box]:
    """Places for a label of size w x h beside a mark of `radius` at (px, py), nearest first."""
    out = []
    for gap in (radius + 4, radius + 14, radius + 26, radius + 40, radius + 58):
        d = gap * 0.75
        out += [
            Box(px + gap, py - h / 2, w, h),
            Box(px - gap - w, py - h / 2, w, h),
            Box(px - w / 2, py - gap - h, w, h),
            Box(px - w / 2, py + gap, w, h),
            Box(px + d, py - d - h, w, h),
            Box(px + d, py + d, w, h),
            Box(px - d - w, py - d - h, w, h),
            Box(px - d - w, py + d, w, h),
        ]
    return out


def _clamp(box: Box, area: Box) -> Box:
    x = max(area.x, min(box.x, area.x + area.w - box.w))
    y = max(area.y, min(box.y, area.y + area.h - box.h))
    return Box(x, y, box.w, box.h)


def place_label(
    px: float, py: float, w: float, h: float, radius: float, taken: list[Box], area: Box
) -> Box:
    """The nearest place inside `area` for a w x h label of the mark at (px, py) that covers none of
    `taken` (else the place covering least); the chosen box is added to `taken`."""
    options = [_clamp(box, area) for box in _candidates(px, py, w, h, radius)]
    free = [box for box in options if not any(box.overlap(t) for t in taken)]
    chosen = free[0] if free else min(options, key=lambda b: sum(b.overlap(t) for t in taken))
    taken.append(chosen)
    return chosen


def _leader(px: float, py: float, box: Box, radius: float) -> str:
    """A thin line from a mark to the nearest edge of its label, when the label stands apart."""
    x = min(max(px, box.x), box.x + box.w)
    y = min(max(py, box.y), box.y + box.h)
    if math.dist((px, py), (x, y)) <= radius + 8:
        return ""
    return f'<line x1="{px:.1f}" y1="{py:.1f}" x2="{x:.1f}" y2="{y:.1f}" stroke="#999"/>'


@dataclass(frozen=True)
class _Point:
    name: str
    color: str
    saved: float
    ratio: float
    x: float
    y: float
    tip: str = ""
    """The point's tooltip (default: its savings and cost)."""


_DOT = 5  # radius of a lone point


def _clusters(report: dict[str, Any], profile: str, frame: _Frame) -> list[list[_Point]]:
    """Pipelines as points, gathered into clusters of points whose dots would touch."""
    points = []
    for k, p in enumerate(report["pipelines"]):
        ratio = p["totals"]["cost_vs_none"].get(profile)
        if ratio is None:
            continue
        saved = p["totals"]["savings"]
        points.append(
            _Point(
                p["name"], _COLORS[k % len(_COLORS)], saved, ratio, frame.x(saved), frame.y(ratio)
            )
        )
    return _gather(points)


def _gather(points: list[_Point]) -> list[list[_Point]]:
    """Points gathered into clusters of points whose dots would touch."""
    clusters: list[list[_Point]] = []
    for point in points:
        near = [
            c
            for c in clusters
            if any(math.dist((q.x, q.y), (point.x, point.y)) < 2 * _DOT + 3 for q in c)
        ]
        clusters = [c for c in clusters if all(c is not n for n in near)]
        clusters.append([q for c in near for q in c] + [point])
    return clusters


def _ring_radii(count: int) -> list[int]:
    """A lone point is a dot; points that touch are rings, each smaller than the one before."""
    return [_DOT] if count == 1 else [3 + 3 * (count - 1 - i) for i in range(count)]


def _cluster_marks(cluster: list[_Point]) -> str:
    radii = _ring_radii(len(cluster))
    paint = 'fill="{}"' if len(cluster) == 1 else 'fill="none" stroke="{}" stroke-width="2"'
    return "".join(
        f'<circle cx="{m.x:.1f}" cy="{m.y:.1f}" r="{r}" {paint.format(m.color)} '
        f'data-pipeline="{html.escape(m.name)}"><title>'
        f"{html.escape(m.tip or f'{m.name}: {m.saved:.1%} saved, cost {m.ratio:.1%}')}"
        "</title></circle>"
        for m, r in zip(cluster, radii, strict=True)
    )


def _cluster_label(
    cluster: list[_Point], taken: list[Box], area: Box, shown: list[_Point] | None = None
) -> str:
    """The names of a cluster's pipelines (or of the `shown` ones among them), one line each in
    its point's colour, placed clear of everything already drawn."""
    size, line = 11, 14
    named = cluster if shown is None else shown
    cx = sum(m.x for m in cluster) / len(cluster)
    cy = sum(m.y for m in cluster) / len(cluster)
    reach = max(
        math.dist((m.x, m.y), (cx, cy)) + r
        for m, r in zip(cluster, _ring_radii(len(cluster)), strict=True)
    )
    w = max(text_width(m.name, size) for m in named)
    box = place_label(cx, cy, w, line * len(named), reach, taken, area)
    parts = [_leader(cx, cy, box, reach)]
    for i, m in enumerate(named):
        parts.append(
            _text(
                box.x + 1, box.y + 11 + i * line, m.name, size=size, cls="point-label", fill=m.color
            )
        )
    return "".join(parts)


def savings_chart(report: dict[str, Any], profile: str) -> str:
    """Token savings (x) against cost relative to no compaction (y), one point per pipeline."""
    totals = [p["totals"] for p in report["pipelines"]]
    ratios = [float(t["cost_vs_none"][profile]) for t in totals if t["cost_vs_none"].get(profile)]
    if not ratios:
        return ""
    width, height = 560, 340
    plot = Box(60, 40, width - 60 - 20, height - 40 - 46)
    lowest = min(0.0, *(float(t["savings"]) for t in totals))
    frame = _Frame(
        width,
        height,
        plot,
        nice_ticks(lowest, 1.0, 5),
        nice_ticks(0.0, max(1.0, *ratios) * 1.05, 5),
    )
    parts = [_svg_open(width, height, f"token savings against cost ({profile})", "savings-chart")]
    title = f"Prompt tokens saved against cost, {profile} pricing"
    parts.append(_text(8, 18, title, size=13, cls="chart-title"))
    parts += _axes(frame, _percent, _percent, "prompt tokens saved", "cost, share of none")
    clusters = _clusters(report, profile, frame)
    # labels keep clear of every point, of the "cost of none" line and its label, and of each other
    taken = [Box(m.x - 9, m.y - 9, 18, 18) for c in clusters for m in c]
    parts += _none_line(frame, taken)
    parts += [_cluster_marks(c) for c in clusters]
    area = Box(plot.x + 2, plot.y, plot.w - 2, plot.h - 2)
    parts += [_cluster_label(c, taken, area) for c in clusters]
    parts.append("</svg>")
    return "".join(parts)


def _none_line(frame: _Frame, taken: list[Box]) -> list[str]:
    """The dashed "cost of none" level and its label, both added to `taken`."""
    plot = frame.plot
    level = frame.y(1.0)
    taken.append(Box(plot.x, level - 1, plot.w, 2))
    ref = "cost of none"
    box = _label_box(plot.x + plot.w - text_width(ref, 10) - 4, level - 15, ref, 10)
    if any(box.overlap(t) for t in taken):
        box = _label_box(box.x, level + 3, ref, 10)
    taken.append(box)
    return [
        f'<line x1="{plot.x:.1f}" y1="{level:.1f}" x2="{plot.x + plot.w:.1f}" y2="{level:.1f}" '
        'stroke="#aaa" stroke-dasharray="4 3"/>',
        _text(box.x, box.y + 10, ref, cls="note", fill="#777"),
    ]


def _frontier_points(
    report: dict[str, Any], profile: str
) -> list[tuple[str, list[tuple[int, float, float]]]]:
    """Each pipeline's (trigger, retention, cost against none) points, by trigger."""
    out = []
    for p in report["pipelines"]:
        points = []
        for entry in report.get("frontier") or []:
            figures = next((f for f in entry["pipelines"] if f["name"] == p["name"]), None)
            ratio = (figures or {}).get("cost_vs_none", {}).get(profile)
            if figures is not None and ratio is not None:
                points.append((entry["trigger"], float(figures["retention"]), float(ratio)))
        out.append((p["name"], sorted(points)))
    return out


def frontier_chart(report: dict[str, Any], profile: str) -> str:
    """Each pipeline's cost-retention curve over the bench's triggers: retention (x) against
    cost relative to no compaction at the same trigger (y), a line from the lowest trigger to
    the highest, the pipeline named at its highest."""
    series = _frontier_points(report, profile)
    triggers = sorted({t for _, points in series for t, _, _ in points})
    if len(triggers) < 2:
        return ""
    width, height = 560, 340
    plot = Box(60, 50, width - 60 - 20, height - 50 - 46)
    retention = [r for _, points in series for _, r, _ in points]
    ratios = [c for _, points in series for _, _, c in points]
    frame = _Frame(
        width,
        height,
        plot,
        nice_ticks(min(min(retention) - 0.01, 0.9), 1.0, 5),
        nice_ticks(0.0, max(1.0, *ratios) * 1.05, 5),
    )
    parts = [_svg_open(width, height, f"cost against retention ({profile})", "frontier-chart")]
    parts.append(
        _text(
            8,
            18,
            f"Cost against retention by trigger, {profile} pricing",
            size=13,
            cls="chart-title",
        )
    )
    low, high = _short_number(triggers[0]), _short_number(triggers[-1])
    span = f"each line from trigger {low} to {high}, named at its end"
    parts.append(_text(8, 35, _fit(span, 10, width - 16), cls="note", fill="#666"))
    parts += _axes(frame, _percent, _percent, "retention", "cost, share of none")
    widths = stroke_widths(len(series))
    points: list[_Point] = []
    ends: list[_Point] = []
    for k, (name, curve) in enumerate(series):
        color = _COLORS[k % len(_COLORS)]
        xy = " ".join(f"{frame.x(r):.1f},{frame.y(c):.1f}" for _, r, c in curve)
        parts.append(
            f'<polyline fill="none" stroke="{color}" stroke-width="{widths[k]:g}" '
            f'stroke-linejoin="round" points="{xy}" data-pipeline="{html.escape(name)}">'
            f"<title>{html.escape(name)}</title></polyline>"
        )
        for t, r, c in curve:
            tip = f"{name} at trigger {t:,}: retention {r:.1%}, cost {c:.1%}"
            points.append(_Point(name, color, r, c, frame.x(r), frame.y(c), tip))
        ends.append(points[-1])
    clusters = _gather(points)
    taken = [Box(m.x - 9, m.y - 9, 18, 18) for m in points]
    parts += _none_line(frame, taken)
    parts += [_cluster_marks(c) for c in clusters]
    area = Box(plot.x + 2, plot.y, plot.w - 2, plot.h - 2)
    for cluster in clusters:
        named = [m for m in cluster if any(m is e for e in ends)]
        if named:
            parts.append(_cluster_label(cluster, taken, area, named))
    parts.append("</svg>")
    return "".join(parts)


# -- HTML --------------------------------------------------------------------------------------------

_STYLE = """body{font-family:system-ui,sans-serif;margin:2em;color:#222}
table{border-collapse:collapse;margin:0 0 1em;font-size:13px}
td,th{border:1px solid #ccc;padding:3px 6px;text-align:right}
td{white-space:nowrap}td.wrap{white-space:normal}td:first-child,th:first-child{text-align:left}td.path{font-family:ui-monospace,monospace;text-align:left;white-space:normal;overflow-wrap:anywhere;max-width:32em}
svg{margin:6px;background:#fafafa}
.charts{display:flex;flex-wrap:wrap}.legend span{margin-right:1.5em;white-space:nowrap}
details{margin:1em 0}"""


_WRAPPED = ("summarizer",)
"""Columns whose cells may wrap (a long figure, in a table that must fit the page)."""


def _html_table(rows: list[dict[str, str]], paths: Sequence[str] = ()) -> str:
    if not rows:
        return ""
    head = "".join(f"<th>{html.escape(k)}</th>" for k in rows[0])
    body = "".join(
        "<tr>"
        + "".join(
            f'<td class="path">{html.escape(v)}</td>'
            if k in paths
            else f'<td class="wrap">{html.escape(v)}</td>'
            if k in _WRAPPED
            else f"<td>{html.escape(v)}</td>"
            for k, v in row.items()
        )
        + "</tr>"
        for row in rows
    )
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def _legend(names: list[str]) -> str:
    widths = stroke_widths(len(names))
    return (
        '<p class="legend">'
        + "".join(
            f'<span><svg width="28" height="10" style="margin:0;background:none">'
            f'<line x1="0" y1="5" x2="28" y2="5" stroke="{_COLORS[k % len(_COLORS)]}" '
            f'stroke-width="{min(widths[k], 6):g}"/></svg> {html.escape(name)}</span>'
            for k, name in enumerate(names)
        )
        + "</p>"
    )


def _session_charts(report: dict[str, Any], max_charts: int, base: str | Path | None) -> str:
    """Prompt tokens per call of every session over the trigger (of every session when the mode
    has none), largest first: the first `max_charts` open, the rest folded under them."""
    by_session: dict[str, dict[str, list[int]]] = {}
    for s in report["sessions"]:
        by_session.setdefault(s["session"], {})[s["pipeline"]] = [c[1] for c in s.get("calls", [])]
    shown = display_paths(by_session, base)
    titles = chart_titles(by_session, shown)
    biggest = sorted(
        by_session.items(), key=lambda kv: -max((sum(v) for v in kv[1].values()), default=0)
    )
    trigger = report.get("trigger")
    over = [
        (session, series)
        for session, series in biggest
        if not trigger or max((max(v, default=0) for v in series.values()), default=0) > trigger
    ]
    charts = []
    for session, series in over:
        ordered = [(p["name"], series.get(p["name"], [])) for p in report["pipelines"]]
        charts.append(line_chart(titles[session], shown[session], ordered))
    out = f'<div class="charts">{"".join(charts[:max_charts])}</div>' if charts else ""
    folded = charts[max_charts:]
    if folded:
        out += (
            f'<details class="more-charts"><summary>{_sessions(len(folded), "more")} over '
            f'the trigger</summary><div class="charts">{"".join(folded)}</div></details>'
        )
    under = len(biggest) - len(over)
    if under and trigger:
        out += (
            f"<p>{_sessions(under)} never over the trigger ({trigger:,} tokens), not drawn "
            "(in the per-session table below).</p>"
        )
    return out


def _sessions(count: int, more: str = "") -> str:
    return f"{count} {more + ' ' if more else ''}session{'' if count == 1 else 's'}"


def _common_folder(shown: Iterable[str]) -> str:
    """The folder every shown path is under (`examples/sessions`), or ""."""
    folders = [PurePath(_split_address(path)[0]).parent.as_posix() for path in shown]
    try:
        common = os.path.commonpath(folders) if folders else ""
    except ValueError:  # absolute and relative mixed: nothing in common
        return ""
    return "" if common in (".", "/") else PurePath(common).as_posix()


def _session_saved(report: dict[str, Any], s: dict[str, Any], none: dict[str, Any] | None) -> str:
    """What a pipeline saved on one session: against `none` on it (of the tokens after against
    the tokens before in oneshot mode)."""
    key, _ = _tokens_key(report)
    if report["mode"] == "oneshot":
        return _pct(1 - s[key] / s["tokens_before"]) if s["tokens_before"] else "-"
    return _pct(1 - s[key] / none[key]) if none and none[key] else "-"


def html_session_rows(
    report: dict[str, Any], base: str | Path | None = None
) -> tuple[list[dict[str, str]], str]:
    """The HTML per-session table: a row per session and pipeline, sessions by their share of the
    cost (of `none` under the first pricing profile; the largest first, the pipelines in report
    order), with what each pipeline saved on it; paths shortened from the folder all sessions share,
    returned with the rows."""
    key, title = _tokens_key(report)
    profile = report["pricing"][0] if report["pricing"] else None
    shown = display_paths((s["session"] for s in report["sessions"]), base)
    folder = _common_folder(shown.values())
    cut = len(folder) + 1 if folder else 0
    by_session: dict[str, dict[str, dict[str, Any]]] = {}
    for s in report["sessions"]:
        by_session.setdefault(s["session"], {})[s["pipeline"]] = s
    totals = {
        p["name"]: p["totals"]["cost"].get(profile, 0.0) if profile else 0.0
        for p in report["pipelines"]
    }

    def share(s: dict[str, Any]) -> float:
        total = totals.get(s["pipeline"], 0.0)
        return s["cost"].get(profile, 0.0) / total if profile and total else 0.0

    def weight(rows: dict[str, dict[str, Any]]) -> tuple[float, int]:
        basis = rows.get("none") or max(rows.values(), key=share)
        return share(basis), basis[key]

    order = {p["name"]: k for k, p in enumerate(report["pipelines"])}
    rows = []
    for session, runs in sorted(by_session.items(), key=lambda kv: weight(kv[1]), reverse=True):
        for s in sorted(runs.values(), key=lambda r: order.get(r["pipeline"], len(order))):
            row = {"session": shown[session][cut:], "pipeline": s["pipeline"]}
            row[title] = f"{s[key]:,}"
            row["saved"] = _session_saved(report, s, runs.get("none"))
            row["cached"] = f"{s['cached_tokens']:,}"
            row.update({f"cost {p}": _money(s["cost"].get(p, 0.0)) for p in report["pricing"]})
            if profile:
                row["cost share"] = _pct(share(s))
            row["retention"] = _pct(s["retention"].get("share"))
            row["violations"] = str(s["violations"])
            rows.append(row)
    return rows, folder


def _session_table(report: dict[str, Any], base: str | Path | None) -> str:
    rows, folder = html_session_rows(report, base)
    under = f"; paths under <code>{html.escape(folder)}/</code>" if folder else ""
    return (
        f"<details><summary>Per session ({len(rows)} rows, by share of cost{under})</summary>\n"
        f"{_html_table(rows, paths=('session',))}</details>"
    )


def render_html(
    report: dict[str, Any], max_charts: int = 12, base: str | Path | None = None
) -> str:
    """A self-contained page (inline SVG, no scripts, no external resources): the summary, a savings
    against cost chart per pricing profile, prompt tokens per call of every session over the
    trigger (the first `max_charts` open, the rest folded), and the
    per-session table; paths relative to `base` (default: the working directory)."""
    names = [p["name"] for p in report["pipelines"]]
    trigger = f"; persistent trigger {report['trigger']:,} tokens" if report.get("trigger") else ""
    scatters = "".join(savings_chart(report, p) for p in report["pricing"])
    curves = "".join(frontier_chart(report, p) for p in report["pricing"])
    lines = _session_charts(report, max_charts, base) if report["mode"] != "oneshot" else ""
    peers = peer_rows(report)
    failed = ""
    shown = display_paths((f["path"] for f in report["failed"]), base)
    for heading, entries in zip(("Not loaded", "Failed"), split_failed(report), strict=True):
        items = "".join(
            f"<li><code>{html.escape(shown[f['path']])}</code>"
            + (f" (<code>{html.escape(f['pipeline'])}</code>)" if f.get("pipeline") else "")
            + f": {html.escape(_error(f, shown))}</li>"
            for f in entries
        )
        failed += f"<h2>{heading}</h2><ul>{items}</ul>" if entries else ""
    return f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>compactkit bench</title>
<style>{_STYLE}</style></head>
<body><h1>compactkit bench ({html.escape(report["mode"])})</h1>
<p>Pricing: {html.escape(", ".join(report["pricing"]))}; tokenizer \
{html.escape(report["tokenizer"])}{trigger}.</p>
{_html_table(summary_rows(report))}
{f"<h2>Peers</h2>{_html_table(peers)}" if peers else ""}
{f'<h2>Savings against cost</h2><div class="charts">{scatters}</div>' if scatters else ""}
{f'<h2>Cost against retention, by trigger</h2><div class="charts">{curves}</div>' if curves else ""}
{f"<h2>Frontier</h2>{_html_table(frontier_rows(report))}" if curves else ""}
{f"<h2>Prompt tokens per model call</h2>{_legend(names)}{lines}" if lines else ""}
{_session_table(report, base)}
{failed}
</body></html>
"""
