"""The default pipeline: cache-aware compaction in large steps.

Measured by `compactkit bench` (replay, persistent mode) on the corpus: compacting only when the history
crosses a threshold, and then in one large step (old turns summarized, the newest turns kept verbatim),
keeps the prompt prefix stable between compactions, so prompt caching keeps working. Strategies that
rewrite part of the prefix on every call (per-call observation masking) save tokens but lose the cache
and can cost more than no compaction at all. See docs/bench.md for the figures.
"""

from __future__ import annotations

DEFAULT_TRIGGER = 30_000
"""History size (tokens) above which the default pipeline compacts, when no budget is given."""

SUMMARY_TOKENS = 4_000
KEEP_LAST = 3
"""Newest turns the default keeps verbatim after its summary at a trigger: what the agent is in
the middle of. The peers that summarize keep none (Claude Code, Codex, Anthropic's compaction);
every turn kept is written to the cache again at each compaction and read on every call after."""


def default_pipeline(budget: int | None, *, fill: bool = False) -> list[str]:
    """Strategy specs of the default pipeline for a token budget.

    Without a budget only lossless, prefix-stable work is done (etag-collapse). With one, old turns
    are summarized in one step (the extractive backend: task, constraints, files, commands, errors,
    open items) and sliding-window guarantees the budget.

    `fill`: keep as many of the newest turns verbatim as fit beside the summary, so the output
    uses the budget (`compactkit run --budget N` ends between about 0.7 N and N). Without it the
    summary replaces all but the newest turns, so a compaction at a trigger goes far below its
    target and the next one is far away (what `Session`, the gateway and the bench do).
    """
    if budget is None:
        return ["etag-collapse"]
    summary = f"llm-summary:max_tokens={budget},summary_max_tokens={SUMMARY_TOKENS}"
    return [
        "etag-collapse",
        summary + (",fill=true" if fill else f",keep_last={KEEP_LAST}"),
        f"sliding-window:max_tokens={budget}",
    ]


ARRIVAL_PIPELINE = ["fold-json", "fold-listings", "fold-logs", "fold-repeats"]
"""The arrival stage of the default pipeline: folders run on each tool output as it is appended
(`Strategy.stage`), in this order (fold-repeats last: its `[same as lines A-B above]` numbers the
lines as finally shown). `default:arrival=off` is the default without them."""

ARRIVAL_BY_DEFAULT = False
"""Whether `default` includes `ARRIVAL_PIPELINE` when the spec does not say (`arrival=on|off`)."""
