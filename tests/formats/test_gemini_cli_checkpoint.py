"""Gemini CLI `/chat save` checkpoints (`~/.gemini/tmp/<project>/checkpoint-<tag>.json`), shaped
after google-gemini/gemini-cli `packages/core/src/core/logger.ts` (`saveCheckpoint` writes
`{history: Content[], authType}`; `loadCheckpoint` still reads the bare `Content[]` older CLIs
wrote) and `@google/genai` `Content` (`{role: "user" | "model", parts: [Part]}`, a Part holding
`text` (with `thought: true` for a thought), `functionCall {id, name, args}` or
`functionResponse {id, name, response: {output | error}}`)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

import compactkit
from compactkit.cli import make_cli
from compactkit.registry import make_registry
from tests.formats._checks import pairing_problems

CLI = make_cli(lambda: make_registry(entry_points=False))
SETUP = (
    "This is the Gemini CLI. We are setting up the context for our chat.\n"
    "Today's date is Friday, December 26, 2025.\nMy operating system is: linux"
)


def text(role: str, *texts: str) -> dict[str, Any]:
    return {"role": role, "parts": [{"text": t} for t in texts]}


HISTORY = [
    text("user", SETUP),
    text("model", "Got it. Thanks for the context!"),
    text("user", "why does the login test fail?"),
    {
        "role": "model",
        "parts": [
            {"text": "Reading the test first.", "thought": True},
            {"functionCall": {"id": "read-1", "name": "read_file", "args": {"path": "t.py"}}},
        ],
    },
    {
        "role": "user",
        "parts": [
            {
                "functionResponse": {
                    "id": "read-1",
                    "name": "read_file",
                    "response": {"output": "assert login('a') is None"},
                }
            }
        ],
    },
    text("model", "The test expects None for an unknown user."),
    text("user", "fix it"),
]


@pytest.mark.parametrize("saved", ["today", "older"])
def test_a_chat_checkpoint_loads_as_the_model_got_it(tmp_path: Path, saved: str) -> None:
    data: Any = {"history": HISTORY, "authType": "oauth-personal"} if saved == "today" else HISTORY
    path = tmp_path / "checkpoint-login%20bug.json"
    path.write_text(json.dumps(data, indent=2), encoding="utf-8")
    ctx = compactkit.load_one(path)
    assert ctx.metadata["source_format"] == "gemini-cli"
    assert [m.text for m in ctx.messages if m.is_human] == [
        "why does the login test fail?",
        "fix it",
    ]
    assert [m.origin for m in ctx.messages if m.role == "user"] == ["harness", None, None]
    results = {r.tool_call_id: r.text for m in ctx.messages for r in m.tool_results}
    assert results == {"read-1": "assert login('a') is None"}
    assert [b.type for b in ctx.messages[3].content] == ["thinking", "tool_call"]
    assert pairing_problems(ctx) == []
    result = CliRunner().invoke(CLI, ["run", str(path), "--budget", "20000", "-o", "-"])
    assert result.exit_code == 0, result.output


def test_an_empty_checkpoint_is_refused_in_one_line(tmp_path: Path) -> None:
    path = tmp_path / "checkpoint-empty.json"
    path.write_text(json.dumps({"history": []}), encoding="utf-8")
    result = CliRunner().invoke(CLI, ["inspect", str(path)])
    assert result.exit_code == 2
    assert "Traceback" not in result.output and len(result.output.strip().splitlines()) == 1


def test_responses_without_ids_pair_in_order_and_a_stray_one_is_not_a_result(
    tmp_path: Path,
) -> None:
    """Older checkpoints' `functionCall`/`functionResponse` parts carry no `id`."""
    history = [
        text("user", "count the lines"),
        {"role": "model", "parts": [{"functionCall": {"name": "run_shell_command", "args": {}}}]},
        {
            "role": "user",
            "parts": [
                {"functionResponse": {"name": "shell", "response": {"output": "42"}}},
                {"functionResponse": {"id": "gone", "name": "x", "response": {"output": "?"}}},
            ],
        },
    ]
    path = tmp_path / "checkpoint-old.json"
    path.write_text(json.dumps(history), encoding="utf-8")
    ctx = compactkit.load_one(path)
    assert [r.text for m in ctx.messages for r in m.tool_results] == ["42"]
    assert [m.origin for m in ctx.messages if m.role == "user"] == [None, "tool-output"]
    assert pairing_problems(ctx) == []
    result = CliRunner().invoke(CLI, ["run", str(path), "--budget", "20000", "-o", "-"])
    assert result.exit_code == 0, result.output
