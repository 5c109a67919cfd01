"""`bench` and `check` on Ray: the same reports as the local process pool to the last token and
cent, and failures contained to their session. One local Ray of 2 CPUs for the module."""

from __future__ import annotations

import json
import logging
import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import ray
from click.testing import CliRunner

from compactkit.cli import make_cli
from compactkit.registry import make_registry

from ..conftest import corpus_files
from .support import crashing_plugins, failing_plugins, without_timings

CLI = make_cli(lambda **kw: make_registry(entry_points=False, **kw))
# the corpus's smaller files: every format but the long ones, 11 conversations in 10 files
SESSIONS = [p for p in corpus_files() if p.stat().st_size < 130_000]
EXECUTORS = {"pool": ["--workers", "2"], "ray": ["--executor", "ray", "--workers", "2"]}


@pytest.fixture(scope="module", autouse=True)
def local_ray() -> Iterator[None]:
    ray.init(num_cpus=2, include_dashboard=False, logging_level=logging.ERROR)
    try:
        yield
    finally:
        ray.shutdown()


def invoke(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(CLI, list(args))
    return result.exit_code, result.stderr


def run_json(report: Path, *args: str) -> tuple[int, dict[str, Any]]:
    """The exit code and the `--json` report of a command."""
    code, stderr = invoke(*args, "--json", str(report))
    assert report.exists(), stderr
    return code, json.loads(report.read_text())


def both(tmp_path: Path, *args: str) -> dict[str, tuple[int, dict[str, Any]]]:
    """`args` run on the process pool and on Ray: each one's exit code and JSON report."""
    return {
        name: run_json(tmp_path / f"{name}.json", *args, *options)
        for name, options in EXECUTORS.items()
    }


def test_bench_on_ray_equals_the_process_pool_to_the_token_and_cent(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert len(SESSIONS) >= 8
    # relative paths, from a folder Ray was not started in: the workers read the same files
    root = Path(os.path.commonpath(SESSIONS))
    monkeypatch.chdir(root)
    runs = both(
        tmp_path,
        "bench",
        *(str(p.relative_to(root)) for p in SESSIONS),
        "-s",
        "observation-mask:keep_last=3+sliding-window:max_tokens=6000",
        "--trigger",
        "8000",
    )
    (pool_code, pool), (ray_code, on_ray) = runs["pool"], runs["ray"]
    assert pool_code == ray_code == 0
    assert without_timings(on_ray) == without_timings(pool)
    assert len(pool["sessions"]) == 2 * (len(SESSIONS) + 1)  # one file holds two conversations
    assert sum(p["totals"]["compactions"] for p in pool["pipelines"]) > 0  # something compacted
    assert not pool["failed"]


def test_failures_on_ray_are_contained_to_their_session(tmp_path: Path) -> None:
    """A strategy raising on one session fails that row; a file that does not load is listed;
    a plugin that kills its Ray worker fails its own session file alone; the rest completes."""
    plugins = failing_plugins(tmp_path)
    broken = tmp_path / "broken.json"
    broken.write_text('{"messages": [', encoding="utf-8")
    runs = both(
        tmp_path,
        "--plugins-dir",
        str(plugins),
        "bench",
        *map(str, SESSIONS),
        str(broken),
        "-s",
        "fails-on:word=game",
        "-s",
        "sliding-window:max_tokens=2000",
        "--mode",
        "oneshot",
    )
    (pool_code, pool), (ray_code, on_ray) = runs["pool"], runs["ray"]
    assert pool_code == ray_code == 3
    assert without_timings(on_ray) == without_timings(pool)
    failed = {(f["path"], f.get("pipeline")) for f in on_ray["failed"]}
    game = next(str(p) for p in SESSIONS if p.name == "runtime_trajs_basic.json")
    assert failed == {(str(broken), None), (game, "fails-on:word=game")}
    totals = {p["name"]: p["totals"] for p in on_ray["pipelines"]}
    conversations = len(SESSIONS) + 1
    assert totals["none"]["sessions"] == totals["sliding-window:max_tokens=2000"]["sessions"]
    assert totals["none"]["sessions"] == conversations
    assert totals["fails-on:word=game"]["sessions"] == conversations - 1

    crashing = crashing_plugins(tmp_path)
    code, dead = run_json(
        tmp_path / "dies.json",
        *("--plugins-dir", str(crashing), "bench", *map(str, SESSIONS), "--mode", "oneshot"),
        *EXECUTORS["ray"],
    )
    assert code == 3  # a plugin failure
    assert [f["path"] for f in dead["failed"]] == [game]
    assert dead["failed"][0]["error"].startswith("the Ray worker failed: ")
    assert all(p["totals"]["sessions"] == len(SESSIONS) for p in dead["pipelines"])


CHECKS = """
[[tool.compactkit.check]]
name = "window"
mode = "oneshot"
sessions = ["corpus/"]
pipeline = ["observation-mask:keep_last=3", "sliding-window"]
max_tokens = "6k"
min_savings = "1%"

[[tool.compactkit.check]]
name = "breaks"
mode = "oneshot"
sessions = ["corpus/"]
pipeline = ["fails-on:word=game"]
"""


def test_check_on_ray_equals_the_process_pool(tmp_path: Path) -> None:
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    for path in SESSIONS:
        (corpus / path.name).symlink_to(path)
    config = tmp_path / "pyproject.toml"
    config.write_text(CHECKS, encoding="utf-8")
    plugins = failing_plugins(tmp_path)
    runs = both(tmp_path, "--plugins-dir", str(plugins), "check", "--config", str(config))
    (pool_code, pool), (ray_code, on_ray) = runs["pool"], runs["ray"]
    assert pool_code == ray_code == 3  # the failing strategy; the limits fail too (exit 1 < 3)
    assert without_timings(on_ray) == without_timings(pool)
    checks = {c["name"]: c for c in on_ray["checks"]}
    assert set(checks["breaks"]["errors"]) == {"corpus/runtime_trajs_basic.json"}
    assert len(checks["window"]["sessions"]) == len(SESSIONS) + 1


def test_without_ray_installed_the_ray_executor_is_exit_2_saying_what_to_install(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setitem(sys.modules, "ray", None)  # `import ray` raises ImportError
    code, stderr = invoke("bench", str(SESSIONS[0]), "--executor", "ray")
    assert code == 2
    assert stderr.splitlines() == [
        "compactkit: error: --executor ray needs Ray: pip install 'compactkit[ray]'"
    ]


def test_a_ray_address_without_the_ray_executor_is_exit_2() -> None:
    code, stderr = invoke("check", "--ray-address", "127.0.0.1:6379")
    assert code == 2
    assert stderr.splitlines() == [
        "compactkit: error: --ray-address applies to --executor ray only"
    ]
