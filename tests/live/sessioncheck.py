"""What a test asserts about a session file a real CLI wrote: it loads as one conversation with
every word the user typed and every tool call answered by its result, and it validates."""

from __future__ import annotations

from pathlib import Path

from click.testing import CliRunner

import compactkit
from compactkit import AgentContext, ToolCallBlock, ToolResultBlock
from compactkit.cli import make_cli
from compactkit.registry import make_registry

CLI = make_cli(lambda: make_registry(entry_points=False))


def tool_calls(ctx: AgentContext) -> list[ToolCallBlock]:
    return [b for m in ctx.messages for b in m.content if isinstance(b, ToolCallBlock)]


def tool_results(ctx: AgentContext) -> list[ToolResultBlock]:
    return [b for m in ctx.messages for b in m.content if isinstance(b, ToolResultBlock)]


def user_texts(ctx: AgentContext) -> list[str]:
    return [m.text for m in ctx.messages if m.role == "user"]


def load_all_checked(path: Path) -> list[AgentContext]:
    """Every conversation in `path` (a Claude Code session brings its subagents' transcripts),
    after checking that each validates, in Python and with `compactkit validate`, and has exactly
    one result for each tool call, after it (parallel calls' results may come in any order)."""
    contexts = compactkit.load(path)
    result = CliRunner().invoke(CLI, ["validate", str(path)])
    assert result.exit_code == 0, result.output
    for ctx in contexts:
        assert compactkit.validate(ctx) == [], compactkit.validate(ctx)
        called = {
            b.id: i
            for i, m in enumerate(ctx.messages)
            for b in m.content
            if isinstance(b, ToolCallBlock)
        }
        answered = [
            (b.tool_call_id, i)
            for i, m in enumerate(ctx.messages)
            for b in m.content
            if isinstance(b, ToolResultBlock)
        ]
        assert sorted(call_id for call_id, _ in answered) == sorted(called), (called, answered)
        assert all(called[call_id] < i for call_id, i in answered)
    return contexts


def has_tasks(ctx: AgentContext, tasks: list[str]) -> bool:
    """Each task is in a user message, in order."""
    texts = user_texts(ctx)
    positions = [next((i for i, t in enumerate(texts) if task in t), -1) for task in tasks]
    return -1 not in positions and positions == sorted(positions)


def load_checked(path: Path, tasks: list[str]) -> AgentContext:
    """The one conversation in `path`, checked as `load_all_checked` does, with each task a user
    message, in order."""
    contexts = load_all_checked(path)
    assert len(contexts) == 1, f"{path.name}: {len(contexts)} conversations"
    assert has_tasks(contexts[0], tasks), (tasks, user_texts(contexts[0]))
    return contexts[0]
