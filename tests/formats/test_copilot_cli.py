"""GitHub Copilot CLI `session-state/<id>/events.jsonl`, with events shaped after the published
schema (github/copilot-sdk `session-events.schema.json`, as generated into
`dotnet/src/Generated/SessionEvents.cs` and `python/copilot/generated/session_events.py`: the
`SessionStartData`, `UserMessageData`, `AssistantMessageData` / `toolRequests`,
`ToolExecutionCompleteData`, `SessionCompactionCompleteData`, `SkillInvokedData` payloads)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from click.testing import CliRunner

import compactkit
from compactkit.cli import make_cli
from compactkit.registry import make_registry
from tests.formats._checks import pairing_problems
from tests.formats.shapes import COPILOT_START

CLI = make_cli(lambda: make_registry(entry_points=False))


def event(kind: str, n: int, **data: Any) -> dict[str, Any]:
    return {
        "type": kind,
        "data": data,
        "id": f"0b6c{n:04d}-5e1f-4d7a-9c0e-6f3a2b1c0d9e",
        "timestamp": f"2025-12-13T16:27:{n:02d}.000Z",
        "parentId": None if n == 0 else f"0b6c{n - 1:04d}-5e1f-4d7a-9c0e-6f3a2b1c0d9e",
    }


EVENTS = [
    event(
        "session.start",
        0,
        **COPILOT_START,
        selectedModel="claude-sonnet-4.5",
        context={"cwd": "/home/u/app", "branch": "main"},
    ),
    event("session.info", 1, infoType="folder_trust", message="Folder /home/u/app is trusted."),
    event(
        "user.message",
        2,
        content="fix the failing test in auth.py",
        transformedContent="<current_datetime>2025-12-13</current_datetime>\n\n"
        "fix the failing test in auth.py",
        attachments=[],
    ),
    event("assistant.turn_start", 3, turnId="0"),
    event(
        "assistant.message",
        4,
        messageId="m1",
        content="I'll run the tests first.",
        reasoningText="Run the suite to see the failure.",
        outputTokens=42,
        toolRequests=[
            {
                "toolCallId": "toolu_1",
                "name": "bash",
                "arguments": {"command": "pytest -q"},
                "type": "function",
            }
        ],
    ),
    event(
        "tool.execution_start",
        5,
        toolCallId="toolu_1",
        toolName="bash",
        arguments={"command": "pytest -q"},
    ),
    event(
        "tool.execution_complete",
        6,
        toolCallId="toolu_1",
        success=False,
        error={"message": "1 failed: test_login", "code": "failure"},
    ),
    event(
        "assistant.message",
        7,
        messageId="m2",
        content="",
        toolRequests=[{"toolCallId": "toolu_2", "name": "edit", "arguments": {"path": "auth.py"}}],
    ),
    event(
        "assistant.message",
        8,
        messageId="s1",
        content="(sub-agent chatter)",
        parentToolCallId="toolu_9",
    ),
    event(
        "tool.execution_complete",
        9,
        toolCallId="toolu_2",
        success=True,
        result={"content": "File auth.py edited.", "detailedContent": "@@ -1 +1 @@"},
    ),
    event(
        "skill.invoked",
        10,
        name="pytest-helper",
        path="/skills/pytest/SKILL.md",
        content="Use -x to stop early.",
    ),
    event(
        "session.compaction_complete",
        11,
        success=True,
        summaryContent="The user asked to fix auth.py; the test now passes.",
    ),
    event("user.message", 12, content="now run the linter too"),
    event("user.message", 13, content="(skill reminder)", source="skill-pytest-helper"),
    event("assistant.message", 14, messageId="m3", content="Lint is clean.", toolRequests=[]),
    event("assistant.turn_end", 15, turnId="1"),
]


def samples(folder: Path) -> list[Path]:
    """A session folder as the CLI keeps it, and a legacy `<id>.jsonl`."""
    session = folder / "session-state" / "5e1f0b6c-4d7a-9c0e-6f3a-2b1c0d9e8f7a"
    session.mkdir(parents=True)
    text = "".join(json.dumps(e) + "\n" for e in EVENTS)
    (session / "events.jsonl").write_text(text, encoding="utf-8")
    legacy = folder / "session-state" / "legacy.jsonl"
    legacy.write_text(text, encoding="utf-8")
    return [session / "events.jsonl", legacy]


def test_a_copilot_session_loads_with_the_users_words(tmp_path: Path) -> None:
    events, _ = samples(tmp_path)
    ctx = compactkit.load_one(events)
    assert ctx.metadata["source_format"] == "copilot-cli"
    assert ctx.metadata["session_id"] == "5e1f0b6c-4d7a-9c0e-6f3a-2b1c0d9e8f7a"
    assert ctx.metadata["cwd"] == "/home/u/app" and ctx.metadata["model"] == "claude-sonnet-4.5"
    assert [m.text for m in ctx.messages if m.is_human] == [
        "fix the failing test in auth.py",
        "now run the linter too",
    ]
    assert [m.origin for m in ctx.messages if m.role == "user" and not m.is_human] == [
        "harness",
        "summary",
        "harness",
    ]
    results = {r.tool_call_id: (r.text, r.is_error) for m in ctx.messages for r in m.tool_results}
    assert results == {
        "toolu_1": ("1 failed: test_login", True),
        "toolu_2": ("File auth.py edited.", False),
    }
    assert pairing_problems(ctx) == [] and compactkit.validate(ctx) == []
    assert ctx.messages[1].content[0].type == "thinking"
    assert "(sub-agent chatter)" not in [m.text for m in ctx.messages]
    skipped = ctx.metadata["skipped_records"]
    assert isinstance(skipped, dict)
    assert skipped["assistant.message (subagent)"] == 1 and skipped["tool.execution_start"] == 1


def test_the_session_folder_loads_as_its_events(tmp_path: Path) -> None:
    events, _ = samples(tmp_path)
    result = CliRunner().invoke(CLI, ["inspect", str(events.parent)])
    assert result.exit_code == 0, result.stderr
    assert "copilot-cli" in result.stdout
    assert compactkit.load_one(events.parent).messages == compactkit.load_one(events).messages


def test_the_source_of_a_user_message_says_whether_the_user_sent_it(tmp_path: Path) -> None:
    """The schema's `UserMessageData.source` ("Origin of this message ... e.g. user, autopilot,
    skill, or command"; enum `Source`): newer CLIs write `source: "user"` on what the user typed.
    Those stay the user's words; only what the runtime sent (a skill, autopilot's continuation,
    a just-in-time instruction) is harness text."""
    typed = [
        ("user", "fix the flaky test in auth_test.py"),
        ("immediate-prompt", "also keep the old fixture"),
        ("command", "/review the staged changes"),
    ]
    runtime = [
        ("autopilot", "Continue working on the task."),
        ("skill-pdf", "(pdf skill instructions)"),
        ("jit-instruction", "Remember to run the tests."),
    ]
    events = [EVENTS[0]]
    for n, (source, text) in enumerate([*typed, *runtime], start=1):
        events.append(event("user.message", 2 * n, content=text, source=source))
        events.append(
            event("assistant.message", 2 * n + 1, messageId=f"m{n}", content="ok", toolRequests=[])
        )
    path = tmp_path / "events.jsonl"
    path.write_text("".join(json.dumps(e) + "\n" for e in events), encoding="utf-8")
    ctx = compactkit.load_one(path, format="copilot-cli")
    assert [m.text for m in ctx.messages if m.is_human] == [text for _, text in typed]
    assert [m.text for m in ctx.messages if m.origin == "harness"] == [t for _, t in runtime]
    assert ctx.task == typed[0][1]


def rewound_session(events_removed: int) -> list[dict[str, Any]]:
    """`/rewind` back to the first prompt's answer: the schema's `session.snapshot_rewind`
    (`upToEventId`: "Event ID that was rewound to; all events after this one were removed";
    `eventsRemoved`), then the conversation goes on from there."""
    answered = event("assistant.message", 3, messageId="m1", content="Done.", toolRequests=[])
    return [
        EVENTS[0],
        event("user.message", 2, content="rename the module to auth_core"),
        answered,
        event("user.message", 4, content="now delete the old tests"),
        event(
            "assistant.message",
            5,
            messageId="m2",
            content="",
            toolRequests=[{"toolCallId": "toolu_rm", "name": "bash", "arguments": {}}],
        ),
        event("tool.execution_complete", 6, toolCallId="toolu_rm", success=True, result={}),
        event(
            "session.snapshot_rewind",
            7,
            upToEventId=answered["id"],
            eventsRemoved=events_removed,
        ),
        event("user.message", 8, content="keep the old tests, add new ones instead"),
        event("assistant.message", 9, messageId="m3", content="Added.", toolRequests=[]),
    ]


def test_a_rewind_removes_the_rewound_turns(tmp_path: Path) -> None:
    path = tmp_path / "events.jsonl"
    path.write_text("".join(json.dumps(e) + "\n" for e in rewound_session(3)), encoding="utf-8")
    ctx = compactkit.load_one(path)
    assert [m.text for m in ctx.messages if m.is_human] == [
        "rename the module to auth_core",
        "keep the old tests, add new ones instead",
    ]
    assert not [b for m in ctx.messages for b in m.content if b.type == "tool_call"]
    assert [m.text for m in ctx.messages if m.role == "assistant"] == ["Done.", "Added."]
    skipped = ctx.metadata["skipped_records"]
    assert isinstance(skipped, dict)
    assert skipped["rewound/user.message"] == 1 and skipped["rewound/assistant.message"] == 1
    assert len(ctx.metadata["copilot_rewound"]) == 3
    result = CliRunner().invoke(CLI, ["run", str(path), "--budget", "20000", "-o", "-"])
    assert result.exit_code == 0, result.output


def test_a_rewind_that_counts_its_target_removes_it_too(tmp_path: Path) -> None:
    """`eventsRemoved` one more than the events after the target: the target went too."""
    path = tmp_path / "events.jsonl"
    path.write_text("".join(json.dumps(e) + "\n" for e in rewound_session(4)), encoding="utf-8")
    ctx = compactkit.load_one(path)
    assert [m.text for m in ctx.messages if m.role == "assistant"] == ["Added."]
    assert [m.text for m in ctx.messages if m.is_human] == [
        "rename the module to auth_core",
        "keep the old tests, add new ones instead",
    ]


def test_a_rewind_to_an_unknown_event_removes_nothing(tmp_path: Path) -> None:
    events = rewound_session(3)
    events[6]["data"]["upToEventId"] = "not-in-this-file"
    path = tmp_path / "events.jsonl"
    path.write_text("".join(json.dumps(e) + "\n" for e in events), encoding="utf-8")
    ctx = compactkit.load_one(path)
    assert len([m for m in ctx.messages if m.is_human]) == 3
    assert "copilot_rewound" not in ctx.metadata


def chat_call(call_id: str, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    """One `tool_calls` entry of a chat-completions assistant message."""
    function = {"name": name, "arguments": json.dumps(arguments)}
    return {"id": call_id, "type": "function", "function": function}


# an older CLI's ~/.copilot/history-session-state/<id>.json: the session as one object whose
# chatMessages are the chat-completions messages it sent, beside a display timeline
HISTORY_STATE = dict(
    sessionId="3f0a9c2e-7b1d-4e55-9a61-0c2d4e6f8a10",
    startTime="2025-10-08T21:10:16.398Z",
    chatMessages=[
        {"role": "system", "content": "You are the GitHub Copilot CLI."},
        {"role": "user", "content": "please add mcp servers"},
        {
            "role": "assistant",
            "content": "",
            "tool_calls": [chat_call("toolu_v1", "str_replace_editor", {"path": "/x"})],
        },
        {"role": "tool", "tool_call_id": "toolu_v1", "content": "file contents here"},
        {"role": "assistant", "content": "Added two servers."},
        {"role": "user", "content": "thanks"},
    ],
    timeline=[{"id": "t1", "type": "user", "text": "please add mcp servers"}],
)


def test_an_older_history_session_state_file_loads(tmp_path: Path) -> None:
    folder = tmp_path / "history-session-state"
    folder.mkdir()
    path = folder / f"{HISTORY_STATE['sessionId']}.json"
    path.write_text(json.dumps(HISTORY_STATE), encoding="utf-8")
    ctx = compactkit.load_one(path)
    assert ctx.metadata["source_format"] == "copilot-cli"
    assert ctx.metadata["session_id"] == HISTORY_STATE["sessionId"]
    assert ctx.system_instruction == "You are the GitHub Copilot CLI."
    assert [m.text for m in ctx.messages if m.is_human] == ["please add mcp servers", "thanks"]
    results = {r.tool_call_id: r.text for m in ctx.messages for r in m.tool_results}
    assert results == {"toolu_v1": "file contents here"}
    assert pairing_problems(ctx) == []
    result = CliRunner().invoke(CLI, ["inspect", str(path)])
    assert result.exit_code == 0, result.output
    assert "copilot-cli" in result.output


def test_a_history_session_state_file_without_messages_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "empty.json"
    path.write_text(json.dumps(dict(HISTORY_STATE, chatMessages=[])), encoding="utf-8")
    result = CliRunner().invoke(CLI, ["inspect", str(path)])
    assert result.exit_code == 2
    assert "history-session-state file with no messages" in result.output
    assert "Traceback" not in result.output
