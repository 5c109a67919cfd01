"""Scale past one machine: `bench` on Ray against the local process pool, on a synthetic corpus.

The corpus is made at run time from the real corpus's small sessions (four files, three formats):
copy N has every session, message and tool-call id rewritten (consistently inside the file, so
calls still pair with their results) and its own path. `COMPACTKIT_RAY_BENCH_SESSIONS` sets its
size (default 600, a few minutes in CI; the figures in docs/bench.md are from 10,000).

Measured in one run: sessions per second per core for one worker, for the process pool of 2
workers and for Ray on 2 CPUs (its start measured apart), the overhead of Ray over the pool at 2
workers (target: Ray <= 3x the pool's time), and the two reports equal but for timings.
"""

from __future__ import annotations

import hashlib
import logging
import os
import re
import time
from pathlib import Path
from typing import Any

from compactkit.bench.runner import run_bench
from compactkit.registry import make_registry
from compactkit.spec import parse_pipeline
from tests.bench.support import without_timings
from tests.conftest import corpus_files

SIZE = int(os.environ.get("COMPACTKIT_RAY_BENCH_SESSIONS", "600"))
ONE_WORKER_SAMPLE = 200
"""Sessions timed on one worker (the per-core baseline), a slice of the corpus."""
WORKERS = 2
MAX_RATIO = 3.0
AGAIN_UP_TO = 2_000
"""Up to this size the pool runs again after Ray (the faster of its two runs counts)."""
SOURCE_BYTES = 40_000
_ID = re.compile(
    r"\b[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\b"
    r"|\b(?:toolu|msg|call|chatcmpl)_[A-Za-z0-9]{8,}\b"
)


def _vary(text: str, copy: int) -> str:
    """`text` with every id replaced by one of the same shape unique to `copy`."""
    new: dict[str, str] = {}

    def swap(match: re.Match[str]) -> str:
        old = match.group(0)
        if old not in new:
            digest = hashlib.sha256(f"{copy}:{old}".encode()).hexdigest()
            if "-" in old and "_" not in old:  # a UUID
                h = digest[:32]
                new[old] = f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:32]}"
            else:
                prefix, _, rest = old.partition("_")
                new[old] = f"{prefix}_{digest[: len(rest)]}"
        return new[old]

    return _ID.sub(swap, text)


def synthetic_corpus(folder: Path, size: int) -> list[str]:
    """`size` session files under `folder`, made from the corpus's small ones, 100 a folder."""
    sources = [p for p in corpus_files() if p.stat().st_size < SOURCE_BYTES]
    assert len(sources) >= 3, sources
    texts = [p.read_text(encoding="utf-8") for p in sources]
    for copy in range(size):
        n = copy % len(sources)
        source = sources[n]
        name = source.name.replace(source.stem.split(".")[0], f"s{copy:05d}-{n}", 1)
        target = folder / f"{copy // 100:03d}" / name
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(_vary(texts[n], copy), encoding="utf-8")
    return [str(folder)]


def test_ray_against_the_process_pool(benchmark: Any, tmp_path: Path) -> None:
    import ray

    paths = synthetic_corpus(tmp_path / "corpus", SIZE)
    sample = synthetic_corpus(tmp_path / "sample", min(SIZE, ONE_WORKER_SAMPLE))
    registry = make_registry(entry_points=False)
    specs = [parse_pipeline("default", None)]

    def bench(on: list[str], executor: str, workers: int) -> tuple[float, dict[str, Any]]:
        start = time.perf_counter()
        report = run_bench(
            on, specs, trigger=8_000, workers=workers, executor=executor, registry=registry
        )
        return time.perf_counter() - start, report

    one_s, _ = bench(sample, "local", 1)
    pool_s, pool = bench(paths, "local", WORKERS)
    start = time.perf_counter()
    ray.init(num_cpus=WORKERS, include_dashboard=False, logging_level=logging.ERROR)
    try:
        init_s = time.perf_counter() - start
        first_s, _ = bench(sample, "ray", WORKERS)  # Ray starts its worker processes
        ray_s, on_ray = benchmark.pedantic(lambda: bench(paths, "ray", WORKERS), rounds=1)
        if SIZE <= AGAIN_UP_TO:  # the pool again, so load changes fall on both sides
            pool_s = min(pool_s, bench(paths, "local", WORKERS)[0])
    finally:
        ray.shutdown()

    sessions = len(pool["sessions"]) // len(pool["pipelines"])
    assert sessions >= SIZE
    assert not pool["failed"]
    assert without_timings(on_ray) == without_timings(pool), "Ray and the pool disagree"
    per_core = {
        "one_worker": ONE_WORKER_SAMPLE / one_s if SIZE >= ONE_WORKER_SAMPLE else SIZE / one_s,
        "pool_2": sessions / pool_s / WORKERS,
        "ray_2": sessions / ray_s / WORKERS,
    }
    ratio = ray_s / pool_s
    figures = {
        "session_files": SIZE,
        "sessions": sessions,
        "pool_s": round(pool_s, 2),
        "ray_s": round(ray_s, 2),
        "ray_init_s": round(init_s, 2),
        "ray_first_call_s": round(first_s, 2),
        "sessions_per_s_per_core": {k: round(v, 1) for k, v in per_core.items()},
        "ray_over_pool": round(ratio, 3),
        "ray_over_pool_with_start": round((ray_s + init_s) / pool_s, 3),
    }
    benchmark.extra_info.update(figures)
    print(f"\nray vs process pool ({WORKERS} workers): {figures}")
    assert ratio <= MAX_RATIO, f"Ray takes {ratio:.2f}x the process pool's time"
