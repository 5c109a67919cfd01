"""Where `bench` and `check` run session files: this machine's processes, or Ray tasks.

One abstraction for both commands: `open_executor(kind, workers=..., registry=...)` gives an
`Executor` whose `map(jobs)` yields one `JobResult` per job, in job order, whatever runs them.

* `local`: in this process (`workers=1`), else a pool of `workers` processes, each rebuilding the
  plugin registry from `Registry.recipe` (entry points, plugins folder, the environment that
  selects plugins).
* `ray`: batches of jobs as Ray tasks, on a local Ray started with `workers` CPUs (shut down
  after), on the cluster at `ray_address`, or on the Ray this process already joined. Each
  worker rebuilds the registry from the same recipe, so plugins are found the way process
  workers find them (installed on every node, or a plugins folder at the same path there).

A session that fails is contained in its job (`run_job` never raises for what a session or a
plugin does); a Ray worker that dies takes only its batch, whose jobs are then run one task each
so that only the job that kills its worker is reported failed.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Iterator, Sequence
from concurrent.futures import ProcessPoolExecutor
from contextlib import contextmanager
from typing import Any

from ..errors import EXIT_PLUGIN, ConfigError
from ..registry import Registry, init_worker
from .jobs import Job, JobResult, describe, run_job

EXECUTORS = ("local", "ray")
RAY_INSTALL_HINT = "pip install 'compactkit[ray]'"
MAX_BATCH = 16
"""Most session files in one task: large enough that task overhead stays small, small enough
that the last tasks still spread over every CPU."""


def batch_size(jobs: int, cpus: int) -> int:
    """Jobs per task: about 4 tasks per CPU, at most `MAX_BATCH` jobs each."""
    return max(1, min(MAX_BATCH, jobs // (4 * max(1, cpus))))


class Executor:
    """Runs jobs and yields their results in job order. Open one with `open_executor`."""

    def map(self, jobs: Sequence[Job]) -> Iterator[JobResult]:
        raise NotImplementedError

    def close(self) -> None:
        """Release processes or the Ray this executor started (idempotent)."""


class LocalExecutor(Executor):
    """This process (one worker or one job), else a pool of worker processes kept open for
    every `map` until `close`."""

    def __init__(self, workers: int, registry: Registry) -> None:
        self.workers = workers
        self.registry = registry
        self._pool: ProcessPoolExecutor | None = None

    def map(self, jobs: Sequence[Job]) -> Iterator[JobResult]:
        if self.workers <= 1 or len(jobs) <= 1:
            for job in jobs:
                yield run_job(job, self.registry)
            return
        if self._pool is None:
            self._pool = ProcessPoolExecutor(
                max_workers=self.workers,
                initializer=init_worker,
                initargs=(self.registry.recipe,),
            )
        yield from self._pool.map(run_job, jobs, chunksize=batch_size(len(jobs), self.workers))

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(cancel_futures=True)
            self._pool = None


def import_ray() -> Any:
    """The `ray` module, or a one-line error saying how to install it."""
    try:
        import ray
    except ImportError:
        raise ConfigError(f"--executor ray needs Ray: {RAY_INSTALL_HINT}") from None
    return ray


_worker_recipe: str | None = None


def _run_batch(recipe: dict[str, Any], cwd: str, jobs: list[Job]) -> list[JobResult]:
    """A Ray task: in the caller's working directory (relative session paths and plugins folder
    mean the same there, when it exists on this node), the registry built as the caller's was
    (once per worker process), then each job exactly as a process-pool worker runs it."""
    global _worker_recipe
    if os.getcwd() != cwd and os.path.isdir(cwd):
        os.chdir(cwd)
    key = json.dumps(recipe, sort_keys=True, default=str)
    if key != _worker_recipe:
        init_worker(recipe)
        _worker_recipe = key
    return [run_job(job) for job in jobs]


class RayExecutor(Executor):
    """Batches of jobs as Ray tasks. Ray starts on the first `map` that has jobs: connected to
    `address` when given (or `RAY_ADDRESS`), else a local Ray of `workers` CPUs; a Ray that this
    process had already joined is used as it is and left running."""

    def __init__(self, workers: int, registry: Registry, address: str | None = None) -> None:
        self.ray = import_ray()
        self.workers = workers
        self.registry = registry
        self.address = address
        self._started = False
        self._task: Any = None

    def _connect(self) -> None:
        ray = self.ray
        if ray.is_initialized():
            return
        options: dict[str, Any] = {"include_dashboard": False, "logging_level": logging.ERROR}
        if self.address:
            options["address"] = self.address
        elif not os.environ.get("RAY_ADDRESS"):
            options["num_cpus"] = self.workers
        try:
            ray.init(**options)
        except Exception as exc:
            where = f" at {self.address}" if self.address else ""
            raise ConfigError(f"cannot start or reach Ray{where}: {describe(exc)}") from None
        self._started = True

    def _cpus(self) -> int:
        if self._started and not self.address and not os.environ.get("RAY_ADDRESS"):
            return self.workers
        return int(self.ray.cluster_resources().get("CPU", 1))

    def map(self, jobs: Sequence[Job]) -> Iterator[JobResult]:
        if not jobs:
            return
        ray = self.ray
        self._connect()
        if self._task is None:
            # one retry: a node lost mid-task; a job that kills its worker fails alone (below)
            self._task = ray.remote(max_retries=1)(_run_batch)
        run = (ray.put(self.registry.recipe), os.getcwd())
        size = batch_size(len(jobs), self._cpus())
        batches = [list(jobs[n : n + size]) for n in range(0, len(jobs), size)]
        refs = [self._task.remote(*run, batch) for batch in batches]
        done = 0
        try:
            for batch, ref in zip(batches, refs, strict=True):
                yield from self._gather(ref, batch, run)
                done += 1
        finally:
            for ref in refs[done:]:
                ray.cancel(ref)

    def _gather(self, ref: Any, batch: list[Job], run: tuple[Any, str]) -> list[JobResult]:
        ray = self.ray
        try:
            results: list[JobResult] = ray.get(ref)
            return results
        except ray.exceptions.RayError as exc:
            if len(batch) > 1:  # find the job that failed: each one alone
                singles = [self._task.remote(*run, [job]) for job in batch]
                pairs = zip(batch, singles, strict=True)
                return [r for job, one in pairs for r in self._gather(one, [job], run)]
            error = f"the Ray worker failed: {describe(exc)}"
            return [JobResult(batch[0].address, error=error, exit_code=EXIT_PLUGIN)]

    def close(self) -> None:
        if self._started:
            self.ray.shutdown()
            self._started = False


def make_executor(
    kind: str, *, workers: int = 1, registry: Registry, ray_address: str | None = None
) -> Executor:
    """A new executor of `kind` (`local` or `ray`); close it when done (or use `open_executor`)."""
    if kind == "local":
        if ray_address:
            raise ConfigError("--ray-address applies to --executor ray only")
        return LocalExecutor(workers, registry)
    if kind == "ray":
        return RayExecutor(workers, registry, ray_address)
    raise ConfigError(f"unknown executor {kind!r} (known: {', '.join(EXECUTORS)})")


@contextmanager
def open_executor(
    kind: str | Executor,
    *,
    workers: int = 1,
    registry: Registry,
    ray_address: str | None = None,
) -> Iterator[Executor]:
    """An executor for the `with` block: a new one of `kind`, closed after, or `kind` itself when
    it is an executor already open (left open for its owner)."""
    if isinstance(kind, Executor):
        yield kind
        return
    executor = make_executor(kind, workers=workers, registry=registry, ray_address=ray_address)
    try:
        yield executor
    finally:
        executor.close()


def map_jobs(
    jobs: Sequence[Job],
    executor: str = "local",
    workers: int = 1,
    registry: Registry | None = None,
    *,
    ray_address: str | None = None,
) -> list[JobResult]:
    """Every job's result, in job order, on a new executor of kind `executor`."""
    from ..registry import get_registry

    registry = registry or get_registry()
    with open_executor(
        executor, workers=workers, registry=registry, ray_address=ray_address
    ) as runner:
        return list(runner.map(jobs))
