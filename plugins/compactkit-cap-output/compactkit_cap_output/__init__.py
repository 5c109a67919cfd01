"""cap-output: cap oversized tool outputs to their head and tail lines, recoverably."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from pydantic import Field

import compactkit
from compactkit import (
    AgentContext,
    ElidedBlock,
    Message,
    Strategy,
    StrategyOptions,
    TextBlock,
    ToolResultBlock,
    get_counter,
)
from compactkit.recovery import put as put_recovery

__all__ = ["CapOutput", "CapOutputOptions"]


class CapOutputOptions(StrategyOptions):
    max_tokens: int = Field(
        default=4000, ge=1, description="Outputs above this many tokens are capped."
    )
    head_lines: int = Field(default=40, ge=0, description="Lines kept from the start of an output.")
    tail_lines: int = Field(default=40, ge=0, description="Lines kept from the end of an output.")
    tokenizer: str = Field(default="o200k_base", description="Tokenizer used to measure outputs.")


class CapOutput(Strategy):
    """Cap every tool output above `max_tokens` to its first and last lines."""

    name = "cap-output"
    description = "Cap oversized tool outputs to their head and tail lines (recoverable)."
    Options = CapOutputOptions
    options: CapOutputOptions

    def compact(self, ctx: AgentContext) -> AgentContext:
        counter = get_counter(self.options.tokenizer)
        recovery = dict(ctx.recovery)
        messages: list[Message] = []
        changed = False
        for msg in ctx.messages:
            if msg.role != "tool":
                messages.append(msg)
                continue
            content = []
            touched = False
            for block in msg.content:
                if isinstance(block, ToolResultBlock):
                    parts = tuple(self._cap(p, counter, recovery) for p in block.content)
                    if parts != block.content:
                        block = block.model_copy(update={"content": parts})
                        touched = True
                content.append(block)
            messages.append(msg.model_copy(update={"content": tuple(content)}) if touched else msg)
            changed = changed or touched
        if not changed:
            return ctx
        return ctx.replace(messages=tuple(messages), recovery=recovery)

    def _cap(self, part: Any, counter: Any, recovery: dict[str, str]) -> Any:
        if not isinstance(part, TextBlock) or counter.text(part.text) <= self.options.max_tokens:
            return part
        lines = part.text.split("\n")
        head, tail = self.options.head_lines, self.options.tail_lines
        if len(lines) <= head + tail + 1:
            return part
        etag = put_recovery(recovery, [part])
        hidden = len(lines) - head - tail
        note = f"[... {hidden:,} lines elided by cap-output; etag {etag} ...]"
        text = "\n".join([*lines[:head], note, *lines[len(lines) - tail :]])
        return ElidedBlock(etag=etag, ref="cap-output", text=text, label=f"{hidden} lines elided")


@compactkit.hookimpl
def register_strategies(register: Callable[[Any], None]) -> None:
    """Register cap-output."""
    register(CapOutput)
