"""Continue sessions, written after continuedev/continue at commit
d0a3c0b626b5bebc3bef4742eec05a0242be0bab: `core/util/history.ts` (`HistoryManager.save`: the
session file `{sessionId, title, workspaceDirectory, history, mode, chatModelTitle}` and the
`sessions.json` index), `core/index.d.ts` (`ChatHistoryItem`, `ChatMessage`, `ToolCallState`) and
`gui/src/redux/util/constructMessages.ts` (what the model is sent: context items before the
user's text, a tool message per `toolCallStates` entry, the `conversationSummary`). The older
history (one `toolCallState` per item, July 2025 and before) is the same session as
`e34d71e6`'s parent wrote it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from click.testing import CliRunner

import compactkit
from compactkit.cli import make_cli
from compactkit.formats.loading import detect_formats, read_session
from compactkit.registry import make_registry
from tests.formats._checks import pairing_problems
from tests.formats._inspect import inspect_output

CLI = make_cli(lambda: make_registry(entry_points=False))
SESSION = "5f0c1d2e-3a4b-4c5d-8e6f-708192a3b4c5"
TASK = "why does the login form submit twice?"
FOLLOW_UP = "good, now add a test for it"
FILE = "```src/Login.tsx\nexport function Login() { ... }\n```"


def _call(call_id: str, name: str, **arguments: Any) -> dict[str, Any]:
    return {
        "id": call_id,
        "type": "function",
        "function": {"name": name, "arguments": json.dumps(arguments)},
    }


def _state(call: dict[str, Any], status: str, *output: dict[str, Any]) -> dict[str, Any]:
    state: dict[str, Any] = {
        "toolCallId": call["id"],
        "toolCall": call,
        "status": status,
        "parsedArgs": json.loads(call["function"]["arguments"]),
    }
    if output:
        state["output"] = list(output)
    return state


def _item(message: dict[str, Any], **more: Any) -> dict[str, Any]:
    return {"message": message, "contextItems": [], **more}


READ = _call("call_1", "read_file", filepath="src/Login.tsx")
RUN = _call("call_2", "run_terminal_command", command="npm test -- Login")
EDIT = _call("call_3", "edit_existing_file", filepath="src/Login.tsx")
WRITE = _call("call_4", "create_new_file", filepath="src/Login.test.tsx")
HISTORY: list[dict[str, Any]] = [
    _item(
        {"role": "user", "content": [{"type": "text", "text": TASK}]},
        contextItems=[
            {
                "content": FILE,
                "name": "Login.tsx",
                "description": "src/Login.tsx",
                "id": {"providerTitle": "file", "itemId": "src/Login.tsx"},
                "uri": {"type": "file", "value": "file:///home/dev/app/src/Login.tsx"},
            }
        ],
    ),
    _item({"role": "thinking", "content": "The handler may be bound twice.", "signature": "sig"}),
    _item(
        {"role": "assistant", "content": "Let me look.", "toolCalls": [READ, RUN]},
        toolCallStates=[
            _state(READ, "done", {"content": FILE, "name": "Login.tsx", "description": ""}),
            _state(
                RUN,
                "done",
                {"content": "1 failing", "name": "Terminal", "description": "", "status": "exit 1"},
            ),
        ],
    ),
    _item({"role": "tool", "content": FILE, "toolCallId": "call_1"}),
    _item({"role": "tool", "content": "1 failing", "toolCallId": "call_2"}),
    _item(
        {"role": "assistant", "content": "", "toolCalls": [EDIT]},
        toolCallStates=[_state(EDIT, "canceled")],
        conversationSummary="The login form binds onSubmit twice; the user stopped the edit.",
    ),
    _item({"role": "user", "content": FOLLOW_UP}),
    _item({"role": "system", "content": "You are in agent mode."}),
    _item(
        {
            "role": "assistant",
            "content": [{"type": "text", "text": "Writing it."}],
            "toolCalls": [WRITE],
        },
        toolCallStates=[_state(WRITE, "generated")],
    ),
    {"message": {"role": "critic", "content": "?"}, "contextItems": []},
]


def session(folder: Path, history: list[dict[str, Any]] = HISTORY) -> Path:
    path = folder / ".continue" / "sessions" / f"{SESSION}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    data = {
        "sessionId": SESSION,
        "title": "Login form submits twice",
        "workspaceDirectory": "file:///home/dev/app",
        "history": history,
        "mode": "agent",
        "chatModelTitle": "Claude Sonnet 4",
    }
    path.write_text(json.dumps(data, indent=2), encoding="utf-8")
    index = path.with_name("sessions.json")
    entry = {
        "sessionId": SESSION,
        "title": data["title"],
        "dateCreated": "1767225600000",
        "workspaceDirectory": data["workspaceDirectory"],
        "messageCount": 3,
    }
    index.write_text(json.dumps([entry], indent=2), encoding="utf-8")
    return path


def older(folder: Path) -> Path:
    """The same session as Continue wrote it before parallel tool calls: one `toolCallState`
    per assistant item, and a result only as a `tool` item (`call_2`)."""
    history = json.loads(json.dumps(HISTORY))
    for item in history:
        states = item.pop("toolCallStates", None)
        if states:
            item["toolCallState"] = states[0]
    return session(folder / "older", history)


def samples(folder: Path) -> list[Path]:
    return [session(folder / "new"), older(folder)]


def test_a_continue_session_loads_as_constructmessages_sends_it(tmp_path: Path) -> None:
    path = session(tmp_path)
    assert [f.name for f in detect_formats(read_session(path))] == ["continue"]
    ctx = compactkit.load_one(path)
    assert ctx.metadata["session_id"] == SESSION and ctx.metadata["model"] == "Claude Sonnet 4"
    assert ctx.metadata["title"] == "Login form submits twice"
    assert ctx.metadata["cwd"] == "file:///home/dev/app"
    assert [m.text for m in ctx.messages if m.is_human] == [TASK, FOLLOW_UP]
    attached = ctx.messages[0]
    assert attached.origin == "harness" and attached.text == FILE
    assert attached.metadata["context_items"] == ["Login.tsx"]
    first = ctx.messages[2]
    assert first.role == "assistant" and first.content[0].type == "thinking"
    assert [c.id for c in first.tool_calls] == ["call_1", "call_2"]
    results = {r.tool_call_id: (r.text, r.is_error) for m in ctx.messages for r in m.tool_results}
    assert results == {
        "call_1": (FILE, False),
        "call_2": ("1 failing\n[Status: exit 1]", False),
        "call_3": ("The user cancelled this tool call.", True),
        "call_4": ("No tool output", False),
    }
    summaries = [m for m in ctx.messages if m.origin == "summary"]
    assert [m.text for m in summaries] == [HISTORY[5]["conversationSummary"]]
    assert ctx.metadata["skipped_records"] == {
        "message/critic": 1,
        "message/system": 1,
        "message/tool": 2,
    }
    assert pairing_problems(ctx) == [] and compactkit.validate(ctx) == []
    assert "format=continue" in inspect_output(path)


def test_an_older_history_with_one_state_per_item_loads_the_same_words(tmp_path: Path) -> None:
    new, old = samples(tmp_path)
    ctx, before = compactkit.load_one(new), compactkit.load_one(old)
    assert [m.text for m in before.messages if m.is_human] == [TASK, FOLLOW_UP]
    results = {r.tool_call_id: r.text for m in before.messages for r in m.tool_results}
    assert results["call_2"] == "1 failing"  # from the tool item: no state answers it
    assert pairing_problems(before) == [] and compactkit.validate(before) == []
    assert len(before.messages) == len(ctx.messages)


def test_the_index_is_refused_in_one_line_naming_the_session_files(tmp_path: Path) -> None:
    index = session(tmp_path).with_name("sessions.json")
    result = CliRunner().invoke(CLI, ["inspect", str(index)])
    assert result.exit_code == 2 and result.stderr.count("\n") == 1
    assert "this is Continue's session index (sessions.json, 1 sessions)" in result.stderr
    assert "<id>.json" in result.stderr


def test_a_session_with_no_messages_is_refused(tmp_path: Path) -> None:
    path = session(tmp_path, [_item({"role": "system", "content": "x"})])
    result = CliRunner().invoke(CLI, ["inspect", str(path)])
    assert result.exit_code == 2 and result.stderr.count("\n") == 1
    assert "a Continue session with no messages" in result.stderr


def test_a_cn_cli_session_after_compaction_keeps_its_summary_once(tmp_path: Path) -> None:
    """The `cn` CLI saves through the same `HistoryManager`, its system item left out
    (`extensions/cli/src/session.ts`, `modifySessionBeforeSave`: user items carry `editorState`);
    its compaction (`extensions/cli/src/compaction.ts`) leaves an assistant item whose content
    and `conversationSummary` are the summary."""
    said = "Summary: the login form binds onSubmit twice."
    history = [
        _item({"role": "assistant", "content": said}, conversationSummary=said),
        _item({"role": "user", "content": FOLLOW_UP}, editorState=FOLLOW_UP),
        _item({"role": "assistant", "content": "On it."}),
    ]
    ctx = compactkit.load_one(session(tmp_path, history))
    assert [m.text for m in ctx.messages] == [said, FOLLOW_UP, "On it."]
    assert ctx.messages[0].metadata["continue_summary"] is True
    assert [m.text for m in ctx.messages if m.is_human] == [FOLLOW_UP]
