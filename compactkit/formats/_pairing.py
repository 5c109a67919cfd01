"""Building messages and keeping tool calls paired, shared by the format adapters.

`Turn` is a message under construction. `repair_pairing` makes every tool result follow its call
and gives calls that never got a result a synthesized one; the adapters differ in when an open
call counts as unanswered, in what they do with a result that pairs with no open call and in
which calls may stay pending at the end, so those choices are parameters each adapter passes.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Sequence
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


def freeze_all(turns: list[Turn]) -> list[Message]:
    """The message of each of `turns`, in order, `turns` emptied as they are made: a turn's own
    lists and metadata go as soon as its message holds its copy of them, so a session's turns
    and its messages are never held whole together."""
    turns.reverse()
    messages: list[Message] = []
    while turns:
        messages.append(turns.pop().freeze())
    return messages


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
    settled: bool = True
    """No call was open after the last message (before the end closed or left any pending): the
    repair of these messages followed by others naming none of their ids is this repair followed
    by the others' own (what the gateway's reader relies on to repair only what is new)."""


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
    pairing = _Pairing(
        messages,
        due=_DUE[close],
        may_synthesize=_SYNTHESIZE_CALL[synthesize_calls],
        keep_orphans=orphan_results == "keep",
        move_orphans=_MOVE_ORPHANS[orphan_results],
        one_message_per_call=one_message_per_call,
        unknown_tool_name=unknown_tool_name,
    )
    pairing.repaired.renamed_calls = renamed
    return pairing.run(_FINISH[keep_pending])


class _Pairing:
    """The state of one `repair_pairing` pass over `messages`, with its modes resolved."""

    def __init__(
        self,
        messages: Sequence[Message],
        *,
        due: Callable[[_Pairing, str], bool],
        may_synthesize: Callable[[_Pairing, str], bool],
        keep_orphans: bool,
        move_orphans: Callable[[Message, list[ToolResultBlock]], list[Message]],
        one_message_per_call: bool,
        unknown_tool_name: str,
    ) -> None:
        self.messages = messages
        self.due = due
        self.may_synthesize = may_synthesize
        self.keep_orphans = keep_orphans
        self.move_orphans = move_orphans
        self.one_message_per_call = one_message_per_call
        self.unknown_tool_name = unknown_tool_name
        self.repaired = Repaired(messages=[])
        self.out = self.repaired.messages
        self.all_calls = {c.id for m in messages for c in m.tool_calls}
        self.all_results = {r.tool_call_id for m in messages for r in m.tool_results}
        self.remaining = Counter(
            r.tool_call_id for m in messages if m.role == "tool" for r in m.tool_results
        )
        self.last_assistant = max(
            (i for i, m in enumerate(messages) if m.role == "assistant"), default=-1
        )
        self.last_assistant_out = -1  # index in `out` of messages[last_assistant]
        self.open_calls: dict[str, int] = {}  # id -> index in `out` of the message making it
        self.seen: set[str] = set()  # ids of the calls made so far and of results given a call
        self.closed: set[str] = set()  # ids given a synthesized result

    def run(self, finish: Callable[[_Pairing], None]) -> Repaired:
        for index, msg in enumerate(self.messages):
            if msg.role == "tool":
                self.tool_message(msg)
            else:
                self.call_message(index, msg)
        if self.open_calls:
            self.repaired.settled = False
            finish(self)
        return self.repaired

    def close_calls(self, pending: Iterable[int] = ()) -> None:
        """Synthesized results for the open calls that are due, except those made by the
        messages at the `pending` indexes of `out`."""
        keep = set(pending)
        ids = [c for c, at in self.open_calls.items() if at not in keep and self.due(self, c)]
        if ids:
            self.out.append(synthesized_results(ids))
            self.repaired.synthesized_results += len(ids)
            for call_id in ids:
                del self.open_calls[call_id]
            self.closed.update(ids)

    def call_message(self, index: int, msg: Message) -> None:
        """A message that is not a tool message: due calls are closed before it, its calls open."""
        self.close_calls()
        if index == self.last_assistant:
            self.last_assistant_out = len(self.out)
        for call in msg.tool_calls:
            self.open_calls[call.id] = len(self.out)
            self.seen.add(call.id)
        self.out.append(msg)

    def tool_message(self, msg: Message) -> None:
        """A tool message: results that close an open call stay, others get a synthesized call
        or are orphans (kept, dropped or moved to user messages)."""
        kept: list[Block] = []
        new_calls: list[tuple[str, str]] = []
        orphans: list[ToolResultBlock] = []
        for block in msg.content:
            if (
                not isinstance(block, ToolResultBlock)
                or self.answers(block, msg, new_calls)
                or self.keep_orphans
            ):
                kept.append(block)
            else:
                orphans.append(block)
        self.add_calls(new_calls)
        if kept:
            self.out.append(msg if len(kept) == len(msg.content) else _with_content(msg, kept))
        self.repaired.orphan_results += len(orphans)
        self.out.extend(self.move_orphans(msg, orphans))

    def answers(
        self, block: ToolResultBlock, msg: Message, new_calls: list[tuple[str, str]]
    ) -> bool:
        """Whether a result pairs: it closes an open call, or gets a synthesized call."""
        call_id = block.tool_call_id
        self.remaining[call_id] -= 1
        if call_id in self.open_calls:
            del self.open_calls[call_id]
            return True
        if call_id not in self.seen and self.may_synthesize(self, call_id):
            self.seen.add(call_id)
            new_calls.append((call_id, msg.name or self.unknown_tool_name))
            return True
        return False

    def add_calls(self, new_calls: list[tuple[str, str]]) -> None:
        if not new_calls:
            return
        if self.one_message_per_call:
            self.out.extend(synthesized_calls([call]) for call in new_calls)
        else:
            self.out.append(synthesized_calls(new_calls))
        self.repaired.synthesized_calls += len(new_calls)


# `close`: whether an open call is due a synthesized result
def _due_always(pairing: _Pairing, call_id: str) -> bool:
    return True


def _due_unless_answered_later(pairing: _Pairing, call_id: str) -> bool:
    return pairing.remaining[call_id] <= 0


def _due_unless_answered(pairing: _Pairing, call_id: str) -> bool:
    return call_id not in pairing.all_results and call_id not in pairing.closed


_DUE = {
    "all": _due_always,
    "unless_answered_later": _due_unless_answered_later,
    "unless_answered": _due_unless_answered,
}


# `synthesize_calls`: whether a result that pairs with no open call (and whose id was neither
# called nor given a call before) gets a synthesized call
def _never(pairing: _Pairing, call_id: str) -> bool:
    return False


def _if_never_called(pairing: _Pairing, call_id: str) -> bool:
    return call_id not in pairing.all_calls


_SYNTHESIZE_CALL = {
    "never": _never,
    "if_never_called": _if_never_called,
    "if_not_called_yet": _due_always,
}


# `orphan_results`: what follows a tool message in place of its orphan results
def _no_messages(msg: Message, orphans: list[ToolResultBlock]) -> list[Message]:
    return []


def _user_message_each(msg: Message, orphans: list[ToolResultBlock]) -> list[Message]:
    return [
        Message(
            role="user",
            content=block.content,
            metadata={"orphan_tool_result": block.tool_call_id, ORIGIN_KEY: "tool-output"},
        )
        for block in orphans
    ]


def _user_message_joined(msg: Message, orphans: list[ToolResultBlock]) -> list[Message]:
    joined = tuple(part for block in orphans for part in block.content)
    if not joined:
        return []
    metadata = {**msg.metadata, "orphan_result": True, ORIGIN_KEY: "tool-output"}
    return [Message(role="user", content=joined, metadata=metadata)]


_MOVE_ORPHANS = {
    "keep": _no_messages,
    "drop": _no_messages,
    "user_message_each": _user_message_each,
    "user_message_joined": _user_message_joined,
}


# `keep_pending`: which calls still open at the end may stay pending
def _pending_last_message(pairing: _Pairing) -> None:
    if {c.id for c in pairing.out[-1].tool_calls} != set(pairing.open_calls):
        pairing.close_calls()


def _pending_last_assistant(pairing: _Pairing) -> None:
    pairing.close_calls(pending=[pairing.last_assistant_out])


def _pending_last_output_assistant(pairing: _Pairing) -> None:
    out = pairing.out
    last = max((i for i, m in enumerate(out) if m.role == "assistant"), default=-1)
    pairing.close_calls(pending=[last])


_FINISH = {
    "last_message": _pending_last_message,
    "last_assistant": _pending_last_assistant,
    "last_output_assistant": _pending_last_output_assistant,
}
