"""The committed baseline: what each check measured last time it was accepted.

A JSON file with a schema tag, one entry per check: the pipeline and mode as configured, the
check's total figures and each session's, keyed by paths relative to the configuration file.
Token counts are exact integers; shares and dollars are rounded to six decimals, so a baseline
written twice from the same code is byte-identical (time is kept for the total only).
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..atomic import write_atomic
from ..errors import BadInputError, redact_json
from ..formats.base import loads

BASELINE_SCHEMA = "compactkit.check-baseline/1"

Figures = dict[str, float]
"""A flat metric -> value table: `tokens`, `prompt_tokens`, `savings`, `cost.anthropic`,
`retention`, `retention.path`, `violations`, `seconds`, ... (integers stay integers)."""

_UNTRACKED = ("seconds",)
"""Figures that change on every run: kept for the time limit, never listed as changes."""


@dataclass
class CheckBaseline:
    pipeline: Any
    mode: str
    total: Figures
    sessions: dict[str, Figures] = field(default_factory=dict)

    def as_json(self) -> dict[str, Any]:
        return {
            "pipeline": self.pipeline,
            "mode": self.mode,
            "total": dict(sorted(self.total.items())),
            "sessions": {
                k: {m: v for m, v in sorted(f.items()) if m not in _UNTRACKED}
                for k, f in sorted(self.sessions.items())
            },
        }


@dataclass
class Baseline:
    """Every check's accepted figures."""

    checks: dict[str, CheckBaseline] = field(default_factory=dict)

    def as_json(self) -> dict[str, Any]:
        return {
            "schema": BASELINE_SCHEMA,
            "checks": {name: c.as_json() for name, c in sorted(self.checks.items())},
        }


def read_baseline(path: str | Path) -> Baseline | None:
    """The baseline at `path`, or None when there is no such file."""
    file = Path(path)
    try:
        raw = file.read_bytes()
    except FileNotFoundError:
        return None
    try:
        data = loads(raw.decode("utf-8"), str(path))  # depth and digit limits: one line, exit 2
    except UnicodeDecodeError as exc:
        raise BadInputError(
            f"baseline is not UTF-8 text (bad byte at offset {exc.start})", path=str(path)
        ) from None
    except json.JSONDecodeError as exc:
        raise BadInputError(
            f"baseline is not JSON: {exc.msg}", path=str(path), line=exc.lineno
        ) from None
    if not isinstance(data, dict) or data.get("schema") != BASELINE_SCHEMA:
        found = data.get("schema") if isinstance(data, dict) else None
        raise BadInputError(
            f"not a check baseline (schema {found!r}, expected {BASELINE_SCHEMA!r})",
            path=str(path),
            hint="rewrite it with: compactkit check --update-baseline",
        )
    try:
        baseline = Baseline(
            {
                name: CheckBaseline(
                    entry.get("pipeline"),
                    str(entry.get("mode", "")),
                    dict(entry["total"]),
                    {k: dict(v) for k, v in entry.get("sessions", {}).items()},
                )
                for name, entry in data["checks"].items()
            }
        )
    except (KeyError, TypeError, AttributeError, ValueError) as exc:
        raise BadInputError(f"malformed baseline ({exc})", path=str(path)) from None
    for name, check in baseline.checks.items():
        for session, figures in [("(total)", check.total), *check.sessions.items()]:
            for metric, value in figures.items():
                if type(value) not in (int, float) or not math.isfinite(value):
                    raise BadInputError(
                        f"malformed baseline: {name}: {session}: {metric} is {value!r}, not a "
                        "finite number",
                        path=str(path),
                        hint="rewrite it with: compactkit check --update-baseline",
                    )
    return baseline


def write_baseline(path: str | Path, baseline: Baseline) -> None:
    """Write `baseline` atomically (readers see the old file or the new one). It is meant to be
    committed: its pipeline goes through `redact` (a credential in a spec is never written)."""
    data = baseline.as_json()
    for entry in data["checks"].values():
        entry["pipeline"] = redact_json(entry["pipeline"])
    text = json.dumps(data, indent=2, ensure_ascii=False) + "\n"
    write_atomic(path, text)


def changes(old: Baseline | None, new: Baseline) -> list[str]:
    """What `new` changes in `old`, one line each (time aside): checks and sessions added or
    removed, and every figure that moved."""
    before = old.checks if old else {}
    lines: list[str] = []
    for name in sorted(set(before) | set(new.checks)):
        if name not in new.checks:
            lines.append(f"{name}: check removed")
            continue
        if name not in before:
            lines.append(f"{name}: new check ({len(new.checks[name].sessions)} sessions)")
            continue
        a, b = before[name], new.checks[name]
        if (a.pipeline, a.mode) != (b.pipeline, b.mode):
            lines.append(f"{name}: pipeline {a.pipeline!r} ({a.mode}) -> {b.pipeline!r} ({b.mode})")
        lines += [f"{name}: (total) {line}" for line in _moved(a.total, b.total)]
        for session in sorted(set(a.sessions) | set(b.sessions)):
            if session not in b.sessions:
                lines.append(f"{name}: {session}: session removed")
            elif session not in a.sessions:
                lines.append(f"{name}: {session}: new session")
            else:
                lines += [
                    f"{name}: {session}: {line}"
                    for line in _moved(a.sessions[session], b.sessions[session])
                ]
    return lines


def _moved(a: Mapping[str, float], b: Mapping[str, float]) -> list[str]:
    out = []
    for metric in sorted(set(a) | set(b)):
        if metric in _UNTRACKED or a.get(metric) == b.get(metric):
            continue
        out.append(f"{metric} {_show(a.get(metric))} -> {_show(b.get(metric))}")
    return out


def _show(value: float | None) -> str:
    if value is None:
        return "(none)"
    if isinstance(value, int):
        return f"{value:,}"
    return f"{value:g}"
