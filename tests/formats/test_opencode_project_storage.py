"""OpenCode's first storage layout: `project/<project>/storage/session/` with `info/<id>.json`
(`Session.Info`) and `message/<session>/<id>.json` holding each message with its parts inline, as
sst/opencode wrote it before `MessageV2` (`src/session/message.ts`, `Message.Info`: `parts` of
`text`, `reasoning`, `file`, `step-start`, `tool-invocation {toolInvocation: {state, toolCallId,
toolName, args, result}}`; `metadata: {time, sessionID, tool, assistant: {modelID, providerID,
tokens, ...}}`), and the `part/<session>/<message>/<id>.json` files of the release that followed."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from click.testing import CliRunner

import compactkit
from compactkit.cli import make_cli
from compactkit.paths import session_files
from compactkit.registry import make_registry
from tests.formats._checks import pairing_problems

CLI = make_cli(lambda: make_registry(entry_points=False))
SESSION_ID = "ses_7ffe3b9c2a1dUdNJrGcAP7kQ2w"


def message(n: int, role: str, parts: list[dict[str, Any]], **meta: Any) -> dict[str, Any]:
    metadata = {"time": {"created": 1750000000000 + n}, "sessionID": SESSION_ID, "tool": {}, **meta}
    return {"id": f"msg_97c1a2b3{n:04d}Xq", "role": role, "parts": parts, "metadata": metadata}


def invocation(state: str, call_id: str, **extra: Any) -> dict[str, Any]:
    call = {"state": state, "toolCallId": call_id, "toolName": "bash", "args": {"command": "ls"}}
    return {"type": "tool-invocation", "toolInvocation": {**call, **extra}}


ASSISTANT = {
    "system": ["You are opencode."],
    "modelID": "claude-sonnet-4-20250514",
    "providerID": "anthropic",
    "path": {"cwd": "/home/u/app", "root": "/home/u/app"},
    "cost": 0.01,
    "tokens": {"input": 10, "output": 5, "reasoning": 0, "cache": {"read": 0, "write": 0}},
}
MESSAGES = [
    message(0, "user", [{"type": "text", "text": "list the files"}]),
    message(
        1,
        "assistant",
        [
            {"type": "step-start"},
            {"type": "reasoning", "text": "Use ls."},
            invocation("result", "toolu_ls", result="app.py\nREADME.md"),
            {"type": "text", "text": "Two files."},
        ],
        assistant=ASSISTANT,
    ),
    message(2, "user", [{"type": "text", "text": "now run the tests"}]),
    message(3, "assistant", [invocation("call", "toolu_t")], assistant=ASSISTANT),
]


def first_layout(root: Path) -> Path:
    folder = root / "project" / "home-u-app" / "storage" / "session"
    (folder / "info").mkdir(parents=True)
    (folder / "message" / SESSION_ID).mkdir(parents=True)
    info = {
        "id": SESSION_ID,
        "title": "Files",
        "version": "0.1.120",
        "time": {"created": 1750000000000, "updated": 1750000000100},
    }
    (folder / "info" / f"{SESSION_ID}.json").write_text(json.dumps(info), encoding="utf-8")
    for m in MESSAGES:
        path = folder / "message" / SESSION_ID / f"{m['id']}.json"
        path.write_text(json.dumps(m), encoding="utf-8")
    return folder


def test_the_first_storage_layout_loads_with_inline_parts(tmp_path: Path) -> None:
    folder = first_layout(tmp_path)
    for given in (folder, folder.parent, folder / "info" / f"{SESSION_ID}.json"):
        ctx = compactkit.load_one(given)
        assert ctx.metadata["source_format"] == "opencode"
        assert ctx.metadata["session_id"] == SESSION_ID
        assert ctx.metadata["model"] == "claude-sonnet-4-20250514"
        assert [m.text for m in ctx.messages if m.is_human] == [
            "list the files",
            "now run the tests",
        ]
        results = {
            r.tool_call_id: (r.text, r.is_error) for m in ctx.messages for r in m.tool_results
        }
        assert results["toolu_ls"] == ("app.py\nREADME.md", False)
        assert results["toolu_t"][1] is True  # a call with no result: interrupted
        assert ctx.messages[1].content[0].type == "thinking"
        assert pairing_problems(ctx) == []
    assert session_files(tmp_path) == [str(folder)]
    result = CliRunner().invoke(CLI, ["run", str(folder), "--budget", "20000", "-o", "-"])
    assert result.exit_code == 0, result.output


def test_the_part_files_of_the_release_after_it_are_read(tmp_path: Path) -> None:
    folder = first_layout(tmp_path)
    later = {
        "id": "msg_97c1a2b39999Xq",
        "sessionID": SESSION_ID,
        "role": "user",
        "time": {"created": 1750000000999},
    }
    (folder / "message" / SESSION_ID / f"{later['id']}.json").write_text(json.dumps(later))
    parts = folder / "part" / SESSION_ID / later["id"]
    parts.mkdir(parents=True)
    text = {
        "id": "prt_01",
        "messageID": later["id"],
        "sessionID": SESSION_ID,
        "type": "text",
        "text": "thanks",
    }
    (parts / "prt_01.json").write_text(json.dumps(text))
    ctx = compactkit.load_one(folder)
    assert [m.text for m in ctx.messages if m.is_human][-1] == "thanks"
