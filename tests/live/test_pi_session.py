"""pi's own session loader (`SessionManager.open`, `buildSessionContext`, `convertToLlm` from the
pinned npm package, run by node: clis.pi_contexts) on sessions written by `--to pi-session`: for
every sample and corpus conversation, of every format, the messages pi would send its model are
exactly the context's; a pi compaction the writer keeps as pi's `compaction` entry is sent as pi
sends one (`pi_model_view`). That the pi CLI resumes such a file is test_resume.py."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

import compactkit
from compactkit import AgentContext
from compactkit.formats._chat import block_as_text
from compactkit.formats._util import session_uuid
from compactkit.formats.pi import pi_model_view
from compactkit.registry import make_registry
from tests.conftest import every_conversation
from tests.live.clis import pi_contexts

pytestmark = pytest.mark.live

FMT = make_registry(entry_points=False).formats.get("pi-session")


def _parts(parts: list[dict[str, Any]]) -> list[tuple[Any, ...]]:
    return [
        ("text", p["text"]) if p.get("type") == "text" else ("image", p.get("mimeType"))
        for p in parts
    ]


def _user(parts: list[tuple[Any, ...]]) -> tuple[Any, ...]:
    """A user turn as the model reads it: its text (parts joined by lines) and its images."""
    texts = "\n".join(p[1] for p in parts if p[0] == "text")
    return ("user", texts, [p for p in parts if p[0] == "image"])


def sent_by_pi(messages: list[dict[str, Any]]) -> list[tuple[Any, ...]]:
    """pi's LLM messages (user / assistant / toolResult) as comparable items."""
    items: list[tuple[Any, ...]] = []
    for m in messages:
        if m["role"] == "user":
            content = m["content"]
            if isinstance(content, str):
                content = [{"type": "text", "text": content}]
            items.append(_user(_parts(content)))
        elif m["role"] == "assistant":
            blocks: list[tuple[Any, ...]] = []
            for b in m["content"]:
                if b["type"] == "toolCall":
                    arguments = json.dumps(b["arguments"], sort_keys=True)
                    blocks.append(("call", b["id"], b["name"], arguments))
                elif b["type"] == "thinking":
                    blocks.append(("thinking", b["thinking"]))
                else:
                    blocks += _parts([b])
            items.append(("assistant", blocks))
        else:
            items.append(("result", m["toolCallId"], _parts(m["content"]), m["isError"]))
    return items


def _block_parts(blocks: Any) -> list[tuple[Any, ...]]:
    out: list[tuple[Any, ...]] = []
    for b in blocks:
        if b.type == "image" and b.data is not None:
            out.append(("image", b.media_type or "image/png"))
        elif b.type == "image":
            out.append(("text", f"[image: {b.url or 'not recorded'}]"))
        else:
            out.append(("text", block_as_text(b)))
    return out


def held_by(ctx: AgentContext) -> list[tuple[Any, ...]]:
    """The context's messages as the same items (a tool message is one item per result), after
    the system prompt, which the writer puts first as a custom message pi sends as a user turn."""
    items: list[tuple[Any, ...]] = []
    if ctx.system_instruction:
        items.append(_user([("text", ctx.system_instruction)]))
    for m in ctx.messages:
        if m.role == "tool":
            for r in m.tool_results:
                items.append(("result", r.tool_call_id, _block_parts(r.content), r.is_error))
        elif m.role == "assistant":
            blocks: list[tuple[Any, ...]] = []
            for b in m.content:
                if b.type == "tool_call":
                    arguments = b.input if isinstance(b.input, dict) else {"input": b.input}
                    blocks.append(("call", b.id, b.name, json.dumps(arguments, sort_keys=True)))
                elif b.type == "thinking":
                    blocks.append(("thinking", b.thinking))
                else:
                    blocks += _block_parts([b])
            if blocks:
                items.append(("assistant", blocks))
        elif m.content:
            items.append(_user(_block_parts(m.content)))
    return items


def test_pi_loads_every_written_conversation_as_the_context_holds_it(
    pi_cli: Path, tmp_path: Path
) -> None:
    written: dict[str, tuple[str, AgentContext]] = {}
    for n, (name, ctx) in enumerate(every_conversation()):
        path = tmp_path / f"{n}.jsonl"
        path.write_text(FMT.dump([ctx]), encoding="utf-8")
        written[str(path)] = (name, ctx)
    loaded = pi_contexts([Path(p) for p in written], executable=pi_cli)
    assert [d["file"] for d in loaded] == list(written)
    formats = set()
    for result in loaded:
        name, ctx = written[result["file"]]
        assert result["sessionId"] == session_uuid(ctx), name
        assert sent_by_pi(result["messages"]) == held_by(ctx), name
        formats.add(ctx.metadata["source_format"])
    assert len(loaded) > 20 and {"pi-session", "claude-code", "codex-rollout"} <= formats


CALL = {"type": "toolCall", "id": "toolu_1", "name": "bash", "arguments": {"command": "ls"}}


def _entry(kind: str, entry_id: str, parent: str | None, **fields: Any) -> dict[str, Any]:
    stamp = "2026-01-01T00:00:00.000Z"
    return {"type": kind, "id": entry_id, "parentId": parent, "timestamp": stamp, **fields}


def _msg(entry_id: str, parent: str | None, role: str, **fields: Any) -> dict[str, Any]:
    return _entry("message", entry_id, parent, message={"role": role, "timestamp": 1, **fields})


def _reply(entry_id: str, parent: str, *content: dict[str, Any]) -> dict[str, Any]:
    model = {"api": "anthropic-messages", "provider": "anthropic", "model": "claude-opus-4-5"}
    return _msg(entry_id, parent, "assistant", content=list(content), stopReason="stop", **model)


def test_a_compaction_pi_made_is_sent_as_pi_sends_it(pi_cli: Path, tmp_path: Path) -> None:
    """A v3 session pi compacted (records after session-manager.ts): written back with its
    `compaction` entry, pi sends the summary, the kept tail, then what came after, which is
    `pi_model_view` of the context; with the kept entry gone (a strategy removed it), the summary
    is sent in place and pi sends the whole context."""
    header = {"type": "session", "version": 3, "id": "01a23425-cf65-7607-b56b-b2b62937f155"}
    text = {"type": "text", "text": "Listed."}
    lines = [
        header | {"timestamp": "2026-01-01T00:00:00.000Z", "cwd": "/repo"},
        _msg("u1", None, "user", content=[{"type": "text", "text": "list the files"}]),
        _reply("r1", "u1", CALL),
        _msg(
            "t1",
            "r1",
            "toolResult",
            toolCallId="toolu_1",
            toolName="bash",
            content=[],
            isError=False,
        ),
        _reply("r2", "t1", text),
        _msg("u2", "r2", "user", content=[{"type": "text", "text": "now count them"}]),
        _reply("r3", "u2", {"type": "text", "text": "Two."}),
        _entry(
            "compaction", "c1", "r3", summary="listed files", firstKeptEntryId="u2", tokensBefore=50
        ),
        _msg("b1", "c1", "bashExecution", command="wc -l a", output="2 a", exitCode=0),
        _msg("u3", "b1", "user", content="and now?"),
    ]
    source = tmp_path / "source.jsonl"
    source.write_text("".join(json.dumps(r) + "\n" for r in lines), encoding="utf-8")
    ctx = compactkit.load_one(source)
    without_kept = ctx.with_messages([m for m in ctx.messages if m.metadata.get("id") != "u2"])
    files = [tmp_path / "whole.jsonl", tmp_path / "without_kept.jsonl"]
    for path, context in zip(files, (ctx, without_kept), strict=True):
        path.write_text(FMT.dump([context]), encoding="utf-8")
    whole, cut = pi_contexts(files, executable=pi_cli)
    assert sent_by_pi(whole["messages"]) == held_by(pi_model_view(ctx))
    assert [item[1] for item in held_by(pi_model_view(ctx)) if item[0] == "user"][1:] == [
        "now count them",
        "Ran `wc -l a`\n```\n2 a\n```",
        "and now?",
    ]
    assert sent_by_pi(cut["messages"]) == held_by(without_kept)
    assert whole["model"] == {"provider": "anthropic", "modelId": "claude-opus-4-5"}
