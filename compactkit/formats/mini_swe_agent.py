"""mini-swe-agent .traj.json trajectory."""

from __future__ import annotations

from ..context import AgentContext
from .base import Document, Format


class MiniSweAgentFormat(Format):
    name = "mini-swe-agent"
    description = "mini-swe-agent .traj.json trajectory"

    def sniff(self, doc: Document) -> bool:
        return False  # TODO: not implemented yet

    def load(self, doc: Document) -> list[AgentContext]:
        raise NotImplementedError
