"""Sessions out: contexts as the text of a format (`render`), with what writing dropped (`export`),
or written to a file atomically (`dump`)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from ..atomic import write_atomic
from ..context import AgentContext
from ..errors import ConfigError
from ..registry import Registry, current_registry
from .base import Format
from .export import Export, ExportNotes, NotingWriter, WriterOptions


def _writer(format: str, registry: Registry | None) -> Format:
    registry = registry or current_registry()
    fmt: Format = registry.formats.get(format)
    if not fmt.can_write:
        writers = ", ".join(n for n, f in registry.formats.items() if f.can_write)
        raise ConfigError(f"format {format!r} cannot be written (writers: {writers})")
    return fmt


def render(
    contexts: AgentContext | Sequence[AgentContext],
    format: str = "compactkit",
    registry: Registry | None = None,
) -> str:
    """File text for `contexts` in `format`."""
    items = [contexts] if isinstance(contexts, AgentContext) else list(contexts)
    text: str = _writer(format, registry).dump(items)
    return text


def export(
    contexts: AgentContext | Sequence[AgentContext],
    format: str,
    options: WriterOptions | None = None,
    registry: Registry | None = None,
) -> Export:
    """`contexts` written in `format` with what writing them dropped or changed (`Export.notes`;
    `Export.warning(format)` says it in one line): with `WriterOptions(request=True)` a provider
    format gives a request its API accepts."""
    fmt = _writer(format, registry)
    items = [contexts] if isinstance(contexts, AgentContext) else list(contexts)
    if isinstance(fmt, NotingWriter):
        return fmt.export(items, options)
    if options is not None and options != WriterOptions():
        raise ConfigError(f"format {format!r} takes no writer options (they are for providers)")
    return Export(text=fmt.dump(items), notes=ExportNotes())


def dump(
    contexts: AgentContext | Sequence[AgentContext],
    path: str | Path,
    *,
    format: str = "compactkit",
    registry: Registry | None = None,
) -> None:
    """Write `contexts` to `path` in `format`, atomically."""
    write_atomic(path, render(contexts, format, registry))
