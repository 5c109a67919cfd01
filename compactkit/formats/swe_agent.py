"""SWE-agent .traj trajectory."""

from __future__ import annotations

from ..context import AgentContext
from .base import Document, Format


class SweAgentFormat(Format):
    name = "swe-agent"
    description = "SWE-agent .traj trajectory"

    def sniff(self, doc: Document) -> bool:
        return False  # TODO: not implemented yet

    def load(self, doc: Document) -> list[AgentContext]:
        raise NotImplementedError
