"""peer-codex: Codex CLI's inline auto-compact (at 90% of the context window the history becomes
the user messages, newest first within 20,000 tokens, followed by the summary).

Read from openai/codex: codex-rs/core/src/compact.rs (commit 0100b103: COMPACT_USER_MESSAGE_MAX_TOKENS,
collect_user_messages, build_compacted_history_with_limit), codex-rs/protocol/src/openai_models.rs
(commit 0d4367d0: auto_compact_token_limit = context_window * 9 / 10 unless
model_auto_compact_token_limit is set) and codex-rs/core/models.json (commit 21dac7d7:
context_window 272,000 for the gpt-5 codex models).
"""

from __future__ import annotations

from pydantic import Field

from ...context import AgentContext
from ...recovery import flatten
from ...summarize.base import trim_middle
from ...tokens import TokenCounter
from ._base import PeerOptions, PeerPolicy, Plan

SUMMARY_PREFIX = (
    "Another language model worked on this task before you and left the summary below; the "
    "messages above are the user's. Build on the work already done instead of repeating it:"
)
"""Stands where Codex's summary_prefix.md does (a paraphrase of similar length)."""


class CodexOptions(PeerOptions):
    context_window: int = Field(
        default=272_000, ge=1_000, description="The model's context window (gpt-5 codex: 272,000)."
    )
    auto_compact_token_limit: int | None = Field(
        default=None,
        ge=1,
        description="model_auto_compact_token_limit (unset: 90% of the context window; a set "
        "value can only lower it).",
    )
    user_message_tokens: int = Field(
        default=20_000,
        ge=0,
        description="COMPACT_USER_MESSAGE_MAX_TOKENS: user messages kept, newest first (the one "
        "that does not fit is cut in the middle).",
    )
    summary_max_tokens: int = Field(
        default=4_000,
        ge=32,
        description="Largest summary (Codex sets none; the default pipeline's size).",
    )

    @property
    def limit(self) -> int:
        ninety = self.context_window * 9 // 10
        if self.auto_compact_token_limit is None:
            return ninety
        return min(self.auto_compact_token_limit, ninety)


class PeerCodex(PeerPolicy):
    """Codex's auto-compact: over 90% of the window, everything after the initial context is
    replaced by the user's own messages (newest first, within `user_message_tokens`) and the
    summary; assistant turns and tool output are dropped (and stay recoverable here). At a given
    `trigger`, the user messages' budget is the same share of it as of the native limit."""

    summary_instruction_tokens = 90
    """The summarizer's instruction: `codex-rs/core/templates/compact/prompt.md` (450 characters),
    sent after the history."""
    summary_shares_prefix = True

    name = "peer-codex"
    description = "Codex's auto-compact: at 90% of the window, user messages + summary."
    Options = CodexOptions
    options: CodexOptions

    def native_trigger(self) -> int:
        return self.options.limit

    def plan(self, ctx: AgentContext, start: int, counter: TokenCounter) -> Plan | None:
        if counter.context(ctx) <= self.at_trigger():
            return None
        return Plan(start, len(ctx.messages), self.options.summary_max_tokens)

    def dress(self, summary: str, ctx: AgentContext, plan: Plan, counter: TokenCounter) -> str:
        kept = self.user_messages(ctx, plan, counter)
        return "\n\n".join([*kept, f"{SUMMARY_PREFIX}\n{summary}"])

    def user_messages(self, ctx: AgentContext, plan: Plan, counter: TokenCounter) -> list[str]:
        """The user's own messages in the window (earlier compactions expanded: Codex still had
        the ones it kept), newest first within the budget left after the task."""
        window = flatten(ctx.messages[plan.start : plan.end], ctx.recovery)
        texts = [m.text for m in window if m.is_human and m.text.strip()]
        remaining = self.share(self.options.user_message_tokens) - counter.text(ctx.task)
        selected: list[str] = []
        for text in reversed(texts):
            if remaining <= 0:
                break
            size = counter.text(text)
            if size <= remaining:
                selected.append(text)
                remaining -= size
            else:
                selected.append(trim_middle(text, remaining, counter.text, size))
                break
        return selected[::-1]
