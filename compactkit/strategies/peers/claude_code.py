"""peer-claude-code: Claude Code's auto-compact (threshold = window - min(max output, 20,000) -
13,000; everything becomes one summary; up to 5 recently read files re-attached).

Claude Code's own source is not published. Read from a public copy of its TypeScript sources
(alankatanoisi/claude-code-analysis, src/services/compact/autoCompact.ts, commit 77d88eb6:
AUTOCOMPACT_BUFFER_TOKENS, MAX_OUTPUT_TOKENS_FOR_SUMMARY, getAutoCompactThreshold) and readers of
src/services/compact/compact.ts (POST_COMPACT_MAX_FILES_TO_RESTORE = 5, POST_COMPACT_TOKEN_BUDGET =
50,000, POST_COMPACT_MAX_TOKENS_PER_FILE = 5,000); see docs/bench.md for what was verified.
"""

from __future__ import annotations

from pydantic import Field

from ...context import AgentContext, ToolResultBlock
from ...summarize.base import clip_tokens
from ...tokens import TokenCounter
from ...toolcall import read_call
from .._common import full_payload
from ._base import PeerOptions, PeerPolicy, Plan


class ClaudeCodeOptions(PeerOptions):
    context_window: int = Field(
        default=200_000, ge=1_000, description="The model's context window (Claude: 200,000)."
    )
    summary_reserve: int = Field(
        default=20_000,
        ge=0,
        description="Tokens reserved for the summary's output: min(the model's max output, "
        "20,000) (MAX_OUTPUT_TOKENS_FOR_SUMMARY).",
    )
    buffer_tokens: int = Field(
        default=13_000, ge=0, description="AUTOCOMPACT_BUFFER_TOKENS below the effective window."
    )
    max_files: int = Field(
        default=5, ge=0, description="Recently read files re-attached after compaction."
    )
    file_tokens: int = Field(default=5_000, ge=1, description="Largest re-attached file.")
    files_budget: int = Field(
        default=50_000, ge=0, description="Tokens of all re-attached files together."
    )
    summary_max_tokens: int = Field(
        default=20_000, ge=32, description="Largest summary (the summary's output reserve)."
    )

    @property
    def threshold(self) -> int:
        return self.context_window - self.summary_reserve - self.buffer_tokens


class PeerClaudeCode(PeerPolicy):
    """Claude Code's auto-compact: over `context_window - summary_reserve - buffer_tokens` tokens
    (167,000 for a 200,000 window), the whole conversation becomes one summary, followed by the
    newest contents of up to `max_files` recently read files. At a given `trigger`, the files'
    and the summary's token limits are the same shares of it as of the native threshold."""

    summary_instruction_tokens = 1_200
    """The summarizer's instruction: an estimate: the compact prompt (`getCompactPrompt`) is not in
    the public copy read here."""
    summary_shares_prefix = True

    name = "peer-claude-code"
    description = "Claude Code's auto-compact: at window - 33,000 tokens, all of it summarized."
    Options = ClaudeCodeOptions
    options: ClaudeCodeOptions

    def native_trigger(self) -> int:
        return self.options.threshold

    def plan(self, ctx: AgentContext, start: int, counter: TokenCounter) -> Plan | None:
        if counter.context(ctx) <= self.at_trigger():
            return None
        return Plan(start, len(ctx.messages), self.share(self.options.summary_max_tokens, 32))

    def dress(self, summary: str, ctx: AgentContext, plan: Plan, counter: TokenCounter) -> str:
        files = self.reread_files(ctx, plan, counter)
        return "\n\n".join([summary, *files])

    def reread_files(self, ctx: AgentContext, plan: Plan, counter: TokenCounter) -> list[str]:
        """The newest read result of each of the `max_files` most recently read files, each cut to
        `file_tokens`, within `files_budget` (Claude Code re-reads them from disk; a replay has
        the session's last copy)."""
        opts = self.options
        calls: dict[str, str] = {}
        newest: dict[str, str] = {}
        for msg in ctx.messages[plan.start : plan.end]:
            for call in msg.tool_calls:
                facts = read_call(call)
                if facts.kind in ("read", "editor") and facts.read:
                    calls[call.id] = facts.read[0]
            for block in msg.tool_results:
                if block.tool_call_id in calls and _readable(block):
                    path = calls[block.tool_call_id]
                    newest.pop(path, None)  # re-inserted last: ordered by recency
                    newest[path] = block.text
        out: list[str] = []
        used = 0
        for path in list(reversed(newest))[: opts.max_files]:
            body = clip_tokens(newest[path], self.share(opts.file_tokens), counter.tokenizer.count)
            text = (
                f'Called the Read tool with the following input: {{"file_path": "{path}"}}\n{body}'
            )
            size = counter.text(text)
            if used + size > self.share(opts.files_budget):
                continue
            used += size
            out.append(text)
        return out


def _readable(block: ToolResultBlock) -> bool:
    """A read that returned the file (not an error, not already a marker)."""
    return full_payload(block) and not block.is_error and bool(block.text.strip())
