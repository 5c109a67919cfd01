"""static-elision: Keep repeated static text once; repeats become references."""

from __future__ import annotations

from ..context import AgentContext
from ..strategy import Strategy


class StaticElision(Strategy):
    name = "static-elision"
    description = "Keep repeated static text once; repeats become references."

    def compact(self, ctx: AgentContext) -> AgentContext:
        return ctx  # TODO: being written
