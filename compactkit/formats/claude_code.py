"""Claude Code session JSONL (~/.claude/projects/*/<uuid>.jsonl).

Upstream: what Claude Code writes and sends, read in its public source and in readers of the
format (checked for versions 1.0.x to 2.1.x):

* record types: d-kimuson/claude-code-viewer `src/lib/conversation-schema/` (zod schemas of every
  entry: user, assistant, system with its subtypes, summary, file-history-snapshot,
  queue-operation, progress, custom-title, agent-name, pr-link, last-prompt, attachment);
* what reaches the model: Claude Code 2.1 `src/utils/sessionStorage.ts` (`isTranscriptMessage`:
  user, assistant, attachment and system records are the transcript; progress is UI only),
  `src/utils/messages.ts` (`normalizeMessagesForAPI` sends user and assistant records, turns
  `system` records of subtype `local_command` into user messages and drops every other system
  record; attachments become user messages, a `queued_command` one holding the prompt the user
  typed while the model worked), `src/utils/messageQueueManager.ts` (the `queue-operation`
  records: `enqueue` with the text, `dequeue` when it becomes the next prompt record, `remove`
  when a running turn absorbs it, `popAll` when it goes back to the input box) and
  `src/constants/xml.ts` (the tags of command and terminal text), read in public copies of the
  2.1.88 source;
* newer writers: `remove` carries `content` and `reason: "absorbed_mid_turn"` (2.1.246 on) and
  the absorbed prompt is also an `attachment` record of type `queued_command`
  (`commandMode`, `origin`, `prompt` as a string or content blocks).

How a file becomes contexts:

* Records with `isSidechain: true` belong to subagents (the Task tool, the compaction agent).
  The records of one `agentId` are one conversation (a sidechain without one: each tree), so a
  subagent's own file (`<session>/subagents/agent-<id>.jsonl`, whose first records point into
  the main session file) loads as one; the main conversation is every non-sidechain record.
* Claude Code skips a line that is not JSON (`parseJSONL`), so does this format (`formats.loading`
  warns and counts it). A record whose parent is not in the file (lost on such a line, or in the
  main session file) follows the record before it in its thread, where Claude Code's chain
  would stop: the turns before the gap are kept. A file with
  several conversations sets `metadata["conversation"]`; a sidechain also records `sidechain`,
  `agent_id` and, when its prompt matches a Task call of the main conversation in the same file,
  `parent_tool_call_id`.
* The records form a tree through `parentUuid` (`logicalParentUuid` across a compact boundary).
  We take the last user/assistant record in file order as the leaf and keep the path from it to
  the root, plus the records hanging off that path that belong to the same turns: newer Claude
  Code versions write each block of one API response as its own record (same `message.id`) and
  parent each parallel tool result on the record holding its call, so the "path" alone would
  lose them. Records that would make a message (user, assistant, local command, queued prompt)
  on other branches (rewound or edited turns) are dropped and counted in
  `metadata["off_path_records"]`. Kept records are read in file order.
* Assistant records with one `message.id` merge into one assistant message (thinking, text and
  tool calls in file order; `usage`/`stop_reason` from the last record, which is the final one).
* User records holding `tool_result` blocks become `tool` messages (one per record); the
  `toolUseResult` sidecar duplicates them and is ignored.

Where the user's words are, each loaded as one user message exactly once:

* a `user` record's text and images (`content` a string, or `text`/`image`/`document` parts:
  a pasted image stays an `ImageBlock`); a slash command the user typed (`<command-name>`,
  `<command-args>`) and a `!` shell command (`<bash-input>`) are the user's words too;
* a `system` record of subtype `local_command` (a local slash command and its output, as newer
  versions write them; the model sees them as user messages);
* a prompt typed while the model worked and absorbed into the running turn: an `attachment`
  record of type `queued_command` (2.1), else, for versions that write only the queue records,
  a `queue-operation` `enqueue` later retired by `remove` (`metadata["queued_command"] = True`,
  placed before the next assistant message). The queue is replayed to know which prompt each
  `remove` retired; one that an attachment also holds (same text) is not added again. A queued
  prompt retired by `dequeue` comes back as an ordinary `user` record and is read there;
* inside tool results, pinned where they are (`AgentContext.pins`, see `_users_words`): the
  feedback typed when rejecting a call, the answers to AskUserQuestion, a plan the user edited
  before approving it (ExitPlanMode); and a `<bash-input>`
  command in a turn Claude Code marked as its own. An approval's text (`acceptFeedback`, a text
  block after the `tool_result`) is a user message of its own.

A user-role message that is not the user's words has `metadata["origin"]`: `"harness"` for what
Claude Code wrote itself (`isMeta` records such as the local-command caveat and expanded
skill/command prompts; `isVisibleInTranscriptOnly` records; text that is only
`<local-command-stdout>`/`-stderr>`, `<bash-stdout>`, `<system-reminder>`, `<task-notification>`,
IDE context or an `[Request interrupted by user]` notice; records or queued commands whose
`origin.kind` is not `human`), `"summary"` for a `/compact` summary (`isCompactSummary`, also
`metadata["compact_summary"] = True`), kept as the plain text Claude Code sent its model (no
recovery entry: a loaded session is a fixed point of `expand`). A message holding both the
user's text and injected text counts as the user's.

Everything else is counted by kind in `metadata["skipped_records"]` (see `note_skipped`):
`summary` titles (the title still goes to `metadata["title"]`), `file-history-snapshot`, other
`system/<subtype>` records (`compact_boundary`, `turn_duration`, `api_error`, `informational`,
`stop_hook_summary`...), `progress`, `attachment/<type>` other than `queued_command` (hook
output, file and memory context Claude Code rebuilds each turn), queue records that delivered
nothing (`queue-operation/popAll`, an `enqueue` taken back or never delivered), and any record
type this loader does not know. Records without a `uuid` count toward the main conversation.
Claude Code does not store its system prompt: `system_instruction` stays None, except in a
session this format wrote, whose first record may hold the system prompt (see `write_session`).
"""

from __future__ import annotations

import itertools
import json
import re
import uuid
from collections import Counter, defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from pydantic import JsonValue

from ..context import (
    COMMAND_KEY,
    ORIGIN_KEY,
    AgentContext,
    Block,
    ContentPart,
    ImageBlock,
    Message,
    TextBlock,
    ThinkingBlock,
    ToolCallBlock,
    ToolResultBlock,
)
from ..errors import BadInputError
from ._chat import anthropic_block, block_as_text
from ._marks import Span, Where, find_after, mark_words, rejoin
from ._pairing import NO_RESULT_TEXT, Turn, repair_pairing
from ._util import (
    as_dict,
    as_text,
    context_metadata,
    image_from,
    nonempty_str,
    note_repairs,
    note_skipped,
    parts_from_content,
    session_uuid,
    str_or_none,
)
from .base import BadLine, Document, Format, read_document, require_single
from .export import ExportNotes, NotingWriter, note_agent_losses

_SNIFF_LIMIT = 50

_HARNESS_PREFIXES = (
    # src/constants/xml.ts: terminal output and the local-command caveat, not a user prompt
    "<local-command-stdout>",
    "<local-command-stderr>",
    "<local-command-caveat>",
    "Caveat: The messages below were generated by the user while running local commands",
    "<bash-stdout>",
    "<bash-stderr>",
    "<system-reminder>",
    "<task-notification>",
    "<teammate-message",
    "<new-diagnostics>",
    "<ide_opened_file>",
    "<ide_selection>",
    "[Request interrupted by user",  # INTERRUPT_MESSAGE, INTERRUPT_MESSAGE_FOR_TOOL_USE
)
"""How text Claude Code wrote into a user turn begins (a user's command, `<command-name>` or
`<bash-input>`, is the user's words)."""

_ABSORBED = (None, "absorbed_mid_turn")
"""`remove` reasons that mean the running turn took the queued prompt (none before 2.1.246)."""

_COMMAND_PARTS = re.compile(
    r"<command-(?:name|message)>[^<]*</command-(?:name|message)>|<command-args>\s*</command-args>"
)
"""The tags of a slash command typed with no arguments (`/clear`: nothing is left without them)."""


class ClaudeCodeFormat(NotingWriter, Format):
    name = "claude-code"
    description = "Claude Code session JSONL (~/.claude/projects/*/<uuid>.jsonl)"
    extension = ".jsonl"
    priority = 10
    malformed_lines = "skip"
    can_write = True

    def write(self, contexts: Sequence[AgentContext], notes: ExportNotes) -> str:
        """A session Claude Code resumes (`claude --resume <session id>` once the file is
        `~/.claude/projects/<cwd as a-b-c>/<session id>.jsonl`), see `write_session`."""
        return write_session(require_single(contexts, self.name), notes)

    def sniff(self, doc: Document) -> bool:
        try:
            data: Any = doc.data
            if doc.kind == "json":
                data = [data] if isinstance(data, dict) else []
            if not isinstance(data, list):
                return False
            return any(isinstance(r, dict) and _is_message_record(r) for r in data[:_SNIFF_LIMIT])
        except Exception:
            return False

    def read_layout(self, path: Path) -> Document | None:
        """A session with its subagents' transcripts (Claude Code 2.x): `<session>.jsonl` and
        `<session>/subagents/agent-<id>.jsonl`, given as the session file, its folder or that
        folder's `subagents/`, read as one document (the session's records, then each
        subagent's, files in name order)."""
        session = path
        if path.is_dir() and path.name == "subagents" and not (path / "subagents").is_dir():
            session = path.parent
        if session.is_dir():
            main, folder = session.parent / f"{session.name}.jsonl", session
        elif path.suffix == ".jsonl":
            main, folder = path, path.with_suffix("")
        else:
            return None
        subagents = folder / "subagents"
        files = sorted(subagents.glob("agent-*.jsonl")) if subagents.is_dir() else []
        if not files or not main.is_file():
            return None
        records: list[Any] = []
        bad: list[BadLine] = []
        for file in (main, *files):
            part = read_document(file)
            records.extend(part.records if part.kind == "jsonl" else [part.data])
            bad.extend(replace(b, path=str(file)) for b in part.bad_lines)
        return Document(path=str(path), kind="jsonl", data=records, bad_lines=tuple(bad))

    def load(self, doc: Document) -> list[AgentContext]:
        records = _records(doc)
        if not any(_is_message_record(r) for r in records):
            raise BadInputError(
                "not a Claude Code session: no user/assistant records with uuid and parentUuid",
                path=doc.path,
            )
        return _RecordTree(records).contexts()


# --------------------------------------------------------------------------- records -> turns


class _ClaudeCodeContextBuilder:
    """Turns the kept records of one conversation, in file order, into turns."""

    def __init__(self, absorbed: Counter[str]) -> None:
        self.turns: list[Turn] = []
        self.skipped: Counter[str] = Counter()
        self.open_response: tuple[int, str] | None = None  # (turn index, message.id)
        self.queue: list[_Queued] = []
        self.injections: list[Turn] = []  # queued prompts the running turn took
        self.absorbed = Counter(absorbed)  # queued_command attachment texts not yet matched
        self.queued_commands = 0
        self.system_prompt: str | None = None

    def add(self, record: dict[str, Any]) -> None:
        kind = _kind(record)
        if kind.startswith("queue-operation"):
            self._queue(record, kind)
        elif kind == "assistant" and isinstance(record.get("message"), dict):
            self._assistant(record)
        elif kind == "user" and isinstance(record.get("message"), dict):
            self._user(record)
        elif kind == "system/local_command":
            self._local_command(record)
        elif kind == "attachment/queued_command":
            self._queued_attachment(record)
        else:  # UI events, snapshots, context Claude Code rebuilds, unknown types
            self.skipped[kind] += 1

    # ----------------------------------------------------------------- queued prompts

    def _queue(self, record: dict[str, Any], kind: str) -> None:
        operation = record.get("operation")
        content = record.get("content")
        if operation == "enqueue":
            blocks = _user_blocks(content)
            self.queue.append(_Queued(blocks, _queued_text(content), record.get("timestamp")))
            return
        item = self._take(content)
        if operation == "dequeue" and item is not None:
            return  # comes back as the next prompt record, read there
        if operation == "remove" and record.get("reason") in _ABSORBED:
            if item is None and isinstance(content, (str, list)):  # its enqueue is missing
                item = _Queued(_user_blocks(content), _queued_text(content))
            if item is not None:
                self._absorb(item, record.get("timestamp"))
                return
        self.skipped[kind] += 1  # popAll (back to the input box), or nothing to take
        if item is not None:
            self.skipped["queue-operation/enqueue"] += 1

    def _take(self, content: Any) -> _Queued | None:
        """The queued prompt an operation retires: the one with its text, else the next in line."""
        if not self.queue:
            return None
        if isinstance(content, (str, list)):
            text = _queued_text(content)
            for index, item in enumerate(self.queue):
                if item.text == text:
                    return self.queue.pop(index)
        index = next((i for i, q in enumerate(self.queue) if not q.later), 0)
        return self.queue.pop(index)

    def _absorb(self, item: _Queued, timestamp: Any) -> None:
        """A prompt the running turn took, with no record of its own in older versions."""
        if self.absorbed[item.text] > 0:  # the queued_command attachment holds it
            self.absorbed[item.text] -= 1
            return
        if not item.blocks:
            self.skipped["queue-operation/enqueue"] += 1  # a prompt Claude Code did not log
            return
        meta: dict[str, JsonValue] = {"queued_command": True}
        _put(meta, "timestamp", timestamp if timestamp is not None else item.timestamp)
        if _harness_blocks(item.blocks):
            meta[ORIGIN_KEY] = "harness"
        self.injections.append(Turn("user", item.blocks, meta))

    def _queued_attachment(self, record: dict[str, Any]) -> None:
        attachment = as_dict(record.get("attachment"))
        blocks = _user_blocks(attachment.get("prompt"))
        if not blocks:
            self.skipped["attachment/queued_command"] += 1
            return
        meta: dict[str, JsonValue] = {"queued_command": True}
        _put(meta, "uuid", record.get("uuid"))
        _put(meta, "timestamp", record.get("timestamp"))
        _put(meta, "command_mode", attachment.get("commandMode"))
        origin = as_dict(attachment.get("origin")).get("kind")
        if (
            attachment.get("commandMode") not in (None, "prompt")
            or origin not in (None, "human")
            or attachment.get("isMeta") is True
            or record.get("isMeta") is True
            or _harness_blocks(blocks)
        ):
            meta[ORIGIN_KEY] = "harness"
        self.injections.append(Turn("user", blocks, meta))

    def _flush_injections(self) -> None:
        for turn in self.injections:
            self._append(turn)
            self.queued_commands += 1
        self.injections.clear()

    # ----------------------------------------------------------------- assistant records

    def _assistant(self, record: dict[str, Any]) -> None:
        message = record["message"]
        blocks = _assistant_blocks(message.get("content"))
        response_id = message.get("id") if isinstance(message.get("id"), str) else None
        if self.open_response is not None and response_id == self.open_response[1]:
            draft = self.turns[self.open_response[0]]
            known = {b.id for b in draft.blocks if isinstance(b, ToolCallBlock)}
            draft.blocks.extend(
                b for b in blocks if not (isinstance(b, ToolCallBlock) and b.id in known)
            )
            _update_response_metadata(draft.metadata, record)
            return
        if not blocks:
            self.skipped["assistant"] += 1
            return
        self._flush_injections()
        meta: dict[str, JsonValue] = {}
        if response_id:
            meta["id"] = response_id
        _put(meta, "uuid", record.get("uuid"))
        _put(meta, "timestamp", record.get("timestamp"))
        _put(meta, "model", message.get("model"))
        _update_response_metadata(meta, record)
        self.turns.append(Turn("assistant", blocks, meta))
        self.open_response = (len(self.turns) - 1, response_id) if response_id else None

    # ----------------------------------------------------------------- user records

    def _user(self, record: dict[str, Any]) -> None:
        content = record["message"].get("content")
        if record.get(SYSTEM_PROMPT_FIELD) is True and not self.turns and isinstance(content, str):
            self.system_prompt = content  # this format's writer put it there
            return
        meta: dict[str, JsonValue] = {}
        _put(meta, "uuid", record.get("uuid"))
        _put(meta, "timestamp", record.get("timestamp"))
        if record.get("isMeta") is True:
            meta["is_meta"] = True
        items: list[Any] = content if isinstance(content, list) else [content]
        results: list[Block] = []
        rest: list[Block] = []
        for item in items:
            if isinstance(item, dict) and item.get("type") == "tool_result":
                results.append(
                    ToolResultBlock(
                        tool_call_id=as_text(item.get("tool_use_id")),
                        content=_result_parts(item.get("content")),
                        is_error=item.get("is_error") is True,
                    )
                )
            else:
                rest.extend(_user_blocks(item))
        if results:
            self._append(Turn("tool", results, dict(meta)), keep_response=True)
        if not rest:
            if not results:
                self.skipped["user"] += 1  # an empty prompt
            return
        if record.get("isCompactSummary") is True:
            # Claude Code's own /compact summary: the text its model was sent, kept as it is
            meta["compact_summary"] = True
            meta[ORIGIN_KEY] = "summary"
        elif (
            record.get("isMeta") is True
            or record.get("isVisibleInTranscriptOnly") is True  # sent as synthetic, not typed
            or as_dict(record.get("origin")).get("kind") not in (None, "human")
            or _harness_blocks(rest)
        ):
            meta[ORIGIN_KEY] = "harness"
        self._append(Turn("user", rest, meta))

    def _local_command(self, record: dict[str, Any]) -> None:
        """A local slash command or its output, which the model receives as a user message."""
        blocks = _user_blocks(record.get("content"))
        if not blocks:
            self.skipped["system/local_command"] += 1
            return
        meta: dict[str, JsonValue] = {"local_command": True}
        _put(meta, "uuid", record.get("uuid"))
        _put(meta, "timestamp", record.get("timestamp"))
        if _harness_blocks(blocks):
            meta[ORIGIN_KEY] = "harness"
        self._append(Turn("user", blocks, meta))

    # ----------------------------------------------------------------- pairing

    def _append(self, turn: Turn, keep_response: bool = False) -> None:
        self.turns.append(turn)
        if not keep_response:
            self.open_response = None

    def close(self) -> None:
        """Add what the records left waiting: prompts taken by a turn the file ends in, and the
        marks of bare local commands; count queued prompts never delivered."""
        self._flush_injections()
        _mark_local_commands(self.turns)
        self.skipped["queue-operation/enqueue"] += len(self.queue)  # never delivered
        self.queue.clear()

    def context(self, meta: dict[str, JsonValue]) -> AgentContext:
        """The context (after `close`) with `meta` and the counts of what pairing repair did.

        A call still open when the next non-tool message starts gets a synthesized error result;
        only calls of the last assistant message may stay pending. A result whose call was not
        made yet gets a synthesized call (`name="unknown"`, one message each) just before its
        tool message; a second result for one call is dropped (counted in `orphan_results`).
        """
        repaired = repair_pairing(
            [turn.freeze() for turn in self.turns],
            close="all",
            keep_pending="last_output_assistant",
            synthesize_calls="if_not_called_yet",
            one_message_per_call=True,
            unknown_tool_name="unknown",
            orphan_results="drop",
        )
        note_repairs(meta, repaired)
        if self.queued_commands:
            meta["queued_commands"] = self.queued_commands
        note_skipped(meta, self.skipped)
        ctx = AgentContext(
            system_instruction=self.system_prompt, messages=tuple(repaired.messages), metadata=meta
        )
        return mark_words(ctx, _users_words)


# --------------------------------------------------------------------------- the record tree


class _RecordTree:
    """Which records make each conversation of a file: the `parentUuid` tree, its sidechains, the
    path to the leaf and the records hanging off it."""

    def __init__(self, records: list[dict[str, Any]]) -> None:
        self.records = records
        self.by_uuid: dict[str, int] = {}
        self.previous: dict[int, int] = {}  # record -> the record before it in its thread
        last_in_thread: dict[tuple[bool, str | None], int] = {}
        for index, record in enumerate(records):
            uuid = record.get("uuid")
            if isinstance(uuid, str) and uuid not in self.by_uuid:
                self.by_uuid[uuid] = index
                thread = _thread(record)
                if thread in last_in_thread:
                    self.previous[index] = last_in_thread[thread]
                last_in_thread[thread] = index

    def parent(self, index: int) -> int | None:
        """The record `index` follows. A parent that is not in the file (a line lost to a crash,
        or, in a subagent's own file, a record of the main session) is bridged to the record
        before it in its thread, so that the turns before the gap stay in the conversation
        (Claude Code's own chain would stop there)."""
        record = self.records[index]
        link = record.get("parentUuid")
        if link is None:
            link = record.get("logicalParentUuid")
        if not isinstance(link, str):
            return None
        parent = self.by_uuid.get(link)
        if parent is None:
            parent = self.previous.get(index)
        return None if parent == index else parent

    def root(self, index: int, memo: dict[int, int]) -> int:
        seen: list[int] = []
        current = index
        while current not in memo:
            seen.append(current)
            parent = self.parent(current)
            if parent is None or parent in seen:
                memo[current] = current
                break
            current = parent
        top = memo[current]
        for i in seen:
            memo[i] = top
        return top

    def groups(self) -> list[list[int]]:
        """Record indices of each conversation (main first when it starts first), file order."""
        main: list[int] = []
        sidechains: dict[Any, list[int]] = defaultdict(list)
        memo: dict[int, int] = {}
        for index in self.by_uuid.values():
            record = self.records[index]
            if record.get("isSidechain") is True:
                agent = record.get("agentId")  # one subagent's records, whatever their links
                key = ("agent", agent) if isinstance(agent, str) else self.root(index, memo)
                sidechains[key].append(index)
            else:
                main.append(index)
        groups = [sorted(g) for g in (main, *sidechains.values())]
        groups = [g for g in groups if any(_is_message_record(self.records[i]) for i in g)]
        return sorted(groups, key=lambda g: g[0])

    def active(self, group: list[int]) -> tuple[list[int], int]:
        """The kept records of one conversation (file order) and how many were off the path."""
        members = set(group)
        messages = [i for i in group if _is_message_record(self.records[i])]
        leaf = messages[-1]
        kept: set[int] = set()
        current: int | None = leaf
        while current is not None and current in members and current not in kept:
            kept.add(current)
            current = self.parent(current)
        response_ids = {
            _message_id(self.records[i]) for i in kept if self.records[i].get("type") == "assistant"
        }
        response_ids.discard(None)
        calls = {c for i in kept for c in _call_ids(self.records[i])}
        answered = {r for i in kept for r in _result_ids(self.records[i])}
        changed = True
        while changed:
            changed = False
            for i in group:
                if i in kept or self.parent(i) not in kept:
                    continue
                record = self.records[i]
                kind = record.get("type")
                if kind == "assistant":
                    attach = _message_id(record) in response_ids
                elif kind == "user":
                    results = _result_ids(record)
                    attach = (
                        bool(results)
                        and _only_tool_results(record)
                        and all(r in calls and r not in answered for r in results)
                    )
                else:
                    attach = True  # progress/system events: skipped later, kept as links
                if attach:
                    kept.add(i)
                    calls.update(_call_ids(record))
                    answered.update(_result_ids(record))
                    changed = True
        off_path = sum(1 for i in group if i not in kept and _is_content_record(self.records[i]))
        return sorted(kept), off_path

    def contexts(self) -> list[AgentContext]:
        groups = self.groups()
        if not groups:  # each message record's uuid taken by another record
            return []
        main_first = self.records[groups[0][0]].get("isSidechain") is not True
        task_prompts = self._task_prompts(groups[0]) if main_first else {}
        task_calls = self._task_calls(groups[0]) if main_first else {}
        titles = {
            r["leafUuid"]: r["summary"]
            for r in self.records
            if r.get("type") == "summary"
            and isinstance(r.get("leafUuid"), str)
            and isinstance(r.get("summary"), str)
        }
        in_tree = {i for g in groups for i in g}
        queue_ops = [i for i, r in enumerate(self.records) if r.get("type") == "queue-operation"]
        # records outside every conversation tree: titles, snapshots, queue records, duplicates
        loose = Counter(
            _kind(r)
            for i, r in enumerate(self.records)
            if i not in in_tree and r.get("type") != "queue-operation"
        )
        absorbed = Counter(
            _queued_text(as_dict(r.get("attachment")).get("prompt"))
            for r in self.records
            if _kind(r) == "attachment/queued_command"
        )
        owner = next(
            (n for n, g in enumerate(groups) if self.records[g[0]].get("isSidechain") is not True),
            0,
        )  # the main conversation (else the first) gets the records of the whole file
        out: list[AgentContext] = []
        for number, group in enumerate(groups):
            kept, off_path = self.active(group)
            sidechain = self.records[group[0]].get("isSidechain") is True
            owns_file_records = number == owner
            builder = _ClaudeCodeContextBuilder(absorbed)
            for i in sorted(kept + queue_ops) if owns_file_records else kept:
                builder.add(self.records[i])
            builder.close()
            kept_set = set(kept)
            builder.skipped.update(
                _kind(self.records[i])
                for i in group
                if i not in kept_set and not _is_content_record(self.records[i])
            )
            if owns_file_records:
                builder.skipped.update(loose)
            parent: str | None = None
            if sidechain:
                agent = self.records[group[0]].get("agentId")
                first = next((t for t in builder.turns if t.role == "user"), None)
                parent = task_calls.get(agent) if isinstance(agent, str) else None
                if parent is None and first is not None:
                    parent = task_prompts.get(first.freeze().text)
            meta = self._metadata(
                group,
                kept,
                titles,
                conversation=number if len(groups) > 1 else None,
                sidechain=True if sidechain else None,
                parent_tool_call_id=parent,
                off_path_records=off_path or None,
            )
            out.append(builder.context(meta))
        return out

    def _task_calls(self, group: list[int]) -> dict[str, str]:
        """Subagent id -> the Task call that ran it: the result of a Task call names its agent
        in `toolUseResult.agentId` (Claude Code 2.x)."""
        calls: dict[str, str] = {}
        for i in group:
            record = self.records[i]
            agent = as_dict(record.get("toolUseResult")).get("agentId")
            results = _result_ids(record)
            if isinstance(agent, str) and len(results) == 1:
                calls.setdefault(agent, results[0])
        return calls

    def _task_prompts(self, group: list[int]) -> dict[str, str]:
        prompts: dict[str, str] = {}
        for i in group:
            record = self.records[i]
            if record.get("type") != "assistant":
                continue
            for block in _content_list(record):
                tool_input = block.get("input")
                if (
                    block.get("type") == "tool_use"
                    and isinstance(tool_input, dict)
                    and isinstance(tool_input.get("prompt"), str)
                    and isinstance(block.get("id"), str)
                ):
                    prompts.setdefault(tool_input["prompt"], block["id"])
        return prompts

    def _metadata(
        self, group: list[int], kept: list[int], titles: dict[str, str], **more: JsonValue
    ) -> dict[str, JsonValue]:
        first = self.records[group[0]]

        def field(key: str) -> str | None:
            value = next(
                (self.records[i][key] for i in group if isinstance(self.records[i].get(key), str)),
                first.get(key),
            )
            return nonempty_str(value)

        slug = next(
            (
                self.records[i]["slug"]
                for i in group
                if isinstance(self.records[i].get("slug"), str)
            ),
            None,
        )
        models = [
            m
            for i in kept
            if self.records[i].get("type") == "assistant"
            and isinstance(m := _message(self.records[i]).get("model"), str)
            and m != "<synthetic>"
        ]
        title = next(
            (t for i in reversed(kept) if (t := titles.get(self.records[i].get("uuid", "")))), None
        )
        return context_metadata(
            ClaudeCodeFormat.name,
            session_id=field("sessionId"),
            cwd=field("cwd"),
            version=field("version"),
            git_branch=field("gitBranch"),
            agent_id=field("agentId"),
            slug=slug or None,
            model=models[-1] if models else None,
            title=title,
            **more,
        )


# --------------------------------------------------------------------------- helpers


def _thread(record: dict[str, Any]) -> tuple[bool, str | None]:
    """Which thread a record belongs to: the main conversation, or one subagent's (an `agentId`
    that is not a string names none)."""
    sidechain = record.get("isSidechain") is True
    return (sidechain, str_or_none(record.get("agentId")) if sidechain else None)


@dataclass
class _Queued:
    """A prompt waiting in Claude Code's command queue (from an `enqueue` record)."""

    blocks: list[Block]
    text: str
    timestamp: Any = None

    @property
    def later(self) -> bool:
        """Task notifications wait behind prompts (priority 'later' against 'next')."""
        return self.text.lstrip().startswith("<task-notification>")


def _records(doc: Document) -> list[dict[str, Any]]:
    data: Any = doc.data
    if doc.kind == "json":
        data = [data] if isinstance(data, dict) else data
    if not isinstance(data, list):
        return []
    return [r for r in data if isinstance(r, dict)]


def _is_message_record(record: dict[str, Any]) -> bool:
    """A user/assistant record with the keys only Claude Code writes together."""
    return (
        record.get("type") in ("user", "assistant")
        and isinstance(record.get("message"), dict)
        and isinstance(record.get("uuid"), str)
        and "parentUuid" in record
        and ("sessionId" in record or "isSidechain" in record)
    )


def _kind(record: dict[str, Any]) -> str:
    """How a record is named in `skipped_records`: its type, plus its subtype where it has one."""
    kind = record.get("type")
    name = kind if isinstance(kind, str) and kind else "unknown"
    sub: Any = None
    if kind == "system":
        sub = record.get("subtype")
    elif kind == "attachment":
        sub = as_dict(record.get("attachment")).get("type")
    elif kind == "queue-operation":
        sub = record.get("operation")
    return f"{name}/{sub}" if isinstance(sub, str) and sub else name


def _is_content_record(record: dict[str, Any]) -> bool:
    """A record that can become a message (counted as off the path when its branch is dropped)."""
    kind = _kind(record)
    return kind in ("user", "assistant", "system/local_command", "attachment/queued_command")


def _message(record: dict[str, Any]) -> dict[str, Any]:
    message = record.get("message")
    return message if isinstance(message, dict) else {}


def _content_list(record: dict[str, Any]) -> list[dict[str, Any]]:
    content = _message(record).get("content")
    if isinstance(content, list):
        return [b for b in content if isinstance(b, dict)]
    return []


def _message_id(record: dict[str, Any]) -> str | None:
    value = _message(record).get("id")
    return value if isinstance(value, str) else None


def _call_ids(record: dict[str, Any]) -> list[str]:
    if record.get("type") != "assistant":
        return []
    return [
        b["id"]
        for b in _content_list(record)
        if b.get("type") == "tool_use" and isinstance(b.get("id"), str)
    ]


def _result_ids(record: dict[str, Any]) -> list[str]:
    if record.get("type") != "user":
        return []
    return [
        b["tool_use_id"]
        for b in _content_list(record)
        if b.get("type") == "tool_result" and isinstance(b.get("tool_use_id"), str)
    ]


def _only_tool_results(record: dict[str, Any]) -> bool:
    return all(b.get("type") == "tool_result" for b in _content_list(record))


def _user_blocks(content: Any) -> list[Block]:
    """What a user turn holds (a string, a content part or a list of them) as blocks: text and
    images as they are, other parts (a `document`...) as their JSON; empty text left out."""
    blocks: list[Block] = []
    for item in content if isinstance(content, list) else [content]:
        if isinstance(item, str):
            if item:
                blocks.append(TextBlock(text=item))
        elif isinstance(item, dict) and item.get("type") == "text":
            blocks.append(TextBlock(text=as_text(item.get("text"))))
        elif isinstance(item, dict) and item.get("type") == "image":
            blocks.append(image_from(item))
        elif item is not None:
            blocks.append(TextBlock(text=as_text(item)))
    return blocks


def _queued_text(content: Any) -> str:
    """The text of a queued prompt, to match one copy of it with another."""
    return "\n".join(b.text for b in _user_blocks(content) if isinstance(b, TextBlock))


def _bare_command(blocks: list[Block]) -> bool:
    """Text that is only a slash command with no arguments (`/clear`, `/init`)."""
    text = "".join(b.text for b in blocks if isinstance(b, TextBlock))
    return (
        all(isinstance(b, TextBlock) for b in blocks)
        and "<command-name>" in text
        and not _COMMAND_PARTS.sub("", text).strip()
    )


def _mark_local_commands(turns: list[Turn]) -> None:
    """Mark a bare slash command answered by local output (`/clear`, `/model`: Claude Code ran it
    itself, the model did no work) with `COMMAND_KEY`, so the task is looked for after it. A prompt
    command (`/init`, a custom command) makes the model work and may well be the task."""
    for command, answer in itertools.pairwise(turns):
        if (
            command.role == "user"
            and ORIGIN_KEY not in command.metadata
            and _bare_command(command.blocks)
            and answer.role == "user"
            and any(
                isinstance(b, TextBlock) and b.text.lstrip().startswith("<local-command-std")
                for b in answer.blocks
            )
        ):
            command.metadata[COMMAND_KEY] = True


def _harness_blocks(blocks: list[Block]) -> bool:
    """Whether every block is text Claude Code wrote (no user text, no image)."""
    return not any(
        isinstance(b, ImageBlock)
        or (isinstance(b, TextBlock) and not b.text.lstrip().startswith(_HARNESS_PREFIXES))
        for b in blocks
    )


def _result_parts(content: Any) -> tuple[ContentPart, ...]:
    if isinstance(content, (str, list, dict)) or content is None:
        return parts_from_content(content)
    return (TextBlock(text=as_text(content)),)


def _update_response_metadata(meta: dict[str, JsonValue], record: dict[str, Any]) -> None:
    message = record["message"]
    usage = message.get("usage")
    if isinstance(usage, dict):
        meta["usage"] = usage
    _put(meta, "stop_reason", message.get("stop_reason"))
    _put(meta, "request_id", record.get("requestId"))


def _put(meta: dict[str, JsonValue], key: str, value: Any) -> None:
    if isinstance(value, (str, int, float, bool)) and value != "":
        meta[key] = value


def _assistant_blocks(content: Any) -> list[Block]:
    if isinstance(content, str):
        return [TextBlock(text=content)] if content else []
    blocks: list[Block] = []
    for item in content if isinstance(content, list) else []:
        if not isinstance(item, dict):
            blocks.append(TextBlock(text=as_text(item)))
            continue
        kind = item.get("type")
        if kind == "text":
            blocks.append(TextBlock(text=as_text(item.get("text"))))
        elif kind == "thinking":
            signature = item.get("signature")
            blocks.append(
                ThinkingBlock(
                    thinking=as_text(item.get("thinking")),
                    signature=signature if isinstance(signature, str) and signature else None,
                )
            )
        elif kind in ("redacted_thinking", "tool_use"):
            blocks.append(anthropic_block(item))
        elif kind == "image":
            blocks.append(image_from(item))
        else:  # server tool use/results and future block types: keep what the model produced
            blocks.append(TextBlock(text=as_text(item)))
    return blocks


# --------------------------------------------------------------------------- the user's words


_REJECTED = re.compile(
    r"(?:The user doesn't want to proceed with this tool use\.|Permission for this tool use was "
    r"denied\.)[^\n]{0,300}?(?:the user said|The user said):\n"
)
"""`REJECT_MESSAGE_WITH_REASON_PREFIX` / `SUBAGENT_REJECT_MESSAGE_WITH_REASON_PREFIX`
(src/utils/messages.ts): a call the user rejected, then what the user typed."""
_MEMORY_HINT = "\n\nNote: The user's next message may contain a correction or preference."
"""`MEMORY_CORRECTION_HINT`, which `withMemoryCorrectionHint` may append after the user's text."""
_ANSWERED = "User has answered your questions: "
_ANSWERED_END = ". You can now continue with the user's answers in mind."
"""AskUserQuestion's `mapToolResultToToolResultBlockParam`: the answers between the two."""
_EDITED_PLAN = "\n## Approved Plan (edited by user):\n"
"""ExitPlanModeV2Tool's result when the user edited the plan before approving it: the plan as the
user left it follows."""
_BASH_INPUT = re.compile(r"<bash-input>(.*?)</bash-input>", re.DOTALL)


def _users_words(where: Where, text: str) -> list[Span]:
    """Where the user's words are in a text block Claude Code wrote itself: the feedback typed
    when rejecting a call, the answers to AskUserQuestion, a plan the user edited before approving
    it (in tool results), and a `!` command in a user turn Claude Code marked as its own
    (`<bash-input>`)."""
    if where.result is not None:
        rejected = _REJECTED.match(text.lstrip())
        if rejected is not None:
            start = len(text) - len(text.lstrip()) + rejected.end()
            end = text.find(_MEMORY_HINT, start)
            end = len(text) if end < 0 else end
            return [Span(start, end, "user-feedback")] if text[start:end].strip() else []
        answered = find_after(text, _ANSWERED, (_ANSWERED_END,))
        if answered is not None:
            return [Span(*answered, "user-answer")]
        plan = text.find(_EDITED_PLAN)
        if plan >= 0 and text[plan + len(_EDITED_PLAN) :].strip():
            return [Span(plan + len(_EDITED_PLAN), len(text), "user-feedback")]
        return []
    if where.message.role == "user" and where.message.origin == "harness":
        return [
            Span(m.start(1), m.end(1), "user-command")
            for m in _BASH_INPUT.finditer(text)
            if m.group(1).strip()
        ]
    return []


def message_records_contexts(records: list[dict[str, Any]]) -> list[AgentContext]:
    """The conversations of Claude Code records that carry `uuid`, `parentUuid` and `sessionId`
    (as a session file holds them), read exactly as a session file is: for the readers of other
    files that hold the same records (the `-p --output-format stream-json` stream)."""
    return _RecordTree(records).contexts()


__all__ = [
    "NO_RESULT_TEXT",
    "SYSTEM_PROMPT_FIELD",
    "ClaudeCodeFormat",
    "message_records_contexts",
    "session_id_of",
    "write_session",
]


# --------------------------------------------------------------------------- writing

WRITER_VERSION = "2.1.332"
"""The Claude Code version whose session records the writer writes (its resume is tested)."""


session_id_of = session_uuid
"""The id a written session takes (see `_util.session_uuid`)."""

_EPOCH = "1970-01-01T00:00:00.000Z"
SYSTEM_PROMPT_FIELD = "compactkit_system_prompt"
"""The field (true) of the first record when it holds the system prompt: Claude Code ignores
fields it does not know and sends the record as a user message; this reader reads it back as
`system_instruction`."""


def write_session(ctx: AgentContext, notes: ExportNotes | None = None) -> str:
    """`ctx` as Claude Code session records, one JSON object a line, each `user` / `assistant`
    record parented on the one before (`parentUuid`), as Claude Code writes a conversation: the
    user's words as user records (a user-role message with an origin as `isMeta`, a summary as
    `isCompactSummary`), each assistant message as one record with its thinking (signed or
    redacted), text and `tool_use` blocks, each tool message as a user record of `tool_result`
    blocks (with their `is_error`). Record ids are derived from the content, so the same context
    always gives the same file.

    What Claude Code has no place for is written so that its model still sees it, and counted in
    `notes`: Claude Code keeps its own system prompt outside the session, so `system_instruction`
    becomes the first record, an `isMeta` user record marked `compactkit_system_prompt` (read
    back as the system prompt); a mid-conversation system message becomes an `isMeta` user
    record; markers a strategy left are written as the text a model is shown for them; message
    names are dropped."""
    session = session_id_of(ctx)
    cwd = ctx.metadata.get("cwd") if isinstance(ctx.metadata.get("cwd"), str) else None
    base: dict[str, Any] = {
        "isSidechain": False,
        "userType": "external",
        "cwd": cwd or "/",
        "sessionId": session,
        "version": WRITER_VERSION,
    }
    if notes is not None:
        note_agent_losses(
            ctx, notes, system_prompt=False, system_messages=False, model_on_messages=True
        )
    lines: list[str] = []
    parent: str | None = None
    if ctx.system_instruction:
        parent, line = _system_prompt_record(ctx, ctx.system_instruction, base)
        lines.append(line)
    pinned = {p.etag for p in ctx.pins}
    names = {c.id: c.name for m in ctx.messages for c in m.tool_calls}
    for number, message in enumerate(ctx.messages):
        record_id = str(uuid.uuid5(uuid.UUID(session), f"{number}"))
        record: dict[str, Any] = {"parentUuid": parent, **base}
        stamp = message.metadata.get("timestamp")
        timestamp = stamp if isinstance(stamp, str) else _EPOCH
        if message.role == "assistant":
            model = message.metadata.get("model")
            record.update(
                type="assistant",
                message={
                    "id": f"msg_{record_id.replace('-', '')[:24]}",
                    "type": "message",
                    "role": "assistant",
                    "model": model if isinstance(model, str) else "<synthetic>",
                    "content": _assistant_content(message.content),
                    "stop_reason": "tool_use" if message.tool_calls else "end_turn",
                    "stop_sequence": None,
                    "usage": _usage(message.metadata.get("usage")),
                },
            )
        else:
            # the user's words the reader cut out of a text block go back into it (`rejoin`)
            content = (
                _result_content(_rejoined(message, number, pinned, names))
                if message.role == "tool"
                else _user_content(
                    rejoin(message.content, pinned, Where(number, message), _users_words)
                )
            )
            record.update(type="user", message={"role": "user", "content": content})
            if message.origin == "summary":
                record["isCompactSummary"] = True
                record["isVisibleInTranscriptOnly"] = True
            elif message.role == "system" or message.origin is not None:
                record["isMeta"] = True  # not the user's words: reads back with an origin
        record.update(uuid=record_id, timestamp=timestamp)
        lines.append(json.dumps(record, ensure_ascii=False))
        parent = record_id
    return "\n".join(lines) + ("\n" if lines else "")


def _system_prompt_record(ctx: AgentContext, prompt: str, base: dict[str, Any]) -> tuple[str, str]:
    """(uuid, line) of the first record, holding the system prompt (see `write_session`)."""
    record_id = str(uuid.uuid5(uuid.UUID(base["sessionId"]), "system"))
    first = ctx.messages[0].metadata.get("timestamp") if ctx.messages else None
    record = {
        "parentUuid": None,
        **base,
        "type": "user",
        "message": {"role": "user", "content": prompt},
        "isMeta": True,
        SYSTEM_PROMPT_FIELD: True,
        "uuid": record_id,
        "timestamp": first if isinstance(first, str) else _EPOCH,  # the first message's
    }
    return record_id, json.dumps(record, ensure_ascii=False)


def _usage(value: Any) -> dict[str, Any]:
    usage = as_dict(value)
    return {
        "input_tokens": usage.get("input_tokens", 0),
        "output_tokens": usage.get("output_tokens", 0),
        **{k: v for k, v in usage.items() if k not in ("input_tokens", "output_tokens")},
    }


def _user_content(blocks: Sequence[Block]) -> str | list[dict[str, Any]]:
    if len(blocks) == 1 and isinstance(blocks[0], TextBlock):
        return blocks[0].text
    return [_part(b) for b in blocks if not isinstance(b, (ToolCallBlock, ToolResultBlock))]


def _part(block: Block) -> dict[str, Any]:
    if isinstance(block, ImageBlock):
        if block.data is not None:
            source = {"type": "base64", "media_type": block.media_type, "data": block.data}
        else:
            source = {"type": "url", "url": block.url}
        return {"type": "image", "source": source}
    return {"type": "text", "text": block_as_text(block)}


def _assistant_content(blocks: Sequence[Block]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for block in blocks:
        if isinstance(block, ThinkingBlock) and block.redacted:
            out.append({"type": "redacted_thinking", "data": block.signature or ""})
        elif isinstance(block, ThinkingBlock):
            out.append(
                {"type": "thinking", "thinking": block.thinking, "signature": block.signature or ""}
            )
        elif isinstance(block, ToolCallBlock):
            out.append(
                {"type": "tool_use", "id": block.id, "name": block.name, "input": block.input}
            )
        else:
            out.append(_part(block))
    return out


def _rejoined(
    message: Message, number: int, pinned: set[str], names: dict[str, str]
) -> list[Block]:
    """The blocks of a tool message, each result's parts as the reader found them (`rejoin`)."""
    return [
        b.model_copy(
            update={
                "content": tuple(
                    rejoin(
                        b.content,
                        pinned,
                        Where(number, message, b, names.get(b.tool_call_id)),
                        _users_words,
                    )
                )
            }
        )
        if isinstance(b, ToolResultBlock)
        else b
        for b in message.content
    ]


def _result_content(blocks: Sequence[Block]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for block in blocks:
        if isinstance(block, ToolResultBlock):
            parts = [_part(p) for p in block.content]
            out.append(
                {
                    "tool_use_id": block.tool_call_id,
                    "type": "tool_result",
                    "content": parts,
                    "is_error": block.is_error,
                }
            )
        else:
            out.append(_part(block))
    return out
