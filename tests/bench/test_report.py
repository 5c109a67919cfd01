"""Bench reports as readers get them: markdown cells that survive any name, relative paths, chart
titles that are file names, axes from zero, labels that keep clear of each other. (The HTML page in a
real browser: test_report_browser.py.)"""

from __future__ import annotations

import re
import shutil
from itertools import pairwise
from pathlib import Path
from typing import Any

import pytest
from markdown_it import MarkdownIt

from compactkit import run_bench
from compactkit.bench.report import (
    Box,
    chart_titles,
    display_paths,
    nice_ticks,
    place_label,
    render_html,
    render_markdown,
    stroke_widths,
    text_width,
)
from compactkit.spec import PipelineSpec

from ..conftest import ROOT, sample

AWKWARD = "mask | keep `5`\n_last_ *turns*"


@pytest.fixture(scope="module")
def awkward_report(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """A real run whose pipeline name and session file name hold table-breaking characters, and a
    file that does not load."""
    folder = tmp_path_factory.mktemp("sessions")
    shutil.copy(sample("tau_bench"), folder / "air|line `x`.json")
    (folder / "bro|ken.json").write_text('{"not": "a session"}')
    specs = [PipelineSpec(AWKWARD, ("observation-mask:keep_last=5",))]
    return run_bench([str(folder)], specs, trigger=20_000)


def _table_cells(markdown: str) -> list[list[str]]:
    """Every table row of the markdown as a renderer (markdown-it, GitHub's table rules) shows it."""
    tokens = MarkdownIt("commonmark").enable("table").parse(markdown)
    rows: list[list[str]] = []
    in_row = False
    for token in tokens:
        if token.type in ("tr_open", "tr_close"):
            in_row = token.type == "tr_open"
            rows += [[]] if in_row else []
        elif token.type == "inline" and in_row:
            rows[-1].append(_plain(token))
    return rows


def _plain(token: Any) -> str:
    parts = []
    for child in token.children or []:
        if child.type in ("text", "code_inline"):
            parts.append(child.content)
        elif child.type in ("softbreak", "hardbreak") or child.content == "<br>":
            parts.append("\n")
    return "".join(parts)


def test_markdown_cells_keep_pipes_backticks_and_line_breaks(
    awkward_report: dict[str, Any],
) -> None:
    markdown = render_markdown(awkward_report)
    rows = _table_cells(markdown)
    widths = {len(r) for r in rows}
    assert len(widths) == 2, rows  # the summary and the per-session table, every row whole
    pipelines = [r[0] for r in rows if r and r[0] in {"none", AWKWARD}]
    assert pipelines == ["none", AWKWARD]  # the name reads back exactly, line break included
    folder = Path(awkward_report["sessions"][0]["session"]).parent.name
    per_session = [r for r in rows if r and r[0].startswith(f"{folder}/air|line `x`.json#")]
    assert len(per_session) == 2 * 3  # two pipelines on the file's three conversations
    assert {r[1] for r in per_session} == {"none", AWKWARD}
    failed = MarkdownIt("commonmark").render(markdown.split("## Not loaded")[1])
    assert f"<code>{folder}/bro|ken.json</code>: unknown session format" in failed


def test_markdown_and_html_show_paths_relative(
    awkward_report: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(ROOT)
    report = run_bench([str(sample("sphinx-doc").resolve())], [], trigger=20_000)
    markdown = render_markdown(report)
    assert "| `examples/sessions/gemini3pro_sphinx-doc__sphinx-9229.traj.json` | none |" in markdown
    assert str(ROOT) not in markdown and str(ROOT) not in render_html(report)
    # sessions outside the working directory: shown from the folder that holds them
    folder = Path(awkward_report["sessions"][0]["session"]).parent
    for text in (render_markdown(awkward_report), render_html(awkward_report)):
        assert str(folder.parent) not in text
    assert f"``{folder.name}/air\\|line `x`.json#0``" in render_markdown(awkward_report)


def test_display_paths_are_relative_to_the_base_else_to_the_sessions_folder() -> None:
    shown = display_paths(
        [
            "/work/main/examples/a.json",
            "/data/corpus/x/b.jsonl#2",
            "/data/corpus/y/c.json",
            "relative/d.traj",
        ],
        base="/work/main",
    )
    assert shown == {
        "/work/main/examples/a.json": "examples/a.json",
        "/data/corpus/x/b.jsonl#2": "corpus/x/b.jsonl#2",
        "/data/corpus/y/c.json": "corpus/y/c.json",
        "relative/d.traj": "relative/d.traj",
    }


def test_chart_titles_are_file_names_unless_two_files_share_one() -> None:
    addresses = ["/a/x/s.json", "/a/y/s.json", "/a/x/t.jsonl#3"]
    shown = display_paths(addresses, base="/a")
    assert chart_titles(addresses, shown) == {
        "/a/x/s.json": "x/s.json",
        "/a/y/s.json": "y/s.json",
        "/a/x/t.jsonl#3": "t.jsonl#3",
    }


def test_html_charts_have_file_name_titles_and_zero_ticks(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(ROOT)
    report = run_bench(
        [str(sample("pi-mono").resolve())],
        [PipelineSpec("observation-mask", ("observation-mask",))],
        trigger=30_000,
    )
    page = render_html(report)
    assert "<script" not in page and "http://" not in page.replace(
        'xmlns="http://www.w3.org/2000/svg"', ""
    )
    titles = re.findall(r'class="chart-title"[^>]*>([^<]*)<', page)
    assert "pi-mono_before-compaction.head150.jsonl" in titles
    for svg in re.findall(r"<svg xmlns.*?</svg>", page, re.S):
        for axis in ("x-tick", "y-tick"):
            ticks = re.findall(rf'class="tick {axis}"[^>]*>([^<]*)<', svg)
            assert len(ticks) >= 3 and ticks[0] in {"0", "0%"}, (axis, ticks)


@pytest.mark.parametrize(
    ("low", "high", "integer"), [(0, 7, True), (0, 93_512, False), (-0.12, 1.0, False)]
)
def test_ticks_are_round_cover_the_range_and_include_zero(
    low: float, high: float, integer: bool
) -> None:
    ticks = nice_ticks(low, high, 5, integer=integer)
    assert ticks[0] <= low and ticks[-1] >= high and 0 in ticks
    assert len(ticks) <= 7
    if integer:
        assert all(t == int(t) for t in ticks)


def test_labels_of_crowded_points_do_not_cover_each_other() -> None:
    area = Box(60, 40, 500, 250)
    points = [(200 + i, 150 + i) for i in range(0, 30, 5)]
    taken: list[Box] = [Box(x - 7, y - 7, 14, 14) for x, y in points]
    placed = [
        place_label(x, y, text_width(f"pipeline-{x}:keep_last={y}", 11), 14, 5, taken, area)
        for x, y in points
    ]
    for k, box in enumerate(placed):
        assert box.within(area)
        assert not any(box.overlap(other) for other in taken if other is not box), k


def test_lines_drawn_later_are_narrower() -> None:
    for count in range(1, 9):
        widths = stroke_widths(count)
        assert widths[-1] == 1.5 and all(a > b for a, b in pairwise(widths))
