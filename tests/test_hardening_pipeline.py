"""Hostile and careless strategies and stores: verified recovery entries, trust by class identity,
strategies that exit, interrupt or never return."""

from __future__ import annotations

import hashlib
import json
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

import compactkit
from compactkit.cli import make_cli
from compactkit.context import AgentContext, Message, OmittedBlock, TextBlock, etag_of
from compactkit.errors import (
    ContractViolation,
    RecoveryError,
    StrategyError,
    StrategyTimeout,
)
from compactkit.hookspecs import hookimpl
from compactkit.pipeline import Pipeline, build_pipeline, builtin_strategies
from compactkit.recovery import expand
from compactkit.registry import make_registry
from compactkit.strategies.sliding_window import SlidingWindow
from compactkit.strategy import Strategy
from compactkit.validate import validate

from .conftest import sample

SESSION = sample("sphinx-doc")


def _plugin(*classes: type[Strategy]) -> Any:
    class Plugin:
        @hookimpl
        def register_strategies(self, register: Callable[[Any], None]) -> None:
            for cls in classes:
                register(cls)

    return Plugin()


def cli(*classes: type[Strategy]) -> Any:
    return make_cli(lambda: make_registry(entry_points=False, plugins=[_plugin(*classes)]))


def invoke(command: Any, *args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(command, list(args))
    return result.exit_code, result.stdout, result.stderr


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def one_line_error(stderr: str) -> str:
    lines = stderr.strip().splitlines()
    assert len(lines) == 1, stderr
    assert lines[0].startswith("compactkit: error: "), stderr
    return lines[0]


# ----------------------------------------------------------------------------- recovery store


@pytest.fixture
def compacted(tmp_path: Path) -> tuple[Path, Path, dict[str, Any]]:
    small, stash = tmp_path / "small.json", tmp_path / "small.stash"
    code, _, stderr = invoke(
        cli(), "run", str(SESSION), "--budget", "12000", "-o", str(small), "--stash", str(stash)
    )
    assert code == 0, stderr
    data = json.loads(stash.read_text())
    assert data["entries"]
    return small, stash, data


def _rewrite(stash: Path, data: dict[str, Any], change: Callable[[str], str]) -> str:
    etag = sorted(data["entries"])[0]
    entries = dict(data["entries"])
    entries[etag] = change(entries[etag])
    stash.write_text(json.dumps({**data, "entries": entries}))
    return etag


@pytest.mark.parametrize("command", ["expand", "validate"])
@pytest.mark.parametrize(
    ("change", "says"),
    [
        (lambda raw: raw.replace('"text":"', '"text":"X', 1), "does not match its etag"),
        (lambda raw: "not json {", "is not JSON"),
        (lambda raw: '{"role": "user"}', "is not a JSON list"),
        (lambda raw: '[{"role": "wizard"}]', "does not match its etag"),
    ],
)
def test_a_changed_or_malformed_stash_entry_is_exit_2_naming_its_etag(
    compacted: tuple[Path, Path, dict[str, Any]],
    tmp_path: Path,
    command: str,
    change: Callable[[str], str],
    says: str,
) -> None:
    small, stash, data = compacted
    etag = _rewrite(stash, data, change)
    back = tmp_path / "back.json"
    extra = ["-o", str(back)] if command == "expand" else []
    code, _, stderr = invoke(cli(), command, str(small), "--stash", str(stash), *extra)
    assert code == 2, stderr
    line = one_line_error(stderr)
    assert etag in line and says in line
    assert "unexpected error" not in line
    assert not back.exists()


def test_an_entry_of_the_right_address_but_the_wrong_shape_is_exit_2(tmp_path: Path) -> None:
    raw = '[{"role": "wizard", "content": []}]'
    etag = etag_of(raw)
    marker = Message(
        role="user",
        content=(OmittedBlock(etag=etag, messages=1, label="x"),),
        metadata={"compactkit_marker": True},
    )
    ctx = AgentContext(
        messages=(Message(role="user", content=(TextBlock(text="task"),)), marker),
        recovery={etag: raw},
    )
    with pytest.raises(RecoveryError, match=f"recovery entry {etag}: is not a list of messages"):
        expand(ctx)
    path = tmp_path / "ctx.json"
    path.write_text(ctx.to_json())
    code, _, stderr = invoke(cli(), "expand", str(path), "-o", str(tmp_path / "back.json"))
    assert code == 2 and etag in one_line_error(stderr)


def test_an_entry_embedded_in_the_context_is_checked_too(tmp_path: Path) -> None:
    ctx = build_pipeline(["default"], budget=12000).run(compactkit.load_one(SESSION)).context
    etag = sorted(ctx.recovery)[0]
    tampered = ctx.replace(recovery={**ctx.recovery, etag: ctx.recovery[etag].replace("a", "e")})
    with pytest.raises(RecoveryError, match=etag):
        expand(tampered)
    with pytest.raises(RecoveryError, match=etag):
        validate(tampered)
    assert expand(ctx).messages  # the untouched store still expands
    assert validate(ctx) == []


# ----------------------------------------------------------------------------- trust by identity


class Impostor(Strategy):
    """Claims to be a built-in by module name, and mutates what it is given."""

    name = "impostor"

    def compact(self, ctx: AgentContext) -> AgentContext:
        ctx.metadata["owned"] = True
        ctx.recovery["0000000000000000"] = "[]"
        return ctx


Impostor.__module__ = "compactkit.strategies.sliding_window"


class SubclassedBuiltin(SlidingWindow):
    name = "sliding-window-plus"

    def compact(self, ctx: AgentContext) -> AgentContext:
        ctx.metadata["owned"] = True
        return ctx


@pytest.mark.parametrize("cls", [Impostor, SubclassedBuiltin])
def test_a_look_alike_of_a_builtin_gets_no_privilege(cls: type[Strategy]) -> None:
    ctx = compactkit.load_one(SESSION)
    before = ctx.model_copy(deep=True)
    with pytest.raises(ContractViolation, match="mutated its input"):
        Pipeline([cls()]).run(ctx)
    assert ctx == before
    assert "owned" not in ctx.metadata and "0000000000000000" not in ctx.recovery


def test_builtins_are_trusted_by_class_identity() -> None:
    names = {cls.name for cls in builtin_strategies()}
    assert {"sliding-window", "observation-mask", "etag-collapse", "peer-codex"} <= names
    assert Impostor not in builtin_strategies()
    assert SubclassedBuiltin not in builtin_strategies()


def test_an_impostor_is_a_plugin_failure_on_the_command_line(tmp_path: Path) -> None:
    before = digest(SESSION)
    out = tmp_path / "out.json"
    code, _, stderr = invoke(cli(Impostor), "run", str(SESSION), "-s", "impostor", "-o", str(out))
    assert code == 3 and "mutated its input" in one_line_error(stderr)
    assert digest(SESSION) == before and not out.exists()


# ----------------------------------------------------------------------------- exit and interrupt


class Exits(Strategy):
    name = "exits"

    def compact(self, ctx: AgentContext) -> AgentContext:
        raise SystemExit(0)


class Interrupts(Strategy):
    name = "interrupts"

    def compact(self, ctx: AgentContext) -> AgentContext:
        raise KeyboardInterrupt


@pytest.mark.parametrize("timeout", [None, 30.0])
@pytest.mark.parametrize(
    ("cls", "raised"), [(Exits, "SystemExit"), (Interrupts, "KeyboardInterrupt")]
)
def test_a_strategy_that_exits_or_interrupts_is_a_strategy_failure(
    cls: type[Strategy], raised: str, timeout: float | None
) -> None:
    ctx = compactkit.load_one(SESSION)
    before = ctx.model_copy(deep=True)
    with pytest.raises(StrategyError, match=f"strategy '{cls.name}' failed: {raised}"):
        Pipeline([cls()], timeout=timeout).run(ctx)
    assert ctx == before


@pytest.mark.parametrize("cls", [Exits, Interrupts])
def test_a_strategy_that_exits_or_interrupts_is_exit_3(cls: type[Strategy], tmp_path: Path) -> None:
    out = tmp_path / "out.json"
    code, _, stderr = invoke(cli(cls), "run", str(SESSION), "-s", cls.name, "-o", str(out))
    assert code == 3, stderr
    assert f"strategy '{cls.name}' failed" in one_line_error(stderr)
    assert not out.exists()


_SCRIPT = """
import os, signal, sys, time
import compactkit
from compactkit.pipeline import Pipeline
from compactkit.strategy import Strategy

class Slow(Strategy):
    name = "slow"
    def compact(self, ctx):
        with open({pidfile!r}, "w") as f:
            f.write(str(os.getpid()))
        time.sleep(600)
        return ctx

ctx = compactkit.load_one({session!r})
try:
    Pipeline([Slow()], timeout={timeout!r}).run(ctx)
except KeyboardInterrupt:
    print("interrupted")
    sys.exit(130)
print("finished")
"""


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # a zombie is dead for our purpose; /proc tells (Linux), else assume alive
    stat = Path(f"/proc/{pid}/stat")
    return not (stat.exists() and stat.read_text().split(")")[-1].split()[0] == "Z")


def _start_in_a_strategy(
    template: str, tmp_path: Path, timeout: float | None
) -> tuple[subprocess.Popen[str], int]:
    """A program running `template`, and the pid of the process its strategy runs in, once the
    strategy has started."""
    pidfile = tmp_path / "pid"
    script = template.format(pidfile=str(pidfile), session=str(SESSION), timeout=timeout)
    proc = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    for _ in range(600):
        if pidfile.exists() and pidfile.read_text():
            break
        time.sleep(0.1)
    return proc, int(pidfile.read_text())


@pytest.mark.parametrize("timeout", [None, 300.0])
def test_a_real_ctrl_c_during_a_strategy_is_still_an_interrupt(
    tmp_path: Path, timeout: float | None
) -> None:
    proc, strategy_pid = _start_in_a_strategy(_SCRIPT, tmp_path, timeout)
    proc.send_signal(signal.SIGINT)
    stdout, _ = proc.communicate(timeout=120)
    assert proc.returncode == 130 and stdout.strip() == "interrupted"
    assert (strategy_pid == proc.pid) == (timeout is None)
    for _ in range(100):  # a strategy in a child process is stopped with its parent's Ctrl-C
        if not _alive(strategy_pid):
            break
        time.sleep(0.1)
    assert not _alive(strategy_pid)


# ----------------------------------------------------------------------------- timeouts


class BusyLoop(Strategy):
    name = "busy-loop"

    def compact(self, ctx: AgentContext) -> AgentContext:
        while True:
            pass


class Sleeps(Strategy):
    name = "sleeps"

    def compact(self, ctx: AgentContext) -> AgentContext:
        time.sleep(10**6)
        return ctx


class BusyInC(Strategy):
    """Stuck in one C call (catastrophic regex backtracking): no Python signal handler runs."""

    name = "busy-in-c"

    def compact(self, ctx: AgentContext) -> AgentContext:
        re.match(r"(a+)+$", "a" * 64 + "b")
        return ctx


class WherePid(Strategy):
    """Records the process it ran in, and adds a note after the task (a real change)."""

    name = "where-pid"

    def compact(self, ctx: AgentContext) -> AgentContext:
        note = Message(role="user", content=(TextBlock(text="a note"),))
        messages = (*ctx.messages[:1], note, *ctx.messages[1:])
        return ctx.replace(messages=messages, metadata={**ctx.metadata, "pid": os.getpid()})


@pytest.mark.parametrize("cls", [BusyLoop, Sleeps, BusyInC])
def test_a_strategy_that_never_returns_is_stopped_at_its_timeout(cls: type[Strategy]) -> None:
    ctx = compactkit.load_one(SESSION)
    before = ctx.model_copy(deep=True)
    with pytest.raises(StrategyTimeout, match=f"strategy '{cls.name}' did not finish within 0.5 s"):
        Pipeline([cls()], timeout=0.5).run(ctx)
    assert ctx == before


def test_a_hanging_strategy_is_exit_3_on_the_command_line(tmp_path: Path) -> None:
    before = digest(SESSION)
    out = tmp_path / "out.json"
    code, _, stderr = invoke(
        cli(BusyLoop), "run", str(SESSION), "-s", "busy-loop", "--timeout", "0.5", "-o", str(out)
    )
    assert code == 3, stderr
    assert "did not finish within 0.5 s" in one_line_error(stderr)
    assert digest(SESSION) == before and not out.exists()


def test_a_plugin_in_a_child_process_gives_the_same_result_and_report() -> None:
    ctx = compactkit.load_one(SESSION)
    inline = Pipeline([WherePid()]).run(ctx)
    isolated = Pipeline([WherePid()], timeout=60).run(ctx)
    assert inline.context.metadata["pid"] == os.getpid()
    assert isolated.context.metadata["pid"] != os.getpid()
    assert isolated.context.replace(metadata={}) == inline.context.replace(metadata={})
    assert [s.changes for s in isolated.steps] == [s.changes for s in inline.steps]
    # kept messages are the caller's own objects, not copies from the child
    kept = isolated.context.messages[2:]
    assert all(a is b for a, b in zip(kept, ctx.messages[1:], strict=True))


def test_timeout_zero_runs_in_process_and_builtins_always_do(tmp_path: Path) -> None:
    out = tmp_path / "out.json"
    code, _, stderr = invoke(
        cli(WherePid),
        "run",
        str(SESSION),
        "-s",
        "where-pid",
        "--timeout",
        "0",
        "-o",
        str(out),
    )
    assert code == 0, stderr
    assert json.loads(out.read_text())["metadata"]["pid"] == os.getpid()
    code, _, stderr = invoke(cli(WherePid), "run", str(SESSION), "-s", "where-pid", "-o", str(out))
    assert code == 0, stderr
    assert json.loads(out.read_text())["metadata"]["pid"] != os.getpid()


def test_a_hanging_strategy_fails_its_bench_row_with_exit_3() -> None:
    code, _, stderr = invoke(
        cli(BusyLoop),
        "bench",
        str(SESSION),
        "-s",
        "busy-loop",
        "--mode",
        "oneshot",
        "--timeout",
        "0.5",
    )
    assert code == 3, stderr
    assert "pipeline 'busy-loop' failed" in stderr and "did not finish within 0.5 s" in stderr


def test_a_hanging_strategy_fails_its_check_with_exit_3(tmp_path: Path) -> None:
    from .check.conftest import layout

    config = (
        '[[tool.compactkit.check]]\nname = "hangs"\n'
        'sessions = ["examples/sessions/gemini3pro_sphinx-doc__sphinx-9229.traj.json"]\n'
        'mode = "oneshot"\npipeline = ["busy-loop"]\n'
    )
    path = layout(tmp_path, config, baseline=False)
    code, out, stderr = invoke(cli(BusyLoop), "check", "--config", str(path), "--timeout", "0.5")
    assert code == 3, out + stderr
    assert "did not finish within 0.5 s" in out + stderr


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="PR_SET_PDEATHSIG is Linux's")
def test_a_strategy_in_a_child_process_dies_with_a_killed_parent(tmp_path: Path) -> None:
    pidfile = tmp_path / "pid"
    script = _SCRIPT.format(pidfile=str(pidfile), session=str(SESSION), timeout=300.0)
    proc = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    for _ in range(600):
        if pidfile.exists() and pidfile.read_text():
            break
        time.sleep(0.1)
    strategy_pid = int(pidfile.read_text())
    assert strategy_pid != proc.pid
    proc.kill()
    proc.communicate(timeout=120)
    for _ in range(100):
        if not _alive(strategy_pid):
            break
        time.sleep(0.1)
    assert not _alive(strategy_pid)


_TERM_SCRIPT = """
import signal, sys

class Terminated(BaseException):
    pass

def handler(signum, frame):
    raise Terminated

signal.signal(signal.SIGTERM, handler)
""" + _SCRIPT.replace("except KeyboardInterrupt:", "except Terminated:").replace(
    '"interrupted"', '"terminated"'
).replace("sys.exit(130)", "sys.exit(143)")


@pytest.mark.parametrize("timeout", [None, 300.0])
def test_sigterm_made_an_exception_by_the_program_is_not_a_strategy_failure(
    tmp_path: Path, timeout: float | None
) -> None:
    proc, _ = _start_in_a_strategy(_TERM_SCRIPT, tmp_path, timeout)
    proc.send_signal(signal.SIGTERM)
    stdout, _ = proc.communicate(timeout=120)
    assert proc.returncode == 143 and stdout.strip() == "terminated"
