"""Claude Managed Agents session events, shaped after the event types of the Sessions API as
the SDK generated from its OpenAPI spec defines them (anthropics/anthropic-sdk-python
`src/anthropic/types/beta/sessions/beta_managed_agents_*_event.py`, commit
0c20cf40f20edb11ab0453f646bcccf42479d92f): user and agent messages, built-in, MCP and custom tool
calls with their results, a denied call with the user's reason, an interrupt, thinking and
status events."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import compactkit
from tests.formats._checks import pairing_problems
from tests.formats._inspect import inspect_output

TASK = "Audit the repo for hard-coded secrets and open a PR with fixes"
FOLLOW_UP = "skip the vendored directory"
REASON = "don't touch .env.example, it is documentation"


def _ev(n: int, kind: str, **fields: Any) -> dict[str, Any]:
    return {
        "id": f"sevt_{n:04d}",
        "type": kind,
        "processed_at": f"2026-04-10T09:00:{n:02d}Z",
        **fields,
    }


def _text(text: str) -> list[dict[str, Any]]:
    return [{"type": "text", "text": text}]


EVENTS: list[dict[str, Any]] = [
    _ev(1, "user.message", content=_text(TASK)),
    _ev(2, "session.status_running"),
    _ev(3, "span.model_request_start"),
    _ev(4, "agent.thinking"),
    _ev(5, "agent.message", content=_text("Scanning the repository first.")),
    _ev(
        6,
        "agent.tool_use",
        name="bash",
        input={"command": "rg -n 'API_KEY='"},
        evaluated_permission="allow",
    ),
    _ev(
        7,
        "agent.mcp_tool_use",
        name="create_branch",
        mcp_server_name="github",
        input={"name": "fix/secrets"},
    ),
    _ev(
        8,
        "agent.tool_result",
        tool_use_id="sevt_0006",
        content=_text("config.py:3:API_KEY='sk-test'"),
    ),
    _ev(
        9,
        "agent.mcp_tool_result",
        mcp_tool_use_id="sevt_0007",
        content=_text("created"),
        is_error=False,
    ),
    _ev(
        10,
        "agent.tool_use",
        name="edit",
        input={"path": ".env.example"},
        evaluated_permission="ask",
    ),
    _ev(
        11,
        "session.status_idle",
        stop_reason={"type": "requires_action", "event_ids": ["sevt_0010"]},
    ),
    _ev(12, "user.tool_confirmation", tool_use_id="sevt_0010", result="deny", deny_message=REASON),
    _ev(13, "agent.custom_tool_use", name="notify", input={"channel": "#sec"}),
    _ev(
        14,
        "user.custom_tool_result",
        custom_tool_use_id="sevt_0013",
        content=_text("sent"),
        is_error=False,
    ),
    _ev(15, "agent.tool_use", name="bash", input={"command": "pytest"}),
    _ev(16, "user.interrupt"),
    _ev(17, "user.message", content=_text(FOLLOW_UP)),
    _ev(
        18,
        "agent.message",
        content=[{"type": "redacted"}, *_text("Understood; leaving vendor/ alone.")],
    ),
    _ev(19, "session.status_idle", stop_reason={"type": "end_turn"}),
]


def samples(folder: Path) -> list[Path]:
    folder.mkdir(parents=True, exist_ok=True)
    page = folder / "events.json"
    page.write_text(json.dumps({"data": EVENTS, "has_more": False}, indent=1), encoding="utf-8")
    lines = folder / "events.jsonl"
    lines.write_text("".join(json.dumps(e) + "\n" for e in EVENTS), encoding="utf-8")
    return [page, lines]


def test_an_event_log_loads_with_every_user_word_and_paired_calls(tmp_path: Path) -> None:
    for path in samples(tmp_path):
        ctx = compactkit.load_one(path)
        assert ctx.metadata["source_format"] == "claude-managed-agents"
        assert [m.text for m in ctx.messages if m.is_human] == [TASK, FOLLOW_UP]
        calls = {c.id: c.name for m in ctx.messages for c in m.tool_calls}
        assert calls == {
            "sevt_0006": "bash",
            "sevt_0007": "github.create_branch",
            "sevt_0010": "edit",
            "sevt_0013": "notify",
            "sevt_0015": "bash",
        }
        results = {r.tool_call_id: r for m in ctx.messages for r in m.tool_results}
        assert results["sevt_0010"].is_error and REASON in results["sevt_0010"].text
        assert results["sevt_0015"].is_error  # stopped by the interrupt: no result recorded
        assert ctx.metadata["interrupts"] == 1
        assert [p.reason for p in ctx.pins] == ["user-feedback"]
        assert pairing_problems(ctx) == [] and compactkit.validate(ctx) == []
        assert ctx.metadata["skipped_records"]["agent.thinking"] == 1
        assert ctx.metadata["skipped_records"]["agent.message/redacted"] == 1
        assert ctx.messages[-1].text == "Understood; leaving vendor/ alone."
        assert "format=claude-managed-agents" in inspect_output(path)
