"""sliding-window: keep the newest turns that fit a token budget."""

from __future__ import annotations

from pydantic import Field

from ..context import AgentContext, Message, OmittedBlock, TextBlock
from ..pins import pinned
from ..recovery import flatten, message_marker, prune, put
from ..strategy import Strategy
from ._common import (
    TokenizerOption,
    Unit,
    counter_for,
    head_end,
    restore_orphaned_collapses,
    units,
)

MARKER_META = "sliding-window"


class SlidingWindowOptions(TokenizerOption):
    max_tokens: int | None = Field(
        default=None,
        ge=1,
        description="Token budget the output must fit (defaults to --budget; unset: no change).",
    )
    keep_first: int = Field(
        default=0,
        ge=0,
        description="Turns after the task that are always kept, besides the system instruction "
        "and the task itself.",
    )


def _is_summary(msg: Message) -> bool:
    """A summary of earlier turns: compactkit's marker, or one the source agent wrote itself."""
    marker = message_marker(msg)
    return (marker is not None and marker.type == "summary") or msg.origin == "summary"


class SlidingWindow(Strategy):
    """Keep the system instruction, the task (and a summary right after it) and the newest turns that
    fit `max_tokens`; the dropped turns are replaced by one `omitted` marker and stay recoverable.
    A tool call never loses its result, and a turn never loses its thinking: whole turns go or stay.
    The pinned words of dropped turns (the user's messages, their words inside tool results, what a
    pin rule names) stay verbatim, carried by the marker message."""

    name = "sliding-window"
    description = (
        "Keep the newest turns that fit a token budget; never split a call from its result."
    )
    Options = SlidingWindowOptions
    budget_option = "max_tokens"
    budget_required = True
    options: SlidingWindowOptions

    def compact(self, ctx: AgentContext) -> AgentContext:
        budget = self.options.max_tokens
        if budget is None:
            return ctx
        counter = counter_for(self.options.tokenizer)
        sizes = counter.messages(ctx.messages)
        if counter.preamble(ctx) + sum(sizes) <= budget:
            return ctx
        start = head_end(ctx, self.options.keep_first)
        # a summary of earlier turns right after the head is kept with it: it is small, and it is
        # the only place the dropped turns' task details, files and errors are still visible
        while start < len(ctx.messages) and _is_summary(ctx.messages[start]):
            start += 1
        rest = units(ctx.messages[start:])
        # an earlier omitted marker right after the head joins the window being dropped
        previous_marker = (
            rest
            and len(rest[0]) == 1
            and message_marker(ctx.messages[start]) is not None
            and ctx.messages[start].metadata.get("compactkit_marker") == MARKER_META
        )
        candidates = rest[1:] if previous_marker else rest
        if not candidates:
            return ctx
        fixed = counter.preamble(ctx) + sum(sizes[:start]) + self._marker_cost(ctx, counter)
        # pinned words of a dropped turn stay, carried by the marker: a turn costs that much anyway
        pins = pinned(ctx)

        def carried(first: int, end: int) -> int:
            """Tokens of the pinned words of messages `first` to `end` (of the rest)."""
            if not pins:
                return 0
            return sum(
                counter.text(b.text) + 1
                for b in pins.carry(ctx.messages[start + first : start + end])
            )

        # the words of every candidate at once, each turn's only as it is kept: a growing
        # session has hundreds of turns, a window keeps a few
        room = budget - fixed - carried(candidates[0].start, candidates[-1].end)
        keep = 0
        used = 0
        for unit in reversed(candidates):
            cost = sum(sizes[start + unit.start : start + unit.end]) - carried(unit.start, unit.end)
            if used + cost > room:
                break
            used += cost
            keep += 1
        keep = max(keep, 1)  # the newest turn always stays: a context of only the task is useless
        while True:
            result = self._drop(ctx, start, candidates, keep, bool(previous_marker))
            if keep <= 1 or counter.context(result) <= budget:
                break
            keep -= 1  # restoring collapsed payloads cost more than estimated
        return result

    def _marker_cost(self, ctx: AgentContext, counter: object) -> int:
        probe = self._marker(ctx, "0" * 16, len(ctx.messages) * 10)
        from ..tokens import TokenCounter

        assert isinstance(counter, TokenCounter)
        return counter.message(probe)

    def _marker(
        self, ctx: AgentContext, etag: str, count: int, carried: tuple[TextBlock, ...] = ()
    ) -> Message:
        label = f"dropped to fit {self.options.max_tokens:,} tokens"
        if carried:
            label += "; the pinned words of those turns follow verbatim"
        return Message(
            role="user",
            content=(OmittedBlock(etag=etag, messages=count, label=label), *carried),
            metadata={"compactkit_marker": MARKER_META},
        )

    def _drop(
        self, ctx: AgentContext, start: int, candidates: list[Unit], keep: int, had_marker: bool
    ) -> AgentContext:
        first_kept = start + candidates[len(candidates) - keep].start
        dropped = ctx.messages[start:first_kept]
        if not dropped or (had_marker and len(dropped) == 1):
            return ctx  # nothing new to drop: running again changes nothing
        count = 0
        for msg in dropped:
            marker = message_marker(msg)
            count += marker.messages if isinstance(marker, OmittedBlock) else 1
        recovery = dict(ctx.recovery)
        etag = put(recovery, flatten(dropped, ctx.recovery))
        messages = (
            *ctx.messages[:start],
            self._marker(ctx, etag, count, pinned(ctx).carry(dropped)),
            *ctx.messages[first_kept:],
        )
        out = ctx.replace(messages=messages, recovery=recovery)
        return prune(restore_orphaned_collapses(out))
