"""llm-summary: Replace a window of old turns with one summary message."""

from __future__ import annotations

import logging
from typing import Literal

from pydantic import Field

from ..context import (
    AgentContext,
    CollapsedBlock,
    Message,
    OmittedBlock,
    SummaryBlock,
    TextBlock,
)
from ..errors import CompactkitError, ConfigError, PluginError, StrategyError, redact
from ..pins import pinned
from ..recovery import flatten, message_marker, prune, put, result_etag
from ..strategy import Strategy
from ..summarize.base import (
    CACHE,
    USER_MESSAGE_CHARS,
    Summarizer,
    SummaryRequest,
    clip_tokens,
)
from ..tokens import TokenCounter
from ._common import (
    TokenizerOption,
    counter_for,
    full_payload,
    head_end,
    restore_orphaned_collapses,
    units,
)

MARKER_META = "llm-summary"
MIN_SUMMARY_TOKENS = 32
"""A summary is never cut below this, even when the budget has no room left for it."""

log = logging.getLogger("compactkit.summarize")


class SummarizerOptions(TokenizerOption):
    """Options of every strategy whose summary text a summarizer backend writes (llm-summary and
    the peer policies): which backend, how it is called, what it is shown."""

    backend: str = Field(
        default="extractive",
        min_length=1,
        description="Summarizer backend: 'extractive' (offline, deterministic), 'openai', "
        "'anthropic', or any name a plugin registers through register_summarizers.",
    )
    model: str | None = Field(
        default=None,
        description="Model the backend asks for (unset: the backend's default; the extractive "
        "backend ignores it).",
    )
    base_url: str | None = Field(
        default=None,
        description="API base URL for the openai/anthropic backends (unset: the SDK's default; "
        "any OpenAI-compatible server works for 'openai').",
    )
    timeout: float = Field(
        default=60.0, gt=0, description="Seconds a backend call may take before it fails."
    )
    fallback: Literal["error", "extractive"] = Field(
        default="error",
        description="What happens when a backend call fails (timeout, HTTP 429/5xx, malformed "
        "reply): 'error' raises StrategyError, 'extractive' uses the extractive summary.",
    )
    max_input_tokens: int = Field(
        default=30_000,
        ge=64,
        description="Largest transcript sent to a backend; long texts and tool outputs lose "
        "their middle to fit.",
    )
    user_message_chars: int = Field(
        default=USER_MESSAGE_CHARS,
        ge=1,
        description="Characters of each message in the user's own words the summary keeps "
        "verbatim; a longer one is cut there with a note (the whole message stays in the recovery "
        "store). Every user message is kept: when they do not all fit, each is cut shorter.",
    )


class LlmSummaryOptions(SummarizerOptions):
    keep_last: int = Field(
        default=6,
        ge=0,
        description="Newest turns (an assistant turn with its tool results, or one message) kept "
        "verbatim after the summary.",
    )
    max_tokens: int | None = Field(
        default=None,
        ge=1,
        description="Token budget (defaults to --budget): a context that fits is left alone, and "
        "the summary is cut so the output fits. Unset: always summarize the window.",
    )
    summary_max_tokens: int = Field(
        default=1_500,
        ge=MIN_SUMMARY_TOKENS,
        description="Largest summary; a longer answer is truncated (and with max_tokens, the "
        "limit shrinks so the output fits the budget).",
    )
    fill: bool = Field(
        default=False,
        description="With max_tokens: keep as many of the newest turns verbatim as fit beside "
        "the summary (keep_last is then the fewest kept), so the output uses the budget instead "
        "of ending far below it (what `compactkit run --budget` does).",
    )


class LlmSummary(Strategy):
    """Replace the turns between the task and the last `keep_last` turns with ONE user message
    holding a `summary` marker, followed verbatim by the window's pinned words (the user's
    messages and their words inside tool results, what a pin rule names). The replaced messages
    stay recoverable (`expand` puts them back); an earlier summary inside the window is summarized
    along with the rest, and a window that is only an earlier summary is left alone, so running it
    again changes nothing."""

    name = "llm-summary"
    description = "Replace a window of old turns with one summary message."
    Options = LlmSummaryOptions
    budget_option = "max_tokens"
    options: LlmSummaryOptions

    def compact(self, ctx: AgentContext) -> AgentContext:
        opts = self.options
        counter = counter_for(opts.tokenizer)
        budget = opts.max_tokens
        before = counter.context(ctx) if budget is not None else 0
        if budget is not None and before <= budget:
            return ctx
        span = self.window(ctx, shrinkable=budget is not None)
        if span is None:
            return ctx
        start, end = span
        # room kept for the summary when fitting a budget: newest turns give way before the summary
        # shrinks, so the task's constraints, files and errors survive compaction after compaction
        reserve = (
            min(opts.summary_max_tokens, max(budget // 4, MIN_SUMMARY_TOKENS))
            if budget is not None
            else MIN_SUMMARY_TOKENS
        )
        if budget is not None:
            if opts.fill:
                end = self._filled_end(ctx, start, end, budget, counter, reserve)
            end = self._fitting_end(ctx, start, end, budget, counter, reserve)
            if self._nothing_new(ctx, start, end):
                return ctx
        skeleton = self._skeleton(ctx, start, end)
        if budget is not None:
            # keep fewer of the newest turns (never fewer than one) when that many leave no room
            # for a summary within the budget
            while (
                counter.context(skeleton) + reserve > budget
                and (shorter := self._shorter(ctx, start, end)) is not None
            ):
                end = shorter
                skeleton = self._skeleton(ctx, start, end)
        cap = opts.summary_max_tokens
        if budget is not None:
            room = budget - counter.context(skeleton) - 1
            # a summary squeezed below its reserve would lose the constraints and files for good,
            # and buys nothing when the newest turn alone is over the budget
            cap = max(min(cap, room), reserve)
        stored, *carried = skeleton.messages[start].content
        assert isinstance(stored, SummaryBlock)
        kept = tuple(b.text for b in carried if isinstance(b, TextBlock))
        raw, backend = self._summarize(ctx, ctx.messages[start:end], start, cap, stored.etag, kept)
        text = clip_tokens(raw, cap, counter.tokenizer.count)
        out = self._with_text(skeleton, start, text, backend)
        if budget is not None:
            for _ in range(3):  # token merges at the seams: shave what is still over
                over = counter.context(out) - budget
                size = counter.text(text)
                if over <= 0 or size <= reserve:
                    break
                cap = max(size - over - 1, reserve)
                text = clip_tokens(raw, cap, counter.tokenizer.count)
                out = self._with_text(skeleton, start, text, backend)
            if counter.context(out) >= before:
                return ctx  # a summary no smaller than what it replaces gains nothing
        return prune(out)

    # ----------------------------------------------------------------- the window

    def window(self, ctx: AgentContext, shrinkable: bool = False) -> tuple[int, int] | None:
        """(start, end) of the messages to summarize, or None when there is nothing to do: the
        span between the protected head and the last `keep_last` units, whole units only.

        `shrinkable`: the caller may keep fewer units to fit a budget, so a span that is empty
        under `keep_last` is returned (start == end) as long as more than one unit follows the head.
        """
        messages = ctx.messages
        start = head_end(ctx)
        while start < len(messages) and messages[start].role == "tool":
            start += 1  # results whose calls sit in the head stay with them
        rest = units(messages[start:])
        count = len(rest) - self.options.keep_last
        if count <= 0:
            if not shrinkable or len(rest) <= 1:
                return None
            return start, start
        end = _past_results(messages, start + rest[count - 1].end)
        if self._nothing_new(ctx, start, end):
            return None
        return start, end

    @staticmethod
    def _nothing_new(ctx: AgentContext, start: int, end: int) -> bool:
        """True for an empty window, or one that is only an earlier summary or omitted marker."""
        return end <= start or (
            end - start == 1 and message_marker(ctx.messages[start]) is not None
        )

    def _fitting_end(
        self,
        ctx: AgentContext,
        start: int,
        end: int,
        budget: int,
        counter: TokenCounter,
        reserve: int = MIN_SUMMARY_TOKENS,
    ) -> int:
        """The window end that keeps as many of the newest units (at most `keep_last`, at least
        one) as leave room for a summary within `budget`, by the raw message sizes."""
        messages = ctx.messages
        sizes = counter.messages(messages)
        fixed = self._head_tokens(ctx, start, end, sizes, counter) + reserve
        tail = units(messages[end:])
        used = 0
        for kept, unit in enumerate(reversed(tail)):
            used += sum(sizes[end + unit.start : end + unit.end])
            if fixed + used > budget:
                # keep the units after this one; the newest stays even when it alone is too big
                cut = unit.end if kept else unit.start
                return _past_results(messages, end + cut)
        return end

    def _head_tokens(
        self, ctx: AgentContext, start: int, end: int, sizes: list[int], counter: TokenCounter
    ) -> int:
        """Tokens before the window's kept turns: the preamble, the head, an empty summary."""
        probe = self._marker(SummaryBlock(text="", etag="0" * 16, summarized_messages=end - start))
        return counter.preamble(ctx) + sum(sizes[:start]) + counter.message(probe)

    def _filled_end(
        self,
        ctx: AgentContext,
        start: int,
        end: int,
        budget: int,
        counter: TokenCounter,
        reserve: int,
    ) -> int:
        """The earliest window end (at most `end`) whose newest units, kept verbatim after a
        summary of `reserve` tokens and the pinned words it carries, still fit `budget`."""
        messages = ctx.messages
        sizes = counter.messages(messages)
        carried = sum(counter.text(b.text) for b in pinned(ctx).carry(messages[start:end]))
        used = self._head_tokens(ctx, start, end, sizes, counter)
        used += reserve + carried + sum(sizes[end:])
        best = end
        for unit in reversed(units(messages[start:end])):
            used += sum(sizes[start + unit.start : start + unit.end])
            if used > budget:
                break
            best = start + unit.start
        return _past_results(messages, best)

    def _shorter(self, ctx: AgentContext, start: int, end: int) -> int | None:
        """The window end that keeps one unit fewer after it (None: only one unit is left)."""
        tail = units(ctx.messages[end:])
        if len(tail) <= 1:
            return None
        return _past_results(ctx.messages, end + tail[0].end)

    def summarized(
        self, ctx: AgentContext, start: int, end: int, text: str, backend: str
    ) -> AgentContext:
        """`ctx` with messages[start:end] replaced by one summary marker holding `text` (as it
        is) and the window's pinned words, the window stored for `expand`: what `compact` makes
        of that window with a summary written elsewhere (the gateway's upstream summary)."""
        return self._with_text(self._skeleton(ctx, start, end), start, text, backend)

    def _skeleton(self, ctx: AgentContext, start: int, end: int) -> AgentContext:
        """The output with an empty summary in place of messages[start:end]: the window stored,
        collapsed markers that lose their full copy expanded back."""
        window = ctx.messages[start:end]
        recovery = dict(ctx.recovery)
        etag = put(recovery, flatten(window, ctx.recovery))
        _keep_collapsed_recoverable(ctx, start, end, recovery)
        replaced = sum(message_count(m) for m in window)
        block = SummaryBlock(text="", etag=etag, summarized_messages=replaced)
        carried = pinned(ctx).carry(window)
        return restore_orphaned_collapses(
            ctx.replace(
                messages=(*ctx.messages[:start], self._marker(block, carried), *ctx.messages[end:]),
                recovery=recovery,
            )
        )

    # ----------------------------------------------------------------- summarizing

    def _marker(self, block: SummaryBlock, carried: tuple[TextBlock, ...] = ()) -> Message:
        """The summary message: the summary, then the window's pinned words verbatim."""
        return Message(
            role="user", content=(block, *carried), metadata={"compactkit_marker": MARKER_META}
        )

    def _with_text(
        self, skeleton: AgentContext, index: int, text: str, backend: str
    ) -> AgentContext:
        """The skeleton with the summary text (already within its limit) filled in."""
        old, *carried = skeleton.messages[index].content
        assert isinstance(old, SummaryBlock)
        block = old.model_copy(update={"text": text, "backend": backend})
        messages = list(skeleton.messages)
        messages[index] = self._marker(block, tuple(b for b in carried if isinstance(b, TextBlock)))
        return skeleton.replace(messages=tuple(messages))

    def _summarize(
        self,
        ctx: AgentContext,
        window: tuple[Message, ...],
        start: int,
        cap: int,
        etag: str,
        kept: tuple[str, ...] = (),
    ) -> tuple[str, str]:
        opts = self.options
        request = SummaryRequest(
            messages=window,
            task=ctx.task,
            model=opts.model,
            base_url=opts.base_url,
            timeout=opts.timeout,
            max_input_tokens=opts.max_input_tokens,
            summary_max_tokens=cap,
            tokenizer=opts.tokenizer,
            first_index=start,
            user_message_chars=opts.user_message_chars,
            recovery_etag=etag,
            pinned=kept,
        )
        backend = get_summarizer(opts.backend)
        try:
            return summarize_cached(backend, request), backend.name
        except StrategyError as exc:
            if opts.fallback != "extractive" or backend.name == "extractive":
                raise
            log.warning("%s (used the extractive summary instead)", exc)
            fallback = get_summarizer("extractive")
            return fallback.summarize(request), fallback.name


def summarize_cached(backend: Summarizer, request: SummaryRequest) -> str:
    """`backend.summarize(request)`, remembered in-process under `backend.cache_key(request)`.

    Anything a backend raises other than a `CompactkitError` becomes a one-line `StrategyError`.
    """
    key = backend.cache_key(request)
    if key is not None:
        cached = CACHE.get(key)
        if cached is not None:
            return cached
    try:
        text = backend.summarize(request)
    except CompactkitError:
        raise
    except Exception as exc:
        raise StrategyError(
            redact(f"llm-summary backend {backend.name!r} raised {type(exc).__name__}: {exc}")
        ) from None
    if not isinstance(text, str):
        raise StrategyError(
            f"llm-summary backend {backend.name!r} returned {type(text).__name__}, not text"
        )
    if key is not None:
        CACHE.put(key, text)
    return text


_BUILTINS = ("extractive", "openai", "anthropic")


def _builtin(name: str) -> type[Summarizer] | None:
    if name == "extractive":
        from ..summarize.extractive import ExtractiveSummarizer

        return ExtractiveSummarizer
    if name == "openai":
        from ..summarize.openai_backend import OpenAISummarizer

        return OpenAISummarizer
    if name == "anthropic":
        from ..summarize.anthropic_backend import AnthropicSummarizer

        return AnthropicSummarizer
    return None


def get_summarizer(name: str) -> Summarizer:
    """The backend registered as `name` (a `ConfigError` listing the known ones when there is
    none). The built-in backends are found even in a registry built without them."""
    from ..registry import current_registry

    table = current_registry().summarizers
    try:
        found = table.get(name)
    except ConfigError:
        found = _builtin(name)
        if found is None:
            known = ", ".join(sorted({*table.names(), *_BUILTINS}))
            raise ConfigError(
                f"llm-summary: unknown backend {name!r} (known: {known}); set backend= to one of "
                "them or install the plugin that provides it"
            ) from None
    backend = found() if isinstance(found, type) else found
    if not callable(getattr(backend, "summarize", None)):
        raise PluginError(f"summarizer {name!r} has no summarize(request) method")
    if not isinstance(backend, Summarizer):
        raise PluginError(f"summarizer {name!r} is not a compactkit.summarize.Summarizer")
    return backend


def _past_results(messages: tuple[Message, ...], end: int) -> int:
    """`end` moved past tool messages (stray results of a call inside the window go with it)."""
    while end < len(messages) and messages[end].role == "tool":
        end += 1
    return end


def message_count(msg: Message) -> int:
    """How many original messages `msg` stands for."""
    marker = message_marker(msg)
    if isinstance(marker, SummaryBlock):
        return max(marker.summarized_messages, 1)
    if isinstance(marker, OmittedBlock):
        return max(marker.messages, 1)
    return 1


def _keep_collapsed_recoverable(
    ctx: AgentContext, start: int, end: int, recovery: dict[str, str]
) -> None:
    """A collapsed marker outside the window whose full copy is only inside it would dangle once
    the window goes: store that copy under the marker's etag (so the newest marker can be expanded
    back in its place)."""
    outside = {
        part.etag
        for i, msg in enumerate(ctx.messages)
        if not start <= i < end
        for block in msg.tool_results
        for part in block.content
        if isinstance(part, CollapsedBlock)
    }
    missing = outside - recovery.keys()
    if not missing:
        return
    for msg in ctx.messages[start:end]:
        for block in msg.tool_results:
            if full_payload(block) and result_etag(block) in missing:
                put(recovery, block.content)
