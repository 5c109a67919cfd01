"""etag-collapse: Collapse payloads that repeat unchanged to {path, etag, unchanged} markers."""

from __future__ import annotations

from ..context import AgentContext
from ..strategy import Strategy


class EtagCollapse(Strategy):
    name = "etag-collapse"
    description = "Collapse payloads that repeat unchanged to {path, etag, unchanged} markers."

    def compact(self, ctx: AgentContext) -> AgentContext:
        return ctx  # TODO: being written
