"""The codex-rollout adapter on real Codex CLI rollouts."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

import compactkit
from compactkit.errors import BadInputError
from tests.conftest import corpus_files, sample
from tests.formats._checks import load_single as load
from tests.formats._checks import pairing_problems

CALL_TYPES = {"function_call", "custom_tool_call", "web_search_call", "local_shell_call"}
OUTPUT_TYPES = {"function_call_output", "custom_tool_call_output"}


def rollouts() -> list[Path]:
    files = [p for p in corpus_files() if p.parent.name == "codex_rollout_jsonl"]
    return files or [sample("codemie_rollout")]


def raw_records(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line]


def items(records: list[dict[str, Any]], *types: str) -> list[dict[str, Any]]:
    return [
        r["payload"]
        for r in records
        if r["type"] == "response_item" and r["payload"].get("type") in types
    ]


@pytest.mark.corpus
@pytest.mark.parametrize("path", rollouts(), ids=lambda p: p.name[:40])
def test_rollout_loads_with_paired_calls(path: Path) -> None:
    ctx = load(path)
    records = raw_records(path)
    assert ctx.metadata["source_format"] == "codex-rollout"
    assert ctx.metadata["session_id"] == records[0]["payload"]["id"]
    assert pairing_problems(ctx) == []

    raw_calls = items(records, *CALL_TYPES)
    raw_outputs = items(records, *OUTPUT_TYPES)
    calls = [c for m in ctx.messages for c in m.tool_calls]
    results = [r for m in ctx.messages for r in m.tool_results]
    real = [r for m in ctx.messages if not m.metadata.get("synthesized") for r in m.tool_results]
    assert len(calls) == len(raw_calls)
    assert len(real) == len(raw_outputs)
    assert [r.tool_call_id for r in real] == [o["call_id"] for o in raw_outputs]
    # web searches run server-side: their results never reach the rollout
    answered = {o["call_id"] for o in raw_outputs}
    unanswered = [c for c in raw_calls if c.get("call_id") not in answered]
    pending = len(calls) - len(results)
    assert len(results) - len(real) + pending == len(unanswered)
    assert ctx.metadata.get("synthesized_results", 0) == len(results) - len(real)
    for i, m in enumerate(ctx.messages):
        if m.metadata.get("synthesized"):
            assert all(r.is_error and r.text == "[no result recorded]" for r in m.tool_results)
            # placed with the other results of the response that made the calls
            j = i - 1
            while ctx.messages[j].role == "tool":
                j -= 1
            made = {c.id for c in ctx.messages[j].tool_calls}
            assert {r.tool_call_id for r in m.tool_results} <= made
            assert all(c.name == "web_search" for c in calls if c.id in made - answered)

    # calls keep their ids, names and parsed arguments
    by_id = {c.id: c for c in calls}
    for raw in items(records, "function_call"):
        call = by_id[raw["call_id"]]
        assert call.name == raw["name"]
        assert call.input == json.loads(raw["arguments"])
    for raw in items(records, "custom_tool_call"):
        assert by_id[raw["call_id"]].input == raw["input"]


@pytest.mark.corpus
@pytest.mark.parametrize("path", rollouts(), ids=lambda p: p.name[:40])
def test_rollout_instructions_text_and_reasoning(path: Path) -> None:
    ctx = load(path)
    records = raw_records(path)
    meta = records[0]["payload"]
    assert ctx.system_instruction == meta["base_instructions"]["text"]

    messages = items(records, "message")

    def text_of(item: dict[str, Any]) -> str:
        return "\n".join(part["text"] for part in item["content"] if part.get("text"))

    developer = [text_of(m) for m in messages if m["role"] == "developer"]
    assert [m.text for m in ctx.messages if m.role == "system"] == developer
    users = [text_of(m) for m in messages if m["role"] == "user"]
    assert [m.text for m in ctx.messages if m.role == "user"] == users
    # AGENTS.md and <environment_context> are user messages Codex wrote: not the task
    typed = [u for u in users if not u.startswith(("# AGENTS.md", "<environment_context>"))]
    assert [m.text for m in ctx.messages if m.is_human] == typed
    assert ctx.task == typed[0]
    assistant_text = [text_of(m) for m in messages if m["role"] == "assistant"]
    got = [
        b.text for m in ctx.messages if m.role == "assistant" for b in m.content if b.type == "text"
    ]
    assert got == assistant_text

    reasoning = items(records, "reasoning")
    thinking = [b for m in ctx.messages for b in m.content if b.type == "thinking"]
    assert len(thinking) == len(reasoning)
    for raw, block in zip(reasoning, thinking, strict=True):
        summary = "\n\n".join(s["text"] for s in raw.get("summary") or [])
        assert block.thinking == summary
        assert block.redacted == (not summary and bool(raw.get("encrypted_content")))
    # thinking sits in the assistant message holding that response's calls
    for m in ctx.messages:
        if any(b.type == "thinking" for b in m.content):
            assert m.role == "assistant"


@pytest.mark.corpus
@pytest.mark.parametrize("path", rollouts(), ids=lambda p: p.name[:40])
def test_rollout_usage_per_response(path: Path) -> None:
    ctx = load(path)
    records = raw_records(path)
    usages = [
        r["payload"]["info"]["last_token_usage"]
        for r in records
        if r["type"] == "event_msg"
        and r["payload"].get("type") == "token_count"
        and r["payload"].get("info")
    ]
    got = [m.metadata["usage"] for m in ctx.messages if "usage" in m.metadata]
    assert got == usages[: len(got)]
    assert len(got) >= len(usages) - 1  # a rollout cut mid-response has one count to spare
    assert all(m.metadata.get("model") for m in ctx.messages if m.role == "assistant")


def test_bundled_sample_rollout() -> None:
    path = sample("codemie_rollout")
    ctx = load(path)
    assert pairing_problems(ctx) == []
    assert ctx.metadata["model"] == "gpt-5.5"
    assert [m.role for m in ctx.messages[:4]] == ["system", "user", "user", "assistant"]
    assert ctx.messages[2].text == "show tools"
    first = ctx.messages[3]
    assert [b.type for b in first.content] == ["thinking", "tool_call"]
    assert first.content[1].type == "tool_call" and first.content[1].name == "exec_command"
    assert ctx.messages[4].role == "tool"
    assert ctx.messages[4].tool_results[0].tool_call_id == first.content[1].id
    assert "Process running with session ID" in ctx.messages[4].tool_results[0].text
    # parallel calls of one response share one assistant message and one tool message
    multi = [m for m in ctx.messages if len(m.tool_calls) == 3]
    assert multi
    after = ctx.messages[ctx.messages.index(multi[0]) + 1]
    assert [r.tool_call_id for r in after.tool_results] == [c.id for c in multi[0].tool_calls]


def test_truncated_rollout_is_bad_input(tmp_path: Path) -> None:
    text = sample("codemie_rollout").read_text(encoding="utf-8")
    broken = tmp_path / "rollout.jsonl"
    broken.write_text(text[: len(text) // 2], encoding="utf-8")
    with pytest.raises(BadInputError):
        compactkit.load(broken)


def test_other_jsonl_is_not_a_rollout(tmp_path: Path) -> None:
    other = tmp_path / "events.jsonl"
    other.write_text('{"type": "event_msg", "payload": {"type": "token_count"}}\n{"a": 1}\n')
    with pytest.raises(BadInputError):
        compactkit.load(other, format="codex-rollout")


def test_interrupted_call_gets_a_synthesized_result(tmp_path: Path) -> None:
    """A call whose output was never written (the user interrupted), then the user speaks."""
    records = raw_records(sample("codemie_rollout"))
    cut = next(
        i for i, r in enumerate(records) if r["payload"].get("type") == "function_call_output"
    )
    call_id = records[cut]["payload"]["call_id"]
    user = {
        "timestamp": records[cut]["timestamp"],
        "type": "response_item",
        "payload": {
            "type": "message",
            "role": "user",
            "content": [{"type": "input_text", "text": "stop"}],
        },
    }
    path = tmp_path / "rollout.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in [*records[:cut], user]))
    ctx = load(path)
    assert pairing_problems(ctx) == []
    assert ctx.metadata["synthesized_results"] == 1
    tool, last = ctx.messages[-2], ctx.messages[-1]
    assert tool.metadata == {"synthesized": True}
    assert tool.tool_results[0].tool_call_id == call_id and tool.tool_results[0].is_error
    assert (last.role, last.text) == ("user", "stop")
