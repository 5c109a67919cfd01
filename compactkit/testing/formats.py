"""The conformance kit for format authors: `check_format(fmt, paths)` checks a format plugin the way
compactkit's own formats are checked, on the author's real session files.

```python
from compactkit.testing import check_format

def test_my_format_keeps_the_contract():
    assert check_format(MyFormat(), ["tests/sessions/one.json", "tests/sessions/two.json"]) == []
```

What a format must do is documented on `compactkit.Format`.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any, Literal, TypeAlias

from ..context import (
    ORIGIN_KEY,
    ORIGINS,
    AgentContext,
    Message,
    TextBlock,
    ToolCallBlock,
    ToolResultBlock,
)
from ..formats.base import Document, Format, parse_text, read_document
from ..formats.export import NotingWriter
from ..recovery import expand
from ..registry import Registry, current_registry
from ..validate import validate

__all__ = ["check_format", "foreign_samples", "pairing_problems"]

Source: TypeAlias = "str | Path | Document"
"""A session file: its path, or the `Document` already read from it."""


def pairing_problems(ctx: AgentContext) -> list[str]:
    """Tool results without an earlier call, results outside `tool` messages, repeated call ids,
    and calls left unanswered (except those of the last assistant message, which may be pending).
    Stricter than `validate`, which lets a result answer a call it does not follow directly."""
    problems: list[str] = []
    open_calls: dict[str, int] = {}
    answered: set[str] = set()
    for i, msg in enumerate(ctx.messages):
        for block in msg.content:
            if isinstance(block, ToolCallBlock):
                if block.id in open_calls or block.id in answered:
                    problems.append(f"message {i}: duplicate tool call id {block.id}")
                open_calls[block.id] = i
            elif isinstance(block, ToolResultBlock):
                if msg.role != "tool":
                    problems.append(f"message {i}: tool result in a {msg.role} message")
                if block.tool_call_id not in open_calls:
                    problems.append(f"message {i}: result for unknown call {block.tool_call_id}")
                else:
                    del open_calls[block.tool_call_id]
                    answered.add(block.tool_call_id)
    if open_calls:
        last_assistant = max(
            (i for i, m in enumerate(ctx.messages) if m.role == "assistant"), default=-1
        )
        for call_id, index in open_calls.items():
            if index != last_assistant:
                problems.append(f"message {index}: tool call {call_id} never answered")
    return problems


def _sample_context() -> AgentContext:
    """A small session with a system prompt, a task, a tool call and its result."""
    call = ToolCallBlock(id="call_1", name="bash", input={"command": "pytest -x"})
    result = ToolResultBlock(tool_call_id="call_1", content=(TextBlock(text="1 failed"),))
    return AgentContext(
        system_instruction="You are a coding agent.",
        messages=(
            Message(role="user", content=(TextBlock(text="Run the tests and fix what fails."),)),
            Message(role="assistant", content=(TextBlock(text="Running them."), call)),
            Message(role="tool", content=(result,)),
            Message(role="assistant", content=(TextBlock(text="Fixed the failing test."),)),
        ),
    )


def _write(fmt: Format, contexts: Sequence[AgentContext]) -> str:
    # a noting writer's `dump` logs what it drops; `export` returns the same text quietly
    if isinstance(fmt, NotingWriter):
        return fmt.export(contexts).text
    text: str = fmt.dump(contexts)
    return text


def foreign_samples(fmt: Format, registry: Registry | None = None) -> list[Document]:
    """A small session written by every other format of `registry` that writes (compactkit's
    native JSON, openai-chat, anthropic-messages, ...): files `fmt` must not claim."""
    registry = registry or current_registry()
    sample = _sample_context()
    out: list[Document] = []
    for name, other in registry.formats.items():
        if other.can_write and name != fmt.name:
            out.append(parse_text(_write(other, [sample]), f"<{name} sample>"))
    return out


def _document(source: Source) -> Document:
    return source if isinstance(source, Document) else read_document(source)


def _label(doc: Document) -> str:
    return Path(doc.path).name or doc.path


def _sniffs(fmt: Format, doc: Document) -> bool | str:
    try:
        return bool(fmt.sniff(doc))
    except Exception as exc:  # the contract: sniff never raises
        return f"sniff raised {type(exc).__name__}: {exc}".splitlines()[0]


def _validity(ctx: AgentContext) -> list[str]:
    return [
        *(f"invalid: {v}" for v in validate(ctx)),
        *(f"pairing: {p}" for p in pairing_problems(ctx)),
    ]


def first_difference(a: Any, b: Any, where: str = "") -> str | None:
    """Where two JSON values first differ, as a path such as `messages[3].content[1].text`
    (None when they are equal)."""
    if type(a) is not type(b):
        return where or "the value"
    if isinstance(a, dict):
        for key in sorted(set(a) | set(b)):
            if key not in a or key not in b:
                return f"{where}.{key}" if where else str(key)
            found = first_difference(a[key], b[key], f"{where}.{key}" if where else str(key))
            if found:
                return found
        return None
    if isinstance(a, list):
        for i, (x, y) in enumerate(zip(a, b, strict=False)):
            found = first_difference(x, y, f"{where}[{i}]")
            if found:
                return found
        return f"{where} (length {len(a)} vs {len(b)})" if len(a) != len(b) else None
    return None if a == b else (where or "the value")


def _differs(a: AgentContext, b: AgentContext) -> str:
    return first_difference(a.to_native(), b.to_native()) or "the value"


def _outranked(fmt: Format, doc: Document, registry: Registry) -> bool:
    """Whether a format of higher priority claims `doc` too, so that detection never picks `fmt`
    (a generic format, such as openai-chat, may match what a specific one reads)."""
    return any(
        other.name != fmt.name and other.priority > fmt.priority and _sniffs(other, doc) is True
        for _, other in registry.formats.items()
    )


def _context_problems(fmt: Format, ctx: AgentContext, stores_contexts: bool) -> list[str]:
    problems: list[str] = []
    source = ctx.metadata.get("source_format")
    if stores_contexts and not (isinstance(source, str) and source):
        problems.append("metadata has no source_format")
    elif not stores_contexts and source != fmt.name:
        problems.append(f"metadata source_format is {source!r}, not {fmt.name!r}")
    problems.extend(_validity(ctx))
    if AgentContext.from_native(json.loads(ctx.to_json())) != ctx:
        problems.append("does not round-trip through the native JSON")
    if expand(ctx) != ctx:
        problems.append("expand(ctx) != ctx: a loaded session holds markers or recovery entries")
    if ctx.first_user_index is None:
        problems.append("has no task (no user message)")
    elif not any(m.is_human for m in ctx.messages) and not fmt.prompt_optional:
        problems.append("has no message in the human's words (every user message has an origin)")
    for i, msg in enumerate(ctx.messages):
        origin = msg.metadata.get(ORIGIN_KEY)
        if origin is not None and (msg.role != "user" or origin not in ORIGINS):
            problems.append(
                f"message {i}: origin {origin!r} on a {msg.role} message "
                f"(user messages only, one of {', '.join(ORIGINS)})"
            )
    return problems


def _round_trip_problems(
    fmt: Format, ctx: AgentContext, exact: bool
) -> tuple[list[str], AgentContext | None]:
    """Problems of writing `ctx` and reading it back, and what was read back."""
    try:
        text = _write(fmt, [ctx])
        back = fmt.load(parse_text(text, f"<{fmt.name} export>"))
    except Exception as exc:  # a writer or reader that crashes is reported, not raised
        return [f"export / re-import failed: {type(exc).__name__}: {exc}".splitlines()[0]], None
    if len(back) != 1:
        return [f"one context written, {len(back)} read back"], None
    again = back[0]
    if exact and again != ctx:
        return [f"load(dump(ctx)) != ctx at {_differs(ctx, again)}"], again
    return [], again


def check_format(
    fmt: Format,
    paths: Iterable[Source],
    *,
    others: Iterable[Source] = (),
    writes: bool | Literal["exact"] | None = None,
    registry: Registry | None = None,
) -> list[str]:
    """Every way `fmt` breaks the format contract (see `compactkit.Format`) on its own session
    files `paths` (empty when it keeps it), each problem prefixed with the file and conversation:

    - `sniff` claims every file of `paths`, never raises, and claims none of `others` (files of
      other formats) nor of `foreign_samples` (a session written by every other writer in
      `registry`, default the current one), unless a format of higher priority in `registry`
      claims that file too (detection then never picks `fmt` for it);
    - `load` gives at least one context per file, each with `source_format` set to `fmt.name`,
      valid (`compactkit.validate`) and paired (`pairing_problems`), round-tripping through the
      native JSON, a fixed point of `expand` (nothing in a loaded session is a marker), with a
      task (`first_user_index`) and a message in the human's words (unless `fmt.prompt_optional`:
      output that never holds its prompt), and `origin` only on user
      messages and only one of `ORIGINS`;
    - where it writes (`writes`, default `fmt.can_write`): each context written with `dump` and
      read back with `load` gives one context, valid and paired, and writing and reading that
      again gives it unchanged (a writer may lose what its format cannot hold, once).
      `writes="exact"` is for a format that stores contexts as they are (compactkit's native
      JSON): `load(dump(ctx)) == ctx` outright, and `source_format` may be the one the context
      was saved with.
    """
    problems: list[str] = []
    writes = fmt.can_write if writes is None else writes
    if writes and not fmt.can_write:
        problems.append(f"{fmt.name}: writes={writes!r} but can_write is False")
        writes = False
    if not fmt.name or not fmt.description:
        problems.append(f"{fmt!r}: a format needs a name and a description")
    own = [_document(p) for p in paths]
    if not own:
        problems.append(f"{fmt.name}: no files of its own to check")
    registry = registry or current_registry()
    for doc in [*(_document(p) for p in others), *foreign_samples(fmt, registry)]:
        claimed = _sniffs(fmt, doc)
        if claimed is True and not _outranked(fmt, doc, registry):
            problems.append(f"{_label(doc)}: sniff claims another format's file")
        elif isinstance(claimed, str):
            problems.append(f"{_label(doc)}: {claimed}")
    for doc in own:
        where = _label(doc)
        claimed = _sniffs(fmt, doc)
        if claimed is not True:
            problems.append(f"{where}: {claimed or 'sniff does not recognise it'}")
        try:
            contexts = fmt.load(doc)
        except Exception as exc:
            problems.append(f"{where}: load raised {type(exc).__name__}: {exc}".splitlines()[0])
            continue
        if not contexts:
            problems.append(f"{where}: load found no conversation")
        for n, ctx in enumerate(contexts):
            found = _context_problems(fmt, ctx, stores_contexts=writes == "exact")
            if writes:
                trip, again = _round_trip_problems(fmt, ctx, exact=writes == "exact")
                found.extend(trip)
                if again is not None and not trip:
                    found.extend(f"read back: {p}" for p in _validity(again))
                    twice, third = _round_trip_problems(fmt, again, exact=False)
                    found.extend(f"second round trip: {p}" for p in twice)
                    if third is not None and third != again:
                        found.append(
                            "export / re-import is not stable: the second trip differs at "
                            + _differs(again, third)
                        )
            problems.extend(f"{where}#{n}: {p}" for p in found)
    return problems
