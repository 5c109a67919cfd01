"""Exit codes CI can trust: a failed bench or check row is never exit 0, a plugin's failure is
exit 3 whatever it raises (an error with `exit_code = 0`, a bad-input error, `os._exit(0)` in a
strategy or at import), and a run that wrote nothing never exits 0. Hostile plugins live in a
`--plugins-dir`; `os._exit` cases run the real program in a child process, since the call would
end the test process itself."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from compactkit import AgentContext, CompactkitError, Pipeline, StrategyError, load_one
from compactkit.cli import make_cli
from compactkit.registry import make_registry

from ..conftest import sample

CLI = make_cli(lambda **kw: make_registry(entry_points=False, **kw))

HOSTILE = '''
"""Strategies that fail in ways that used to pick the exit code."""
import os

from compactkit import BadInputError, CompactkitError, Strategy, hookimpl


class BadInput(Strategy):
    name = "bad-input"
    description = "raises a bad-input error"

    def compact(self, ctx):
        raise BadInputError("the plugin says the input is bad")


class ExitZero(Strategy):
    name = "exit-zero"
    description = "raises an error whose exit code is 0"

    def compact(self, ctx):
        error = CompactkitError("all is well, says the plugin")
        error.exit_code = 0
        raise error


class OsExit(Strategy):
    name = "os-exit"
    description = "ends the process with os._exit(0)"

    def compact(self, ctx):
        os._exit(0)


@hookimpl
def register_strategies(register):
    register(BadInput)
    register(ExitZero)
    register(OsExit)
'''

EXITS_AT_IMPORT = '''
"""A plugin that ends the process, status 0, while it is imported."""
import os

os._exit(0)
'''


@pytest.fixture
def work(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    (tmp_path / "plugins").mkdir()
    (tmp_path / "plugins" / "hostile.py").write_text(HOSTILE)
    (tmp_path / "exits").mkdir()
    (tmp_path / "exits" / "exits_at_import.py").write_text(EXITS_AT_IMPORT)
    shutil.copyfile(sample("runtime_trajs_basic"), tmp_path / "B.json")
    shutil.copyfile(sample("sphinx-doc"), tmp_path / "S.json")
    monkeypatch.chdir(tmp_path)
    return tmp_path


def cli(*args: str, env: dict[str, str] | None = None) -> tuple[int, str, str]:
    result = CliRunner().invoke(CLI, list(args), env=env)
    return result.exit_code, result.stdout, result.stderr


def program(work: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """The real `compactkit` in its own process (entry-point plugins off)."""
    env = {**os.environ, "COMPACTKIT_LOAD_PLUGINS": ""}
    return subprocess.run(
        [sys.executable, "-m", "compactkit", *args],
        capture_output=True,
        text=True,
        cwd=work,
        env=env,
        timeout=300,
    )


@pytest.mark.parametrize("strategy", ["bad-input", "exit-zero"])
@pytest.mark.parametrize("command", ["run", "bench"])
def test_a_plugin_error_is_exit_3_whatever_it_raises(
    work: Path, command: str, strategy: str
) -> None:
    args = ["-o", "out.json"] if command == "run" else ["--mode", "oneshot"]
    code, _, err = cli("--plugins-dir", "plugins", command, "B.json", "-s", strategy, *args)
    assert code == 3, err
    assert f"strategy {strategy!r} failed" in err
    assert not (work / "out.json").exists()


def test_a_check_whose_plugin_raises_exit_code_0_fails(work: Path) -> None:
    (work / "pyproject.toml").write_text(
        '[[tool.compactkit.check]]\nname = "c"\nsessions = ["B.json"]\nmode = "oneshot"\n'
        'pipeline = ["exit-zero"]\n'
    )
    code, out, _ = cli("--plugins-dir", "plugins", "check")
    assert code == 3
    assert "c: B.json: does not load or run: strategy 'exit-zero' failed" in " ".join(out.split())


def test_a_bench_row_whose_llm_backend_has_no_key_is_exit_2(
    work: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    spec = "llm-summary:backend=openai,max_tokens=5000"
    code, out, err = cli("bench", "S.json", "-s", spec, "--mode", "oneshot")
    assert code == 2, out + err
    assert "failed" in out  # the row is marked failed in the table
    assert (
        err.strip()
        .splitlines()[-1]
        .startswith(
            f"compactkit: error: pipeline {spec!r} failed on S.json: llm-summary backend 'openai' "
            "needs an API key"
        )
    )


@pytest.mark.parametrize("timeout", ["0", "30"])  # in-process, and in its own child process
@pytest.mark.parametrize("command", ["run", "bench"])
def test_os_exit_0_in_a_strategy_is_exit_3_with_one_line(
    work: Path, command: str, timeout: str
) -> None:
    args = ["-o", "out.json"] if command == "run" else ["--mode", "oneshot"]
    proc = program(
        work,
        "--plugins-dir",
        "plugins",
        command,
        "B.json",
        "-s",
        "os-exit",
        "--timeout",
        timeout,
        *args,
    )
    assert proc.returncode == 3, proc.stderr
    assert "strategy 'os-exit' failed" in proc.stderr.strip().splitlines()[-1]
    assert not (work / "out.json").exists()


def test_os_exit_0_at_import_is_a_plugin_in_error_and_never_a_silent_exit_0(work: Path) -> None:
    proc = program(work, "--plugins-dir", "exits", "run", "B.json", "-s", "sliding-window")
    assert proc.returncode == 0, proc.stderr
    assert '"messages"' in proc.stdout  # the run wrote its session: other plugins are unaffected
    proc = program(work, "--plugins-dir", "exits", "plugins")
    assert proc.returncode == 3
    assert "exits_at_import [plugins-dir] ERROR" in proc.stdout
    assert "it called os._exit(0)" in proc.stdout


def test_a_pipeline_reports_a_plugin_error_as_a_strategy_failure() -> None:
    def exit_zero(ctx: AgentContext) -> AgentContext:
        error = CompactkitError("fine, says the plugin")
        error.exit_code = 0
        raise error

    ctx = load_one(sample("runtime_trajs_basic"))
    with pytest.raises(StrategyError) as caught:
        Pipeline([exit_zero]).run(ctx)
    assert caught.value.exit_code == 3
    assert "fine, says the plugin" in str(caught.value)


def test_an_invalid_context_is_bad_input_not_a_strategy_breaking_the_contract(
    tmp_path: Path,
) -> None:
    """A real Codex rollout written twice over, call ids and all, loads with every call id
    repeated; compacting it used to be exit 3 blaming the first strategy ('etag-collapse broke
    the contract ... duplicate-tool-call-id') for what its input already held. A strategy whose
    output is valid (the last turns alone) is not refused."""
    source = (
        Path(__file__).resolve().parents[2]
        / "examples/sessions/codemie_rollout-019e1625.head120.jsonl"
    )
    doubled = tmp_path / "doubled.jsonl"
    doubled.write_text(source.read_text(encoding="utf-8") * 2, encoding="utf-8")
    for specs in ([], ["-s", "etag-collapse"]):
        out = CliRunner().invoke(CLI, ["run", str(doubled), *specs, "-o", str(tmp_path / "o.json")])
        assert out.exit_code == 2, out.output
        assert "not valid at message" in out.output and "duplicate-tool-call-id" in out.output
        assert "broke the contract" not in out.output
        assert not (tmp_path / "o.json").exists()
    # a valid session through the same strategy is not refused
    ok = CliRunner().invoke(
        CLI,
        [
            "run",
            str(source),
            "-s",
            "sliding-window",
            "--budget",
            "3000",
            "-o",
            str(tmp_path / "o.json"),
        ],
    )
    assert ok.exit_code in (0, 1), ok.output
