"""Gemini CLI chat session JSON."""

from __future__ import annotations

from ..context import AgentContext
from .base import Document, Format


class GeminiCliFormat(Format):
    name = "gemini-cli"
    description = "Gemini CLI chat session JSON"

    def sniff(self, doc: Document) -> bool:
        return False  # TODO: not implemented yet

    def load(self, doc: Document) -> list[AgentContext]:
        raise NotImplementedError
