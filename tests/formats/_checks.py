"""Structural checks every loaded conversation must pass, shared by the format tests."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import compactkit
from compactkit import AgentContext, Format
from compactkit.formats.base import read_document

from ..conftest import corpus_files


def pairing_problems(ctx: AgentContext) -> list[str]:
    """Tool results without an earlier call, and calls left unanswered (except a final pending one)."""
    problems: list[str] = []
    open_calls: dict[str, int] = {}
    answered: set[str] = set()
    for i, msg in enumerate(ctx.messages):
        for block in msg.content:
            if block.type == "tool_call":
                if block.id in open_calls or block.id in answered:
                    problems.append(f"message {i}: duplicate tool call id {block.id}")
                open_calls[block.id] = i
            elif block.type == "tool_result":
                if msg.role != "tool":
                    problems.append(f"message {i}: tool result in a {msg.role} message")
                if block.tool_call_id not in open_calls:
                    problems.append(f"message {i}: result for unknown call {block.tool_call_id}")
                else:
                    del open_calls[block.tool_call_id]
                    answered.add(block.tool_call_id)
    if open_calls:
        last_assistant = max(
            (i for i, m in enumerate(ctx.messages) if m.role == "assistant"), default=-1
        )
        for call_id, index in open_calls.items():
            if index != last_assistant:
                problems.append(f"message {index}: tool call {call_id} never answered")
    return problems


def load_single(path: Path) -> AgentContext:
    """The one conversation a session file holds (fails the test if it holds several)."""
    contexts = compactkit.load(path)
    assert len(contexts) == 1
    return contexts[0]


def raw_json(path: Path) -> Any:
    """A session file's JSON, parsed independently of compactkit."""
    return json.loads(path.read_text(encoding="utf-8"))


def assert_sniffs_only_its_own(fmt: Format, folder: str, prefix: str) -> None:
    """`fmt` recognises exactly the corpus files of its folder (and bundled samples named `prefix*`)."""
    for path in corpus_files():
        expected = path.parent.name == folder or path.name.startswith(prefix)
        assert fmt.sniff(read_document(path)) is expected, path.name
