"""Reports of a check run, for where people read them: a rich table per check in the terminal,
markdown for a pull-request comment (always under GitHub's 65,536 characters), JUnit XML (one
test case per check and session) and versioned JSON. Paths are relative to the configuration.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from typing import Any

from ..bench.report import md_code, md_text
from .gate import (
    CHECK_SCHEMA,
    TOTAL,
    CheckResult,
    CheckRun,
    Row,
    failure_line,
    fmt_delta,
    fmt_value,
)

MARKDOWN_LIMIT = 65_536
"""GitHub's limit on a comment's body, in characters."""
_MARKDOWN_BUDGET = 60_000
"""What the markdown report fills at most, leaving room for a wrapper's own header."""
COMMENT_MARKER = "<!-- compactkit-check -->"
"""The first line of the markdown report: the GitHub Action finds its own comment by it."""
TERMINAL_SESSIONS = 10
"""Session rows shown per check in the terminal (failures first); the rest are counted."""

_STATUS = {"pass": "ok", "fail": "FAIL", "warn": "warn", "info": ""}


def _result(check: CheckResult) -> str:
    if not check.passed:
        return "FAIL"
    if any(r.status == "warn" for r in check.rows):
        return "warn"
    return "ok"


def _shown_rows(check: CheckResult, limit: int) -> tuple[list[Row], int]:
    """The total's rows, then session rows: failures (worst first), then the sessions nearest
    their per-session limits; how many session rows are left out."""
    totals = [r for r in check.rows if r.session == TOTAL]
    sessions = [r for r in check.rows if r.session != TOTAL]
    failing = sorted((r for r in sessions if r.failed), key=lambda r: (-r.exit_code, -r.excess))
    gated = [r for r in sessions if r.status == "pass"]
    nearest: dict[str, Row] = {}
    for row in gated:
        held = nearest.get(row.metric)
        if held is None or _closeness(row) > _closeness(held):
            nearest[row.metric] = row
    picked = failing + [r for r in nearest.values() if r not in failing]
    shown = picked[:limit]
    hidden = len({(r.session, r.metric) for r in sessions if r.status != "info"}) - len(shown)
    return totals + shown, max(hidden, 0)


def _closeness(row: Row) -> float:
    if row.value is None or row.limit_value is None:
        return 0.0
    if row.limit_value == 0:
        return float(row.value)
    return float(row.value) / float(row.limit_value)


def render_terminal(run: CheckRun, console: Any) -> None:
    """A table per check (metric, limit, value, baseline, delta, result), then its failures."""
    from rich.markup import escape
    from rich.table import Table

    for check in run.checks:
        rows, hidden = _shown_rows(check, TERMINAL_SESSIONS)
        title = (
            f"check {check.name}: {_result(check)} - {len(check.sessions)} sessions, "
            f"{check.config.mode}{', informational' if check.config.informational else ''}"
        )
        table = Table(title=escape(title), title_justify="left")
        for column in ("session", "metric", "limit", "value", "baseline", "delta", "result"):
            table.add_column(
                column,
                justify="right" if column in ("value", "baseline") else "left",
                overflow="fold",
            )
        for row in rows:
            status = _STATUS[row.status]
            style = {"FAIL": "bold red", "warn": "yellow", "ok": "green"}.get(status, "")
            table.add_row(
                escape(row.session),
                row.metric,
                escape(row.limit),
                fmt_value(row.metric, row.value),
                fmt_value(row.metric, row.baseline) if row.baseline is not None else "",
                fmt_delta(row.metric, row.value, row.baseline),
                f"[{style}]{status}[/]" if style else status,
            )
        console.print(table)
        if hidden:
            console.print(f"  ({hidden} more session rows within their limits; see --json)")
        for note in check.notes:
            console.print(f"  note: {escape(note)}")
        for row in check.failures:
            label = "FAIL" if row.status == "fail" else "warn (informational)"
            console.print(f"  {label}: {escape(failure_line(row))}", soft_wrap=True)
        if check.failures and check.config.message:
            console.print(f"  {escape(check.config.message)}", soft_wrap=True)


def summary_line(run: CheckRun) -> str:
    failed = [c.name for c in run.checks if not c.passed]
    count = sum(1 for c in run.checks for r in c.failures if r.status == "fail")
    if not failed:
        checks = f"{len(run.checks)} check{'s' if len(run.checks) != 1 else ''}"
        return f"compactkit check: {checks} passed"
    return (
        f"compactkit check: {len(failed)} of {len(run.checks)} checks failed "
        f"({count} failing lines): {', '.join(failed)}"
    )


# ----------------------------------------------------------------------------- JSON


def render_json(run: CheckRun) -> dict[str, Any]:
    """The versioned report (`compactkit.check/1`)."""
    return {
        "schema": CHECK_SCHEMA,
        "config": run.relative(run.file.path),
        "baseline": run.relative(run.baseline_path) if run.baseline_path else None,
        "passed": run.exit_code == 0,
        "exit_code": run.exit_code,
        "seconds": round(run.seconds, 3),
        "checks": [
            {
                "name": c.name,
                "mode": c.config.mode,
                "pipeline": c.pipeline,
                "informational": c.config.informational,
                "passed": c.passed,
                "message": c.config.message,
                "notes": c.notes,
                "total": c.total,
                "sessions": c.sessions,
                "errors": {k: {"error": e, "exit_code": x} for k, (e, x) in c.errors.items()},
                "rows": [r.as_json() for r in c.rows],
                "failures": [failure_line(r) for r in c.failures if r.status == "fail"],
                "warnings": [failure_line(r) for r in c.failures if r.status == "warn"],
            }
            for c in run.checks
        ],
    }


# ----------------------------------------------------------------------------- markdown


def _md_row(cells: list[str]) -> str:
    return "| " + " | ".join(cells) + " |"


def _summary(run: CheckRun) -> list[str]:
    modes = {c.config.mode for c in run.checks}
    # replay sums the prompt tokens of every model call; oneshot counts the compacted context
    tokens = {"replay": "prompt tokens", "oneshot": "tokens after"}
    head = ["check", "result", "sessions", "failing"]
    head += [tokens[next(iter(modes))] if len(modes) == 1 else "tokens", "savings", "retention"]
    profiles = list(dict.fromkeys(p for c in run.checks for p in c.config.pricing))
    head += [f"cost {p}" for p in profiles]
    lines = [_md_row(head), _md_row(["---"] * 2 + ["---:"] * (len(head) - 2))]
    for c in run.checks:
        t = c.total
        lines.append(
            _md_row(
                [
                    md_text(c.name),
                    f"**{_result(c)}**" if _result(c) == "FAIL" else _result(c),
                    str(len(c.sessions) + len(c.errors)),
                    str(sum(1 for r in c.failures if r.status == "fail")),
                    fmt_value("tokens", t.get("prompt_tokens", t.get("tokens")))
                    + ("" if len(modes) == 1 else f" ({tokens[c.config.mode]})"),
                    fmt_value("savings", t.get("savings")),
                    fmt_value("retention", t.get("retention")),
                    *(fmt_value(f"cost.{p}", t.get(f"cost.{p}")) for p in profiles),
                ]
            )
        )
    return lines


def _detail_row(row: Row) -> str:
    return _md_row(
        [
            md_text(row.check),
            md_code(row.session) if row.session != TOTAL else TOTAL,
            row.metric,
            md_text(row.limit),
            fmt_value(row.metric, row.value),
            fmt_value(row.metric, row.baseline) if row.baseline is not None else "",
            md_text(fmt_delta(row.metric, row.value, row.baseline)),
            _STATUS[row.status] or "-",
        ]
    )


_DETAIL_HEAD = [
    _md_row(["check", "session", "metric", "limit", "value", "baseline", "delta", "result"]),
    _md_row(["---", "---", "---", "---", "---:", "---:", "---:", "---"]),
]


def render_markdown(run: CheckRun, budget: int = _MARKDOWN_BUDGET) -> str:
    """Markdown for a PR comment or a job summary: the summary table, then failures worst first,
    then every row folded; whatever would pass `budget` characters is cut with a count."""
    status = "failed" if run.exit_code else "passed"
    out = [COMMENT_MARKER, f"## compactkit check {status}", "", *_summary(run), ""]
    failures = sorted(
        (r for c in run.checks for r in c.failures),
        key=lambda r: (r.status != "fail", -r.exit_code, -r.excess),
    )
    notes = [f"- {md_text(c.name)}: {md_text(n)}" for c in run.checks for n in c.notes]
    messages = [
        f"> **{md_text(c.name)}**: {md_text(c.config.message)}"
        for c in run.checks
        if c.failures and c.config.message
    ]
    size = sum(len(line) + 1 for line in out)
    tail_room = 400  # for the closing lines and the cut counts

    def add(lines: list[str], pool: list[str], what: str) -> None:
        nonlocal size
        taken = 0
        for line in pool:
            if size + len(line) + 1 > budget - tail_room:
                break
            lines.append(line)
            size += len(line) + 1
            taken += 1
        if taken < len(pool):
            cut = f"_{len(pool) - taken} more {what} not shown (see the JSON report)._"
            lines.append(cut)
            size += len(cut) + 1

    if failures:
        section = ["### Failures", ""]
        size += 20
        add(section, [f"- {md_text(failure_line(r))}" for r in failures], "failures")
        out += [*section, "", *messages, ""]
        size += sum(len(m) + 1 for m in messages)
    if notes:
        out += ["### Notes", ""]
        add(out, notes, "notes")
        out.append("")
    rows = [r for c in run.checks for r in c.rows]
    if rows:
        head = ["<details><summary>Every figure</summary>", "", *_DETAIL_HEAD]
        size += sum(len(line) + 1 for line in head)
        details: list[str] = []
        add(details, [_detail_row(r) for r in rows], "rows")
        out += [*head, *details, "", "</details>", ""]
    text = "\n".join(out)
    if len(text) >= MARKDOWN_LIMIT:  # only a summary of thousands of checks gets here
        text = text[: MARKDOWN_LIMIT - 100] + "\n\n_Report cut at GitHub's comment limit._\n"
    return text


# ----------------------------------------------------------------------------- JUnit


def render_junit(run: CheckRun) -> str:
    """JUnit XML: a test suite per check, a test case per session (and one for the total), each
    failing limit a `<failure>`, a session that did not load or run an `<error>`."""
    suites = ET.Element("testsuites", name="compactkit check")
    total_tests = total_failures = total_errors = 0
    for check in run.checks:
        suite = ET.SubElement(suites, "testsuite", name=check.name)
        cases: dict[str, list[Row]] = {}
        for row in check.rows:
            cases.setdefault(row.session, []).append(row)
        tests = failures = errors = 0
        for session, rows in cases.items():
            case = ET.SubElement(
                suite, "testcase", classname=f"compactkit.check.{check.name}", name=session
            )
            tests += 1
            bad = [r for r in rows if r.status == "fail"]
            warned = [r for r in rows if r.status == "warn"]
            if any(r.kind == "error" for r in bad):
                errors += 1
                node = ET.SubElement(case, "error", message=bad[0].note[:200])
                node.text = "\n".join(failure_line(r) for r in bad)
            elif bad:
                failures += 1
                node = ET.SubElement(case, "failure", message=failure_line(bad[0])[:200])
                lines = [failure_line(r) for r in bad]
                if check.config.message:
                    lines.append(check.config.message)
                node.text = "\n".join(lines)
            if warned:
                out = ET.SubElement(case, "system-out")
                out.text = "\n".join(f"informational: {failure_line(r)}" for r in warned)
        suite.set("tests", str(tests))
        suite.set("failures", str(failures))
        suite.set("errors", str(errors))
        total_tests, total_failures, total_errors = (
            total_tests + tests,
            total_failures + failures,
            total_errors + errors,
        )
    suites.set("tests", str(total_tests))
    suites.set("failures", str(total_failures))
    suites.set("errors", str(total_errors))
    ET.indent(suites)
    return '<?xml version="1.0" encoding="utf-8"?>\n' + ET.tostring(suites, "unicode") + "\n"
