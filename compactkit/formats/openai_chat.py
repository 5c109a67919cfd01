"""OpenAI chat-completions messages (arrays, requests, tau-bench, OpenHands SDK logs)."""

from __future__ import annotations

from ..context import AgentContext
from .base import Document, Format


class OpenAIChatFormat(Format):
    name = "openai-chat"
    description = "OpenAI chat-completions messages (arrays, requests, tau-bench, OpenHands SDK logs)"

    def sniff(self, doc: Document) -> bool:
        return False  # TODO: not implemented yet

    def load(self, doc: Document) -> list[AgentContext]:
        raise NotImplementedError
