"""pi coding-agent session JSONL."""

from __future__ import annotations

from ..context import AgentContext
from .base import Document, Format


class PiSessionFormat(Format):
    name = "pi-session"
    description = "pi coding-agent session JSONL"

    def sniff(self, doc: Document) -> bool:
        return False  # TODO: not implemented yet

    def load(self, doc: Document) -> list[AgentContext]:
        raise NotImplementedError
