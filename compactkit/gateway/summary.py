"""The agent's own model writes the summary (`--summarizer upstream`), prepared before it is needed.

When a conversation's prompt passes `SHARE` of the trigger, the gateway asks the same upstream,
with the same model and the client's own credentials, for a summary, in the background (off the
request path): the summary request is the prompt it has just sent (system, tools, messages: the
provider's cached prefix) plus one user message, `INSTRUCTION`. It is sent once per compaction
cycle. The request that crosses the trigger runs the pipeline as always (the extractive summary in
the llm-summary marker) and swaps the prepared text in when it covers every message the
compaction replaced; the marker keeps carrying the pinned words verbatim whatever the summary
says. Not ready, failed, malformed, or the window moved past what it covers: the extractive
summary stays, and the conversation's figures count it (`summary_fallbacks`).

Whether a compaction pays (the ledger of `compactkit.policy`) is decided apart: this module only
makes the better summary ready by the time one is made, and reports its cost (the provider's usage
of the summary call, `summary_usage`).
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass, field
from typing import Any, Literal

from ..context import AgentContext, Message, SummaryBlock, canonical_json, etag_of
from ..summarize.base import clip_tokens
from ..tokens import TokenCounter
from .conversations import Usage
from .sse import usage_of_body

log = logging.getLogger("compactkit.gateway")

SummarizerName = Literal["auto", "upstream", "extractive"]
SUMMARIZERS: tuple[str, ...] = ("auto", "upstream", "extractive")
SHARE = 0.85
"""The share of the trigger at which the summary is prepared."""
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

    covered: frozenset[str]
    """Fingerprints of the messages of the prompt it summarizes."""
    text: str | None = None
    failed: str = ""
    usage: Usage = field(default_factory=Usage)

    @property
    def ready(self) -> bool:
        return self.text is not None


def fingerprint(message: Message) -> str:
    """A message's content address (equal messages, equal prints, whoever read them)."""
    return etag_of(canonical_json(message.model_dump(mode="json")))


def covering(ctx: AgentContext) -> frozenset[str]:
    return frozenset(map(fingerprint, ctx.messages))


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


def swap(
    before: AgentContext,
    after: AgentContext,
    prepared: Prepared | None,
    counter: TokenCounter,
) -> tuple[AgentContext, str]:
    """`after` (a compaction of `before`) with the prepared summary in its new llm-summary
    marker, and why not when it is not (the empty string: swapped). The marker's pinned words
    stay as they are."""
    if prepared is None:
        return after, "not prepared"
    if not prepared.ready:
        return after, prepared.failed or "not ready"
    kept = {id(m) for m in after.messages}
    replaced = [m for m in before.messages if id(m) not in kept]
    known = {id(m) for m in before.messages}
    fresh = [i for i, m in enumerate(after.messages) if id(m) not in known]
    markers = [
        i for i in fresh if any(isinstance(b, SummaryBlock) for b in after.messages[i].content)
    ]
    if len(markers) != 1:
        return after, "no summary marker"
    if not {fingerprint(m) for m in replaced} <= prepared.covered:
        return after, "window moved"
    assert prepared.text is not None
    text = clip_tokens(prepared.text, MAX_SUMMARY_TOKENS, counter.tokenizer.count)
    index = markers[0]
    message = after.messages[index]
    content = tuple(
        b.model_copy(update={"text": text, "backend": "upstream"})
        if isinstance(b, SummaryBlock)
        else b
        for b in message.content
    )
    messages = list(after.messages)
    messages[index] = message.model_copy(update={"content": content})
    return after.replace(messages=tuple(messages)), ""
