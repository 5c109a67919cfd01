"""The invariants every compacted context keeps, checked after every strategy.

Rules (each violation names one):

* ``tool-result-without-call``: a tool result with no earlier tool call of that id;
* ``unanswered-tool-call``: a tool call with no result, other than calls of the final assistant turn;
* ``duplicate-tool-call-id``: two calls share an id;
* ``tool-result-outside-tool-message``: a tool result in a message whose role is not ``tool``;
* ``parallel-results-split``: results of one assistant turn's calls do not all sit in the tool messages
  that directly follow it (another message came between);
* ``starts-with-tool-result``: the first message is a tool message;
* ``system-instruction-changed``: the system instruction differs from the input's;
* ``task-missing``: the input's first user message (the task) is not the output's first user message;
* ``thinking-detached``: an assistant turn kept its tool calls but lost the thinking it had;
* ``dangling-marker``: a marker whose etag is neither in the recovery store (or stash) nor, for a
  collapsed marker, the etag of a full copy still in the context;
* ``pin-broken``: a pinned span of the input (the user's words, the task, the last request, a
  pending call, what a user rule pins; see `compactkit.pins`) is not in the output verbatim, or
  the context's pins were changed.

Arrival strategies (`Strategy.stage == "arrival"`) are held to two more (`validate_arrival`):

* ``arrival-changed-sent``: the output differs from the input anywhere but in its last message
  (a message already sent, the system instruction, the pins, a recovery entry), or it has a
  different number of messages;
* ``arrival-not-idempotent``: running the strategy again on its own output changed it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from .context import AgentContext, ThinkingBlock, ToolResultBlock
from .pins import broken
from .recovery import context_copies, dangling, markers, unrecoverable
from .recovery import verify as verify_entries

RULES: dict[str, str] = {
    "tool-result-without-call": "a tool result with no earlier tool call of that id (or a second one)",
    "unanswered-tool-call": "a tool call with no result, other than calls of the final assistant turn",
    "duplicate-tool-call-id": "two calls share an id",
    "tool-result-outside-tool-message": "a tool result in a message whose role is not tool",
    "parallel-results-split": "a result is not in the tool messages right after its call",
    "starts-with-tool-result": "the first message is a tool message",
    "system-instruction-changed": "the system instruction differs from the input's",
    "task-missing": "the input's task (first user message) is not the output's",
    "thinking-detached": "an assistant turn kept its tool calls but lost its thinking",
    "dangling-marker": "a marker whose content is neither in the context nor recoverable",
    "pin-broken": "a pinned span of the input (the user's words, ...) is not kept verbatim",
}
"""Every rule the validator checks, by the name a violation carries."""

ARRIVAL_RULES: dict[str, str] = {
    "arrival-changed-sent": "an arrival strategy changed more than the new (last) message",
    "arrival-not-idempotent": "an arrival strategy changed its own output when run again",
}
"""The rules `validate_arrival` checks besides those of `RULES` (on the new message)."""


@dataclass(frozen=True)
class Violation:
    rule: str
    message: int | None
    detail: str

    def __post_init__(self) -> None:
        known = self.rule in RULES or self.rule in ARRIVAL_RULES
        assert known, f"undocumented validator rule {self.rule!r}"

    def __str__(self) -> str:
        where = f"message {self.message}" if self.message is not None else "context"
        return f"{where}: {self.rule}: {self.detail}"


def _pairing(ctx: AgentContext) -> list[Violation]:
    out: list[Violation] = []
    seen_calls: dict[str, int] = {}
    answered: set[str] = set()
    last_assistant = max(
        (i for i, m in enumerate(ctx.messages) if m.role == "assistant"), default=-1
    )
    # calls of the current assistant turn whose results may still come (its tool group)
    group_open: set[str] = set()
    for i, msg in enumerate(ctx.messages):
        if msg.role != "tool":
            group_open = set()
        for block in msg.content:
            if block.type == "tool_call":
                if block.id in seen_calls:
                    out.append(
                        Violation("duplicate-tool-call-id", i, f"call id {block.id!r} repeats")
                    )
                seen_calls[block.id] = i
                if msg.role == "assistant":
                    group_open.add(block.id)
            elif isinstance(block, ToolResultBlock):
                cid = block.tool_call_id
                if msg.role != "tool":
                    out.append(
                        Violation(
                            "tool-result-outside-tool-message",
                            i,
                            f"result for {cid!r} in a {msg.role} message",
                        )
                    )
                if cid not in seen_calls:
                    out.append(Violation("tool-result-without-call", i, f"no earlier call {cid!r}"))
                    continue
                if cid in answered:
                    out.append(Violation("tool-result-without-call", i, f"{cid!r} answered twice"))
                    continue
                answered.add(cid)
                if cid in group_open:
                    group_open.discard(cid)
                else:
                    out.append(
                        Violation(
                            "parallel-results-split",
                            i,
                            f"result for {cid!r} (called in message {seen_calls[cid]}) is not in "
                            "the tool messages right after its call",
                        )
                    )
    for cid, index in seen_calls.items():
        if cid not in answered and index != last_assistant:
            out.append(Violation("unanswered-tool-call", index, f"call {cid!r} has no result"))
    return out


def _thinking(ctx: AgentContext, original: AgentContext) -> list[Violation]:
    by_call: dict[str, tuple[ThinkingBlock, ...]] = {}
    for msg in original.messages:
        if msg.role != "assistant" or not msg.tool_calls:
            continue
        thinking = tuple(b for b in msg.content if isinstance(b, ThinkingBlock))
        if thinking:
            for call in msg.tool_calls:
                by_call[call.id] = thinking
    out: list[Violation] = []
    if not by_call:
        return out
    for i, msg in enumerate(ctx.messages):
        if msg.role != "assistant":
            continue
        for call in msg.tool_calls:
            expected = by_call.get(call.id)
            if expected is None:
                continue
            present = [b for b in msg.content if isinstance(b, ThinkingBlock)]
            if any(t not in present for t in expected):
                detail = f"turn with call {call.id!r} lost its thinking"
                out.append(Violation("thinking-detached", i, detail))
            break
    return out


def _markers(ctx: AgentContext, stash: Mapping[str, str] | None) -> list[Violation]:
    return [
        Violation(
            "dangling-marker",
            i,
            f"{block.type} marker etag {block.etag} is neither in the context nor recoverable",
        )
        for i, block in dangling(ctx, stash)
    ]


def _added(store: Mapping[str, str], original: AgentContext | None) -> Mapping[str, str]:
    """The entries of `store` that `original`'s store does not hold as they are."""
    if original is None or not original.recovery:
        return store
    old = original.recovery
    return {k: v for k, v in store.items() if old.get(k) != v}


def validate(
    ctx: AgentContext,
    original: AgentContext | None = None,
    *,
    stash: Mapping[str, str] | None = None,
    verify: bool = True,
    pins: bool = True,
) -> list[Violation]:
    """Every rule broken by `ctx`; rules that compare with the input need `original`.

    `pins=False` skips the `pin-broken` rule (for the bench's reference policies of other tools).

    With `verify` (the default), every entry of the recovery store and `stash` is first checked
    against its etag (entries carried over unchanged from `original`'s store are its own): one that
    was changed, is not JSON or is not a list raises `RecoveryError` (bad input, exit 2) naming the
    etag, since no rule can be judged on a store that lies.
    """
    if verify:
        verify_entries(_added(ctx.recovery, original), ctx)
        if stash:
            verify_entries(stash, ctx)
    out = _pairing(ctx)
    if ctx.messages and ctx.messages[0].role == "tool":
        out.append(Violation("starts-with-tool-result", 0, "the context starts on a tool message"))
    if original is not None:
        if ctx.system_instruction != original.system_instruction:
            out.append(Violation("system-instruction-changed", None, "system instruction differs"))
        task_index = original.first_user_index
        if task_index is not None:
            task = original.messages[task_index]
            mine = ctx.first_user_index
            if mine is None or ctx.messages[mine] != task:
                out.append(
                    Violation(
                        "task-missing",
                        mine,
                        f"the first user message (input message {task_index}) was not kept",
                    )
                )
        out.extend(_thinking(ctx, original))
        if pins:
            out.extend(Violation("pin-broken", i, detail) for i, detail in broken(ctx, original))
    out.extend(_markers(ctx, stash))
    if verify and not out:
        out.extend(_nested_markers(ctx, stash))
    return out


def _nested_markers(ctx: AgentContext, stash: Mapping[str, str] | None) -> list[Violation]:
    """Markers inside what the store holds (a summary of a summary, a collapse inside an omitted
    window) whose own content is in no store: `expand` would leave them in place."""
    out: list[Violation] = []
    copies: dict[str, str] | None = None
    for i, msg in enumerate(ctx.messages):
        alone = ctx.model_copy(update={"messages": (msg,)})
        top = {m.etag for _, m in markers(alone)}
        if not top:
            continue
        if copies is None:  # what the whole context holds in full, for collapses inside
            copies = {**context_copies(ctx), **(stash or {})}
        nested = set(unrecoverable(alone, copies)) - top  # top-level ones: `_markers` judged them
        for etag in sorted(nested):
            out.append(
                Violation(
                    "dangling-marker",
                    i,
                    f"a marker (etag {etag}) inside what this message's markers stand for is "
                    "neither in the context nor recoverable",
                )
            )
    return out


def arrival_window(ctx: AgentContext) -> AgentContext:
    """The end of `ctx` that an arrival on its last message concerns: from the last message that
    is not a tool message (the call the new results answer) on, with the context's pins and pin
    rules. Validating and pinning that window costs what the new message costs, not the history."""
    held = ctx.__dict__
    window = held.get("_arrival_window")
    if isinstance(window, AgentContext):
        return window
    start = len(ctx.messages) - 1
    while start > 0 and ctx.messages[start].role == "tool":
        start -= 1
    data = {name: getattr(ctx, name) for name in type(ctx).model_fields}
    data.update(messages=ctx.messages[max(start, 0) :], recovery={})
    window = held["_arrival_window"] = type(ctx).model_construct(**data)
    return window


def validate_arrival(
    out: AgentContext, inp: AgentContext, again: AgentContext | None = None
) -> list[Violation]:
    """Every rule an arrival step broke: `inp` ends on the new message, `out` is the strategy's
    output, `again` (optional) the strategy run on `out`.

    Only the last message may change (and recovery entries be added); the window around it keeps
    every rule of `validate` (pairing, pins, markers recoverable from the entries added)."""
    out_list: list[Violation] = []
    n = len(inp.messages)
    last = n - 1
    # compared as tuples and items views: each pair the same object, or equal (one pass in C)
    same_head = len(out.messages) == n and out.messages[:last] == inp.messages[:last]
    old = inp.recovery
    kept = out.recovery is old or old.items() <= out.recovery.items()
    others = out.replace(messages=(), recovery={}) == inp.replace(messages=(), recovery={})
    if not (same_head and kept and others):
        where = "a message already sent" if not same_head else "the context around the messages"
        out_list.append(Violation("arrival-changed-sent", None, f"it changed {where}"))
        return out_list
    if again is not None and again != out:
        out_list.append(
            Violation("arrival-not-idempotent", last, "running it on its own output changed it")
        )
    if n and out.messages[last] is not inp.messages[last]:
        out_list.extend(_arrived(out, inp))
    return out_list


def _arrived(out: AgentContext, inp: AgentContext) -> list[Violation]:
    """The rules of `validate` on the window around a changed last message (`arrival_window`):
    pairing, pins, and every marker it holds recoverable (an entry it added, one already kept,
    or for a collapsed marker a full copy in the context)."""
    old = inp.recovery
    added = {} if out.recovery is old else {k: v for k, v in out.recovery.items() if k not in old}
    window, given = arrival_window(out), arrival_window(inp)
    verify_entries(added, window)
    offset = len(out.messages) - len(window.messages)
    found = _pairing(window)
    found.extend(Violation("pin-broken", i, detail) for i, detail in broken(window, given))
    copies: dict[str, str] | None = None
    for _, block in markers(window.replace(messages=window.messages[-1:])):
        if block.etag in out.recovery:
            continue
        if block.type == "collapsed":  # it may stand for a full copy the context holds
            copies = context_copies(out) if copies is None else copies
            if block.etag in copies:
                continue
        detail = f"{block.type} marker etag {block.etag} is neither in the context nor recoverable"
        found.append(Violation("dangling-marker", len(window.messages) - 1, detail))
    return [
        Violation(v.rule, None if v.message is None else v.message + offset, v.detail)
        for v in found
    ]
