"""Gemini CLI `--output-format stream-json` events, shaped after the writer
(google-gemini/gemini-cli `packages/cli/src/nonInteractiveCli.ts` and
`packages/core/src/output/types.ts`, commit 5411f113cafae26161b4969b0237b8e1e024e2c2): `init`,
the user `message`, assistant `message` deltas, `tool_use` / `tool_result`, `error`, `result`."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

import compactkit
from compactkit.errors import BadInputError
from tests.formats._checks import pairing_problems
from tests.formats._inspect import inspect_output

PROMPT = "list the TODOs in src/ and fix the first one"


def _at(n: int) -> str:
    return f"2026-03-02T10:00:{n:02d}.000Z"


EVENTS: list[dict[str, Any]] = [
    {
        "type": "init",
        "timestamp": _at(0),
        "session_id": "c0ffee00-1111-4222-8333-444455556666",
        "model": "gemini-2.5-pro",
    },
    {"type": "message", "timestamp": _at(1), "role": "user", "content": PROMPT},
    {
        "type": "message",
        "timestamp": _at(2),
        "role": "assistant",
        "content": "I'll search ",
        "delta": True,
    },
    {
        "type": "message",
        "timestamp": _at(3),
        "role": "assistant",
        "content": "for them.",
        "delta": True,
    },
    {
        "type": "tool_use",
        "timestamp": _at(4),
        "tool_name": "search_file_content",
        "tool_id": "search_file_content-1-a",
        "parameters": {"pattern": "TODO", "path": "src"},
    },
    {
        "type": "tool_use",
        "timestamp": _at(4),
        "tool_name": "read_file",
        "tool_id": "read_file-1-b",
        "parameters": {"absolute_path": "/w/src/a.py"},
    },
    {
        "type": "tool_result",
        "timestamp": _at(5),
        "tool_id": "search_file_content-1-a",
        "status": "success",
        "output": "Found 2 matches",
    },
    {
        "type": "tool_result",
        "timestamp": _at(5),
        "tool_id": "read_file-1-b",
        "status": "error",
        "error": {"type": "file_not_found", "message": "File not found: /w/src/a.py"},
    },
    {
        "type": "tool_use",
        "timestamp": _at(6),
        "tool_name": "replace",
        "tool_id": "replace-2-c",
        "parameters": {"file_path": "/w/src/b.py", "old_string": "# TODO", "new_string": "done()"},
    },
    {
        "type": "tool_result",
        "timestamp": _at(7),
        "tool_id": "replace-2-c",
        "status": "success",
        "output": "Successfully modified file: /w/src/b.py (1 replacements).",
    },
    {
        "type": "error",
        "timestamp": _at(8),
        "severity": "warning",
        "message": "Loop detected, stopping execution",
    },
    {
        "type": "message",
        "timestamp": _at(9),
        "role": "assistant",
        "content": "Fixed the TODO in src/b.py.",
        "delta": True,
    },
    {
        "type": "result",
        "timestamp": _at(10),
        "status": "success",
        "stats": {
            "total_tokens": 900,
            "input_tokens": 800,
            "output_tokens": 100,
            "cached": 0,
            "input": 800,
            "duration_ms": 4000,
            "tool_calls": 3,
            "models": {},
        },
    },
]


JSON_OUTPUT = {
    "session_id": "c0ffee00-1111-4222-8333-444455556666",
    "response": "Fixed the TODO in src/b.py.",
    "stats": {"models": {}, "tools": {"totalCalls": 3}, "files": {}},
    "warnings": ["Loop detected, stopping execution"],
}
"""`--output-format json`, as `JsonFormatter.format` writes it (`json-formatter.ts`)."""


def samples(folder: Path) -> list[Path]:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "gemini-stream.jsonl"
    path.write_text("".join(json.dumps(e) + "\n" for e in EVENTS), encoding="utf-8")
    json_output = folder / "gemini-output.json"
    json_output.write_text(json.dumps(JSON_OUTPUT, indent=2), encoding="utf-8")
    return [path, json_output]


def test_the_stream_loads_with_the_prompt_and_paired_calls(tmp_path: Path) -> None:
    path, _ = samples(tmp_path)
    ctx = compactkit.load_one(path)
    assert ctx.metadata["source_format"] == "gemini-cli-stream"
    assert ctx.metadata["model"] == "gemini-2.5-pro"
    assert [m.text for m in ctx.messages if m.is_human] == [PROMPT]
    assert [m.role for m in ctx.messages] == ["user", *["assistant", "tool"] * 2, "assistant"]
    assert ctx.messages[1].text.startswith("I'll search for them.")
    results = {r.tool_call_id: (r.text, r.is_error) for m in ctx.messages for r in m.tool_results}
    assert results["read_file-1-b"] == ("File not found: /w/src/a.py", True)
    assert results["search_file_content-1-a"] == ("Found 2 matches", False)
    assert pairing_problems(ctx) == [] and compactkit.validate(ctx) == []
    assert ctx.metadata["gemini_errors"] == [
        {"severity": "warning", "message": "Loop detected, stopping execution"}
    ]
    assert ctx.metadata["skipped_records"] == {"error": 1, "init": 1, "result": 1}
    assert "format=gemini-cli-stream" in inspect_output(path)


def test_a_line_that_is_not_json_is_refused_named(tmp_path: Path) -> None:
    path, _ = samples(tmp_path)
    path.write_text(path.read_text() + "{cut\n", encoding="utf-8")
    with pytest.raises(BadInputError, match=r":14"):
        compactkit.load(path)


def test_the_json_output_is_the_answer_after_a_note(tmp_path: Path) -> None:
    _, path = samples(tmp_path)
    ctx = compactkit.load_one(path)
    assert ctx.metadata["source_format"] == "gemini-cli-stream"
    assert ctx.metadata["gemini_layout"] == "json"
    assert [m.role for m in ctx.messages] == ["user", "assistant"]
    assert ctx.messages[0].origin == "harness"
    assert ctx.messages[1].text == "Fixed the TODO in src/b.py."
    assert ctx.metadata["gemini_errors"] == [
        {"severity": "warning", "message": "Loop detected, stopping execution"}
    ]
