"""observation-mask: Replace tool outputs older than the last N with a short placeholder."""

from __future__ import annotations

from ..context import AgentContext
from ..strategy import Strategy


class ObservationMask(Strategy):
    name = "observation-mask"
    description = "Replace tool outputs older than the last N with a short placeholder."

    def compact(self, ctx: AgentContext) -> AgentContext:
        return ctx  # TODO: being written
