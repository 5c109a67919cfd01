"""A frontier, not a point: `bench --trigger 30000,60000,...` runs every pipeline at each trigger
and reports each one's cost and retention there (JSON `frontier`, a table in the terminal and the
markdown, a cost-retention curve per pipeline in the HTML); one trigger keeps the old report."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

from compactkit.bench.report import frontier_chart, frontier_rows, render_html, render_markdown
from compactkit.bench.runner import FRONTIER_FIGURES, run_bench, run_frontier
from compactkit.cli import make_cli
from compactkit.registry import make_registry
from compactkit.spec import PipelineSpec, parse_pipelines

from ..conftest import sample
from .support import without_timings

PI = str(sample("pi-mono_before-compaction"))  # 92,409 tokens at its end
NAMES = ("default", "peer-pi", "peer-codex")


def _at(trigger: int) -> list[PipelineSpec]:
    return parse_pipelines(NAMES, trigger=trigger)


def test_each_trigger_is_a_point_of_every_pipeline() -> None:
    report = run_frontier([PI], _at, [30_000, 60_000])
    assert [f["trigger"] for f in report["frontier"]] == [30_000, 60_000]
    # the report itself is the first trigger's, as a one-trigger run gives it
    alone = run_bench([PI], _at(30_000), trigger=30_000)
    assert without_timings({**report, "frontier": None}) == without_timings(
        {**alone, "frontier": None}
    )
    assert alone["frontier"][0] == report["frontier"][0]
    at_60 = run_bench([PI], _at(60_000), trigger=60_000)
    by_trigger = {f["trigger"]: {p["name"]: p for p in f["pipelines"]} for f in report["frontier"]}
    for p in at_60["pipelines"]:
        point = by_trigger[60_000][p["name"]]
        assert set(point) == {"name", *FRONTIER_FIGURES}
        assert point["cost"] == p["totals"]["cost"]
        assert point["retention"] == p["totals"]["retention"]
    # a higher trigger compacts less often, each pipeline as much as the others
    for name in NAMES:
        low, high = by_trigger[30_000][name], by_trigger[60_000][name]
        assert 1 <= high["compactions"] < low["compactions"], name
        assert high["summarizer"]["calls"] <= low["summarizer"]["calls"]
    assert by_trigger[60_000]["none"]["cost"] == by_trigger[30_000]["none"]["cost"]


def test_the_tables_and_the_page_show_the_frontier() -> None:
    report = run_frontier([PI], _at, [30_000, 60_000, 100_000])
    rows = frontier_rows(report)
    assert len(rows) == 4 * 3  # none and three pipelines, three triggers each
    assert [r["trigger"] for r in rows[:3]] == ["30,000", "60,000", "100,000"]
    assert {"pipeline", "trigger", "cost anthropic", "summarizer", "retention"} <= set(rows[0])
    markdown = render_markdown(report)
    assert "## Frontier" in markdown and "| peer-pi | 100,000 |" in markdown
    page = render_html(report)
    assert page.count('class="frontier-chart"') == 2  # one per pricing profile
    chart = frontier_chart(report, "anthropic")
    assert chart.count('<polyline fill="none"') == 4
    for name in ("none", *NAMES):
        assert chart.count(f'data-pipeline="{name}"') == 1 + 3  # its line and three points
    alone = run_bench([PI], _at(30_000), trigger=30_000)
    assert frontier_rows(alone) == [] and frontier_chart(alone, "anthropic") == ""
    assert "## Frontier" not in render_markdown(alone)


def test_the_command_takes_several_triggers(tmp_path: Path) -> None:
    cli = make_cli(lambda: make_registry(entry_points=False))
    out = tmp_path / "r.json"
    result = CliRunner().invoke(
        cli, ["bench", PI, "-s", "default", "--trigger", "30000,60000", "--json", str(out)]
    )
    assert result.exit_code == 0, result.output
    report = json.loads(out.read_text())
    assert report["schema"] == "compactkit.bench/1" and report["trigger"] == 30_000
    assert [f["trigger"] for f in report["frontier"]] == [30_000, 60_000]
    assert "the frontier" in result.output
    for bad in ("30k", "0", "30000,", ""):
        result = CliRunner().invoke(cli, ["bench", PI, "--trigger", bad])
        assert result.exit_code == 2, (bad, result.output)
        assert "positive number of tokens" in result.output
