"""Building messages and keeping tool calls paired, shared by the format adapters.

`Turn` is a message under construction. `repair_pairing` makes every tool result follow its call
and gives calls that never got a result a synthesized one; the adapters differ in when an open
call counts as unanswered, in what they do with a result that pairs with no open call and in
which calls may stay pending at the end, so those choices are parameters each adapter passes.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Literal

from pydantic import JsonValue

from ..context import (
    ORIGIN_KEY,
    Block,
    Message,
    Role,
    TextBlock,
    ToolCallBlock,
    ToolResultBlock,
)

NO_RESULT_TEXT = "[no result recorded]"
"""The text of a synthesized result (`is_error=True`) for a call whose result was never recorded."""


@dataclass
class Turn:
    """A message under construction: blocks and metadata stay mutable until `freeze`."""

    role: Role
    blocks: list[Block] = field(default_factory=list)
    metadata: dict[str, JsonValue] = field(default_factory=dict)
    name: str | None = None

    def freeze(self) -> Message:
        return Message(
            role=self.role, content=tuple(self.blocks), name=self.name, metadata=self.metadata
        )

    @classmethod
    def of(cls, msg: Message) -> Turn:
        """A message (such as `synthesized_results(...)`) as a turn, to add among the others."""
        return cls(
            role=msg.role, blocks=list(msg.content), metadata=dict(msg.metadata), name=msg.name
        )


def synthesized_results(call_ids: Iterable[str]) -> Message:
    """One tool message (metadata `{"synthesized": true}`) answering each of `call_ids`, in order,
    with an error result holding `NO_RESULT_TEXT`."""
    return Message(
        role="tool",
        content=tuple(
            ToolResultBlock(
                tool_call_id=call_id, content=(TextBlock(text=NO_RESULT_TEXT),), is_error=True
            )
            for call_id in call_ids
        ),
        metadata={"synthesized": True},
    )


def synthesized_calls(calls: Iterable[tuple[str, str]]) -> Message:
    """One assistant message (metadata `{"synthesized": true}`) making each `(id, name)` call, in
    order, with input `{}`."""
    return Message(
        role="assistant",
        content=tuple(ToolCallBlock(id=call_id, name=name, input={}) for call_id, name in calls),
        metadata={"synthesized": True},
    )


@dataclass
class RepairCounts:
    """What keeping calls and results paired had to do, counted; `note_repairs` writes the
    non-zero counts into context metadata under these names."""

    synthesized_results: int = 0
    """Calls given a synthesized error result."""
    synthesized_calls: int = 0
    """Results given a synthesized call."""
    renamed_calls: int = 0
    """Calls whose id was renamed (`rename_reused_ids`)."""
    orphan_results: int = 0
    """Results that paired with no open call and were dropped or turned into user text."""


@dataclass
class Repaired(RepairCounts):
    """Messages after `repair_pairing`, with what it had to do."""

    messages: list[Message] = field(default_factory=list)


def _with_content(msg: Message, content: Sequence[Block]) -> Message:
    # a new value, not model_copy: that would carry over the cached text/tool_calls properties
    return Message(role=msg.role, content=tuple(content), name=msg.name, metadata=msg.metadata)


def _rename_reused_ids(messages: Sequence[Message]) -> tuple[list[Message], int]:
    """Rename a call id that an earlier call already used to `<id>_<n>` (n-th use, or the next
    free number), and the results after it that name that id. Returns the messages and the
    number of calls renamed."""
    taken = {c.id for m in messages for c in m.tool_calls}
    uses: Counter[str] = Counter()
    current: dict[str, str] = {}  # id as recorded -> id of its latest call
    out: list[Message] = []
    renamed = 0
    for msg in messages:
        blocks: list[Block] = []
        for block in msg.content:
            if isinstance(block, ToolCallBlock):
                uses[block.id] += 1
                current[block.id] = block.id
                if uses[block.id] > 1:
                    n = uses[block.id]
                    while f"{block.id}_{n}" in taken:
                        n += 1
                    new_id = f"{block.id}_{n}"
                    taken.add(new_id)
                    renamed += 1
                    current[block.id] = new_id
                    block = ToolCallBlock(id=new_id, name=block.name, input=block.input)
            elif isinstance(block, ToolResultBlock) and block.tool_call_id in current:
                new_id = current[block.tool_call_id]
                if new_id != block.tool_call_id:
                    block = ToolResultBlock(
                        tool_call_id=new_id, content=block.content, is_error=block.is_error
                    )
            blocks.append(block)
        changed = any(a is not b for a, b in zip(blocks, msg.content, strict=True))
        out.append(_with_content(msg, blocks) if changed else msg)
    return out, renamed


def repair_pairing(
    messages: Sequence[Message],
    *,
    close: Literal["all", "unless_answered_later", "unless_answered"],
    keep_pending: Literal["last_assistant", "last_output_assistant", "last_message"],
    orphan_results: Literal["keep", "drop", "user_message_each", "user_message_joined"],
    synthesize_calls: Literal["never", "if_never_called", "if_not_called_yet"] = "never",
    one_message_per_call: bool = False,
    unknown_tool_name: str = "unknown_tool",
    rename_reused_ids: bool = False,
) -> Repaired:
    """Make every tool result follow its call and every call get a result.

    The calls of each non-tool message become open; a result in a `tool` message whose id is an
    open call closes that call and stays where it is. When a non-tool message starts, open calls
    chosen by `close` get a synthesized error result (`synthesized_results`) placed just before it,
    that is after the tool messages that followed the call; at the end of `messages` so do the
    open calls chosen by `close` that `keep_pending` does not leave pending.

    - `close`: which open calls get a synthesized result when the next non-tool message starts
      (and at the end): `"all"` every one; `"unless_answered_later"` those with no result for
      their id later in `messages` (the others stay open until it comes);
      `"unless_answered"` those whose id has no result anywhere in `messages` (before or after
      the call) and got no synthesized result yet (the others are never closed).
    - `keep_pending`: which open calls may stay unanswered at the end (a run may end on a call):
      `"last_assistant"` the calls of the last assistant message of `messages`;
      `"last_output_assistant"` the calls of the last assistant message of the output, where a
      synthesized call message counts (so when one follows the last assistant message of
      `messages`, that message's open calls get results);
      `"last_message"` all open calls, when they are exactly the calls of the last output
      message, else none.
    - `synthesize_calls`: which results whose id is no open call get a synthesized call
      (`synthesized_calls`, named after the tool message's `name`, else `unknown_tool_name`)
      placed just before their tool message, the result staying in it: `"never"`;
      `"if_never_called"` when no call anywhere in `messages` has that id and no earlier
      result got a synthesized call for it; `"if_not_called_yet"` when no earlier call has that
      id and no earlier result got a synthesized call for it.
    - `one_message_per_call`: one synthesized call message per result instead of one per tool
      message.
    - `orphan_results`: the other results whose id is no open call (already answered, closed by
      a synthesized result, called only later, or never called): `"keep"` leaves them in their
      tool message; `"drop"` removes them; `"user_message_each"` moves each to a user message
      with its content and metadata `{"orphan_tool_result": <id>}`; `"user_message_joined"`
      moves those of one tool message to one user message holding their content (none when
      that is empty), with that tool message's metadata plus `{"orphan_result": true}`. Either
      user message follows the tool message and is marked `metadata["origin"] = "tool-output"`
      (not the human's words). Dropped and moved results count in `orphan_results`.
    - `rename_reused_ids`: first rename a call id that an earlier call already used to
      `<id>_<n>` (n-th use), and the results after it that name that id.

    A tool message left without blocks is dropped; other messages pass through unchanged.
    """
    renamed = 0
    if rename_reused_ids:
        messages, renamed = _rename_reused_ids(messages)
    repaired = Repaired(messages=[], renamed_calls=renamed)
    out = repaired.messages
    all_calls = {c.id for m in messages for c in m.tool_calls}
    all_results = {r.tool_call_id for m in messages for r in m.tool_results}
    remaining = Counter(
        r.tool_call_id for m in messages if m.role == "tool" for r in m.tool_results
    )
    last_assistant = max((i for i, m in enumerate(messages) if m.role == "assistant"), default=-1)
    last_assistant_out = -1  # index in `out` of messages[last_assistant]
    open_calls: dict[str, int] = {}  # id -> index in `out` of the message making the call
    seen: set[str] = set()  # ids of the calls made so far and of results given a call
    closed: set[str] = set()  # ids given a synthesized result

    def due(call_id: str) -> bool:
        if close == "all":
            return True
        if close == "unless_answered_later":
            return remaining[call_id] <= 0
        return call_id not in all_results and call_id not in closed

    def close_calls(pending: Iterable[int] = ()) -> None:
        keep = set(pending)
        ids = [c for c, at in open_calls.items() if at not in keep and due(c)]
        if ids:
            out.append(synthesized_results(ids))
            repaired.synthesized_results += len(ids)
            for call_id in ids:
                del open_calls[call_id]
            closed.update(ids)

    for index, msg in enumerate(messages):
        if msg.role != "tool":
            close_calls()
            if index == last_assistant:
                last_assistant_out = len(out)
            for call in msg.tool_calls:
                open_calls[call.id] = len(out)
                seen.add(call.id)
            out.append(msg)
            continue
        kept: list[Block] = []
        new_calls: list[tuple[str, str]] = []
        orphans: list[ToolResultBlock] = []
        for block in msg.content:
            if not isinstance(block, ToolResultBlock):
                kept.append(block)
                continue
            call_id = block.tool_call_id
            remaining[call_id] -= 1
            if call_id in open_calls:
                del open_calls[call_id]
                kept.append(block)
            elif call_id not in seen and (
                synthesize_calls == "if_not_called_yet"
                or (synthesize_calls == "if_never_called" and call_id not in all_calls)
            ):
                seen.add(call_id)
                new_calls.append((call_id, msg.name or unknown_tool_name))
                kept.append(block)
            elif orphan_results == "keep":
                kept.append(block)
            else:
                orphans.append(block)
        if new_calls:
            if one_message_per_call:
                out.extend(synthesized_calls([call]) for call in new_calls)
            else:
                out.append(synthesized_calls(new_calls))
            repaired.synthesized_calls += len(new_calls)
        if kept:
            out.append(msg if len(kept) == len(msg.content) else _with_content(msg, kept))
        repaired.orphan_results += len(orphans)
        if orphans and orphan_results == "user_message_each":
            out.extend(
                Message(
                    role="user",
                    content=block.content,
                    metadata={"orphan_tool_result": block.tool_call_id, ORIGIN_KEY: "tool-output"},
                )
                for block in orphans
            )
        elif orphan_results == "user_message_joined":
            joined = tuple(part for block in orphans for part in block.content)
            if joined:
                out.append(
                    Message(
                        role="user",
                        content=joined,
                        metadata={**msg.metadata, "orphan_result": True, ORIGIN_KEY: "tool-output"},
                    )
                )
    if not open_calls:
        return repaired
    if keep_pending == "last_message":
        if {c.id for c in out[-1].tool_calls} != set(open_calls):
            close_calls()
    elif keep_pending == "last_assistant":
        close_calls(pending=[last_assistant_out])
    else:
        last_out = max((i for i, m in enumerate(out) if m.role == "assistant"), default=-1)
        close_calls(pending=[last_out])
    return repaired
