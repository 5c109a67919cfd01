"""The agent's own model writes the summary (`--summarizer upstream`), prepared before it is needed.

When a conversation's prompt passes `SHARE` of the trigger, the gateway asks the same upstream,
with the same model and the client's own credentials, for a summary, in the background (off the
request path): the summary request is the prompt it has just sent (system, tools, messages: the
provider's cached prefix) plus one user message, `INSTRUCTION`. It is sent once per compaction
cycle. Beside it the pipeline compacts the same prompt, in a worker thread (`Prepared.compacted`,
the extractive summary in its llm-summary marker). The request that crosses the trigger sends
that compaction followed by the messages since (or, when there is none yet or it no longer fits
the target, goes as it came while the history is at most `DEFERRAL` times the trigger, and one is
made for the next request; past that the pipeline runs in the request), and swaps the prepared
text in (`swap`): in the marker when it covers
every message the compaction replaced, else spliced, the messages the agent added since the
summary's prompt following it verbatim (or summarized extractively when they do not fit the
target), checked by the validator. The markers keep carrying the pinned words verbatim whatever
the summary says. Not ready, failed, malformed, or the history no longer begins with the
summary's prompt (rewound, rewritten): the extractive summary stays, and the conversation's
figures count it (`summary_fallbacks`).

Whether a compaction pays (the ledger of `compactkit.policy`) is decided apart: this module only
makes the better summary ready by the time one is made, and reports its cost (the provider's usage
of the summary call, `summary_usage`).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from ..context import AgentContext, Message, SummaryBlock, TextBlock, canonical_json, etag_of
from ..pins import with_rules
from ..recovery import message_marker, prune
from ..strategies.llm_summary import LlmSummary, message_count
from ..summarize.base import clip_tokens
from ..summarize.extractive import gather, render
from ..tokens import TokenCounter
from ..validate import validate
from .conversations import Usage
from .sse import usage_of_body

log = logging.getLogger("compactkit.gateway")

SummarizerName = Literal["auto", "upstream", "extractive"]
SUMMARIZERS: tuple[str, ...] = ("auto", "upstream", "extractive")
SHARE = 0.85
"""The share of the trigger at which the summary is prepared."""
DEFERRAL = 1.5
"""A compaction due while its summary's preparation has not begun, or its compaction is still
being made in the background, is put off to a later request while the history is at most this
share of the trigger (that request goes as it came, and the preparation starts or goes on);
past it the pipeline runs in the request. A request put off is never more than the client
sent: it goes upstream as it would without the gateway, only not smaller."""
MAX_SUMMARY_TOKENS = 4_000
"""The longest summary the model is asked for (and kept)."""
INSTRUCTION = (
    "Stop here and do not call any tool. The conversation above is about to be compacted: write "
    "the summary the rest of the work will continue from instead of the turns above. Use exactly "
    "these Markdown sections, each a '## ' heading with '- ' bullets ('- none' when empty):\n"
    "## Task - the task, with its acceptance criteria.\n"
    "## User constraints and corrections - every constraint, preference and correction the user "
    "gave, in the user's own words.\n"
    "## Files read - each path read, with what in it matters.\n"
    "## Files changed - each path created, edited or deleted, with exactly what changed.\n"
    "## Commands and outcomes - each command or tool call that mattered, with ok/error and the "
    "exit code.\n"
    "## Errors - errors still relevant (the exact line) and how they were resolved.\n"
    "## Decisions - what was decided and why.\n"
    "## Open items - what was being done last and what remains.\n"
    "Keep identifiers, paths, numbers and error messages exact; invent nothing. Answer with the "
    "summary only."
)


@dataclass
class Prepared:
    """A summary prepared for a conversation: pending until `text` or `failed` is set."""

    messages: tuple[Message, ...] = ()
    """The messages of the prompt it summarizes (sent as they are, with the instruction)."""
    text: str | None = None
    failed: str = ""
    usage: Usage = field(default_factory=Usage)
    over: tuple[Message, ...] = ()
    """The messages of the prompt `compacted` is made from: `messages` first, a later prompt
    when the compaction of those no longer fit with what came after them."""
    compacted: AgentContext | None = None
    """The pipeline's compaction of `over`, made in the background (None: not made yet, or the
    pipeline left the prompt as it was)."""
    settled: bool = False
    """The background compaction of `over` is over (`compacted` made, or not to be)."""
    wanted: bool = False
    """A compaction of a later prompt is asked for (by the request that sends it)."""
    spliced: tuple[int, int] = (0, 0)
    """What the last `swap` put after it: messages verbatim, messages summarized extractively
    (those of the window it did not cover)."""

    @property
    def ready(self) -> bool:
        return self.text is not None


def fingerprint(message: Message) -> str:
    """A message's content address (equal messages, equal prints, whoever read them)."""
    return etag_of(canonical_json(message.model_dump(mode="json")))


def summary_body(api: str, sent: dict[str, Any]) -> dict[str, Any]:
    """The summary request: the body `sent` upstream (its system, tools and messages as they
    were, so the provider reads them from its cache) plus the instruction, not streamed."""
    body = {k: v for k, v in sent.items() if k not in ("stream", "stream_options")}
    ask: dict[str, Any] = {"role": "user", "content": INSTRUCTION}
    if api == "openai-responses":
        body["input"] = [*body.get("input", []), {"type": "message", **ask}]
        body["store"] = False
    else:
        body["messages"] = [*body.get("messages", []), ask]
    if api == "anthropic":
        body["max_tokens"] = MAX_SUMMARY_TOKENS
    return body


def summary_text(api: str, data: bytes) -> str | None:
    """The summary in a (non-streamed) response; None when it holds none (a tool call, an
    empty or unreadable answer)."""
    try:
        answer = json.loads(data)
        if api == "anthropic":
            blocks = answer["content"]
            if any(b.get("type") == "tool_use" for b in blocks):
                return None
            text = "".join(b.get("text", "") for b in blocks if b.get("type") == "text")
        elif api == "openai-chat":
            message = answer["choices"][0]["message"]
            text = "" if message.get("tool_calls") else str(message.get("content") or "")
        else:
            text = "".join(
                c.get("text", "")
                for o in answer["output"]
                if o.get("type") == "message"
                for c in o.get("content", [])
                if c.get("type") == "output_text"
            )
    except (ValueError, KeyError, IndexError, TypeError, AttributeError):
        return None
    text = text.strip()
    return text if "## " in text else None  # no section at all: not the summary asked for


def read_answer(api: str, status: int, data: bytes, prepared: Prepared) -> None:
    """Fill `prepared` from the upstream's answer to the summary request."""
    usage = usage_of_body(api, data) if status < 400 else None
    if usage is not None:
        prepared.usage = usage
    text = summary_text(api, data) if status < 400 else None
    if text is None:
        prepared.failed = f"HTTP {status}" if status >= 400 else "malformed answer"
    else:
        prepared.text = text


LATER = "## Since the summary above (extractive)"
"""What heads the extractive summary of the turns after the prepared summary's prompt."""
LATER_TOKENS = 256
"""The fewest tokens that summary gets, however full the target is."""


def swap(
    before: AgentContext,
    after: AgentContext,
    prepared: Prepared | None,
    counter: TokenCounter,
    *,
    target: int,
    pins: Sequence[str] = (),
) -> tuple[AgentContext, str]:
    """`after` (the pipeline's compaction of `before`, within `target` tokens) with the prepared
    summary in its new llm-summary marker, and why not when it is not (the empty string:
    swapped). The marker's pinned words stay as they are.

    The summary covers the prompt it was asked over, messages [0, b) of `before`; the marker
    replaces the window [a, c). With c <= b it covers the window. With c > b (the agent worked
    on while it was written) it is spliced: a marker of [a, b) with the summary, then messages
    [b, c) verbatim when they fit `target`, else the pipeline's marker of [a, c) with the
    summary followed by the extractive summary of [b, c); either one checked by the validator.
    Only a prompt that is not how `before` begins (a rewound or rewritten history) is not used.
    `pins`: the pipeline's pin rules."""
    if prepared is None:
        return after, "not prepared"
    if not prepared.ready:
        return after, prepared.failed or "not ready"
    window = _window(before, after)
    if window is None:
        return after, "no summary marker"
    start, end = window
    covered = len(prepared.messages)
    if not begins(before.messages, prepared.messages):
        return after, "history diverged"
    if covered <= start:
        return after, "window moved"
    assert prepared.text is not None
    text = clip_tokens(prepared.text, MAX_SUMMARY_TOKENS, counter.tokenizer.count)
    prepared.spliced = (0, 0)
    if end <= covered:
        return _with_summary(after, start, text, "upstream"), ""
    ctx = with_rules(before, pins)
    spliced = _verbatim(ctx, after, start, covered, end, text)
    if spliced is not None and counter.context(spliced) <= target and not validate(spliced, ctx):
        prepared.spliced = (end - covered, 0)
        return spliced, ""
    merged = _with_summary(
        after, start, _later(ctx, after, start, covered, end, text, counter, target),
        "upstream+extractive",
    )  # fmt: skip
    if validate(merged, ctx):
        return after, "splice invalid"
    prepared.spliced = (0, end - covered)
    return merged, ""


def _window(before: AgentContext, after: AgentContext) -> tuple[int, int] | None:
    """(a, c): the window of `before` that the one new llm-summary marker of `after` replaced
    (the messages before it kept as they were, as many after it as the marker counts; another
    marker, sliding-window's, may follow it)."""
    known = {id(m) for m in before.messages}
    fresh = [i for i, m in enumerate(after.messages) if id(m) not in known]
    marked = [i for i in fresh if isinstance(message_marker(after.messages[i]), SummaryBlock)]
    if len(marked) != 1:
        return None
    start = marked[0]
    block = message_marker(after.messages[start])
    assert isinstance(block, SummaryBlock)
    if start > len(before.messages) or any(
        b.role != a.role for b, a in zip(before.messages[:start], after.messages, strict=False)
    ):
        return None
    want, counted, end = max(block.summarized_messages, 1), 0, start
    while end < len(before.messages) and counted < want:
        counted += message_count(before.messages[end])
        end += 1
    return (start, end) if counted == want else None


def begins(messages: Sequence[Message], prompt: Sequence[Message]) -> bool:
    """Whether `messages` begin with `prompt` (the same messages, or equal ones): the history
    still holds what a prepared summary covers."""
    return len(prompt) <= len(messages) and all(
        m is p or fingerprint(m) == fingerprint(p) for m, p in zip(messages, prompt, strict=False)
    )


def _with_summary(after: AgentContext, index: int, text: str, backend: str) -> AgentContext:
    """`after` with `text` in the summary block of its marker at `index`."""
    message = after.messages[index]
    content = tuple(
        b.model_copy(update={"text": text, "backend": backend})
        if isinstance(b, SummaryBlock)
        else b
        for b in message.content
    )
    messages = list(after.messages)
    messages[index] = message.model_copy(update={"content": content})
    return after.replace(messages=tuple(messages))


def _verbatim(
    ctx: AgentContext, after: AgentContext, start: int, covered: int, end: int, text: str
) -> AgentContext | None:
    """`after` with its marker of [start, end) replaced by a marker of [start, covered) holding
    `text` and the messages [covered, end) of `ctx` as they are (None: `covered` splits a call
    from its results)."""
    if ctx.messages[covered].role == "tool":
        return None
    made = LlmSummary().summarized(ctx, start, covered, text, "upstream")
    messages = (
        *after.messages[:start],
        made.messages[start],
        *ctx.messages[covered:end],
        *after.messages[start + 1 :],
    )
    recovery = {**ctx.recovery, **after.recovery, **made.recovery}
    return prune(after.replace(messages=messages, recovery=recovery))


def _later(
    ctx: AgentContext,
    after: AgentContext,
    start: int,
    covered: int,
    end: int,
    text: str,
    counter: TokenCounter,
    target: int,
) -> str:
    """`text`, then the extractive summary of messages [covered, end) of `ctx` in what is left
    of `target` (at least `LATER_TOKENS`), without the pinned words the marker carries."""
    block, *carried = after.messages[start].content
    assert isinstance(block, SummaryBlock)
    kept = tuple(b.text for b in carried if isinstance(b, TextBlock))
    room = target - counter.context(after) + counter.text(block.text) - counter.text(text)
    facts = gather(ctx.messages[covered:end], ctx.task, kept)
    count = counter.tokenizer.count
    rest = render(facts, max(room - counter.text(LATER) - 4, LATER_TOKENS), count, etag=block.etag)
    return f"{text}\n\n{LATER}\n{rest}"
