"""peer-headroom: headroom-ai itself (PyPI `headroom-ai`, `VERSION` in
`compactkit.strategies.peers.headroom_env`), run in its own environment, as the bench's reference
of compression on arrival.

headroom never shortens the history: it compresses each tool output by content type (JSON arrays,
logs, search results, code) and keeps the original retrievable by a hash it names in the output.
Its proxy caches what it sent, so an output compressed once is sent the same way on every later
call. This policy does the same over a replayed session: before each call the whole conversation
goes to headroom's `compress` (OpenAI chat form, as its proxy sees a request), and every tool
output it compressed replaces that output from then on (frozen: never sent to it again); an
output it left as it was stays open, and may be compressed at a later call (headroom leaves the
newest outputs alone and compresses them once older, which rewrites that part of the prefix
once, as headroom does). Its compressed text is what the model is shown (an `ElidedBlock`;
compactkit keeps the original under the block's etag, as headroom keeps it under its hash).

Set up once with `python -m compactkit.strategies.peers.headroom_env setup` (its own virtual environment; it
must never share compactkit's, see that module). Measured as shipped: its losses of the user's
words count in retention, not as violations (`keeps_pins = False`).
"""

from __future__ import annotations

import json
from typing import Any, ClassVar

from pydantic import Field

from ...context import (
    AgentContext,
    Block,
    ElidedBlock,
    Message,
    TextBlock,
    ToolResultBlock,
    render_block,
)
from ...recovery import put
from ...strategy import Strategy, StrategyOptions


class PeerHeadroomOptions(StrategyOptions):
    model: str = Field(
        default="gpt-4o", description="The model name headroom is told the request is for."
    )


def openai_messages(ctx: AgentContext) -> list[dict[str, Any]]:
    """`ctx` as OpenAI chat messages (what headroom's proxy receives)."""
    out: list[dict[str, Any]] = []
    if ctx.system_instruction:
        out.append({"role": "system", "content": ctx.system_instruction})
    for msg in ctx.messages:
        if msg.role == "tool":
            for result in msg.tool_results:
                shown = "\n".join(t for p in result.content for t in render_block(p))
                out.append({"role": "tool", "tool_call_id": result.tool_call_id, "content": shown})
            continue
        text = "\n".join(t for b in msg.content if b.type != "tool_call" for t in render_block(b))
        entry: dict[str, Any] = {"role": msg.role, "content": text or None}
        calls = msg.tool_calls
        if calls:
            entry["tool_calls"] = [
                {
                    "id": c.id,
                    "type": "function",
                    "function": {
                        "name": c.name,
                        "arguments": c.input if isinstance(c.input, str) else json.dumps(c.input),
                    },
                }
                for c in calls
            ]
        out.append(entry)
    return out


def _text(content: Any) -> str | None:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = [p.get("text") for p in content if isinstance(p, dict)]
        return "\n".join(p for p in parts if isinstance(p, str))
    return None


class PeerHeadroom(Strategy):
    """headroom-ai's compression of each new tool output, frozen once sent (see the module)."""

    name = "peer-headroom"
    description = "headroom-ai (its own environment): each tool output compressed once."
    Options = PeerHeadroomOptions
    options: PeerHeadroomOptions
    keeps_pins = False
    self_triggered: ClassVar[bool] = True

    def compact(self, ctx: AgentContext) -> AgentContext:
        open_outputs = [
            i
            for i, m in enumerate(ctx.messages)
            if m.role == "tool" and any(_open(b) for b in m.content)
        ]
        if not open_outputs:
            return ctx
        from .headroom_env import driver

        answer = driver().compress(openai_messages(ctx), self.options.model)
        compressed = {
            m.get("tool_call_id"): _text(m.get("content"))
            for m in answer["messages"]
            if isinstance(m, dict) and m.get("role") == "tool"
        }
        store = dict(ctx.recovery)
        messages = list(ctx.messages)
        for i in open_outputs:
            msg = ctx.messages[i]
            blocks: list[Block] = []
            for block in msg.content:
                text = compressed.get(getattr(block, "tool_call_id", None))
                if (
                    isinstance(block, ToolResultBlock)
                    and _open(block)
                    and text not in (None, block.text)
                ):
                    etag = put(store, block.content)
                    shown = ElidedBlock(etag=etag, ref="headroom", text=text or "", label=self.name)
                    block = ToolResultBlock(
                        tool_call_id=block.tool_call_id, content=(shown,), is_error=block.is_error
                    )
                blocks.append(block)
            if any(a is not b for a, b in zip(blocks, msg.content, strict=True)):
                messages[i] = Message(
                    role=msg.role, content=tuple(blocks), name=msg.name, metadata=msg.metadata
                )
        if all(a is b for a, b in zip(messages, ctx.messages, strict=True)):
            return ctx
        return ctx.replace(messages=tuple(messages), recovery=store)


def _open(block: Block) -> bool:
    """A tool output headroom has not compressed yet (its own text, not a marker)."""
    return (
        isinstance(block, ToolResultBlock)
        and bool(block.content)
        and all(isinstance(p, TextBlock) for p in block.content)
    )
