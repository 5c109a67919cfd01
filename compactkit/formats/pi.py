"""pi coding-agent session JSONL (pi-mono `~/.pi/agent/sessions/--<cwd>--/<time>_<id>.jsonl`).

Upstream: badlogic/pi-mono `packages/coding-agent/src/core/session-manager.ts` (entry types,
`buildSessionContext`, the v1 -> v2 -> v3 migrations) and `src/core/messages.ts` (`convertToLlm`,
the summary framing).

The first record is the session header (`type: "session"`: id, cwd, provider, modelId, ...). Every
other record is an entry: `message` (role user / assistant / toolResult / bashExecution / custom),
`compaction`, `branch_summary`, `custom_message`, `model_change`, `thinking_level_change`, and
records that never reach the model (`custom`, `label`, `session_info`).

How a file becomes one context (mirroring pi's `buildSessionContext` and `convertToLlm`):

* Version 2+ files link entries by `id`/`parentId`; like pi we take the last entry as the leaf
  and keep the path from it to the root. Version 1 files (no ids) are one list in file order.
  pi skips a line that is not JSON (`parseSessionEntries`), so does this format (`formats.loading`
  warns and counts it); an entry whose parent was on such a line is joined to the entry before it
  in the file, where pi's path would stop, so the turns before the lost line are kept.
* Assistant messages become assistant messages (thinking, text, tool calls in order); pi drops
  aborted/errored assistant messages before calling a model: we drop the empty ones (counted in
  `metadata["skipped_empty_assistant"]`) and keep those with partial content, marked by their
  `stop_reason`. A tool call without a recorded result gets a synthesized error result, as pi
  itself does (`metadata["synthesized_results"]`).
* What the user typed or attached is a `message` of role `user` (text and `image` parts): a user
  message, each exactly once. `bashExecution` messages (`!cmd` run by the user) become user text
  exactly as pi renders them for the model; `custom` (v2 `hookMessage`) messages and
  `custom_message` entries, which extensions inject, become user messages. Both carry
  `metadata["origin"] = "harness"`: they are not the user's words, except the command of a
  `bashExecution`, which is pinned (`AgentContext.pins`, see `_users_words`). A custom message
  whose `details` hold `compactkit_origin` (this format's writer puts it there) gets that origin;
  a first `custom_message` whose `details` hold `compactkit_system_prompt` (this format's writer
  puts the system prompt there) is `system_instruction`.
* Each `compaction` entry becomes, at its position, a user message holding the text pi sent the
  model in its place (the summary in pi's `<summary>` framing) as a plain text block, with
  `metadata["origin"] = "summary"` and `metadata["pi_compaction"]`: `first_kept_message` (index of
  the message where pi's kept tail starts), `summarized_messages`, `tokens_before`, and the entry
  reference. It is part of the original, so it has no recovery entry and `expand` leaves it as
  loaded. All messages are kept, so the context is the full history; `pi_model_view(ctx)` gives
  what pi's model saw after the latest compaction (the summary, then the kept tail, then
  everything after).
* A `branch_summary` entry becomes a user text message in pi's framing, `origin` "summary"
  (`metadata["pi_branch_summary"]`); so do `compactionSummary` / `branchSummary` messages
  (`metadata["pi_role"]`, and `pi_tokens_before`).
* `model_change` / `thinking_level_change` entries go to the metadata of the next message
  (`pi_model_change`, `pi_thinking_level`); `session_info` names the session (`title`).
* Counted in `metadata["skipped_records"]`: `custom` and `label` entries (never sent to a model),
  `!!cmd` runs (`excludeFromContext`), empty aborted responses, a second result for one call,
  unknown entry types and roles, and the entries of branches the session left (named
  `"<type> (other branch)"`).

The writer (`write_session`, `--to pi-session`) writes a version 3 session pi opens, whose
messages pi sends its model exactly as the context holds them; see its docstring.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections import Counter
from collections.abc import Sequence
from datetime import datetime, timezone
from typing import Any

from pydantic import JsonValue

from ..context import (
    MARKER_META_KEY,
    ORIGIN_KEY,
    ORIGINS,
    AgentContext,
    Block,
    ContentPart,
    ImageBlock,
    Message,
    Role,
    TextBlock,
    ThinkingBlock,
    ToolCallBlock,
    ToolResultBlock,
)
from ..errors import BadInputError
from ..recovery import prune
from ._chat import block_as_text
from ._marks import Span, Where, mark_words, rejoin
from ._pairing import NO_RESULT_TEXT, RepairCounts, Turn, synthesized_results
from ._util import (
    as_dict,
    as_text,
    context_metadata,
    nonempty_str,
    note_repairs,
    note_skipped,
    parse_arguments,
    session_uuid,
    str_or_none,
)
from .base import Document, Format, require_single
from .export import ExportNotes, NotingWriter, note_agent_losses, walk_blocks

# how pi frames summaries for the model (coding-agent `messages.ts`, `convertToLlm`)
COMPACTION_SUMMARY_PREFIX = (
    "The conversation history before this point was compacted into the following summary:"
    "\n\n<summary>\n"
)
COMPACTION_SUMMARY_SUFFIX = "\n</summary>"
BRANCH_SUMMARY_PREFIX = (
    "The following is a summary of a branch that this conversation came back from:\n\n<summary>\n"
)
BRANCH_SUMMARY_SUFFIX = "</summary>"


class PiSessionFormat(NotingWriter, Format):
    name = "pi-session"
    description = "pi coding-agent session JSONL"
    extension = ".jsonl"
    priority = 10
    malformed_lines = "skip"
    can_write = True

    def write(self, contexts: Sequence[AgentContext], notes: ExportNotes) -> str:
        """A session pi opens and sends as the context holds it (see `write_session`)."""
        return write_session(require_single(contexts, self.name), notes)

    def sniff(self, doc: Document) -> bool:
        try:
            records = _records(doc)
            return bool(records) and _is_header(records[0])
        except Exception:
            return False

    def load(self, doc: Document) -> list[AgentContext]:
        records = _records(doc)
        if not records or not _is_header(records[0]):
            raise BadInputError(
                "not a pi session: the first record is not a session header "
                '({"type": "session", "id": ...})',
                path=doc.path,
            )
        header: dict[str, Any] = records[0]
        entries = [(i, r) for i, r in enumerate(records) if i > 0 and isinstance(r, dict)]
        builder = _PiContextBuilder()
        builder.skipped["invalid"] = sum(1 for r in records[1:] if not isinstance(r, dict))
        path = _active_path(entries)
        on_path = {id(entry) for _, entry in path}
        for _, entry in entries:
            if id(entry) not in on_path:
                builder.skipped[f"{_kind(entry)} (other branch)"] += 1
        for key, entry in path:
            builder.add(key, entry)
        if not builder.turns:
            return []
        return [builder.context(header)]


# --------------------------------------------------------------------------- entries -> turns


class _PiContextBuilder:
    """Turns the entries of the active path, in order, into turns."""

    def __init__(self) -> None:
        self.turns: list[Turn] = []
        self.skipped: Counter[str] = Counter()
        self.pending_meta: dict[str, JsonValue] = {}
        self.open_calls: dict[str, None] = {}
        self.answered: set[str] = set()
        self.waiting_keys: list[str] = []  # entries that emitted nothing yet
        self.first_message: dict[str, int] = {}  # entry key -> first message at/after it
        self.model: dict[str, JsonValue] = {}
        self.thinking_level: str | None = None
        self.title: str | None = None
        self.repairs = RepairCounts()
        self.skipped_empty_assistant = 0
        self.compactions = 0
        self.system_prompt: str | None = None

    # ----------------------------------------------------------------- dispatch

    def add(self, key: str, entry: dict[str, Any]) -> None:
        self.waiting_keys.append(key)
        kind = entry.get("type")
        if kind == "message" and isinstance(entry.get("message"), dict):
            if not self._message(entry, entry["message"]):
                self.skipped[_kind(entry)] += 1
        elif kind == "compaction":
            self._compaction(key, entry)
        elif (
            kind == "branch_summary" and isinstance(entry.get("summary"), str) and entry["summary"]
        ):
            meta: dict[str, JsonValue] = {
                ORIGIN_KEY: "summary",
                "pi_branch_summary": {"from_id": entry.get("fromId")},
            }
            block = _framed(entry["summary"], BRANCH_SUMMARY_PREFIX, BRANCH_SUMMARY_SUFFIX)
            self._emit("user", [block], entry, meta)
        elif kind == "custom_message" and self._system_prompt(entry):
            pass
        elif kind == "custom_message":
            meta = {
                ORIGIN_KEY: _custom_origin(entry.get("details")),
                "pi_custom_type": as_text(entry.get("customType")),
            }
            if not self._emit("user", _user_blocks(entry.get("content")), entry, meta):
                self.skipped["custom_message"] += 1
        elif kind == "model_change":
            change: dict[str, JsonValue] = {
                "provider": entry.get("provider"),
                "model_id": entry.get("modelId"),
            }
            self.pending_meta["pi_model_change"] = change
            if isinstance(entry.get("modelId"), str):
                self.model = {"model": entry["modelId"], "provider": entry.get("provider")}
        elif kind == "thinking_level_change" and isinstance(entry.get("thinkingLevel"), str):
            self.pending_meta["pi_thinking_level"] = entry["thinkingLevel"]
            self.thinking_level = entry["thinkingLevel"]
        elif kind == "session_info":
            if isinstance(entry.get("name"), str):
                self.title = entry["name"]
        else:  # custom (extension state), label, unknown future types: never sent to a model
            self.skipped[_kind(entry)] += 1

    def _system_prompt(self, entry: dict[str, Any]) -> bool:
        """Keep the system prompt this format's writer put first (see `write_session`)."""
        content = entry.get("content")
        if self.turns or as_dict(entry.get("details")).get(SYSTEM_PROMPT_DETAIL) is not True:
            return False
        if not isinstance(content, str):
            return False
        self.system_prompt = content
        return True

    def _message(self, entry: dict[str, Any], message: dict[str, Any]) -> bool:
        """Add one message entry; False when nothing of it reaches the context."""
        role = message.get("role")
        if role == "user":
            return self._emit("user", _user_blocks(message.get("content")), entry)
        if role == "assistant":
            return self._assistant(entry, message)
        if role == "toolResult":
            return self._tool_result(entry, message)
        if role == "bashExecution":
            if message.get("excludeFromContext") is True:
                return False
            meta: dict[str, JsonValue] = {ORIGIN_KEY: "harness", "pi_role": "bashExecution"}
            return self._emit("user", [TextBlock(text=bash_execution_text(message))], entry, meta)
        if role in ("custom", "hookMessage"):
            meta = {
                ORIGIN_KEY: _custom_origin(message.get("details")),
                "pi_role": "custom",
                "pi_custom_type": as_text(message.get("customType")),
            }
            return self._emit("user", _user_blocks(message.get("content")), entry, meta)
        if role in ("branchSummary", "compactionSummary") and message.get("summary"):
            prefix, suffix = (
                (BRANCH_SUMMARY_PREFIX, BRANCH_SUMMARY_SUFFIX)
                if role == "branchSummary"
                else (COMPACTION_SUMMARY_PREFIX, COMPACTION_SUMMARY_SUFFIX)
            )
            block = _framed(as_text(message["summary"]), prefix, suffix)
            meta = {ORIGIN_KEY: "summary", "pi_role": role}
            if isinstance(message.get("tokensBefore"), int):
                meta["pi_tokens_before"] = message["tokensBefore"]
            return self._emit("user", [block], entry, meta)
        return False

    def _assistant(self, entry: dict[str, Any], message: dict[str, Any]) -> bool:
        blocks = _assistant_blocks(message.get("content"))
        stop = message.get("stopReason")
        if not blocks:
            if stop in ("aborted", "error"):
                self.skipped_empty_assistant += 1
            return False
        meta: dict[str, JsonValue] = {}
        for source, target in (
            ("model", "model"),
            ("provider", "provider"),
            ("api", "api"),
            ("stopReason", "stop_reason"),
            ("errorMessage", "error_message"),
        ):
            if isinstance(message.get(source), str):
                meta[target] = message[source]
        if isinstance(message.get("usage"), dict):
            meta["usage"] = message["usage"]
        if isinstance(message.get("model"), str):
            self.model = {"model": message["model"], "provider": message.get("provider")}
        self._emit("assistant", blocks, entry, meta)
        for block in blocks:
            if isinstance(block, ToolCallBlock):
                self.open_calls[block.id] = None
        return True

    def _tool_result(self, entry: dict[str, Any], message: dict[str, Any]) -> bool:
        call_id = as_text(message.get("toolCallId"))
        tool_name = as_text(message.get("toolName"))
        if call_id in self.answered:
            return False  # a second result for one call: pi would send it; it pairs with nothing
        if call_id not in self.open_calls:
            self.close_calls()
            self._emit(
                "assistant",
                [ToolCallBlock(id=call_id, name=tool_name or "unknown")],
                entry,
                {"synthesized": True},
            )
            self.repairs.synthesized_calls += 1
        block = ToolResultBlock(
            tool_call_id=call_id,
            content=_parts(message.get("content")),
            is_error=message.get("isError") is True,
        )
        meta: dict[str, JsonValue] = {"tool_name": tool_name} if tool_name else {}
        self._emit("tool", [block], entry, meta)
        self.open_calls.pop(call_id, None)
        self.answered.add(call_id)
        return True

    def _compaction(self, key: str, entry: dict[str, Any]) -> None:
        summary = as_text(entry.get("summary"))
        self.close_calls()
        first_kept = entry.get("firstKeptEntryId")
        if not isinstance(first_kept, str) and isinstance(entry.get("firstKeptEntryIndex"), int):
            first_kept = f"#{entry['firstKeptEntryIndex']}"
        kept_from = self.first_message.get(first_kept) if isinstance(first_kept, str) else None
        if kept_from is None:
            kept_from = len(self.turns)  # nothing kept (or an unknown entry): all summarized
        info: dict[str, JsonValue] = {"first_kept_message": kept_from}
        if isinstance(entry.get("firstKeptEntryId"), str):
            info["first_kept_entry_id"] = entry["firstKeptEntryId"]
        if isinstance(entry.get("firstKeptEntryIndex"), int):
            info["first_kept_entry_index"] = entry["firstKeptEntryIndex"]
        if isinstance(entry.get("tokensBefore"), int):
            info["tokens_before"] = entry["tokensBefore"]
        if entry.get("fromHook") is True:
            info["from_hook"] = True
        info["summarized_messages"] = sum(
            1 for t in self.turns[:kept_from] if "pi_compaction" not in t.metadata
        )
        block = _framed(summary, COMPACTION_SUMMARY_PREFIX, COMPACTION_SUMMARY_SUFFIX)
        self._emit("user", [block], entry, {ORIGIN_KEY: "summary", "pi_compaction": info})
        self.compactions += 1

    # ----------------------------------------------------------------- output

    def _emit(
        self,
        role: Role,
        blocks: list[Block],
        entry: dict[str, Any],
        extra: dict[str, JsonValue] | None = None,
    ) -> bool:
        if not blocks:
            return False
        if role != "tool":
            self.close_calls()
        meta: dict[str, JsonValue] = {}
        if isinstance(entry.get("id"), str):
            meta["id"] = entry["id"]
        if isinstance(entry.get("timestamp"), str):
            meta["timestamp"] = entry["timestamp"]
        meta.update(extra or {})
        meta.update(self.pending_meta)
        self.pending_meta = {}
        for key in self.waiting_keys:
            self.first_message.setdefault(key, len(self.turns))
        self.waiting_keys = []
        self.turns.append(Turn(role, blocks, meta))
        return True

    def close_calls(self, final: bool = False) -> None:
        """Give every open call a synthesized error result (pi does the same before a model
        call); at the end of the file, calls of the last message stay pending.

        Pairing is repaired here, as messages are emitted, rather than by `repair_pairing`
        afterwards: compactions record message positions (`first_kept_message`) that messages
        inserted later would shift, and a synthesized call carries its entry's metadata."""
        if not self.open_calls:
            return
        if final and self.turns and self.turns[-1].role == "assistant":
            return
        self.turns.append(Turn.of(synthesized_results(self.open_calls)))
        self.repairs.synthesized_results += len(self.open_calls)
        self.answered.update(self.open_calls)
        self.open_calls.clear()

    def context(self, header: dict[str, Any]) -> AgentContext:
        """The context, calls of a final assistant message left pending, with the metadata of
        the session `header`."""
        self.close_calls(final=True)
        model = self.model.get("model") or header.get("modelId")
        provider = self.model.get("provider") or header.get("provider")
        thinking = self.thinking_level or header.get("thinkingLevel")
        meta = context_metadata(
            PiSessionFormat.name,
            session_id=header["id"],
            cwd=nonempty_str(header.get("cwd")),
            timestamp=nonempty_str(header.get("timestamp")),
            branched_from=nonempty_str(header.get("branchedFrom")),
            parent_session=nonempty_str(header.get("parentSession")),
            version=header["version"] if isinstance(header.get("version"), int) else 1,
            model=str_or_none(model),
            provider=str_or_none(provider),
            thinking_level=str_or_none(thinking),
            title=self.title or None,
            compactions=self.compactions or None,
        )
        note_repairs(meta, self.repairs)
        if self.skipped_empty_assistant:
            meta["skipped_empty_assistant"] = self.skipped_empty_assistant
        note_skipped(meta, self.skipped)
        ctx = AgentContext(
            system_instruction=self.system_prompt,
            messages=tuple(t.freeze() for t in self.turns),
            metadata=meta,
        )
        return mark_words(ctx, _users_words)


# --------------------------------------------------------------------------- helpers


def _records(doc: Document) -> list[Any]:
    if doc.kind == "json":
        return [doc.data] if isinstance(doc.data, dict) else []
    return list(doc.data)


def _is_header(record: Any) -> bool:
    return (
        isinstance(record, dict)
        and record.get("type") == "session"
        and isinstance(record.get("id"), str)
        and ("cwd" in record or "timestamp" in record)
    )


def _kind(entry: dict[str, Any]) -> str:
    """An entry's kind for `skipped_records`: its type, and a message's role."""
    kind = as_text(entry.get("type")) or "unknown"
    message = entry.get("message")
    if kind == "message" and isinstance(message, dict):
        return f"message/{as_text(message.get('role'))}"
    return kind


def _entry_key(index: int, entry: dict[str, Any]) -> str:
    value = entry.get("id")
    return value if isinstance(value, str) else f"#{index}"


def _active_path(entries: list[tuple[int, dict[str, Any]]]) -> list[tuple[str, dict[str, Any]]]:
    """The entries pi would read: the leaf-to-root path (v2+), or every entry in order (v1)."""
    keyed = [(_entry_key(i, e), e) for i, e in entries]
    if not any(isinstance(e.get("id"), str) for _, e in entries):
        return keyed
    by_id = {key: entry for key, entry in keyed}
    before = {keyed[i][0]: keyed[i - 1][0] for i in range(1, len(keyed))}
    path: list[tuple[str, dict[str, Any]]] = []
    seen: set[str] = set()
    key: str | None = keyed[-1][0] if keyed else None
    while key is not None and key in by_id and key not in seen:
        seen.add(key)
        entry = by_id[key]
        path.append((key, entry))
        parent = entry.get("parentId")
        if isinstance(parent, str) and parent not in by_id:
            parent = before.get(key)  # a lost line: bridge to the entry before it in the file
        key = parent if isinstance(parent, str) else None
    path.reverse()
    return path


def _custom_origin(details: Any) -> str:
    """The origin of a custom message: "harness", or the one this format's writer kept in its
    `details` (a summary or example written from another agent's session)."""
    origin = as_dict(details).get(ORIGIN_DETAIL)
    return origin if isinstance(origin, str) and origin in ORIGINS else "harness"


def _framed(summary: str, prefix: str, suffix: str) -> TextBlock:
    """A summary as the text pi sends its model (`convertToLlm`)."""
    return TextBlock(text=prefix + summary + suffix)


def bash_execution_text(message: dict[str, Any]) -> str:
    """The user text pi sends for a `!command` the user ran (pi's `bashExecutionToText`)."""
    text = f"Ran `{as_text(message.get('command'))}`\n"
    output = as_text(message.get("output"))
    text += f"```\n{output}\n```" if output else "(no output)"
    exit_code = message.get("exitCode")
    if message.get("cancelled") is True:
        text += "\n\n(command cancelled)"
    elif isinstance(exit_code, int) and exit_code != 0:
        text += f"\n\nCommand exited with code {exit_code}"
    if message.get("truncated") is True and message.get("fullOutputPath"):
        text += f"\n\n[Output truncated. Full output: {message['fullOutputPath']}]"
    return text


def _users_words(where: Where, text: str) -> list[Span]:
    """The command of a `!command` the user ran (`bashExecution`, rendered by
    `bash_execution_text`: "Ran `<command>`", then the output): harness text holding it."""
    if where.result is not None or where.message.metadata.get("pi_role") != "bashExecution":
        return []
    if not text.startswith("Ran `"):
        return []
    ends = [text.find(tail, 5) for tail in ("`\n```\n", "`\n(no output)")]
    end = min((e for e in ends if e >= 0), default=-1)
    if end <= 5:
        return []
    return [Span(5, end, "user-command")]


def _image(item: dict[str, Any]) -> ImageBlock:
    data = item.get("data")
    media_type = item.get("mimeType") or item.get("media_type")
    return ImageBlock(
        media_type=media_type if isinstance(media_type, str) else None,
        data=data if isinstance(data, str) else None,
        url=item["url"] if isinstance(item.get("url"), str) else None,
    )


def _parts(content: Any) -> tuple[ContentPart, ...]:
    """Text/image content (a string or a list of parts) as content parts."""
    if content is None:
        return ()
    if isinstance(content, str):
        return (TextBlock(text=content),) if content else ()
    parts: list[ContentPart] = []
    for item in content if isinstance(content, list) else [content]:
        if isinstance(item, dict) and item.get("type") == "text":
            parts.append(TextBlock(text=as_text(item.get("text"))))
        elif isinstance(item, dict) and item.get("type") == "image":
            parts.append(_image(item))
        else:
            parts.append(TextBlock(text=as_text(item)))
    return tuple(parts)


def _user_blocks(content: Any) -> list[Block]:
    return list(_parts(content))


def _assistant_blocks(content: Any) -> list[Block]:
    if isinstance(content, str):
        return [TextBlock(text=content)] if content else []
    blocks: list[Block] = []
    for item in content if isinstance(content, list) else []:
        kind = item.get("type") if isinstance(item, dict) else None
        if not isinstance(item, dict):
            blocks.append(TextBlock(text=as_text(item)))
        elif kind == "text":
            blocks.append(TextBlock(text=as_text(item.get("text"))))
        elif kind == "thinking":
            signature = item.get("thinkingSignature") or item.get("signature")
            blocks.append(
                ThinkingBlock(
                    thinking=as_text(item.get("thinking")),
                    signature=signature if isinstance(signature, str) else None,
                    redacted=item.get("redacted") is True,
                )
            )
        elif kind == "toolCall":
            blocks.append(
                ToolCallBlock(
                    id=as_text(item.get("id")),
                    name=as_text(item.get("name")),
                    input=parse_arguments(item.get("arguments")),
                )
            )
        elif kind == "image":
            blocks.append(_image(item))
        else:
            blocks.append(TextBlock(text=as_text(item)))
    return blocks


# --------------------------------------------------------------------------- what pi's model saw


def pi_model_view(ctx: AgentContext) -> AgentContext:
    """What pi's model saw after the latest compaction in `ctx` (a context loaded by this format):
    the compaction summary, the kept tail before it, then every message after it. Earlier
    compaction summaries are dropped, as pi drops them. Without a compaction, `ctx` itself."""
    positions = [i for i, m in enumerate(ctx.messages) if "pi_compaction" in m.metadata]
    if not positions:
        return ctx
    at = positions[-1]
    summary = ctx.messages[at]
    info = summary.metadata["pi_compaction"]
    start = info.get("first_kept_message") if isinstance(info, dict) else None
    start = start if isinstance(start, int) and 0 <= start <= at else at
    kept = [
        m
        for m in (*ctx.messages[start:at], *ctx.messages[at + 1 :])
        if "pi_compaction" not in m.metadata
    ]
    return prune(ctx.with_messages([summary, *kept]))


# --------------------------------------------------------------------------- writing

SESSION_VERSION = 3
"""The session version the writer writes: pi-coding-agent's `CURRENT_SESSION_VERSION`."""
WRITER_VERSION = "0.73.1"
"""The pi version whose loader and resume the written sessions are tested with."""
SYSTEM_PROMPT_DETAIL = "compactkit_system_prompt"
"""Key (true), in the `details` of the first `custom_message` entry, saying it holds the system
prompt: pi keeps its own system prompt outside the session and sends a custom message to its
model as a user message; this reader reads it back as `system_instruction`."""
ORIGIN_DETAIL = "compactkit_origin"
"""Key, in the `details` of a custom message (which pi never sends to a model), of the origin of
a user-role message that is neither the user's words nor harness text; this reader reads it."""
_EPOCH = "1970-01-01T00:00:00.000Z"
_KEPT_STOP_REASONS = ("stop", "length", "toolUse")  # pi drops "error"/"aborted" ones when sending
_BASH_TEXT = re.compile(
    r"Ran `(?P<command>.*?)`\n(?:```\n(?P<output>.*)\n```|\(no output\))"
    r"(?:\n\n\(command (?P<cancelled>cancelled)\)|\n\nCommand exited with code (?P<code>-?\d+))?"
    r"(?:\n\n\[Output truncated\. Full output: (?P<path>.*)\])?",
    re.DOTALL,
)


def write_session(ctx: AgentContext, notes: ExportNotes | None = None) -> str:
    """`ctx` as a pi session (version 3) that pi opens (`pi --session FILE`, or `pi --continue` once
    the file is `~/.pi/agent/sessions/--<cwd, / as ->--/<time>_<id>.jsonl`) and whose messages
    pi sends its model exactly as `ctx` holds them.

    A `session` header (the context's session id when it is a UUID, else one derived from the
    content; `cwd`; `timestamp`), then one entry per message, each the child of the one before
    (`parentId`), with the message's own entry id where it has one: the user's words as `user`
    messages; each assistant message as an `assistant` message (thinking with its signature,
    text, `toolCall`s; "error"/"aborted" stop reasons, which pi leaves out of what it sends, are
    written as "stop"/"toolUse"); each tool result as a `toolResult` message. A user-role message
    that is not the user's words is written as pi wrote it where pi has a record for it: a
    `!command` as `bashExecution`, pi's compaction summary as a `compaction` entry (when the entry
    it keeps from is written before it, else a `compactionSummary` message in place), a branch
    summary as `branch_summary`; anything else as a `custom` message (origin in its `details`).
    `model_change` / `thinking_level_change` entries go back before the message they preceded.
    An assistant message's usage keeps its output tokens and cost; its input counts are written
    as 0, because they measured the prompt before compaction and pi compacts again at once when
    the last one is near the window.

    What pi has no place for is written so that its model still sees it, and counted in
    `notes`: pi keeps its own system prompt outside the session, so `system_instruction` becomes
    the first entry, a `custom_message` (not displayed; `details` mark it, and it reads back as
    the system prompt); a system message becomes a custom message too; markers a strategy left
    are written as the text a model is shown for them; an image given by URL (pi keeps images
    inline only) as a line naming it; a tool input that is not an object as `{"input": ...}`;
    message names are dropped."""
    notes = notes if notes is not None else ExportNotes()
    note_agent_losses(
        ctx, notes, system_prompt=False, system_messages=False, model_on_messages=True
    )
    blocks = walk_blocks(ctx)
    notes.drop(
        "images given by URL (named in text)",
        sum(isinstance(b, ImageBlock) and b.data is None for b in blocks),
    )
    calls = [c for m in ctx.messages for c in m.tool_calls]
    notes.change(
        "non-object tool inputs wrapped", sum(not isinstance(c.input, dict) for c in calls)
    )
    writer = _Writer(ctx)
    for number, message in enumerate(ctx.messages):
        writer.add(number, message)
    lines = [writer.header, *writer.entries]
    return "".join(json.dumps(line, ensure_ascii=False) + "\n" for line in lines)


class _Writer:
    """The header and entries of one written session, chained as they are added."""

    def __init__(self, ctx: AgentContext) -> None:
        self.session = session_uuid(ctx)
        self.pinned = {p.etag for p in ctx.pins}
        self.names = {c.id: c.name for m in ctx.messages for c in m.tool_calls}
        self.entries: list[dict[str, Any]] = []
        self.used: set[str] = set()
        self.parent: str | None = None
        stamps = [ctx.metadata.get("timestamp")] + [
            m.metadata.get("timestamp") for m in ctx.messages
        ]
        self.stamp = next((str(s) for s in stamps if _ms(s) is not None), _EPOCH)
        cwd = nonempty_str(ctx.metadata.get("cwd"))
        self.header: dict[str, Any] = {
            "type": "session",
            "version": SESSION_VERSION,
            "id": self.session,
            "timestamp": self.stamp,
            "cwd": cwd or "/",
        }
        if nonempty_str(ctx.metadata.get("parent_session")):
            self.header["parentSession"] = ctx.metadata["parent_session"]
        title = nonempty_str(ctx.metadata.get("title"))
        if title is not None:
            self.entry("session_info", self.id_for(None, "title"), name=title)
        if ctx.system_instruction:
            self.entry(
                "custom_message",
                self.id_for(None, "system"),
                customType="compactkit-system-prompt",
                content=ctx.system_instruction,
                display=False,
                details={SYSTEM_PROMPT_DETAIL: True},
            )

    def id_for(self, own: Any, salt: str) -> str:
        """`own` (a message's entry id) when it is free, else 8 hex digits derived from the
        session and `salt`, so that the same context always gives the same file."""
        if isinstance(own, str) and own and own not in self.used:
            self.used.add(own)
            return own
        n = 0
        while True:
            key = f"{self.session}:{salt}" + (f":{n}" if n else "")
            candidate = hashlib.sha256(key.encode()).hexdigest()[:8]
            if candidate not in self.used:
                self.used.add(candidate)
                return candidate
            n += 1

    @property
    def ms(self) -> int:
        """The current entry timestamp as pi's message `timestamp` (Unix milliseconds)."""
        return _ms(self.stamp) or 0

    def entry(self, kind: str, entry_id: str, **fields: Any) -> None:
        self.entries.append(
            {"type": kind, "id": entry_id, "parentId": self.parent, "timestamp": self.stamp}
            | fields
        )
        self.parent = entry_id

    def add(self, number: int, message: Message) -> None:
        meta = message.metadata
        if _ms(meta.get("timestamp")) is not None:
            self.stamp = str(meta["timestamp"])
        own = self.id_for(meta.get("id"), f"m{number}")
        change = meta.get("pi_model_change")
        if isinstance(change, dict):
            provider, model = change.get("provider"), change.get("model_id")
            self.entry(
                "model_change", self.id_for(None, own + "/model"), provider=provider, modelId=model
            )
        if isinstance(meta.get("pi_thinking_level"), str):
            level = meta["pi_thinking_level"]
            self.entry(
                "thinking_level_change", self.id_for(None, own + "/thinking"), thinkingLevel=level
            )
        if message.role == "assistant":
            body = _assistant_message(message, self.ms)
            if body is not None:
                self.entry("message", own, message=body)
        elif message.role == "tool":
            self.tool_results(own, message)
        else:
            blocks = rejoin(message.content, self.pinned, Where(number, message), _users_words)
            self.user(own, message, blocks)

    def tool_results(self, own: str, message: Message) -> None:
        for k, result in enumerate(message.tool_results):
            name = self.names.get(result.tool_call_id) or as_text(message.metadata.get("tool_name"))
            body = {
                "role": "toolResult",
                "toolCallId": result.tool_call_id,
                "toolName": name or "unknown",
                "content": _content(result.content),
                "isError": result.is_error,
                "timestamp": self.ms,
            }
            self.entry("message", own if k == 0 else self.id_for(None, f"{own}/{k}"), message=body)

    def user(self, own: str, message: Message, blocks: list[Block]) -> None:
        content = _content(blocks)
        if not content:
            return
        stamp = self.ms
        origin = message.origin
        if message.role == "user" and origin is None and MARKER_META_KEY not in message.metadata:
            self.entry(
                "message", own, message={"role": "user", "content": content, "timestamp": stamp}
            )
            return
        text = blocks[0].text if len(blocks) == 1 and isinstance(blocks[0], TextBlock) else None
        if origin == "summary" and text is not None and self.summary(own, message, text):
            return
        bash = _BASH_TEXT.fullmatch(text) if text is not None else None
        if message.metadata.get("pi_role") == "bashExecution" and bash is not None:
            body = _bash_execution(bash, stamp)
            if bash_execution_text(body) == text:
                self.entry("message", own, message=body)
                return
        custom_type = as_text(message.metadata.get("pi_custom_type")) or "compactkit"
        custom: dict[str, Any] = {"customType": custom_type, "content": content, "display": True}
        origin = origin or ("harness" if message.role == "system" else "summary")
        if origin != "harness":
            custom["details"] = {ORIGIN_DETAIL: origin}
        if "pi_custom_type" in message.metadata and "pi_role" not in message.metadata:
            self.entry("custom_message", own, **custom)  # it was a custom_message entry
        else:
            self.entry("message", own, message={"role": "custom", **custom, "timestamp": stamp})

    def summary(self, own: str, message: Message, text: str) -> bool:
        """Write a summary pi framed as pi's own record of it; False when it is not one."""
        info = as_dict(message.metadata.get("pi_compaction"))
        inner = _unframed(text, COMPACTION_SUMMARY_PREFIX, COMPACTION_SUMMARY_SUFFIX)
        if inner is not None:
            recorded = info.get("tokens_before", message.metadata.get("pi_tokens_before"))
            tokens = recorded if isinstance(recorded, int) else 0
            kept = info.get("first_kept_entry_id")
            if isinstance(kept, str) and kept in self.used and kept != own:
                self.entry(
                    "compaction", own, summary=inner, firstKeptEntryId=kept, tokensBefore=tokens
                )
            else:  # sent in place: nothing before it is left out
                body = {"role": "compactionSummary", "summary": inner, "tokensBefore": tokens}
                self.entry("message", own, message=body | {"timestamp": self.ms})
            return True
        inner = _unframed(text, BRANCH_SUMMARY_PREFIX, BRANCH_SUMMARY_SUFFIX)
        if inner:  # pi sends a branch summary only when it has text
            origin_id = as_dict(message.metadata.get("pi_branch_summary")).get("from_id")
            from_id = origin_id if isinstance(origin_id, str) else self.parent or own
            self.entry("branch_summary", own, fromId=from_id, summary=inner)
            return True
        return False


def _unframed(text: str, prefix: str, suffix: str) -> str | None:
    if text.startswith(prefix) and text.endswith(suffix) and len(text) >= len(prefix) + len(suffix):
        return text[len(prefix) : len(text) - len(suffix)]
    return None


def _bash_execution(match: re.Match[str], stamp: int) -> dict[str, Any]:
    code = match.group("code")
    body: dict[str, Any] = {
        "role": "bashExecution",
        "command": match.group("command"),
        "output": match.group("output") or "",
        "exitCode": int(code) if code is not None else 0,
        "cancelled": match.group("cancelled") is not None,
        "truncated": match.group("path") is not None,
    }
    if match.group("path") is not None:
        body["fullOutputPath"] = match.group("path")
    return body | {"timestamp": stamp}


def _ms(stamp: Any) -> int | None:
    """An ISO timestamp as Unix milliseconds (pi's message `timestamp`), None when it is not one."""
    if not isinstance(stamp, str):
        return None
    try:
        moment = datetime.fromisoformat(stamp.replace("Z", "+00:00"))
    except ValueError:
        return None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=timezone.utc)
    return int(moment.timestamp() * 1000)


def _content(parts: Sequence[Block]) -> list[dict[str, Any]]:
    """Text and image parts as pi holds them; a marker as its text, an image by URL (pi keeps
    images inline only) as a line naming it."""
    out: list[dict[str, Any]] = []
    for part in parts:
        if isinstance(part, ImageBlock) and part.data is not None:
            out.append(
                {"type": "image", "data": part.data, "mimeType": part.media_type or "image/png"}
            )
        elif isinstance(part, ImageBlock):
            out.append({"type": "text", "text": f"[image: {part.url or 'not recorded'}]"})
        elif not isinstance(part, (ToolCallBlock, ToolResultBlock)):
            out.append({"type": "text", "text": block_as_text(part)})
    return out


def _assistant_message(message: Message, stamp: int) -> dict[str, Any] | None:
    content: list[dict[str, Any]] = []
    for block in message.content:
        if isinstance(block, ThinkingBlock):
            thinking: dict[str, Any] = {"type": "thinking", "thinking": block.thinking}
            if block.signature is not None:
                thinking["thinkingSignature"] = block.signature
            if block.redacted:
                thinking["redacted"] = True
            content.append(thinking)
        elif isinstance(block, ToolCallBlock):
            arguments = block.input if isinstance(block.input, dict) else {"input": block.input}
            content.append(
                {"type": "toolCall", "id": block.id, "name": block.name, "arguments": arguments}
            )
        else:
            content.extend(_content([block]))
    if not content:
        return None
    meta = message.metadata
    stop = meta.get("stop_reason")
    if stop not in _KEPT_STOP_REASONS:
        stop = "toolUse" if message.tool_calls else "stop"
    return {
        "role": "assistant",
        "content": content,
        "api": as_text(meta.get("api")) or "unknown",
        "provider": as_text(meta.get("provider")) or "unknown",
        "model": as_text(meta.get("model")) or "unknown",
        "usage": _usage(meta.get("usage")),
        "stopReason": stop,
        "timestamp": stamp,
    }


def _usage(value: Any) -> dict[str, Any]:
    """pi's usage: the recorded output tokens and cost, the input counts 0 (see `write_session`)."""
    usage = as_dict(value)
    output = next(
        (
            usage[k]
            for k in ("output", "output_tokens", "completion_tokens")
            if isinstance(usage.get(k), int)
        ),
        0,
    )
    cost = as_dict(usage.get("cost"))
    zero = {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0, "total": 0}
    return {
        "input": 0,
        "output": output,
        "cacheRead": 0,
        "cacheWrite": 0,
        "totalTokens": output,
        "cost": {
            k: cost[k] if isinstance(cost.get(k), (int, float)) else v for k, v in zero.items()
        },
    }


__all__ = [
    "BRANCH_SUMMARY_PREFIX",
    "BRANCH_SUMMARY_SUFFIX",
    "COMPACTION_SUMMARY_PREFIX",
    "COMPACTION_SUMMARY_SUFFIX",
    "NO_RESULT_TEXT",
    "PiSessionFormat",
    "bash_execution_text",
    "pi_model_view",
    "write_session",
]
