"""What the peer policies share: options for the summarizer backend, the trigger/window/summary
steps every policy fills in, and the one way a window becomes a recoverable summary marker."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import ClassVar

from pydantic import Field, JsonValue, model_validator

from ...context import AgentContext, Message, SummaryBlock
from ...errors import StrategyError
from ...recovery import flatten, message_marker, prune, put
from ...strategy import Strategy, StrategyOptions, SummaryCall
from ...summarize.base import SummaryRequest, clip_tokens
from ...tokens import TokenCounter
from .._common import counter_for, head_end, restore_orphaned_collapses, units
from ..llm_summary import (
    MARKER_META,
    SummarizerOptions,
    _keep_collapsed_recoverable,
    get_summarizer,
    log,
    summarize_cached,
)


class TriggerOptions(StrategyOptions):
    """The like-for-like trigger every peer with one has (see `PeerPolicy.at_trigger`)."""

    trigger: int | None = Field(
        default=None,
        ge=1,
        description="Compact at this many tokens, the policy's keep-windows and targets the same "
        "shares of it as of its native trigger (the bench fills it with --trigger); unset: the "
        "peer's native trigger.",
    )
    native: bool = Field(
        default=False,
        description="Keep the peer's native trigger and windows (the bench then leaves `trigger` "
        "unset): the comparison as the peer ships.",
    )

    @model_validator(mode="after")
    def _one_trigger(self) -> TriggerOptions:
        if self.native and self.trigger is not None:
            raise ValueError("native=true keeps the native trigger: give no trigger with it")
        return self


class PeerOptions(SummarizerOptions, TriggerOptions):
    """Options every peer policy has: the summarizer backend's, the same as llm-summary's, so a
    comparison of peers is a comparison of policies, and the like-for-like trigger."""


@dataclass(frozen=True)
class Plan:
    """One compaction a policy decided on: messages[start:end] become one summary message."""

    start: int
    end: int
    summary_tokens: int
    """Cap on the summary the backend writes (before the policy's own additions)."""


class PeerPolicy(Strategy):
    """A peer's compaction policy: `plan` says whether and what to replace, the shared machinery
    summarizes it, and `dress` adds what the peer puts around the summary (kept user messages,
    re-read files, file lists). The replaced messages stay recoverable: the summary is an
    llm-summary marker whose window is in the recovery store, and everything the peer adds lives
    in the marker's text, so `expand` gives the original back."""

    Options: ClassVar[type[PeerOptions]] = PeerOptions
    options: PeerOptions
    trigger_option: ClassVar[str | None] = "trigger"
    self_triggered: ClassVar[bool] = True
    """The policy decides itself when to compact (the bench calls it before every model call)."""
    keeps_pins: ClassVar[bool] = False
    """A peer's policy is measured as the peer ships it: what it drops of the user's words counts
    against it in the bench's retention instead of failing the run."""
    once_per_request: ClassVar[bool] = False
    """The peer checks at fixed points (once per request, once per invocation) and may compact
    again what it just kept: its summary records the history's length, and nothing is compacted
    until the history has grown (so a compaction run on its own output changes nothing)."""

    summary_by_model: ClassVar[bool] = True
    """Every peer that summarizes does it with a model (compactkit writes the text offline here,
    the bench charges the call the peer would make)."""

    def summary_call(
        self, block: SummaryBlock, before: AgentContext, after: AgentContext, counter: TokenCounter
    ) -> SummaryCall | None:
        """The peer's summarizer call for `block`: its input is the window as the summarizer reads
        it (`summary_context` and `summary_input`; the whole conversation when the peer sends
        it before its instruction) plus `summary_instruction_tokens`, its output the summary
        without what `dress` adds around it."""
        plan = self.plan(before, self.window_start(before), counter)
        if plan is None:
            return super().summary_call(block, before, after, counter)
        if self.summary_shares_prefix:
            read = counter.context(before)
        else:
            window = self.summary_input(before.messages[plan.start : plan.end], counter)
            read = sum(counter.messages((*self.summary_context(before, plan), *window)))
        dressing = counter.text(self.dress("", before, plan, counter))
        output = max(counter.text(block.text) - dressing, 0)
        instruction = self.summary_instruction_tokens or 0
        return SummaryCall(read + instruction, output, self.summary_shares_prefix)

    def compact(self, ctx: AgentContext) -> AgentContext:
        counter = counter_for(self.options.tokenizer)
        if self.once_per_request and unchanged_since_summary(ctx):
            return ctx
        start = self.window_start(ctx)
        plan = self.plan(ctx, start, counter)
        if plan is None or nothing_new(ctx, plan.start, plan.end):
            return ctx
        window = ctx.messages[plan.start : plan.end]
        recovery = dict(ctx.recovery)
        etag = put(recovery, flatten(window, ctx.recovery))
        _keep_collapsed_recoverable(ctx, plan.start, plan.end, recovery)
        summary = self.summarize(ctx, plan, etag, counter)
        text = self.dress(summary, ctx, plan, counter)
        kept = self.kept(ctx, plan, recovery, counter)
        replaced = len(flatten(window, ctx.recovery))
        block = SummaryBlock(
            text=text, etag=etag, summarized_messages=replaced, backend=self.options.backend
        )
        meta: dict[str, JsonValue] = {"compactkit_marker": MARKER_META}
        if self.once_per_request:
            meta[LENGTH_KEY] = plan.start + 1 + len(kept)
        marker = Message(role="user", content=(block,), metadata=meta)
        out = ctx.replace(
            messages=(*ctx.messages[: plan.start], marker, *kept),
            recovery=recovery,
        )
        return prune(restore_orphaned_collapses(out))

    # ----------------------------------------------------------------- the like-for-like trigger

    def native_trigger(self) -> int:
        """Tokens at which the peer compacts as it ships (from its native options)."""
        raise NotImplementedError

    @property
    def like_for_like(self) -> bool:
        """Whether the policy runs at the given `trigger` instead of its native one."""
        return self.options.trigger is not None and not self.options.native

    def at_trigger(self) -> int:
        """Tokens at which the policy compacts: the given `trigger`, else its native one."""
        return self.options.trigger if self.options.trigger is not None else self.native_trigger()

    def share(self, native_tokens: int, least: int = 1) -> int:
        """A keep-window or target of the native policy, as the same share of the trigger in use
        (unchanged at the native trigger)."""
        if not self.like_for_like:
            return native_tokens
        return max(least, round(native_tokens * self.at_trigger() / self.native_trigger()))

    # ----------------------------------------------------------------- what each peer decides

    def plan(self, ctx: AgentContext, start: int, counter: TokenCounter) -> Plan | None:
        """The compaction to make now, or None when the policy's trigger is not reached."""
        raise NotImplementedError

    def dress(self, summary: str, ctx: AgentContext, plan: Plan, counter: TokenCounter) -> str:
        """The text the model is shown in place of the window (default: the summary as is)."""
        return summary

    def summary_input(
        self, window: Sequence[Message], counter: TokenCounter
    ) -> tuple[Message, ...]:
        """The messages the summarizer reads (default: the whole window)."""
        return tuple(window)

    def summary_context(self, ctx: AgentContext, plan: Plan) -> tuple[Message, ...]:
        """Messages from before the window the summarizer reads first (default: none; Google
        ADK's overlap with the previous summary)."""
        return ()

    def kept(
        self, ctx: AgentContext, plan: Plan, recovery: dict[str, str], counter: TokenCounter
    ) -> tuple[Message, ...]:
        """The messages after the window as the model is shown them (default: as they are;
        what a peer changes there goes into `recovery`)."""
        return ctx.messages[plan.end :]

    # ----------------------------------------------------------------- shared steps

    @staticmethod
    def window_start(ctx: AgentContext) -> int:
        """Index just past what every policy keeps at the front: the system instruction lives
        outside the messages, and compactkit's contract keeps the task (the first user message)
        and anything before it; results whose calls sit there stay with them."""
        start = head_end(ctx)
        while start < len(ctx.messages) and ctx.messages[start].role == "tool":
            start += 1
        return start

    def summarize(self, ctx: AgentContext, plan: Plan, etag: str, counter: TokenCounter) -> str:
        opts = self.options
        window = self.summary_input(ctx.messages[plan.start : plan.end], counter)
        before = self.summary_context(ctx, plan)
        messages = (*before, *window)
        if not messages:
            return self.empty_summary
        request = SummaryRequest(
            messages=messages,
            task=ctx.task,
            model=opts.model,
            base_url=opts.base_url,
            timeout=opts.timeout,
            max_input_tokens=opts.max_input_tokens,
            summary_max_tokens=plan.summary_tokens,
            tokenizer=opts.tokenizer,
            first_index=plan.start + (plan.end - plan.start - len(window)) - len(before),
            user_message_chars=opts.user_message_chars,
            recovery_etag=etag,
        )
        backend = get_summarizer(opts.backend)
        try:
            raw = summarize_cached(backend, request)
        except StrategyError as exc:
            if opts.fallback != "extractive" or backend.name == "extractive":
                raise
            log.warning("%s (used the extractive summary instead)", exc)
            raw = get_summarizer("extractive").summarize(request)
        return clip_tokens(raw, plan.summary_tokens, counter.tokenizer.count)

    empty_summary: ClassVar[str] = "(no summary available)"


LENGTH_KEY = "compactkit_history_length"
"""Metadata of a `once_per_request` peer's summary: the length of the history it was made in."""


def unchanged_since_summary(ctx: AgentContext) -> bool:
    """True when the newest summary was made in a history as long as this one."""
    for msg in reversed(ctx.messages):
        if message_marker(msg) is not None:
            return msg.metadata.get(LENGTH_KEY) == len(ctx.messages)
    return False


def nothing_new(ctx: AgentContext, start: int, end: int) -> bool:
    """True for an empty window, or one that is only an earlier summary (so a second run changes
    nothing and compaction never loops)."""
    return end <= start or (end - start == 1 and message_marker(ctx.messages[start]) is not None)


def unit_starts(ctx: AgentContext, start: int) -> list[int]:
    """Indexes from `start` on where a cut keeps every tool call with its results (an assistant
    turn with its results, or one message), plus the end of the messages."""
    return [start + u.start for u in units(ctx.messages[start:])] + [len(ctx.messages)]


def cut_keeping_tokens(
    ctx: AgentContext, start: int, keep_tokens: int, counter: TokenCounter
) -> int:
    """The latest cut at a unit start whose kept suffix has at least `keep_tokens` tokens (the
    whole history after `start` when it is smaller)."""
    sizes = counter.messages(ctx.messages)
    kept = 0
    cuts = unit_starts(ctx, start)
    for cut, nxt in zip(reversed(cuts[:-1]), reversed(cuts[1:]), strict=True):
        kept += sum(sizes[cut:nxt])
        if kept >= keep_tokens:
            return cut
    return start
