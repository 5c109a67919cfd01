"""`compactkit check` as CI meets it: exit codes, failing lines, the baseline, on real sessions."""

from __future__ import annotations

import json
from pathlib import Path

from compactkit.check import BASELINE_SCHEMA, read_baseline

from .conftest import BASELINE, PYPROJECT, dogfood_section, layout, run

WORSE = 'pipeline = ["llm-summary:summary_max_tokens=4000", "sliding-window"]\nbudget = "30k"'
"""The default pipeline without etag-collapse: the sphinx session's prompts grow by 2.4%."""

SPHINX = "examples/sessions/gemini3pro_sphinx-doc__sphinx-9229.traj.json"


def test_compactkit_passes_its_own_gate_with_the_committed_baseline() -> None:
    code, out, err = run("check", "--config", str(PYPROJECT))
    assert code == 0, out + err
    assert "check default-pipeline: ok" in out
    assert "compactkit check: 1 check passed" in err
    baseline = read_baseline(BASELINE)
    assert baseline is not None and "default-pipeline" in baseline.checks
    assert all(not Path(s).is_absolute() for s in baseline.checks["default-pipeline"].sessions)


def test_the_gate_fails_on_a_worse_pipeline_naming_session_metric_values_delta_limit(
    tmp_path: Path,
) -> None:
    config = dogfood_section().replace('pipeline = "default"', WORSE)
    path = layout(tmp_path, config)
    code, out, err = run("check", "--config", str(path))
    assert code == 1, out + err
    assert (
        f"FAIL: default-pipeline: {SPHINX}: prompt_tokens 2,387,822 vs baseline 2,270,414 "
        "(+117,408 (+5.2%)), limit <= baseline +0"
    ) in " ".join(out.split())
    assert "run `make check-baseline`" in out  # the check's message
    assert "1 of 1 checks failed" in err
    # (the committed pipeline passes against the same baseline: the test above)


def test_update_baseline_writes_atomically_and_says_what_changed(tmp_path: Path) -> None:
    config = (
        '[[tool.compactkit.check]]\nname = "mask"\nsessions = ["' + SPHINX + '"]\n'
        'mode = "oneshot"\npipeline = ["observation-mask:keep_last=5"]\n'
        "max_regression = { tokens = 0, retention = 0 }\n"
    )
    path = layout(tmp_path, config, baseline=False)
    assert run("check", "--config", str(path), "--update-baseline")[0] == 0
    worse = config.replace("keep_last=5", "keep_last=10")
    layout(tmp_path, worse, baseline=False)
    code, out, _ = run("check", "--config", str(path))
    assert code == 1 and f"FAIL: mask: {SPHINX}: tokens 4" in out
    code, out, err = run("check", "--config", str(path), "--update-baseline")
    assert code == 0, err
    assert "baseline updated: compactkit-baseline.json" in out
    assert "mask: pipeline ['observation-mask:keep_last=5'] (oneshot) -> " in out
    assert f"mask: {SPHINX}: tokens " in out  # what changed, per figure
    data = json.loads((tmp_path / "compactkit-baseline.json").read_text())
    assert data["schema"] == BASELINE_SCHEMA
    figures = data["checks"]["mask"]["sessions"][SPHINX]
    assert isinstance(figures["tokens"], int) and isinstance(figures["retention.kept"], int)
    assert list(tmp_path.glob(".compactkit-baseline.json.*")) == []  # no temp file left
    # the new figures are the accepted ones: the gate passes, and a rerun changes nothing
    assert run("check", "--config", str(path))[0] == 0
    code, out, _ = run("check", "--config", str(path), "--update-baseline")
    assert "baseline unchanged" in out


def test_new_baseline_then_no_regression_gating_without_one(tmp_path: Path) -> None:
    config = (
        '[[tool.compactkit.check]]\nname = "small"\n'
        'sessions = "examples/sessions/openhands-sdk_*.json"\nmode = "oneshot"\n'
        "max_regression = { tokens = 0 }\n"
    )
    path = layout(tmp_path, config, baseline=False)
    code, out, _ = run("check", "--config", str(path))
    assert code == 0 and "no baseline for this check" in out
    code, out, _ = run("check", "--config", str(path), "--update-baseline")
    assert code == 0 and "baseline written: compactkit-baseline.json (checks: small)" in out
    baseline = read_baseline(tmp_path / "compactkit-baseline.json")
    assert baseline is not None
    assert sorted(baseline.checks["small"].sessions) == [
        "examples/sessions/openhands-sdk_fncall-llm-message.json",
        "examples/sessions/openhands-sdk_litellm-log_claude-sonnet-4_1757015046.json",
    ]


def test_limits_fail_with_the_limit_and_the_gap_and_informational_checks_never_fail(
    tmp_path: Path,
) -> None:
    config = (
        '[[tool.compactkit.check]]\nname = "tight"\nsessions = ["' + SPHINX + '"]\n'
        'mode = "oneshot"\npipeline = ["observation-mask:keep_last=3"]\nmax_tokens = "20k"\n'
        'min_retention = { overall = "90%" }\n'
    )
    path = layout(tmp_path, config, baseline=False)
    code, out, _ = run("check", "--config", str(path))
    text = " ".join(out.split())
    assert code == 1
    assert f"FAIL: tight: {SPHINX}: tokens 40,558, limit <= 20,000 (past it by 20,558)" in text
    assert "FAIL: tight: (total): retention 59.1%, limit >= 90.0% (past it by 30.9 pt)" in text
    layout(tmp_path, config + "informational = true\n", baseline=False)
    code, out, _ = run("check", "--config", str(path))
    assert code == 0
    assert "warn (informational): tight:" in out


def test_a_session_that_does_not_load_is_exit_2_and_blocks_the_baseline(tmp_path: Path) -> None:
    (tmp_path / "bad").mkdir()
    (tmp_path / "bad" / "notes.json").write_text('{"hello": "world"}')
    config = '[[tool.compactkit.check]]\nname = "c"\nsessions = "bad/*.json"\nmode = "oneshot"\n'
    path = layout(tmp_path, config, baseline=False)
    code, out, _ = run("check", "--config", str(path))
    assert code == 2
    assert "c: bad/notes.json: does not load or run:" in " ".join(out.split())
    code, _, err = run("check", "--config", str(path), "--update-baseline")
    assert code == 2 and "baseline not written" in err
    assert not (tmp_path / "compactkit-baseline.json").exists()


BREAKS = '''
from compactkit import AgentContext, Strategy, StrategyOptions, hookimpl


class Breaks(Strategy):
    """Raises on every session."""

    name = "breaks"
    description = "always raises"
    Options = StrategyOptions

    def compact(self, ctx: AgentContext) -> AgentContext:
        raise RuntimeError("boom")


@hookimpl
def register_strategies(register):
    register(Breaks)
'''


def test_a_strategy_that_fails_is_exit_3(tmp_path: Path) -> None:
    plugins = tmp_path / "plugins"
    plugins.mkdir()
    (plugins / "breaks.py").write_text(BREAKS)
    config = (
        '[[tool.compactkit.check]]\nname = "c"\nmode = "oneshot"\npipeline = ["breaks"]\n'
        'sessions = "examples/sessions/runtime_trajs_basic.json"\n'
    )
    path = layout(tmp_path, config, baseline=False)
    code, out, _ = run("--plugins-dir", str(plugins), "check", "--config", str(path))
    assert code == 3, out
    assert "boom" in out


def test_unknown_strategy_in_a_check_is_exit_2(tmp_path: Path) -> None:
    config = (
        '[[tool.compactkit.check]]\nname = "c"\npipeline = ["sliding-windw"]\n'
        'sessions = "examples/sessions/runtime_trajs_basic.json"\n'
    )
    code, _, err = run("check", "--config", str(layout(tmp_path, config, baseline=False)))
    assert code == 2 and "unknown strategy 'sliding-windw'" in err


def test_a_baseline_of_another_shape_is_exit_2(tmp_path: Path) -> None:
    path = layout(tmp_path, dogfood_section())
    (tmp_path / "compactkit-baseline.json").write_text('{"schema": "compactkit.bench/1"}')
    code, _, err = run("check", "--config", str(path))
    assert code == 2 and "not a check baseline" in err and "--update-baseline" in err
