"""peer-langchain: LangChain v1's SummarizationMiddleware (keep the last 20 messages, summarize the
rest from its last 4,000 tokens), triggered at 170,000 tokens as deepagents sets it.

Read from langchain-ai/langchain: libs/langchain_v1/langchain/agents/middleware/summarization.py
(commit 01b1122a: _DEFAULT_MESSAGES_TO_KEEP = 20, _DEFAULT_TRIM_TOKEN_LIMIT = 4000, the safe cutoff
that never separates an AI message from its tool messages, trim_messages(strategy="last",
start_on="human") before summarizing, "Here is a summary of the conversation to date:"). The
middleware has no default trigger (None: never summarizes); langchain-ai/deepagents
libs/deepagents/deepagents/graph.py passes ("tokens", 170000) for models without a profile.
"""

from __future__ import annotations

from collections.abc import Sequence

from pydantic import Field

from ...context import AgentContext, Message
from ...tokens import TokenCounter
from ._base import PeerOptions, PeerPolicy, Plan, unit_starts

SUMMARY_PREFIX = "Here is a summary of the conversation to date:\n\n"


class LangChainOptions(PeerOptions):
    trigger_tokens: int = Field(
        default=170_000,
        ge=1,
        description="Messages' tokens at which it summarizes (the middleware has no default; "
        "deepagents passes 170,000).",
    )
    keep_messages: int = Field(
        default=20, ge=0, description='Newest messages kept (`keep=("messages", 20)`).'
    )
    trim_tokens_to_summarize: int = Field(
        default=4_000,
        ge=64,
        description="The summarizer reads only the newest messages within this many tokens, "
        "starting on a user message (`trim_tokens_to_summarize`).",
    )
    summary_max_tokens: int = Field(
        default=4_000,
        ge=32,
        description="Largest summary (LangChain sets none; the default pipeline's size).",
    )


class PeerLangChain(PeerPolicy):
    """LangChain's SummarizationMiddleware: over `trigger_tokens`, everything but the newest
    `keep_messages` messages (moved back so no tool call loses its results) becomes one summary
    written from the newest `trim_tokens_to_summarize` tokens of what it replaces. At a given
    `trigger` it summarizes there; what it keeps is counted in messages, so it stays 20."""

    summary_instruction_tokens = 450
    """The summarizer's instruction: `DEFAULT_SUMMARY_PROMPT` (about 1,800 characters), the
    messages formatted into it."""
    summary_shares_prefix = False

    name = "peer-langchain"
    description = (
        "LangChain's SummarizationMiddleware: at 170,000 tokens, keep the last 20 messages."
    )
    Options = LangChainOptions
    options: LangChainOptions
    empty_summary = "Previous conversation was too long to summarize."

    def native_trigger(self) -> int:
        return self.options.trigger_tokens

    def plan(self, ctx: AgentContext, start: int, counter: TokenCounter) -> Plan | None:
        opts = self.options
        if counter.context(ctx) < self.at_trigger():
            return None
        target = len(ctx.messages) - opts.keep_messages
        safe = [cut for cut in unit_starts(ctx, start) if cut <= target]
        if not safe:
            return None
        return Plan(start, safe[-1], opts.summary_max_tokens)

    def summary_input(
        self, window: Sequence[Message], counter: TokenCounter
    ) -> tuple[Message, ...]:
        """trim_messages(strategy="last", start_on="human"): the newest messages within the limit,
        then dropped from the front until the first one is a user message."""
        budget = self.options.trim_tokens_to_summarize
        first = len(window)
        used = 0
        for i in range(len(window) - 1, -1, -1):
            used += counter.message(window[i])
            if used > budget:
                break
            first = i
        kept = list(window[first:])
        while kept and kept[0].role != "user":
            kept.pop(0)
        while kept and kept[0].tool_results:
            kept.pop(0)
        return tuple(kept)

    def dress(self, summary: str, ctx: AgentContext, plan: Plan, counter: TokenCounter) -> str:
        return SUMMARY_PREFIX + summary
