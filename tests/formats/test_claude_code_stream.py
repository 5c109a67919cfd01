"""Claude Code headless output (`claude -p --output-format stream-json`, `--output-format json`),
messages shaped after the Claude Agent SDK's parser of them
(anthropics/claude-agent-sdk-python `src/claude_agent_sdk/_internal/message_parser.py`, `types.py`,
commit e8bde60164f9ef820068ec36ffe6b7be6bd8fd26): `system` `init`, `assistant` / `user` messages
holding API messages (one content block each, as the CLI streams them), a subagent's messages
with `parent_tool_use_id`, and the closing `result`."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import compactkit
from tests.formats._checks import pairing_problems
from tests.formats._inspect import inspect_output

SESSION = "4f6b1c2e-8d3a-4b5c-9e7f-0a1b2c3d4e5f"
FEEDBACK = "use the fixtures in tests/data, not new ones"


def _assistant(
    n: int, msg_id: str, block: dict[str, Any], parent: str | None = None
) -> dict[str, Any]:
    return {
        "type": "assistant",
        "message": {
            "model": "claude-sonnet-4-5-20250929",
            "id": msg_id,
            "type": "message",
            "role": "assistant",
            "content": [block],
            "stop_reason": None,
            "stop_sequence": None,
            "usage": {"input_tokens": 12, "output_tokens": 30},
        },
        "parent_tool_use_id": parent,
        "session_id": SESSION,
        "uuid": f"a{n:07d}-0000-4000-8000-000000000000",
    }


def _user(n: int, content: Any, parent: str | None = None) -> dict[str, Any]:
    return {
        "type": "user",
        "message": {"role": "user", "content": content},
        "parent_tool_use_id": parent,
        "session_id": SESSION,
        "uuid": f"u{n:07d}-0000-4000-8000-000000000000",
    }


def _result(tool_use_id: str, text: str, is_error: bool = False) -> dict[str, Any]:
    return {
        "tool_use_id": tool_use_id,
        "type": "tool_result",
        "content": text,
        "is_error": is_error,
    }


MESSAGES: list[dict[str, Any]] = [
    {
        "type": "system",
        "subtype": "init",
        "cwd": "/work/app",
        "session_id": SESSION,
        "tools": ["Task", "Bash", "Read", "Edit"],
        "mcp_servers": [],
        "model": "claude-sonnet-4-5-20250929",
        "permissionMode": "default",
        "apiKeySource": "ANTHROPIC_API_KEY",
        "claude_code_version": "2.1.332",
        "uuid": "s0000000-0000-4000-8000-000000000000",
    },
    _assistant(
        1, "msg_01", {"type": "thinking", "thinking": "Run the tests first.", "signature": "sig1"}
    ),
    _assistant(2, "msg_01", {"type": "text", "text": "I'll run the test suite."}),
    _assistant(
        3,
        "msg_01",
        {"type": "tool_use", "id": "toolu_01", "name": "Bash", "input": {"command": "pytest -q"}},
    ),
    _user(4, [_result("toolu_01", "1 failed, 2 passed")]),
    _assistant(
        5,
        "msg_02",
        {
            "type": "tool_use",
            "id": "toolu_02",
            "name": "Task",
            "input": {"description": "Find the fixture", "prompt": "Find the parser fixtures"},
        },
    ),
    _user(51, [{"type": "text", "text": "Find the parser fixtures"}], parent="toolu_02"),
    _assistant(
        6,
        "msg_s1",
        {
            "type": "tool_use",
            "id": "toolu_s1",
            "name": "Read",
            "input": {"file_path": "tests/data"},
        },
        parent="toolu_02",
    ),
    _user(7, [_result("toolu_s1", "empty.json\nlist.json")], parent="toolu_02"),
    _assistant(8, "msg_s2", {"type": "text", "text": "Two fixtures."}, parent="toolu_02"),
    _user(9, [_result("toolu_02", "Two fixtures: empty.json, list.json")]),
    _assistant(
        10,
        "msg_03",
        {
            "type": "tool_use",
            "id": "toolu_03",
            "name": "Edit",
            "input": {"file_path": "tests/test_parse.py", "old_string": "a", "new_string": "b"},
        },
    ),
    _user(
        11,
        [
            _result(
                "toolu_03",
                "The user doesn't want to proceed with this tool use. The tool use was rejected "
                "(eg. if it was a file edit, the new_string was NOT written to the file). To tell "
                f"you how to proceed, the user said:\n{FEEDBACK}",
                is_error=True,
            )
        ],
    ),
    _user(12, "and keep the test names as they are"),
    _assistant(13, "msg_04", {"type": "text", "text": "Done: the test uses tests/data."}),
    {
        "type": "result",
        "subtype": "success",
        "is_error": False,
        "duration_ms": 8123,
        "duration_api_ms": 7000,
        "num_turns": 5,
        "result": "Done: the test uses tests/data.",
        "session_id": SESSION,
        "total_cost_usd": 0.0123,
        "usage": {"input_tokens": 120, "output_tokens": 300},
        "permission_denials": [],
        "uuid": "r0000000-0000-4000-8000-000000000000",
    },
]

REAL = Path(__file__).parent / "headless" / "claude-code-2.1.332-stream.jsonl"
"""What the pinned CLI printed (see headless/NOTICE.md)."""


def samples(folder: Path) -> list[Path]:
    folder.mkdir(parents=True, exist_ok=True)
    stream = folder / "claude-stream.jsonl"
    stream.write_text("".join(json.dumps(m) + "\n" for m in MESSAGES), encoding="utf-8")
    verbose = folder / "claude-verbose.json"
    verbose.write_text(json.dumps(MESSAGES[:5] + MESSAGES[-1:], indent=1), encoding="utf-8")
    lone = folder / "claude-result.json"
    lone.write_text(json.dumps(MESSAGES[-1], indent=1), encoding="utf-8")
    return [stream, verbose, lone, REAL]


def test_the_stream_loads_as_the_session_it_streamed(tmp_path: Path) -> None:
    stream, *_ = samples(tmp_path)
    main, sub = compactkit.load(stream)
    assert main.metadata["source_format"] == "claude-code-stream"
    assert main.metadata["session_id"] == SESSION and main.metadata["cwd"] == "/work/app"
    assert main.metadata["result"] == {
        "subtype": "success",
        "is_error": False,
        "num_turns": 5,
        "total_cost_usd": 0.0123,
        "duration_ms": 8123,
    }
    # the prompt given to claude -p is not in the stream: a harness note says so
    note, first = main.messages[0], main.messages[1]
    assert note.origin == "harness" and "not in its output" in note.text
    assert first.role == "assistant" and [b.type for b in first.content] == [
        "thinking",
        "text",
        "tool_call",
    ]
    assert [m.text for m in main.messages if m.is_human] == ["and keep the test names as they are"]
    results = {r.tool_call_id: r for m in main.messages for r in m.tool_results}
    assert set(results) == {"toolu_01", "toolu_02", "toolu_03"} and results["toolu_03"].is_error
    assert pairing_problems(main) == [] and compactkit.validate(main) == []
    # the user's feedback inside the rejected call's result is pinned
    assert any(p.reason == "user-feedback" for p in main.pins)
    pinned = [
        b.text for m in main.messages for r in m.tool_results for b in r.content if b.type == "text"
    ]
    assert FEEDBACK in pinned
    assert main.metadata["skipped_records"] == {"result": 1, "system/init": 1}
    # the subagent's messages are a conversation of their own, linked to its Task call
    assert sub.metadata["sidechain"] is True
    assert sub.metadata["parent_tool_call_id"] == "toolu_02"
    assert [m.text for m in sub.messages if m.is_human] == ["Find the parser fixtures"]
    assert [r.tool_call_id for m in sub.messages for r in m.tool_results] == ["toolu_s1"]


def test_verbose_json_array_and_lone_result(tmp_path: Path) -> None:
    _, verbose, *_ = samples(tmp_path)
    ctx = compactkit.load_one(verbose)
    assert ctx.metadata["source_format"] == "claude-code-stream"
    assert [r.tool_call_id for m in ctx.messages for r in m.tool_results] == ["toolu_01"]
    lone = tmp_path / "result.json"
    lone.write_text(json.dumps(MESSAGES[-1]), encoding="utf-8")
    ctx = compactkit.load_one(lone)
    assert ctx.metadata["claude_layout"] == "result"
    assert [m.role for m in ctx.messages] == ["user", "assistant"]
    assert ctx.messages[0].origin == "harness"
    assert ctx.messages[1].text == "Done: the test uses tests/data."


def test_a_torn_line_is_skipped_and_inspect_reads_the_stream(tmp_path: Path) -> None:
    stream, *_ = samples(tmp_path)
    stream.write_text(stream.read_text() + '{"type": "assistant", "mess', encoding="utf-8")
    main = compactkit.load(stream)[0]
    assert main.metadata["skipped_records"]["malformed line"] == 1
    assert "format=claude-code-stream" in inspect_output(stream)


def test_the_output_of_claude_code_2_1_332_loads() -> None:
    """Real `-p --output-format stream-json --verbose` output (headless/NOTICE.md): a Bash call,
    a Write call the CLI denied, the answer; its new `system/permission_denied` message counted."""
    ctx = compactkit.load_one(REAL)
    assert ctx.metadata["source_format"] == "claude-code-stream"
    assert ctx.messages[0].origin == "harness" and not any(m.is_human for m in ctx.messages)
    results = [(r.tool_call_id, r.is_error) for m in ctx.messages for r in m.tool_results]
    assert results == [("toolu_fake0010", False), ("toolu_fake0020", True)]
    assert ctx.messages[-1].text == "done"
    assert ctx.metadata["skipped_records"] == {
        "result": 1,
        "system/init": 1,
        "system/permission_denied": 1,
    }
    assert pairing_problems(ctx) == [] and compactkit.validate(ctx) == []


QWEN_SESSION = "b3f0c9a8-1d2e-4f50-8a6b-7c8d9e0f1a2b"
QWEN_PROMPT = "count the TODO comments in src/"


def _qwen(n: int, kind: str, content: Any, **message: Any) -> dict[str, Any]:
    body = {"role": "user" if kind == "user" else "assistant", "content": content, **message}
    return {
        "type": kind,
        "uuid": f"q{n:07d}-0000-4000-8000-000000000000",
        "session_id": QWEN_SESSION,
        "parent_tool_use_id": None,
        "message": body,
    }


QWEN_STREAM: list[dict[str, Any]] = [
    {
        "type": "system",
        "subtype": "init",
        "uuid": "e0000000-0000-4000-8000-000000000000",
        "session_id": QWEN_SESSION,
        "parent_tool_use_id": None,
        "data": {"cwd": "/w/app", "model": "qwen3-coder-plus", "tools": ["run_shell_command"]},
    },
    _qwen(1, "user", [{"type": "text", "text": QWEN_PROMPT}]),
    _qwen(
        2, "assistant", [{"type": "thinking", "thinking": "grep for it"}], id="m1", type="message"
    ),
    _qwen(3, "assistant", [{"type": "text", "text": "Searching."}], id="m2", type="message"),
    _qwen(
        4,
        "assistant",
        [
            {
                "type": "tool_use",
                "id": "call_q1",
                "name": "run_shell_command",
                "input": {"command": "grep -rc TODO src"},
            }
        ],
        id="m3",
        type="message",
        stop_reason="tool_use",
    ),
    _qwen(
        5,
        "user",
        [
            {
                "type": "tool_result",
                "tool_use_id": "call_q1",
                "is_error": False,
                "content": "src/a.ts:3",
            }
        ],
    ),
    _qwen(6, "assistant", [{"type": "text", "text": "3 TODO comments."}], id="m4", type="message"),
    {
        "type": "result",
        "subtype": "success",
        "uuid": "r1000000-0000-4000-8000-000000000000",
        "session_id": QWEN_SESSION,
        "is_error": False,
        "duration_ms": 900,
        "duration_api_ms": 800,
        "num_turns": 2,
        "result": "3 TODO comments.",
        "usage": {"input_tokens": 100, "output_tokens": 20},
        "permission_denials": [],
    },
]
"""Qwen Code's stream-json, after QwenLM/qwen-code
`packages/cli/src/nonInteractive/io/BaseJsonOutputAdapter.ts` (commit
0816e573c2e769efa3280449a5c61b9a4f82666f): Claude Code's messages, one block type per assistant
message, the prompt as a user message, the `init` fields under `data`."""


def test_qwen_code_stream_json_reads_as_claude_codes(tmp_path: Path) -> None:
    path = tmp_path / "qwen-stream.jsonl"
    path.write_text("".join(json.dumps(m) + "\n" for m in QWEN_STREAM), encoding="utf-8")
    ctx = compactkit.load_one(path)
    assert ctx.metadata["source_format"] == "claude-code-stream"
    assert ctx.metadata["cwd"] == "/w/app" and ctx.metadata["model"] == "qwen3-coder-plus"
    assert [m.text for m in ctx.messages if m.is_human] == [QWEN_PROMPT]
    assert not any(m.origin == "harness" for m in ctx.messages)  # the prompt is recorded
    assert [r.text for m in ctx.messages for r in m.tool_results] == ["src/a.ts:3"]
    assert ctx.messages[-1].text == "3 TODO comments."
    assert pairing_problems(ctx) == [] and compactkit.validate(ctx) == []
