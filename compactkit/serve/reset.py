"""Reset by compaction: what a compaction takes from the model is forgotten by the serve state of
the same session, so a marker never points at content the model no longer has.

A tool result the model holds is known by content: the etag of its text (what `text_etag` gives
the payload a serve sent in full) and, for a JSON object, the etag of each top-level field (what
a partial serve sends: the changed fields on one line, then one marker per unchanged field). So
what a compaction removed is `lost_etags(before, after)`: every such etag `before` shows and
`after` does not. What the compacted context still shows stays served; a result removed while an
identical copy stays is not lost. `ServedSession(store, name).forget(before, after)` resets those
etags in a store (the same `--state` file `compactkit mcp-proxy` serves from).
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..context import AgentContext, TextBlock, ToolResultBlock, canonical_json
from ..errors import ConfigError
from ..strategies.etag_collapse import field_etag
from .state import text_etag
from .store import ServeStore, SqliteServeStore

_CACHE = "_compactkit_served_etags"


def held_etags(ctx: AgentContext) -> frozenset[str]:
    """The serve etags whose content `ctx` shows the model: of every tool result that is text,
    the etag of its text and of each top-level field of a JSON object it shows (the whole text,
    or the first line of a partial serve). Serve markers hold no content and give none."""
    out: set[str] = set()
    for msg in ctx.messages:
        for block in msg.content:
            if isinstance(block, ToolResultBlock):
                out.update(result_etags(block))
    return frozenset(out)


def lost_etags(before: AgentContext, after: AgentContext) -> frozenset[str]:
    """The serve etags `before` shows the model and `after` does not: what a compaction (or any
    change of the context sent) took from it."""
    return held_etags(before) - held_etags(after)


def result_etags(block: ToolResultBlock) -> frozenset[str]:
    """`held_etags` of one tool result (cached on the block, which never changes). A result that
    is a JSON object gives those of each of its string fields too: a client that shows the model
    a tool's structured content (Claude Code does) sends `{"result": TEXT}` for a served TEXT."""
    cached = block.__dict__.get(_CACHE)
    if cached is not None:
        return cached  # type: ignore[no-any-return]  # set below, always a frozenset
    out: frozenset[str] = frozenset()
    parts = block.content
    if parts and all(isinstance(p, TextBlock) for p in parts) and not block.is_error:
        obj, out = _text_etags(block.text)
        for value in (obj or {}).values():
            if isinstance(value, str):
                out |= _text_etags(value)[1]
    # frozen models forbid attribute assignment, not a cache entry in their instance dict
    block.__dict__[_CACHE] = out
    return out


def _text_etags(text: str) -> tuple[dict[str, Any] | None, frozenset[str]]:
    """(the JSON object `text` is, unless a serve marker; the etags of what `text` shows)."""
    obj, marker = _json_of(text)
    if marker:
        return None, frozenset()
    fields = obj if obj is not None and len(obj) >= 2 else _carried(text)
    etags = {field_etag(k, canonical_json(v)) for k, v in (fields or {}).items()}
    return obj, frozenset({text_etag(text), *etags})


def _json_of(text: str) -> tuple[dict[str, Any] | None, bool]:
    """(the JSON object `text` is, or None; whether it is a serve marker)."""
    stripped = text.strip()
    if not (stripped.startswith("{") and stripped.endswith("}")):
        return None, False
    try:
        value = json.loads(stripped)
    except ValueError:
        return None, False
    if not isinstance(value, dict):
        return None, False
    return value, _is_marker(value)


def _is_marker(value: dict[str, Any]) -> bool:
    return value.get("unchanged") is True and isinstance(value.get("etag"), str)


def _carried(text: str) -> dict[str, Any] | None:
    """The changed fields a partial serve shows: a JSON object on the first line, then field
    markers only, one per line."""
    first, _, rest = text.partition("\n")
    if not rest:
        return None
    for line in rest.split("\n"):
        value, marker = _json_of(line)
        if value is None or not marker or "field" not in value:
            return None
    obj, marker = _json_of(first)
    return None if marker else obj


@dataclass(frozen=True)
class ServedSession:
    """One session of a serve store, as the compacting side sees it: `forget(before, after)`
    resets what the change from `before` to `after` took from the model."""

    store: ServeStore
    name: str

    def forget(self, before: AgentContext, after: AgentContext) -> frozenset[str]:
        """Reset the etags `before` shows and `after` does not; returns them."""
        lost = lost_etags(before, after) if after is not before else frozenset()
        if lost:
            self.store.reset(self.name, lost)
        return lost

    def forget_etags(self, etags: Iterable[str]) -> None:
        """Reset these etags (when the caller computed the loss itself)."""
        lost = frozenset(etags)
        if lost:
            self.store.reset(self.name, lost)


def served_session(
    state: ServeStore | str | Path | None, session: str | None
) -> ServedSession | None:
    """The `ServedSession` of a `serve_state` (a store, or the path of a SQLite serve-state file
    such as `compactkit mcp-proxy --state` names) and a `serve_session` name; None when neither
    is given. One without the other is a `ConfigError`."""
    if state is None and session is None:
        return None
    if state is None or not session:
        raise ConfigError(
            "serve_state and serve_session go together: the serve-state store (or its file) and "
            "the session name its tool server serves under"
        )
    store = SqliteServeStore(state) if isinstance(state, str | Path) else state
    return ServedSession(store, session)


__all__ = ["ServedSession", "held_etags", "lost_etags", "result_etags", "served_session"]
