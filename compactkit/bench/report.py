"""Bench reports: a terminal table, markdown, and a self-contained HTML page with SVG charts."""

from __future__ import annotations

import html
from typing import Any

_COLORS = ["#444444", "#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2"]


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{value:.1%}"


def _money(value: float) -> str:
    return f"${value:,.2f}"


def summary_rows(report: dict[str, Any]) -> list[dict[str, str]]:
    """One row per pipeline, as strings, shared by every renderer."""
    rows = []
    for p in report["pipelines"]:
        t = p["totals"]
        row = {
            "pipeline": p["name"],
            "prompt tokens" if report["mode"] != "oneshot" else "tokens after": (
                f"{t['prompt_tokens' if report['mode'] != 'oneshot' else 'tokens_after']:,}"
            ),
            "saved": _pct(t["savings"]),
        }
        if report["mode"] != "oneshot":
            row["cached"] = f"{t['cached_tokens']:,}"
            for profile in report["pricing"]:
                ratio = t["cost_vs_none"].get(profile)
                row[f"cost {profile}"] = f"{_money(t['cost'][profile])} ({_pct(ratio)})"
            worst = t.get("worst_session_cost_vs_none")
            row["worst session"] = _pct(worst["ratio"]) if worst else "-"
        row["retention"] = _pct(t["retention"])
        row["recoverable"] = _pct(t["recoverability"])
        row["violations"] = str(t["violations"])
        row["seconds"] = f"{t['seconds']:.1f}"
        rows.append(row)
    return rows


def render_terminal(report: dict[str, Any]) -> None:
    from rich.console import Console
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
        table.add_row(*row.values())
    import sys

    console = Console(highlight=False, width=None if sys.stdout.isatty() else 200)
    console.print(table)
    for failed in report["failed"]:
        console.print(f"[yellow]not loaded[/]: {failed['path']}: {failed['error']}")


def render_markdown(report: dict[str, Any]) -> str:
    rows = summary_rows(report)
    out = [f"# compactkit bench ({report['mode']})", ""]
    if report.get("trigger"):
        out.append(f"Persistent compaction triggered above {report['trigger']:,} tokens. ")
    out.append(
        f"Pricing profiles: {', '.join(report['pricing'])}; tokenizer {report['tokenizer']}."
    )
    out.append("")
    if rows:
        keys = list(rows[0])
        out.append("| " + " | ".join(keys) + " |")
        out.append("|" + "|".join(["---"] + ["---:"] * (len(keys) - 1)) + "|")
        for row in rows:
            out.append("| " + " | ".join(row.values()) + " |")
    out += ["", "## Per session", ""]
    out.append(
        "| session | pipeline | prompt tokens | cached | "
        + " | ".join(f"cost {p}" for p in report["pricing"])
        + " | retention | violations |"
    )
    out.append("|---|---|---:|---:|" + "---:|" * len(report["pricing"]) + "---:|---:|")
    for s in report["sessions"]:
        costs = " | ".join(_money(s["cost"].get(p, 0.0)) for p in report["pricing"])
        tokens = s["prompt_tokens"] if report["mode"] != "oneshot" else s["tokens_after"]
        out.append(
            f"| {s['session']} | {s['pipeline']} | {tokens:,} | {s['cached_tokens']:,} | "
            f"{costs} | {_pct(s['retention'].get('share'))} | {s['violations']} |"
        )
    if report["failed"]:
        out += ["", "## Not loaded", ""]
        out += [f"- `{f['path']}`: {f['error']}" for f in report["failed"]]
    return "\n".join(out) + "\n"


def _line_chart(session: str, series: list[tuple[str, list[int]]]) -> str:
    width, height, pad = 640, 220, 40
    top = max((max(v) for _, v in series if v), default=1) or 1
    n = max((len(v) for _, v in series), default=1)
    parts = [
        f'<svg viewBox="0 0 {width} {height}" width="{width}" height="{height}" role="img" '
        f'aria-label="prompt tokens per call">',
        f'<text x="{pad}" y="14" font-size="12">{html.escape(session)}</text>',
        f'<line x1="{pad}" y1="{height - pad}" x2="{width - 10}" y2="{height - pad}" stroke="#999"/>',
        f'<line x1="{pad}" y1="20" x2="{pad}" y2="{height - pad}" stroke="#999"/>',
        f'<text x="2" y="28" font-size="10">{top:,}</text>',
        f'<text x="{width - 60}" y="{height - pad + 14}" font-size="10">call {n}</text>',
    ]
    for k, (name, values) in enumerate(series):
        if not values:
            continue
        step = (width - pad - 10) / max(len(values) - 1, 1)
        points = " ".join(
            f"{pad + i * step:.1f},{height - pad - (v / top) * (height - pad - 20):.1f}"
            for i, v in enumerate(values)
        )
        color = _COLORS[k % len(_COLORS)]
        parts.append(
            f'<polyline fill="none" stroke="{color}" stroke-width="1.5" points="{points}">'
            f"<title>{html.escape(name)}</title></polyline>"
        )
    parts.append("</svg>")
    return "".join(parts)


def _scatter(report: dict[str, Any], profile: str) -> str:
    width, height, pad, right = 560, 300, 50, 170
    points = []
    for p in report["pipelines"]:
        t = p["totals"]
        ratio = t["cost_vs_none"].get(profile)
        if ratio is not None:
            points.append((p["name"], t["savings"], ratio))
    if not points:
        return ""
    top = max(1.05, max(r for _, _, r in points) * 1.05)
    parts = [
        f'<svg viewBox="0 0 {width} {height}" width="{width}" height="{height}" role="img" '
        f'aria-label="savings against cost">',
        f'<text x="{pad}" y="16" font-size="12">token savings vs cost relative to none ({profile})'
        f"</text>",
        f'<line x1="{pad}" y1="{height - pad}" x2="{width - right}" y2="{height - pad}" '
        'stroke="#999"/>',
        f'<line x1="{pad}" y1="24" x2="{pad}" y2="{height - pad}" stroke="#999"/>',
        f'<text x="{width - right - 110}" y="{height - 30}" font-size="10">prompt tokens saved '
        "&#8594; 100%</text>",
        f'<text x="4" y="34" font-size="10">cost {top:.0%}</text>',
        f'<text x="4" y="{height - pad}" font-size="10">0%</text>',
    ]
    level = height - pad - (1.0 / top) * (height - pad - 30)
    parts.append(
        f'<line x1="{pad}" y1="{level:.1f}" x2="{width - right}" y2="{level:.1f}" stroke="#bbb" '
        f'stroke-dasharray="4 3"/><text x="{width - right + 4}" y="{level + 4:.1f}" '
        'font-size="10" fill="#777">cost of none</text>'
    )
    for k, (name, saved, ratio) in enumerate(points):
        x = pad + max(saved, 0) * (width - pad - right)
        y = height - pad - (ratio / top) * (height - pad - 30)
        color = _COLORS[k % len(_COLORS)]
        parts.append(
            f'<circle cx="{x:.1f}" cy="{y:.1f}" r="5" fill="{color}"><title>{html.escape(name)}: '
            f"{saved:.1%} saved, cost {ratio:.1%}</title></circle>"
            f'<text x="{x + 7:.1f}" y="{y + 4:.1f}" font-size="10">{html.escape(name)}</text>'
        )
    parts.append("</svg>")
    return "".join(parts)


def render_html(report: dict[str, Any], max_charts: int = 12) -> str:
    """A self-contained page (inline SVG, no scripts, no external resources)."""
    rows = summary_rows(report)
    head = "".join(f"<th>{html.escape(k)}</th>" for k in (rows[0] if rows else {}))
    body = "".join(
        "<tr>" + "".join(f"<td>{html.escape(v)}</td>" for v in row.values()) + "</tr>"
        for row in rows
    )
    legend = "".join(
        f'<span style="color:{_COLORS[k % len(_COLORS)]}">&#9632; {html.escape(p["name"])}</span> '
        for k, p in enumerate(report["pipelines"])
    )
    charts = []
    if report["mode"] != "oneshot":
        by_session: dict[str, dict[str, list[int]]] = {}
        for s in report["sessions"]:
            by_session.setdefault(s["session"], {})[s["pipeline"]] = [
                c[1] for c in s.get("calls", [])
            ]
        biggest = sorted(
            by_session.items(), key=lambda kv: -max((sum(v) for v in kv[1].values()), default=0)
        )[:max_charts]
        for session, series in biggest:
            ordered = [(p["name"], series.get(p["name"], [])) for p in report["pipelines"]]
            charts.append(_line_chart(session, ordered))
    scatters = "".join(_scatter(report, p) for p in report["pricing"])
    return f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>compactkit bench</title>
<style>body{{font-family:system-ui,sans-serif;margin:2em;color:#222}}
table{{border-collapse:collapse}}td,th{{border:1px solid #ccc;padding:4px 8px;text-align:right}}
td:first-child,th:first-child{{text-align:left}}svg{{margin:8px;background:#fafafa}}</style></head>
<body><h1>compactkit bench ({html.escape(report["mode"])})</h1>
<p>Pricing: {html.escape(", ".join(report["pricing"]))}; tokenizer {html.escape(report["tokenizer"])}
{f"; persistent trigger {report['trigger']:,} tokens" if report.get("trigger") else ""}.</p>
<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>
<h2>Savings against cost</h2>{scatters}
<h2>Prompt tokens per model call</h2><p>{legend}</p>{"".join(charts)}
</body></html>
"""
