"""peer-openhands: the OpenHands SDK default condenser (LLMSummarizingCondenser, max_size=80,
keep_first=4), counted in OpenHands events.

Read from OpenHands/software-agent-sdk:
openhands-sdk/openhands/sdk/context/condenser/llm_summarizing_condenser.py (commit 0d2b16d9) and
openhands-tools/openhands/tools/preset/default.py (commit 9f896532, `get_default_condenser`).
"""

from __future__ import annotations

from pydantic import Field

from ...context import AgentContext, Message
from ...recovery import message_marker
from ...tokens import TokenCounter
from ._base import PeerOptions, PeerPolicy, Plan, unit_starts


class OpenHandsOptions(PeerOptions):
    max_size: int = Field(
        default=80,
        ge=4,
        description="Events in the view above which the condenser runs (the SDK's default agent "
        "uses 80; the class default is 120).",
    )
    keep_first: int = Field(
        default=4,
        ge=0,
        description="Events at the start kept verbatim (the system prompt event counts as one).",
    )
    max_tokens: int | None = Field(
        default=None,
        ge=1,
        description="Optional token trigger (the SDK's `max_tokens`, unset by default).",
    )
    summary_max_tokens: int = Field(
        default=4_000,
        ge=32,
        description="Largest summary (OpenHands sets none; the default pipeline's size).",
    )


def events(msg: Message) -> int:
    """OpenHands events a message stands for: one action per tool call, one observation per tool
    result, one event for any other message (a summary marker is the one condensation event)."""
    if message_marker(msg) is not None:
        return 1
    if msg.role == "tool":
        return max(len(msg.tool_results), 1)
    if msg.role == "assistant" and msg.tool_calls:
        return len(msg.tool_calls)
    return 1


class PeerOpenHands(PeerPolicy):
    """OpenHands' LLMSummarizingCondenser: when the view holds more than `max_size` events, keep
    the first `keep_first` events and the newest `max_size // 2 - keep_first - 1` events, and
    replace everything between them (the previous summary included) with one summary event.

    At a given `trigger` it condenses on tokens instead (the SDK's own `max_tokens`, the event
    limit left out so the trigger is the one compared), and keeps from the tail the newest events
    within the share of the trigger its tail is of the event limit
    (`(max_size // 2 - keep_first - 1) / max_size`: 35 / 80 of it)."""

    summary_instruction_tokens = 600
    """The summarizer's instruction: `prompts/summarizing_prompt.j2` (about 2,600 characters), the
    events rendered into it."""
    summary_shares_prefix = False

    name = "peer-openhands"
    description = "OpenHands' default condenser: over 80 events, summarize all but 4 + 35 events."
    Options = OpenHandsOptions
    options: OpenHandsOptions

    def plan(self, ctx: AgentContext, start: int, counter: TokenCounter) -> Plan | None:
        opts = self.options
        counts = [events(m) for m in ctx.messages]
        total = sum(counts) + (1 if ctx.system_instruction else 0)
        limit = self.options.trigger if self.like_for_like else opts.max_tokens
        over_tokens = limit is not None and counter.context(ctx) > limit
        if not over_tokens and (self.like_for_like or total <= opts.max_size):
            return None
        # the head: keep_first events from the start (the system prompt event first), never less
        # than the task; whole units only
        cuts = unit_starts(ctx, start)
        head_events = (1 if ctx.system_instruction else 0) + sum(counts[:start])
        begin = start
        for cut in cuts:
            if head_events + sum(counts[start:cut]) <= opts.keep_first:
                begin = cut
        tail_events = max(opts.max_size // 2 - opts.keep_first - 1, 1)
        sizes = counter.messages(ctx.messages) if self.like_for_like else counts
        tail = (
            tail_events
            if not self.like_for_like
            else self.at_trigger() * tail_events // opts.max_size
        )
        end = len(ctx.messages)
        for cut in reversed(cuts[:-1]):
            if cut < begin or sum(sizes[cut:]) > tail:
                break
            end = cut
        return Plan(begin, end, opts.summary_max_tokens)
