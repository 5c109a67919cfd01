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
  pi skips a line that is not JSON (`parseSessionEntries`), so does this format (`compactkit.io`
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
  `bashExecution`, which is pinned (`AgentContext.pins`, see `_users_words`).
* Each `compaction` entry becomes, at its position, a user message holding the text pi sent the
  model in its place (the summary in pi's `<summary>` framing) as a plain text block, with
  `metadata["origin"] = "summary"` and `metadata["pi_compaction"]`: `first_kept_message` (index of
  the message where pi's kept tail starts), `summarized_messages`, `tokens_before`, and the entry
  reference. It is part of the original, so it has no recovery entry and `expand` leaves it as
  loaded. All messages are kept, so the context is the full history; `pi_model_view(ctx)` gives
  what pi's model saw after the latest compaction (the summary, then the kept tail, then
  everything after).
* A `branch_summary` entry becomes a user text message in pi's framing, `origin` "summary"
  (`metadata["pi_branch_summary"]`).
* `model_change` / `thinking_level_change` entries go to the metadata of the next message
  (`pi_model_change`, `pi_thinking_level`); `session_info` names the session (`title`).
* Counted in `metadata["skipped_records"]`: `custom` and `label` entries (never sent to a model),
  `!!cmd` runs (`excludeFromContext`), empty aborted responses, a second result for one call,
  unknown entry types and roles, and the entries of branches the session left (named
  `"<type> (other branch)"`).
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from pydantic import JsonValue

from ..context import (
    ORIGIN_KEY,
    AgentContext,
    Block,
    ContentPart,
    ImageBlock,
    Role,
    TextBlock,
    ThinkingBlock,
    ToolCallBlock,
    ToolResultBlock,
)
from ..errors import BadInputError
from ..recovery import prune
from ._marks import Span, Where, mark_words
from ._pairing import NO_RESULT_TEXT, RepairCounts, Turn, synthesized_results
from ._util import (
    as_text,
    context_metadata,
    nonempty_str,
    note_repairs,
    note_skipped,
    parse_arguments,
    str_or_none,
)
from .base import Document, Format

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


class PiSessionFormat(Format):
    name = "pi-session"
    description = "pi coding-agent session JSONL"
    extension = ".jsonl"
    priority = 10
    malformed_lines = "skip"

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
        builder = _Builder()
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


class _Builder:
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
        elif kind == "custom_message":
            meta = {ORIGIN_KEY: "harness", "pi_custom_type": as_text(entry.get("customType"))}
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
                ORIGIN_KEY: "harness",
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
            return self._emit("user", [block], entry, {ORIGIN_KEY: "summary", "pi_role": role})
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
        ctx = AgentContext(messages=tuple(t.freeze() for t in self.turns), metadata=meta)
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


__all__ = [
    "BRANCH_SUMMARY_PREFIX",
    "BRANCH_SUMMARY_SUFFIX",
    "COMPACTION_SUMMARY_PREFIX",
    "COMPACTION_SUMMARY_SUFFIX",
    "NO_RESULT_TEXT",
    "PiSessionFormat",
    "bash_execution_text",
    "pi_model_view",
]
