"""`ServeState`: what a tool server already served in one session, as a plain value.

The first serve of a payload is full; a repeat of the same payload under the same key is one
`CollapsedBlock` (`{path, etag, unchanged}`, rendered by `compactkit.context.marker_text` exactly as
etag-collapse's markers are). A JSON-object payload is tracked per top-level field: a change in one
field resends that field only (an `ElidedBlock` carrier holding the changed fields, then one
`CollapsedBlock(field=KEY)` per unchanged field, as etag-collapse writes them), so fields that never
change go once per session. Etags are the ones etag-collapse and the recovery store use: a payload's
etag is `payload_etag` of its one text part, a field's is `field_etag(key, value)`.

The value never changes: `serve` returns a `Served` holding the new state. A compaction event
(`after_compaction`) or an explicit `reset` forgets what the model may no longer see.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from ..context import (
    CollapsedBlock,
    ContentPart,
    ElidedBlock,
    TextBlock,
    ToolCallBlock,
    canonical_json,
    marker_text,
)
from ..events import Event, StrategyApplied
from ..strategies.etag_collapse import field_etag, json_object
from ..toolcall import PATH_KEYS, input_dict, path_arg, path_in, payload_path

SERVE_STATE_TAG = "compactkit.serve/1"

_orjson: Any
try:  # the JSON escaping of a long text is most of an etag's cost: orjson's is many times faster
    import orjson as _orjson
except ImportError:  # pragma: no cover - the stdlib's gives the same bytes
    _orjson = None


def serve_key(tool: str, arguments: Any) -> tuple[str, str | None]:
    """(key, path) of a tool call: the tool and the file it names where it names one (the same
    reading as etag-collapse, `compactkit.toolcall.payload_path`) with any other arguments, else the
    tool and its arguments."""
    path = path_in(arguments) if isinstance(arguments, dict) else None
    if path:  # a file named in an argument (`view_arguments`, without building the call)
        others = {k: v for k, v in arguments.items() if k not in PATH_KEYS}
    else:
        path = payload_path(ToolCallBlock(id="serve", name=tool, input=arguments))
        if not path:
            return "call\x1f" + tool + "\x1f" + canonical_json(arguments), None
        others = {}  # a file a shell command names: the command is all its arguments
    view = "\x1f" + canonical_json(others) if others else ""
    return "path\x1f" + tool + "\x1f" + path + view, path


def view_arguments(call: ToolCallBlock) -> dict[str, Any]:
    """The arguments besides the file's name of a call that names a file in an argument (a line
    range, a head/tail count: they choose what of the file it shows); none for a shell command."""
    if path_arg(call) is None:
        return {}
    return {k: v for k, v in input_dict(call).items() if k not in PATH_KEYS}


def text_etag(payload: str) -> str:
    """The etag of a text payload: what etag-collapse and the recovery store call a tool result
    whose content is this one text part (`payload_etag`: the sha256 of the canonical JSON of that
    part, hashed here from the text's JSON string directly)."""
    digest = hashlib.sha256(b'[{"text":')
    digest.update(_json_string(payload))
    digest.update(b',"type":"text"}]')
    return digest.hexdigest()[:16]


def _json_string(text: str) -> bytes:
    """`text` as a JSON string, UTF-8, escaped exactly as `canonical_json` escapes it."""
    if _orjson is not None:
        try:
            return bytes(_orjson.dumps(text))
        except TypeError:  # a lone surrogate: the stdlib's escaping, whose encoding refuses it
            pass
    return json.dumps(text, ensure_ascii=False).encode("utf-8")


class _Value(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class ServedField(_Value):
    """One top-level field of a JSON payload, as last served."""

    etag: str
    call: int = Field(description="The call that last sent this field's value.")


class ServedPayload(_Value):
    """What was last served under one key."""

    etag: str
    call: int = Field(description="The call that last sent this payload (in full or its changes).")
    path: str | None = None
    fields: dict[str, ServedField] = Field(default_factory=dict)


class ServeState(_Value):
    """Per-session serve state: a frozen, JSON-serializable value (`model_dump_json` /
    `ServeState.model_validate_json`).

        >>> state = ServeState()
        >>> first = state.serve("a.py", "print('hello')\\n" * 20)
        >>> again = first.state.serve("a.py", "print('hello')\\n" * 20)
        >>> first.full, again.full
        (True, False)
        >>> again.text.startswith('{"etag":')
        True
    """

    format: str = SERVE_STATE_TAG
    calls: int = Field(default=0, description="Serves so far (markers name calls by number).")
    served: dict[str, ServedPayload] = Field(default_factory=dict)

    @property
    def etags(self) -> frozenset[str]:
        """Every etag the model holds: whole payloads and fields (what a client may echo back)."""
        out = {p.etag for p in self.served.values()}
        out.update(f.etag for p in self.served.values() for f in p.fields.values())
        return frozenset(out)

    def serve(
        self,
        key: str,
        payload: str,
        *,
        path: str | None = None,
        refresh: bool = False,
        skip: bool | Iterable[str] = False,
        known: Iterable[str] = (),
        again: str = "",
    ) -> Served:
        """Serve `payload` under `key` (see `serve_key`): full the first time, a marker while it is
        unchanged, only the changed fields of a JSON object.

        `refresh` resends everything. `skip=True` omits the whole payload and `skip=[FIELD, ...]`
        those fields of a JSON object: the caller already holds them, so they are recorded as
        served. `known` are etags the client says the model holds (a restarted server honours
        them). `again` is appended to marker labels: how the model gets the content back.
        """
        call = self.calls + 1
        etag = text_etag(payload)
        text = TextBlock(text=payload)
        starts = payload[:1]  # only what may be a JSON object is parsed as one
        obj = json_object((text,)) if starts == "{" or starts.isspace() else None
        fields = (
            {k: field_etag(k, canonical_json(v)) for k, v in obj.items()}
            if obj is not None and len(obj) >= 2
            else {}
        )
        prev = None if refresh else self.served.get(key)
        known_set = frozenset(() if refresh else known)
        parts: tuple[ContentPart, ...] = (text,)
        sent_fields = set(fields)
        if skip is True:
            parts, sent_fields = (), set()
        elif (prev is not None and prev.etag == etag) or etag in known_set:
            since = prev.call if prev is not None and prev.etag == etag else None
            marker = CollapsedBlock(
                etag=etag, path=path, unchanged=True, label=_label(since, again)
            )
            if len(marker_text(marker)) < len(payload):
                parts, sent_fields = (marker,), set()
        elif obj is not None and fields:
            skipped = set() if isinstance(skip, bool) else set(skip)
            split = _split(obj, fields, prev, known_set, skipped, etag, path, again)
            if split is not None and sum(len(_shown(p)) for p in split[0]) < len(payload):
                parts, sent_fields = split
        full = len(parts) == 1 and isinstance(parts[0], TextBlock)
        entry = ServedPayload(
            etag=etag,
            call=call if full or sent_fields or prev is None else prev.call,
            path=path,
            fields={
                k: ServedField(
                    etag=e,
                    call=call
                    if k in sent_fields or prev is None or k not in prev.fields
                    else prev.fields[k].call,
                )
                for k, e in fields.items()
            },
        )
        state = ServeState(format=self.format, calls=call, served={**self.served, key: entry})
        return Served(state, parts, full, etag, dict(fields), call)

    def reset(self, etags: Iterable[str] | None = None) -> ServeState:
        """Forget everything (`etags=None`), or every payload whose etag or one of whose field
        etags is in `etags`: the next serve of it is full."""
        if etags is None:
            return self.model_copy(update={"served": {}})
        gone = set(etags)
        kept = {
            key: p
            for key, p in self.served.items()
            if p.etag not in gone and not any(f.etag in gone for f in p.fields.values())
        }
        return self if len(kept) == len(self.served) else self.model_copy(update={"served": kept})

    def after_compaction(self, event: Event) -> ServeState:
        """The state once a compaction event says what the model lost: a strategy that removed
        messages, or changed one without leaving a marker, may have dropped anything, so all is
        forgotten; one that replaced payloads by markers loses exactly those etags."""
        lost = compaction_loss(event)
        return self if lost is False else self.reset(lost)


def compaction_loss(event: Event) -> frozenset[str] | Literal[False] | None:
    """What a compaction event takes from the model: False (nothing), None (anything: a strategy
    removed messages, or changed one without leaving a marker) or the etags it replaced by
    markers."""
    if not isinstance(event, StrategyApplied) or not event.changes:
        return False
    if any(c.action == "removed" for c in event.changes) or not event.elided:
        return None
    return frozenset(event.elided)


@dataclass(frozen=True)
class Served:
    """What one `ServeState.serve` gives back."""

    state: ServeState
    """The state after this serve."""
    parts: tuple[ContentPart, ...]
    """What to send: the payload (one `TextBlock`), a `CollapsedBlock`, or a carrier of the changed
    fields followed by field markers; empty when skipped."""
    full: bool
    etag: str
    """The payload's etag (the client may echo it back as known)."""
    fields: Mapping[str, str]
    """Field -> etag, for a JSON-object payload of at least two fields."""
    call: int

    @property
    def text(self) -> str:
        """What the model is shown: the parts' text, one per line (markers as `marker_text`)."""
        return "\n".join(_shown(p) for p in self.parts)


def _shown(part: ContentPart) -> str:
    return part.text if isinstance(part, TextBlock) else marker_text(part)  # type: ignore[arg-type]


def _label(since: int | None, again: str) -> str:
    said = f"same as the result of call {since}" if since else "same as the content with this etag"
    return f"{said}; {again}" if again else said


def _split(
    obj: dict[str, Any],
    fields: Mapping[str, str],
    prev: ServedPayload | None,
    known: frozenset[str],
    skipped: set[str],
    etag: str,
    path: str | None,
    again: str,
) -> tuple[tuple[ContentPart, ...], set[str]] | None:
    """(carrier and field markers, fields sent) of a JSON payload some of whose fields the model
    holds; None when it holds none of them."""
    markers: list[CollapsedBlock] = []
    kept: dict[str, Any] = {}
    for key, value in obj.items():
        held = prev.fields.get(key) if prev is not None else None
        if key in skipped:
            continue
        if (held is not None and held.etag == fields[key]) or fields[key] in known:
            since = held.call if held is not None and held.etag == fields[key] else None
            marker = CollapsedBlock(
                etag=fields[key], path=path, field=key, unchanged=True, label=_label(since, again)
            )
            if len(marker_text(marker)) < len(json.dumps({key: value}, ensure_ascii=False)):
                markers.append(marker)
                continue
        kept[key] = value
    if not markers and not skipped:
        return None
    since = prev.call if prev is not None else None
    ref = f"the result of call {since}" if since else "content the model holds"
    carrier = ElidedBlock(
        etag=etag,
        ref=ref,
        text=json.dumps(kept, ensure_ascii=False),
        label=f"fields changed since {ref}",
    )
    return (carrier, *markers), set(kept)
