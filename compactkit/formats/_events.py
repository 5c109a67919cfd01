"""What the readers of event streams share (`codex exec --json`, Gemini CLI stream-json, Claude
Managed Agents, Qwen Code): a document is refused in one line unless the reader recognises it,
then its records are fed in order to a builder that makes the one conversation they hold."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any, Protocol

from ..context import AgentContext
from ..errors import BadInputError
from .base import Document, Format


class RecordBuilder(Protocol):
    """A conversation built a record at a time."""

    def add(self, record: Any) -> None: ...

    def context(self) -> AgentContext: ...


def refuse_unless(fmt: Format, doc: Document, what: str) -> None:
    """Raise `BadInputError` ("not `what`") when `fmt` does not recognise `doc`."""
    if not fmt.sniff(doc):
        raise BadInputError(f"not {what}", path=doc.path)


def built(
    fmt: Format,
    doc: Document,
    what: str,
    records: Callable[[Document], Iterable[Any]],
    builder: RecordBuilder,
) -> list[AgentContext]:
    """The one conversation `builder` makes of `records(doc)`, fed in order; a document `fmt`
    does not recognise is refused as not `what`."""
    refuse_unless(fmt, doc, what)
    for record in records(doc):
        builder.add(record)
    return [builder.context()]
