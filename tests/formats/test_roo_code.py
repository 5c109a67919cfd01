"""Roo Code task folders as Roo Code writes them today (RooCodeInc/Roo-Code at
cb836567180a3ff1da6d082f3178b90c3bd22a70): `api_conversation_history.json`, the `ApiMessage` array
of `src/core/task-persistence/apiMessages.ts` (native `tool_use` / `tool_result` blocks; the task
and feedback in `<user_message>` tags, `src/core/task/Task.ts` and
`src/core/tools/AttemptCompletionTool.ts`; JSON results of `src/core/prompts/responses.ts`,
`toolDeniedWithFeedback`; `reasoning_content` and `reasoning_details`; the sliding-window
truncation of `src/core/context-management/index.ts`, `truncateConversation`: hidden messages
tagged `truncationParent`, a marker with `isTruncationMarker` and `truncationId`; the condense
summary of `src/core/condense/index.ts`, its content several text blocks), beside
`ui_messages.json`, the `ClineMessage`s of `packages/types/src/message.ts` (`contextCondense`,
`contextTruncation`, `isProtected`, `apiProtocol`, `isAnswered`). Read by the cline reader."""

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

CLI = make_cli(lambda: make_registry(entry_points=False))
TASK = "fix the flaky test in api.spec.ts"
FEEDBACK = "use fake timers instead"
AFTER = "also run it 20 times"
ENV = "<environment_details>\n# Current Time\n2026-04-14T18:00:00Z\n</environment_details>"


def _text(value: str) -> dict[str, str]:
    return {"type": "text", "text": value}


def _use(call_id: str, name: str, **arguments: Any) -> dict[str, Any]:
    return {"type": "tool_use", "id": call_id, "name": name, "input": arguments}


def _result(call_id: str, content: Any) -> dict[str, Any]:
    return {"type": "tool_result", "tool_use_id": call_id, "content": content}


DENIED = json.dumps({"status": "denied", "feedback": FEEDBACK})
HISTORY: list[dict[str, Any]] = [
    {
        "role": "user",
        "content": [_text(f"<user_message>\n{TASK}\n</user_message>"), _text(ENV)],
        "ts": 1,
    },
    {
        "role": "assistant",
        "content": [_text("Reading it."), _use("toolu_01", "read_file", path="api.spec.ts")],
        "ts": 2,
        "reasoning_content": "The flake is probably timing.",
        "truncationParent": "t-1",
    },
    {
        "role": "user",
        "content": [
            _result("toolu_01", [_text("1 | it('retries', async () => {...})")]),
            _text(ENV),
        ],
        "ts": 3,
        "truncationParent": "t-1",
    },
    {
        "role": "user",
        "content": "[Sliding window truncation: 2 messages hidden to reduce context]",
        "ts": 4,
        "isTruncationMarker": True,
        "truncationId": "t-1",
    },
    {
        "role": "assistant",
        "content": [_use("toolu_02", "apply_diff", path="api.spec.ts", diff="...")],
        "ts": 5,
        "reasoning_details": [
            {"type": "reasoning.text", "text": "Patch the wait.", "format": "unknown"}
        ],
        "condenseParent": "c-1",
    },
    {
        "role": "user",
        "content": [_result("toolu_02", DENIED), _text(ENV)],
        "ts": 6,
        "condenseParent": "c-1",
    },
    {
        "role": "user",
        "content": [
            _text("## Conversation Summary\nThe user wants api.spec.ts fixed with fake timers."),
            _text(
                "<system-reminder>\n## File Context\napi.spec.ts: it('retries')\n</system-reminder>"
            ),
        ],
        "ts": 7,
        "isSummary": True,
        "condenseId": "c-1",
    },
    {
        "role": "assistant",
        "content": [_use("toolu_03", "attempt_completion", result="Done.")],
        "ts": 8,
    },
    {
        "role": "user",
        "content": [_result("toolu_03", f"<user_message>\n{AFTER}\n</user_message>"), _text(ENV)],
        "ts": 9,
    },
    {
        "role": "assistant",
        "content": [_use("toolu_04", "execute_command", command="npx jest -i")],
        "ts": 10,
    },
]
UI: list[dict[str, Any]] = [
    {"ts": 1, "type": "say", "say": "text", "text": TASK},
    {"ts": 2, "type": "say", "say": "api_req_started", "text": "{}", "apiProtocol": "anthropic"},
    {
        "ts": 4,
        "type": "say",
        "say": "sliding_window_truncation",
        "contextTruncation": {
            "truncationId": "t-1",
            "messagesRemoved": 2,
            "prevContextTokens": 9000,
            "newContextTokens": 4000,
        },
    },
    {
        "ts": 5,
        "type": "ask",
        "ask": "tool",
        "text": '{"tool":"appliedDiff"}',
        "isProtected": False,
        "isAnswered": True,
    },
    {
        "ts": 7,
        "type": "say",
        "say": "condense_context",
        "contextCondense": {
            "cost": 0.01,
            "prevContextTokens": 9000,
            "newContextTokens": 800,
            "summary": "...",
        },
    },
]


def task_folder(folder: Path, history: list[dict[str, Any]] = HISTORY) -> Path:
    task = folder / "tasks" / "0196f1a2-7b3c-7d4e-8f5a-6b7c8d9e0f1a"
    task.mkdir(parents=True, exist_ok=True)
    (task / "api_conversation_history.json").write_text(json.dumps(history), encoding="utf-8")
    (task / "ui_messages.json").write_text(json.dumps(UI), encoding="utf-8")
    return task


def test_a_roo_code_task_of_today_loads_every_word_and_pairs_every_call(tmp_path: Path) -> None:
    path = task_folder(tmp_path) / "api_conversation_history.json"
    assert [f.name for f in detect_formats(read_session(path))] == ["cline"]
    ctx = compactkit.load_one(path)
    said = [b.text for m in ctx.messages if m.is_human for b in m.content if b.type == "text"]
    assert [t for t in said if not t.startswith("<environment_details>")] == [
        f"<user_message>\n{TASK}\n</user_message>",
        f"<user_message>\n{AFTER}\n</user_message>",
    ]
    pinned = {(p.message, p.reason, p.chars) for p in ctx.pins}
    denied = next(r for m in ctx.messages for r in m.tool_results if r.tool_call_id == "toolu_02")
    assert denied.is_error and FEEDBACK in denied.text
    at = next(n for n, m in enumerate(ctx.messages) if denied in m.tool_results)
    assert (at, "user-feedback", len(DENIED)) in pinned
    thoughts = [b.thinking for m in ctx.messages for b in m.content if b.type == "thinking"]
    assert thoughts == ["The flake is probably timing.", "Patch the wait."]
    marker = next(m for m in ctx.messages if m.metadata.get("isTruncationMarker"))
    assert marker.origin == "harness" and marker.metadata["truncationId"] == "t-1"
    assert [m.metadata.get("truncationParent") for m in ctx.messages[1:3]] == ["t-1", "t-1"]
    summary = next(m for m in ctx.messages if m.origin == "summary")
    assert summary.text.startswith("## Conversation Summary") and "File Context" in summary.text
    assert ctx.messages[-1].tool_calls[0].id == "toolu_04"  # pending
    assert pairing_problems(ctx) == [] and compactkit.validate(ctx) == []


def test_the_task_folder_loads_its_history_and_the_panel_record_is_refused(tmp_path: Path) -> None:
    task = task_folder(tmp_path)
    from_folder = compactkit.load_one(task)
    assert (
        from_folder.messages == compactkit.load_one(task / "api_conversation_history.json").messages
    )
    result = CliRunner().invoke(CLI, ["inspect", str(task / "ui_messages.json")])
    assert result.exit_code == 2 and result.stderr.count("\n") == 1
    assert str(task / "api_conversation_history.json") in result.stderr


def test_the_history_under_its_first_name_loads_too(tmp_path: Path) -> None:
    """`readApiMessages` still reads `claude_messages.json`, the file's name before the rename."""
    task = task_folder(tmp_path)
    old = task / "claude_messages.json"
    (task / "api_conversation_history.json").rename(old)
    assert compactkit.load_one(old).messages == compactkit.load_one(task).messages
