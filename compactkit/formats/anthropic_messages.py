"""Anthropic Messages API request or saved messages array."""

from __future__ import annotations

from ..context import AgentContext
from .base import Document, Format


class AnthropicMessagesFormat(Format):
    name = "anthropic-messages"
    description = "Anthropic Messages API request or saved messages array"

    def sniff(self, doc: Document) -> bool:
        return False  # TODO: not implemented yet

    def load(self, doc: Document) -> list[AgentContext]:
        raise NotImplementedError
