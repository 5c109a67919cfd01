"""Options of the provider writers (anthropic-messages, openai-chat) and what they report.

Two uses, one option each way:

- a SAVED SESSION (`WriterOptions()`, the default): the context as it is, one written message per
  message, so that reading it back gives the same messages (`import(export(c)) == c` up to what
  the format cannot hold); a last tool call still waiting for its result stays pending;
- a REQUEST TO SEND (`WriterOptions(request=True)`, `compactkit convert --request`): what the
  provider's API accepts (see `provider_rules`): consecutive same-role turns merged where the
  provider requires it, a first user turn, call ids the API takes, and pending calls answered.

`pending` says what happens to a tool call with no result (only the last assistant message can
hold one once a context is loaded): `keep` it (a saved session), `drop` the call, or `answer` it
with a synthesized error result "[no result: the call was not run]". Unset, it is `keep` for a
saved session and `answer` for a request.

Everything a writer cannot carry (thinking, signatures, images, markers it writes as text, ...)
and everything it changes is counted in `ExportNotes`, which `warning()` turns into ONE line. The
writers back into the agents (`NotingWriter`: Claude Code, Codex, pi) count theirs the same way,
so that `compactkit convert` lists on stderr whatever its target cannot carry, whichever it is.
"""

from __future__ import annotations

import hashlib
import json
import logging
import re
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar, Literal

from ..context import (
    MARKER_TYPES,
    AgentContext,
    Block,
    Message,
    TextBlock,
    ToolCallBlock,
    ToolResultBlock,
)
from ..errors import ConfigError

Pending = Literal["keep", "drop", "answer"]
PENDING_CHOICES: tuple[Pending, ...] = ("keep", "drop", "answer")
NO_RESULT = "[no result: the call was not run]"
PLACEHOLDER_USER_TEXT = "(continuing the conversation below)"
"""The user turn a request gets when the context does not start with one (Anthropic requires it)."""


@dataclass(frozen=True)
class WriterOptions:
    """How a provider writer writes: a saved session (default) or a request to send."""

    request: bool = False
    pending: Pending | None = None
    model: str | None = None
    """A request's `model` (`request=True` only; unset, the body has none: the caller adds it)."""
    max_tokens: int | None = None
    """A request's output limit (`max_tokens`; openai-chat: `max_completion_tokens`)."""

    @property
    def pending_mode(self) -> Pending:
        """`pending`, or its default for the use: keep for a session, answer for a request."""
        if self.pending is not None:
            return self.pending
        return "answer" if self.request else "keep"


@dataclass
class ExportNotes:
    """What a writer dropped and what it changed, counted by kind (`"thinking blocks"` ...)."""

    dropped: Counter[str] = field(default_factory=Counter)
    changed: Counter[str] = field(default_factory=Counter)

    def drop(self, kind: str, n: int = 1) -> None:
        if n:
            self.dropped[kind] += n

    def change(self, kind: str, n: int = 1) -> None:
        if n:
            self.changed[kind] += n

    def warning(self, fmt: str) -> str | None:
        """One line naming every drop and change, e.g. `anthropic-messages export dropped 12
        thinking blocks, 3 images; changed: 4 consecutive turns merged`; None when there is nothing."""
        drops = ", ".join(f"{n} {kind}" for kind, n in self.dropped.most_common())
        changes = ", ".join(f"{n} {kind}" for kind, n in self.changed.most_common())
        if not drops and not changes:
            return None
        text = f"{fmt} export"
        if drops:
            text += f" dropped {drops}"
        if changes:
            text += ("; " if drops else " ") + f"changed: {changes}"
        return text


@dataclass(frozen=True)
class Export:
    """A writer's output: the file text and what writing it dropped or changed."""

    text: str
    notes: ExportNotes

    def warning(self, fmt: str) -> str | None:
        return self.notes.warning(fmt)


class NotingWriter:
    """A writer that counts, while it writes, what its format cannot carry and what it changes
    (mixin): `export` gives the text and those notes, `dump` the text alone (the notes logged as
    one warning). A writer back into an agent implements `write`; a provider writer is a
    `ProviderWriter`."""

    name: ClassVar[str] = ""

    def write(self, contexts: Sequence[AgentContext], notes: ExportNotes) -> str:
        raise NotImplementedError

    def dump(self, contexts: Sequence[AgentContext]) -> str:
        """A saved session (see `export`); drops are logged as one warning."""
        result = self.export(contexts)
        log_warning(result, self.name)
        return result.text

    def export(
        self, contexts: Sequence[AgentContext], options: WriterOptions | None = None
    ) -> Export:
        """File text for `contexts` and what writing them dropped or changed; `options` are for
        the provider formats and refused here."""
        if options is not None and options != WriterOptions():
            raise ConfigError(
                f"format {self.name!r} takes no writer options (they are for providers)"
            )
        notes = ExportNotes()
        return Export(self.write(contexts, notes), notes)


class ProviderWriter(NotingWriter):
    """A format whose writer takes `WriterOptions` and reports `ExportNotes` (mixin): it builds one
    request body per context (`request_body`) and says how a body is written (`body_text`)."""

    request_needs: ClassVar[tuple[str, ...]] = ("model",)
    """What a request must name for the API to take it (`model`, `max_tokens`)."""

    def serves(self, model: str) -> bool:
        """Whether this provider's API serves `model` (a session's recorded model is used for a
        request only then)."""
        return True

    def request_body(
        self, ctx: AgentContext, options: WriterOptions | None, notes: ExportNotes
    ) -> dict[str, Any]:
        raise NotImplementedError

    def body_text(self, body: dict[str, Any]) -> str:
        """One context's file text (several contexts are written one body per line)."""
        return json.dumps(body, ensure_ascii=False) + "\n"

    def export(
        self, contexts: Sequence[AgentContext], options: WriterOptions | None = None
    ) -> Export:
        """File text for `contexts` written with `options`, and what writing them dropped."""
        notes = ExportNotes()
        bodies = [self.request_body(c, options, notes) for c in contexts]
        if len(bodies) == 1:
            return Export(self.body_text(bodies[0]), notes)
        return Export("".join(json.dumps(b, ensure_ascii=False) + "\n" for b in bodies), notes)


def recorded_model(ctx: AgentContext) -> str | None:
    """The model the session records: the newest assistant message's, else the context's
    (`metadata["model"]`); None when there is none (`<synthetic>` and the like are no model)."""
    for m in reversed(ctx.messages):
        model = m.metadata.get("model") if m.role == "assistant" else None
        if isinstance(model, str) and model and not model.startswith("<"):
            return model
    model = ctx.metadata.get("model")
    return model if isinstance(model, str) and model and not model.startswith("<") else None


def recorded_max_tokens(ctx: AgentContext) -> int | None:
    """The output limit the session's request recorded (`metadata["max_tokens"]`), or None."""
    limit = ctx.metadata.get("max_tokens")
    return limit if isinstance(limit, int) and not isinstance(limit, bool) and limit > 0 else None


def request_settings(
    body: dict[str, Any], ctx: AgentContext, options: WriterOptions, limit_key: str
) -> dict[str, Any]:
    """`body` with its `model` and output limit (under `limit_key`) first: for a request, those
    `options` give; for a saved session, those the session records (so that they read back)."""
    if options.request:
        model, limit = options.model, options.max_tokens
    else:
        model, limit = recorded_model(ctx), recorded_max_tokens(ctx)
    head: dict[str, Any] = {}
    if model is not None:
        head["model"] = model
    if limit is not None:
        head[limit_key] = limit
    return head | body


def walk_blocks(ctx: AgentContext) -> list[Block]:
    """Every block of `ctx`, the parts of tool results included, in order."""
    out: list[Block] = []
    for m in ctx.messages:
        for b in m.content:
            out.append(b)
            if isinstance(b, ToolResultBlock):
                out.extend(b.content)
    return out


def note_agent_losses(
    ctx: AgentContext,
    notes: ExportNotes,
    *,
    system_prompt: bool,
    system_messages: bool,
    model_on_messages: bool,
) -> None:
    """What the agent formats do alike: markers written as the text a model is shown, message
    names dropped and, where the format has no place for them (`system_prompt`,
    `system_messages` False), the system prompt written as the first user message (the agent
    keeps its own outside the session) and system messages written as user messages; the
    session's model is dropped unless an assistant message carries it (`model_on_messages`)."""
    if ctx.system_instruction and not system_prompt:
        notes.change("system prompt written as a user message")
    notes.drop("markers written as text", sum(b.type in MARKER_TYPES for b in walk_blocks(ctx)))
    notes.drop("message names", sum(m.name is not None for m in ctx.messages))
    if not system_messages:
        notes.change(
            "system messages written as user messages",
            sum(m.role == "system" for m in ctx.messages),
        )
    carried = model_on_messages and any(
        m.role == "assistant" and m.metadata.get("model") == recorded_model(ctx)
        for m in ctx.messages
    )
    if recorded_model(ctx) is not None and not carried:
        notes.drop("session model")


# --------------------------------------------------------------------------- context-level steps


def unanswered_calls(ctx: AgentContext) -> list[str]:
    """Ids of tool calls no result in the context answers, in order."""
    answered = {r.tool_call_id for m in ctx.messages for r in m.tool_results}
    return [c.id for m in ctx.messages for c in m.tool_calls if c.id not in answered]


def settle_pending(ctx: AgentContext, pending: Pending, notes: ExportNotes) -> AgentContext:
    """`ctx` with its unanswered calls kept, dropped, or answered by a synthesized error result
    placed after the tool messages that follow the call's assistant message."""
    open_ids = set(unanswered_calls(ctx))
    if not open_ids or pending == "keep":
        return ctx
    out: list[Message] = []
    if pending == "drop":
        for m in ctx.messages:
            kept = tuple(
                b for b in m.content if not (isinstance(b, ToolCallBlock) and b.id in open_ids)
            )
            if kept or not m.content:
                out.append(
                    m if len(kept) == len(m.content) else m.model_copy(update={"content": kept})
                )
        notes.drop("pending tool calls", len(open_ids))
        return ctx.with_messages(out)
    messages = ctx.messages
    i = 0
    while i < len(messages):
        m = messages[i]
        out.append(m)
        i += 1
        waiting = [c for c in m.tool_calls if c.id in open_ids] if m.role == "assistant" else []
        if not waiting:
            continue
        # the synthesized results go after the tool messages already answering this message
        while i < len(messages) and messages[i].role == "tool":
            out.append(messages[i])
            i += 1
        for call in waiting:
            result = ToolResultBlock(
                tool_call_id=call.id, content=(TextBlock(text=NO_RESULT),), is_error=True
            )
            out.append(Message(role="tool", content=(result,), metadata={"synthesized": True}))
    notes.change("pending calls answered", len(open_ids))
    return ctx.with_messages(out)


def rewrite_call_ids(
    ctx: AgentContext, fits: Callable[[str], bool], notes: ExportNotes
) -> AgentContext:
    """`ctx` with every call id that `fits` refuses replaced (in calls and results alike) by one
    it takes: invalid characters become `_`, a long id becomes `call_` plus a hash of it."""
    ids = {c.id for m in ctx.messages for c in m.tool_calls}
    ids |= {r.tool_call_id for m in ctx.messages for r in m.tool_results}
    bad = sorted(i for i in ids if not fits(i))
    if not bad:
        return ctx
    taken = set(ids)
    mapping: dict[str, str] = {}
    for old in bad:
        new = re.sub(r"[^a-zA-Z0-9_-]", "_", old) or "call"
        if not fits(new):
            new = "call_" + hashlib.sha256(old.encode()).hexdigest()[:24]
        base, n = new, 1
        while new in taken:
            new, n = f"{base[:30]}_{n}", n + 1
        taken.add(new)
        mapping[old] = new
    messages = []
    for m in ctx.messages:
        if not any(isinstance(b, (ToolCallBlock, ToolResultBlock)) for b in m.content):
            messages.append(m)
            continue
        content = tuple(
            b.model_copy(update={"id": mapping.get(b.id, b.id)})
            if isinstance(b, ToolCallBlock)
            else b.model_copy(update={"tool_call_id": mapping.get(b.tool_call_id, b.tool_call_id)})
            if isinstance(b, ToolResultBlock)
            else b
            for b in m.content
        )
        messages.append(m.model_copy(update={"content": content}))
    notes.change("call ids rewritten", len(mapping))
    return ctx.with_messages(messages)


def log_warning(result: Export, fmt: str) -> None:
    """Log what writing `result` dropped or changed as one warning (logger `compactkit.formats`)."""
    line = result.warning(fmt)
    if line is not None:
        logging.getLogger("compactkit.formats").warning(line)


def prepare(
    ctx: AgentContext,
    options: WriterOptions,
    notes: ExportNotes,
    fits_id: Callable[[str], bool],
) -> AgentContext:
    """The context a writer writes: pending calls settled and, for a request, call ids the
    provider takes."""
    ctx = settle_pending(ctx, options.pending_mode, notes)
    if options.request:
        ctx = rewrite_call_ids(ctx, fits_id, notes)
    return ctx


__all__ = [
    "NO_RESULT",
    "PENDING_CHOICES",
    "PLACEHOLDER_USER_TEXT",
    "Export",
    "ExportNotes",
    "NotingWriter",
    "Pending",
    "ProviderWriter",
    "WriterOptions",
    "log_warning",
    "note_agent_losses",
    "prepare",
    "recorded_max_tokens",
    "recorded_model",
    "request_settings",
    "rewrite_call_ids",
    "settle_pending",
    "unanswered_calls",
    "walk_blocks",
]
