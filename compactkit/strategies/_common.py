"""What built-in strategies share: atomic units, the protected head, payload paths, repairs."""

from __future__ import annotations

import re
import shlex
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from pydantic import Field

from ..context import (
    AgentContext,
    CollapsedBlock,
    Message,
    ToolCallBlock,
    ToolResultBlock,
)
from ..recovery import payload_etag, prune
from ..strategy import StrategyOptions
from ..tokens import DEFAULT_TOKENIZER, TokenCounter, get_counter


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


def calls_by_id(ctx: AgentContext) -> dict[str, ToolCallBlock]:
    return {c.id: c for m in ctx.messages for c in m.tool_calls}


_PATH_KEYS = ("path", "file_path", "filepath", "filename", "file", "absolute_path", "notebook_path")
_READ_COMMANDS = {"cat", "nl", "head", "tail", "less", "more", "bat"}


def payload_path(call: ToolCallBlock | None) -> str | None:
    """The file a tool call reads, when one can be told: a path argument, or `cat`/`sed -n`/`head`
    style shell commands on one file."""
    if call is None:
        return None
    data: Any = call.input
    if isinstance(data, dict):
        for key in _PATH_KEYS:
            value = data.get(key)
            if isinstance(value, str) and value:
                return value
        command = data.get("command") or data.get("cmd")
        if isinstance(command, list):
            command = " ".join(str(c) for c in command)
    else:
        command = data if isinstance(data, str) else None
    if not isinstance(command, str):
        return None
    return _path_from_command(command)


def _path_from_command(command: str) -> str | None:
    command = command.strip()
    if not command or "\n" in command or any(op in command for op in ("|", "&&", ";", ">")):
        return None
    try:
        words = shlex.split(command)
    except ValueError:
        return None
    if words and words[0] in ("bash", "sh") and len(words) >= 3 and words[1] in ("-c", "-lc"):
        return _path_from_command(words[2])
    if not words:
        return None
    tool = words[0].rsplit("/", 1)[-1]
    args = [w for w in words[1:] if not w.startswith("-")]
    if tool in _READ_COMMANDS and len(args) == 1:
        return args[0]
    if tool == "sed" and "-n" in words and len(args) == 2 and re.fullmatch(r"[\d,$p;]+", args[0]):
        return args[1]
    if tool in ("open", "view") and args:
        return args[0]
    return None


def full_payload(block: ToolResultBlock) -> bool:
    """True when a tool result still holds its own content (no marker parts)."""
    return not any(p.type in ("collapsed", "masked", "elided") for p in block.content)


def restore_orphaned_collapses(ctx: AgentContext) -> AgentContext:
    """Where the full copy a collapsed marker points to is gone from the context, expand the newest
    marker of that etag back into the full payload (from the recovery store)."""
    full = {
        payload_etag(b.content) for m in ctx.messages for b in m.tool_results if full_payload(b)
    }
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
