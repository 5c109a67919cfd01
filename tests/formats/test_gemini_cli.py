"""The gemini-cli adapter on real Gemini CLI chat sessions."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

import compactkit
from compactkit.errors import BadInputError
from compactkit.recovery import expand
from tests.conftest import corpus_files, sample
from tests.formats._checks import load_single as load
from tests.formats._checks import pairing_problems


def sessions() -> list[Path]:
    files = [p for p in corpus_files() if p.parent.name == "gemini_cli_session"]
    return files or [sample("gemini_session")]


def raw(path: Path) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    return data


@pytest.mark.corpus
@pytest.mark.parametrize("path", sessions(), ids=lambda p: p.name[:40])
def test_session_loads_with_paired_calls(path: Path) -> None:
    ctx = load(path)
    data = raw(path)
    assert ctx.metadata["source_format"] == "gemini-cli"
    assert ctx.metadata["session_id"] == data["sessionId"]
    assert pairing_problems(ctx) == []
    assert expand(ctx) == ctx  # nothing in a loaded session is a marker to restore
    users = [m["content"] for m in data["messages"] if m["type"] == "user"]
    assert [m.text for m in ctx.messages if m.is_human] == users
    ui = [m["type"] for m in data["messages"] if m["type"] in ("info", "error", "warning")]
    assert sum(ctx.metadata.get("skipped_records", {}).values()) == len(ui)

    raw_calls = [c for m in data["messages"] for c in m.get("toolCalls") or []]
    calls = [c for m in ctx.messages for c in m.tool_calls]
    results = [r for m in ctx.messages for r in m.tool_results]
    assert [c.id for c in calls] == [c["id"] for c in raw_calls]
    assert [c.name for c in calls] == [c["name"] for c in raw_calls]
    assert [c.input for c in calls] == [c["args"] for c in raw_calls]
    with_result = [c for c in raw_calls if c.get("result") is not None]
    assert [r.tool_call_id for r in results] == [c["id"] for c in with_result]
    for call, result in zip(with_result, results, strict=True):
        response = call["result"][0]["functionResponse"]["response"]
        assert result.text == response.get("output", response.get("error"))
        assert result.is_error == (call["status"] != "success" or "error" in response)


@pytest.mark.corpus
@pytest.mark.parametrize("path", sessions(), ids=lambda p: p.name[:40])
def test_session_turns_text_thoughts_and_usage(path: Path) -> None:
    ctx = load(path)
    data = raw(path)
    chat = [m for m in data["messages"] if m["type"] in ("user", "gemini")]
    assert ctx.system_instruction is None
    assert ctx.task == next(m["content"] for m in chat if m["type"] == "user")
    assert [m.text for m in ctx.messages if m.role == "user"] == [
        m["content"] for m in chat if m["type"] == "user"
    ]
    assistants = [m for m in ctx.messages if m.role == "assistant"]
    gemini = [m for m in chat if m["type"] == "gemini"]
    assert len(assistants) == len(gemini)
    for msg, rec in zip(assistants, gemini, strict=True):
        assert msg.text == rec["content"]
        assert msg.metadata["id"] == rec["id"]
        assert msg.metadata["usage"] == rec["tokens"]
        assert msg.metadata["model"] == rec["model"]
        thinking = [b for b in msg.content if b.type == "thinking"]
        assert len(thinking) == len(rec.get("thoughts") or [])
        for block, thought in zip(thinking, rec.get("thoughts") or [], strict=True):
            assert thought["subject"] in block.thinking
            assert thought["description"] in block.thinking
        # order within a turn: thoughts, then text, then calls
        kinds = [b.type for b in msg.content]
        assert kinds == sorted(kinds, key=["thinking", "text", "tool_call"].index)
    # each gemini turn with calls is followed by the tool message with their results
    for i, msg in enumerate(ctx.messages):
        if msg.tool_calls:
            nxt = ctx.messages[i + 1]
            assert nxt.role == "tool"
            assert [r.tool_call_id for r in nxt.tool_results] == [c.id for c in msg.tool_calls]


def test_bundled_sample_session() -> None:
    ctx = load(sample("gemini_session"))
    assert pairing_problems(ctx) == []
    assert ctx.metadata["model"] == "gemini-3-pro-image-preview"
    assert ctx.messages[0].role == "user" and ctx.messages[0].text == "hi"
    first_call = next(m for m in ctx.messages if m.tool_calls)
    assert first_call.tool_calls[0].name == "list_directory"
    listing = ctx.messages[ctx.messages.index(first_call) + 1].tool_results[0]
    assert listing.text.startswith("Directory listing for ")
    three = next(m for m in ctx.messages if len(m.tool_calls) == 3)
    assert [c.name for c in three.tool_calls] == ["read_file", "write_file", "read_file"]


def test_ui_messages_are_skipped_and_missing_results_synthesized(tmp_path: Path) -> None:
    data = raw(sample("gemini_session"))
    messages = data["messages"][:5]
    messages.insert(1, {"id": "x", "type": "info", "content": "Request cancelled."})
    del messages[4]["toolCalls"][0]["result"]  # the read_file call of message 4 never answered
    path = tmp_path / "session.json"
    path.write_text(json.dumps({**data, "messages": messages}), encoding="utf-8")
    ctx = load(path)
    assert "Request cancelled." not in [m.text for m in ctx.messages]
    assert pairing_problems(ctx) == []
    assert ctx.metadata["synthesized_results"] == 1
    synthesized = [m for m in ctx.messages if m.metadata.get("synthesized")]
    assert len(synthesized) == 1 and synthesized[0].tool_results[0].is_error


def test_truncated_session_is_bad_input(tmp_path: Path) -> None:
    text = sample("gemini_session").read_text(encoding="utf-8")
    broken = tmp_path / "session.json"
    broken.write_text(text[: len(text) // 2], encoding="utf-8")
    with pytest.raises(BadInputError):
        compactkit.load(broken)


def test_chat_messages_are_not_a_gemini_session(tmp_path: Path) -> None:
    other = tmp_path / "chat.json"
    other.write_text(json.dumps({"messages": [{"role": "user", "content": "hi"}]}))
    with pytest.raises(BadInputError):
        compactkit.load(other, format="gemini-cli")


# --------------------------------------------------------------------------- records after the
# upstream schema (google-gemini/gemini-cli packages/core/src/services/chatRecordingService.ts,
# chatRecordingTypes.ts: ConversationRecord, MessageRecord, ToolCallRecord)

HEADER = {"sessionId": "s-1", "projectHash": "abc", "startTime": "t0", "lastUpdated": "t1"}
PNG = {"inlineData": {"mimeType": "image/png", "data": "iVBORw0KGgo="}}


def _message(msg_id: str, kind: str, content: Any, **extra: Any) -> dict[str, Any]:
    return {"id": msg_id, "timestamp": "t", "type": kind, "content": content, **extra}


def _call(call_id: str, output: str | None) -> dict[str, Any]:
    call: dict[str, Any] = {"id": call_id, "name": "ls", "args": {}, "status": "success"}
    if output is not None:
        response = {"id": call_id, "name": "ls", "response": {"output": output}}
        call["result"] = [{"functionResponse": response}]
    return call


def _gemini(msg_id: str, text: str, *calls: dict[str, Any]) -> dict[str, Any]:
    return _message(msg_id, "gemini", text, model="gemini-2.5-pro", toolCalls=list(calls))


def test_json_session_user_parts_and_ui_messages(tmp_path: Path) -> None:
    """The older shape: one ConversationRecord JSON."""
    messages = [
        _message("u1", "user", [{"text": "what is in"}, PNG], displayContent="what is in @a.png"),
        _message("i1", "info", "Switched to fallback model."),
        _gemini("g1", "A diagram.", _call("c1", None)),
        _message(
            "u2",
            "user",
            [{"functionResponse": {"id": "c1", "name": "ls", "response": {"output": "a.png"}}}],
        ),
        _message("e1", "error", "[API Error: quota]"),
        _message("w1", "warning", "Loop detected."),
        _message("u3", "user", "thanks"),
        _message("x1", "future_type", "?"),
    ]
    path = tmp_path / "session.json"
    path.write_text(json.dumps({**HEADER, "messages": messages}), encoding="utf-8")
    ctx = load(path)
    humans = [m for m in ctx.messages if m.is_human]
    assert [m.text for m in humans] == ["what is in", "thanks"]
    assert [b.type for b in humans[0].content] == ["text", "image"]
    # the functionResponse answers the call it names instead of becoming user text
    (result,) = [r for m in ctx.messages for r in m.tool_results]
    assert (result.tool_call_id, result.text) == ("c1", "a.png")
    assert pairing_problems(ctx) == []
    assert ctx.metadata["skipped_records"] == {
        "error": 1,
        "future_type": 1,
        "info": 1,
        "warning": 1,
    }
    assert expand(ctx) == ctx


def test_jsonl_session_updates_rewinds_and_compression(tmp_path: Path) -> None:
    """The newer shape: appended JSONL records (metadata, messages, $set, $rewindTo)."""
    records = [
        HEADER,
        _message("u1", "user", [{"text": "list files"}]),
        {"$set": {"lastUpdated": "t2"}},
        _gemini("g1", "", _call("c1", None)),
        _gemini("g1", "", _call("c1", "a b")),  # rewritten with the result: replaces in place
        _message("u2", "user", [{"text": "delete everything"}]),
        _gemini("g2", "Deleting."),
        {"$rewindTo": "u2"},  # the user rewound: u2 and g2 are gone
        _message("u3", "user", [{"text": "show a"}]),
        _gemini("g3", "a is empty."),
        {
            "$set": {
                "summary": "Listing files",
                "messages": [
                    _message(
                        "s1", "user", [{"text": "<state_snapshot>listed a b</state_snapshot>"}]
                    ),
                    _gemini("s2", "Got it. Thanks for the additional context!"),
                    _message("u3", "user", [{"text": "show a"}]),
                    _gemini("g3", "a is empty."),
                ],
            }
        },
        _message("u4", "user", [{"text": "and b?"}]),
        _gemini("g4", "b too."),
    ]
    path = tmp_path / "session-2026-01-01T00-00-s1.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    ctx = load(path)
    assert ctx.metadata["source_format"] == "gemini-cli"
    assert ctx.metadata["session_id"] == "s-1" and ctx.metadata["title"] == "Listing files"
    assert [m.text for m in ctx.messages if m.is_human] == ["list files", "show a", "and b?"]
    assert ctx.task == "list files"
    (summary,) = [m for m in ctx.messages if m.origin == "summary"]
    assert summary.text == "<state_snapshot>listed a b</state_snapshot>"
    assert [r.text for m in ctx.messages for r in m.tool_results] == ["a b"]
    assert pairing_problems(ctx) == []
    assert ctx.metadata["skipped_records"] == {"gemini (rewound)": 1, "user (rewound)": 1}
    assert expand(ctx) == ctx
