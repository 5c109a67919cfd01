"""peer-pi: pi's coding-agent compaction (over window - reserveTokens, keep the newest
keepRecentTokens, summarize the rest with the previous summary, append the files read and changed).

Read from badlogic/pi-mono: packages/coding-agent/src/core/compaction/compaction.ts (commit
04309178: DEFAULT_COMPACTION_SETTINGS reserveTokens 16384 and keepRecentTokens 20000, shouldCompact,
findCutPoint, generateSummary with maxTokens = 0.8 * reserveTokens, the file lists appended by
compact()).
"""

from __future__ import annotations

from pydantic import Field

from ...context import AgentContext
from ...recovery import flatten
from ...tokens import TokenCounter
from ...toolcall import read_call
from ._base import PeerOptions, PeerPolicy, Plan, cut_keeping_tokens


class PiOptions(PeerOptions):
    context_window: int = Field(
        default=200_000, ge=1_000, description="The model's context window (Claude: 200,000)."
    )
    reserve_tokens: int = Field(
        default=16_384,
        ge=0,
        description="reserveTokens: compact when the context exceeds the window minus this; the "
        "summary may use 80% of it.",
    )
    keep_recent_tokens: int = Field(
        default=20_000,
        ge=0,
        description="keepRecentTokens: the newest messages kept verbatim, cut at a user or "
        "assistant message once this many tokens are kept.",
    )


class PeerPi(PeerPolicy):
    """pi's compaction: over `context_window - reserve_tokens`, the messages before the newest
    `keep_recent_tokens` become one summary (the previous summary merged in), followed by the
    lists of files read and modified. At a given `trigger`, the kept tokens and the summary's
    limit are the same shares of it as of the native threshold."""

    summary_instruction_tokens = 300
    """The summarizer's instruction: `SUMMARIZATION_PROMPT` (about 1,100 characters) and its system
    prompt, after the serialized conversation."""
    summary_shares_prefix = False

    name = "peer-pi"
    description = "pi's compaction: at window - 16,384 tokens, keep the newest 20,000 tokens."
    Options = PiOptions
    options: PiOptions

    def native_trigger(self) -> int:
        return self.options.context_window - self.options.reserve_tokens

    def plan(self, ctx: AgentContext, start: int, counter: TokenCounter) -> Plan | None:
        opts = self.options
        if counter.context(ctx) <= self.at_trigger():
            return None
        end = cut_keeping_tokens(ctx, start, self.share(opts.keep_recent_tokens), counter)
        return Plan(start, end, max(self.share(int(0.8 * opts.reserve_tokens)), 32))

    def dress(self, summary: str, ctx: AgentContext, plan: Plan, counter: TokenCounter) -> str:
        read: dict[str, None] = {}
        changed: dict[str, None] = {}
        for msg in flatten(ctx.messages[plan.start : plan.end], ctx.recovery):
            for call in msg.tool_calls:
                facts = read_call(call)
                changed.update(dict.fromkeys(facts.changed))
                read.update(dict.fromkeys(facts.read))
        only_read = sorted(p for p in read if p not in changed)
        parts = [summary]
        if only_read:
            parts.append("<read-files>\n" + "\n".join(only_read) + "\n</read-files>")
        if changed:
            parts.append("<modified-files>\n" + "\n".join(sorted(changed)) + "\n</modified-files>")
        return "\n\n".join(parts)
