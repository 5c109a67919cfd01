"""OpenAI Codex CLI rollout JSONL.

A rollout is one session: a `session_meta` record (session id, cwd, the base instructions), one
`turn_context` per user turn (model, policies), `response_item` records holding exactly what went
to and came from the model (messages, reasoning, function calls and their outputs), `compacted`
records (the summary a compaction put in place of the history) and `event_msg` records for the UI.
Upstream: openai/codex `codex-rs/protocol/src/protocol.rs` (`RolloutItem`, `RolloutLine`,
`EventMsg::UserMessage`, `CompactedItem`), `codex-rs/protocol/src/models.rs` (`ResponseItem`),
`codex-rs/core/src/rollout/policy.rs` (what is persisted) and `codex-rs/core/src/context/`
(`is_contextual_user_fragment`: the harness text Codex writes as user messages). Rollouts of the
2025 releases, before the `{"type", "payload"}` envelope (a `{"id", "timestamp", "instructions",
"git"}` first line, then bare response items and `{"record_type": "state"}` lines), read the same:
the first line as the `session_meta`, each item as a `response_item`, the state lines counted.

What the user typed or attached is in two records of one turn: the `response_item` user message
(what the model got: `input_text` / `input_image` parts) and `event_msg` `user_message`
(`message`, `images` URLs, `local_images` paths; older versions also a `kind`). Codex Desktop and
some versions write only the event. Each pair becomes one user message: the response item when
present, the event otherwise (its images as image blocks), never both.

Mapping:
- `session_meta.payload.base_instructions.text` -> `system_instruction`;
- developer messages -> `Message(role="system")` in place, user messages -> user;
- user messages Codex wrote itself (`<environment_context>`, AGENTS.md / `<user_instructions>`,
  `<user_shell_command>`, `<turn_aborted>`, `<skill>`, `<hook_prompt>`, ... and events of
  `kind` user_instructions / environment_context) -> user, `metadata["origin"] = "harness"`;
- `compacted` -> a user message with the recorded summary text, and one per user message of its
  `replacement_history` (earlier requests Codex carried over), all `metadata["origin"] =
  "summary"` and plain text (no recovery entry: `expand` leaves them as loaded);
- reasoning, assistant text and the tool calls of one model response -> one assistant message
  (a response ends at its `token_count` event or at the next non-assistant item); its
  `last_token_usage` becomes the message's `metadata["usage"]`;
- `function_call_output` / `custom_tool_call_output` -> tool results (consecutive outputs share one
  tool message); calls run in parallel and an output is recorded when its call ends, so where a call's
  output comes only after a later model response, the assistant messages between are one message
  (`metadata["joined_responses"]`), so that every result follows its call's message;
- `web_search_call` (a server-side tool whose results the rollout never records) -> a
  `web_search` tool call that gets a synthesized "[no result recorded]" result;
- a call with no output anywhere in the rollout gets that synthesized error result too (tool
  message metadata `{"synthesized": true}`, after the tool messages that follow its call), except
  the calls of the last assistant message when nothing but tool messages follows it (a run may
  end on a call);
- the user's words in what Codex wrote itself are pinned (`AgentContext.pins`, see
  `_users_words`): the command of a `!` shell command, the answers `request_user_input` returned;
- every other record (UI events such as `event_msg/agent_message` or `exec_command_end`, ghost
  snapshots, encrypted `compaction` items, a resumed session's repeated `session_meta`, unknown
  future types) is counted in `metadata["skipped_records"]`.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Sequence
from typing import Any

from pydantic import JsonValue

from ..context import (
    ORIGIN_KEY,
    ORIGINS,
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
from ._chat import block_as_text
from ._marks import Span, Where, mark_words, rejoin
from ._pairing import Turn, repair_pairing
from ._util import (
    as_text,
    context_metadata,
    image_from_url,
    nonempty_parts,
    note_repairs,
    note_skipped,
    parse_arguments,
    parts_from_content,
    session_uuid,
    str_or_none,
)
from .base import Document, Format, require_single
from .export import ExportNotes, NotingWriter, note_agent_losses

_RECORD_TYPES = ("session_meta", "response_item", "turn_context", "event_msg", "compacted")
_CALL_ITEMS = ("function_call", "custom_tool_call", "local_shell_call", "web_search_call")
_OUTPUT_ITEMS = ("function_call_output", "custom_tool_call_output")
_LEGACY_ITEMS = ("message", "reasoning", *_CALL_ITEMS, *_OUTPUT_ITEMS)

# user-role text Codex injects itself (codex-rs/core/src/context: each fragment's start/end marker)
_HARNESS_TAGS = (
    "environment_context",
    "user_instructions",
    "user_shell_command",
    "turn_aborted",
    "subagent_notification",
    "skill",
    "hook_prompt",
    "hook_context",
    "extension_context",
)
_HARNESS_PREFIXES = (
    "<environment_context>",  # older versions test the opening tag only
    "<user_instructions>",
    "warning: your account was flagged for potentially high-risk cyber activity",
    "warning: the maximum number of unified exec processes you can keep open is",
    "warning: apply_patch was requested via ",
)
_WRAPPED = re.compile(r"^<([a-z]+(?:_[a-z]+)+)(?:\s[^>]*)?>.*</\1>$", re.DOTALL | re.IGNORECASE)
_IMAGE_TAG = re.compile(r"^</?(?:local_)?image\b[^>]*>$", re.IGNORECASE)
_HARNESS_EVENT_KINDS = ("user_instructions", "environment_context")  # older `UserMessageEvent.kind`


class CodexRolloutFormat(NotingWriter, Format):
    name = "codex-rollout"
    description = "OpenAI Codex CLI rollout JSONL"
    extension = ".jsonl"
    priority = 10
    malformed_lines = "skip"
    can_write = True

    def write(self, contexts: Sequence[AgentContext], notes: ExportNotes) -> str:
        """A rollout `codex resume <id>` reads, once the file is
        `$CODEX_HOME/sessions/YYYY/MM/DD/rollout-<time>-<id>.jsonl` (see `write_rollout`)."""
        return write_rollout(require_single(contexts, self.name), notes)

    def sniff(self, doc: Document) -> bool:
        if doc.kind != "jsonl" or not isinstance(doc.data, list):
            return False
        head = _enveloped(doc.data[:20])
        return any(
            _is_record(r) and r.get("type") in ("session_meta", "response_item") for r in head
        )

    def load(self, doc: Document) -> list[AgentContext]:
        records = _enveloped(doc.data) if doc.kind == "jsonl" and isinstance(doc.data, list) else []
        if not any(_is_record(r) and r.get("type") != "event_msg" for r in records):
            raise BadInputError(
                "not a Codex rollout: no session_meta/response_item records",
                path=doc.path,
                hint="expected ~/.codex/sessions/.../rollout-*.jsonl",
            )
        builder = CodexRolloutContextBuilder()
        for record in records:
            builder.add(record)
        return [builder.context()]


# --------------------------------------------------------------------------- records -> turns


class CodexRolloutContextBuilder:
    """Builds the `AgentContext` of one Codex rollout: `add` each record in file order (a
    Responses API item is a rollout's `response_item` payload), then `context()`. Public: the
    gateway reads a Responses request's items with it, as the `codex` format reads a rollout."""

    def __init__(self) -> None:
        self.turns: list[Turn] = []
        self.skipped: Counter[str] = Counter()
        self.system: str | None = None
        self.session_id: str | None = None
        self.cwd: str | None = None
        self.cli_version: str | None = None
        self.first_model: str | None = None
        self.current: Turn | None = None  # the assistant message of the response in progress
        self.known_calls: set[str] = set()
        self.n_calls = 0
        self.orphans = 0  # outputs of unknown calls, made user text
        self.model: str | None = None
        self.web_search_ids: list[tuple[Any, str]] = []  # (action, call_id) from web_search_end
        # the user message one of a turn's two records made, until the other one arrives
        self.unpaired: tuple[str, Turn, str] | None = None  # (record kind, turn, _user_key)

    def add(self, record: Any) -> None:
        if not _is_record(record):
            kind = record.get("type") if isinstance(record, dict) else None
            self.skipped[kind if isinstance(kind, str) and kind else "unknown"] += 1
            return
        kind = record["type"]
        payload: dict[str, Any] = record["payload"]
        ts = record.get("timestamp")
        if kind == "session_meta":
            self.session_meta(payload)
        elif kind == "turn_context":
            if isinstance(payload.get("model"), str):
                self.model = payload["model"]
                if self.first_model is None:
                    self.first_model = self.model
        elif kind == "event_msg":
            event = payload.get("type")
            if event == "user_message":
                self.user_event(payload, ts)
            elif event == "token_count":
                self.add_usage(payload.get("info"))
            elif event == "web_search_end" and isinstance(payload.get("call_id"), str):
                self.web_search_ids.append((payload.get("action"), payload["call_id"]))
            else:
                self.skipped[f"event_msg/{event}"] += 1
        elif kind == "compacted":
            if not self.compacted(payload, ts):
                self.skipped["compacted"] += 1
        elif not self.response_item(payload, ts):
            self.skipped[f"response_item/{payload.get('type')}"] += 1

    def session_meta(self, payload: dict[str, Any]) -> None:
        if self.session_id is not None:
            self.skipped["session_meta"] += 1  # a resumed/forked session repeats its header
            return
        self.session_id = str_or_none(payload.get("id"))
        if isinstance(payload.get("cwd"), str):
            self.cwd = payload["cwd"]
        if isinstance(payload.get("cli_version"), str):
            self.cli_version = payload["cli_version"]
        base = payload.get("base_instructions")
        text = base.get("text") if isinstance(base, dict) else None
        if isinstance(text, str) and self.system is None:
            self.system = text

    def response_item(self, payload: dict[str, Any], ts: Any) -> bool:
        """Add one response item; False for those left out (ghost snapshots, encrypted
        compactions, empty messages, unknown future items)."""
        kind = payload.get("type")
        if kind == "message":
            role = payload.get("role")
            blocks = nonempty_parts(payload.get("content"))
            if not blocks:
                return False
            if role == "assistant":
                self.assistant(ts).blocks.extend(blocks)
            elif role in ("developer", "system"):
                self.plain("system", blocks, ts)
            else:
                self.user_item(blocks, ts, str_or_none(payload.get(ORIGIN_FIELD)))
        elif kind == "reasoning":
            self.assistant(ts).blocks.append(_thinking(payload))
        elif kind in _CALL_ITEMS:
            self.add_call(payload, ts)
        elif kind in _OUTPUT_ITEMS:
            self.add_output(payload, ts)
        else:
            return False
        return True

    def close(self) -> None:
        self.current = None

    def user_item(self, blocks: list[Block], timestamp: Any, origin: str | None = None) -> None:
        """A `response_item` user message (what the model got); `origin` is the one compactkit's
        writer recorded for a user message that was not the human's words."""
        key = _user_key(blocks)
        if origin in ORIGINS:
            self.plain("user", blocks, timestamp, **{ORIGIN_KEY: origin})
            self.unpaired = None
            return
        harness = any(isinstance(b, TextBlock) and is_harness_text(b.text) for b in blocks)
        pending = self.unpaired
        if pending is not None and pending[0] == "event" and _same_input(pending[2], key):
            turn = pending[1]
            images = [b for b in turn.blocks if isinstance(b, ImageBlock)]
            has_images = any(isinstance(b, ImageBlock) for b in blocks)
            turn.blocks[:] = [*blocks, *([] if has_images else images)]
            turn.metadata.pop("recorded_as", None)
            if harness:
                turn.metadata[ORIGIN_KEY] = "harness"
            self.unpaired = None
            return
        extra: dict[str, JsonValue] = {ORIGIN_KEY: "harness"} if harness else {}
        self.plain("user", blocks, timestamp, **extra)
        self.unpaired = ("response_item", self.turns[-1], key)

    def user_event(self, payload: dict[str, Any], timestamp: Any) -> None:
        """An `event_msg` `user_message`: the same input as the turn's response item, if any."""
        message = as_text(payload.get("message"))
        images: list[Block] = [image_from_url(u) for u in payload.get("images") or [] if u]
        images += [
            ImageBlock(url=as_text(p))
            for p in payload.get("local_images") or []
            if isinstance(p, str)
        ]
        blocks: list[Block] = [TextBlock(text=message)] if message.strip() else []
        key = _user_key(blocks)
        pending = self.unpaired
        if pending is not None and pending[0] == "response_item" and _same_input(pending[2], key):
            turn = pending[1]
            if images and not any(isinstance(b, ImageBlock) for b in turn.blocks):
                turn.blocks.extend(images)
            self.unpaired = None
            return
        if not blocks and not images:
            return
        harness = payload.get("kind") in _HARNESS_EVENT_KINDS or is_harness_text(message)
        extra: dict[str, JsonValue] = {"recorded_as": "event_msg"}
        if harness:
            extra[ORIGIN_KEY] = "harness"
        self.plain("user", [*blocks, *images], timestamp, **extra)
        self.unpaired = ("event", self.turns[-1], key)

    def compacted(self, payload: dict[str, Any], timestamp: Any) -> bool:
        """A compaction: the summary (and carried-over requests) the model got instead of the
        history before it, as plain user text. False when it holds no readable text."""
        self.unpaired = None
        texts: list[str] = []
        history = payload.get("replacement_history")
        for item in history if isinstance(history, list) else []:
            if not isinstance(item, dict) or item.get("type") != "message":
                continue
            if item.get("role") != "user":
                continue
            parts = [b for b in nonempty_parts(item.get("content")) if isinstance(b, TextBlock)]
            if parts and not any(is_harness_text(b.text) for b in parts):
                texts.append("\n".join(b.text for b in parts))
        message = as_text(payload.get("message"))
        if message and message not in texts:
            texts.append(message)
        for text in texts:
            extra: dict[str, JsonValue] = {ORIGIN_KEY: "summary", "compacted": True}
            self.plain("user", [TextBlock(text=text)], timestamp, **extra)
        return bool(texts)

    def assistant(self, timestamp: Any) -> Turn:
        self.unpaired = None
        if self.current is None:
            meta: dict[str, JsonValue] = {}
            if isinstance(timestamp, str):
                meta["timestamp"] = timestamp
            if self.model:
                meta["model"] = self.model
            self.current = Turn("assistant", metadata=meta)
            self.turns.append(self.current)
        return self.current

    def plain(self, role: Role, blocks: list[Block], timestamp: Any, **extra: JsonValue) -> None:
        self.close()
        meta: dict[str, JsonValue] = {"timestamp": timestamp} if isinstance(timestamp, str) else {}
        meta.update(extra)
        self.turns.append(Turn(role, blocks, meta))

    def call_id(self, raw: Any) -> str:
        self.n_calls += 1
        if isinstance(raw, str) and raw:
            return raw
        return f"call_{self.n_calls}"

    def add_call(self, payload: dict[str, Any], timestamp: Any) -> None:
        kind = payload.get("type")
        turn = self.assistant(timestamp)
        if kind == "function_call":
            call = ToolCallBlock(
                id=self.call_id(payload.get("call_id")),
                name=str(payload.get("name") or "function"),
                input=parse_arguments(payload.get("arguments")),
            )
        elif kind == "custom_tool_call":
            call = ToolCallBlock(
                id=self.call_id(payload.get("call_id")),
                name=str(payload.get("name") or "custom_tool"),
                input=as_text(payload.get("input")),
            )
        elif kind == "local_shell_call":
            call = ToolCallBlock(
                id=self.call_id(payload.get("call_id") or payload.get("id")),
                name="local_shell",
                input=payload.get("action") or {},
            )
        else:  # web_search_call: the id is on the web_search_end event logged just before
            action = payload.get("action")
            raw_id = payload.get("id")
            for i, (ws_action, ws_id) in enumerate(self.web_search_ids):
                if ws_action == action:
                    raw_id = ws_id
                    del self.web_search_ids[i]
                    break
            call = ToolCallBlock(
                id=self.call_id(raw_id), name="web_search", input=action if action else {}
            )
        self.known_calls.add(call.id)
        turn.blocks.append(call)

    def add_output(self, payload: dict[str, Any], timestamp: Any) -> None:
        self.unpaired = None
        call_id = payload.get("call_id")
        parts, is_error = _output_parts(payload.get("output"))
        is_error = is_error or payload.get(ERROR_FIELD) is True  # this format's writer
        if not isinstance(call_id, str) or call_id not in self.known_calls:
            self.orphans += 1
            self.plain(
                "user",
                [p for p in parts if isinstance(p, TextBlock)] or [TextBlock(text="")],
                timestamp,
                orphan_tool_result=call_id if isinstance(call_id, str) else None,
            )
            return
        self.close()
        result = ToolResultBlock(tool_call_id=call_id, content=parts, is_error=is_error)
        last = self.turns[-1] if self.turns else None
        if last is not None and last.role == "tool" and not last.metadata.get("synthesized"):
            last.blocks.append(result)
        else:
            meta: dict[str, JsonValue] = {}
            if isinstance(timestamp, str):
                meta["timestamp"] = timestamp
            self.turns.append(Turn("tool", [result], meta))

    def add_usage(self, info: Any) -> None:
        if not isinstance(info, dict):
            return
        usage = info.get("last_token_usage")
        if not isinstance(usage, dict):
            return
        last = next((t for t in reversed(self.turns) if t.role == "assistant"), None)
        if last is not None and "usage" not in last.metadata:
            last.metadata["usage"] = usage
        self.close()

    def context(self) -> AgentContext:
        repaired = repair_pairing(
            [t.freeze() for t in _join_interleaved(self.turns)],
            close="unless_answered",
            keep_pending="last_assistant",
            orphan_results="keep",  # add_output made the outputs of unknown calls user text
        )
        repaired.orphan_results += self.orphans
        meta = context_metadata(
            CodexRolloutFormat.name,
            session_id=self.session_id,
            cwd=self.cwd,
            cli_version=self.cli_version,
            model=self.first_model,
        )
        note_repairs(meta, repaired)
        note_skipped(meta, self.skipped)
        ctx = AgentContext(
            system_instruction=self.system, messages=tuple(repaired.messages), metadata=meta
        )
        return mark_words(ctx, _users_words)


# --------------------------------------------------------------------------- helpers


def _join_interleaved(turns: list[Turn]) -> list[Turn]:
    """Consecutive assistant messages joined where the earlier one made a call whose output
    comes only after the later one (Codex runs calls in parallel and records each output when it
    finishes: `custom_tool_call A`, `function_call B`, output B, output A). The model had both calls
    open at once, as one turn; apart, A's result would not follow A's message, which no provider
    accepts. The joined message keeps the first one's metadata (`usage` of the last when the first
    has none) and counts the responses it holds in `metadata["joined_responses"]`."""
    answered = {
        b.tool_call_id
        for t in turns
        if t.role == "tool"
        for b in t.blocks
        if isinstance(b, ToolResultBlock)
    }
    out: list[Turn] = []
    for turn in turns:
        last = out[-1] if out else None
        if (
            turn.role == "assistant"
            and last is not None
            and last.role == "assistant"
            and any(isinstance(b, ToolCallBlock) and b.id in answered for b in last.blocks)
        ):
            last.blocks.extend(turn.blocks)
            if "usage" not in last.metadata and "usage" in turn.metadata:
                last.metadata["usage"] = turn.metadata["usage"]
            count = last.metadata.get("joined_responses")
            last.metadata["joined_responses"] = (count if isinstance(count, int) else 1) + 1
            continue
        out.append(turn)
    return out


def _enveloped(records: list[Any]) -> list[Any]:
    """The records of a rollout written before Codex wrapped each line in `{"type", "payload"}`
    (2025 releases: a first line `{"id", "timestamp", "instructions", "git"}`, then each response
    item bare, with `{"record_type": "state"}` lines between turns) in today's envelope; a
    rollout of today's shape is returned as it is."""
    first = next((r for r in records if r is not None), None)
    if not (
        isinstance(first, dict)
        and "type" not in first
        and "kind" not in first  # a software-agent-sdk event has an id and timestamp too
        and isinstance(first.get("id"), str)
        and isinstance(first.get("timestamp"), str)
    ):
        return records
    out: list[Any] = []
    for record in records:
        if record is first:
            meta = {k: first[k] for k in ("id", "timestamp", "git") if k in first}
            out.append({"type": "session_meta", "payload": meta})
        elif (
            isinstance(record, dict)
            and "payload" not in record
            and record.get("type") in _LEGACY_ITEMS
        ):
            out.append({"type": "response_item", "payload": record})
        elif isinstance(record, dict) and record.get("record_type") == "state":
            out.append({"type": "state"})  # the turn's saved state: nothing the model got
        else:
            out.append(record)
    return out


def _is_record(value: Any) -> bool:
    return (
        isinstance(value, dict)
        and value.get("type") in _RECORD_TYPES
        and isinstance(value.get("payload"), dict)
    )


def _output_parts(output: Any) -> tuple[tuple[ContentPart, ...], bool]:
    """A function-call output (a string, a list of content items, or {content, success})."""
    is_error = False
    if isinstance(output, dict) and ("content" in output or "success" in output):
        is_error = output.get("success") is False
        output = output.get("content")
    if isinstance(output, (str, list, dict)) or output is None:
        return parts_from_content(output), is_error
    return (TextBlock(text=as_text(output)),), is_error


def is_harness_text(text: str) -> bool:
    """Whether a user-role text is one Codex wrote itself (Codex's own test: a known start and end
    marker, AGENTS.md instructions, legacy warnings; any other snake_case tag wrapping all of it)."""
    stripped = text.strip()
    lowered = stripped.lower()
    if lowered.startswith("# agents.md instructions for ") and lowered.endswith("</instructions>"):
        return True
    if lowered.startswith(_HARNESS_PREFIXES):
        return True
    for tag in _HARNESS_TAGS:
        opened = lowered.startswith(f"<{tag}") and lowered[len(tag) + 1 : len(tag) + 2] in "> \n"
        if opened and lowered.endswith(f"</{tag}>"):
            return True
    return bool(_WRAPPED.match(stripped))


def _user_key(blocks: list[Block]) -> str:
    """What a user message says, for telling a turn's response item and event apart from others."""
    texts = [
        b.text for b in blocks if isinstance(b, TextBlock) and not _IMAGE_TAG.match(b.text.strip())
    ]
    return " ".join(" ".join(texts).split())


def _same_input(a: str, b: str) -> bool:
    # old versions put a preamble ("## My request for Codex:") before the text the event repeats
    return a == b or (bool(a) and bool(b) and (a.endswith(b) or b.endswith(a)))


def _thinking(payload: dict[str, Any]) -> ThinkingBlock:
    def texts(items: Any) -> list[str]:
        if not isinstance(items, list):
            return []
        return [str(i.get("text")) for i in items if isinstance(i, dict) and i.get("text")]

    text = "\n\n".join(texts(payload.get("summary")) or texts(payload.get("content")))
    encrypted = payload.get("encrypted_content")
    signature = encrypted if isinstance(encrypted, str) and encrypted else None
    return ThinkingBlock(thinking=text, signature=signature, redacted=not text and bool(signature))


# --------------------------------------------------------------------------- the user's words

_SHELL_COMMAND = re.compile(
    r"\A\s*<user_shell_command>\n(?:<command>\n(?P<command>.*?)\n</command>\n"
    r"|(?P<legacy>.*?)\n</user_shell_command>)",
    re.DOTALL,
)
"""A command the user ran with `!` (codex-rs/core/src/user_shell_command.rs: `<command>` inside
`<user_shell_command>`; older versions: the command between the tags, then
`<user_shell_command_output>`)."""
ASK_TOOL = "request_user_input"
"""The tool whose output is the user's answers (codex-rs/core/src/tools/handlers/
request_user_input.rs: the `RequestUserInputResponse` as JSON, `{"answers": {...}}`)."""


def _users_words(where: Where, text: str) -> list[Span]:
    """The user's words in what Codex wrote itself: the command of a `!` shell command (a harness
    user message) and the answers of `request_user_input` (a tool result)."""
    if where.result is not None:
        if where.tool == ASK_TOOL and '"answers"' in text and not where.result.is_error:
            return [Span(0, len(text), "user-answer")]
        return []
    if where.message.role != "user" or where.message.origin != "harness":
        return []
    match = _SHELL_COMMAND.match(text)
    if match is None:
        return []
    group = "command" if match.group("command") is not None else "legacy"
    if not match.group(group).strip():
        return []
    return [Span(match.start(group), match.end(group), "user-command")]


# --------------------------------------------------------------------------- writing

ORIGIN_FIELD = "compactkit_origin"
"""The field a written user message keeps its origin in (Codex's reader ignores fields it does not
know; this loader reads it back, so a user-role message that was not the human's words stays so)."""

ERROR_FIELD = "compactkit_is_error"
"""The field (true) of a written call output whose result is an error: Codex writes an output as
a plain string or a list of content items, never with its `success` flag
(`FunctionCallOutputPayload`'s `Serialize`), and its reader refuses any other shape of `output`;
it ignores this field, which this loader reads back."""

WRITER_CLI_VERSION = "0.171.0"
"""The Codex version whose resume of a written rollout is tested (tests/live/test_resume.py)."""


rollout_id_of = session_uuid
"""The id a written session takes (see `_util.session_uuid`)."""


def write_rollout(ctx: AgentContext, notes: ExportNotes | None = None) -> str:
    """`ctx` as a Codex rollout: a `session_meta` line (`id`, `cwd`, `cli_version`, the system
    instruction as `base_instructions`), then one `response_item` per item the model is given,
    which is all `codex resume` rebuilds its history from: system messages as `developer`
    messages, user messages as `user` messages (`input_text`, images as `input_image`),
    thinking as `reasoning` (its text as the summary, a signature as `encrypted_content`),
    assistant text as `assistant` messages, calls as `function_call` (a string input as
    `custom_tool_call`) and results as the matching `..._output` (a `function_call_output`
    holding images as a list of `input_text` / `input_image` items; the error flag of a failed
    result in `compactkit_is_error`, which Codex ignores and this loader reads back).

    What a rollout cannot carry is counted in `notes`: markers a strategy left are written as
    the text a model is shown for them, images in the output of a custom tool (a string) are
    dropped, message names are dropped."""
    rollout = rollout_id_of(ctx)
    stamp = next(
        (
            m.metadata["timestamp"]
            for m in ctx.messages
            if isinstance(m.metadata.get("timestamp"), str)
        ),
        "1970-01-01T00:00:00.000Z",
    )
    meta: dict[str, Any] = {
        "id": rollout,
        "timestamp": stamp,
        "cwd": ctx.metadata.get("cwd") if isinstance(ctx.metadata.get("cwd"), str) else "/",
        "originator": "compactkit",
        "cli_version": str_or_none(ctx.metadata.get("cli_version")) or WRITER_CLI_VERSION,
        "source": "cli",
    }
    if ctx.system_instruction:
        meta["base_instructions"] = {"text": ctx.system_instruction}
    items: list[dict[str, Any]] = []
    custom: set[str] = set()
    pinned = {p.etag for p in ctx.pins}
    notes = notes if notes is not None else ExportNotes()
    note_agent_losses(ctx, notes, system_prompt=True, system_messages=True, model_on_messages=False)
    for number, message in enumerate(ctx.messages):
        if message.role == "user" and pinned:  # the user's words the reader cut out go back
            blocks = rejoin(message.content, pinned, Where(number, message), _users_words)
            message = message.model_copy(update={"content": tuple(blocks)})
        items.extend(_items(message, custom, notes))
    lines = [{"timestamp": stamp, "type": "session_meta", "payload": meta}]
    lines += [{"timestamp": stamp, "type": "response_item", "payload": item} for item in items]
    return "".join(json.dumps(line, ensure_ascii=False) + "\n" for line in lines)


def _items(message: Any, custom: set[str], notes: ExportNotes) -> list[dict[str, Any]]:
    if message.role in ("user", "system"):
        role = "user" if message.role == "user" else "developer"
        content = [
            _input_part(b)
            for b in message.content
            if not isinstance(b, (ToolCallBlock, ToolResultBlock))
        ]
        if not content:
            return []
        item: dict[str, Any] = {"type": "message", "role": role, "content": content}
        if role == "user" and message.origin is not None:
            item[ORIGIN_FIELD] = message.origin  # Codex ignores it; the loader reads it back
        return [item]
    if message.role == "tool":
        return [_output(block, custom, notes) for block in message.tool_results]
    out: list[dict[str, Any]] = []
    text: list[str] = []
    for block in message.content:
        if isinstance(block, ThinkingBlock):
            summary = [{"type": "summary_text", "text": block.thinking}] if block.thinking else []
            out.append(
                {
                    "type": "reasoning",
                    "summary": summary,
                    "content": None,
                    "encrypted_content": block.signature,
                }
            )
        elif isinstance(block, ToolCallBlock):
            if text:
                out.append(_assistant_text(text))
                text = []
            if isinstance(block.input, str):
                custom.add(block.id)
                out.append(
                    {
                        "type": "custom_tool_call",
                        "status": "completed",
                        "call_id": block.id,
                        "name": block.name,
                        "input": block.input,
                    }
                )
            else:
                out.append(
                    {
                        "type": "function_call",
                        "name": block.name,
                        "arguments": json.dumps(block.input, ensure_ascii=False),
                        "call_id": block.id,
                    }
                )
        elif isinstance(block, ImageBlock):
            notes.drop("images in assistant messages")  # output_text only
        else:
            text.append(block_as_text(block))
    if text:
        out.append(_assistant_text(text))
    return out


def _output(block: ToolResultBlock, custom: set[str], notes: ExportNotes) -> dict[str, Any]:
    """A tool result as the `..._output` item of its call (see `write_rollout`)."""
    images = sum(isinstance(p, ImageBlock) for p in block.content)
    texts = (block_as_text(p) for p in block.content if not isinstance(p, ImageBlock))
    output: str | list[dict[str, Any]] = "\n".join(texts)  # a marker as its text
    if block.tool_call_id in custom:
        kind = "custom_tool_call_output"
        notes.drop("images in custom tool outputs", images)
    else:
        kind = "function_call_output"
        if images:
            output = [_input_part(p) for p in block.content]
    item: dict[str, Any] = {"type": kind, "call_id": block.tool_call_id, "output": output}
    if block.is_error:
        item[ERROR_FIELD] = True
    return item


def _assistant_text(texts: list[str]) -> dict[str, Any]:
    return {
        "type": "message",
        "role": "assistant",
        "content": [{"type": "output_text", "text": t} for t in texts],
    }


def _input_part(block: Any) -> dict[str, Any]:
    if isinstance(block, ImageBlock):
        url = (
            block.url
            if block.data is None
            else f"data:{block.media_type or 'image/png'};base64,{block.data}"
        )
        return {"type": "input_image", "image_url": url}
    return {"type": "input_text", "text": block_as_text(block)}


__all__ = [
    "ERROR_FIELD",
    "CodexRolloutFormat",
    "is_harness_text",
    "rollout_id_of",
    "write_rollout",
]
