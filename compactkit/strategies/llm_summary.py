"""llm-summary: Replace a window of old turns with one summary message."""

from __future__ import annotations

from ..context import AgentContext
from ..strategy import Strategy


class LlmSummary(Strategy):
    name = "llm-summary"
    description = "Replace a window of old turns with one summary message."

    def compact(self, ctx: AgentContext) -> AgentContext:
        return ctx  # TODO: being written
