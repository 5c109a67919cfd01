"""observation-mask: replace tool outputs older than the last N with a short placeholder.

The simple baseline of the published agent-context studies (SWE-bench experiments in "The
Complexity Trap", JetBrains Research 2025): keep the newest tool outputs verbatim and replace every
older one by a one-line description of what was there. The tool call, the result's call id and
its error flag stay, so pairing is intact and the model still sees which calls it made and which
ones failed; only the output text goes, and it stays recoverable under the marker's etag.

Which results are masked depends only on their position among the tool results and on the result
itself, so running the strategy again on its output changes nothing.
"""

from __future__ import annotations

import json
import string
from collections.abc import Mapping
from typing import Any

from pydantic import Field, field_validator

from ..context import (
    AgentContext,
    Block,
    CollapsedBlock,
    ContentPart,
    MaskedBlock,
    Message,
    ToolCallBlock,
    ToolResultBlock,
    canonical_json,
    render_block,
)
from ..pins import PinSet, pinned
from ..recovery import payload_etag, prune, put
from ..strategy import Strategy
from ..tokens import TokenCounter
from ..toolcall import command_arg, payload_path
from ._common import TokenizerOption, ToolNames, counter_for
from .etag_collapse import field_etag, json_object

DEFAULT_PLACEHOLDER = "{tool}{target} output omitted ({tokens} tokens, {lines} lines){error}"

PLACEHOLDER_FIELDS: dict[str, str] = {
    "tool": "name of the tool that was called ('tool' when the call is not in the context)",
    "target": "what the call was about, with a leading space: ' `COMMAND`' for shell commands, "
    "' PATH' for file tools, ' (key=value, ...)' for other arguments; empty when the call has "
    "no arguments",
    "path": "the file the call read or wrote, when one can be told; else empty",
    "command": "the shell command (first line, at most 80 characters); else empty",
    "args": "the call's arguments as 'key=value, ...' (at most 80 characters); else empty",
    "tokens": "size of the omitted output in tokens (integer)",
    "lines": "number of lines of the omitted output (integer)",
    "chars": "number of characters of the omitted output (integer)",
    "error": "', error' when the tool reported an error; else empty",
    "status": "'error' or 'ok'",
    "call_id": "id of the tool call",
}
"""Fields a `placeholder` template may use, with what each holds."""

_SAMPLE: dict[str, Any] = {
    "tool": "bash",
    "target": " `ls`",
    "path": "a.py",
    "command": "ls",
    "args": "command=ls",
    "tokens": 120,
    "lines": 12,
    "chars": 480,
    "error": ", error",
    "status": "error",
    "call_id": "call_1",
}

MAX_DETAIL_CHARS = 80


def check_placeholder(template: str) -> str:
    """Raise ValueError naming the problem when `template` uses a field not in
    `PLACEHOLDER_FIELDS`, positional or attribute fields, or a bad format spec."""
    known = ", ".join(PLACEHOLDER_FIELDS)
    try:
        parsed = list(string.Formatter().parse(template))
    except ValueError as exc:
        raise ValueError(f"placeholder {template!r} is not a valid template: {exc}") from None
    for _, field, _, _ in parsed:
        if field is None:
            continue
        if field not in PLACEHOLDER_FIELDS:
            raise ValueError(
                f"unknown field {{{field}}} in placeholder {template!r}; known: {known}"
            )
    try:
        template.format(**_SAMPLE)
    except (ValueError, KeyError, IndexError) as exc:
        raise ValueError(f"placeholder {template!r} does not format: {exc}") from None
    return template


class ObservationMaskOptions(TokenizerOption):
    keep_last: int = Field(
        default=10,
        ge=0,
        description="Number of newest tool results kept verbatim; every older tool result is "
        "masked (the published SWE-bench studies kept about the last 10 turns).",
    )
    min_tokens: int = Field(
        default=40,
        ge=0,
        description="Tool outputs smaller than this many tokens are never masked (a placeholder "
        "would not save anything). An output is also kept when its placeholder would not be "
        "smaller than it.",
    )
    placeholder: str = Field(
        default=DEFAULT_PLACEHOLDER,
        min_length=1,
        description="Template of the label shown in place of an output (str.format syntax). "
        "Fields: " + "; ".join(f"{{{k}}}: {v}" for k, v in PLACEHOLDER_FIELDS.items()) + ".",
    )
    exclude_tools: ToolNames = Field(
        default=(),
        description="Names of tools whose outputs are never masked (e.g. a memory or todo tool); "
        "on the command line one string with names separated by '|'.",
    )

    @field_validator("placeholder")
    @classmethod
    def _known_fields(cls, value: str) -> str:
        return check_placeholder(value)


def _shorten(text: str) -> str:
    lines = text.strip().splitlines()
    first = lines[0].strip() if lines else ""
    if len(first) > MAX_DETAIL_CHARS or len(lines) > 1:
        return first[: MAX_DETAIL_CHARS - 1].rstrip() + "…"
    return first


def _command(call: ToolCallBlock | None) -> str:
    found = command_arg(call) if call is not None else None
    return _shorten(found[1]) if found is not None and found[0] in ("command", "cmd") else ""


def _args(call: ToolCallBlock | None) -> str:
    if call is None:
        return ""
    data = call.input
    if isinstance(data, str):
        return _shorten(data)
    if not isinstance(data, dict):
        return "" if data is None else _shorten(json.dumps(data, ensure_ascii=False))
    items = []
    for key, value in data.items():
        if value in ("", None, [], {}):
            continue
        shown = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
        items.append(f"{key}={shown}")
    return _shorten(", ".join(items))


def label_fields(
    call: ToolCallBlock | None, result: ToolResultBlock, tokens: int
) -> dict[str, Any]:
    """The values `placeholder` is formatted with for `result` (see `PLACEHOLDER_FIELDS`)."""
    texts = [t for part in result.content for t in render_block(part)]
    path = payload_path(call) or ""
    command = _command(call)
    args = _args(call)
    if command:
        target = f" `{command}`"
    elif path:
        target = f" {path}"
    elif args:
        target = f" ({args})"
    else:
        target = ""
    return {
        "tool": call.name if call is not None else "tool",
        "target": target,
        "path": path,
        "command": command,
        "args": args,
        "tokens": tokens,
        "lines": sum(len(t.splitlines()) for t in texts),
        "chars": sum(len(t) for t in texts),
        "error": ", error" if result.is_error else "",
        "status": "error" if result.is_error else "ok",
        "call_id": result.tool_call_id,
    }


class _Referenced:
    """Full copies that etag-collapse markers point at: masking one would leave the marker
    pointing at text the model cannot see (and etag-collapse would expand the marker back)."""

    def __init__(self, payloads: set[str], fields: set[str]) -> None:
        self.payloads = payloads
        self.fields = fields

    def points_at(self, parts: tuple[ContentPart, ...]) -> bool:
        if self.payloads and payload_etag(parts) in self.payloads:
            return True
        if self.fields:
            obj = json_object(parts)
            if obj is not None:
                return any(field_etag(k, canonical_json(v)) in self.fields for k, v in obj.items())
        return False


def _referenced(ctx: AgentContext) -> _Referenced:
    payloads: set[str] = set()
    fields: set[str] = set()
    for msg in ctx.messages:
        for block in msg.content:
            if isinstance(block, ToolResultBlock):
                for part in block.content:
                    if isinstance(part, CollapsedBlock):
                        (fields if part.field is not None else payloads).add(part.etag)
    return _Referenced(payloads, fields)


def _already_compacted(result: ToolResultBlock) -> bool:
    return any(part.type in ("masked", "collapsed") for part in result.content)


def _parts_tokens(counter: TokenCounter, parts: tuple[ContentPart, ...]) -> int:
    return sum(counter.block(part) for part in parts)


class ObservationMask(Strategy):
    """Replace every tool output older than the newest `keep_last` tool results with a
    `MaskedBlock` whose label says what was there (tool, command or path, size, error flag).

    The tool call and the result block (call id, error flag) stay; the output is recoverable from
    the marker's etag. Pinned parts of an output (the user's words an agent stored in it, what a
    pin rule names) stay verbatim: only the runs of parts around them are masked. Outputs under
    `min_tokens`, outputs whose placeholder would not be smaller, outputs of `exclude_tools` and
    results already masked or collapsed are left as they are."""

    name = "observation-mask"
    description = "Replace tool outputs older than the last N with a short placeholder."
    Options = ObservationMaskOptions
    options: ObservationMaskOptions

    def compact(self, ctx: AgentContext) -> AgentContext:
        opts = self.options
        positions = [
            (i, j)
            for i, msg in enumerate(ctx.messages)
            for j, block in enumerate(msg.content)
            if isinstance(block, ToolResultBlock)
        ]
        cutoff = len(positions) - opts.keep_last
        if cutoff <= 0:
            return ctx
        counter = counter_for(opts.tokenizer)
        calls = {
            block.id: block
            for msg in ctx.messages
            for block in msg.content
            if isinstance(block, ToolCallBlock)
        }
        excluded = set(opts.exclude_tools)
        referenced = _referenced(ctx)
        pins = pinned(ctx)
        recovery: dict[str, str] | None = None
        replaced: dict[int, dict[int, Block]] = {}
        for i, j in positions[:cutoff]:
            result = ctx.messages[i].content[j]
            assert isinstance(result, ToolResultBlock)
            if not result.content or _already_compacted(result):
                continue
            call = calls.get(result.tool_call_id)
            if call is not None and call.name in excluded:
                continue
            if referenced.points_at(result.content):
                continue
            parts: list[ContentPart] = []
            masked = False
            for run, keep in _runs(result.content, pins):
                marker = None if keep else self._marker(counter, call, result, run)
                if marker is None:
                    parts.extend(run)
                    continue
                if recovery is None:
                    recovery = dict(ctx.recovery)
                put(recovery, run)
                parts.append(marker)
                masked = True
            if masked:
                replaced.setdefault(i, {})[j] = with_parts(result, tuple(parts))
        if recovery is None:
            return ctx
        return prune(ctx.replace(messages=_apply(ctx.messages, replaced), recovery=recovery))

    def _marker(
        self,
        counter: TokenCounter,
        call: ToolCallBlock | None,
        result: ToolResultBlock,
        run: tuple[ContentPart, ...],
    ) -> MaskedBlock | None:
        """The marker for `run` (a result's parts), or None when it is not worth masking."""
        tokens = _parts_tokens(counter, run)
        if tokens < self.options.min_tokens:
            return None
        shown = result if run == result.content else with_parts(result, run)
        label = self.options.placeholder.format(**label_fields(call, shown, tokens))
        marker = MaskedBlock(etag=payload_etag(run), label=label)
        return None if counter.block(marker) >= tokens else marker


def _runs(
    parts: tuple[ContentPart, ...], pins: PinSet
) -> list[tuple[tuple[ContentPart, ...], bool]]:
    """`parts` cut into runs of pinned (True) and unpinned (False) parts, in order: the user's
    words inside a tool output stay while the rest of it is masked."""
    if not pins:
        return [(parts, False)]
    out: list[tuple[tuple[ContentPart, ...], bool]] = []
    for part in parts:
        keep = pins.part(part)
        if out and out[-1][1] == keep:
            out[-1] = ((*out[-1][0], part), keep)
        else:
            out.append(((part,), keep))
    return out


def _apply(
    messages: tuple[Message, ...], replaced: Mapping[int, Mapping[int, Block]]
) -> tuple[Message, ...]:
    """`messages` with the blocks in `replaced` swapped in; untouched messages are reused."""
    out = list(messages)
    for i, blocks in replaced.items():
        msg = messages[i]
        content = tuple(blocks.get(j, block) for j, block in enumerate(msg.content))
        out[i] = with_content(msg, content)
    return tuple(out)


# `model_copy` would carry over the cached renderings and properties of the original (`text`,
# `tool_results`, `render_block`'s cache), so changed values are built afresh.


def with_parts(result: ToolResultBlock, parts: tuple[ContentPart, ...]) -> ToolResultBlock:
    """`result` holding `parts` instead of its content."""
    return ToolResultBlock(
        tool_call_id=result.tool_call_id, content=parts, is_error=result.is_error
    )


def with_content(msg: Message, content: tuple[Block, ...]) -> Message:
    """`msg` holding `content` instead of its blocks."""
    return Message(role=msg.role, content=content, name=msg.name, metadata=msg.metadata)
