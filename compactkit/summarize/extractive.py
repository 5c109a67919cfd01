"""The offline, deterministic llm-summary backend: a structured summary read off the turns.

Sections (always in this order, each a `## ` heading with `- ` items):

* **Task**: the first user message (the context's task), abbreviated;
* **User messages**: every later message in the user's own words (`Message.is_human`: not tool output,
  harness text or demonstrations carried in a user turn), verbatim up to a per-message cap (continuation
  lines indented two spaces); a longer one ends with `[… N more characters]`, and the section then
  starts with a line saying the whole messages are in the recovery store under the summary's etag.
  User messages are never dropped: when they do not fit, the cap per message goes down (the same cap for
  all, the largest that fits);
* **Files read** / **Files changed**: from tool-call inputs (path arguments, edit/write/str_replace
  tools, `apply_patch` headers, `sed -i`, `tee`, `touch`, `rm`, `mv`, `cp`, redirections `>`);
* **Commands and outcomes**: each command or tool call with ok/error and the exit code when the
  output shows one;
* **Errors**: the last `Error`/`Exception` line of every failed call;
* **Open items**: the last assistant text, calls still pending, unfinished plan steps.

An earlier extractive summary inside the window is merged in (its items come first), and so is a summary
the source agent wrote itself (a user message with origin "summary"). When the summary is over its token
limit, user messages first give up what is past a share of the summary, then each other list loses its
oldest items first (the most recent are kept, and it says how many it dropped), then user messages are
cut further.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

from ..context import (
    HARNESS_BLOCKS_KEY,
    ElidedBlock,
    Message,
    SummaryBlock,
    TextBlock,
    ToolCallBlock,
    ToolResultBlock,
)
from ..toolcall import error_line, exit_code, failed, input_dict, read_call, shown_text
from .base import (
    LEGACY_SECTIONS,
    SUMMARY_SECTIONS,
    USER_MESSAGE_CHARS,
    Summarizer,
    SummaryRequest,
    clip_tokens,
)

TASK_CHARS = 600
ITEM_CHARS = 240
OPEN_CHARS = 400
USER_SHARE = 0.5
"""Share of the summary user messages may fill before the other sections give up items."""
USER_SOFT_FLOOR = 1_000
"""Characters per user message kept while the other sections still have items to give up."""
USER_FLOOR = 40
"""The cap per user message never goes below this (the summary is clipped instead)."""
RESERVED_SHARE = 0.3
"""Share of the summary the files read and changed and the errors keep whatever the user's
words take: those words are cut shorter (they are whole in the recovery store) before these
lists go below it."""
SECTION_WEIGHTS = {"Files read": 2.0, "Files changed": 2.0, "Errors": 2.0}
"""Over the limit, a section gives up items when it is the largest by tokens divided by its weight:
the files the work touched and its errors keep about twice the room of a list of old commands."""

_RUNNING = re.compile(r"Process running with session ID (\d+)")


def _one_line(text: str) -> str:
    return " ".join(text.split())


def _abbrev(text: str, limit: int) -> str:
    text = _one_line(text)
    if len(text) <= limit:
        return text
    return text[: limit - 1].rstrip() + "…"


class _Ordered:
    """Unique items in order of last mention (a repeat moves an item to the end)."""

    def __init__(self) -> None:
        self.items: dict[str, None] = {}

    def add(self, item: str) -> None:
        if not item:
            return
        self.items.pop(item, None)
        self.items[item] = None

    def __iter__(self) -> Iterator[str]:
        return iter(self.items)


@dataclass(frozen=True)
class UserWords:
    """A message in the user's own words: `text` verbatim (blank lines dropped), possibly already
    cut by an earlier summary; `chars` is the length of the whole message."""

    text: str
    chars: int

    @classmethod
    def of(cls, text: str) -> UserWords:
        lines = [line.rstrip() for line in text.strip().splitlines()]
        kept = "\n".join(line for line in lines if line.strip())
        return cls(kept, len(kept))

    def cut(self, cap: int) -> bool:
        """Whether the item at `cap` leaves part of the message out."""
        return self.chars > min(len(self.text), cap)

    def item(self, cap: int) -> str:
        """The summary item: the text up to `cap` characters, saying how many more there are when
        any is cut, each line after the first indented two spaces."""
        body = self.text if len(self.text) <= cap else self.text[:cap].rstrip()
        cut = self.chars - len(body)
        if cut > 0:
            body += f" [… {cut:,} more characters]"
        return "\n  ".join(body.split("\n"))


_CUT_NOTE = re.compile(r" \[… ([\d,]+) more characters\]$")
_WHERE_NOTE = "(a message cut short here is whole in the recovery store"


def where_note(etag: str) -> str:
    """The first `User messages` item when a message is cut: where the whole messages are."""
    where = f"under etag {etag}" if etag else "of this summary"
    return f"{_WHERE_NOTE} {where}: expand the summary to read it)"


def _user_words(item: str) -> UserWords:
    """A `User messages` item of an earlier summary back as the words it holds."""
    match = _CUT_NOTE.search(item)
    if not match:
        return UserWords(item, len(item))
    text = item[: match.start()]
    return UserWords(text, len(text) + int(match.group(1).replace(",", "")))


@dataclass
class Facts:
    """What the extractive summary reports, gathered from a window of messages."""

    task: str | UserWords = ""
    users: dict[str, UserWords] = field(default_factory=dict)
    """Messages in the user's words by text, in order of last mention."""
    read: _Ordered = field(default_factory=_Ordered)
    changed: _Ordered = field(default_factory=_Ordered)
    commands: list[str] = field(default_factory=list)
    errors: _Ordered = field(default_factory=_Ordered)
    open_items: list[str] = field(default_factory=list)
    earlier: list[str] = field(default_factory=list)
    omitted: dict[str, int] = field(default_factory=dict)
    kept_verbatim: int = 0
    """User messages not repeated here: they follow the summary verbatim (pinned)."""

    def add_user(self, words: UserWords) -> None:
        if not words.text:
            return
        self.users.pop(words.text, None)
        self.users[words.text] = words

    def sections(self) -> list[tuple[str, list[str | UserWords]]]:
        read = [p for p in self.read if p not in self.changed.items]
        users: list[str | UserWords] = list(self.users.values())
        if self.kept_verbatim:
            n = self.kept_verbatim
            users.insert(
                0,
                f"{n} message{'s' if n != 1 else ''} in the user's words: kept verbatim after this summary",
            )
        out: list[tuple[str, list[str | UserWords]]] = [
            ("Task", [self.task] if self.task else []),
            ("User messages", users),
            ("Files read", list(read)),
            ("Files changed", list(self.changed)),
            ("Commands and outcomes", list(self.commands)),
            ("Errors", list(self.errors)),
            ("Open items", list(self.open_items)),
        ]
        if self.earlier:
            out.insert(1, ("Earlier summary", list(self.earlier)))
        return out


# --------------------------------------------------------------------------- reading tool calls


def _call_label(call: ToolCallBlock) -> str:
    data = call.input
    if isinstance(data, dict):
        args = ", ".join(
            f"{k}={_one_line(v) if isinstance(v, str) else json.dumps(v, ensure_ascii=False)}"
            for k, v in data.items()
        )
    else:
        args = _one_line(str(data))
    return f"{call.name}({args})"


def _command_label(command: str) -> str:
    lines = [line for line in command.strip().splitlines() if line.strip()]
    if not lines:
        return ""
    head = lines[0].strip()
    more = f" (+{len(lines) - 1} lines)" if len(lines) > 1 else ""
    return _abbrev(head, ITEM_CHARS - len(more)) + more


# --------------------------------------------------------------------------- gathering


class _Reader:
    def __init__(self, facts: Facts) -> None:
        self.facts = facts
        self.open_file: str | None = None
        self.plan: list[str] | None = None
        self.sessions: dict[str, tuple[int, str]] = {}
        """Codex-style background processes: session id -> (index in commands, command label)."""

    def call(self, call: ToolCallBlock, result: ToolResultBlock | None) -> None:
        facts = self.facts
        did = read_call(call, self.open_file)
        outcome = self._outcome(result)
        if did.kind == "plan":
            self._plan(input_dict(call))
            return
        if did.kind == "quiet":
            if did.name == "write_stdin":
                self._session_output(input_dict(call), result)
            return
        for path in did.read:
            facts.read.add(path)
        for path in did.changed:
            facts.changed.add(path)
        if did.kind == "editor":
            if did.changed:
                self._failed(f"{call.name} {did.sub} {did.path}", result)
            return
        if did.kind == "patch":
            self._failed(call.name, result)
            return
        if did.kind == "swe-agent":
            if did.name in ("open", "view", "create") and did.path:
                self.open_file = did.path
            if not did.read and not did.changed:
                label = _command_label(" ".join((did.name, *did.args)))
                facts.commands.append(f"`{label}` → {outcome}")
            self._failed(did.name, result)
            return
        if did.kind in ("write", "read"):
            self._failed(f"{call.name} {did.path}", result)
            return
        if did.kind == "command" and did.command is not None:
            label = _command_label(did.command)
            running = _RUNNING.search(shown_text(result)[:400]) if result is not None else None
            if running and exit_code(shown_text(result) if result else "") is None:
                self.sessions[running.group(1)] = (len(facts.commands), label)
                outcome = "running"
            facts.commands.append(f"`{label}` → {outcome}")
            self._failed(f"`{_abbrev(label, 80)}`", result)
            return
        facts.commands.append(f"{_abbrev(_call_label(call), ITEM_CHARS)} → {outcome}")
        self._failed(call.name, result)

    def _session_output(self, data: dict[str, Any], result: ToolResultBlock | None) -> None:
        """Output polled from a background process: the outcome of the command that started it."""
        session = self.sessions.get(str(data.get("session_id")))
        if session is None or result is None or exit_code(shown_text(result)) is None:
            return
        index, label = session
        self.facts.commands[index] = f"`{label}` → {self._outcome(result)}"
        if failed(result)[0]:
            line = error_line(shown_text(result))
            if line:
                self.facts.errors.add(f"`{_abbrev(label, 80)}`: {_abbrev(line, ITEM_CHARS)}")

    def _plan(self, data: dict[str, Any]) -> None:
        steps = data.get("todos") or data.get("plan")
        if not isinstance(steps, list):
            return
        pending: list[str] = []
        for step in steps:
            if not isinstance(step, dict):
                continue
            status = str(step.get("status", ""))
            text = step.get("content") or step.get("step") or ""
            if status != "completed" and isinstance(text, str) and text.strip():
                pending.append(f"plan ({status or 'pending'}): {_abbrev(text, 160)}")
        self.plan = pending

    @staticmethod
    def _outcome(result: ToolResultBlock | None) -> str:
        if result is None:
            return "pending"
        did_fail, code = failed(result)
        word = "error" if did_fail else "ok"
        return f"{word} (exit {code})" if code is not None else word

    def _failed(self, label: str, result: ToolResultBlock | None) -> None:
        if not failed(result)[0]:
            return
        assert result is not None  # a call with no result has not failed
        line = error_line(shown_text(result))
        if line:
            self.facts.errors.add(f"{_abbrev(label, 80)}: {_abbrev(line, ITEM_CHARS)}")


def _merge_summary(facts: Facts, text: str) -> None:
    """Fold an earlier summary into `facts`: an extractive one section by section, any other as
    one 'Earlier summary' item."""
    sections = parse_sections(text)
    if not sections:
        if text.strip():
            facts.earlier.append(_abbrev(text, 2000))
        return
    for title, items in sections.items():
        dropped = sum(_omitted_count(i) for i in items)
        items = [i for i in items if not _omitted_count(i) and i != "none"]
        if title in LEGACY_SECTIONS:
            title = LEGACY_SECTIONS[title]
        if dropped:
            facts.omitted[title] = facts.omitted.get(title, 0) + dropped
        if title == "Task" and items and not facts.task:
            facts.task = items[0]
        elif title == "Earlier summary":
            facts.earlier.extend(items)
        elif title == "User messages":
            for item in items:
                if not item.startswith(_WHERE_NOTE):
                    facts.add_user(_user_words(item))
        elif title == "Files read":
            for item in items:
                facts.read.add(item)
        elif title == "Files changed":
            for item in items:
                facts.changed.add(item)
        elif title == "Commands and outcomes":
            facts.commands.extend(items)
        elif title == "Errors":
            for item in items:
                facts.errors.add(item)
        # earlier "Open items" are superseded by what the newer turns leave open


_OMITTED = re.compile(r"^\((\d+) earlier items? omitted\)$")


def _omitted_count(item: str) -> int:
    match = _OMITTED.match(item)
    return int(match.group(1)) if match else 0


def parse_sections(text: str) -> dict[str, list[str]]:
    """The `## Section` / `- item` structure of a summary in this backend's format ({} if not).

    Lines indented two spaces continue the item above them (multi-line user messages)."""
    out: dict[str, list[str]] = {}
    current: list[str] | None = None
    for line in text.splitlines():
        if line.startswith("## "):
            title = line[3:].strip()
            current = out.setdefault(title, [])
        elif line.startswith("- ") and current is not None:
            current.append(line[2:].strip())
        elif line.startswith("  ") and current:
            current[-1] += "\n" + line[2:]
    known = set(SUMMARY_SECTIONS) | set(LEGACY_SECTIONS) | {"Earlier summary"}
    return out if out and set(out) <= known else {}


def _harness(msg: Message) -> set[int]:
    """Indexes of the blocks the agent's harness added to a message in the user's words
    (Cline's `<environment_details>`, a resumption preamble): not the user's words."""
    value = msg.metadata.get(HARNESS_BLOCKS_KEY)
    return {v for v in value if isinstance(v, int)} if isinstance(value, list) else set()


def users_words(msg: Message) -> str | None:
    """The text of a message in the user's own words (None for any other message), without
    the blocks its agent's harness added.

    `Message.is_human`, and also a human message whose text static-elision has rewritten."""
    if msg.is_human:
        harness = _harness(msg)
        texts = (
            b.text
            for i, b in enumerate(msg.content)
            if isinstance(b, TextBlock) and i not in harness
        )
        return "\n".join(texts).strip()
    if msg.role == "user" and msg.origin is None and not msg.tool_results:
        parts = [b.text for b in msg.content if isinstance(b, (TextBlock, ElidedBlock))]
        if any(isinstance(b, ElidedBlock) for b in msg.content) and "".join(parts).strip():
            return "\n".join(parts).strip()
    return None


def _all_kept(msg: Message, kept: set[str]) -> bool:
    harness = _harness(msg)
    texts = [
        b.text
        for i, b in enumerate(msg.content)
        if isinstance(b, TextBlock) and b.text.strip() and i not in harness
    ]
    return bool(texts) and all(t in kept for t in texts)


def gather(messages: Iterable[Message], task: str = "", pinned: Iterable[str] = ()) -> Facts:
    """The facts of a window of messages (`task`: the context's task, when known; `pinned`: texts
    kept verbatim beside the summary, which a user message made only of need not repeat)."""
    messages = list(messages)
    kept = set(pinned)
    facts = Facts(task=_abbrev(task, TASK_CHARS) if task.strip() else "")
    task_text = UserWords.of(task).text if task.strip() else ""
    results: dict[str, ToolResultBlock] = {}
    for msg in messages:
        for answer in msg.tool_results:
            results[answer.tool_call_id] = answer
    reader = _Reader(facts)
    last_text = ""
    pending: list[str] = []
    for msg in messages:
        for block in msg.content:
            if isinstance(block, SummaryBlock):
                _merge_summary(facts, block.text)
        if msg.role == "user":
            if msg.origin == "summary":  # a summary the source agent wrote: history, not words
                _merge_summary(facts, "\n".join(b.text for b in msg.content if b.type == "text"))
                continue
            text = users_words(msg)
            if text and kept and _all_kept(msg, kept):
                facts.kept_verbatim += 1
            elif text:
                words = UserWords.of(text)
                if not facts.task:
                    facts.task = words
                elif words.text != task_text:
                    facts.add_user(words)
        elif msg.role == "assistant":
            text = "\n".join(b.text for b in msg.content if b.type == "text").strip()
            if text:
                last_text = text
            for call in msg.tool_calls:
                result = results.get(call.id)
                reader.call(call, result)
                if result is None:
                    pending.append(f"pending call: {_abbrev(_call_label(call), ITEM_CHARS)}")
    if last_text:
        facts.open_items.append(f"last assistant message: {_abbrev(last_text, OPEN_CHARS)}")
    facts.open_items.extend(pending)
    facts.open_items.extend(reader.plan or [])
    return facts


# --------------------------------------------------------------------------- rendering


RESERVED = ("Files read", "Files changed", "Errors")
"""Sections with room of their own: they give up items only when the others have none to spare
(the paths and errors of a long session are what a fixed-size summary used to lose)."""


def _first_to_go(candidates: list[int], sections: list[tuple[str, list[Any]]]) -> list[int]:
    """The candidates that give up an item first: the unreserved ones while any has items."""
    free = [k for k in candidates if sections[k][0] not in RESERVED]
    return free or candidates


def render(
    facts: Facts,
    max_tokens: int,
    count: Callable[[str], int],
    user_chars: int = USER_MESSAGE_CHARS,
    etag: str = "",
) -> str:
    """The summary text, within `max_tokens`.

    Messages in the user's words are all kept, verbatim up to `user_chars` characters each. Over
    the limit: user messages are first cut to what fits in `USER_SHARE` of it (never below
    `USER_SOFT_FLOOR` characters), then the other lists lose their oldest items (each keeps its
    newest), then user messages are cut further (never below `USER_FLOOR`), then the text is
    clipped. `etag` names where cut messages are whole (the summary's recovery entry)."""
    layout = _Layout(facts, count, etag)
    cap = min(user_chars, max(layout.longest, 1))
    if layout.words and layout.other_cost() + layout.user_cost(cap) > max_tokens:
        share = int(max_tokens * USER_SHARE)
        cap = layout.best_cap(share, min(cap, USER_SOFT_FLOOR), cap)
    size = layout.user_cost(cap) if layout.words else 0
    layout.drop_oldest(max_tokens - size, keep=1, reserved_floor=int(max_tokens * RESERVED_SHARE))
    if layout.words and layout.other_cost() + size > max_tokens:
        cap = layout.best_cap(max_tokens - layout.other_cost(), min(cap, USER_FLOOR), cap)
        size = layout.user_cost(cap)
    layout.drop_oldest(max_tokens - size, keep=0)  # user messages at their floor: any item goes
    return clip_tokens(layout.text(cap), max_tokens, count)


class _Layout:
    """The summary's sections with their token costs, as `render` trims them to a budget."""

    def __init__(self, facts: Facts, count: Callable[[str], int], etag: str) -> None:
        self.count = count
        self.sections = facts.sections()
        self.omitted = {title: facts.omitted.get(title, 0) for title, _ in self.sections}
        self.droppable = [
            k
            for k, (title, _) in enumerate(self.sections)
            if title not in ("Task", "User messages")
        ]
        self.costs = [
            [0 if isinstance(item, UserWords) else count(f"- {item}") + 1 for item in items]
            for _, items in self.sections
        ]
        self.heads = [count(f"## {title}") + 1 for title, _ in self.sections]
        self.weights = [SECTION_WEIGHTS.get(title, 1.0) for title, _ in self.sections]
        self.words = [
            item for _, items in self.sections for item in items if isinstance(item, UserWords)
        ]
        self.where = f"- {where_note(etag)}"
        self.longest = max((len(w.text) for w in self.words), default=0)

    @staticmethod
    def note(n: int) -> str:
        return f"- ({n} earlier item{'s' if n != 1 else ''} omitted)"

    def user_cost(self, cap: int) -> int:
        size = sum(self.count(f"- {w.item(cap)}") + 1 for w in self.words)
        cut = any(w.cut(cap) for w in self.words)
        return size + (self.count(self.where) + 1 if cut else 0)

    def other_cost(self) -> int:
        size = sum(self.heads)
        for k, (title, items) in enumerate(self.sections):
            size += sum(self.costs[k]) if items else 2
            if self.omitted[title]:
                size += self.count(self.note(self.omitted[title])) + 1
        return size

    def best_cap(self, room: int, low: int, high: int) -> int:
        """The largest cap in [low, high] whose user items fit `room` (low when none does)."""
        if self.user_cost(high) <= room:
            return high
        lo, hi = low, high
        while lo < hi:
            mid = (lo + hi + 1) // 2
            if self.user_cost(mid) <= room:
                lo = mid
            else:
                hi = mid - 1
        return lo

    def reserved_cost(self) -> int:
        return sum(
            sum(self.costs[k]) for k, (title, _) in enumerate(self.sections) if title in RESERVED
        )

    def drop_oldest(self, room: int, keep: int, reserved_floor: int = 0) -> None:
        """Until the other sections fit `room`: the section with the most tokens in droppable
        items (weighted, keeping `keep` items each) loses its oldest item; the files and errors
        lists only while they hold more than `reserved_floor` tokens."""
        while self.other_cost() > room:
            candidates = [k for k in self.droppable if len(self.sections[k][1]) > keep]
            if reserved_floor and self.reserved_cost() <= reserved_floor:
                candidates = [k for k in candidates if self.sections[k][0] not in RESERVED]
            candidates = _first_to_go(candidates, self.sections)
            if not candidates:
                return
            k = max(candidates, key=lambda j: (sum(self.costs[j]) / self.weights[j], -j))
            self.sections[k][1].pop(0)
            self.costs[k].pop(0)
            self.omitted[self.sections[k][0]] += 1

    def text(self, cap: int) -> str:
        lines: list[str] = []
        for title, items in self.sections:
            lines.append(f"## {title}")
            if self.omitted[title]:
                lines.append(self.note(self.omitted[title]))
            noted = title == "User messages" and any(w.cut(cap) for w in self.words)
            if noted:
                lines.append(self.where)
            lines.extend(
                f"- {item.item(cap) if isinstance(item, UserWords) else item}" for item in items
            )
            if not items and not self.omitted[title] and not noted:
                lines.append("- none")
        return "\n".join(lines)


class ExtractiveSummarizer(Summarizer):
    """Offline and deterministic: task, the user's messages, files read and changed, commands and
    their outcome, errors and open items, read off the window itself."""

    name = "extractive"
    description = (
        "Offline, deterministic structured summary: task, user messages, files read/changed, "
        "commands and outcomes, errors, open items."
    )
    prompt = ""
    cacheable = False  # cheap and deterministic: nothing to save

    def summarize(self, request: SummaryRequest) -> str:
        from ..registry import get_counter

        counter = get_counter(request.tokenizer)
        facts = gather(request.messages, request.task, request.pinned)
        return render(
            facts,
            request.summary_max_tokens,
            counter.tokenizer.count,
            request.user_message_chars,
            request.recovery_etag,
        )
