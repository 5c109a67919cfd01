"""The pi-session format on real pi coding-agent sessions (corpus + bundled sample)."""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path
from typing import Any

import pytest

import compactkit
from compactkit import AgentContext
from compactkit.context import TextBlock
from compactkit.errors import BadInputError
from compactkit.formats.pi import (
    BRANCH_SUMMARY_PREFIX,
    COMPACTION_SUMMARY_PREFIX,
    COMPACTION_SUMMARY_SUFFIX,
    NO_RESULT_TEXT,
    PiSessionFormat,
    pi_model_view,
)
from compactkit.recovery import expand
from compactkit.validate import validate

from ..conftest import CORPUS, corpus_file, corpus_files, sample, sample_files
from ._checks import assert_sniffs_only_its_own, pairing_problems

FOLDER = "pi_session"
SAMPLE = "pi-mono_before-compaction.head150"


def _files() -> list[Path]:
    samples = [p for p in sample_files() if p.name.startswith("pi-mono")]
    if CORPUS is None:
        return samples
    return [p for p in corpus_files() if p.parent.name == FOLDER] + samples


FILES = _files()


@cache
def _load(path: Path) -> AgentContext:
    return compactkit.load_one(path)


@cache
def _raw(path: Path) -> tuple[dict[str, Any], ...]:
    lines = path.read_text(encoding="utf-8").splitlines()
    return tuple(json.loads(line) for line in lines if line.strip())


def _raw_messages(path: Path, role: str) -> list[dict[str, Any]]:
    return [
        r["message"]
        for r in _raw(path)
        if r.get("type") == "message" and r["message"].get("role") == role
    ]


def _real(ctx: AgentContext) -> list[Any]:
    return [m for m in ctx.messages if not m.metadata.get("synthesized")]


# --------------------------------------------------------------------------- every file


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.name[:40])
def test_loads_by_detection_and_pairs(path: Path) -> None:
    ctx = _load(path)
    header = _raw(path)[0]
    assert ctx.metadata["source_format"] == "pi-session"
    assert ctx.metadata["session_id"] == header["id"]
    assert ctx.metadata["cwd"] == header["cwd"]
    assert ctx.system_instruction is None  # pi does not store its system prompt
    assert pairing_problems(ctx) == []
    assert validate(ctx) == []
    # pi's own summaries are part of the original: nothing for expand to restore
    assert ctx.recovery == {}
    assert expand(ctx) == ctx


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.name[:40])
def test_calls_and_results_match_raw_counts(path: Path) -> None:
    raw_calls = [
        b["id"]
        for m in _raw_messages(path, "assistant")
        for b in m["content"]
        if b["type"] == "toolCall"
    ]
    raw_results = [m["toolCallId"] for m in _raw_messages(path, "toolResult")]
    ctx = _load(path)
    calls = [c.id for m in _real(ctx) for c in m.tool_calls]
    results = [r.tool_call_id for m in _real(ctx) for r in m.tool_results]
    assert calls == raw_calls
    assert results == raw_results
    # every call without a recorded result got exactly one synthesized error result
    unanswered = [c for c in raw_calls if c not in set(raw_results)]
    synthesized = [r for m in ctx.messages if m.metadata.get("synthesized") for r in m.tool_results]
    assert sorted(r.tool_call_id for r in synthesized) == sorted(unanswered)
    assert all(r.is_error and r.text == NO_RESULT_TEXT for r in synthesized)
    assert ctx.metadata.get("synthesized_results", 0) == len(unanswered)


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.name[:40])
def test_text_and_thinking_kept(path: Path) -> None:
    ctx = _load(path)
    raw_users = _raw_messages(path, "user")
    assert ctx.task == raw_users[0]["content"][0]["text"]
    # each user message once, and nothing else counts as the user's words
    assert [u["content"][0]["text"] for u in raw_users] == [
        m.text for m in ctx.messages if m.is_human
    ]
    raw_thinking = [
        (b["thinking"], b["thinkingSignature"] or None)  # "" when aborted early
        for m in _raw_messages(path, "assistant")
        for b in m["content"]
        if b["type"] == "thinking"
    ]
    thinking = [
        (b.thinking, b.signature) for m in ctx.messages for b in m.content if b.type == "thinking"
    ]
    assert thinking == raw_thinking


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.name[:40])
def test_assistant_metadata_as_recorded(path: Path) -> None:
    raw = [m for m in _raw_messages(path, "assistant") if m["content"]]
    kept = [m for m in _real(_load(path)) if m.role == "assistant"]
    assert len(kept) == len(raw)
    for message, record in zip(kept, raw, strict=True):
        assert message.metadata["usage"] == record["usage"]
        assert message.metadata["model"] == record["model"]
        assert message.metadata["stop_reason"] == record["stopReason"]
    # pi never replays empty aborted/errored responses; neither do we
    empty = [m for m in _raw_messages(path, "assistant") if not m["content"]]
    assert _load(path).metadata.get("skipped_empty_assistant", 0) == len(empty)


def test_only_pi_files_sniff() -> None:
    assert_sniffs_only_its_own(PiSessionFormat(), FOLDER, "pi-mono")


# --------------------------------------------------------------------------- compaction


def test_compactions_become_summary_messages() -> None:
    path = corpus_file("pi-mono_before-compaction.jsonl")
    raw = _raw(path)
    ctx = _load(path)
    compactions = [(i, r) for i, r in enumerate(raw) if r["type"] == "compaction"]
    summaries = [(i, m) for i, m in enumerate(ctx.messages) if "pi_compaction" in m.metadata]
    assert len(summaries) == len(compactions) == 2
    assert ctx.metadata["compactions"] == 2
    for (raw_index, record), (index, message) in zip(compactions, summaries, strict=True):
        # the text pi sent the model in place of the history, as loaded and after expand
        sent = COMPACTION_SUMMARY_PREFIX + record["summary"] + COMPACTION_SUMMARY_SUFFIX
        assert message.content == (TextBlock(text=sent),)
        assert message.origin == "summary" and not message.is_human
        assert expand(ctx).messages[index] == message
        info = message.metadata["pi_compaction"]
        assert isinstance(info, dict)
        assert info["tokens_before"] == record["tokensBefore"]
        # the first kept message is the raw entry the compaction points at
        kept_entry = raw[record["firstKeptEntryIndex"]]["message"]
        first_kept = ctx.messages[int(str(info["first_kept_message"]))]
        assert first_kept.text == kept_entry["content"][0]["text"]
        # the message after the summary is the entry after the compaction
        after = raw[raw_index + 1]["message"]
        assert ctx.messages[index + 1].text == after["content"][0]["text"]


def test_model_view_after_latest_compaction() -> None:
    path = corpus_file("pi-mono_before-compaction.jsonl")
    ctx = _load(path)
    view = pi_model_view(ctx)
    raw = _raw(path)
    latest = [r for r in raw if r["type"] == "compaction"][-1]
    assert view.messages[0].text == (
        COMPACTION_SUMMARY_PREFIX + latest["summary"] + COMPACTION_SUMMARY_SUFFIX
    )
    assert (
        view.messages[1].text == raw[latest["firstKeptEntryIndex"]]["message"]["content"][0]["text"]
    )
    assert sum("pi_compaction" in m.metadata for m in view.messages) == 1
    assert len(view.messages) < len(ctx.messages)
    assert view.messages[-1] == ctx.messages[-1]
    assert pairing_problems(view) == []
    assert validate(view) == []
    assert view.recovery == {}


def test_bash_execution_is_user_text_as_pi_sends_it() -> None:
    path = corpus_file("pi-mono_before-compaction.jsonl")
    ctx = _load(path)
    runs = _raw_messages(path, "bashExecution")
    texts = [m.text for m in ctx.messages if m.metadata.get("pi_role") == "bashExecution"]
    assert len(texts) == len(runs) == 3
    # the command's output is the harness's text, not the user's words
    assert all(
        m.origin == "harness" for m in ctx.messages if m.metadata.get("pi_role") == "bashExecution"
    )
    assert texts[0] == f"Ran `ls`\n```\n{runs[0]['output']}\n```"


def test_model_change_goes_to_next_message() -> None:
    path = corpus_file("pi-mono_before-compaction.jsonl")
    changes = [r for r in _raw(path) if r["type"] == "model_change"]
    changed = [m for m in _load(path).messages if "pi_model_change" in m.metadata]
    assert len(changed) == 1  # five changes in a row: the last one is in effect
    assert changed[0].metadata["pi_model_change"] == {
        "provider": changes[-1]["provider"],
        "model_id": changes[-1]["modelId"],
    }


# --------------------------------------------------------------------------- bundled sample


def test_bundled_sample() -> None:
    ctx = compactkit.load_one(sample(SAMPLE))
    assert ctx.metadata["model"] == "claude-opus-4-5"
    assert ctx.metadata["thinking_level"] == "high"  # the last thinking_level_change
    first_turn = ctx.messages[1]
    assert first_turn.role == "assistant"
    assert [c.name for c in first_turn.tool_calls] == ["read", "read"]
    assert [m.role for m in ctx.messages[2:4]] == ["tool", "tool"]
    # the aborted response that has thinking is kept, marked, and sits in its own turn
    aborted = [m for m in ctx.messages if m.metadata.get("stop_reason") == "aborted"]
    assert len(aborted) == 1
    assert aborted[0].content[0].type == "thinking"
    assert pairing_problems(ctx) == []


def _as_v3(path: Path) -> list[dict[str, Any]]:
    """The records of a v1 file migrated as pi migrates them (ids, parentId chain)."""
    records = [dict(r) for r in _raw(path)]
    records[0]["version"] = 3
    previous = None
    for index, record in enumerate(records[1:], start=1):
        record["id"] = f"e{index:04d}"
        record["parentId"] = previous
        previous = record["id"]
    return records


def test_tree_session_follows_the_last_leaf(tmp_path: Path) -> None:
    records = _as_v3(sample(SAMPLE))
    # the user went back to the first answer and asked something else
    fork = next(
        r
        for r in records[1:]
        if r.get("type") == "message" and r["message"]["role"] == "assistant"
        if r["message"]["stopReason"] == "stop"
    )
    branch = {
        "type": "message",
        "id": "branch01",
        "parentId": fork["id"],
        "timestamp": "2025-12-09T01:00:00.000Z",
        "message": {"role": "user", "content": "start over", "timestamp": 1},
    }
    path = tmp_path / "tree.jsonl"
    lines = [json.dumps(r) for r in [*records, branch]]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    ctx = compactkit.load_one(path)
    assert ctx.metadata["version"] == 3
    assert ctx.messages[-1].text == "start over"
    assert ctx.messages[-2].metadata["id"] == fork["id"]
    ids = [m.metadata.get("id") for m in ctx.messages]
    assert ids.index(fork["id"]) == len(ctx.messages) - 2
    assert pairing_problems(ctx) == []


def test_a_file_cut_in_half_loads_up_to_the_cut(tmp_path: Path) -> None:
    text = sample(SAMPLE).read_text(encoding="utf-8")
    broken = tmp_path / "truncated.jsonl"
    broken.write_text(text[: len(text) // 2], encoding="utf-8")
    ctx = compactkit.load_one(broken)  # pi skips the cut line (`loadEntriesFromFile`)
    assert ctx.metadata["skipped_records"]["malformed line"] == 1  # type: ignore[index]
    assert ctx.task.strip()


def test_other_jsonl_is_not_pi(tmp_path: Path) -> None:
    claude = next(p for p in sample_files() if p.name.startswith("claude-code"))
    with pytest.raises(BadInputError, match="not a pi session"):
        compactkit.load(claude, format="pi-session")
    header_only = tmp_path / "empty.jsonl"
    header_only.write_text(json.dumps(_raw(sample(SAMPLE))[0]) + "\n", encoding="utf-8")
    with pytest.raises(BadInputError, match="no conversation"):
        compactkit.load(header_only)


# --------------------------------------------------------------------------- records after the
# upstream schema (badlogic/pi-mono packages/coding-agent/src/core/session-manager.ts, messages.ts)


def _entry(kind: str, entry_id: str | None, parent: str | None, **fields: Any) -> dict[str, Any]:
    ids = {} if entry_id is None else {"id": entry_id, "parentId": parent}
    return {"type": kind, **ids, "timestamp": "2026-01-01T00:00:00.000Z", **fields}


def _msg(entry_id: str | None, parent: str | None, role: str, **fields: Any) -> dict[str, Any]:
    return _entry("message", entry_id, parent, message={"role": role, "timestamp": 1, **fields})


def _assistant(entry_id: str | None, parent: str | None, text: str, **fields: Any) -> Any:
    content = [{"type": "text", "text": text}, *fields.pop("calls", [])]
    return _msg(entry_id, parent, "assistant", content=content, model="m", stopReason="stop")


def _write(tmp_path: Path, records: list[dict[str, Any]]) -> AgentContext:
    path = tmp_path / "session.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    return compactkit.load_one(path)


IMAGE = {"type": "image", "data": "iVBORw0KGgo=", "mimeType": "image/png"}


def test_v3_session_every_user_input_once(tmp_path: Path) -> None:
    call = {"type": "toolCall", "id": "c1", "name": "bash", "arguments": {"command": "ls"}}
    header = {"type": "session", "version": 3, "id": "s1", "timestamp": "t", "cwd": "/repo"}
    ctx = _write(
        tmp_path,
        [
            header,
            _entry("model_change", "a0", None, provider="anthropic", modelId="claude"),
            _entry("thinking_level_change", "a1", "a0", thinkingLevel="high"),
            _msg("u1", "a1", "user", content=[{"type": "text", "text": "look"}, IMAGE]),
            _assistant("r1", "u1", "Running ls.", calls=[call]),
            _msg("t1", "r1", "toolResult", toolCallId="c1", toolName="bash", content="a b"),
            _msg("t2", "t1", "toolResult", toolCallId="c1", toolName="bash", content="a b"),
            _msg("b1", "t2", "bashExecution", command="git status", output="clean", exitCode=0),
            _msg("b2", "b1", "bashExecution", command="ls", output="x", excludeFromContext=True),
            _entry("custom", "x1", "b2", customType="todo", data={"n": 1}),
            _entry("label", "l1", "x1", targetId="u1", label="start"),
            _entry("session_info", "i1", "l1", name="Renames"),
            _entry("custom_message", "m1", "i1", customType="hint", content="use rg", display=True),
            _msg("u2", "m1", "user", content="old question"),  # left by the branch below
            _entry("branch_summary", "s1", "m1", fromId="u2", summary="asked an old question"),
            _msg("u3", "s1", "user", content="rename foo"),
            _assistant("r3", "u3", "Renamed."),
            _entry(
                "compaction",
                "c9",
                "r3",
                summary="renamed foo",
                firstKeptEntryId="u3",
                tokensBefore=1234,
            ),
            _entry("future_entry", "f1", "c9"),
            _msg("u4", "f1", "user", content=[{"type": "text", "text": "now bar"}]),
        ],
    )
    humans = [m for m in ctx.messages if m.is_human]
    assert [m.text for m in humans] == ["look", "rename foo", "now bar"]
    assert [b.type for b in humans[0].content] == ["text", "image"]
    assert ctx.task == "look"
    origins = [(m.origin, m.text[:20]) for m in ctx.messages if m.role == "user" and not m.is_human]
    assert origins == [
        ("harness", "Ran `git status`\n```"),
        ("harness", "use rg"),
        ("summary", BRANCH_SUMMARY_PREFIX[:20]),
        ("summary", COMPACTION_SUMMARY_PREFIX[:20]),
    ]
    assert ctx.recovery == {} and expand(ctx) == ctx
    compaction = next(m for m in ctx.messages if "pi_compaction" in m.metadata)
    assert compaction.text == COMPACTION_SUMMARY_PREFIX + "renamed foo" + COMPACTION_SUMMARY_SUFFIX
    assert ctx.metadata["title"] == "Renames"
    assert ctx.metadata["skipped_records"] == {
        "custom": 1,
        "future_entry": 1,
        "label": 1,
        "message/bashExecution": 1,
        "message/toolResult": 1,
        "message/user (other branch)": 1,
    }
    view = pi_model_view(ctx)
    assert [m.text for m in view.messages if m.is_human] == ["rename foo", "now bar"]


def test_v1_session_with_hook_messages(tmp_path: Path) -> None:
    """Version 1: no ids, compactions point at an entry index; v2 custom messages were
    `hookMessage`."""
    header = {"type": "session", "id": "s1", "timestamp": "t", "cwd": "/repo"}
    ctx = _write(
        tmp_path,
        [
            header,
            _msg(None, None, "user", content="first"),
            _assistant(None, None, "One."),
            _msg(None, None, "hookMessage", customType="lint", content="2 warnings", display=True),
            _msg(None, None, "user", content="second"),
            _entry(
                "compaction", None, None, summary="did one", firstKeptEntryIndex=4, tokensBefore=10
            ),
            _msg(None, None, "user", content=[{"type": "text", "text": "third"}, IMAGE]),
        ],
    )
    assert [m.text for m in ctx.messages if m.is_human] == ["first", "second", "third"]
    summary = next(m for m in ctx.messages if m.origin == "summary")
    assert summary.metadata["pi_compaction"] == {
        "first_kept_message": 3,
        "first_kept_entry_index": 4,
        "summarized_messages": 3,
        "tokens_before": 10,
    }
    assert [m.origin for m in ctx.messages if m.role == "user"] == [
        None,
        "harness",
        None,
        "summary",
        None,
    ]
    assert expand(ctx) == ctx
    assert "skipped_records" not in ctx.metadata
