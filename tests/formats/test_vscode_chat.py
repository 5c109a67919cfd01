"""VS Code chat sessions, written after microsoft/vscode `src/vs/workbench/contrib/chat/common/`:
`model/chatModel.ts` at 8c0354598aa91fc764e1b00707fcc376250e1cc6 (`ISerializableChatData` 1 to 3,
`ISerializableChatRequestData`, `ChatModel.toExport` / `toJSON`: markdown parts stored as the
markdown string itself), `chatService.ts` (`IChatToolInvocationSerialized`,
`IToolResultInputOutputDetails`, `ToolConfirmKind`), `model/chatSessionOperationLog.ts` at
98227ed5a5f50a4ef316aa545f8606850e41778a and `model/objectMutationLog.ts` at
ce1580aa66c166f369325f5dcaa55db7701cf6cc (the `.jsonl` mutation log), and the `result.metadata`
Copilot Chat returns (microsoft/vscode-copilot-chat `src/extension/prompt/common/conversation.ts`
at 9ef5db9935dc6fd2bf51a2c8b3bf7b787708f1b3: `toolCallRounds`, `toolCallResults` as serialized
`LanguageModelToolResult`s with text and prompt-tsx parts, `renderedUserMessage`, `summary`)."""

from __future__ import annotations

import copy
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
SESSION = "9b1c2d3e-4f50-4a6b-8c7d-8e9fa0b1c2d3"
TASK = "rename getUser to fetchUser across the repo"
ASK = "what does fetchUser return?"
UNDONE = "also delete the old tests"
LISTING = "src/api.ts:3: export function getUser()\nsrc/app.ts:9: getUser(id)"
EDITED = "The following files were successfully edited:\nsrc/api.ts"
SUMMARY = "The user asked to rename getUser; src/api.ts is done."


def _md(text: str) -> dict[str, Any]:
    return {"value": text, "supportThemeIcons": False, "supportHtml": False}


def _text_part(text: str) -> dict[str, Any]:
    return {"$mid": 21, "value": text}


def _tsx_part(*lines: str) -> dict[str, Any]:
    children = [
        {"type": 2, "priority": 9007199254740991, "text": line, "lineBreakBefore": n > 0}
        for n, line in enumerate(lines)
    ]
    return {"$mid": 23, "value": {"node": {"type": 1, "ctor": 2, "children": children}}}


def _call(call_id: str, name: str, **arguments: Any) -> dict[str, Any]:
    return {"id": call_id, "name": name, "arguments": json.dumps(arguments)}


def _request(n: int, text: str, **more: Any) -> dict[str, Any]:
    return {
        "requestId": f"request_{n}",
        "message": {"text": text, "parts": [{"kind": "text", "text": text}]},
        "variableData": {"variables": []},
        "response": [],
        "responseId": f"response_{n}",
        "timestamp": 1767225600000 + n * 60_000,
        "modelId": "copilot/claude-sonnet-4",
        "agent": {"id": "github.copilot.editsAgent"},
        "modelState": {"value": 1, "completedAt": 1767225600000 + n * 60_000 + 5_000},
        **more,
    }


SEARCH = _call("toolu_1__vscode-1", "copilot_searchCodebase", query="getUser")
EDIT = _call("toolu_2__vscode-2", "copilot_replaceString", filePath="src/api.ts")
LAST = _call("toolu_3__vscode-3", "copilot_replaceString", filePath="src/app.ts")
AGENT = _request(
    1,
    TASK,
    variableData={"variables": [{"id": "file:///w/src/api.ts", "name": "api.ts", "kind": "file"}]},
    response=[
        _md("Searching."),
        {
            "kind": "toolInvocationSerialized",
            "toolId": "copilot_searchCodebase",
            "toolCallId": "toolu_1",
            "invocationMessage": _md("Searching for getUser"),
            "isConfirmed": {"type": 1},
            "isComplete": True,
        },
        _md("Renaming."),
    ],
    result={
        "timings": {"firstProgress": 900, "totalElapsed": 9000},
        "metadata": {
            "renderedUserMessage": [
                {"type": 1, "text": f"<attachments>api.ts</attachments>\n<userRequest>{TASK}"},
                {"type": 3, "cacheType": "ephemeral"},
            ],
            "toolCallRounds": [
                {
                    "id": "round-1",
                    "response": "Searching.",
                    "toolCalls": [SEARCH],
                    "toolInputRetry": 0,
                    "thinking": {"id": "t1", "text": ["Find the ", "callers."]},
                },
                {
                    "id": "round-2",
                    "response": "Renaming.",
                    "toolCalls": [EDIT],
                    "toolInputRetry": 0,
                },
                {"id": "round-3", "response": "Done with api.ts.", "toolCalls": []},
            ],
            "toolCallResults": {
                SEARCH["id"]: {"$mid": 20, "content": [_text_part(LISTING)]},
                EDIT["id"]: {"$mid": 20, "content": [_tsx_part(*EDITED.split("\n"))]},
            },
            "summary": {"toolCallRoundId": "round-2", "text": SUMMARY},
        },
    },
)
ASKED = _request(
    2,
    ASK,
    response=[
        _md("It returns a "),
        _md("`Promise<User>`."),
        {"kind": "inlineReference", "inlineReference": {"path": "/w/src/api.ts"}},
    ],
    result={"timings": {"totalElapsed": 1200}},
)
REMOVED = _request(3, UNDONE, shouldBeRemovedOnSend={"requestId": "request_3"})
PANEL = _request(
    4,
    "now src/app.ts",
    response=[
        {
            "kind": "toolInvocationSerialized",
            "toolId": "copilot_runInTerminal",
            "toolCallId": "term-1",
            "invocationMessage": "Running npm test",
            "isConfirmed": {"type": 4},
            "isComplete": True,
            "resultDetails": {
                "input": json.dumps({"command": "npm test"}),
                "output": [{"type": "embed", "isText": True, "value": "2 failing"}],
                "isError": True,
            },
        },
        {
            "kind": "toolInvocationSerialized",
            "toolId": "copilot_deleteFile",
            "toolCallId": "del-1",
            "invocationMessage": "Delete src/old.test.ts",
            "isConfirmed": {"type": 0},
            "isComplete": True,
            "toolSpecificData": {"kind": "input", "rawInput": {"path": "src/old.test.ts"}},
        },
        _md("The tests fail; I will not delete the file."),
        {
            "kind": "toolInvocationSerialized",
            "toolId": "copilot_replaceString",
            "toolCallId": LAST["id"],
            "invocationMessage": "Editing src/app.ts",
            "isConfirmed": None,
            "isComplete": False,
        },
    ],
)
REQUESTS = [AGENT, ASKED, REMOVED, PANEL]


def stored(requests: list[dict[str, Any]] = REQUESTS) -> dict[str, Any]:
    """What `ChatModel.toJSON` writes (version 3)."""
    return {
        "version": 3,
        "sessionId": SESSION,
        "creationDate": 1767225600000,
        "customTitle": "Rename getUser",
        "initialLocation": "panel",
        "responderUsername": "GitHub Copilot",
        "requests": requests,
        "hasPendingEdits": False,
    }


def _folder(folder: Path) -> Path:
    path = folder / "workspaceStorage" / "3f2a9c" / "chatSessions"
    path.mkdir(parents=True, exist_ok=True)
    return path


def json_session(folder: Path) -> Path:
    path = _folder(folder) / f"{SESSION}.json"
    path.write_text(json.dumps(stored(), indent=2), encoding="utf-8")
    return path


def oldest(folder: Path) -> Path:
    """An ask-mode request of the oldest data: the response one string (`readSession` wraps it
    in a markdown string), its error under the old `responseErrorDetails` key."""
    data = stored([_request(1, ASK, response="It returns a `Promise<User>`.")])
    data["requests"][0]["responseErrorDetails"] = {"message": "Rate limited"}
    path = _folder(folder / "oldest") / f"{SESSION}.json"
    path.write_text(json.dumps(data), encoding="utf-8")
    return path


def version_1(folder: Path) -> Path:
    """An early session (`ISerializableChatData1`): no `version`, the message a plain string,
    markdown parts as strings, a tool call confirmed with a boolean (before VS Code 1.104)."""
    old = copy.deepcopy(PANEL)
    old["message"] = old["message"]["text"]
    old["isHidden"] = False
    for part in old["response"]:
        if part.get("kind") == "toolInvocationSerialized" and part["toolCallId"] != LAST["id"]:
            part["isConfirmed"] = part["toolCallId"] == "term-1"
    old["response"][2] = "The tests fail; I will not delete the file."
    data = stored([old])
    del data["version"], data["customTitle"]
    data.update(requesterUsername="dev", isImported=False)
    path = _folder(folder / "v1") / f"{SESSION}.json"
    path.write_text(json.dumps(data, indent=2), encoding="utf-8")
    return path


def log_session(folder: Path) -> Path:
    """The same session as the `.jsonl` mutation log writes it: the first state, then each request
    pushed, its response and result set as they stream, a later title."""
    first = stored([])
    del first["customTitle"]
    entries: list[dict[str, Any]] = [{"kind": 0, "v": first}]
    for n, request in enumerate(REQUESTS):
        streaming = {**request, "response": request["response"][:1], "modelState": {"value": 0}}
        streaming.pop("result", None)
        entries.append({"kind": 2, "k": ["requests"], "v": [streaming]})
        entries.append(
            {"kind": 2, "k": ["requests", n, "response"], "v": request["response"], "i": 0}
        )
        if "result" in request:
            entries.append({"kind": 1, "k": ["requests", n, "result"], "v": request["result"]})
        entries.append({"kind": 1, "k": ["requests", n, "modelState"], "v": request["modelState"]})
    entries.append({"kind": 1, "k": ["customTitle"], "v": "Rename getUser"})
    entries.append({"kind": 3, "k": ["hasPendingEdits"]})
    entries.append({"kind": 9, "k": ["x"], "v": 1})  # a kind this reader does not know
    path = _folder(folder / "log") / f"{SESSION}.jsonl"
    path.write_text("".join(json.dumps(e) + "\n" for e in entries), encoding="utf-8")
    return path


def samples(folder: Path) -> list[Path]:
    return [json_session(folder), version_1(folder), log_session(folder), oldest(folder)]


def test_an_agent_mode_session_loads_the_rounds_copilot_sent(tmp_path: Path) -> None:
    path = json_session(tmp_path)
    assert [f.name for f in detect_formats(read_session(path))] == ["vscode-chat"]
    ctx = compactkit.load_one(path)
    assert ctx.metadata["session_id"] == SESSION and ctx.metadata["title"] == "Rename getUser"
    assert ctx.metadata["model"] == "copilot/claude-sonnet-4"
    assert [m.text for m in ctx.messages if m.is_human] == [TASK, ASK, "now src/app.ts"]
    first = ctx.messages[0]
    assert first.metadata["attachments"] == ["api.ts"]
    assert "<userRequest>" in first.metadata["rendered_user_message"]
    thinking = ctx.messages[1].content[0]
    assert thinking.type == "thinking" and thinking.thinking == "Find the callers."
    results = {r.tool_call_id: (r.text, r.is_error) for m in ctx.messages for r in m.tool_results}
    assert results[SEARCH["id"]] == (LISTING, False)
    assert results[EDIT["id"]] == (EDITED, False)
    assert results["term-1"] == ("2 failing", True)
    assert results["del-1"] == ("", True)  # denied by the user
    assert [m.text for m in ctx.messages if m.origin == "summary"] == [SUMMARY]
    answer = [m for m in ctx.messages if m.role == "assistant" and "Promise" in m.text]
    assert [m.text for m in answer] == ["It returns a `Promise<User>`."]
    assert ctx.messages[-1].tool_calls[0].id == LAST["id"]  # the last call stays pending
    assert UNDONE not in [m.text for m in ctx.messages]
    assert ctx.metadata["vscode_removed_requests"] == ["request_3"]
    assert ctx.metadata["skipped_records"] == {
        "panel/markdownContent": 2,
        "panel/toolInvocationSerialized": 1,
        "panel/inlineReference": 1,
        "request (removed)": 1,
    }
    assert pairing_problems(ctx) == [] and compactkit.validate(ctx) == []
    assert "format=vscode-chat" in inspect_output(path)


def test_the_mutation_log_loads_the_same_conversation(tmp_path: Path) -> None:
    whole, _, log, _ = samples(tmp_path)
    assert [f.name for f in detect_formats(read_session(log))] == ["vscode-chat"]
    ctx, replayed = compactkit.load_one(whole), compactkit.load_one(log)
    assert replayed.messages == ctx.messages
    assert replayed.metadata["title"] == "Rename getUser"
    assert replayed.metadata["skipped_records"] == {
        **ctx.metadata["skipped_records"],
        "log/9": 1,
    }


def test_a_version_1_session_loads_its_panel_record(tmp_path: Path) -> None:
    ctx = compactkit.load_one(version_1(tmp_path))
    assert [m.text for m in ctx.messages if m.is_human] == ["now src/app.ts"]
    results = {r.tool_call_id: (r.text, r.is_error) for m in ctx.messages for r in m.tool_results}
    assert results == {"term-1": ("2 failing", True), "del-1": ("", True)}
    assert "vscode_version" not in ctx.metadata
    assert pairing_problems(ctx) == [] and compactkit.validate(ctx) == []


def test_a_log_line_that_is_not_json_is_refused_as_vscode_refuses_it(tmp_path: Path) -> None:
    """`ObjectMutationLog.read` parses every line; one that is not JSON fails the session."""
    log = log_session(tmp_path)
    lines = log.read_text(encoding="utf-8").splitlines(keepends=True)
    log.write_text("".join([*lines[:3], '{"kind": 1, "k": ["cust\n', *lines[3:]]), encoding="utf-8")
    result = CliRunner().invoke(CLI, ["inspect", str(log)])
    assert result.exit_code == 2 and result.stderr.count("\n") == 1
    assert f"{log}:4" in result.stderr


def test_a_round_without_its_result_in_the_metadata_takes_the_panels(tmp_path: Path) -> None:
    """A call whose `toolCallResults` entry is missing is answered by what the chat panel recorded
    of it (`resultDetails` of the `toolInvocationSerialized` part with its id), not synthesized."""
    agent = copy.deepcopy(AGENT)
    del agent["result"]["metadata"]["toolCallResults"][EDIT["id"]]
    agent["response"].append(
        {
            "kind": "toolInvocationSerialized",
            "toolId": "copilot_replaceString",
            "toolCallId": EDIT["id"],
            "invocationMessage": "Editing src/api.ts",
            "isConfirmed": {"type": 1},
            "isComplete": True,
            "resultDetails": {
                "input": EDIT["arguments"],
                "output": [{"type": "embed", "isText": True, "value": "edited src/api.ts"}],
            },
        }
    )
    path = _folder(tmp_path) / f"{SESSION}.json"
    path.write_text(json.dumps(stored([agent])), encoding="utf-8")
    ctx = compactkit.load_one(path)
    results = {r.tool_call_id: r.text for m in ctx.messages for r in m.tool_results}
    assert results == {SEARCH["id"]: LISTING, EDIT["id"]: "edited src/api.ts"}
    assert "synthesized_results" not in ctx.metadata
    assert pairing_problems(ctx) == [] and compactkit.validate(ctx) == []


def test_later_releases_system_requests_are_harness_and_queued_ones_load_last(
    tmp_path: Path,
) -> None:
    """Later `chatSessionOperationLog.ts` schemas add `isSystemInitiated` / `systemInitiatedLabel`
    to a request and `pendingRequests` (`{id, request, kind, sendOptions}`) to the session: what
    VS Code sent itself is not the user's words; what the user queued is, not sent yet."""
    system = _request(5, "The terminal command finished.", isSystemInitiated=True)
    system["systemInitiatedLabel"] = "Terminal notification"
    queued = {"id": "request_6", "request": _request(6, "then update the docs"), "kind": 1}
    first = {**stored([AGENT]), "pendingRequests": []}
    entries = [
        {"kind": 0, "v": first},
        {"kind": 2, "k": ["requests"], "v": [system]},
        {"kind": 2, "k": ["pendingRequests"], "v": [queued]},
    ]
    path = _folder(tmp_path) / f"{SESSION}.jsonl"
    path.write_text("".join(json.dumps(e) + "\n" for e in entries), encoding="utf-8")
    ctx = compactkit.load_one(path)
    users = [(m.text, m.origin) for m in ctx.messages if m.role == "user" and m.origin != "summary"]
    assert users == [
        (TASK, None),
        ("The terminal command finished.", "harness"),
        ("then update the docs", None),
    ]
    last = ctx.messages[-1]
    assert last.metadata["vscode_pending"] == 1 and last.is_human
    notice = next(m for m in ctx.messages if m.origin == "harness")
    assert notice.metadata["vscode_system_label"] == "Terminal notification"
    assert pairing_problems(ctx) == [] and compactkit.validate(ctx) == []


def test_the_oldest_response_string_is_the_assistants_text(tmp_path: Path) -> None:
    ctx = compactkit.load_one(oldest(tmp_path))
    assert [(m.role, m.text) for m in ctx.messages] == [
        ("user", ASK),
        ("assistant", "It returns a `Promise<User>`."),
    ]
    assert ctx.messages[1].metadata["vscode_error"] == "Rate limited"
