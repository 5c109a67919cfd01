"""Running the bench: pipelines, workers, the command and its reports."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

from compactkit.bench.runner import run_bench
from compactkit.cli import make_cli
from compactkit.registry import make_registry
from compactkit.spec import PipelineSpec, parse_pipeline

from ..conftest import SAMPLES, sample
from .support import without_timings

SPECS = [
    parse_pipeline("observation-mask:keep_last=5", []),
    parse_pipeline("sliding-window:max_tokens=20000", []),
]


def test_workers_give_identical_results() -> None:
    paths = [str(sample("sphinx-doc")), str(sample("tau_bench")), str(sample("resolver_mock"))]
    one = run_bench(paths, SPECS, trigger=20_000, workers=1)
    two = run_bench(paths, SPECS, trigger=20_000, workers=2)
    assert without_timings(one) == without_timings(two)
    assert next(p["name"] for p in one["pipelines"]) == "none"
    sessions = {s["session"] for s in one["sessions"]}
    assert len(sessions) == 1 + 3 + 2  # tau-bench and the resolver file hold several


def test_bench_command_writes_json_markdown_and_html(tmp_path: Path) -> None:
    broken = tmp_path / "broken.json"
    broken.write_text('{"not": "a session"}')
    cli = make_cli(lambda: make_registry(entry_points=False))
    out = tmp_path / "r"
    result = CliRunner().invoke(
        cli,
        [
            "bench",
            str(sample("sphinx-doc")),
            str(broken),
            "-s",
            "observation-mask:keep_last=5",
            "-s",
            "sliding-window:max_tokens=20000",
            "--trigger",
            "20000",
            "--json",
            f"{out}.json",
            "--markdown",
            f"{out}.md",
            "--html",
            f"{out}.html",
        ],
    )
    assert result.exit_code == 0, result.output
    report = json.loads(Path(f"{out}.json").read_text())
    assert report["schema"] == "compactkit.bench/1"
    assert report["failed"] and "unknown session format" in report["failed"][0]["error"]
    for session in report["sessions"]:
        for key in ("prompt_tokens", "cached_tokens", "cost", "retention", "violations", "seconds"):
            assert key in session
        assert set(session["cost"]) == {"anthropic", "openai"}
    names = [p["name"] for p in report["pipelines"]]
    assert names == ["none", "observation-mask:keep_last=5", "sliding-window:max_tokens=20000"]
    page = Path(f"{out}.html").read_text()
    assert "<svg" in page and "polyline" in page and "<script" not in page
    assert "http://" not in page.replace('xmlns="http://www.w3.org/2000/svg"', "")
    assert "| none |" in Path(f"{out}.md").read_text()
    assert "sliding-window" in result.stdout


def test_bench_rejects_unknown_strategies_and_profiles() -> None:
    cli = make_cli(lambda: make_registry(entry_points=False))
    result = CliRunner().invoke(cli, ["bench", str(SAMPLES), "-s", "nope"])
    assert result.exit_code == 2 and "unknown strategy 'nope'" in result.stderr
    result = CliRunner().invoke(cli, ["bench", str(SAMPLES), "--pricing", "acme"])
    assert result.exit_code == 2 and "unknown pricing profile" in result.stderr
    assert parse_pipeline("none", []) == PipelineSpec("none", ())
