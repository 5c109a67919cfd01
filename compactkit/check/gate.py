"""Running checks: sessions measured through `bench.runner.run_bench`, then every limit and
regression evaluated into rows a report prints.

Checks that share a mode and budget run together: each session file is loaded once and every
pipeline that some check asks of it runs on it, all on one executor (one pool of worker
processes, or Ray tasks; `compactkit.bench.executors`).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from ..bench.executors import Executor, open_executor
from ..bench.jobs import JobResult
from ..bench.runner import run_bench
from ..defaults import DEFAULT_TRIGGER
from ..errors import EXIT_BAD_INPUT, EXIT_BUDGET, EXIT_PLUGIN, failure_code, redact_json
from ..formats.loading import SessionAddress
from ..registry import Registry, get_registry
from ..spec import DEFAULT, NONE, PipelineSpec, one_pipeline
from .baseline import Baseline, CheckBaseline, Figures
from .config import CheckConfig, CheckFile, expand_sessions, token_slack

CHECK_SCHEMA = "compactkit.check/1"
TOTAL = "(total)"
"""The session name of a check's total rows."""


@dataclass
class Row:
    """One metric of one session (or the total) of one check, with its limit and verdict."""

    check: str
    session: str
    metric: str
    value: float | None
    limit: str = ""
    baseline: float | None = None
    status: str = "info"
    """`pass`, `fail`, `warn` (failed, but the check is informational) or `info` (no limit)."""
    kind: str = "info"
    """`limit`, `regression`, `error` or `info`."""
    exit_code: int = 0
    excess: float = 0.0
    """How far past its limit a failing row is, relative (sorts the worst first)."""
    note: str = ""
    limit_value: float | None = None

    @property
    def failed(self) -> bool:
        return self.status in ("fail", "warn")

    def as_json(self) -> dict[str, Any]:
        return {
            "session": self.session,
            "metric": self.metric,
            "value": self.value,
            "limit": self.limit or None,
            "baseline": self.baseline,
            "delta": delta(self.value, self.baseline),
            "status": self.status,
            "kind": self.kind,
            "note": self.note or None,
        }


@dataclass
class CheckResult:
    config: CheckConfig
    pipeline: list[str]
    sessions: dict[str, Figures] = field(default_factory=dict)
    total: Figures = field(default_factory=dict)
    rows: list[Row] = field(default_factory=list)
    errors: dict[str, tuple[str, int]] = field(default_factory=dict)
    baseline: CheckBaseline | None = None
    notes: list[str] = field(default_factory=list)

    @property
    def name(self) -> str:
        return self.config.name

    @property
    def failures(self) -> list[Row]:
        """Failing rows, worst first (errors, then the furthest past their limit)."""
        rows = [r for r in self.rows if r.failed]
        return sorted(rows, key=lambda r: (-r.exit_code, -r.excess))

    @property
    def passed(self) -> bool:
        return not any(r.status == "fail" for r in self.rows)

    @property
    def exit_code(self) -> int:
        return max((r.exit_code for r in self.rows if r.status == "fail"), default=0)

    def to_baseline(self) -> CheckBaseline:
        """What the baseline keeps: the pipeline redacted (a committed file holds no secret)."""
        return CheckBaseline(
            redact_json(self.config.pipeline),
            self.config.mode,
            dict(self.total),
            dict(self.sessions),
        )


@dataclass
class CheckRun:
    """Every check of one configuration file, measured and judged."""

    file: CheckFile
    checks: list[CheckResult]
    baseline_path: Path | None = None
    seconds: float = 0.0

    @property
    def exit_code(self) -> int:
        return max((c.exit_code for c in self.checks), default=0)

    def to_baseline(self) -> Baseline:
        return Baseline({c.name: c.to_baseline() for c in self.checks})

    def relative(self, path: str | Path) -> str:
        return relative(path, self.file.root)


def relative(address: str | Path, root: Path) -> str:
    """`address` relative to `root`, with `/` separators (`FILE#N` kept)."""
    where = SessionAddress.parse(address)
    file, index = where.file, where.index
    rel = os.path.relpath(file, root).replace(os.sep, "/")
    return rel if index is None else f"{rel}#{index}"


def delta(value: float | None, base: float | None) -> float | None:
    if value is None or base is None:
        return None
    out = value - base
    return out if isinstance(out, int) else round(out, 6)


# ----------------------------------------------------------------------------- running


def resolve_pipeline(check: CheckConfig, registry: Registry) -> PipelineSpec:
    """The check's pipeline: `default` expanded at its budget (else at the trigger, 30k), and
    the budget to fill into each strategy's budget option; named by its strategies as they run
    (the budget written in), so checks that ask for the same pipeline share its measurement."""
    values = [DEFAULT] if check.pipeline == DEFAULT else check.pipeline
    spec = one_pipeline(values, budget=check.budget, trigger=DEFAULT_TRIGGER, pins=check.pins)
    labels = spec.labels(registry)
    name = " + ".join(labels) if labels else NONE
    if spec.pins:  # pinned or not, the same strategies measure differently
        name += " [pins: " + ", ".join(spec.pins) + "]"
    return replace(spec, name=name)


def run_checks(
    file: CheckFile,
    *,
    baseline: Baseline | None = None,
    workers: int = 1,
    executor: str = "local",
    ray_address: str | None = None,
    registry: Registry | None = None,
    progress: Callable[[JobResult], None] | None = None,
    timeout: float | None = None,
) -> CheckRun:
    """Measure every check of `file` and judge it against its limits and `baseline`.

    Sessions run on one executor for the whole run (`executor` `local` with `workers`
    processes, or `ray`, on the cluster at `ray_address` if given; see `run_bench`). `timeout`:
    seconds each plugin strategy may run (see `Pipeline`); None or 0, no limit."""
    import time

    start = time.perf_counter()
    registry = registry or get_registry()
    plans: list[tuple[CheckConfig, PipelineSpec, list[str]]] = []
    for check in file.checks:
        plans.append((check, resolve_pipeline(check, registry), expand_sessions(check, file.root)))
    groups: dict[tuple[str, int], list[tuple[CheckConfig, PipelineSpec, list[str]]]] = {}
    for plan in plans:
        check = plan[0]
        groups.setdefault((check.mode, check.budget or DEFAULT_TRIGGER), []).append(plan)
    measured: dict[tuple[str, int, str, str], dict[str, Any]] = {}
    failed: dict[tuple[str, int, str, str], tuple[str, int]] = {}
    with open_executor(
        executor, workers=workers, registry=registry, ray_address=ray_address
    ) as runner:
        for (mode, trigger), members in groups.items():
            _measure(mode, trigger, members, runner, registry, progress, measured, failed, timeout)
    results = []
    for check, spec, addresses in plans:
        key = (check.mode, check.budget or DEFAULT_TRIGGER)
        result = CheckResult(check, spec.labels(registry))
        result.baseline = baseline.checks.get(check.name) if baseline else None
        _collect(result, file.root, key, spec.name, addresses, measured, failed)
        judge(result)
        results.append(result)
    return CheckRun(file, results, seconds=time.perf_counter() - start)


def _measure(
    mode: str,
    trigger: int,
    members: list[tuple[CheckConfig, PipelineSpec, list[str]]],
    runner: Executor,
    registry: Registry,
    progress: Callable[[JobResult], None] | None,
    measured: dict[tuple[str, int, str, str], dict[str, Any]],
    failed: dict[tuple[str, int, str, str], tuple[str, int]],
    timeout: float | None = None,
) -> None:
    """Run one mode's checks: files needing the same pipelines in one `run_bench` call each.
    `failed` is keyed by pipeline (`""` for a file that did not load) and session."""
    wanted: dict[str, dict[str, PipelineSpec]] = {}
    profiles: dict[str, None] = {}
    for check, spec, addresses in members:
        profiles.update(dict.fromkeys(check.pricing))
        for address in addresses:
            wanted.setdefault(address, {})[spec.name] = spec
    batches: dict[tuple[str, ...], list[str]] = {}
    for address, specs in wanted.items():
        batches.setdefault(tuple(sorted(specs)), []).append(address)
    for names, addresses in batches.items():
        report = run_bench(
            addresses,
            [wanted[addresses[0]][n] for n in names],
            mode="oneshot" if mode == "oneshot" else "persistent",
            profiles=tuple(profiles),
            trigger=trigger,
            executor=runner,
            registry=registry,
            progress=progress,
            timeout=timeout,
        )
        for row in report["sessions"]:
            measured[(mode, trigger, row["pipeline"], row["session"])] = row
        for entry in report["failed"]:
            failed[(mode, trigger, entry.get("pipeline") or "", entry["path"])] = (
                entry["error"],
                failure_code(entry.get("exit_code") or EXIT_BAD_INPUT),
            )


def figures(row: dict[str, Any], none: dict[str, Any] | None, mode: str) -> Figures:
    """A session's flat figures from its bench rows (the pipeline's and no compaction's)."""
    out: Figures = {"tokens_before": row["tokens_before"], "tokens": row["tokens_after"]}
    if mode == "replay":
        out["prompt_tokens"] = row["prompt_tokens"]
        out["prompt_tokens_none"] = none["prompt_tokens"] if none else row["prompt_tokens"]
        for profile, dollars in row["cost"].items():
            out[f"cost.{profile}"] = round(dollars, 6)
    retention = row["retention"]
    out["retention.kept"] = retention.get("kept", 0)
    out["retention.total"] = retention.get("total", 0)
    for kind, entry in retention.get("by_kind", {}).items():
        out[f"retention.{kind}.kept"] = entry["kept"]
        out[f"retention.{kind}.total"] = entry["total"]
    out["violations"] = row["violations"]
    out["seconds"] = row["seconds"]
    return _derived(out, mode)


def _derived(out: Figures, mode: str) -> Figures:
    """Shares computed from the exact counts (the same way for a session and a total)."""
    before, after = (
        (out["prompt_tokens_none"], out["prompt_tokens"])
        if mode == "replay"
        else (out["tokens_before"], out["tokens"])
    )
    out["savings"] = round(1 - after / before, 6) if before else 0.0
    total = out.get("retention.total", 0)
    out["retention"] = round(out.get("retention.kept", 0) / total, 6) if total else 1.0
    for key in [k for k in out if k.endswith(".total") and k != "retention.total"]:
        kind = key.removeprefix("retention.").removesuffix(".total")
        kind_total = out[key]
        out[f"retention.{kind}"] = (
            round(out[f"retention.{kind}.kept"] / kind_total, 6) if kind_total else 1.0
        )
    return out


def total_figures(sessions: Sequence[Figures], mode: str) -> Figures:
    """The check's total: counts and dollars summed, shares recomputed from the sums."""
    out: Figures = {}
    for figs in sessions:
        for key, value in figs.items():
            if key == "savings" or (
                key.startswith("retention") and not key.endswith(("kept", "total"))
            ):
                continue
            out[key] = out.get(key, 0) + value
    for key in list(out):
        if key.startswith("cost.") or key == "seconds":
            out[key] = round(out[key], 6 if key.startswith("cost.") else 3)
    for key in ("tokens_before", "tokens", "violations", "seconds"):
        out.setdefault(key, 0)
    if mode == "replay":
        out.setdefault("prompt_tokens", 0)
        out.setdefault("prompt_tokens_none", 0)
    return _derived(out, mode)


def _collect(
    result: CheckResult,
    root: Path,
    key: tuple[str, int],
    pipeline: str,
    addresses: list[str],
    measured: dict[tuple[str, int, str, str], dict[str, Any]],
    failed: dict[tuple[str, int, str, str], tuple[str, int]],
) -> None:
    mode, trigger = key
    by_file: dict[str, list[tuple[str, dict[str, Any]]]] = {}
    for (m, t, name, session), row in measured.items():
        if (m, t, name) == (mode, trigger, pipeline):
            by_file.setdefault(SessionAddress.parse(session).file, []).append((session, row))
    broke: dict[str, list[tuple[str, tuple[str, int]]]] = {}
    for (m, t, name, session), error in failed.items():
        if (m, t, name) == (mode, trigger, pipeline):  # the check's pipeline failed on a session
            broke.setdefault(SessionAddress.parse(session).file, []).append((session, error))
    for address in addresses:
        if (mode, trigger, "", address) in failed:
            result.errors[relative(address, root)] = failed[(mode, trigger, "", address)]
            continue
        where = SessionAddress.parse(address)
        file, index = where.file, where.index
        for session, error in broke.get(file, []):
            if index is None or session == address:
                result.errors[relative(session, root)] = error
        if index is None:
            rows = by_file.get(file, [])
        else:
            key4 = (mode, trigger, pipeline, address)
            rows = [(address, measured[key4])] if key4 in measured else []
        for session, row in rows:
            none = measured.get((mode, trigger, "none", session))
            result.sessions[relative(session, root)] = figures(row, none, mode)
    result.total = total_figures(list(result.sessions.values()), mode)


# ----------------------------------------------------------------------------- judging


def _fmt_tokens(value: float) -> str:
    return f"{int(value):,}"


def fmt_value(metric: str, value: float | None) -> str:
    """A figure as people read it: tokens with separators, shares in %, dollars, seconds."""
    if value is None:
        return "-"
    if metric.startswith("cost."):
        return f"${value:,.4f}"
    if metric == "savings" or (
        metric.startswith("retention") and not metric.endswith(("kept", "total"))
    ):
        return f"{value * 100:.1f}%"
    if metric == "seconds":
        return f"{value:.2f} s"
    return _fmt_tokens(value)


def fmt_delta(metric: str, value: float | None, base: float | None) -> str:
    """`value - base` as people read it (`+345 (+2.9%)`, `-0.5 pt`, `x1.20`)."""
    if value is None or base is None:
        return ""
    if metric == "seconds":
        return f"x{value / base:.2f}" if base else ""
    diff = value - base
    if metric == "savings" or metric.startswith("retention"):
        return f"{diff * 100:+.1f} pt" if diff else "0"
    if not diff:
        return "0"
    share = f" ({diff / base * 100:+.1f}%)" if base else ""
    if metric.startswith("cost."):
        return f"{'+' if diff > 0 else '-'}${abs(diff):,.4f}{share}"
    return f"{int(diff):+,}{share}"


def judge(result: CheckResult) -> None:
    """Fill `result.rows`: every limit and regression, per session and in total."""
    check = result.config
    rows: list[Row] = []
    for session, (error, code) in result.errors.items():
        code = failure_code(code)  # a session that failed fails its check, whatever the code
        rows.append(
            Row(check.name, session, "load", None, "loads", None, "fail", "error", code, 1.0, error)
        )
    scopes = [*result.sessions.items(), (TOTAL, result.total)]
    base = result.baseline
    for session, figs in scopes:
        old = (base.total if session == TOTAL else base.sessions.get(session)) if base else None
        rows += _limits(check, session, figs, old)
        if old is not None:
            rows += _regressions(check, session, figs, old)
    if check.informational:
        for row in rows:
            if row.status == "fail":
                row.status = "warn"
    result.rows = merge_rows(rows)
    if base is not None and (base.pipeline, base.mode) != (redact_json(check.pipeline), check.mode):
        result.notes.append(
            f"the baseline was recorded with pipeline {base.pipeline!r} ({base.mode}); "
            "run --update-baseline once this change is intended"
        )
    if base is None:
        result.notes.append("no baseline for this check: regressions are not gated")


@dataclass(frozen=True)
class _Gate:
    """A limit on one figure: `value <= bound` (op `<=`) or `value >= bound`."""

    op: str
    bound: float
    text: str
    kind: str = "limit"
    exit_code: int = EXIT_BUDGET

    def holds(self, value: float) -> bool:
        slack = 1e-9 if isinstance(value, float) or isinstance(self.bound, float) else 0
        return value <= self.bound + slack if self.op == "<=" else value >= self.bound - slack

    def excess(self, value: float) -> float:
        """How far past the bound `value` is, relative to the bound."""
        gap = value - self.bound if self.op == "<=" else self.bound - value
        return gap / abs(self.bound) if self.bound else float(gap > 0)


def _row(
    check: CheckConfig,
    session: str,
    metric: str,
    value: float,
    old: Figures | None,
    gate: _Gate | None = None,
) -> Row:
    base = old.get(metric) if old else None
    if gate is None:
        return Row(check.name, session, metric, value, baseline=base)
    ok = gate.holds(value)
    return Row(
        check.name,
        session,
        metric,
        value,
        gate.text,
        base,
        "pass" if ok else "fail",
        gate.kind,
        0 if ok else gate.exit_code,
        0.0 if ok else gate.excess(value),
        limit_value=gate.bound,
    )


def _limits(check: CheckConfig, session: str, figs: Figures, old: Figures | None) -> list[Row]:
    is_total = session == TOTAL
    rows = []
    tokens = check.max_tokens
    cap = (tokens.total if is_total else tokens.session) if tokens else None
    rows.append(
        _row(
            check,
            session,
            "tokens",
            figs["tokens"],
            old,
            _Gate("<=", cap, f"<= {cap:,}") if cap is not None else None,
        )
    )
    if "prompt_tokens" in figs and (is_total or old is not None):
        rows.append(_row(check, session, "prompt_tokens", figs["prompt_tokens"], old))
    savings = check.min_savings
    floor = (savings.total if is_total else savings.session) if savings else None
    if floor is not None or is_total:
        rows.append(
            _row(
                check,
                session,
                "savings",
                figs["savings"],
                old,
                _Gate(">=", floor, f">= {floor * 100:.1f}%") if floor is not None else None,
            )
        )
    costs = check.max_cost or {}
    for profile in check.pricing:
        metric = f"cost.{profile}"
        if metric not in figs or not (is_total or old is not None):
            continue
        dollars = costs.get(profile) if is_total else None
        rows.append(
            _row(
                check,
                session,
                metric,
                figs[metric],
                old,
                _Gate("<=", dollars, f"<= ${dollars:,.4f}") if dollars is not None else None,
            )
        )
    floors = (check.min_retention or {}) if is_total else {}
    for key in ["overall", *sorted(k for k in floors if k != "overall")]:
        metric = "retention" if key == "overall" else f"retention.{key}"
        if metric not in figs:
            continue
        share = floors.get(key)
        rows.append(
            _row(
                check,
                session,
                metric,
                figs[metric],
                old,
                _Gate(">=", share, f">= {share * 100:.1f}%") if share is not None else None,
            )
        )
    if is_total or figs["violations"]:
        rows.append(
            _row(
                check,
                session,
                "violations",
                figs["violations"],
                old,
                _Gate("<=", 0, "0", exit_code=EXIT_PLUGIN),
            )
        )
    if is_total:
        rows.append(_row(check, session, "seconds", figs["seconds"], old))
    return rows


def _regressions(check: CheckConfig, session: str, figs: Figures, old: Figures) -> list[Row]:
    """A row for every metric `max_regression` names, against the baseline's figure."""
    slack = check.max_regression
    if slack is None:
        return []
    rows = []
    metric = "prompt_tokens" if "prompt_tokens" in figs else "tokens"
    if slack.tokens is not None and metric in old:
        allowed = token_slack(slack.tokens, int(old[metric]))
        gate = _Gate("<=", old[metric] + allowed, f"<= baseline +{allowed:,}", "regression")
        rows.append(_row(check, session, metric, figs[metric], old, gate))
    if slack.cost is not None:
        for profile in check.pricing:
            metric = f"cost.{profile}"
            if metric in figs and metric in old:
                bound = round(old[metric] * (1 + slack.cost), 6)
                gate = _Gate("<=", bound, f"<= baseline +{slack.cost * 100:g}%", "regression")
                rows.append(_row(check, session, metric, figs[metric], old, gate))
    if slack.retention is not None and "retention" in old:
        bound = old["retention"] - slack.retention
        text = f">= baseline -{slack.retention * 100:g} pt"
        rows.append(
            _row(
                check,
                session,
                "retention",
                figs["retention"],
                old,
                _Gate(">=", bound, text, "regression"),
            )
        )
    if slack.time is not None and session == TOTAL and old.get("seconds"):
        bound = old["seconds"] * slack.time
        gate = _Gate("<=", bound, f"<= baseline x{slack.time:g}", "regression")
        rows.append(_row(check, session, "seconds", figs["seconds"], old, gate))
    return rows


def merge_rows(rows: list[Row]) -> list[Row]:
    """Gated rows, and info rows only for figures no gated row shows."""
    gated = {(r.session, r.metric) for r in rows if r.status != "info"}
    kept = [r for r in rows if r.status != "info" or (r.session, r.metric) not in gated]
    order = {m: n for n, m in enumerate(dict.fromkeys(r.metric for r in rows))}
    sessions = {s: n for n, s in enumerate(dict.fromkeys(r.session for r in rows))}
    return sorted(kept, key=lambda r: (sessions[r.session], order[r.metric]))


def failure_line(row: Row) -> str:
    """One line naming the check, the session, the metric, both values, the delta and the limit."""
    head = f"{row.check}: {row.session}: "
    if row.kind == "error":
        return head + f"does not load or run: {row.note}"
    text = head + f"{row.metric} {fmt_value(row.metric, row.value)}"
    if row.baseline is not None:
        text += f" vs baseline {fmt_value(row.metric, row.baseline)}"
        text += f" ({fmt_delta(row.metric, row.value, row.baseline)})"
    text += f", limit {row.limit}"
    if row.limit_value is not None and row.kind == "limit" and row.metric != "violations":
        text += f" (past it by {_gap(row.metric, row.value, row.limit_value)})"
    return text


def _gap(metric: str, value: float | None, bound: float) -> str:
    if value is None:
        return "?"
    gap = abs(value - bound)
    if metric == "savings" or metric.startswith("retention"):
        return f"{gap * 100:.1f} pt"
    if metric.startswith("cost."):
        return f"${gap:,.4f}"
    return f"{int(gap):,}"
