"""Claude Code session JSONL (~/.claude/projects/*/<uuid>.jsonl)."""

from __future__ import annotations

from ..context import AgentContext
from .base import Document, Format


class ClaudeCodeFormat(Format):
    name = "claude-code"
    description = "Claude Code session JSONL (~/.claude/projects/*/<uuid>.jsonl)"

    def sniff(self, doc: Document) -> bool:
        return False  # TODO: not implemented yet

    def load(self, doc: Document) -> list[AgentContext]:
        raise NotImplementedError
