"""The spec language, one meaning everywhere: `run -s`, `bench -s`, a check's pipeline, `Session`."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

import compactkit
from compactkit.check.config import CheckConfig
from compactkit.check.gate import resolve_pipeline
from compactkit.cli import make_cli
from compactkit.registry import make_registry
from compactkit.spec import PipelineSpec, parse_pipeline, parse_pipelines

from .conftest import sample

REGISTRY = make_registry(entry_points=False, env={})
CLI = make_cli(lambda **kw: make_registry(entry_points=False, env={}, **kw))
SESSION = sample("test-repo-i1")


def run(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(CLI, list(args))
    return result.exit_code, result.stdout, result.stderr


def bench_savings(tmp_path: Path, *specs: str) -> dict[str, float]:
    report = tmp_path / "bench.json"
    args = [x for s in specs for x in ("-s", s)]
    # `--policy always`: a compaction on this short sample never pays for itself, and the
    # expansion of `default` is what is compared here
    argv = ["bench", str(SESSION), *args, "--trigger", "8000", "--policy", "always"]
    code, _, err = run(*argv, "--json", str(report))
    assert code == 0, err
    pipelines = json.loads(report.read_text())["pipelines"]
    return {p["name"]: p["totals"]["savings"] for p in pipelines}


def test_bench_expands_default_inside_a_combination_as_run_does(tmp_path: Path) -> None:
    saved = bench_savings(tmp_path, "default", "etag-collapse+default", "none+default")
    assert saved["default"] > 0
    # etag-collapse twice changes nothing more; `none` adds nothing
    assert saved["etag-collapse + default"] == saved["default"]
    assert saved["none + default"] == saved["default"]


def test_run_expands_default_inside_a_combination(tmp_path: Path) -> None:
    outs = []
    for spec in ("default", "etag-collapse+default"):
        out = tmp_path / f"{len(outs)}.json"
        code, _, err = run("run", str(SESSION), "-s", spec, "--budget", "10800", "-o", str(out))
        assert code == 0, err
        outs.append(compactkit.load_one(out))
    assert outs[0] == outs[1]
    assert compactkit.count_tokens(outs[0]) < compactkit.count_tokens(compactkit.load_one(SESSION))


def test_an_option_value_may_hold_spaces(tmp_path: Path) -> None:
    out = tmp_path / "masked.json"
    spec = "observation-mask:keep_last=1,placeholder=[{tool} output gone]"
    code, _, err = run("run", str(SESSION), "-s", spec, "-o", str(out), "--embed-recovery")
    assert code == 0, err
    assert "output gone]" in out.read_text()


def test_an_empty_pipeline_is_one_usage_error() -> None:
    code, _, err = run("bench", str(SESSION), "-s", " ")
    assert code == 2
    assert "empty pipeline" in err


def test_budget_fills_the_budget_option_as_a_value_not_text() -> None:
    spec = parse_pipeline("observation-mask:keep_last=2+sliding-window", budget=5000)
    assert spec.strategies == ("observation-mask:keep_last=2", "sliding-window")
    steps = spec.steps(REGISTRY)
    assert [(cls.name, opts) for cls, opts in steps] == [
        ("observation-mask", {"keep_last": 2}),
        ("sliding-window", {"max_tokens": 5000}),
    ]
    # a budget the spec sets itself is kept
    own = parse_pipeline("sliding-window:max_tokens=100", budget=5000).steps(REGISTRY)
    assert own[0][1] == {"max_tokens": 100}


def test_default_is_at_the_budget_else_half_the_trigger_else_lossless() -> None:
    defaults = compactkit.default_pipeline
    assert parse_pipeline("default", budget=9000).strategies == tuple(defaults(9000))
    # at a trigger, the default aims at half of it: the target a Session and the gateway use
    assert parse_pipeline("default", trigger=12_000).strategies == tuple(defaults(6_000))
    assert parse_pipeline("default", trigger=None).strategies == tuple(defaults(None))
    assert parse_pipeline("none").strategies == ()


def test_a_check_names_its_pipeline_with_the_budget_written_in() -> None:
    check = CheckConfig(name="c", sessions=["x"], pipeline=["sliding-window"], budget=7000)
    spec = resolve_pipeline(check, REGISTRY)
    assert spec.name == "sliding-window:max_tokens=7000"
    assert spec.strategies == ("sliding-window",) and spec.budget == 7000
    default = resolve_pipeline(CheckConfig(name="d", sessions=["x"]), REGISTRY)
    assert default.strategies == tuple(compactkit.default_pipeline(15_000))


def test_pins_are_carried_through_every_way_in(tmp_path: Path) -> None:
    file = tmp_path / "pipelines.json"
    file.write_text(json.dumps([{"name": "mine", "strategies": ["etag-collapse+default"]}]))
    specs = parse_pipelines(["default", f"@{file}"], pins=["tool=TodoWrite"])
    assert [s.pins for s in specs] == [("tool=TodoWrite",)] * 2
    assert specs[1].strategies == ("etag-collapse", *compactkit.default_pipeline(15_000))


def test_session_takes_a_pipeline_spec_at_its_target() -> None:
    ctx = compactkit.load_one(SESSION)
    spec = PipelineSpec("window", ("sliding-window",))
    session = compactkit.Session(ctx, pipeline=spec, trigger=8000, target=4000)
    result = session.compact()  # now: with no call made yet, the policy would wait
    assert result.tokens_after < result.tokens_before
    assert session.pipeline.label == "sliding-window:max_tokens=4000"


@pytest.mark.parametrize("text", ["sliding-window:max_tokens", ":x=1"])
def test_a_bad_spec_is_a_config_error(text: str) -> None:
    with pytest.raises(compactkit.ConfigError):
        parse_pipeline(text).steps(REGISTRY)


# ----------------------------------------------------------------------------- surprises


def test_a_window_without_a_budget_says_it_has_nothing_to_do(tmp_path: Path) -> None:
    report = tmp_path / "r.json"
    code, stdout, err = run(
        "run", str(SESSION), "-s", "sliding-window", "-o", str(tmp_path / "o.json"),
        "--json", str(report),
    )  # fmt: skip
    assert code == 0, err
    said = "no budget, so nothing to do: give --budget N or sliding-window:max_tokens=N"
    assert said in stdout
    assert json.loads(report.read_text())["steps"][0]["note"] == said
    code, stdout, _ = run("run", str(SESSION), "-s", "sliding-window", "--budget", "10800")
    assert code == 0 and "nothing to do" not in stdout


def test_a_strategy_budget_and_budget_follow_one_rule(tmp_path: Path) -> None:
    """Over `--budget N` or over `sliding-window:max_tokens=N`: the output is written, exit 1."""
    tight = 500  # below the system prompt and task the window always keeps
    outs = {}
    for name, args in {
        "flag": ["-s", "sliding-window", "--budget", str(tight)],
        "option": ["-s", f"sliding-window:max_tokens={tight}"],
    }.items():
        out = tmp_path / f"{name}.json"
        code, _, err = run("run", str(SESSION), *args, "-o", str(out))
        assert code == 1, err
        assert "over budget" in err and f"of {tight:,}" in err
        outs[name] = compactkit.load_one(out)
    assert outs["flag"] == outs["option"]
    roomy = ["-s", "sliding-window:max_tokens=100000", "-o", str(tmp_path / "r.json")]
    assert run("run", str(SESSION), *roomy)[0] == 0


def test_run_says_the_summary_is_the_offline_extractive_one(tmp_path: Path) -> None:
    out = str(tmp_path / "o.json")
    code, stdout, err = run("run", str(SESSION), "--budget", "10800", "-o", out)
    assert code in (0, 1), err
    assert "llm-summary: summaries by the offline extractive backend, no model called" in stdout
    code, stdout, _ = run("run", str(SESSION), "-s", "etag-collapse", "-o", out)
    assert code == 0 and "extractive" not in stdout
