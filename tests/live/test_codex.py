"""The real Codex CLI (npm) runs scripted tool sessions against the fake Responses API: its shell
tool really runs, the model gets the output back, and the rollout file it writes loads and
validates with compactkit; `codex exec resume` sends the whole earlier conversation."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.live.clis import CODEX, Sandbox, codex_final_message, run_codex
from tests.live.sessioncheck import load_checked, tool_calls, tool_results
from tests.live.upstream import FakeUpstream, RecordedRequest, Turn, answer, call, last_tool_result
from tests.live.upstream import tool_results as request_tool_results

pytestmark = pytest.mark.live

TASK = "Write hello to f.txt, then read it back and tell me what it says."
FOLLOW_UP = "Append world to f.txt and show me the file."


def output_of(result: str) -> str:
    """What the command printed: Codex wraps it (chunk id, wall time, exit code) before `Output:`."""
    return result.split("Output:\n", 1)[-1].strip()


def final(prefix: str) -> Turn:
    return answer(lambda request: f"{prefix}: {output_of(last_tool_result(request))}")


SCRIPT = [
    call("exec_command", cmd="echo hello > f.txt"),
    call("exec_command", cmd="cat f.txt"),
    final("f.txt says"),
]

FOLLOW_UP_SCRIPT = [
    call("exec_command", cmd="echo world >> f.txt && cat f.txt"),
    final("f.txt now holds"),
]


def calls_answered(request: RecordedRequest) -> bool:
    """Every function_call_output in the request answers a function_call that comes before it."""
    seen: set[str] = set()
    for item in request.body["input"]:
        if item.get("type") == "function_call":
            seen.add(item["call_id"])
        if item.get("type") == "function_call_output" and item["call_id"] not in seen:
            return False
    return True


def test_codex_runs_a_scripted_tool_session(
    codex_cli: Path, fake_upstream: FakeUpstream, sandbox: Sandbox
) -> None:
    run = run_codex(TASK, sandbox, upstream=fake_upstream, script=SCRIPT, executable=codex_cli)

    assert run.returncode == 0, run.describe()
    assert fake_upstream.problems == []
    assert (sandbox.workspace / "f.txt").read_text() == "hello\n"  # exec_command really ran
    turns = run.turn_requests()
    assert len(turns) == 3, run.describe()
    assert [r.path for r in turns] == ["/v1/responses"] * 3
    assert output_of(last_tool_result(turns[2])) == "hello"
    assert all(f"codex_exec/{CODEX.version}" in r.headers["user-agent"] for r in turns)
    # streamed, one cache key for the whole session, the shell tool as the harness expects it
    assert all(r.body["stream"] is True and calls_answered(r) for r in turns)
    assert {r.body["prompt_cache_key"] for r in turns} == {run.session_id}
    exec_command = next(t for t in turns[0].body["tools"] if t.get("name") == "exec_command")
    assert "cmd" in exec_command["parameters"]["required"]
    assert codex_final_message(run) == "f.txt says: hello"

    assert run.session_file is not None, run.describe()
    ctx = load_checked(run.session_file, [TASK])
    assert [c.input for c in tool_calls(ctx)] == [
        {"cmd": "echo hello > f.txt"},
        {"cmd": "cat f.txt"},
    ]
    assert output_of(tool_results(ctx)[1].text) == "hello"
    assert ctx.messages[-1].text == "f.txt says: hello"


def test_codex_resumes_a_session_with_its_history(
    codex_cli: Path, fake_upstream: FakeUpstream, sandbox: Sandbox
) -> None:
    first = run_codex(TASK, sandbox, upstream=fake_upstream, script=SCRIPT, executable=codex_cli)
    assert first.returncode == 0, first.describe()

    resumed = run_codex(
        FOLLOW_UP,
        sandbox,
        upstream=fake_upstream,
        script=FOLLOW_UP_SCRIPT,
        resume=first.session_id,
        executable=codex_cli,
    )

    assert resumed.returncode == 0, resumed.describe()
    assert fake_upstream.problems == []
    assert (sandbox.workspace / "f.txt").read_text() == "hello\nworld\n"
    assert codex_final_message(resumed) == "f.txt now holds: hello\nworld"
    assert resumed.session_id == first.session_id
    request = resumed.turn_requests()[0]
    sent = json.dumps(request.body["input"])
    assert sent.index(json.dumps(TASK)[1:-1]) < sent.index(json.dumps(FOLLOW_UP)[1:-1])
    assert [output_of(r) for r in request_tool_results(request)] == ["", "hello"]
    assert resumed.session_file is not None, resumed.describe()
    ctx = load_checked(resumed.session_file, [TASK, FOLLOW_UP])
    assert len(tool_calls(ctx)) == 3
