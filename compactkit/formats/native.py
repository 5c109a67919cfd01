"""compactkit's own context JSON: `{"format": "compactkit.context/1", ...}` as JSON, or one per
JSONL line.

Upstream: this package (`AgentContext.to_native` / `from_native`; the JSON Schema in
`docs/context.schema.json`). Each record already is a context, so there is nothing to map, no
pairing to repair and no `_Builder`: `load(dump(x)) == x` exactly, metadata and recovery store
included.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from pydantic import ValidationError

from ..context import NATIVE_FORMAT_TAG, AgentContext
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
        return bool(doc.data) and all(_is_native(r) for r in doc.data)

    def load(self, doc: Document) -> list[AgentContext]:
        values = [doc.data] if doc.kind == "json" else list(doc.data)
        out = []
        for number, value in enumerate(values):
            try:
                if not isinstance(value, dict):
                    raise ValueError("not a JSON object")
                out.append(AgentContext.from_native(value))
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


# --------------------------------------------------------------------------- helpers


def _is_native(value: Any) -> bool:
    return isinstance(value, dict) and value.get("format") == NATIVE_FORMAT_TAG


__all__ = ["NativeFormat"]
