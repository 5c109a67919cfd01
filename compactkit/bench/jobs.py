"""One bench job: every pipeline on every conversation of one session file, contained (a file
that does not load, or a pipeline that fails on a session, is reported, never raised). Executors
(`compactkit.bench.executors`) run jobs; `compactkit.bench.runner` plans them and sums the report."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from ..errors import EXIT_PLUGIN, CompactkitError
from ..formats.loading import SessionAddress, load_session, pick
from ..paths import session_files
from ..pipeline import Pipeline, build_pipeline
from ..policy import PolicyName
from ..pricing import get_profile
from ..registry import Registry, get_registry
from ..spec import PipelineSpec
from ..tokens import TokenCounter
from .replay import Mode, SessionResult, run_session


def collect_sessions(paths: Iterable[str]) -> list[str]:
    """Session addresses from files, `FILE#N` and folders (every session file under them)."""
    out: list[str] = []
    for raw in paths:
        where = SessionAddress.parse(raw)
        file, index = where.file, where.index
        p = Path(file)
        if index is None and p.is_dir():
            out.extend(session_files(p))
        else:
            out.append(raw)
    return out


@dataclass
class Job:
    address: str
    specs: list[PipelineSpec]
    mode: Mode
    profiles: list[str]
    trigger: int
    tokenizer: str
    timeout: float | None = None
    """Seconds each plugin strategy may run (`Pipeline(timeout=)`); None: no limit."""
    policy: PolicyName = "pays"
    """When a persistent replay keeps a compaction (`compactkit.policy`)."""


@dataclass(frozen=True)
class Failure:
    """One pipeline that failed on one session (the other pipelines and sessions still ran)."""

    session: str
    pipeline: str
    error: str
    exit_code: int


@dataclass
class JobResult:
    address: str
    results: list[SessionResult] = field(default_factory=list)
    error: str | None = None
    """Why the session file did not load (nothing of it ran), None when it did."""
    exit_code: int = 0
    """The load error's exit code (2 bad input, 3 a plugin failed), 0 without error."""
    failures: list[Failure] = field(default_factory=list)
    """Pipelines that failed on one of the file's sessions."""


def build(
    spec: PipelineSpec, registry: Registry, tokenizer: str, timeout: float | None = None
) -> Pipeline:
    """The spec's pipeline, titled with the spec's name (the name its report rows carry)."""
    pipeline = build_pipeline(spec, registry=registry, tokenizer=tokenizer, timeout=timeout)
    pipeline.title = spec.name
    return pipeline


def describe(exc: BaseException) -> str:
    """`Type: first line of the message` (just `Type` without a message)."""
    lines = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {lines[0]}" if lines else type(exc).__name__


def _failure(exc: Exception) -> tuple[str, int]:
    """An error's one line and exit code; anything but a `CompactkitError` is a plugin failure."""
    if isinstance(exc, CompactkitError):
        return str(exc), exc.exit_code
    return f"unexpected error: {describe(exc)}", EXIT_PLUGIN


def run_job(job: Job, registry: Registry | None = None) -> JobResult:
    """Every pipeline on every conversation of one session file (runs in a worker process).

    Never raises for what a session or a plugin does: a file that does not load is the job's
    `error`, a pipeline that fails on one session is one of its `failures`, and every other
    pipeline and session still runs."""
    registry = registry or get_registry()
    out = JobResult(job.address)
    try:
        where = SessionAddress.parse(job.address)
        file, index = where.file, where.index
        _, contexts = load_session(file, None, registry)
        named = (
            [(f"{file}#{index}", pick(contexts, index, file))]
            if index is not None
            else [
                (file if len(contexts) == 1 else f"{file}#{n}", c) for n, c in enumerate(contexts)
            ]
        )
        pipelines = [build(s, registry, job.tokenizer, job.timeout) for s in job.specs]
        profiles = [get_profile(p) for p in job.profiles]
        counter = TokenCounter(registry.tokenizers.get(job.tokenizer))
        scorers = [scorer for _, scorer in registry.scorers.items()]
    except Exception as exc:
        out.error, out.exit_code = _failure(exc)
        return out
    for name, ctx in named:
        for pipeline in pipelines:
            try:
                result = run_session(
                    name,
                    ctx,
                    pipeline,
                    job.mode,
                    counter,
                    profiles,
                    trigger=job.trigger,
                    scorers=scorers,
                    policy=job.policy,
                )
            except Exception as exc:
                error, code = _failure(exc)
                out.failures.append(Failure(name, pipeline.title, error, code))
            else:
                out.results.append(result)
    return out
