"""Plugins cannot corrupt output: what a plugin prints (at import, in a strategy run in-process or
in its own child process, or from a process it starts) goes to stderr, never into the JSON or the
session on stdout; an endless loop at import is a plugin in error after the load time limit, not
a hang. The real program runs in a child process, since file descriptor 1 is what is at stake."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from ..conftest import sample

PRINTER = '''
"""A plugin that prints everywhere it can."""
import os

from compactkit import Strategy, hookimpl

print("PRINTED AT IMPORT")


class Printer(Strategy):
    name = "printer"
    description = "prints while it compacts"

    def compact(self, ctx):
        print("PRINTED IN COMPACT")
        os.system("echo PRINTED BY A CHILD PROCESS")
        return ctx


@hookimpl
def register_strategies(register):
    register(Printer)
'''


@pytest.fixture
def work(tmp_path: Path) -> Path:
    (tmp_path / "plugins").mkdir()
    (tmp_path / "plugins" / "printer.py").write_text(PRINTER)
    (tmp_path / "spins").mkdir()
    (tmp_path / "spins" / "spin.py").write_text("while True:\n    pass\n")
    shutil.copyfile(sample("runtime_trajs_basic"), tmp_path / "B.json")
    return tmp_path


def program(
    work: Path, *args: str, timeout: float = 300, **env: str
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "compactkit", *args],
        capture_output=True,
        text=True,
        cwd=work,
        env={**os.environ, "COMPACTKIT_LOAD_PLUGINS": "", **env},
        timeout=timeout,
    )


@pytest.mark.parametrize("timeout", ["0", "30"])  # in-process, and in its own child process
def test_what_a_plugin_prints_goes_to_stderr_never_into_the_session(
    work: Path, timeout: str
) -> None:
    proc = program(
        work, "--plugins-dir", "plugins", "run", "B.json", "-s", "printer", "--timeout", timeout
    )
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["messages"]  # the session alone, as JSON
    for line in ("PRINTED AT IMPORT", "PRINTED IN COMPACT", "PRINTED BY A CHILD PROCESS"):
        assert line in proc.stderr


def test_a_bench_report_on_stdout_stays_json(work: Path) -> None:
    proc = program(
        work,
        "--plugins-dir",
        "plugins",
        "bench",
        "B.json",
        "-s",
        "printer",
        "--mode",
        "oneshot",
        "--json",
        "-",
    )
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["schema"].startswith("compactkit.bench/")
    assert "PRINTED IN COMPACT" in proc.stderr


def test_an_endless_loop_at_import_is_a_plugin_in_error_after_the_time_limit(work: Path) -> None:
    proc = program(work, "--plugins-dir", "spins", "plugins", COMPACTKIT_PLUGIN_LOAD_TIMEOUT="1")
    assert proc.returncode == 3
    assert "spin [plugins-dir] ERROR" in proc.stdout
    assert "PluginLoadTimeout: it took longer than 1 s to load" in proc.stdout
    proc = program(
        work,
        "--plugins-dir",
        "spins",
        "run",
        "B.json",
        "-s",
        "sliding-window",
        COMPACTKIT_PLUGIN_LOAD_TIMEOUT="1",
    )
    assert proc.returncode == 0, proc.stderr  # every other command still works
    assert json.loads(proc.stdout)["messages"]


SPAWNER = '''
"""A strategy that starts a process in a session of its own (as `setsid` does), which holds the
caller's stdout and stderr, then returns, or runs past its time limit."""
import os
import subprocess
import time

from compactkit import Strategy, hookimpl


class Spawner(Strategy):
    name = "spawner"
    description = "leaves a process behind"

    def compact(self, ctx):
        quiet = subprocess.DEVNULL if os.environ.get("SPAWN_QUIET") else None
        child = subprocess.Popen(
            ["sleep", "90"], start_new_session=True, stdout=quiet, stderr=quiet
        )
        with open(os.environ["SPAWNED_PID"], "w") as handle:
            handle.write(str(child.pid))
        if os.environ.get("SPAWNER_HANGS"):
            time.sleep(120)
        return ctx


@hookimpl
def register_strategies(register):
    register(Spawner)
'''


def _alive(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat[stat.rfind(")") + 2] != "Z"  # a zombie has ended (only its entry is left)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
@pytest.mark.parametrize(
    ("hangs", "quiet"),
    [("", "1"), ("1", "1"), ("", "")],
    ids=["returns", "times-out", "holds-the-pipes"],
)
def test_what_a_strategy_starts_does_not_outlive_it(work: Path, hangs: str, quiet: str) -> None:
    """The process it started is ended with it, on return and at the timeout; one holding the
    caller's stdout and stderr would keep the command from ending until it exits (90 s)."""
    (work / "plugins" / "spawner.py").write_text(SPAWNER)
    pid_file = work / "spawned.pid"
    proc = program(
        work,
        "--plugins-dir",
        "plugins",
        "run",
        "B.json",
        "-s",
        "spawner",
        "--timeout",
        "5",
        "-o",
        "out.json",
        timeout=60,
        SPAWNED_PID=str(pid_file),
        SPAWNER_HANGS=hangs,
        SPAWN_QUIET=quiet,
    )
    assert proc.returncode == (3 if hangs else 0), proc.stderr
    assert not _alive(int(pid_file.read_text()))
