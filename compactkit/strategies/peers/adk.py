"""peer-adk: Google ADK's events compaction (EventsCompactionConfig: after every
`compaction_interval` new user-initiated invocations, those invocations and the last
`overlap_size` invocations of the previous summary become one more summary; optionally, when the
prompt reaches `token_threshold` tokens, everything but the newest `event_retention_size` events
becomes one summary).

Read from google/adk-python: src/google/adk/apps/app.py (commit 78eade9e: EventsCompactionConfig,
`compaction_interval` and `overlap_size`, both required: the SDK has no default),
src/google/adk/apps/compaction.py (commit ef6ac338: `_run_compaction_for_sliding_window`, run after
each invocation: new invocations since the last compaction's end, the range starting
`overlap_size` invocations before the first new one), src/google/adk/flows/llm_flows/contents.py
(`_process_compaction_events`: every summary not subsumed by a later one is shown at the end of
its range, the events it covers are not) and src/google/adk/apps/llm_event_summarizer.py; the
token trigger (`token_threshold` with `event_retention_size`, set together, checked before a model
call, the newest events kept raw and everything older, the previous summary included, summarized)
from google/adk-python commit a88e8647 ("Add post-invocation token-threshold compaction with event
retention") and google/adk-docs docs/context/compaction.md (commit 0535177b). The defaults here are
the ADK documentation's example, `compaction_interval=3, overlap_size=1`, with no token trigger.
"""

from __future__ import annotations

from pydantic import Field, model_validator

from ...context import AgentContext, Message
from ...recovery import flatten, message_marker
from ...tokens import TokenCounter
from .._common import units
from ._base import PeerOptions, PeerPolicy, Plan

DOCUMENTED_RETENTION = 5
"""`event_retention_size` of the ADK documentation's token-based example (docs/context/compaction.md:
`token_threshold=4000, event_retention_size=5`)."""


class AdkOptions(PeerOptions):
    compaction_interval: int = Field(
        default=3,
        ge=1,
        description="New user-initiated invocations that trigger a compaction "
        "(`compaction_interval`; required in ADK, 3 in its documentation's example).",
    )
    overlap_size: int = Field(
        default=1,
        ge=0,
        description="Invocations of the previous summary summarized again with the new ones "
        "(`overlap_size`; 1 in the documentation's example).",
    )
    token_threshold: int | None = Field(
        default=None,
        ge=1,
        description="Prompt tokens at which everything but the newest `event_retention_size` "
        "events is summarized (`token_threshold`; unset: no token trigger).",
    )
    event_retention_size: int | None = Field(
        default=None,
        ge=0,
        description="Newest events kept raw by the token trigger (`event_retention_size`, set "
        "together with `token_threshold`).",
    )
    summary_max_tokens: int = Field(
        default=4_000,
        ge=32,
        description="Largest summary (ADK sets none; the default pipeline's size).",
    )

    @model_validator(mode="after")
    def _token_params_together(self) -> AdkOptions:
        if (self.token_threshold is None) != (self.event_retention_size is None):
            raise ValueError("token_threshold and event_retention_size must be set together")
        return self


class PeerAdk(PeerPolicy):
    """Google ADK's events compaction. An invocation is a message in the user's own words and
    everything up to the next one. Once `compaction_interval` invocations have completed since
    the last summary, they become one summary placed after it, written from them and the last
    `overlap_size` invocations that summary covers. With `token_threshold`, a prompt of that
    many tokens first has everything but its newest `event_retention_size` events (a model turn
    is one, its tool responses another) summarized, earlier summaries included.

    At a given `trigger`, ADK's token-based compaction (its primary strategy, which takes
    priority over the interval one) runs there alone: `token_threshold` is the trigger and
    `event_retention_size` as given, else 5, the ADK documentation's token-based example."""

    summary_instruction_tokens = 60
    """The summarizer's instruction: `LlmEventSummarizer._DEFAULT_PROMPT_TEMPLATE` (about 290
    characters), the events formatted into it."""
    summary_shares_prefix = False

    name = "peer-adk"
    description = "Google ADK's events compaction: every 3 invocations, overlapping 1."
    Options = AdkOptions
    options: AdkOptions
    once_per_request = True

    def plan(self, ctx: AgentContext, start: int, counter: TokenCounter) -> Plan | None:
        opts = self.options
        threshold, retention = opts.token_threshold, opts.event_retention_size
        if self.like_for_like:
            threshold, retention = self.options.trigger, retention or DOCUMENTED_RETENTION
        if threshold is not None and retention is not None and counter.context(ctx) >= threshold:
            end = tail_cut(ctx, start, retention)
            if end > start:
                return Plan(start, end, opts.summary_max_tokens)
        if self.like_for_like:
            return None
        begin = start
        for i in range(len(ctx.messages) - 1, start - 1, -1):
            if message_marker(ctx.messages[i]) is not None:
                begin = i + 1
                break
        starts = invocation_starts(ctx.messages, begin)
        if len(starts) - 1 < opts.compaction_interval:
            return None
        if any(m.role == "assistant" for m in ctx.messages[starts[-1] :]):
            return None  # ADK checks when an invocation has completed, before the next one runs
        return Plan(begin, starts[-1], opts.summary_max_tokens)

    def summary_context(self, ctx: AgentContext, plan: Plan) -> tuple[Message, ...]:
        """The last `overlap_size` invocations of the summary just before the window."""
        if plan.start == 0 or self.options.overlap_size == 0:
            return ()
        previous = ctx.messages[plan.start - 1]
        if message_marker(previous) is None:
            return ()
        covered = tuple(flatten([previous], ctx.recovery))
        if covered == (previous,):
            return ()
        starts = invocation_starts(covered, 0)
        first = starts[max(len(starts) - self.options.overlap_size, 0)]
        return covered[first:]


def invocation_starts(messages: tuple[Message, ...], begin: int) -> list[int]:
    """Where each invocation from `begin` on starts: `begin` itself and every message in the
    user's own words after it (the last one is the invocation in progress)."""
    return sorted({begin, *(i for i in range(begin, len(messages)) if messages[i].is_human)})


def tail_cut(ctx: AgentContext, start: int, retention: int) -> int:
    """The latest unit start from `start` on that leaves at least `retention` events after it
    (a message is one event, the tool responses of one model turn one more); `start` when the
    history after it holds fewer."""
    kept = 0
    for unit in reversed(units(ctx.messages[start:])):
        if kept >= retention:
            return start + unit.end
        tools = any(m.role == "tool" for m in ctx.messages[start + unit.start : start + unit.end])
        kept += 2 if tools else 1
    return start
