"""What the peers that edit tool results share (Anthropic's tool-result clearing, the OpenAI Agents
SDK's trimmer, Gemini CLI's truncation): finding each result and its call, and replacing a
result's output with one recoverable marker whose label is the text the peer shows instead."""

from __future__ import annotations

from collections.abc import Iterator, Mapping, MutableMapping

from ...context import (
    AgentContext,
    Block,
    MaskedBlock,
    Message,
    ToolCallBlock,
    ToolResultBlock,
    render_block,
)
from ...recovery import put
from .._common import full_payload
from ..observation_mask import _apply, with_parts

Replacements = dict[int, dict[int, Block]]
"""New blocks by message index, then block index (what `apply` swaps in)."""


def calls_by_id(ctx: AgentContext) -> dict[str, ToolCallBlock]:
    return {call.id: call for msg in ctx.messages for call in msg.tool_calls}


def results(messages: tuple[Message, ...]) -> Iterator[tuple[int, int, ToolResultBlock]]:
    """(message index, block index, result) of every tool result, oldest first."""
    for i, msg in enumerate(messages):
        for j, block in enumerate(msg.content):
            if isinstance(block, ToolResultBlock):
                yield i, j, block


def shown_text(result: ToolResultBlock) -> str:
    """The output as the model is shown it (text parts joined; markers as their text)."""
    return "\n".join(render_block(result))


def editable(result: ToolResultBlock) -> bool:
    """A result that still holds its own output (not empty, not already a marker)."""
    return bool(result.content) and full_payload(result)


def masked(
    result: ToolResultBlock, label: str, recovery: MutableMapping[str, str]
) -> ToolResultBlock:
    """`result` with its whole output stored in `recovery` and shown as `[label; etag ...]`."""
    etag = put(recovery, result.content)
    return with_parts(result, (MaskedBlock(etag=etag, label=label),))


def apply(
    messages: tuple[Message, ...], replaced: Mapping[int, Mapping[int, Block]]
) -> tuple[Message, ...]:
    """`messages` with the blocks in `replaced` swapped in."""
    return _apply(messages, replaced)
