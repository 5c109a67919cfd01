"""The measured figures of README.md and docs/ are the ones `make figures` wrote to
docs/figures.json, so a doc cannot say what the commands no longer measure.

A number a command measures is written with a marker naming its figure right after it
(`43.2%<!-- fig:frontier.30000.default.cost_vs_none_anthropic -->`), or inside a table that
`make figures` generates whole between `<!-- figures:NAME -->` and `<!-- /figures -->`
(`benchmarks/figures.py`). These tests read the JSON and the pages only; they run no bench:

* every marked number is its figure at the precision and in the unit it is written in;
* every generated table is what the JSON gives;
* in the sections that report measurements (`MEASURED`), no share (`12.3%`), ratio (`0.98x`) or
  dollar amount stands without a marker;
* docs/figures.json was written by the runs `benchmarks/figures.py` defines today.

Left unmarked, on purpose:
* timings (seconds, ms per call, sessions per second, and the ratios of one timing to another,
  such as `Session` against `trim_messages` or a call against a cold count): they move with the
  machine and its load, so a committed value would be stale on the next machine; the
  pytest-benchmark ratios under benchmarks/ measure them, against targets;
* settings and constants the text explains (a 30,000-token trigger; in a measured section a
  share that is a setting or a target is marked `<!-- set -->`, as Anthropic's 1.25x write price);
* the measurements of pages outside `MEASURED`, which `make figures` does not run: the scripted
  framework sessions of docs/agent-loop.md (they read this repository's own modules, so any
  edit of those moves them) and the peak-memory ratios of docs/cli.md (they depend on the
  allocator and the Python build; the big-session benchmark measures them against its bound).
"""

from __future__ import annotations

import json
import re

import pytest

from benchmarks.figures import (
    DOCS,
    FIGURES,
    MARKED,
    TABLE,
    TABLES,
    FigureError,
    commands,
    lookup,
    rewrite,
    show,
)

from .conftest import ROOT

RERUN = "run `make figures` (or `python -m benchmarks.figures --docs-only` after editing a marker)"

MEASURED = {
    "README.md": ["Quick start", "What it measures on real sessions"],
    "docs/bench.md": [
        "The peers on the corpus",
        "The frontier, like for like",
        "The corpus, measured",
        "What the figures say",
        "When a compaction pays: the policy",
    ],
    "docs/strategies.md": ["Pins"],
    "docs/serve.md": ["Measured savings"],
    "docs/gateway.md": ["Measured: the bench predicts production"],
    **{
        f"docs/strategies/{name}.md": ["Measured savings"]
        for name in ("etag-collapse", "llm-summary", "observation-mask", "static-elision")
    },
    "docs/arrival.md": ["Measured", "Against headroom"],
}
"""The sections whose every share, ratio and dollar figure must be a marked figure."""

UNMARKED = re.compile(r"\$\d[\d,]*(?:\.\d+)?|\d[\d,]*(?:\.\d+)?(?:%|x\b)")
NOTED = ("<!-- fig:", "<!-- set -->")
"""What may follow a share in a measured section: its figure, or `<!-- set -->` for a setting or
a target the text names (`0.85x<!-- set --> the default`), which no command measures."""
FENCED = re.compile(r"^```.*?^```", re.S | re.M)
CODE = re.compile(r"```.*?```|`[^`\n]*`", re.S)


@pytest.fixture(scope="module")
def figures() -> dict:
    return json.loads(FIGURES.read_text(encoding="utf-8"))


def _line(text: str, at: int) -> int:
    return text.count("\n", 0, at) + 1


def stale_numbers(text: str, figures: dict) -> list[str]:
    """Each marked number of `text` that is not its figure, as `line N: ...`."""
    problems = []
    for m in MARKED.finditer(text):
        try:
            shown = show(lookup(figures, m["key"]), m["number"])
        except FigureError as error:
            problems.append(f"line {_line(text, m.start())}: {error.args[0]}")
            continue
        if shown != m["number"]:
            problems.append(
                f"line {_line(text, m.start())}: {m['number']} but {m['key']} is {shown}"
            )
    return problems


def stale_tables(text: str, figures: dict) -> list[str]:
    """Each generated table of `text` that differs from what the JSON gives."""
    problems = []
    for m in TABLE.finditer(text):
        if m["name"] not in TABLES:
            problems.append(f"line {_line(text, m.start())}: no table {m['name']!r} in TABLES")
        elif rewrite(m[0], figures) != m[0]:
            problems.append(f"line {_line(text, m.start())}: table {m['name']!r} is stale")
    return problems


def sections(text: str, titles: list[str]) -> dict[str, str]:
    """The text under each heading of `titles`, up to the next heading (a `#` comment in a code
    block is no heading)."""
    found = {}
    parts = re.split(r"^(#+ .*)$", FENCED.sub("", text), flags=re.M)
    for heading, body in zip(parts[1::2], parts[2::2], strict=True):
        title = heading.lstrip("#").strip()
        if title in titles:
            found[title] = body
    return found


def unmarked(body: str) -> list[str]:
    """The shares, ratios and dollar figures of `body` that have no marker: outside generated
    tables and code, followed by neither `<!-- fig:KEY -->` nor `<!-- set -->`."""
    body = TABLE.sub("", body)
    body = CODE.sub(lambda m: " " * len(m[0]), body)
    return [m[0] for m in UNMARKED.finditer(body) if not body.startswith(NOTED, m.end())]


@pytest.mark.parametrize("page", DOCS, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_marked_number_is_its_figure(page, figures) -> None:
    text = page.read_text(encoding="utf-8")
    problems = stale_numbers(text, figures) + stale_tables(text, figures)
    assert problems == [], f"{page.relative_to(ROOT)} is stale: {RERUN}\n" + "\n".join(problems)


@pytest.mark.parametrize("name", sorted(MEASURED))
def test_every_measured_share_has_a_figure(name) -> None:
    text = (ROOT / name).read_text(encoding="utf-8")
    found = sections(text, MEASURED[name])
    assert sorted(found) == sorted(MEASURED[name]), "a measured section was renamed"
    problems = [f"{title}: {figure}" for title, body in found.items() for figure in unmarked(body)]
    assert problems == [], (
        f"{name}: figures with no <!-- fig:KEY --> marker (add the figure to "
        "benchmarks/figures.py and mark it):\n" + "\n".join(problems)
    )


def test_the_json_holds_every_run_of_the_figures_command(figures) -> None:
    """The JSON was written by the runs `benchmarks/figures.py` defines now (a run added or
    changed there without `make figures` fails here), and every generated table is used."""
    assert figures["commands"] == commands(), f"docs/figures.json is older than RUNS: {RERUN}"
    used = {m["name"] for page in DOCS for m in TABLE.finditer(page.read_text(encoding="utf-8"))}
    assert used == set(TABLES)


def test_a_number_edited_by_hand_or_a_new_figure_is_caught(figures) -> None:
    """The checks fail where they should: a marked number changed by hand, a marker naming no
    figure, a table row edited, and a share written with no marker in a measured section."""
    page = (ROOT / "README.md").read_text(encoding="utf-8")
    marked = next(MARKED.finditer(page))
    edited = page.replace(marked[0], marked[0].replace(marked["number"], "1.5%"), 1)
    assert len(stale_numbers(edited, figures)) == 1
    assert "no such figure" in stale_numbers("12%<!-- fig:frontier.1.none.saved -->", figures)[0]
    bench = (ROOT / "docs" / "bench.md").read_text(encoding="utf-8")
    table = next(TABLE.finditer(bench))
    assert stale_tables(table[0].replace("| `", "| `x", 1), figures)
    assert unmarked("saves 42.0% and costs 0.91x, $3.20; 43.2%<!-- fig:k --> is marked") == [
        "42.0%",
        "0.91x",
        "$3.20",
    ]


def test_figures_are_shown_at_the_precision_written() -> None:
    assert show(0.432149, "99.9%") == "43.2%"
    assert show(0.99951, "100.00%") == "99.95%"
    assert show(0.980123, "1.000x") == "0.980x"
    assert show(26.5449, "$1.00") == "$26.54"
    assert show(29987769, "1") == "29,987,769"
    with pytest.raises(FigureError, match="reword"):
        show(-0.3, "0.1")  # a comparison that turned around: the sentence must change
