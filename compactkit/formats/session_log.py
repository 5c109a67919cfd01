"""compactkit's session log: the append-only JSONL a `compactkit.Session` writes while an agent runs.

Upstream: this package (`compactkit.Session.save` writes it, `Session.load` resumes from it). One
JSON object per line, each written whole with one `write` and fsync'd:

- `{"format": "compactkit.session/1", "kind": "start", "context": <native context>, "options":
  {...}}` first: the context the session started from (or had when it was saved) and its trigger,
  target, pipeline specs and tokenizer;
- `{"kind": "append", "messages": [<message>, ...]}`: messages the agent appended; when the
  pipeline's arrival stage changed them, also `"arrived": [<message>, ...]` (what the session holds
  instead, one per message) and `"recovery": {etag: payload}` (the entries it added);
- `{"kind": "compact", "context": <native context>, "recovery_removed": [etag, ...], ...}`: the
  context a compaction left, whose `recovery` holds only the entries it added (the others carry
  over from the state before it, less `recovery_removed`);
- `{"kind": "restore", "context": <native context>}`: the session went back to a snapshot.

Replaying the records gives two contexts: the **state** (what the session holds: compacted, with
its recovery store), which `Session.load` resumes from, and the **transcript** (every message the
agent appended, nothing compacted: the start context and each restored snapshot expanded back,
appended messages added), which this format loads, so that `compactkit inspect`, `run` and `bench`
see the session as it grew. The user's words are the agent's own user messages, kept as they were
appended; their metadata (origins included) is the agent's.

**Integrity.** Each record after the start one carries `"prev"`: the first 32 hex digits of the
SHA-256 of the previous line (its bytes, without the newline), so a line edited, removed,
duplicated or moved anywhere in the log breaks the chain at the next line, which loading names
(`BadInputError`, exit 2). `Session.close` ends the log with `{"kind": "end", "prev": ...,
"records": N}` (N: the records before it), so a log cut exactly at a line end has no end record
(or one whose count or chain does not match) and `Session.load` says so; a log still being written,
or whose writer was killed, has no end record either, and loads with a warning that its end cannot
be checked. `Session.load` removes the end record before it appends (the chain continues from the
record before it), so a log holds at most one, as its last line. A start record without
`"chain"` comes from an older compactkit: such a log loads as it is (with a warning that it cannot
be checked); records appended to it from then on are chained.

A torn last line (a crash during a write) is not part of the log: `Session.load` drops it with a
warning and truncates it away before appending again. This format reads a file as the CLI parses it,
so a log still holding a torn line is reported with its line number until a session resumes it.
Skipped (counted in `metadata["skipped_records"]`): records of a kind this version does not know.
"""

from __future__ import annotations

import hashlib
import json
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from pydantic import JsonValue, ValidationError

from ..context import AgentContext, Message
from ..errors import BadInputError
from ..recovery import expand
from ._util import SOURCE_FORMAT_KEY, note_skipped
from .base import Document, Format, require_single

LOG_FORMAT_TAG = "compactkit.session/1"
START, APPEND, COMPACT, RESTORE, END = "start", "append", "compact", "restore", "end"
CHAIN = "sha256/32"
"""How each record's `prev` is made: the first 32 hex digits of the SHA-256 of the previous line."""


class SessionLogFormat(Format):
    name = "compactkit-session"
    description = (
        "compactkit Session log (append-only JSONL; loads every message the agent appended)"
    )
    extension = ".jsonl"
    priority = 100
    malformed_lines = "skip-last"
    can_write = True

    def sniff(self, doc: Document) -> bool:
        try:
            return _is_start(_records(doc)[0])
        except Exception:
            return False

    def load(self, doc: Document) -> list[AgentContext]:
        records = _records(doc)
        if not records or not _is_start(records[0]):
            raise BadInputError(
                f"not a compactkit session log (expected a first line with format "
                f"{LOG_FORMAT_TAG!r} and kind 'start')",
                path=doc.path,
            )
        return [replay(records, doc.path).transcript]

    def dump(self, contexts: Sequence[AgentContext]) -> str:
        start = line(start_record(require_single(contexts, self.name), {}))
        return start + line(end_record(digest(start), 1))


# --------------------------------------------------------------------------- records -> contexts


@dataclass
class Replayed:
    """What a session log holds: the session's state and the transcript of what it appended."""

    state: AgentContext
    transcript: AgentContext
    options: dict[str, Any]
    records: int = 0
    compactions: int = 0
    chained: bool = True
    """Whether the log's records are chained from its start (False: an older compactkit's log)."""
    head: str = ""
    """The chain's head: what the next record's `prev` is."""
    ended: bool = False
    """Whether the log ends with its end record (it was closed)."""
    arrivals: list[tuple[list[Message], list[Message]]] = field(default_factory=list)
    """The messages appended since the last compaction (or restore) that the arrival stage
    changed: as given, and as they arrived."""
    settled: AgentContext = field(default_factory=AgentContext)
    """The state as the last compaction (or restore, or the start) left it."""


@dataclass
class _SessionLogContextBuilder:
    """Replays the records of one log, in order."""

    path: str
    state: AgentContext = field(default_factory=AgentContext)
    transcript: list[Message] = field(default_factory=list)
    base: AgentContext = field(default_factory=AgentContext)
    options: dict[str, Any] = field(default_factory=dict)
    skipped: Counter[str] = field(default_factory=Counter)
    records: int = 0
    compactions: int = 0
    chained: bool = False
    legacy: bool = False
    head: str = ""
    end_line: int = 0
    arrivals: list[tuple[list[Message], list[Message]]] = field(default_factory=list)
    settled: AgentContext = field(default_factory=AgentContext)

    def add(self, number: int, record: Any) -> None:
        if not isinstance(record, dict):
            raise BadInputError(
                "a session log line is not a JSON object", path=self.path, line=number
            )
        self.check_chain(number, record)
        kind = record.get("kind")
        try:
            if number == 1:
                self.start(record)
            elif kind == END:
                self.end(number, record)
                return
            elif kind == APPEND:
                self.append(record)
            elif kind == COMPACT:
                self.compact(record)
            elif kind == RESTORE:
                self.restore(record)
            else:
                self.skipped[str(kind)] += 1
                return
        except (ValidationError, ValueError, TypeError, KeyError) as exc:
            first = str(exc).splitlines()[0]
            raise BadInputError(
                f"invalid {kind} record: {first}", path=self.path, line=number
            ) from None
        self.records += 1

    def check_chain(self, number: int, record: dict[str, Any]) -> None:
        """Each record follows the one before it (from the first chained record on) and nothing
        follows the end record."""
        if self.end_line:
            raise self.broken(
                number,
                f"a record after the log's end (line {self.end_line}): two logs joined, or lines "
                "added by hand",
            )
        if number == 1:
            self.chained = record.get("chain") == CHAIN
            self.legacy = not self.chained
        elif self.chained or "prev" in record:
            if record.get("prev") != self.head:
                raise self.broken(
                    number,
                    f"the log's hash chain breaks here: this is not the record written after "
                    f"line {number - 1} (a line edited, removed, duplicated or moved)",
                )
            self.chained = True
        self.head = record_digest(record)

    def end(self, number: int, record: dict[str, Any]) -> None:
        if record.get("records") != number - 1:
            raise self.broken(
                number,
                f"the log's end record counts {record.get('records')!r} records, but "
                f"{number - 1} come before it (lines removed or added)",
            )
        self.end_line = number

    def broken(self, number: int, what: str) -> BadInputError:
        return BadInputError(
            what, path=self.path, line=number, hint="restore the log from a backup"
        )

    def start(self, record: dict[str, Any]) -> None:
        self.state = self.settled = AgentContext.from_native(record["context"])
        self.options = dict(record.get("options") or {})
        self.reset_transcript(self.state)

    def append(self, record: dict[str, Any]) -> None:
        messages = [Message.model_validate(m) for m in record["messages"]]
        arrived = record.get("arrived")
        if arrived is None:
            self.state = appended(self.state, messages)
        else:  # what the arrival stage made of them, with the entries it added
            added = record.get("recovery") or {}
            if not isinstance(added, dict) or len(arrived) != len(messages):
                raise ValueError("an arrived append must hold one message per message appended")
            if not all(isinstance(v, str) for v in added.values()):
                raise ValueError("recovery entries must be JSON strings")
            made = [Message.model_validate(m) for m in arrived]
            self.state = appended(self.state, made, added)
            self.arrivals.append((messages, made))
        self.transcript.extend(messages)

    def compact(self, record: dict[str, Any]) -> None:
        out = AgentContext.from_native(record["context"])
        removed = set(record.get("recovery_removed") or ())
        recovery = {k: v for k, v in self.state.recovery.items() if k not in removed}
        recovery.update(out.recovery)
        self.state = out.replace(recovery=recovery)
        self.compactions += 1
        self.arrivals, self.settled = [], self.state

    def restore(self, record: dict[str, Any]) -> None:
        self.state = AgentContext.from_native(record["context"])
        self.reset_transcript(self.state)
        self.arrivals, self.settled = [], self.state

    def reset_transcript(self, ctx: AgentContext) -> None:
        whole = expand(ctx) if ctx.recovery else ctx
        self.base = whole.replace(messages=(), recovery={})
        self.transcript = list(whole.messages)

    def result(self) -> Replayed:
        meta: dict[str, JsonValue] = dict(self.base.metadata)
        if not isinstance(meta.get(SOURCE_FORMAT_KEY), str):
            meta = {SOURCE_FORMAT_KEY: SessionLogFormat.name, **meta}
        note_skipped(meta, self.skipped)
        transcript = self.base.model_copy(
            update={"messages": tuple(self.transcript), "metadata": meta}
        )
        return Replayed(
            self.state,
            transcript,
            self.options,
            self.records,
            self.compactions,
            chained=not self.legacy,
            head=self.head,
            ended=bool(self.end_line),
            arrivals=self.arrivals,
            settled=self.settled,
        )


def replay(records: Sequence[Any], path: str) -> Replayed:
    """The state and transcript of a log's records (the first one its start record)."""
    builder = _SessionLogContextBuilder(path)
    for number, record in enumerate(records, start=1):
        builder.add(number, record)
    return builder.result()


# --------------------------------------------------------------------------- writing


def line(record: dict[str, Any]) -> str:
    """One log line: compact JSON and a newline."""
    return json.dumps(record, ensure_ascii=False, separators=(",", ":")) + "\n"


def digest(text: str) -> str:
    """What the record after the line `text` (its newline optional) carries as `prev`."""
    return hashlib.sha256(text.rstrip("\n").encode("utf-8")).hexdigest()[:32]


_ENCODE = json.JSONEncoder(ensure_ascii=False, separators=(",", ":")).encode
_PIECEWISE_DEPTH = 4
"""Levels of objects and arrays `record_digest` hashes member by member (a record's context, its
messages, each message, its blocks); what lies deeper is encoded whole."""


def record_digest(record: dict[str, Any]) -> str:
    """`digest(line(record))`, hashed a member at a time: a start record holding a whole session
    on one line is never encoded as one string (which takes four bytes a character when the
    session holds one emoji, beside the parsed record)."""
    hasher = hashlib.sha256()
    _hash_value(hasher, record, _PIECEWISE_DEPTH)
    return hasher.hexdigest()[:32]


def _hash_value(hasher: Any, value: Any, depth: int) -> None:
    """Feed `hasher` the UTF-8 of `json.dumps(value, ensure_ascii=False, separators=(",", ":"))`,
    objects and arrays `depth` levels down member by member (the same text: a member's encoding
    does not depend on what surrounds it)."""
    if depth > 0 and isinstance(value, dict) and all(isinstance(k, str) for k in value):
        hasher.update(b"{")
        for index, (key, member) in enumerate(value.items()):
            hasher.update((("," if index else "") + _ENCODE(key) + ":").encode("utf-8"))
            _hash_value(hasher, member, depth - 1)
        hasher.update(b"}")
    elif depth > 0 and isinstance(value, list):
        hasher.update(b"[")
        for index, member in enumerate(value):
            if index:
                hasher.update(b",")
            _hash_value(hasher, member, depth - 1)
        hasher.update(b"]")
    else:
        hasher.update(_ENCODE(value).encode("utf-8"))


def chained(record: dict[str, Any], head: str) -> tuple[str, str]:
    """The line of `record` following the record whose digest is `head` (`""`: the start
    record, which follows nothing), and the new head."""
    text = line({**record, "prev": head} if head else record)
    return text, digest(text)


def start_record(ctx: AgentContext, options: dict[str, Any]) -> dict[str, Any]:
    return {
        "format": LOG_FORMAT_TAG,
        "kind": START,
        "chain": CHAIN,
        "context": ctx.to_native(),
        "options": options,
    }


def end_record(head: str, records: int) -> dict[str, Any]:
    """The last line of a closed log: the chain's head and how many records come before it."""
    return {"kind": END, "prev": head, "records": records}


def append_record(
    messages: Sequence[Message],
    before: AgentContext | None = None,
    arrived: AgentContext | None = None,
) -> dict[str, Any]:
    """The record of `messages` appended to `before`; `arrived` is what the pipeline's arrival
    stage made of it, kept (the messages that differ, from the first one, and the recovery
    entries added) when it changed something, so the log resumes as the session was."""
    record: dict[str, Any] = {
        "kind": APPEND,
        "messages": [m.model_dump(mode="json", exclude_none=True) for m in messages],
    }
    if before is None or arrived is None:
        return record
    start = len(before.messages)
    tail = arrived.messages[start:]
    if all(a is b or a == b for a, b in zip(tail, messages, strict=True)):
        return record
    old = before.recovery
    record["arrived"] = [m.model_dump(mode="json", exclude_none=True) for m in tail]
    record["recovery"] = {k: v for k, v in arrived.recovery.items() if k not in old}
    return record


def compact_record(before: AgentContext, after: AgentContext, **figures: Any) -> dict[str, Any]:
    native = after.to_native()
    native["recovery"] = {k: v for k, v in after.recovery.items() if before.recovery.get(k) != v}
    removed = [k for k in before.recovery if k not in after.recovery]
    return {"kind": COMPACT, "context": native, "recovery_removed": removed, **figures}


def restore_record(ctx: AgentContext) -> dict[str, Any]:
    return {"kind": RESTORE, "context": ctx.to_native()}


def appended(
    ctx: AgentContext, messages: Sequence[Message], added: dict[str, str] | None = None
) -> AgentContext:
    """`ctx` with `messages` (already validated) appended, without revalidating the others;
    `added`: recovery entries to add."""
    return AgentContext.model_construct(
        system_instruction=ctx.system_instruction,
        messages=(*ctx.messages, *messages),
        activated_skills=ctx.activated_skills,
        metadata=ctx.metadata,
        recovery={**ctx.recovery, **added} if added else ctx.recovery,
        pins=ctx.pins,
        pin_rules=ctx.pin_rules,
    )


# --------------------------------------------------------------------------- helpers


def _records(doc: Document) -> list[Any]:
    # a log holding only its start line parses as one JSON object
    return [doc.data] if doc.kind == "json" else list(doc.data)


def _is_start(value: Any) -> bool:
    return (
        isinstance(value, dict)
        and value.get("format") == LOG_FORMAT_TAG
        and value.get("kind") == START
        and isinstance(value.get("context"), dict)
    )


__all__ = ["LOG_FORMAT_TAG", "Replayed", "SessionLogFormat", "replay"]
