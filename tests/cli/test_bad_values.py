"""Bad values are exit 2 in one line (issue: hardening of what is new, item 7)."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

import compactkit
from compactkit import BadInputError, message
from compactkit.cli import make_cli
from compactkit.registry import make_registry

from ..conftest import sample

CLI = make_cli(lambda: make_registry(entry_points=False))
SESSION = str(sample("sphinx-doc"))


def _one_line_exit_2(args: list[str]) -> str:
    result = CliRunner().invoke(CLI, args)
    assert result.exit_code == 2, result.output
    assert result.stderr.startswith("compactkit: error: ")
    assert result.stderr.count("\n") == 1
    return result.stderr


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (["run", SESSION, "--timeout", "nan"], "'nan' is not a finite number of seconds"),
        (["run", SESSION, "--timeout", "inf"], "'inf' is not a finite number of seconds"),
        (["bench", SESSION, "--timeout", "-1"], "'-1' is not a finite number of seconds"),
        (["inspect", SESSION, "--top", "-1"], "--top"),
        (["run", SESSION, "-s", "a++b"], "empty step in pipeline 'a++b'"),
        (["run", SESSION, "-s", "etag-collapse+"], "empty step in pipeline"),
        # (a --listen and no upstream command too: what is wrong first is the timeout)
        (["gateway", "--timeout", "nan", "--listen", "?"], "'nan' is not a finite number"),
        (["gateway", "--timeout", "inf", "--listen", "?"], "'inf' is not a finite number"),
        (["gateway", "--timeout", "0.05", "--listen", "?"], "'0.05' is not a finite number"),
        (["mcp-proxy", "--timeout", "nan"], "'nan' is not a finite number of seconds"),
        (["mcp-proxy", "--timeout", "inf"], "'inf' is not a finite number of seconds"),
        (["gateway", "--state", "", "--listen", "?"], "'--state': an empty path"),
        (["mcp-proxy", "--state", ""], "'--state': an empty path"),
    ],
)
def test_bad_option_values_are_refused(args: list[str], said: str) -> None:
    assert said in _one_line_exit_2(args)


def _check(tmp_path: Path, body: str) -> list[str]:
    (tmp_path / "pyproject.toml").write_text(
        f'[project]\nname = "x"\n\n[[tool.compactkit.check]]\nname = "c"\n{body}\n', "utf-8"
    )
    return ["check", "--config", str(tmp_path / "pyproject.toml")]


@pytest.mark.parametrize(
    ("body", "said"),
    [
        ("sessions = []", "sessions: List should have at least 1 item"),
        ('sessions = ["a.json"]\ninformational = "yes"', "informational: Input should be a valid"),
        ('sessions = ["a.json"]\nbudget = "1.5"', "budget: a token count is a whole number"),
        ('sessions = ["a.json"]\nbudget = 0', "budget: Input should be greater than or equal to 1"),
        ('sessions = ["a.json"]\npipeline = []', "pipeline"),
    ],
)
def test_bad_check_values_are_refused(tmp_path: Path, body: str, said: str) -> None:
    assert said in _one_line_exit_2(_check(tmp_path, body))


def test_a_log_whose_trigger_is_not_a_count_is_bad_input_naming_the_log(tmp_path: Path) -> None:
    log = tmp_path / "s.log"
    with compactkit.Session(trigger=4_000) as live:
        live.save(log)
        live.append(message("user", "hi"))
    start = json.loads(log.read_text("utf-8").splitlines()[0])
    start["options"]["trigger"] = "1e999"
    log.write_text(json.dumps(start) + "\n", "utf-8")
    with pytest.warns(RuntimeWarning), pytest.raises(BadInputError) as bad:
        compactkit.Session.load(log)
    assert "trigger is '1e999', not a positive whole number" in str(bad.value)
    assert str(log) in str(bad.value)


def test_a_symlink_to_a_parent_folder_is_not_followed(tmp_path: Path) -> None:
    from compactkit.bench.jobs import collect_sessions

    folder = tmp_path / "sessions"
    folder.mkdir()
    (folder / "a.json").write_bytes(sample("sphinx-doc").read_bytes())
    (folder / "up").symlink_to("..")
    assert collect_sessions([str(folder)]) == [str(folder / "a.json")]
    assert _sessions_of_check(tmp_path, "sessions/**/*.json") == [str(folder / "a.json")]


def _sessions_of_check(tmp_path: Path, pattern: str) -> list[str]:
    """The session files a check's `sessions = [pattern]` names."""
    from compactkit.check import load_config
    from compactkit.check.config import expand_sessions

    (tmp_path / "pyproject.toml").write_text(
        '[project]\nname = "x"\n\n[[tool.compactkit.check]]\nname = "c"\n'
        f'sessions = ["{pattern}"]\nmode = "oneshot"\n',
        "utf-8",
    )
    (check,) = load_config(str(tmp_path / "pyproject.toml")).checks
    return list(expand_sessions(check, tmp_path))


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no named pipes here")
def test_a_named_pipe_in_a_session_folder_is_not_read(tmp_path: Path) -> None:
    # reading a FIFO waits for a writer that never comes: `bench sessions/` hung for good
    from compactkit.bench.jobs import collect_sessions

    folder = tmp_path / "sessions"
    folder.mkdir()
    (folder / "a.json").write_bytes(sample("sphinx-doc").read_bytes())
    os.mkfifo(folder / "live.jsonl")
    assert collect_sessions([str(folder)]) == [str(folder / "a.json")]
    assert _sessions_of_check(tmp_path, "sessions/*.json*") == [str(folder / "a.json")]


def test_a_glob_over_proc_ends_and_matches_no_session(tmp_path: Path) -> None:
    said = _one_line_exit_2(_check(tmp_path, 'sessions = ["/proc/self/**"]'))
    assert "matches no file" in said


def _configs(monkeypatch: Any) -> list[Any]:
    """The `GatewayConfig` each `gateway` command then builds (it stops before listening)."""
    import compactkit.gateway

    given: list[Any] = []

    def create_app(config: Any, registry: Any) -> Any:
        given.append(config)
        raise SystemExit(0)  # stop before listening

    monkeypatch.setattr(compactkit.gateway, "create_app", create_app)
    return given


def test_the_gateway_takes_its_plugin_time_limit_from_the_command_line(monkeypatch: Any) -> None:
    """`gateway --strategy-timeout` sets how long a plugin strategy in -s may run (the gateway's
    --timeout is the upstream's); a value that is not a finite number of seconds is exit 2."""
    given = _configs(monkeypatch)
    cli = make_cli()
    result = CliRunner().invoke(cli, ["gateway", "--listen", "127.0.0.1:0", "--timeout", "30"])
    assert result.exit_code == 0 and given[-1].strategy_timeout == 60 and given[-1].timeout == 30
    result = CliRunner().invoke(cli, ["gateway", "--strategy-timeout", "2.5", "--listen", "x:0"])
    assert result.exit_code == 0 and given[-1].strategy_timeout == 2.5
    result = CliRunner().invoke(cli, ["gateway", "--strategy-timeout", "0", "--listen", "x:0"])
    assert result.exit_code == 0 and given[-1].strategy_timeout == 0
    for bad in ("nan", "-1", "soon"):
        result = CliRunner().invoke(cli, ["gateway", "--strategy-timeout", bad])
        assert result.exit_code == 2 and "--strategy-timeout" in result.output


def test_the_gateway_takes_its_bounds_from_the_command_line(monkeypatch: Any) -> None:
    """`gateway --max-body --max-memory --read-timeout --admin-token --workers --processes`
    reach its configuration (the token from the environment too; planner processes 2 unless
    told); a bound under 1 is exit 2."""
    given = _configs(monkeypatch)
    cli = make_cli()
    args = ["gateway", "--listen", "127.0.0.1:0", "--max-body", "1000", "--max-memory", "5000"]
    args += ["--read-timeout", "2.5", "--admin-token", "ck-admin", "--workers", "2"]
    assert CliRunner().invoke(cli, [*args, "--processes", "0"]).exit_code == 0
    config = given[-1]
    assert (config.max_body, config.max_memory, config.read_timeout) == (1000, 5000, 2.5)
    assert (config.admin_token, config.workers, config.processes) == ("ck-admin", 2, 0)
    env = {"COMPACTKIT_GATEWAY_ADMIN_TOKEN": "from-env"}
    assert CliRunner().invoke(cli, ["gateway", "--listen", "x:0"], env=env).exit_code == 0
    assert given[-1].admin_token == "from-env" and given[-1].max_body == 32 * 1024 * 1024
    assert given[-1].processes == 2
    assert "--max-body" in _one_line_exit_2(["gateway", "--max-body", "0", "--listen", "x:0"])
