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

import json
from collections.abc import Iterator, Mapping

from .context import AgentContext, ElidedBlock, Message, ToolCallBlock, ToolResultBlock
from .pins import PinSet, pinned
from .tokens import TokenCounter
from .validate import arrival_window

FOLD_REF = "the tool output as it arrived"
"""The `ref` of the markers the built-in arrival folders leave: what `etag` recovers."""


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


def folded_savings(ctx: AgentContext, counter: TokenCounter) -> int:
    """The tokens the built-in folders' markers (`FOLD_REF`) in `ctx` took off the tool outputs
    they stand for: what the history would hold more with each output as it arrived. Asked once
    per compaction (`compactkit.policy`: arrival never puts a compaction off, including through
    the messages a compaction keeps); each marker's figure is remembered on it."""
    held = ctx.__dict__  # a context never changes
    known = held.get("_folded_savings")
    if isinstance(known, int):
        return known
    saved = 0
    for msg in ctx.messages:
        if msg.role != "tool":
            continue
        for block in msg.content:
            if isinstance(block, ToolResultBlock):
                for part in block.content:
                    if isinstance(part, ElidedBlock) and part.ref == FOLD_REF:
                        saved += _saving(part, ctx.recovery, counter)
    held["_folded_savings"] = saved
    return saved


def _saving(part: ElidedBlock, store: Mapping[str, str], counter: TokenCounter) -> int:
    held = part.__dict__  # a marker never changes, nor what its etag names
    found = held.get("_saving")
    if isinstance(found, int):
        return found
    raw = store.get(part.etag)
    if raw is None:  # its original dropped from the store: nothing to weigh
        return 0
    try:
        parts = json.loads(raw)
        texts = [p["text"] for p in parts if isinstance(p, dict) and p.get("type") == "text"]
    except (ValueError, TypeError, KeyError):
        return 0
    found = held["_saving"] = max(0, sum(map(counter.text, texts)) - counter.text(part.text))
    return found


__all__ = ["FOLD_REF", "arrival_pins", "folded_savings", "grown", "new_results", "replace_last"]
