"""Reports where people read them: markdown that fits a PR comment whatever the corpus size,
JUnit XML any CI shows natively, versioned JSON, `-` for stdout."""

from __future__ import annotations

import copy
import json
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from compactkit.check import CHECK_SCHEMA, load_config, run_checks
from compactkit.check.gate import CheckRun, judge
from compactkit.check.report import COMMENT_MARKER, MARKDOWN_LIMIT, render_junit, render_markdown
from compactkit.registry import make_registry

from .conftest import layout, run

CONFIG = """[[tool.compactkit.check]]
name = "mask|pipe"
sessions = ["examples/sessions/tau_bench_gpt-4o-airline.first3.json", "examples/sessions/*.traj"]
mode = "oneshot"
pipeline = ["observation-mask:keep_last=1"]
max_tokens = "4k"
min_retention = { overall = "95%" }

[[tool.compactkit.check]]
name = "window"
sessions = "examples/sessions/runtime_trajs_basic.json"
mode = "oneshot"
pipeline = ["sliding-window:max_tokens=2000"]
"""


@pytest.fixture(scope="module")
def check_run(tmp_path_factory: pytest.TempPathFactory) -> CheckRun:
    path = layout(tmp_path_factory.mktemp("repo"), CONFIG, baseline=False)
    return run_checks(load_config(path), registry=make_registry(entry_points=False))


def test_junit_has_one_case_per_check_and_session_with_native_failures(check_run: CheckRun) -> None:
    root = ET.fromstring(render_junit(check_run))
    suites = {s.get("name"): s for s in root.iter("testsuite")}
    assert set(suites) == {"mask|pipe", "window"}
    cases = {c.get("name"): c for c in suites["mask|pipe"].iter("testcase")}
    assert set(cases) == {
        "examples/sessions/tau_bench_gpt-4o-airline.first3.json#0",
        "examples/sessions/tau_bench_gpt-4o-airline.first3.json#1",
        "examples/sessions/tau_bench_gpt-4o-airline.first3.json#2",
        "examples/sessions/testdata_gpt4_test-repo-i1.traj",
        "(total)",
    }
    failure = cases["examples/sessions/testdata_gpt4_test-repo-i1.traj"].find("failure")
    assert failure is not None and "limit <= 4,000" in (failure.text or "")
    assert cases["examples/sessions/tau_bench_gpt-4o-airline.first3.json#1"].find("failure") is None
    assert int(root.get("failures") or 0) >= 1
    assert suites["window"].get("failures") == "0"


def test_markdown_summary_first_failures_next_cells_escaped(check_run: CheckRun) -> None:
    text = render_markdown(check_run)
    assert text.startswith(COMMENT_MARKER + "\n## compactkit check failed")
    summary, failures, details = (
        text.index("| check | result"),
        text.index("### Failures"),
        text.index("<details>"),
    )
    assert summary < failures < details
    assert "| mask\\|pipe | **FAIL** |" in text  # a pipe in a name cannot break the table
    assert "`examples/sessions/testdata_gpt4_test-repo-i1.traj`" in text  # relative paths
    assert "/tmp" not in text and str(Path.cwd()) not in text
    # both checks are oneshot: the column holds the compacted context's tokens, named so
    assert "| check | result | sessions | failing | tokens after | savings |" in text


def test_markdown_names_prompt_tokens_as_prompt_tokens(check_run: CheckRun) -> None:
    replay = copy.deepcopy(check_run)
    replay.checks[0].config = replay.checks[0].config.model_copy(update={"mode": "replay"})
    text = render_markdown(replay)
    assert "| failing | tokens | savings |" in text  # one oneshot check, one replay check
    assert " (prompt tokens) |" in text and " (tokens after) |" in text
    for check in replay.checks:
        check.config = check.config.model_copy(update={"mode": "replay"})
    assert "| failing | prompt tokens | savings |" in render_markdown(replay)


def test_markdown_fits_a_pr_comment_whatever_the_corpus_size(check_run: CheckRun) -> None:
    big = copy.copy(check_run)
    first = copy.deepcopy(check_run.checks[0])
    sessions = dict(first.sessions)
    for n in range(3_000):  # 3,000 sessions, each over its limit
        for name, figures in sessions.items():
            first.sessions[f"{name}.copy{n}|x"] = dict(figures)
    judge(first)
    big.checks = [first, *check_run.checks[1:]]
    text = render_markdown(big)
    assert len(text) < MARKDOWN_LIMIT
    assert "more failures not shown (see the JSON report)" in text
    assert "more rows not shown" in text
    assert text.index("| check | result") < text.index("### Failures")  # the summary survives


SMALL = """[[tool.compactkit.check]]
name = "mask|pipe"
sessions = "examples/sessions/runtime_trajs_basic.json"
mode = "oneshot"
max_tokens = "1k"
"""


def test_json_and_markdown_and_junit_to_files_or_stdout(tmp_path: Path) -> None:
    path = layout(tmp_path, SMALL, baseline=False)
    code, out, err = run("check", "--config", str(path), "--json", "-")
    report = json.loads(out)  # stdout holds only the report; the table went to stderr
    assert code == 1 and report["schema"] == CHECK_SCHEMA and report["exit_code"] == 1
    assert report["config"] == "pyproject.toml"
    assert "check mask|pipe: FAIL" in err
    mask = report["checks"][0]
    assert mask["failures"] and all(line.startswith("mask|pipe: ") for line in mask["failures"])
    assert all(not Path(s).is_absolute() for s in mask["sessions"])
    code, out, _ = run(
        "check", "--config", str(path), "--markdown", "-", "--junit", str(tmp_path / "j.xml")
    )
    assert out.startswith(COMMENT_MARKER) and ET.parse(tmp_path / "j.xml").getroot() is not None
    code, _, err = run("check", "--config", str(path), "--markdown", "-", "--json", "-")
    assert code == 2 and "both go to stdout" in err
