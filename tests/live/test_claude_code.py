"""The real Claude Code CLI (npm) runs scripted tool sessions against the fake Messages API: the
tools really run, the model gets their output back, and the session file it writes loads and
validates with compactkit; a resumed session sends the whole earlier conversation."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.live.clis import CLAUDE_CODE, Sandbox, run_claude
from tests.live.sessioncheck import (
    has_tasks,
    load_all_checked,
    load_checked,
    tool_calls,
    tool_results,
)
from tests.live.upstream import (
    FakeUpstream,
    RecordedRequest,
    Script,
    Turn,
    answer,
    call,
    last_tool_result,
)
from tests.live.upstream import tool_results as request_tool_results

pytestmark = pytest.mark.live

TASK = "Write hello to f.txt, then read it back and tell me what it says."
FOLLOW_UP = "Append world to f.txt and show me the file."


def final(prefix: str) -> Turn:
    return answer(lambda request: f"{prefix}: {last_tool_result(request).strip()}")


SCRIPT = [
    call("Bash", command="echo hello > f.txt", description="Write hello to f.txt"),
    call("Bash", command="cat f.txt", description="Read f.txt"),
    final("f.txt says"),
]

FOLLOW_UP_SCRIPT = [
    call("Bash", command="echo world >> f.txt && cat f.txt", description="Append and show"),
    final("f.txt now holds"),
]


def tool_use_ids_answered(request: RecordedRequest) -> bool:
    """Every tool_result in the request answers a tool_use that comes before it."""
    seen: set[str] = set()
    for message in request.body["messages"]:
        for block in message["content"] if isinstance(message["content"], list) else []:
            if block.get("type") == "tool_use":
                seen.add(block["id"])
            if block.get("type") == "tool_result" and block["tool_use_id"] not in seen:
                return False
    return True


def test_claude_code_runs_a_scripted_tool_session(
    claude_cli: Path, fake_upstream: FakeUpstream, sandbox: Sandbox
) -> None:
    run = run_claude(TASK, sandbox, upstream=fake_upstream, script=SCRIPT, executable=claude_cli)

    assert run.returncode == 0, run.describe()
    assert fake_upstream.problems == []
    assert (sandbox.workspace / "f.txt").read_text() == "hello\n"  # the Bash tool really ran
    turns = run.turn_requests()
    assert len(turns) == 3, run.describe()
    assert last_tool_result(turns[2]).strip() == "hello"  # the model got the real output back
    assert all(
        r.headers["user-agent"].startswith(f"claude-cli/{CLAUDE_CODE.version}") for r in turns
    )
    assert all(r.body["stream"] is True and tool_use_ids_answered(r) for r in turns)
    assert run.output["result"] == "f.txt says: hello"
    assert run.output["is_error"] is False and run.output["num_turns"] == 3

    assert run.session_file is not None, run.describe()
    ctx = load_checked(run.session_file, [TASK])
    assert [c.input["command"] for c in tool_calls(ctx)] == ["echo hello > f.txt", "cat f.txt"]
    assert tool_results(ctx)[1].text.strip() == "hello"
    assert ctx.messages[-1].text == "f.txt says: hello"


def test_claude_code_resumes_a_session_with_its_history(
    claude_cli: Path, fake_upstream: FakeUpstream, sandbox: Sandbox
) -> None:
    first = run_claude(TASK, sandbox, upstream=fake_upstream, script=SCRIPT, executable=claude_cli)
    assert first.returncode == 0, first.describe()

    resumed = run_claude(
        FOLLOW_UP,
        sandbox,
        upstream=fake_upstream,
        script=FOLLOW_UP_SCRIPT,
        resume=first.session_id,
        executable=claude_cli,
    )

    assert resumed.returncode == 0, resumed.describe()
    assert fake_upstream.problems == []
    assert (sandbox.workspace / "f.txt").read_text() == "hello\nworld\n"
    assert resumed.output["result"] == "f.txt now holds: hello\nworld"
    # the first request after resuming carries the earlier conversation, then the new task
    request = resumed.turn_requests()[0]
    sent = str(request.body["messages"])
    assert TASK in sent and FOLLOW_UP in sent and sent.index(TASK) < sent.index(FOLLOW_UP)
    assert [r.strip() for r in request_tool_results(request)][-1] == "hello"
    assert resumed.session_file is not None, resumed.describe()
    ctx = load_checked(resumed.session_file, [TASK, FOLLOW_UP])
    assert [c.input["command"] for c in tool_calls(ctx)][-1] == "echo world >> f.txt && cat f.txt"


SUBAGENT_PROMPT = "Count the lines of notes.txt with wc -l and report the number."


def test_claude_code_subagent_writes_its_own_transcript(
    claude_cli: Path, fake_upstream: FakeUpstream, sandbox: Sandbox
) -> None:
    script = Script(
        [
            call("Bash", command="printf 'a\\nb\\n' > notes.txt", description="Write notes.txt"),
            call(
                "Agent",
                description="Count lines",
                prompt=SUBAGENT_PROMPT,
                subagent_type="general-purpose",
                run_in_background=False,  # the default runs it in the background, out of order
            ),
            final("The subagent says"),
        ],
        threads={
            SUBAGENT_PROMPT: [
                call("Bash", command="wc -l notes.txt", description="Count lines"),
                final("Lines"),
            ]
        },
    )
    task = "Use a subagent to count the lines of notes.txt."
    run = run_claude(
        task,
        sandbox,
        upstream=fake_upstream,
        script=script,
        allowed_tools=("Bash", "Read", "Agent"),
        executable=claude_cli,
    )

    assert run.returncode == 0, run.describe()
    assert fake_upstream.problems == []
    assert [(r.thread, r.turn) for r in run.turn_requests()] == [
        ("", 0),
        ("", 1),
        (SUBAGENT_PROMPT, 0),
        (SUBAGENT_PROMPT, 1),
        ("", 2),
    ]
    # the subagent's answer reached the main loop
    assert "Lines: 2 notes.txt" in run.output["result"]
    assert run.session_file is not None, run.describe()
    # the session file brings the subagent's transcript (<session>/subagents/agent-*.jsonl)
    main, sub = load_all_checked(run.session_file)
    assert has_tasks(main, [task]) and has_tasks(sub, [SUBAGENT_PROMPT])
    assert [c.name for c in tool_calls(main)] == ["Bash", "Agent"]
    assert sub.metadata["parent_tool_call_id"] == tool_calls(main)[1].id
    assert [c.input["command"] for c in tool_calls(sub)] == ["wc -l notes.txt"]
    assert sub.messages[-1].text == "Lines: 2 notes.txt"
    transcripts = list(
        (run.session_file.parent / run.session_id / "subagents").glob("agent-*.jsonl")
    )
    assert len(transcripts) == 1
    assert load_checked(transcripts[0], [SUBAGENT_PROMPT]).messages == sub.messages
