"""OpenHands event stream JSON / eval output.jsonl."""

from __future__ import annotations

from ..context import AgentContext
from .base import Document, Format


class OpenHandsEventsFormat(Format):
    name = "openhands-events"
    description = "OpenHands event stream JSON / eval output.jsonl"

    def sniff(self, doc: Document) -> bool:
        return False  # TODO: not implemented yet

    def load(self, doc: Document) -> list[AgentContext]:
        raise NotImplementedError
