"""The claude-code format on real Claude Code session files (corpus + bundled sample)."""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path
from typing import Any

import pytest

import compactkit
from compactkit import AgentContext
from compactkit.errors import BadInputError
from compactkit.formats.claude_code import ClaudeCodeFormat
from compactkit.recovery import expand
from compactkit.validate import validate

from ..conftest import CORPUS, corpus_file, corpus_files, sample, sample_files
from ._checks import assert_sniffs_only_its_own, pairing_problems

FOLDER = "claude_code_jsonl"
SAMPLE = "claude-code-viewer_sample-project_1af7fc5e"


def _files() -> list[Path]:
    if CORPUS is None:
        return [p for p in sample_files() if p.name.startswith("claude-code-viewer")]
    return [p for p in corpus_files() if p.parent.name == FOLDER]


FILES = _files()


@cache
def _load(path: Path) -> tuple[AgentContext, ...]:
    return tuple(compactkit.load(path))


@cache
def _raw(path: Path) -> tuple[dict[str, Any], ...]:
    lines = path.read_text(encoding="utf-8").splitlines()
    return tuple(json.loads(line) for line in lines if line.strip())


def _blocks(record: dict[str, Any]) -> list[dict[str, Any]]:
    content = record.get("message", {}).get("content")
    return content if isinstance(content, list) else []


def _real(ctx: AgentContext) -> list[Any]:
    return [m for m in ctx.messages if not m.metadata.get("synthesized")]


# --------------------------------------------------------------------------- every file


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.name[:40])
def test_loads_by_detection_and_pairs(path: Path) -> None:
    contexts = _load(path)
    assert contexts
    for ctx in contexts:
        assert ctx.metadata["source_format"] == "claude-code"
        assert ctx.system_instruction is None  # Claude Code does not store its system prompt
        assert pairing_problems(ctx) == []
        assert validate(ctx) == []
        assert ctx.messages[0].role == "user"


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.name[:40])
def test_calls_and_results_match_raw_counts(path: Path) -> None:
    raw = _raw(path)
    raw_calls = {
        b["id"]
        for r in raw
        if r.get("type") == "assistant"
        for b in _blocks(r)
        if b.get("type") == "tool_use"
    }
    raw_results = [
        b["tool_use_id"]
        for r in raw
        if r.get("type") == "user"
        for b in _blocks(r)
        if b.get("type") == "tool_result"
    ]
    contexts = _load(path)
    calls = [c.id for ctx in contexts for m in _real(ctx) for c in m.tool_calls]
    results = [r.tool_call_id for ctx in contexts for m in _real(ctx) for r in m.tool_results]
    assert sorted(calls) == sorted(raw_calls)
    assert sorted(results) == sorted(raw_results)
    # the toolUseResult sidecar is not duplicated into the context
    assert all("toolUseResult" not in json.dumps(m.metadata) for c in contexts for m in c.messages)


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.name[:40])
def test_one_assistant_message_per_api_response(path: Path) -> None:
    raw = _raw(path)
    last_record: dict[str, dict[str, Any]] = {}
    for r in raw:
        if r.get("type") == "assistant":
            last_record[r["message"]["id"]] = r
    assistants = [m for ctx in _load(path) for m in _real(ctx) if m.role == "assistant"]
    assert sorted(m.metadata["id"] for m in assistants) == sorted(last_record)
    for m in assistants:
        final = last_record[str(m.metadata["id"])]["message"]
        assert m.metadata["usage"] == final["usage"]  # usage exactly as recorded, final record
        assert m.metadata["model"] == final["model"]


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.name[:40])
def test_thinking_kept_in_the_turn_with_its_calls(path: Path) -> None:
    raw = _raw(path)
    raw_thinking = [
        b["thinking"]
        for r in raw
        if r.get("type") == "assistant"
        for b in _blocks(r)
        if b.get("type") == "thinking"
    ]
    kept = [
        b.thinking
        for ctx in _load(path)
        for m in ctx.messages
        for b in m.content
        if b.type == "thinking"
    ]
    assert kept == raw_thinking
    for ctx in _load(path):
        for m in ctx.messages:
            kinds = [b.type for b in m.content]
            if "thinking" in kinds:
                assert m.role == "assistant"
                assert kinds.index("thinking") == 0  # thinking first, then text/calls


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.name[:40])
def test_first_user_message_is_the_raw_text(path: Path) -> None:
    raw = _raw(path)
    first = next(r for r in raw if r.get("type") == "user")
    content = first["message"]["content"]
    text = content if isinstance(content, str) else content[0]["text"]
    ctx = _load(path)[0]
    assert ctx.messages[0].text == text
    assert ctx.metadata["session_id"] == first["sessionId"]
    assert ctx.metadata["cwd"] == first["cwd"]


def test_only_claude_code_files_sniff() -> None:
    assert_sniffs_only_its_own(ClaudeCodeFormat(), FOLDER, "claude-code")


# --------------------------------------------------------------------------- particular files


def test_bundled_sample() -> None:
    ctx = compactkit.load_one(sample(SAMPLE))
    assert [m.role for m in ctx.messages[:3]] == ["user", "user", "assistant"]
    assert ctx.messages[0].text.startswith("<command-message>init is analyzing")
    assert ctx.messages[1].metadata["is_meta"] is True  # the expanded /init prompt, sent to model
    assert sum(m.role == "assistant" for m in ctx.messages) == 7
    # five parallel calls, one record each, merged into one response and answered in the
    # order the tools finished
    i, turn = next((i, m) for i, m in enumerate(ctx.messages) if len(m.tool_calls) == 5)
    assert [c.name for c in turn.tool_calls] == ["Bash", "Glob", "Glob", "Glob", "Glob"]
    answers = [r.tool_call_id for m in ctx.messages[i + 1 : i + 6] for r in m.tool_results]
    assert sorted(answers) == sorted(c.id for c in turn.tool_calls)
    assert answers[2] == turn.tool_calls[0].id  # the Bash call finished after two Globs
    write_result = next(
        r for m in ctx.messages for r in m.tool_results if "requested permissions" in r.text
    )
    assert write_result.is_error
    assert pairing_problems(ctx) == []


def test_sidechains_are_separate_conversations() -> None:
    path = corpus_file("fe5e1c67")
    contexts = _load(path)
    assert len(contexts) == 6
    main, subagents = contexts[0], contexts[1:]
    assert "sidechain" not in main.metadata
    task_calls = {c.id: c for m in main.messages for c in m.tool_calls if c.name == "Task"}
    assert len(task_calls) == 5
    for number, sub in enumerate(subagents, start=1):
        assert sub.metadata["sidechain"] is True
        assert sub.metadata["conversation"] == number
        call = task_calls[str(sub.metadata["parent_tool_call_id"])]
        assert isinstance(call.input, dict)
        assert sub.messages[0].text == call.input["prompt"]
    with pytest.raises(BadInputError, match="holds 6 conversations"):
        compactkit.load_one(path)
    assert compactkit.load_one(f"{path}#2") == subagents[1]


def test_parallel_results_parented_off_the_chain_are_kept() -> None:
    # Claude Code 2.1 parents each parallel tool result on the record of its own call, so the
    # parentUuid path from the last record passes through only one result per batch.
    path = corpus_file("agent-a485154")
    (ctx,) = _load(path)
    assert ctx.metadata["sidechain"] is True
    assert ctx.metadata["agent_id"] == "a485154"
    assert "off_path_records" not in ctx.metadata
    first_turn = ctx.messages[1]
    assert [c.name for c in first_turn.tool_calls] == ["Glob", "Glob", "Read", "Read"]
    assert [m.role for m in ctx.messages[2:6]] == ["tool"] * 4
    assert sum(len(m.tool_results) for m in ctx.messages) == 20


def test_queued_prompt_delivered_mid_turn_is_kept() -> None:
    path = corpus_file("session-3fe1b6bc")
    ctx = _load(path)[0]
    queued = [i for i, m in enumerate(ctx.messages) if m.metadata.get("queued_command")]
    assert len(queued) == 1
    i = queued[0]
    enqueued = [r["content"] for r in _raw(path) if r.get("operation") == "enqueue"]
    assert ctx.messages[i].text == enqueued[-1]
    assert ctx.messages[i - 1].role == "tool"
    reply = ctx.messages[i + 1]
    assert reply.role == "assistant"
    thinking = reply.content[0]
    assert thinking.type == "thinking"
    assert "check a specific session" in thinking.thinking  # the model did see the prompt


def test_command_caveat_is_a_user_message() -> None:
    ctx = _load(corpus_file("session-196820da"))[0]
    first = ctx.messages[0]
    assert first.role == "user"
    assert first.metadata["is_meta"] is True
    assert first.text.startswith("Caveat: The messages below were generated by the user")


def test_follows_the_last_branch(tmp_path: Path) -> None:
    # A real session, then the user rewinds the last turn and asks something else: the new
    # prompt's parentUuid points back to the tool result that ended the turn before it.
    lines = sample(SAMPLE).read_text(encoding="utf-8").splitlines()
    records = [json.loads(line) for line in lines]
    last_turn = next(
        r
        for r in records
        if r["type"] == "assistant" and _blocks(r)[0].get("text", "").startswith("The directory")
    )
    fork = next(i for i, r in enumerate(records) if r["uuid"] == last_turn["parentUuid"])
    rewound = dict(records[0])
    rewound.update(
        parentUuid=records[fork]["uuid"],
        uuid="00000000-0000-4000-8000-000000000001",
        message={"role": "user", "content": "Actually, just list the files."},
        timestamp="2025-09-03T01:00:00.000Z",
    )
    path = tmp_path / "branched.jsonl"
    path.write_text("\n".join([*lines, json.dumps(rewound)]) + "\n", encoding="utf-8")
    ctx = compactkit.load_one(path)
    assert ctx.messages[-1].text == "Actually, just list the files."
    assert ctx.messages[-2].role == "tool"
    assert ctx.messages[-2].metadata["uuid"] == records[fork]["uuid"]
    assert ctx.metadata["off_path_records"] == len(records) - fork - 1
    assert not any("The directory appears" in m.text for m in ctx.messages)
    assert pairing_problems(ctx) == []


def test_compact_boundary_keeps_history_and_marks_the_summary(tmp_path: Path) -> None:
    # After /compact Claude Code writes a boundary whose parentUuid is null (the chain goes on
    # through logicalParentUuid) and the summary as a user record with isCompactSummary.
    lines = sample(SAMPLE).read_text(encoding="utf-8").splitlines()
    records = [json.loads(line) for line in lines]
    base = {k: records[-1][k] for k in ("isSidechain", "userType", "cwd", "sessionId", "version")}
    summary = "This session is being continued from a previous conversation: CLAUDE.md created."
    extra = [
        {
            **base,
            "type": "system",
            "subtype": "compact_boundary",
            "parentUuid": None,
            "logicalParentUuid": records[-1]["uuid"],
            "uuid": "c0000000-0000-4000-8000-000000000001",
            "content": "Conversation compacted",
            "compactMetadata": {"trigger": "manual", "preTokens": 20000},
        },
        {
            **base,
            "type": "user",
            "parentUuid": "c0000000-0000-4000-8000-000000000001",
            "uuid": "c0000000-0000-4000-8000-000000000002",
            "isCompactSummary": True,
            "message": {"role": "user", "content": summary},
        },
        {
            **base,
            "type": "user",
            "parentUuid": "c0000000-0000-4000-8000-000000000002",
            "uuid": "c0000000-0000-4000-8000-000000000003",
            "message": {"role": "user", "content": "thanks"},
        },
    ]
    path = tmp_path / "compacted.jsonl"
    path.write_text("\n".join([*lines, *map(json.dumps, extra)]) + "\n", encoding="utf-8")
    before = compactkit.load_one(sample(SAMPLE))
    ctx = compactkit.load_one(path)
    assert ctx.messages[: len(before.messages)] == before.messages
    marker = ctx.messages[-2]
    assert marker.role == "user"
    assert marker.metadata["compact_summary"] is True
    (block,) = marker.content
    assert block.type == "summary"
    assert block.text == summary
    assert ctx.messages[-1].text == "thanks"
    assert "off_path_records" not in ctx.metadata
    assert validate(ctx) == []
    (restored,) = expand(ctx).messages[-2].content
    assert restored.type == "text"  # what the model was sent
    assert restored.text == summary


def test_truncated_file_is_bad_input(tmp_path: Path) -> None:
    text = sample(SAMPLE).read_text(encoding="utf-8")
    broken = tmp_path / "truncated.jsonl"
    broken.write_text(text[: len(text) // 2], encoding="utf-8")
    with pytest.raises(BadInputError) as info:
        compactkit.load(broken)
    assert "\n" not in str(info.value)


def test_other_jsonl_is_not_claude_code(tmp_path: Path) -> None:
    other = tmp_path / "pi.jsonl"
    pi = next(p for p in sample_files() if p.name.startswith("pi-mono"))
    other.write_text(pi.read_text(encoding="utf-8"), encoding="utf-8")
    with pytest.raises(BadInputError, match="not a Claude Code session"):
        compactkit.load(other, format="claude-code")
