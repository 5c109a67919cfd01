"""`compactkit bench`: sessions x pipelines, in parallel processes, with corpus totals."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any

from ..errors import EXIT_PLUGIN, failure_code, redact
from ..paths import SESSION_SUFFIXES
from ..policy import PolicyName
from ..pricing import get_profile
from ..registry import Registry, get_registry
from ..spec import PipelineSpec
from ..tokens import DEFAULT_TOKENIZER
from .executors import Executor, open_executor
from .jobs import Job, JobResult, build, collect_sessions
from .replay import NO_MODEL_CALL, Mode, SessionResult

BENCH_SCHEMA = "compactkit.bench/1"


def run_bench(
    paths: Sequence[str],
    specs: Sequence[PipelineSpec],
    *,
    mode: Mode = "persistent",
    profiles: Sequence[str] = ("anthropic", "openai"),
    trigger: int = 60_000,
    tokenizer: str = DEFAULT_TOKENIZER,
    workers: int = 1,
    executor: str | Executor = "local",
    ray_address: str | None = None,
    registry: Registry | None = None,
    progress: Callable[[JobResult], None] | None = None,
    timeout: float | None = None,
    sessions: Sequence[str] | None = None,
    policy: PolicyName = "pays",
) -> dict[str, Any]:
    """Run the benchmark and return the versioned JSON report.

    `sessions`: the addresses `collect_sessions(paths)` gave, when the caller has them already
    (the CLI collects once, to keep its outputs off every session); None: collected here.

    `policy`: when a persistent replay keeps a compaction (`compactkit.policy`): `pays`, only
    one that pays for itself under `profiles` (the default, what `Session` and the gateway do),
    or `always`, whenever the history is over the trigger (a pipeline measured alone).

    `timeout`: seconds each plugin strategy may run on one conversation before it is stopped and
    the session's row fails (see `Pipeline`); None or 0, no limit.

    `executor` is where session files run (`compactkit.bench.executors`): `local` (this process,
    or `workers` processes), `ray` (Ray tasks on a local Ray of `workers` CPUs, or on the cluster
    at `ray_address`), or an open executor shared by several calls. The report is the same to
    the token and the cent whichever runs it; only the timings differ."""
    for name in profiles:
        get_profile(name)
    names = [s.name for s in specs]
    if "none" not in names:
        specs = [PipelineSpec("none", ()), *specs]
    # the policies that decide when to compact (the peers) do it at the bench's trigger too
    specs = [s if s.trigger is not None else replace(s, trigger=trigger) for s in specs]
    registry = registry or get_registry()
    registry.tokenizers.get(tokenizer)  # an unknown tokenizer is one usage error, not N failures
    for spec in specs:  # fail fast on unknown strategies or bad options
        build(spec, registry, tokenizer)
    jobs = [
        Job(a, list(specs), mode, list(profiles), trigger, tokenizer, timeout or None, policy)
        for a in (collect_sessions(paths) if sessions is None else sessions)
    ]
    results: list[JobResult] = []
    with open_executor(
        executor, workers=workers, registry=registry, ray_address=ray_address
    ) as runner:
        for job_result in runner.map(jobs):
            results.append(job_result)
            if progress:
                progress(job_result)
    report = build_report(results, specs, mode, profiles, trigger, tokenizer)
    report["policy"] = policy if mode == "persistent" else None
    return report


def run_frontier(
    paths: Sequence[str],
    specs_at: Callable[[int], Sequence[PipelineSpec]],
    triggers: Sequence[int],
    *,
    executor: str | Executor = "local",
    workers: int = 1,
    ray_address: str | None = None,
    registry: Registry | None = None,
    **options: Any,
) -> dict[str, Any]:
    """`run_bench` at each trigger: the report of the first trigger (its tables and sessions, in
    the single-trigger schema) with a `frontier` entry per trigger (every pipeline's cost and
    retention there). `specs_at(trigger)` gives the pipelines at a trigger (`default` is the
    default pipeline at that trigger); `options` are `run_bench`'s."""
    if not triggers:
        raise ValueError("no trigger to run the bench at")
    registry = registry or get_registry()
    reports = []
    with open_executor(
        executor, workers=workers, registry=registry, ray_address=ray_address
    ) as runner:
        for trigger in triggers:
            reports.append(
                run_bench(
                    paths,
                    specs_at(trigger),
                    trigger=trigger,
                    executor=runner,
                    registry=registry,
                    **options,
                )
            )
    report = reports[0]
    report["frontier"] = [entry for r in reports for entry in r["frontier"]]
    for later in reports[1:]:  # a failure at any trigger is the run's
        report["failed"] += [f for f in later["failed"] if f not in report["failed"]]
    return report


FRONTIER_FIGURES = (
    "prompt_tokens",
    "savings",
    "cost",
    "cost_vs_none",
    "worst_session_cost_vs_none",
    "retention",
    "retention_by_kind",
    "compactions",
    "summarizer",
    "failed",
)
"""What the report's `frontier` gives of each pipeline at each trigger (from its totals)."""


def frontier_entry(trigger: int, pipelines: list[dict[str, Any]]) -> dict[str, Any]:
    """One trigger's point of every pipeline on the cost-retention frontier."""
    return {
        "trigger": trigger,
        "pipelines": [
            {"name": p["name"], **{k: p["totals"][k] for k in FRONTIER_FIGURES if k in p["totals"]}}
            for p in pipelines
        ],
    }


def nothing_loaded(report: dict[str, Any], paths: Sequence[str]) -> str | None:
    """Why a bench measured nothing (no session file found, or none loaded); None when some
    session loaded."""
    if report["sessions"] or any(f.get("pipeline") for f in report["failed"]):
        return None
    failed = report["failed"]
    if not failed:
        suffixes = ", ".join(f"*{s}" for s in SESSION_SUFFIXES)
        return f"no session file in {', '.join(paths)} (looked for {suffixes})"
    if len(failed) == 1:
        return f"no session loaded: {failed[0]['error']}"
    return f"no session loaded: none of {len(failed)} files loaded; the first: {failed[0]['error']}"


def plugin_failure(report: dict[str, Any]) -> tuple[str, int] | None:
    """One line and the exit code for a bench where a pipeline failed on some session (its
    error's code: 2 for a configuration such as an LLM backend without a key, 3 for a plugin;
    never 0), None when none did. Sessions that do not load are listed in the report, not
    fatal, unless a plugin failed while loading them (3)."""
    broken = [f for f in report["failed"] if f.get("pipeline") or f["exit_code"] == EXIT_PLUGIN]
    if not broken:
        return None
    first = broken[0]
    if first.get("pipeline"):
        line = f"pipeline {first['pipeline']!r} failed on {first['path']}: {first['error']}"
    elif first["error"].startswith(f"{first['path']}: "):
        line = first["error"]
    else:
        line = f"{first['path']}: {first['error']}"
    line += f" (and {len(broken) - 1} more)" if len(broken) > 1 else ""
    return line, max(failure_code(f["exit_code"]) for f in broken)


def _totals(rows: list[SessionResult], profiles: Sequence[str]) -> dict[str, Any]:
    retention_kept = sum(r.retention.get("kept", 0) for r in rows)
    retention_total = sum(r.retention.get("total", 0) for r in rows)
    recover_kept = sum(r.recoverability.get("kept", 0) for r in rows)
    by_kind: dict[str, list[int]] = {}
    for r in rows:
        for kind, v in r.retention.get("by_kind", {}).items():
            entry = by_kind.setdefault(kind, [0, 0])
            entry[0] += v["kept"]
            entry[1] += v["total"]
    return {
        "sessions": len(rows),
        "tokens_before": sum(r.tokens_before for r in rows),
        "tokens_after": sum(r.tokens_after for r in rows),
        "prompt_tokens": sum(r.prompt_tokens for r in rows),
        "cached_tokens": sum(r.cached_tokens for r in rows),
        "output_tokens": sum(r.output_tokens for r in rows),
        "model_calls": sum(len(r.calls) for r in rows),
        "compactions": sum(r.compactions for r in rows),
        "cost": {p: round(sum(r.cost.get(p, 0.0) for r in rows), 6) for p in profiles},
        "retention": round(retention_kept / retention_total, 6) if retention_total else 1.0,
        "retention_by_kind": {
            k: round(v[0] / v[1], 6) if v[1] else 1.0 for k, v in sorted(by_kind.items())
        },
        "recoverability": round(recover_kept / retention_total, 6) if retention_total else 1.0,
        "violations": sum(r.violations for r in rows),
        "seconds": round(sum(r.seconds for r in rows), 3),
        "summarizer": _summarizer_totals(rows, profiles),
    }


def _summarizer_totals(rows: list[SessionResult], profiles: Sequence[str]) -> dict[str, Any]:
    """The summarizer calls of a pipeline's sessions together (their cost is in `cost`)."""
    uses = [r.summarizer for r in rows]
    out: dict[str, Any] = {
        key: sum(getattr(u, key) for u in uses)
        for key in ("calls", "input_tokens", "cached_tokens", "output_tokens")
    }
    out["cost"] = {p: round(sum(u.cost.get(p, 0.0) for u in uses), 6) for p in profiles}
    if not out["calls"] and any(u.free for u in uses):
        out["note"] = NO_MODEL_CALL
    return out


def build_report(
    results: list[JobResult],
    specs: Sequence[PipelineSpec],
    mode: str,
    profiles: Sequence[str],
    trigger: int,
    tokenizer: str,
) -> dict[str, Any]:
    rows = [r for jr in results for r in jr.results]
    by_pipeline: dict[str, list[SessionResult]] = {s.name: [] for s in specs}
    for r in rows:
        by_pipeline[r.pipeline].append(r)
    failures = [f for jr in results for f in jr.failures]
    baseline = {r.session: r for r in by_pipeline.get("none", [])}
    pipelines = []
    for spec in specs:
        mine = by_pipeline[spec.name]
        totals = _totals(mine, profiles)
        totals["failed"] = sum(f.pipeline == spec.name for f in failures)
        # against no compaction on the same sessions: a failed session counts on neither side
        base = _totals([baseline[r.session] for r in mine if r.session in baseline], profiles)
        key = "prompt_tokens" if mode != "oneshot" else "tokens_after"
        base_tokens = base[key] if mode != "oneshot" else base["tokens_before"]
        totals["savings"] = round(1 - totals[key] / base_tokens, 6) if base_tokens else 0.0
        totals["cost_vs_none"] = {
            p: round(totals["cost"][p] / base["cost"][p], 6) if base["cost"].get(p) else None
            for p in profiles
        }
        worst = None
        for r in mine:
            b = baseline.get(r.session)
            if b is None:
                continue
            for p in profiles:
                if b.cost.get(p):
                    ratio = r.cost[p] / b.cost[p]
                    if worst is None or ratio > worst[0]:
                        worst = (ratio, r.session, p)
        totals["worst_session_cost_vs_none"] = (
            {"ratio": round(worst[0], 6), "session": worst[1], "pricing": worst[2]}
            if worst
            else None
        )
        strategies = [redact(s) for s in spec.strategies]
        pipelines.append({"name": spec.name, "strategies": strategies, "totals": totals})
    return {
        "schema": BENCH_SCHEMA,
        "mode": mode,
        "pricing": list(profiles),
        "trigger": trigger if mode == "persistent" else None,
        "tokenizer": tokenizer,
        "pipelines": pipelines,
        "frontier": [frontier_entry(trigger, pipelines)],
        "sessions": [r.as_json() for r in rows],
        "failed": [entry for jr in results for entry in _failed(jr)],
    }


def _failed(job: JobResult) -> list[dict[str, Any]]:
    """The report's `failed` entries of one file: the file when it did not load, else each
    session a pipeline failed on (with the pipeline's name)."""
    if job.error:
        return [{"path": job.address, "error": job.error, "exit_code": job.exit_code}]
    return [
        {"path": f.session, "pipeline": f.pipeline, "error": f.error, "exit_code": f.exit_code}
        for f in job.failures
    ]
