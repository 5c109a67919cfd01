"""Codex outputs recorded after a later call: each result must follow its call's message in every
export. Shaped after openai/codex `codex-rs/protocol/src/models.rs` (`ResponseItem::CustomToolCall`,
`CustomToolCallOutput`, `FunctionCall`, `FunctionCallOutput`) and `codex-rs/core/src/rollout/policy.rs`
(which items a rollout keeps): Codex runs tool calls in parallel and records each output when its call
finishes, so `apply_patch` (a custom tool) may be answered after a shell call the model made later.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import compactkit
from compactkit.formats.provider_rules import anthropic_rule_problems, openai_rule_problems

USAGE = {"input_tokens": 10, "cached_input_tokens": 0, "output_tokens": 5, "total_tokens": 15}


def item(kind: str, payload: dict[str, Any]) -> dict[str, Any]:
    return {"timestamp": "2025-10-01T09:00:00.000Z", "type": kind, "payload": payload}


ROLLOUT = [
    item("session_meta", {"id": "0199a1", "cwd": "/w", "cli_version": "0.46.0"}),
    item(
        "response_item",
        {
            "type": "message",
            "role": "user",
            "content": [{"type": "input_text", "text": "patch a.py, then run the tests"}],
        },
    ),
    item(
        "response_item",
        {
            "type": "custom_tool_call",
            "status": "completed",
            "call_id": "call_A",
            "name": "apply_patch",
            "input": "*** Begin Patch\n*** End Patch\n",
        },
    ),
    item("event_msg", {"type": "token_count", "info": {"last_token_usage": USAGE}}),
    item(
        "response_item",
        {
            "type": "function_call",
            "call_id": "call_B",
            "name": "shell",
            "arguments": json.dumps({"command": ["pytest", "-q"]}),
        },
    ),
    item("event_msg", {"type": "token_count", "info": {"last_token_usage": USAGE}}),
    item(
        "response_item",
        {
            "type": "function_call_output",
            "call_id": "call_B",
            "output": json.dumps({"output": "1 passed", "metadata": {"exit_code": 0}}),
        },
    ),
    item(
        "response_item",
        {
            "type": "custom_tool_call_output",
            "call_id": "call_A",
            "output": "Success. Updated the following files:\nM a.py\n",
        },
    ),
    item(
        "response_item",
        {
            "type": "message",
            "role": "assistant",
            "content": [{"type": "output_text", "text": "Patched and tested."}],
        },
    ),
]


def test_a_late_custom_tool_output_pairs_in_every_export(tmp_path: Path) -> None:
    path = tmp_path / "rollout-2025-10-01T09-00-00-0199a1.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in ROLLOUT), encoding="utf-8")
    ctx = compactkit.load_one(path)
    assert compactkit.validate(ctx) == []  # was: call_A's result not after its call
    assert "synthesized_results" not in ctx.metadata
    calls = next(m for m in ctx.messages if m.tool_calls)
    assert [c.id for c in calls.tool_calls] == ["call_A", "call_B"]
    assert calls.metadata["joined_responses"] == 2
    options = compactkit.WriterOptions(request=True)
    openai = json.loads(compactkit.export(ctx, "openai-chat", options).text)
    assert (
        openai_rule_problems(openai["messages"] if isinstance(openai, dict) else openai, None) == []
    )
    anthropic = json.loads(compactkit.export(ctx, "anthropic-messages", options).text)
    assert anthropic_rule_problems(anthropic) == []
    results = {r.tool_call_id: r.text for m in ctx.messages for r in m.tool_results}
    assert results["call_A"].startswith("Success. Updated the following files")
