"""The pi-session writer (`--to pi-session`): a context written as a pi session (version 3) reads
back as the same conversation, entry for entry as pi writes them (badlogic/pi-mono
`packages/coding-agent/src/core/session-manager.ts` entry types, `messages.ts`, `packages/ai`
message types), with the user's words pinned again, and as a fixed point. That pi itself opens such
a file and sends exactly that history is tested with pi in tests/live (test_resume.py, test_pi_session.py)."""

from __future__ import annotations

import itertools
import json
from pathlib import Path
from typing import Any

import compactkit
from compactkit import AgentContext
from compactkit.context import ImageBlock, Message, TextBlock, ThinkingBlock, ToolCallBlock
from compactkit.formats._chat import block_as_text
from compactkit.formats.base import parse_text
from compactkit.formats.pi import (
    ORIGIN_DETAIL,
    SESSION_VERSION,
    write_session,
)
from compactkit.pipeline import build_pipeline
from compactkit.registry import make_registry

from ..conftest import corpus_files, sample_files

FMT = make_registry(entry_points=False).formats.get("pi-session")
MASK = "observation-mask:keep_last=0,min_tokens=0"
STAMP = "2026-01-01T00:00:00.000Z"


def conversation(ctx: AgentContext) -> list[tuple[str, list[tuple[Any, ...]]]]:
    """What a model is given, message by message: markers as their text, and consecutive tool
    messages as one (pi stores one `toolResult` per call)."""
    out: list[tuple[str, list[tuple[Any, ...]]]] = []
    for m in ctx.messages:
        blocks: list[tuple[Any, ...]] = []
        for b in m.content:
            if b.type == "tool_call":
                blocks.append(("call", b.id, b.name, json.dumps(b.input, sort_keys=True)))
            elif b.type == "tool_result":
                parts = tuple(block_as_text(p) for p in b.content)
                blocks.append(("result", b.tool_call_id, parts, b.is_error))
            elif isinstance(b, ThinkingBlock):
                blocks.append(("thinking", b.thinking, b.signature))
            elif isinstance(b, ImageBlock):
                blocks.append(("image", b.media_type, b.data))
            else:
                blocks.append(("text", block_as_text(b)))
        if m.role == "tool" and out and out[-1][0] == "tool":
            out[-1][1].extend(blocks)
        else:
            out.append((m.role, blocks))
    return out


def origins(ctx: AgentContext) -> list[str | None]:
    return [m.origin for m in ctx.messages if m.role == "user"]


def round_trip(ctx: AgentContext) -> tuple[str, AgentContext]:
    text = FMT.dump([ctx])
    (back,) = FMT.load(parse_text(text, "written.jsonl"))
    return text, back


def records(text: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in text.splitlines()]


def _entry(kind: str, entry_id: str, parent: str | None, **fields: Any) -> dict[str, Any]:
    return {"type": kind, "id": entry_id, "parentId": parent, "timestamp": STAMP, **fields}


def _msg(entry_id: str, parent: str | None, role: str, **fields: Any) -> dict[str, Any]:
    return _entry("message", entry_id, parent, message={"role": role, "timestamp": 1, **fields})


USAGE = {
    "input": 1437,
    "output": 8,
    "cacheRead": 1407,
    "cacheWrite": 0,
    "totalTokens": 2852,
    "cost": {
        "input": 0.004,
        "output": 0.0002,
        "cacheRead": 0.0004,
        "cacheWrite": 0,
        "total": 0.0046,
    },
}
ASSISTANT = {"api": "anthropic-messages", "provider": "anthropic", "model": "claude-opus-4-5"}


def _session(tmp_path: Path) -> AgentContext:
    """A v3 session with every entry type that reaches the model, as pi 0.73 writes them."""
    call = {"type": "toolCall", "id": "toolu_1", "name": "bash", "arguments": {"command": "ls"}}
    thinking = {"type": "thinking", "thinking": "list it", "thinkingSignature": "sig=="}
    header = {"type": "session", "version": 3, "id": "01a23425-cf65-7607-b56b-b2b62937f155"}
    lines = [
        header | {"timestamp": STAMP, "cwd": "/repo"},
        _entry("session_info", "i0", None, name="Renames"),
        _entry("model_change", "a0", "i0", provider="anthropic", modelId="claude-opus-4-5"),
        _entry("thinking_level_change", "a1", "a0", thinkingLevel="high"),
        _msg("u1", "a1", "user", content=[{"type": "text", "text": "list the files"}]),
        _msg("r1", "u1", "assistant", content=[thinking, call], usage=USAGE, **ASSISTANT),
        _msg("t1", "r1", "toolResult", toolCallId="toolu_1", toolName="bash", isError=False),
        _msg("b1", "t1", "bashExecution", command="git status", output="clean", exitCode=1),
        _entry("custom_message", "m1", "b1", customType="hint", content="use rg", display=True),
        _msg("x1", "m1", "custom", customType="lint", content="2 warnings", display=False),
        _entry("branch_summary", "s1", "x1", fromId="zz", summary="asked an old question"),
        _msg("u3", "s1", "user", content="rename foo"),
        _msg("r3", "u3", "assistant", content=[{"type": "text", "text": "Renamed."}], **ASSISTANT),
        _entry(
            "compaction", "c9", "r3", summary="renamed foo", firstKeptEntryId="u3", tokensBefore=9
        ),
        _msg("u4", "c9", "user", content=[{"type": "text", "text": "now bar"}]),
        _msg(
            "r4",
            "u4",
            "assistant",
            content=[{"type": "text", "text": "Half"}],
            stopReason="aborted",
        ),
    ]
    lines[5]["message"]["stopReason"] = "toolUse"
    lines[6]["message"]["content"] = [{"type": "text", "text": "a.txt\nb.txt"}]  # pi's bash output
    path = tmp_path / "session.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in lines), encoding="utf-8")
    return compactkit.load_one(path)


def test_a_pi_session_reads_back_entry_for_entry(tmp_path: Path) -> None:
    ctx = _session(tmp_path)
    text, back = round_trip(ctx)
    assert conversation(back) == conversation(ctx)
    assert origins(back) == origins(ctx)
    assert [m.metadata.get("id") for m in back.messages] == [
        m.metadata.get("id") for m in ctx.messages
    ]  # pi's entry ids are kept
    assert back.metadata["session_id"] == ctx.metadata["session_id"]
    assert back.metadata["title"] == "Renames" and back.metadata["thinking_level"] == "high"
    assert FMT.dump([back]) == text  # a fixed point

    lines = records(text)
    assert lines[0] == {
        "type": "session",
        "version": SESSION_VERSION,
        "id": "01a23425-cf65-7607-b56b-b2b62937f155",
        "timestamp": STAMP,
        "cwd": "/repo",
    }
    entries = lines[1:]
    assert entries[0]["parentId"] is None
    assert all(e["parentId"] == p["id"] for p, e in itertools.pairwise(entries))
    assert len({e["id"] for e in entries}) == len(entries)
    kinds = [(e["type"], e.get("message", {}).get("role")) for e in entries]
    assert kinds == [
        ("session_info", None),
        ("model_change", None),
        ("thinking_level_change", None),
        ("message", "user"),
        ("message", "assistant"),
        ("message", "toolResult"),
        ("message", "bashExecution"),
        ("custom_message", None),
        ("message", "custom"),
        ("branch_summary", None),
        ("message", "user"),
        ("message", "assistant"),
        ("compaction", None),
        ("message", "user"),
        ("message", "assistant"),
    ]
    by_id = {e["id"]: e for e in entries}
    assert by_id["b1"]["message"] | {"timestamp": 0} == {
        "role": "bashExecution",
        "command": "git status",
        "output": "clean",
        "exitCode": 1,
        "cancelled": False,
        "truncated": False,
        "timestamp": 0,
    }
    compaction = by_id["c9"]
    assert (compaction["summary"], compaction["firstKeptEntryId"]) == ("renamed foo", "u3")
    assert compaction["tokensBefore"] == 9
    assert (by_id["s1"]["fromId"], by_id["s1"]["summary"]) == ("zz", "asked an old question")
    assert by_id["r1"]["message"]["content"][0] == {
        "type": "thinking",
        "thinking": "list it",
        "thinkingSignature": "sig==",
    }
    # every message carries pi's millisecond timestamp of its entry
    assert {e["message"]["timestamp"] for e in entries if "message" in e} == {1767225600000}


def test_what_pi_leaves_out_when_sending_is_written_so_that_it_is_sent(tmp_path: Path) -> None:
    """pi drops an aborted or failed assistant message before calling a model, and a stale usage
    near the window makes it compact at once: neither may undo what the context holds."""
    ctx = _session(tmp_path)
    entries = records(FMT.dump([ctx]))[1:]
    last = entries[-1]["message"]
    assert (last["content"], last["stopReason"]) == ([{"type": "text", "text": "Half"}], "stop")
    usage = next(e for e in entries if e["id"] == "r1")["message"]["usage"]
    assert usage["output"] == 8 and usage["cost"] == USAGE["cost"]
    assert (usage["input"], usage["cacheRead"], usage["totalTokens"]) == (0, 0, 8)


def test_a_summary_pi_did_not_write_stays_in_place(tmp_path: Path) -> None:
    """A compaction whose kept entries a strategy removed is written as a `compactionSummary`
    message in place; a summary from another agent and a system message as `custom` messages,
    their origins kept in `details`."""
    ctx = _session(tmp_path)
    compacted = ctx.with_messages([m for m in ctx.messages if m.metadata.get("id") != "u3"])
    text, back = round_trip(compacted)
    assert conversation(back) == conversation(compacted)
    entry = next(e for e in records(text) if e.get("id") == "c9")
    assert entry["message"] == {
        "role": "compactionSummary",
        "summary": "renamed foo",
        "tokensBefore": 9,
        "timestamp": 1767225600000,
    }

    foreign = AgentContext(
        messages=(
            Message(role="system", content=(TextBlock(text="Be brief."),)),
            Message(role="user", content=(TextBlock(text="fix the bug"),)),
            Message(
                role="user",
                content=(TextBlock(text="Earlier: the bug is in parse()"),),
                metadata={"origin": "summary"},
            ),
            Message(
                role="assistant",
                content=(ToolCallBlock(id="c1", name="apply_patch", input="*** Begin Patch"),),
                metadata={"stop_reason": "error"},
            ),
        ),
        metadata={"session_id": "not-a-uuid", "cwd": "/w"},
    )
    text, back = round_trip(foreign)
    assert [(m.role, m.origin, m.text) for m in back.messages] == [
        ("user", "harness", "Be brief."),
        ("user", None, "fix the bug"),
        ("user", "summary", "Earlier: the bug is in parse()"),
        ("assistant", None, ""),
    ]
    assert back.messages[3].tool_calls[0].input == {"input": "*** Begin Patch"}
    written = records(text)
    assert written[0]["id"] == back.metadata["session_id"] != "not-a-uuid"  # a UUID for pi
    assert written[3]["message"]["details"] == {ORIGIN_DETAIL: "summary"}
    assert FMT.dump([back]) == text


def test_a_compacted_session_is_written_with_the_markers_as_pi_sends_them() -> None:
    for path in [*sample_files(), *corpus_files()]:
        if not path.name.startswith("pi-mono"):
            continue
        ctx = compactkit.load_one(path)
        compacted = build_pipeline([MASK]).run(ctx).context
        masked = [
            p
            for m in compacted.messages
            for r in m.tool_results
            for p in r.content
            if p.type == "masked"
        ]
        assert masked, path
        text, back = round_trip(compacted)
        assert conversation(back) == conversation(compacted), path
        assert [m.text for m in back.messages if m.is_human] == [
            m.text for m in ctx.messages if m.is_human
        ]
        results = [
            e["message"]["content"]
            for e in records(text)[1:]
            if e.get("message", {}).get("role") == "toolResult"
        ]
        assert {"type": "text", "text": block_as_text(masked[0])} in itertools.chain(*results)


def test_the_command_of_a_bash_execution_is_pinned_again(tmp_path: Path) -> None:
    ctx = _session(tmp_path)
    assert [p.reason for p in ctx.pins] == ["user-command"]
    text, back = round_trip(ctx)
    assert back.pins == ctx.pins
    assert [b.text for b in back.messages[3].content] == [
        b.text for b in ctx.messages[3].content if isinstance(b, TextBlock)
    ]
    assert '"command": "git status"' in text


def test_write_session_takes_one_context() -> None:
    ctx = AgentContext(messages=(Message(role="user", content=(TextBlock(text="hi"),)),))
    assert records(write_session(ctx))[1]["message"]["content"] == [{"type": "text", "text": "hi"}]
