"""The headless output of the real CLIs (npm) loads with compactkit: `claude -p --output-format
stream-json --verbose` as `claude-code-stream`, and `codex exec --json` as `codex-exec`, each
run against the scripted fake model: every call paired with the result the tool really gave, the
answer the model gave last, and the prompt (not in either output) marked as not recorded."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import compactkit
from tests.formats._checks import pairing_problems
from tests.live.clis import Sandbox, run_claude, run_codex
from tests.live.upstream import FakeUpstream, answer, call, last_tool_result

pytestmark = pytest.mark.live

TASK = "Write hello to f.txt, then read it back and tell me what it says."


def _saved(stdout: str, path: Path) -> Path:
    path.write_text(stdout, encoding="utf-8")
    return path


def test_claude_code_stream_json_loads_as_the_run_it_streamed(
    claude_cli: Path, fake_upstream: FakeUpstream, sandbox: Sandbox, tmp_path: Path
) -> None:
    script = [
        call("Bash", command="echo hello > f.txt", description="Write hello to f.txt"),
        call("Bash", command="cat f.txt", description="Read f.txt"),
        answer(lambda request: f"f.txt says: {last_tool_result(request).strip()}"),
    ]
    run = run_claude(
        TASK,
        sandbox,
        upstream=fake_upstream,
        script=script,
        executable=claude_cli,
        extra_args=["--output-format", "stream-json", "--verbose"],
    )
    assert run.returncode == 0, run.describe()
    path = _saved(run.stdout, tmp_path / "claude-stream.jsonl")
    (ctx,) = compactkit.load(path)
    assert ctx.metadata["source_format"] == "claude-code-stream"
    assert ctx.messages[0].origin == "harness"  # the prompt is not in the stream
    results = [r.text.strip() for m in ctx.messages for r in m.tool_results]
    assert results[-1] == "hello"
    assert len([c for m in ctx.messages for c in m.tool_calls]) == 2
    assert ctx.messages[-1].text == "f.txt says: hello"
    assert ctx.metadata["result"]["is_error"] is False
    assert pairing_problems(ctx) == [] and compactkit.validate(ctx) == []
    # the same run's --output-format json result alone: the final answer
    lone = tmp_path / "result.json"
    lone.write_text(json.dumps(json.loads(run.stdout.splitlines()[-1])), encoding="utf-8")
    assert compactkit.load_one(lone).messages[-1].text == "f.txt says: hello"


def test_codex_exec_json_loads_as_the_run_it_printed(
    codex_cli: Path, fake_upstream: FakeUpstream, sandbox: Sandbox, tmp_path: Path
) -> None:
    script = [
        call("exec_command", cmd="echo hello > f.txt"),
        call("exec_command", cmd="cat f.txt"),
        answer("f.txt says: hello"),
    ]
    run = run_codex(TASK, sandbox, upstream=fake_upstream, script=script, executable=codex_cli)
    assert run.returncode == 0, run.describe()
    path = _saved(run.stdout, tmp_path / "codex-exec.jsonl")
    ctx = compactkit.load_one(path)
    assert ctx.metadata["source_format"] == "codex-exec"
    assert ctx.metadata["session_id"] == run.session_id
    assert ctx.messages[0].origin == "harness"
    calls = [c for m in ctx.messages for c in m.tool_calls]
    assert [c.name for c in calls] == ["shell", "shell"]
    assert [r.text.strip() for m in ctx.messages for r in m.tool_results][-1] == "hello"
    assert ctx.messages[-1].text == "f.txt says: hello"
    assert "usage" in next(m for m in reversed(ctx.messages) if m.role == "assistant").metadata
    assert pairing_problems(ctx) == [] and compactkit.validate(ctx) == []
