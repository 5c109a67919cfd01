"""peer-anthropic-clear and peer-anthropic-compact: the two server-side context-management edits of
Anthropic's Messages API.

peer-anthropic-clear is tool-result clearing, `clear_tool_uses_20250919` (beta header
`context-management-2025-06-27`): once the prompt exceeds `trigger` (default 100,000 input tokens),
the oldest tool results are cleared in chronological order, keeping the newest `keep` (default 3)
tool uses; `clear_at_least` (default none) applies the edit only when at least that many tokens are
cleared; `exclude_tools` are never cleared; `clear_tool_inputs` (default false) would clear the
calls' parameters too. The edit is made on the server before every request while the client keeps
the full history, so the trigger counts the full, uncleared prompt. Anthropic does not publish the
placeholder text ("Each cleared result is replaced with placeholder text so Claude knows it was
removed"); LangChain's ClearToolUsesEdit, which mirrors this edit, writes "[cleared]", and here the
marker reads `[cleared; etag ...]`.

peer-anthropic-compact is server-side compaction, `compact_20260112` (beta header
`compact-2026-01-12`): when the input exceeds `trigger` (default 150,000 tokens, at least 50,000),
the API summarizes the conversation into a `compaction` block and drops every block before it on
later requests; only the system prompt (and the tool definitions) stay beside the summary. Its
default prompt is public ("You have written a partial transcript for the initial task above. Please
write a summary of the transcript. ... You must wrap your summary in a <summary></summary>
block."); here, as for every peer, the summary text comes from the summarizer backend. The length
of a summary is not published (the usage example shows 3,500 output tokens); 4,000 tokens here.

Read from Anthropic's documentation (platform.claude.com/docs/en/build-with-claude/context-editing,
"Configuration options for tool result clearing", and .../build-with-claude/compaction,
"Parameters" and "Custom summarization instructions"; copies indexed from
yurashapovalov/barb docs/antropic/context-management/ @ bfff704a), the SDKs' parameter types
(anthropics/anthropic-sdk-php src/Beta/Messages/BetaClearToolUses20250919Edit.php: trigger, keep,
clear_at_least, exclude_tools, clear_tool_inputs) and langchain-ai/langchain
libs/langchain_v1/langchain/agents/middleware/context_editing.py @ 03373459 (DEFAULT_TOOL_PLACEHOLDER).
"""

from __future__ import annotations

from typing import ClassVar

from pydantic import Field, field_validator

from ...context import AgentContext, MaskedBlock
from ...recovery import expand, prune
from ...strategy import Strategy
from ...tokens import TokenCounter
from .._common import TokenizerOption, ToolNames, counter_for
from ._base import PeerOptions, PeerPolicy, Plan, TriggerOptions
from ._results import Replacements, apply, calls_by_id, editable, masked, results

CLEARED = "cleared"
"""The label of a cleared result (shown as `[cleared; etag ...]`)."""


NATIVE_CLEAR_TRIGGER = 100_000
"""clear_tool_uses_20250919's default `trigger` (input tokens)."""
NATIVE_COMPACT_TRIGGER = 150_000
"""compact_20260112's default `trigger` (input tokens; the API's minimum is 50,000)."""


class ClearToolUsesOptions(TokenizerOption, TriggerOptions):
    keep: int = Field(
        default=3, ge=0, description="Newest tool uses whose results are kept (`keep`)."
    )
    clear_at_least: int | None = Field(
        default=None,
        ge=1,
        description="Tokens that must be cleared for the edit to apply (`clear_at_least`; unset: "
        "any amount).",
    )
    exclude_tools: ToolNames = Field(
        default=(),
        description="Tools whose results are never cleared (`exclude_tools`); on the command line "
        "names separated by '|'.",
    )
    clear_tool_inputs: bool = Field(
        default=False,
        description="`clear_tool_inputs`: only false (the API's default) is modelled, since a "
        "call's input has no recoverable marker here.",
    )

    @field_validator("clear_tool_inputs")
    @classmethod
    def _inputs_kept(cls, value: bool) -> bool:
        if value:
            raise ValueError(
                "clear_tool_inputs=true is not modelled (a tool call's input has no recoverable "
                "marker in compactkit's context); only the API's default, false"
            )
        return value


class PeerAnthropicClear(Strategy):
    """Anthropic's tool-result clearing: while the full prompt is over `trigger` tokens (unset:
    100,000; what it keeps is counted in tool uses, so a given trigger changes nothing else), every
    tool result but those of the newest `keep` tool uses (and of `exclude_tools`) is replaced by
    a `[cleared; etag ...]` marker, oldest first; with `clear_at_least`, only when that many
    tokens go. No summary: nothing for a summarizer backend to write."""

    name = "peer-anthropic-clear"
    trigger_option: ClassVar[str | None] = "trigger"
    description = (
        "Anthropic's clear_tool_uses_20250919: over 100,000 tokens, clear all but 3 tool results."
    )
    Options = ClearToolUsesOptions
    options: ClearToolUsesOptions
    self_triggered: ClassVar[bool] = True
    """Applied by the API before every request (the bench calls it before every model call)."""
    keeps_pins: ClassVar[bool] = False
    """Measured as Anthropic ships it (see `PeerPolicy.keeps_pins`)."""

    def compact(self, ctx: AgentContext) -> AgentContext:
        opts = self.options
        counter = counter_for(opts.tokenizer)
        if full_prompt_tokens(ctx, counter) <= (opts.trigger or NATIVE_CLEAR_TRIGGER):
            return ctx
        found = list(results(ctx.messages))
        old = found[: max(len(found) - opts.keep, 0)]
        calls = calls_by_id(ctx)
        excluded = set(opts.exclude_tools)
        recovery = dict(ctx.recovery)
        replaced: Replacements = {}
        cleared = 0
        for i, j, result in old:
            call = calls.get(result.tool_call_id)
            if not editable(result) or (call is not None and call.name in excluded):
                continue
            new = masked(result, CLEARED, recovery)
            cleared += counter.block(result) - counter.block(new)
            replaced.setdefault(i, {})[j] = new
        if not replaced or (opts.clear_at_least is not None and cleared < opts.clear_at_least):
            return ctx
        return prune(ctx.replace(messages=apply(ctx.messages, replaced), recovery=recovery))


def full_prompt_tokens(ctx: AgentContext, counter: TokenCounter) -> int:
    """Tokens of the prompt the client sends: the API clears on its side, so the history the
    client holds has every result (this context with its cleared results put back)."""
    if not any(
        isinstance(part, MaskedBlock) for _, _, r in results(ctx.messages) for part in r.content
    ):
        return counter.context(ctx)
    return counter.context(expand(ctx))


class CompactOptions(PeerOptions):
    summary_max_tokens: int = Field(
        default=4_000,
        ge=32,
        description="Largest summary (Anthropic publishes none; the default pipeline's size).",
    )


class PeerAnthropicCompact(PeerPolicy):
    """Anthropic's server-side compaction: over `trigger` input tokens (unset: 150,000; the API
    refuses less than 50,000, the bench compares at any), everything (here: after the task, which
    compactkit's contract keeps) becomes one summary; nothing else is kept."""

    summary_instruction_tokens = 100
    """The summarizer's instruction: the default prompt the documentation publishes (about 480
    characters), after the transcript."""
    summary_shares_prefix = True

    name = "peer-anthropic-compact"
    description = "Anthropic's compact_20260112: over 150,000 tokens, all of it summarized."
    Options = CompactOptions
    options: CompactOptions

    def native_trigger(self) -> int:
        return NATIVE_COMPACT_TRIGGER

    def plan(self, ctx: AgentContext, start: int, counter: TokenCounter) -> Plan | None:
        if counter.context(ctx) <= self.at_trigger():
            return None
        return Plan(start, len(ctx.messages), self.options.summary_max_tokens)
