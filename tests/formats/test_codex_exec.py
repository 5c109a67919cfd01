"""`codex exec --json` events, shaped after openai/codex `codex-rs/exec/src/exec_events.rs`
(commit 08a1f30ca23f51922d1a4a4965b5ab999b64bead: `ThreadEvent`, `ThreadItem`) for the thread
events, and after the 2025 `event_processor_with_json_output.rs` (config summary, `{"prompt"}`,
then `{"id", "msg"}` protocol events) for the raw generation."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import compactkit
from tests.formats._checks import pairing_problems
from tests.formats._inspect import inspect_output

THREAD = "0199a213-81c0-7800-8aa1-bbab2a035a53"
PROMPT = "add a --verbose flag to the CLI"


def _done(item: dict[str, Any]) -> dict[str, Any]:
    return {"type": "item.completed", "item": item}


THREAD_EVENTS: list[dict[str, Any]] = [
    {"type": "thread.started", "thread_id": THREAD},
    {"type": "turn.started"},
    _done({"id": "item_0", "type": "reasoning", "text": "**Looking at the CLI entry point**"}),
    {
        "type": "item.started",
        "item": {
            "id": "item_1",
            "type": "command_execution",
            "command": "bash -lc 'rg -n argparse'",
            "aggregated_output": "",
            "exit_code": None,
            "status": "in_progress",
        },
    },
    _done(
        {
            "id": "item_1",
            "type": "command_execution",
            "command": "bash -lc 'rg -n argparse'",
            "aggregated_output": "src/cli.py:3:import argparse\n",
            "exit_code": 0,
            "status": "completed",
        }
    ),
    _done(
        {
            "id": "item_2",
            "type": "command_execution",
            "command": "bash -lc 'pytest -q'",
            "aggregated_output": "1 failed\n",
            "exit_code": 1,
            "status": "failed",
        }
    ),
    _done(
        {"id": "item_3", "type": "agent_message", "text": "The CLI uses argparse; adding the flag."}
    ),
    _done(
        {
            "id": "item_4",
            "type": "file_change",
            "changes": [{"path": "src/cli.py", "kind": "update"}],
            "status": "completed",
        }
    ),
    _done(
        {
            "id": "item_5",
            "type": "mcp_tool_call",
            "server": "docs",
            "tool": "search",
            "arguments": {"q": "verbose"},
            "result": {
                "content": [{"type": "text", "text": "no docs"}],
                "structured_content": None,
            },
            "error": None,
            "status": "completed",
        }
    ),
    _done(
        {"id": "item_6", "type": "todo_list", "items": [{"text": "add flag", "completed": True}]}
    ),
    _done(
        {
            "id": "item_7",
            "type": "web_search",
            "query": "argparse count verbose",
            "action": {"type": "search", "query": "argparse count verbose"},
        }
    ),
    _done({"id": "item_8", "type": "error", "message": "command timed out"}),
    _done({"id": "item_9", "type": "agent_message", "text": "Added --verbose."}),
    {
        "type": "turn.completed",
        "usage": {"input_tokens": 2400, "cached_input_tokens": 1024, "output_tokens": 180},
    },
]

RAW_EVENTS: list[dict[str, Any]] = [
    {
        "model": "gpt-5-codex",
        "workdir": "/w/app",
        "provider": "openai",
        "approval": "never",
        "sandbox": "workspace-write",
    },
    {"prompt": PROMPT},
    {
        "id": "0",
        "msg": {
            "type": "session_configured",
            "session_id": THREAD,
            "model": "gpt-5-codex",
            "history_log_id": 0,
            "history_entry_count": 0,
            "rollout_path": "/h/r.jsonl",
        },
    },
    {"id": "0", "msg": {"type": "task_started", "model_context_window": 272000}},
    {"id": "0", "msg": {"type": "agent_reasoning", "text": "Find the parser"}},
    {
        "id": "0",
        "msg": {
            "type": "exec_command_begin",
            "call_id": "call_a",
            "command": ["bash", "-lc", "ls"],
            "cwd": "/w/app",
            "parsed_cmd": [],
        },
    },
    {
        "id": "0",
        "msg": {
            "type": "exec_command_end",
            "call_id": "call_a",
            "stdout": "src\n",
            "stderr": "",
            "aggregated_output": "src\n",
            "exit_code": 0,
            "duration": {"secs": 0, "nanos": 1},
            "formatted_output": "src\n",
        },
    },
    {
        "id": "0",
        "msg": {
            "type": "patch_apply_begin",
            "call_id": "call_b",
            "auto_approved": True,
            "changes": {"src/cli.py": {"update": {"unified_diff": "@@", "move_path": None}}},
        },
    },
    {
        "id": "0",
        "msg": {
            "type": "patch_apply_end",
            "call_id": "call_b",
            "stdout": "Success. Updated the following files:\nM src/cli.py\n",
            "stderr": "",
            "success": True,
        },
    },
    {"id": "0", "msg": {"type": "token_count", "info": None, "rate_limits": None}},
    {"id": "0", "msg": {"type": "agent_message", "message": "Added --verbose."}},
    {"id": "0", "msg": {"type": "task_complete", "last_agent_message": "Added --verbose."}},
]

REAL = Path(__file__).parent / "headless" / "codex-0.171.0-exec.jsonl"
"""What the pinned CLI printed (see headless/NOTICE.md)."""


def samples(folder: Path) -> list[Path]:
    folder.mkdir(parents=True, exist_ok=True)
    out = []
    for name, events in (("codex-exec.jsonl", THREAD_EVENTS), ("codex-exec-raw.jsonl", RAW_EVENTS)):
        path = folder / name
        path.write_text("".join(json.dumps(e) + "\n" for e in events), encoding="utf-8")
        out.append(path)
    return [*out, REAL]


def test_thread_events_load_as_calls_paired_with_their_results(tmp_path: Path) -> None:
    path, *_ = samples(tmp_path)
    ctx = compactkit.load_one(path)
    assert ctx.metadata["source_format"] == "codex-exec"
    assert ctx.metadata["session_id"] == THREAD
    roles = ["user", "assistant", "tool", "assistant", "tool", "assistant"]
    assert [m.role for m in ctx.messages] == roles
    assert ctx.messages[0].origin == "harness"  # the prompt is not in the events
    assert not any(m.is_human for m in ctx.messages)
    calls = {c.id: c.name for m in ctx.messages for c in m.tool_calls}
    assert calls == {
        "item_1": "shell",
        "item_2": "shell",
        "item_4": "apply_patch",
        "item_5": "docs.search",
        "item_6": "update_plan",
        "item_7": "web_search",
    }
    results = {r.tool_call_id: (r.text, r.is_error) for m in ctx.messages for r in m.tool_results}
    assert results["item_2"] == ("1 failed\n", True)
    assert results["item_5"] == ("no docs", False)
    assert ctx.messages[-1].metadata["usage"]["output_tokens"] == 180
    assert ctx.metadata["codex_errors"] == ["command timed out"]
    assert pairing_problems(ctx) == [] and compactkit.validate(ctx) == []
    assert "format=codex-exec" in inspect_output(path)


def test_a_command_that_never_completed_stays_a_call(tmp_path: Path) -> None:
    path = tmp_path / "cut.jsonl"
    path.write_text("".join(json.dumps(e) + "\n" for e in THREAD_EVENTS[:4]), encoding="utf-8")
    ctx = compactkit.load_one(path)
    assert [c.id for m in ctx.messages for c in m.tool_calls] == ["item_1"]
    assert compactkit.validate(ctx) == []


def test_raw_protocol_events_keep_the_prompt(tmp_path: Path) -> None:
    _, path, _ = samples(tmp_path)
    ctx = compactkit.load_one(path)
    assert [m.text for m in ctx.messages if m.is_human] == [PROMPT]
    assert ctx.metadata["cwd"] == "/w/app" and ctx.metadata["model"] == "gpt-5-codex"
    results = {r.tool_call_id: r.text for m in ctx.messages for r in m.tool_results}
    assert results == {
        "call_a": "src\n",
        "call_b": "Success. Updated the following files:\nM src/cli.py\n",
    }
    assert pairing_problems(ctx) == [] and compactkit.validate(ctx) == []


def test_the_output_of_codex_0_171_0_loads() -> None:
    """Real `codex exec --json` output (headless/NOTICE.md): two commands, the second failed."""
    ctx = compactkit.load_one(REAL)
    assert ctx.metadata["source_format"] == "codex-exec"
    assert ctx.metadata["session_id"] == "01a24564-43a7-7043-8dec-0142701c162b"
    results = [(r.tool_call_id, r.is_error) for m in ctx.messages for r in m.tool_results]
    assert results == [("item_0", False), ("item_1", True)]
    assert ctx.messages[-1].text == "done"
    assert ctx.messages[-1].metadata["usage"]["output_tokens"] == 12
    assert pairing_problems(ctx) == [] and compactkit.validate(ctx) == []
