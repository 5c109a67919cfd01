"""compactkit's own context JSON: `{"format": "compactkit.context/1", ...}` as JSON, or one per
JSONL line.

Upstream: this package (`AgentContext.to_native` / `from_native`; the JSON Schema in
`docs/context.schema.json`). Each record already is a context, so there is nothing to map, no
pairing to repair and no context builder: `load(dump(x)) == x` exactly, metadata and recovery store
included.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Sequence
from typing import Any, TextIO

from pydantic import ValidationError

from ..context import NATIVE_FORMAT_TAG, AgentContext, Message
from ..errors import BadInputError
from .base import Document, Format


class NativeFormat(Format):
    name = "compactkit"
    description = "compactkit's own context JSON (one context per file, or one per JSONL line)"
    extension = ".json"
    priority = 100
    can_write = True

    def sniff(self, doc: Document) -> bool:
        if doc.kind == "json":
            return _is_native(doc.data)
        return doc.kind == "jsonl" and bool(doc.data) and all(_is_native(r) for r in doc.data)

    def load(self, doc: Document) -> list[AgentContext]:
        values = [doc.data] if doc.kind == "json" else list(doc.data)
        out = []
        for number, value in enumerate(values):
            try:
                if not isinstance(value, dict):
                    raise ValueError("not a JSON object")
                out.append(_context(doc, value))
            except (ValidationError, ValueError) as exc:
                first = str(exc).splitlines()[0]
                line = number + 1 if doc.kind == "jsonl" else None
                raise BadInputError(
                    f"invalid compactkit context: {first}", path=doc.path, line=line
                ) from None
        return out

    def dump(self, contexts: Sequence[AgentContext]) -> str:
        if len(contexts) == 1:
            return contexts[0].to_json(indent=1) + "\n"
        return "".join(json.dumps(c.to_native(), ensure_ascii=False) + "\n" for c in contexts)


def write_native(
    ctx: AgentContext,
    handle: TextIO,
    messages: Iterable[Message] | None = None,
    after: Callable[[], AgentContext] | None = None,
) -> None:
    """`NativeFormat().dump([ctx])`, the same text, written to `handle` a message at a time, so
    that no dump of the whole context and no string of the whole file is ever held.

    `messages` (default: `ctx.messages`) is read once, as it is written: a generator (`expand`
    restoring a message at a time) works. The fields after the messages are those of `after()`
    when given, called once every message is written (what `expand` knows only then)."""
    items = iter(ctx.messages if messages is None else messages)
    head = ctx.model_dump(mode="json", exclude_none=True, include={"system_instruction"})
    handle.write('{\n "format": ' + json.dumps(NATIVE_FORMAT_TAG))
    for key, value in head.items():
        handle.write(f",\n {json.dumps(key)}: " + _indented(value, 1))
    handle.write(',\n "messages": ')
    count = 0
    for message in items:
        dump = message.model_dump(mode="json", exclude_none=True)
        handle.write(("[" if count == 0 else ",") + "\n  " + _indented(dump, 2))
        count += 1
    handle.write("\n ]" if count else "[]")
    rest = (after() if after else ctx).model_copy(update={"messages": ()}).to_native()
    for key, value in rest.items():
        if key not in ("format", "system_instruction", "messages"):
            handle.write(f",\n {json.dumps(key)}: " + _indented(value, 1))
    handle.write("\n}\n")


# --------------------------------------------------------------------------- helpers


def _indented(value: Any, depth: int) -> str:
    """`value` as `json.dumps(..., indent=1)` writes it `depth` levels down (no newline of the
    text is in a string, where JSON escapes them)."""
    return json.dumps(value, ensure_ascii=False, indent=1).replace("\n", "\n" + " " * depth)


def _context(doc: Document, value: dict[str, Any]) -> AgentContext:
    """`AgentContext.from_native(value)`, its messages validated one at a time as `doc` lets go
    of them (`Document.take`). A message that is not valid is validated again in its place
    among the others (those before it valid, those after it still raw), so the error is that
    of the whole value."""
    raw = value.get("messages")
    if not isinstance(raw, list) or value.get("format") != NATIVE_FORMAT_TAG:
        return AgentContext.from_native(value)
    messages: list[Message] = []
    for item in doc.take(raw):
        try:
            messages.append(Message.model_validate(item))
        except ValidationError:
            rest = raw[len(messages) + 1 :]
            return AgentContext.from_native({**value, "messages": [*messages, item, *rest]})
    return AgentContext.from_native({**value, "messages": tuple(messages)})


def _is_native(value: Any) -> bool:
    return isinstance(value, dict) and value.get("format") == NATIVE_FORMAT_TAG


__all__ = ["NativeFormat", "write_native"]
