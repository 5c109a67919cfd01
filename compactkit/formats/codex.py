"""OpenAI Codex CLI rollout JSONL."""

from __future__ import annotations

from ..context import AgentContext
from .base import Document, Format


class CodexRolloutFormat(Format):
    name = "codex-rollout"
    description = "OpenAI Codex CLI rollout JSONL"

    def sniff(self, doc: Document) -> bool:
        return False  # TODO: not implemented yet

    def load(self, doc: Document) -> list[AgentContext]:
        raise NotImplementedError
