"""The bench HTML report as a reader sees it: rendered by Debian's chromium, headless.

The test runs wherever a chromium is on PATH and is skipped, with the reason, where none is; it never
installs one. `.ci/run` installs Debian's chromium first and sets COMPACTKIT_REQUIRE_BROWSER, so in CI
a missing browser fails the test instead. A script injected
into a copy of the page measures what the browser laid out (tick labels, titles, text boxes, which
lines and points are on top somewhere) and writes it into the DOM, read back with `--dump-dom`. The
page's screenshot is kept as a CI artifact in `out/artifacts/bench-report.png` (beside the page,
`bench-report.html`).
"""

from __future__ import annotations

import html
import json
import os
import re
import shutil
import struct
import subprocess
import tempfile
from pathlib import Path, PurePath
from typing import Any

import pytest

from compactkit import default_pipeline, parse_pipeline
from compactkit.bench.report import render_html
from compactkit.bench.runner import run_frontier

from ..conftest import ROOT, SAMPLES

ARTIFACTS = ROOT / "out" / "artifacts"
PIPELINES = [
    "default",
    "observation-mask",
    "sliding-window:max_tokens=30000",
    "observation-mask:keep_last=5",
    "observation-mask:keep_last=4",  # near neighbours: their labels must make room
    "observation-mask:keep_last=10",  # the default spelled out: the very point of observation-mask
]
TRIGGERS = [30_000, 60_000, 100_000]
"""A frontier: the first trigger's report, each pipeline's cost-retention curve over all three."""
CHROMIUM_FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--hide-scrollbars",
]

# Runs in the page after layout; the result lands in <pre id="measured"> for --dump-dom.
MEASURE = r"""
<script>
(() => {
  // folded charts and the per-session table are measured as a reader who opens them sees them
  document.querySelectorAll("details").forEach((d) => { d.open = true; });
  const overlap = (a, b) => {
    const dx = Math.min(a.x + a.w, b.x + b.w) - Math.max(a.x, b.x);
    const dy = Math.min(a.y + a.h, b.y + b.h) - Math.max(a.y, b.y);
    return dx > 0.5 && dy > 0.5;
  };
  // is `el` the topmost element anywhere within `reach` of one of its points (16 directions)?
  const onTop = (svg, el, points, reach) => {
    const m = svg.getScreenCTM();
    for (const [x, y] of points) {
      for (let d = 0; d <= reach; d += 0.5) {
        for (let a = 0; a < 16; a++) {
          const angle = a * Math.PI / 8;
          const p = new DOMPoint(x + d * Math.cos(angle), y + d * Math.sin(angle)).matrixTransform(m);
          if (document.elementFromPoint(p.x, p.y) === el) return true;
        }
      }
    }
    return false;
  };
  const charts = [];
  for (const svg of document.querySelectorAll('svg[role="img"]')) {
    svg.scrollIntoView({block: "center"});
    const f = svg.getBoundingClientRect();
    const frame = {x: f.left, y: f.top, w: f.width, h: f.height};
    const texts = [...svg.querySelectorAll("text")].map((t) => {
      const r = t.getBoundingClientRect();
      return {cls: t.getAttribute("class"), text: t.textContent,
              x: r.left, y: r.top, w: r.width, h: r.height};
    });
    const overlaps = [];
    texts.forEach((a, i) => texts.slice(i + 1).forEach((b) => {
      if (overlap(a, b)) overlaps.push([a.text, b.text]);
    }));
    const outside = texts.filter((t) => t.x < frame.x - 0.5 || t.y < frame.y - 0.5
      || t.x + t.w > frame.x + frame.w + 0.5 || t.y + t.h > frame.y + frame.h + 0.5)
      .map((t) => t.text);
    const marks = [...svg.querySelectorAll("polyline, circle")].map((el) => {
      let points, reach;
      if (el.tagName === "polyline") {
        points = el.getAttribute("points").trim().split(/\s+/).map((p) => p.split(",").map(Number));
        reach = Number(el.getAttribute("stroke-width")) / 2;
      } else {
        points = [[Number(el.getAttribute("cx")), Number(el.getAttribute("cy"))]];
        reach = Number(el.getAttribute("r")) + Number(el.getAttribute("stroke-width") || 0) / 2;
      }
      return {kind: el.tagName, pipeline: el.dataset.pipeline, on_top: onTop(svg, el, points, reach)};
    });
    charts.push({kind: svg.getAttribute("class"), label: svg.getAttribute("aria-label"),
                 folded: svg.closest("details.more-charts") !== null,
                 texts, overlaps, outside, marks});
  }
  const root = document.documentElement;
  const out = document.createElement("pre");
  out.id = "measured";
  out.textContent = JSON.stringify({charts, text: document.body.innerText,
    width: root.scrollWidth, height: root.scrollHeight, viewport: window.innerWidth});
  document.body.appendChild(out);
})();
</script>
"""


OPEN_CHARTS = 2
"""Session charts drawn open (the CLI: 12); the rest of the sessions over the trigger are folded."""
TRIGGER = 30_000

REQUIRE_BROWSER = "COMPACTKIT_REQUIRE_BROWSER"
"""Set (as `.ci/run` does, after installing chromium) to fail instead of skip without a browser."""


@pytest.fixture(scope="module")
def chromium() -> str:
    """A headless chromium on PATH. The suite never installs one (that would change the system
    unasked): `.ci/run` installs Debian's `chromium` first and sets COMPACTKIT_REQUIRE_BROWSER, so
    CI always runs this; elsewhere it runs where a browser is present and is skipped, with the
    reason, where none is."""
    for name in ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable"):
        found = shutil.which(name)
        if found:
            return found
    if os.environ.get(REQUIRE_BROWSER):
        pytest.fail(f"no chromium on PATH, and {REQUIRE_BROWSER} is set (CI installs it first)")
    pytest.skip("no chromium on PATH (apt-get install chromium, or run .ci/run, to run this)")


def _browse(chromium: str, page: Path, *args: str) -> subprocess.CompletedProcess[str]:
    with tempfile.TemporaryDirectory() as profile:
        done = subprocess.run(
            [chromium, *CHROMIUM_FLAGS, f"--user-data-dir={profile}", *args, page.as_uri()],
            capture_output=True,
            text=True,
            timeout=60,
        )
    assert done.returncode == 0, done.stderr[-2000:]
    return done


@pytest.fixture(scope="module")
def rendered(chromium: str, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """The real bench on the bundled sessions (given as absolute paths), its page measured in the
    browser and screenshot whole."""
    report = run_frontier(
        [str(SAMPLES.resolve())],
        lambda t: [parse_pipeline(p, default_pipeline(t)) for p in PIPELINES],
        TRIGGERS,
    )
    # the CLI's base is the working directory; OPEN_CHARTS so that the bundled sessions fold some
    page = render_html(report, max_charts=OPEN_CHARTS, base=ROOT)
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    (ARTIFACTS / "bench-report.html").write_text(page, encoding="utf-8")
    probe = tmp_path_factory.mktemp("browser") / "measure.html"
    probe.write_text(page.replace("</body>", MEASURE + "</body>"), encoding="utf-8")
    dom = _browse(chromium, probe, "--window-size=1280,2000", "--dump-dom").stdout
    found = re.search(r'<pre id="measured">(.*?)</pre>', dom, re.S)
    assert found, "the measuring script did not run:\n" + dom[-2000:]
    measured: dict[str, Any] = json.loads(html.unescape(found[1]))
    shot = ARTIFACTS / "bench-report.png"
    shot.unlink(missing_ok=True)
    size = f"--window-size=1280,{measured['height']}"
    _browse(chromium, ARTIFACTS / "bench-report.html", size, f"--screenshot={shot}")
    return {"report": report, "page": page, "measured": measured, "screenshot": shot}


def _charts(rendered: dict[str, Any], kind: str) -> list[dict[str, Any]]:
    charts = [c for c in rendered["measured"]["charts"] if c["kind"] == kind]
    assert charts, f"no {kind} drawn"
    return charts


def _texts(chart: dict[str, Any], cls: str) -> list[str]:
    return [t["text"] for t in chart["texts"] if cls in (t["cls"] or "").split()]


def test_every_axis_has_ticks_starting_at_zero(rendered: dict[str, Any]) -> None:
    for kind, zero in (("session-chart", "0"), ("savings-chart", "0%")):
        for chart in _charts(rendered, kind):
            for axis in ("x-tick", "y-tick"):
                ticks = _texts(chart, axis)
                assert len(ticks) >= 3 and zero in ticks, (chart["label"], axis, ticks)
            assert len(_texts(chart, "axis-title")) == 2, chart["label"]
    # the frontier: cost from 0; retention from just below its lowest point up to 100%
    for chart in _charts(rendered, "frontier-chart"):
        assert "0%" in _texts(chart, "y-tick"), chart["label"]
        x_ticks = _texts(chart, "x-tick")
        assert len(x_ticks) >= 3 and x_ticks[-1] == "100%", x_ticks
        assert len(_texts(chart, "axis-title")) == 2, chart["label"]


def _over_trigger(report: dict[str, Any]) -> list[str]:
    """File names (with `#N`) of the sessions whose prompt went over the trigger in some pipeline."""
    names = []
    for s in report["sessions"]:
        path, _, index = s["session"].partition("#")
        name = PurePath(path).name + (f"#{index}" if index else "")
        if max((c[1] for c in s["calls"]), default=0) > TRIGGER and name not in names:
            names.append(name)
    return names


def test_every_session_over_the_trigger_is_charted_past_the_first_folded(
    rendered: dict[str, Any],
) -> None:
    over = _over_trigger(rendered["report"])
    assert len(over) > OPEN_CHARTS  # the bundled sessions do fold some
    charts = _charts(rendered, "session-chart")
    titles = [_texts(c, "chart-title")[0] for c in charts]
    assert sorted(titles) == sorted(over)
    assert [c["folded"] for c in charts] == [k >= OPEN_CHARTS for k in range(len(over))]
    assert titles[0] == "gemini3pro_sphinx-doc__sphinx-9229.traj.json"  # the largest first
    assert "resolver_mock_output.jsonl#1" not in titles  # 21,136 tokens: never over the trigger
    sessions = {s["session"] for s in rendered["report"]["sessions"]}
    text = rendered["measured"]["text"]
    assert f"{len(sessions) - len(over)} sessions never over the trigger (30,000 tokens)" in text
    assert f"{len(over) - OPEN_CHARTS} more session" in text
    absolute = str(SAMPLES.resolve().parent)
    assert absolute not in text and absolute not in rendered["page"]


def _session_table(rendered: dict[str, Any]) -> list[dict[str, str]]:
    """The per-session table as the browser shows it (its text, a tab between cells)."""
    lines = rendered["measured"]["text"].splitlines()
    head = next(k for k, line in enumerate(lines) if line.startswith("session\tpipeline\t"))
    columns = lines[head].split("\t")
    rows = []
    for line in lines[head + 1 :]:
        cells = line.split("\t")
        if len(cells) != len(columns):
            break
        rows.append(dict(zip(columns, cells, strict=True)))
    return rows


def test_the_per_session_table_shows_what_each_saved_by_share_of_cost(
    rendered: dict[str, Any],
) -> None:
    rows = _session_table(rendered)
    report = rendered["report"]
    assert len(rows) == len(report["sessions"])
    assert "Per session" in rendered["measured"]["text"]
    assert "paths under examples/sessions/" in rendered["measured"]["text"]
    # paths from the folder every session shares, the file name and #N
    assert "tau_bench_gpt-4o-airline.first3.json#2" in {r["session"] for r in rows}
    # sessions by the share of the cost they take (of none, under the first profile), largest first
    shares = [float(r["cost share"].rstrip("%")) for r in rows if r["pipeline"] == "none"]
    assert shares == sorted(shares, reverse=True) and shares[0] > shares[-1]
    none = {r["session"]: r for r in rows if r["pipeline"] == "none"}
    for row in rows:
        assert row["saved"].endswith("%"), row
        tokens = int(row["prompt tokens"].replace(",", ""))
        base = int(none[row["session"]]["prompt tokens"].replace(",", ""))
        assert row["saved"] == f"{1 - tokens / base:.1%}", row
    assert any(r["saved"] != "0.0%" for r in rows)


def test_no_label_covers_another_or_leaves_its_chart(rendered: dict[str, Any]) -> None:
    for chart in rendered["measured"]["charts"]:
        assert not chart["overlaps"], (chart["label"], chart["overlaps"])
        assert not chart["outside"], (chart["label"], chart["outside"])
    for chart in _charts(rendered, "savings-chart"):
        labels = _texts(chart, "point-label")
        assert sorted(labels) == sorted(p["name"] for p in rendered["report"]["pipelines"])


def test_every_line_and_point_shows_somewhere(rendered: dict[str, Any]) -> None:
    """Lines that coincide (a pipeline that never compacts a session draws the line of `none`) are
    stacked narrowest on top, so each is still the topmost element along its edges."""
    pipelines = [p["name"] for p in rendered["report"]["pipelines"]]
    for kind, mark in (("session-chart", "polyline"), ("savings-chart", "circle")):
        for chart in _charts(rendered, kind):
            marks = [m for m in chart["marks"] if m["kind"] == mark]
            assert sorted(m["pipeline"] for m in marks) == sorted(pipelines), chart["label"]
            hidden = [m["pipeline"] for m in marks if not m["on_top"]]
            assert not hidden, (chart["label"], hidden)


def test_each_pipeline_draws_its_cost_retention_curve(rendered: dict[str, Any]) -> None:
    """One frontier chart per pricing profile: every pipeline a line through one point per
    trigger, named once (at its highest trigger), and showing on top somewhere (a line of points
    that coincide, such as `none`'s, shows by its points' rings)."""
    report = rendered["report"]
    pipelines = sorted(p["name"] for p in report["pipelines"])
    assert [f["trigger"] for f in report["frontier"]] == TRIGGERS
    charts = _charts(rendered, "frontier-chart")
    assert len(charts) == len(report["pricing"])
    for chart in charts:
        lines = [m for m in chart["marks"] if m["kind"] == "polyline"]
        points = [m for m in chart["marks"] if m["kind"] == "circle"]
        assert sorted(m["pipeline"] for m in lines) == pipelines
        assert sorted(m["pipeline"] for m in points) == sorted(pipelines * len(TRIGGERS))
        assert sorted(_texts(chart, "point-label")) == pipelines
        shown = {m["pipeline"] for m in chart["marks"] if m["on_top"]}
        assert shown == set(pipelines), (chart["label"], set(pipelines) - shown)
    assert "Frontier" in rendered["measured"]["text"]


def test_page_fits_the_window_and_the_screenshot_is_kept(rendered: dict[str, Any]) -> None:
    measured = rendered["measured"]
    assert measured["width"] <= measured["viewport"], "the page scrolls sideways"
    shot: Path = rendered["screenshot"]
    data = shot.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    width, height = struct.unpack(">II", data[16:24])
    assert (width, height) == (1280, measured["height"])
    assert len(data) > 50_000  # charts and tables, not a blank page
