"""peer-gemini-cli: Gemini CLI's chat compression (at 50% of the model's token limit, everything
before the newest 30% of the history, cut at a user message, becomes one summary; tool responses
past a 50,000-token budget, counted from the newest, are cut to their first 20% and last 80% of
40,000 characters).

Read from google-gemini/gemini-cli: packages/core/src/services/chatCompressionService.ts (commit
02b2885c: DEFAULT_COMPRESSION_TOKEN_THRESHOLD = 0.5, COMPRESSION_PRESERVE_THRESHOLD = 0.3,
COMPRESSION_FUNCTION_RESPONSE_TOKEN_BUDGET = 50_000, findCompressSplitPoint, truncateHistoryToBudget,
ChatCompressionService.compress: no change when the new history would count more tokens),
packages/core/src/core/tokenLimits.ts (commit 04fbf507: 1,048,576 for the Gemini models),
packages/core/src/utils/fileUtils.ts (formatTruncatedToolOutput) and packages/core/src/config/config.ts
(commit 0027ff71: DEFAULT_TRUNCATE_TOOL_OUTPUT_THRESHOLD = 40_000 characters).
"""

from __future__ import annotations

from pydantic import Field

from ...context import AgentContext, Message, render_block
from ...tokens import TokenCounter
from .._common import counter_for
from ._base import PeerOptions, PeerPolicy, Plan
from ._results import Replacements, apply, editable, masked, results, shown_text


class GeminiCliOptions(PeerOptions):
    token_limit: int = Field(
        default=1_048_576,
        ge=1_000,
        description="The model's token limit (tokenLimit: 1,048,576 for the Gemini models).",
    )
    threshold: float = Field(
        default=0.5,
        gt=0,
        le=1,
        description="Fraction of the token limit at which the history is compressed "
        "(DEFAULT_COMPRESSION_TOKEN_THRESHOLD; the compressionThreshold setting).",
    )
    preserve: float = Field(
        default=0.3,
        gt=0,
        lt=1,
        description="Fraction of the history (in characters) kept verbatim at the end "
        "(COMPRESSION_PRESERVE_THRESHOLD).",
    )
    function_response_budget: int = Field(
        default=50_000,
        ge=0,
        description="Tokens of tool responses kept whole, newest first "
        "(COMPRESSION_FUNCTION_RESPONSE_TOKEN_BUDGET).",
    )
    truncate_chars: int = Field(
        default=40_000,
        ge=10,
        description="A response past the budget longer than this many characters is cut to its "
        "first 20% and last 80% of them (truncateToolOutputThreshold).",
    )
    summary_max_tokens: int = Field(
        default=4_000,
        ge=32,
        description="Largest summary (Gemini CLI sets none; the default pipeline's size).",
    )


class PeerGeminiCli(PeerPolicy):
    """Gemini CLI's chat compression: at `threshold` x `token_limit` tokens (524,288 for Gemini),
    the history before the first user message past the oldest 70% of its characters becomes one
    summary (all of it when the history ends on a model reply without calls); in what stays,
    tool responses past `function_response_budget` tokens (newest first) longer than
    `truncate_chars` are cut to a head and a tail. A compression that would grow the context is
    not made. At a given `trigger`, the responses' budget and the cut length are the same shares
    of it as of the native threshold (what is kept verbatim is a share already)."""

    summary_instruction_tokens = 1_100
    """The summarizer's instruction: an estimate: the compression prompt (`getCompressionPrompt`)
    is a system instruction of its own, so nothing is shared."""
    summary_shares_prefix = False

    name = "peer-gemini-cli"
    description = "Gemini CLI's chat compression: at 50% of the window, keep the newest 30%."
    Options = GeminiCliOptions
    options: GeminiCliOptions
    once_per_request = True

    def compact(self, ctx: AgentContext) -> AgentContext:
        out = super().compact(ctx)
        if out is ctx:
            return ctx
        counter = counter_for(self.options.tokenizer)
        if counter.context(out) > counter.context(ctx):
            return ctx  # COMPRESSION_FAILED_INFLATED_TOKEN_COUNT
        return out

    def native_trigger(self) -> int:
        return int(self.options.threshold * self.options.token_limit)

    def plan(self, ctx: AgentContext, start: int, counter: TokenCounter) -> Plan | None:
        opts = self.options
        if counter.context(ctx) < self.at_trigger():
            return None
        shown = self.truncated(ctx.messages, {}, counter)
        split = split_point(shown, start, 1 - opts.preserve)
        if split <= start:
            return None
        return Plan(start, split, opts.summary_max_tokens)

    def kept(
        self, ctx: AgentContext, plan: Plan, recovery: dict[str, str], counter: TokenCounter
    ) -> tuple[Message, ...]:
        return self.truncated(ctx.messages[plan.end :], recovery, counter)

    def truncated(
        self, messages: tuple[Message, ...], recovery: dict[str, str], counter: TokenCounter
    ) -> tuple[Message, ...]:
        """truncateHistoryToBudget: tool responses counted from the newest; once the budget is
        passed, a response longer than `truncate_chars` is cut (its output stored in
        `recovery`) and the cut text counts instead."""
        budget = self.share(self.options.function_response_budget)
        cut = self.share(self.options.truncate_chars, 10)
        used = 0
        replaced: Replacements = {}
        for i, j, result in reversed(list(results(messages))):
            text = shown_text(result)
            tokens = counter.text(text)
            if used + tokens <= budget or not editable(result):
                used += tokens
                continue
            label = truncated_output(text, cut)
            if label is None:
                used += tokens
                continue
            replaced.setdefault(i, {})[j] = masked(result, label, recovery)
            used += counter.text(label)
        return apply(messages, replaced) if replaced else messages


def truncated_output(text: str, max_chars: int) -> str | None:
    """formatTruncatedToolOutput: the first 20% and last 80% of `max_chars` characters with a
    note between (None when the text is not longer)."""
    if len(text) <= max_chars:
        return None
    head = int(max_chars * 0.2)
    tail = max_chars - head
    omitted = len(text) - head - tail
    return (
        f"Output too large. Showing first {head:,} and last {tail:,} characters.\n"
        f"{text[:head]}\n\n... [{omitted:,} characters omitted] ...\n\n{text[-tail:]}"
    )


def split_point(messages: tuple[Message, ...], start: int, fraction: float) -> int:
    """findCompressSplitPoint: the first user message (not a tool response) at or past
    `fraction` of the history's characters; everything when none is and the history ends on a
    model reply without calls; else the last user message before it (`start` when none: nothing
    is compressed)."""
    sizes = [sum(len(t) for block in m.content for t in render_block(block)) for m in messages]
    target = sum(sizes) * fraction
    last = start
    seen = 0
    for i, msg in enumerate(messages):
        if i >= start and msg.role == "user" and not msg.tool_results:
            if seen >= target:
                return i
            last = i
        seen += sizes[i]
    final = messages[-1] if messages else None
    if final is not None and final.role == "assistant" and not final.tool_calls:
        return len(messages)
    return last
