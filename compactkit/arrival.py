"""What arrival strategies share: the new message, its pins, and a context with it replaced.

An arrival strategy (`Strategy.stage == "arrival"`) is `compact(ctx) -> ctx` called once per
appended message, with `ctx` ending on that message. It may change only that message and add
recovery entries for what it removed (`compactkit.validate.validate_arrival`). These helpers keep
that cheap: nothing here walks the history, so an arrival costs what the new message costs.

    >>> import compactkit
    >>> from compactkit.arrival import new_results, replace_last
    >>> @compactkit.strategy("shout-results", stage="arrival")
    ... def shout(ctx, options):
    ...     return ctx  # look at new_results(ctx), return replace_last(ctx, message, store)
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping

from .context import AgentContext, Message, ToolCallBlock, ToolResultBlock
from .pins import PinSet, pinned
from .validate import arrival_window


def grown(ctx: AgentContext, message: Message) -> AgentContext:
    """`ctx` with `message` appended, without revalidating the messages it holds."""
    return _built(ctx, (*ctx.messages, message), ctx.recovery)


def replace_last(
    ctx: AgentContext, message: Message, recovery: Mapping[str, str] | None = None
) -> AgentContext:
    """`ctx` with its last message replaced by `message` and, when given, `recovery` as its
    store (the old one and the entries added); the history is reused as it is."""
    store = ctx.recovery if recovery is None else dict(recovery)
    return _built(ctx, (*ctx.messages[:-1], message), store)


def _built(
    ctx: AgentContext, messages: tuple[Message, ...], recovery: Mapping[str, str]
) -> AgentContext:
    data = {name: getattr(ctx, name) for name in type(ctx).model_fields}
    data["messages"] = messages
    data["recovery"] = recovery
    return type(ctx).model_construct(**data)


def new_results(ctx: AgentContext) -> Iterator[tuple[int, ToolResultBlock, ToolCallBlock | None]]:
    """(block index, result, its call) for each tool result of the last message of `ctx` (its
    call looked up in the messages just before it: the turn the results answer)."""
    if not ctx.messages or ctx.messages[-1].role != "tool":
        return
    held = ctx.__dict__  # a context never changes: every arrival strategy asks the same
    found = held.get("_new_results")
    if not isinstance(found, list):
        window = arrival_window(ctx)
        calls = {c.id: c for m in window.messages for c in m.tool_calls}
        found = held["_new_results"] = [
            (j, block, calls.get(block.tool_call_id))
            for j, block in enumerate(ctx.messages[-1].content)
            if isinstance(block, ToolResultBlock)
        ]
    yield from found


def arrival_pins(ctx: AgentContext) -> PinSet:
    """The pins that concern the last message of `ctx` (the user's words an adapter marked in a
    tool result, what a pin rule names), resolved on the window around it only."""
    return pinned(arrival_window(ctx))


__all__ = ["arrival_pins", "grown", "new_results", "replace_last"]
