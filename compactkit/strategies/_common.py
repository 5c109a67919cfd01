"""What built-in strategies share: atomic units, the protected head, payload paths, repairs."""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Annotated, Any

from pydantic import BeforeValidator, Field

from ..arrival import FOLD_REF
from ..context import (
    AgentContext,
    CollapsedBlock,
    ElidedBlock,
    Message,
    TextBlock,
    ToolResultBlock,
)
from ..recovery import prune, result_etag
from ..registry import get_counter
from ..strategy import StrategyOptions
from ..tokens import DEFAULT_TOKENIZER, TokenCounter


def _tool_names(value: Any) -> Any:
    """Tool names as the command line gives them: one string, names separated by '|' or spaces."""
    if isinstance(value, str):
        return tuple(n for n in value.replace("|", " ").split() if n)
    return value


ToolNames = Annotated[tuple[str, ...], BeforeValidator(_tool_names)]
"""An option naming tools: a list, or on the command line one string (`Read|TodoWrite`)."""


class TokenizerOption(StrategyOptions):
    """Options of strategies that count tokens."""

    tokenizer: str = Field(
        default=DEFAULT_TOKENIZER, description="Tokenizer used to measure sizes and budgets."
    )


def counter_for(name: str) -> TokenCounter:
    return get_counter(name)


@dataclass(frozen=True)
class Unit:
    """Messages that must stay or go together: an assistant turn with its tool results, or one
    message."""

    start: int
    end: int  # exclusive

    def __len__(self) -> int:
        return self.end - self.start


def units(messages: Sequence[Message]) -> list[Unit]:
    """Split messages into atomic units: an assistant message with tool calls and the tool messages
    that follow it form one unit; every other message is a unit of its own."""
    out: list[Unit] = []
    i, n = 0, len(messages)
    while i < n:
        j = i + 1
        if (messages[i].role == "assistant" and messages[i].tool_calls) or messages[
            i
        ].role == "tool":
            while j < n and messages[j].role == "tool":
                j += 1
        out.append(Unit(i, j))
        i = j
    return out


def head_end(ctx: AgentContext, keep_first: int = 0) -> int:
    """Index just past the protected head: every message up to and including the task (the first
    user message), plus `keep_first` more units."""
    task = ctx.first_user_index
    end = 0 if task is None else task + 1
    if keep_first > 0:
        rest = units(ctx.messages[end:])
        for unit in rest[:keep_first]:
            end += len(unit)
    return end


def full_payload(block: ToolResultBlock) -> bool:
    """True when a tool result still holds its own content (no marker parts)."""
    return not any(p.type in ("collapsed", "masked", "elided") for p in block.content)


_NAMED = re.compile(r"^\[same as lines \d+-\d+ of the result of call (.+)\]$", re.M)


def restore_orphaned_folds(ctx: AgentContext) -> AgentContext:
    """Where a folded output names lines of an earlier output (`fold-repeats`) that is no longer
    shown in full (dropped, summarized or masked), put the folded output back whole from the
    recovery store, so the model never reads a reference to lines it cannot see."""
    folded = [
        (i, j)
        for i, msg in enumerate(ctx.messages)
        for j, block in enumerate(msg.content)
        if isinstance(block, ToolResultBlock)
        and any(isinstance(p, ElidedBlock) and p.ref == FOLD_REF for p in block.content)
    ]
    if not folded:
        return ctx
    shown = {b.tool_call_id for m in ctx.messages for b in m.tool_results if full_text(b)}
    from ..recovery import _parts  # the one place that knows how parts are stored

    messages = list(ctx.messages)
    for i, j in folded:
        block = messages[i].content[j]
        assert isinstance(block, ToolResultBlock)
        parts: list[Any] = []
        for part in block.content:
            names = _NAMED.findall(part.text) if isinstance(part, ElidedBlock) else []
            raw = ctx.recovery.get(part.etag) if isinstance(part, ElidedBlock) and names else None
            if raw is None or all(name in shown for name in names):
                parts.append(part)
            else:
                parts.extend(_parts.validate_python(json.loads(raw)))
        if len(parts) != len(block.content) or any(
            a is not b for a, b in zip(parts, block.content, strict=True)
        ):
            msg = messages[i]
            content = list(msg.content)
            content[j] = ToolResultBlock(
                tool_call_id=block.tool_call_id, content=tuple(parts), is_error=block.is_error
            )
            messages[i] = Message(
                role=msg.role, content=tuple(content), name=msg.name, metadata=msg.metadata
            )
    if all(a is b for a, b in zip(messages, ctx.messages, strict=True)):
        return ctx
    return prune(ctx.replace(messages=tuple(messages)))


def full_text(block: ToolResultBlock) -> bool:
    """True when a tool result is shown as its own text (text parts only)."""
    return bool(block.content) and all(isinstance(p, TextBlock) for p in block.content)


def restore_orphaned_collapses(ctx: AgentContext) -> AgentContext:
    """Where the full copy a collapsed marker points to is gone from the context, expand the newest
    marker of that etag back into the full payload (from the recovery store)."""
    full = {result_etag(b) for m in ctx.messages for b in m.tool_results if full_payload(b)}
    newest: dict[str, tuple[int, int]] = {}
    for i, msg in enumerate(ctx.messages):
        for j, block in enumerate(msg.content):
            if isinstance(block, ToolResultBlock) and len(block.content) == 1:
                part = block.content[0]
                if not isinstance(part, CollapsedBlock):
                    continue
                if part.etag not in full and part.etag in ctx.recovery:
                    newest[part.etag] = (i, j)
    if not newest:
        return ctx
    import json

    from ..recovery import _parts  # the one place that knows how parts are stored

    messages = list(ctx.messages)
    for etag, (i, j) in newest.items():
        msg = messages[i]
        block = msg.content[j]
        assert isinstance(block, ToolResultBlock)
        parts = tuple(_parts.validate_python(json.loads(ctx.recovery[etag])))
        content = list(msg.content)
        content[j] = block.model_copy(update={"content": parts})
        messages[i] = msg.model_copy(update={"content": tuple(content)})
    return prune(ctx.replace(messages=tuple(messages)))
