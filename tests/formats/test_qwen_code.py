"""Qwen Code chats, records shaped after its writer (QwenLM/qwen-code
`packages/core/src/services/chatRecordingService.ts`, `ChatRecord`, commit
015346f1d5d7312fddaf84a7ef1f83c7d217d389) and read as its resume reads them
(`buildApiHistoryFromConversation`): `uuid` / `parentUuid` chains, Gemini API `Content` in
`message`, `tool_result` records of `functionResponse` parts, system records, a rewound branch,
a `chat_compression` checkpoint."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import compactkit
from compactkit.formats.loading import detect_formats, read_session
from compactkit.registry import make_registry
from tests.formats._checks import pairing_problems
from tests.formats._inspect import inspect_output

SESSION = "7d2f4a10-5b6c-4d8e-9f01-23456789abcd"
TASK = "why does `npm test` fail on node 22?"
SECOND = "ok, pin node 20 in .nvmrc"
REWOUND = "actually, drop node 18 support"
ANSWER = "**CI**: No, only node 20 and 22"
ANSWERED = f"User has provided the following answers:\n\n{ANSWER}"
QUESTION = {
    "question": "Keep node 18 in CI?",
    "header": "CI",
    "options": [{"label": "No", "description": "drop it"}],
}
ASK = {"id": "call_3", "name": "ask_user_question", "args": {"questions": [QUESTION]}}
ASKED = {"id": "call_3", "name": "ask_user_question", "response": {"output": ANSWERED}}
"""`ask_user_question` and its result (packages/core/src/tools/askUserQuestion.ts, `execute`)."""


def _rec(
    n: int, parent: int | None, kind: str, message: dict[str, Any] | None, **more: Any
) -> dict[str, Any]:
    record: dict[str, Any] = {
        "uuid": f"{n:08d}-0000-4000-8000-000000000000",
        "parentUuid": None if parent is None else f"{parent:08d}-0000-4000-8000-000000000000",
        "sessionId": SESSION,
        "timestamp": f"2026-05-01T12:00:{n:02d}.000Z",
        "type": kind,
        "cwd": "/home/dev/app",
        "version": "0.9.1",
        "gitBranch": "main",
        **more,
    }
    if message is not None:
        record["message"] = message
    return record


def _user(text: str) -> dict[str, Any]:
    return {"role": "user", "parts": [{"text": text}]}


RECORDS: list[dict[str, Any]] = [
    _rec(1, None, "user", _user(TASK), provenance="real_user"),
    _rec(
        2,
        1,
        "assistant",
        {
            "role": "model",
            "parts": [
                {"text": "Checking the test script.", "thought": True},
                {"text": "Let me run the tests."},
                {
                    "functionCall": {
                        "id": "call_1",
                        "name": "run_shell_command",
                        "args": {"command": "npm test"},
                    }
                },
            ],
        },
        model="qwen3-coder-plus",
        usageMetadata={"promptTokenCount": 900, "candidatesTokenCount": 40},
    ),
    _rec(
        3,
        2,
        "tool_result",
        {
            "role": "user",
            "parts": [
                {
                    "functionResponse": {
                        "id": "call_1",
                        "name": "run_shell_command",
                        "response": {"output": "Error: node 22 removed punycode"},
                    }
                },
            ],
        },
        toolCallResult={"callId": "call_1", "status": "success"},
    ),
    _rec(4, 3, "system", None, subtype="ui_telemetry", systemPayload={"uiEvent": {}}),
    _rec(
        5,
        4,
        "assistant",
        {"role": "model", "parts": [{"text": "A dependency uses punycode."}]},
        model="qwen3-coder-plus",
    ),
    _rec(6, 5, "user", _user(REWOUND), provenance="real_user"),
    _rec(7, 5, "user", _user(SECOND), provenance="real_user"),
    _rec(
        8,
        7,
        "user",
        _user("Background task finished: lint"),
        subtype="notification",
        provenance="system",
    ),
    _rec(
        9,
        8,
        "assistant",
        {
            "role": "model",
            "parts": [
                {
                    "functionCall": {
                        "id": "call_2",
                        "name": "write_file",
                        "args": {"file_path": ".nvmrc", "content": "20\n"},
                    }
                },
            ],
        },
        model="qwen3-coder-plus",
    ),
    _rec(
        10,
        9,
        "tool_result",
        {
            "role": "user",
            "parts": [
                {
                    "functionResponse": {
                        "id": "call_2",
                        "name": "write_file",
                        "response": {"output": "Successfully created .nvmrc"},
                    }
                },
            ],
        },
    ),
    _rec(
        11,
        10,
        "assistant",
        {"role": "model", "parts": [{"text": "Pinned node 20."}]},
        model="qwen3-coder-plus",
    ),
    _rec(15, 11, "assistant", {"role": "model", "parts": [{"functionCall": ASK}]}),
    _rec(16, 15, "tool_result", {"role": "user", "parts": [{"functionResponse": ASKED}]}),
]

COMPRESSED = [
    *RECORDS[:5],
    _rec(
        12,
        5,
        "system",
        None,
        subtype="chat_compression",
        systemPayload={
            "info": {"originalTokenCount": 9000, "newTokenCount": 300, "compressionStatus": 1},
            "compressedHistory": [
                _user("<state_snapshot>node 22 breaks a punycode dependency</state_snapshot>"),
                {
                    "role": "model",
                    "parts": [{"text": "Got it. Thanks for the additional context!"}],
                },
            ],
        },
    ),
    _rec(13, 12, "user", _user(SECOND), provenance="real_user"),
    _rec(14, 13, "assistant", {"role": "model", "parts": [{"text": "Pinned node 20."}]}),
]


def samples(folder: Path) -> list[Path]:
    folder.mkdir(parents=True, exist_ok=True)
    out = []
    for name, records in (("chat.jsonl", RECORDS), ("compressed.jsonl", COMPRESSED)):
        path = folder / f"{SESSION}-{name}"
        path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
        out.append(path)
    return out


def test_a_chat_loads_as_its_resume_would_send_it(tmp_path: Path) -> None:
    path, _ = samples(tmp_path)
    ctx = compactkit.load_one(path)
    assert ctx.metadata["source_format"] == "qwen-code"
    assert ctx.metadata["session_id"] == SESSION and ctx.metadata["model"] == "qwen3-coder-plus"
    assert [m.text for m in ctx.messages if m.is_human] == [TASK, SECOND]
    assert [m.origin for m in ctx.messages if m.role == "user" and not m.is_human] == ["harness"]
    results = {r.tool_call_id: r.text for m in ctx.messages for r in m.tool_results}
    assert results == {
        "call_1": "Error: node 22 removed punycode",
        "call_2": "Successfully created .nvmrc",
        "call_3": ANSWERED,
    }
    # the answer typed to ask_user_question is pinned, cut from the header line before it
    assert [p.reason for p in ctx.pins] == ["user-answer"]
    assert ANSWER in [b.text for m in ctx.messages for r in m.tool_results for b in r.content]
    assert ctx.messages[1].content[0].type == "thinking"
    assert pairing_problems(ctx) == [] and compactkit.validate(ctx) == []
    assert ctx.metadata["skipped_records"] == {"off-path/user": 1, "system/ui_telemetry": 1}
    assert "format=qwen-code" in inspect_output(path)


def test_a_compression_replaces_the_history_before_it(tmp_path: Path) -> None:
    _, path = samples(tmp_path)
    ctx = compactkit.load_one(path)
    assert ctx.messages[0].origin == "summary"
    assert [m.text for m in ctx.messages if m.is_human] == [SECOND]
    assert ctx.metadata["skipped_records"]["compressed/tool_result"] == 1


def test_claude_code_recognises_the_records_but_qwen_code_reads_them(tmp_path: Path) -> None:
    path, _ = samples(tmp_path)
    registry = make_registry(entry_points=False)
    names = [f.name for f in detect_formats(read_session(path, registry), registry)]
    assert names[0] == "qwen-code"
