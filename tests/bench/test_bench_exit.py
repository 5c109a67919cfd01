"""`compactkit bench` exit codes: a failing strategy is exit 3 with its row marked failed;
nothing loaded or an unknown tokenizer is exit 2 with one line and no report."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from click.testing import CliRunner

from compactkit.cli import make_cli
from compactkit.registry import make_registry

from ..conftest import sample
from .support import failing_plugins

CLI = make_cli(lambda **kw: make_registry(entry_points=False, **kw))
SESSIONS = [sample("runtime_trajs_basic"), sample("tau_bench"), sample("test-repo-i1")]


def bench(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(CLI, list(args))
    return result.exit_code, result.stdout, result.stderr


def bench_failing(tmp_path: Path, *args: str) -> tuple[int, str, str, dict[str, Any]]:
    """`bench` of the three sessions with the failing strategies loaded: exit code, stdout,
    stderr and the JSON report."""
    out = tmp_path / "bench.json"
    plugins = failing_plugins(tmp_path)
    code, stdout, stderr = bench(
        "--plugins-dir", str(plugins), "bench", *map(str, SESSIONS), *args, "--json", str(out)
    )
    return code, stdout, stderr, json.loads(out.read_text())


def _row(report: dict[str, object], name: str) -> dict[str, object]:
    pipelines = report["pipelines"]
    assert isinstance(pipelines, list)
    return next(p["totals"] for p in pipelines if p["name"] == name)


def test_a_strategy_failing_on_every_session_is_exit_3_and_its_row_is_marked_failed(
    tmp_path: Path,
) -> None:
    code, stdout, stderr, report = bench_failing(
        tmp_path, "-s", "fails-on", "-s", "sliding-window:max_tokens=2000", "--mode", "oneshot"
    )
    assert code == 3, stderr
    failed = _row(report, "fails-on")
    none = _row(report, "none")
    assert failed["sessions"] == 0 and failed["failed"] == none["sessions"] == 5
    # the other pipeline ran on every session
    assert _row(report, "sliding-window:max_tokens=2000")["sessions"] == 5
    line = next(row for row in stdout.splitlines() if "fails-on" in row)
    assert "failed" in line and "100.0%" not in line
    assert {f["pipeline"] for f in report["failed"]} == {"fails-on"}
    assert all("boom" in f["error"] and f["exit_code"] == 3 for f in report["failed"])
    last = stderr.strip().splitlines()[-1]
    assert last.startswith("compactkit: error: pipeline 'fails-on' failed on ")
    assert "boom" in last and "(and 4 more)" in last


def test_a_strategy_failing_on_one_session_fails_that_session_only(tmp_path: Path) -> None:
    code, stdout, _, report = bench_failing(
        tmp_path, "-s", "fails-on:word=game", "--trigger", "2000"
    )
    assert code == 3
    totals = _row(report, "fails-on:word=game")
    assert (totals["sessions"], totals["failed"]) == (4, 1)
    # against no compaction on the same four sessions: it changes nothing, so it saves nothing
    assert totals["savings"] == 0.0 and totals["cost_vs_none"] == {"anthropic": 1.0, "openai": 1.0}
    assert [f["path"] for f in report["failed"]] == [str(sample("runtime_trajs_basic"))]
    line = next(row for row in stdout.splitlines() if "fails-on" in row)
    assert "failed on 1" in line


def test_unknown_tokenizer_is_exit_2_in_one_line_and_writes_nothing(tmp_path: Path) -> None:
    out = tmp_path / "bench.json"
    code, stdout, stderr = bench(
        "bench", str(SESSIONS[0]), "--tokenizer", "nope", "--json", str(out)
    )
    assert code == 2
    assert stderr.splitlines() == [
        "compactkit: error: unknown tokenizer 'nope' (known: cl100k_base, o200k_base)"
    ]
    assert stdout == "" and not out.exists()


def test_nothing_loaded_is_exit_2_in_one_line_and_writes_nothing(tmp_path: Path) -> None:
    out = tmp_path / "bench.json"
    empty = tmp_path / "empty"
    empty.mkdir()
    (tmp_path / "notes.json").write_text('{"not": "a session"}')
    missing = tmp_path / "missing.jsonl"
    cases = {
        str(missing): f"no session loaded: {missing}: no such file",
        str(empty): f"no session file in {empty} (looked for *.json, *.jsonl, *.traj)",
        str(tmp_path / "notes.json"): "no session loaded: ",
    }
    for path, message in cases.items():
        code, stdout, stderr = bench("bench", path, "--json", str(out))
        assert code == 2, (path, stderr)
        lines = stderr.splitlines()
        assert len(lines) == 1 and lines[0].startswith(f"compactkit: error: {message}"), lines
        assert stdout == "" and not out.exists()
    code, _, stderr = bench("bench", str(missing), str(tmp_path / "notes.json"))
    assert code == 2 and "none of 2 files loaded; the first: " in stderr


def test_a_bench_run_collects_its_sessions_once(tmp_path: Path, monkeypatch: Any) -> None:
    """The CLI walks the folders once (to keep its outputs off every session) and the runner
    measures that list: the same sessions, never collected a second time."""
    import compactkit.bench.jobs as jobs
    import compactkit.bench.runner as runner

    folder = tmp_path / "sessions"
    folder.mkdir()
    for path in SESSIONS[:2]:
        (folder / path.name).write_bytes(path.read_bytes())
    calls: list[list[str]] = []
    collect = jobs.collect_sessions

    def counted(paths: Any) -> list[str]:
        calls.append(list(paths))
        return collect(paths)

    monkeypatch.setattr(jobs, "collect_sessions", counted)
    monkeypatch.setattr(runner, "collect_sessions", counted)
    out = tmp_path / "bench.json"
    code, _, stderr = bench("bench", str(folder), "-s", "etag-collapse", "--json", str(out))
    assert code == 0, stderr
    assert calls == [[str(folder)]]
    report = json.loads(out.read_text())
    measured = {Path(s["session"].partition("#")[0]).name for s in report["sessions"]}
    assert measured == {path.name for path in SESSIONS[:2]}
