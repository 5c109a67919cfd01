"""Cline and Roo Code task histories (`<task folder>/api_conversation_history.json`).

Both VS Code agents save the messages they send their model in the task folder
(`~/.../globalStorage/<extension>/tasks/<task id>/`): a JSON array of Anthropic `MessageParam`s with
extra keys (`ts`; Cline's `modelInfo`, `metrics`, `id`; Roo Code's `isSummary`, `condenseId`,
`condenseParent`, `truncationId`, `truncationParent`, `isTruncationMarker`, `reasoning_details`,
`reasoning_content`, standalone `{"type": "reasoning", "encrypted_content"}` items), or, since Roo
Code's move to AI SDK messages, `{"version": 2, "messages": [...]}` (parts `tool-call`,
`tool-result` in `role: tool` messages, `reasoning`, `image`, `file`). Upstream, the writers' source:

- cline/cline `src/core/task/index.ts` (`startTask`: the first user message is `<task>\\n...\\n</task>`
  plus images and attached files; `resumeTaskFromHistory`: `[TASK RESUMPTION] ...` and
  `New instructions for task continuation:\\n<user_message>...`; `recursivelyMakeClineRequests`: the
  environment details are their own text block at the end of every user message; `noToolsUsed`),
  `src/core/prompts/responses.ts` (`toolDenied`, `toolError`, `noToolsUsed`, `tooManyMistakes`,
  `toolAlreadyUsed`, `taskResumption`), `src/core/task/tools/utils/ToolResultUtils.ts`
  (`pushToolResult`: a `"[<tool> for '<arg>'] Result:"` text block, then the result's text and images;
  `pushAdditionalToolFeedback`: `The user provided the following feedback:\\n<feedback>...`);
- RooCodeInc/Roo-Code `src/core/task-persistence/apiMessages.ts`, `rooMessage.ts` and
  `converters/anthropicToRoo.ts` (the legacy array and the version 2 envelope).

Reading:
- assistant text carrying XML-style tool calls (`<read_file><path>a.ts</path></read_file>`, Cline's and
  Roo Code's tool names) -> the text around them, then one `ToolCallBlock` per call (name = the tag,
  input = its child tags as strings; ids `cline-<message>-<n>`); native `tool_use` / `tool-call` blocks
  pass through, and an assistant message holding them is not searched for XML; their results come
  back as native result blocks or, as Cline's `pushToolResult` writes them, as text (below);
- a user message -> a tool message with its results, then one user message with the rest, in order.
  A `[<tool> ...] Result:` text block (and the text/images after it) is the result of the open call
  of that tool in the previous assistant message whose input holds the argument the header names
  (`[read_file for 'b.py']`), else of its first open call of that tool, else of its first open call
  (with none it stays user text with origin `tool-output`); `Tool [x] was not executed ...` /
  `Skipping tool [x ...]` notices are error results of such calls; native `tool_result` /
  `tool-result` blocks pair by id. A result is an error when recorded so, or when its text says the
  user denied it or the tool failed.
  What the user wrote inside a result (`<feedback>`, `<answer>`, `<user_message>`: Cline's
  USER_CONTENT_TAGS) is split off into the user message, from the tag on (also out of a harness
  block such as `[TASK RESUMPTION] ...` holding it, and from a slash command's
  `<explicit_instructions>` put before them: `src/core/slash-commands/index.ts`); what cannot
  be split off (Roo Code's JSON feedback, the user's edits of a proposed file) is pinned in the
  result (`_users_words`);
- `<environment_details>` (and Claude Dev's `<potentially_relevant_details>`) become a text block of
  their own, verbatim; the task, feedback, answers and plain text stay the human's words (no origin); a
  user message holding only harness text (environment details, `[TASK RESUMPTION]`, the "You did not
  use a tool" nag, `<hook_context>`, focus-chain reminders, Roo's truncation markers) gets origin
  `harness`;
- a Roo Code condense summary (`isSummary`) -> a user message with its text, origin `summary`;
- thinking / redacted thinking / `reasoning` blocks and `reasoning_content` / `reasoning_details`
  -> `ThinkingBlock`s; a standalone encrypted reasoning item joins the next assistant message.
Skipped and counted: Gemini `thoughtSignature` blocks, items that are no message, roles other than
user / assistant / tool. `ui_messages.json` (what the chat panel shows) and `task_metadata.json` are
refused with an error naming `api_conversation_history.json` beside them. A task folder given
itself is read for its history (`claude_messages.json`, the history's first name, too); Roo Code's
JSON results of a call that did not run (`{"status": "denied" | "error", ...}`) are errors.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import JsonValue

from ..context import (
    HARNESS_BLOCKS_KEY,
    ORIGIN_KEY,
    AgentContext,
    Block,
    ContentPart,
    ImageBlock,
    TextBlock,
    ThinkingBlock,
    ToolCallBlock,
    ToolResultBlock,
)
from ..errors import BadInputError
from ._chat import anthropic_block, anthropic_image, message_metadata, repair_chat_pairing
from ._marks import Span, Where, find_after, mark_words
from ._pairing import Turn, freeze_all
from ._util import (
    as_text,
    context_metadata,
    image_from_url,
    note_repairs,
    note_skipped,
    thinking_from,
)
from .base import Document, Format, read_document

HISTORY_FILE = "api_conversation_history.json"
FIRST_HISTORY_FILE = "claude_messages.json"
"""The history's name before the rename; Roo Code's `readApiMessages` still reads it."""

# Tools Cline and Roo Code describe to the model as XML-style tags (older versions, and every version
# whose model has no native tool calling).
TOOL_NAMES = frozenset(
    {
        # Cline
        "execute_command",
        "read_file",
        "write_to_file",
        "replace_in_file",
        "search_files",
        "list_files",
        "list_code_definition_names",
        "browser_action",
        "use_mcp_tool",
        "access_mcp_resource",
        "ask_followup_question",
        "plan_mode_respond",
        "act_mode_respond",
        "load_mcp_documentation",
        "attempt_completion",
        "new_task",
        "condense",
        "summarize_task",
        "report_bug",
        "new_rule",
        "web_fetch",
        "web_search",
        "apply_patch",
        "generate_explanation",
        # Roo Code
        "apply_diff",
        "insert_content",
        "search_and_replace",
        "search_replace",
        "edit_file",
        "switch_mode",
        "codebase_search",
        "fetch_instructions",
        "update_todo_list",
        "run_slash_command",
        "generate_image",
    }
)
# Parameters whose value may itself contain tags (file contents, diffs, prose): closed by their last
# closing tag inside the call, as Cline's parser does for file contents.
_LONG_PARAMS = frozenset({"content", "diff", "result", "response", "context", "message", "todos"})
_TOOL_OPEN = re.compile(r"<(" + "|".join(sorted(TOOL_NAMES)) + r")>")
_PARAM_OPEN = re.compile(r"<([A-Za-z_][\w-]*)>")

_HEADER = re.compile(r"\[(?P<name>[A-Za-z_][\w-]*)(?P<desc>.*?)\] Result:", re.DOTALL)
_DESCRIBED = re.compile(r" for '(.*?)'(?: in '.*')?\Z", re.DOTALL)
"""The argument `toolDescription` names in a result's header (`[read_file for 'src/a.ts']`,
`[search_files for 'TODO' in '*.ts']`)."""
_NOT_EXECUTED = re.compile(
    r"(?:Tool \[(?P<a>[A-Za-z_][\w-]*)[^\]]*\] was (?:not executed|interrupted and not executed)"
    r"|Skipping tool \[(?P<b>[A-Za-z_][\w-]*))"
)
_ENV = re.compile(
    r"<(environment_details|potentially_relevant_details)>.*?</\1>|"
    r"<(environment_details|potentially_relevant_details)>.*\Z",
    re.DOTALL,
)
_USER_TAGS = ("<feedback>", "<answer>", "<user_message>")
_INSTRUCTIONS_END = "</explicit_instructions>"
_HARNESS_PREFIXES = (
    "[TASK RESUMPTION]",
    "[ERROR] You did not use a tool",
    "<hook_context",
    "<explicit_instructions",
    "(The user did not provide a new message",
    "[NOTE] Some previous conversation history",
    "# task_progress",  # Cline's focus-chain reminders
    "# TODO LIST",
)
_HUMAN_PREFIXES = (
    "The user provided the following feedback:",
    "You seem to be having trouble proceeding.",
    "New instructions for task continuation:",
    "New message to respond to",
)
_ERROR_STARTS = (
    "The user denied this operation",
    "The tool execution failed",
    "Missing value for required parameter",
    "This tool cannot be used in PLAN MODE",
    "Invalid JSON argument",
    "[ERROR]",
    "Error:",
    "Tool [",
    "Skipping tool",
)
_BLOCKED = re.compile(r"^Access to .* is blocked by the \.(?:cline|roo)ignore", re.DOTALL)
_ROO_KEYS = (
    "isSummary",
    "condenseId",
    "condenseParent",
    "truncationId",
    "truncationParent",
    "isTruncationMarker",
)
_ROLES = frozenset({"user", "assistant"})


class ClineFormat(Format):
    name = "cline"
    description = "Cline / Roo Code task history (api_conversation_history.json)"
    extension = ".json"
    priority = 10
    agent = "Cline"
    """The agent named in a refusal of its chat panel's files."""

    def read_layout(self, path: Path) -> Document | None:
        """A task folder (`tasks/<task id>/`): its history (`api_conversation_history.json`, or
        `claude_messages.json` in a folder an early release wrote)."""
        if not path.is_dir():
            return None
        for name in (HISTORY_FILE, FIRST_HISTORY_FILE):
            if (path / name).is_file():
                return read_document(path / name)
        return None

    def sniff(self, doc: Document) -> bool:
        if doc.kind != "json":
            return False
        data = doc.data
        if _is_ui_messages(data) or _is_task_metadata(data):
            return True
        messages = _messages_of(data)
        if not messages or not _all_shaped(data, messages):
            return False
        return isinstance(data, dict) or _signed(messages)

    def load(self, doc: Document) -> list[AgentContext]:
        data = doc.data
        if doc.kind == "json" and (_is_ui_messages(data) or _is_task_metadata(data)):
            which = "ui_messages.json" if isinstance(data, list) else "task_metadata.json"
            instead = Path(doc.path).with_name(HISTORY_FILE)
            raise BadInputError(
                f"this is {self.agent}'s {which} (the chat panel's record), not the conversation "
                "the model saw",
                path=doc.path,
                hint=f"load {instead} instead",
            )
        messages = _messages_of(data) if doc.kind == "json" else None
        if messages is None or not _all_shaped(data, messages):
            raise BadInputError(
                "not a Cline / Roo Code task history (no array of user / assistant messages)",
                path=doc.path,
                hint=f"expected a task folder's {HISTORY_FILE}",
            )
        builder = _ClineTaskContextBuilder()
        for raw in doc.take(messages):
            builder.add(raw)
        return [builder.context(doc.path)]


# --------------------------------------------------------------------------- messages -> turns


class _ClineTaskContextBuilder:
    """Turns one task history into turns."""

    def __init__(self) -> None:
        self.turns: list[Turn] = []
        self.skipped: Counter[str] = Counter()
        self.index = 0  # of the next saved message (XML call ids name it)
        self.open_calls: list[tuple[str, str]] = []  # (id, name) of the last assistant's XML calls
        self.call_args: dict[str, set[str]] = {}  # the string inputs of each open call, by id
        self.pending_thinking: list[Block] = []
        self.model: str | None = None

    # ----------------------------------------------------------------- messages

    def add(self, raw: Any) -> None:
        """The next saved message."""
        index = self.index
        self.index += 1
        if not isinstance(raw, dict):
            self.skipped["non-object"] += 1
            return
        if "role" not in raw and raw.get("type") == "reasoning":
            self.reasoning_item(raw)
            return
        role = raw.get("role")
        meta = self.metadata(raw)
        if raw.get("isSummary") is True:
            text = _plain_text(raw.get("content"))
            self.turns.append(Turn("user", [TextBlock(text=text)], {**meta, ORIGIN_KEY: "summary"}))
            return
        if role == "assistant":
            self.assistant(index, raw, meta)
        elif role == "user":
            self.user(raw, meta)
        elif role == "tool":
            self.user({"content": raw.get("content")}, meta)
        else:
            self.skipped[f"role/{role}"] += 1

    def metadata(self, raw: dict[str, Any]) -> dict[str, JsonValue]:
        meta = message_metadata(raw)
        info = raw.get("modelInfo")
        if isinstance(info, dict) and isinstance(info.get("modelId"), str):
            meta["model"] = info["modelId"]
            if isinstance(info.get("mode"), str):
                meta["mode"] = info["mode"]
        if isinstance(raw.get("metrics"), dict):
            meta["usage"] = raw["metrics"]
        for key in _ROO_KEYS:
            if raw.get(key) is not None and key != "isSummary":
                meta[key] = raw[key]
        if raw.get("role") == "assistant" and isinstance(meta.get("model"), str):
            self.model = self.model or str(meta["model"])
        return meta

    def reasoning_item(self, raw: dict[str, Any]) -> None:
        summary = raw.get("summary")
        text = "\n".join(
            as_text(s.get("text")) for s in summary or [] if isinstance(s, dict) and s.get("text")
        )
        sealed = raw.get("encrypted_content")
        if not text and not isinstance(sealed, str):
            self.skipped["reasoning"] += 1
            return
        self.pending_thinking.append(
            ThinkingBlock(
                thinking=text,
                signature=sealed if isinstance(sealed, str) else None,
                redacted=not text,
            )
        )

    def assistant(self, index: int, raw: dict[str, Any], meta: dict[str, JsonValue]) -> None:
        content = raw.get("content")
        items = (
            [{"type": "text", "text": content}]
            if isinstance(content, str)
            else [b for b in content if isinstance(b, dict)]
            if isinstance(content, list)
            else []
        )
        native = any(b.get("type") in ("tool_use", "tool-call") for b in items)
        blocks: list[Block] = list(self.pending_thinking)
        self.pending_thinking = []
        if not any(b.get("type") in ("thinking", "reasoning") for b in items):
            blocks.extend(thinking_from(raw))
        calls: list[tuple[str, str]] = []
        for item in items:
            kind = item.get("type")
            if kind == "text" and not native:
                for piece in split_tool_calls(as_text(item.get("text"))):
                    if isinstance(piece, str):
                        blocks.append(TextBlock(text=piece))
                        continue
                    call_id = f"cline-{index}-{len(calls)}"
                    calls.append((call_id, piece[0]))
                    blocks.append(ToolCallBlock(id=call_id, name=piece[0], input=piece[1]))
            elif kind == "tool-call":
                value = item.get("input")
                blocks.append(
                    ToolCallBlock(
                        id=as_text(item.get("toolCallId")),
                        name=as_text(item.get("toolName")),
                        input=value if value is not None else {},
                    )
                )
            elif kind == "reasoning":
                text = as_text(item.get("text"))
                if text:
                    blocks.append(ThinkingBlock(thinking=text))
            elif kind == "thoughtSignature":
                self.skipped["thoughtSignature"] += 1
            else:
                blocks.append(anthropic_block(item))
        if native:  # their results may come back as `[tool ...] Result:` text, not by id
            calls = [(b.id, b.name) for b in blocks if isinstance(b, ToolCallBlock)]
        self.open_calls = calls
        self.call_args = {
            b.id: _string_inputs(b.input) for b in blocks if isinstance(b, ToolCallBlock)
        }
        self.turns.append(Turn("assistant", blocks, meta))

    def user(self, raw: dict[str, Any], meta: dict[str, JsonValue]) -> None:
        content = raw.get("content")
        items: list[Any] = [content] if isinstance(content, str) else list(content or [])
        turn = _UserTurn()
        current: _Result | None = None
        for item in items:
            if isinstance(item, str):
                item = {"type": "text", "text": item}
            if not isinstance(item, dict):
                continue
            kind = item.get("type")
            if kind in ("tool_result", "tool-result"):
                current = None
                self.native_result(turn, item)
            elif kind in ("image", "file"):
                image = _image(item) if kind == "image" else None
                if current is not None and current.orphan and image is not None:
                    turn.blocks.append(image)
                elif current is not None and image is not None:
                    current.parts.append(image)
                elif image is not None:
                    turn.blocks.append(image)
                    turn.human = True
                else:
                    turn.add_text(as_text(item), "plain")
            elif kind == "text":
                current = self.text(turn, current, as_text(item.get("text")))
            else:
                current = None
                turn.add_text(as_text(item), "plain")
        self.open_calls = []
        if turn.results:
            results: list[Block] = [
                ToolResultBlock(tool_call_id=r.call_id, content=tuple(r.parts), is_error=r.is_error)
                for r in turn.results
            ]
            self.turns.append(Turn("tool", results, meta))
        if turn.blocks:
            user_meta: dict[str, JsonValue] = {} if turn.results else dict(meta)
            if raw.get("isTruncationMarker") is True or not turn.human:
                user_meta[ORIGIN_KEY] = "tool-output" if turn.tool_output else "harness"
            elif turn.harness:  # the user's words, with environment details beside them
                user_meta[HARNESS_BLOCKS_KEY] = list(turn.harness)
            self.turns.append(Turn("user", turn.blocks, user_meta))

    def take_call(self, name: str, described: str = "") -> str | None:
        """The open call a result is for: of that tool, the one whose input holds the argument
        the result's header names (`[read_file for 'b.py']`), else the first; else the first
        open call."""
        named = _DESCRIBED.match(described)
        if named is not None:
            for i, (call_id, called) in enumerate(self.open_calls):
                if called == name and named.group(1) in self.call_args.get(call_id, ()):
                    del self.open_calls[i]
                    return call_id
        for i, (call_id, called) in enumerate(self.open_calls):
            if called == name:
                del self.open_calls[i]
                return call_id
        if self.open_calls:
            return self.open_calls.pop(0)[0]
        return None

    def add_result(self, turn: _UserTurn, call_id: str, text: str, error: bool) -> _Result:
        part, words = _split_user_words(text)
        result = _Result(call_id=call_id, is_error=error or _is_error_text(text))
        if part:
            result.parts.append(TextBlock(text=part))
        turn.results.append(result)
        turn.add_text(words, "human")
        return result

    def native_result(self, turn: _UserTurn, item: dict[str, Any]) -> None:
        if item.get("type") == "tool-result":
            call_id = as_text(item.get("toolCallId"))
            parts, error = _ai_sdk_output(item.get("output"))
        else:
            call_id = as_text(item.get("tool_use_id"))
            parts, error = _result_parts(item.get("content")), item.get("is_error") is True
        self.open_calls = [c for c in self.open_calls if c[0] != call_id]
        text = "\n".join(p.text for p in parts if isinstance(p, TextBlock))
        part, words = _split_user_words(text)
        if words:
            images = [p for p in parts if not isinstance(p, TextBlock)]
            parts = [TextBlock(text=part)] if part else []
            parts.extend(images)
        turn.results.append(
            _Result(call_id=call_id, parts=parts, is_error=error or _is_error_text(text))
        )
        turn.add_text(words, "human")

    def text(self, turn: _UserTurn, current: _Result | None, text: str) -> _Result | None:
        """One user text block; returns the result that later blocks may continue."""
        for piece in _env_split(text):
            current = self.text_piece(turn, current, piece)
        return current

    def text_piece(self, turn: _UserTurn, current: _Result | None, text: str) -> _Result | None:
        head = text.lstrip()
        header = _HEADER.match(head)
        skipped = _NOT_EXECUTED.match(head)
        if header is not None:
            call_id = self.take_call(header.group("name"), header.group("desc"))
            body = head[header.end() :].removeprefix("\n")
            if call_id is None:
                part, words = _split_user_words(text)
                turn.add_text(part, "harness")
                turn.add_text(words, "human")
                turn.tool_output = True
                return _Result(call_id="", orphan=True)
            return self.add_result(turn, call_id, body, False)
        if skipped is not None:
            call_id = self.take_call(skipped.group("a") or skipped.group("b"))
            if call_id is not None:
                self.add_result(turn, call_id, text, True)
                return None
        kind = _text_kind(text)
        if current is not None and kind == "plain":
            if not current.parts and _is_error_text(text):
                current.is_error = True
            part, words = _split_user_words(text)
            if current.orphan:
                turn.add_text(part, "harness")
            elif part:
                current.parts.append(TextBlock(text=part))
            turn.add_text(words, "human")
            return current
        if kind == "harness" and head.startswith(_HARNESS_PREFIXES):
            # the user's words in one block with harness text: `[TASK RESUMPTION] ...` and the
            # `<user_message>` (Cline before 3.x, Roo Code's `resumeTaskFromHistory`), or a slash
            # command's `<explicit_instructions>` put before the `<task>` / `<feedback>` it was
            # typed in (Cline's `parseSlashCommands`)
            part, words = _split_user_words(text)
            closed = (
                text.find(_INSTRUCTIONS_END) if head.startswith("<explicit_instructions") else -1
            )
            if closed >= 0 and text[closed + len(_INSTRUCTIONS_END) :].strip():
                cut = closed + len(_INSTRUCTIONS_END)
                part, words = text[:cut], text[cut:].strip("\n")
            turn.add_text(part, kind)
            turn.add_text(words, "human")
            return None
        turn.add_text(text, kind)
        return None

    # ----------------------------------------------------------------- the context

    def context(self, path: str) -> AgentContext:
        """The task history read from `path` as a context."""
        if self.pending_thinking:
            self.turns.append(Turn("assistant", self.pending_thinking))
        repaired = repair_chat_pairing(freeze_all(self.turns))
        file = Path(path)
        meta = context_metadata(
            ClineFormat.name,
            session_id=file.parent.name
            if file.name in (HISTORY_FILE, FIRST_HISTORY_FILE) and file.parent.name
            else None,
            model=self.model or None,
        )
        note_repairs(meta, repaired)
        note_skipped(meta, self.skipped)
        return mark_words(
            AgentContext(messages=tuple(repaired.messages), metadata=meta), _users_words
        )


# --------------------------------------------------------------------------- sniffing


def _messages_of(data: Any) -> list[Any] | None:
    """The saved messages: the legacy array, or Roo Code's `{"version": 2, "messages"}`."""
    if isinstance(data, list):
        return data
    messages = data.get("messages") if isinstance(data, dict) else None
    if isinstance(messages, list) and data.get("version") == 2:
        return messages
    return None


def _is_ui_messages(data: Any) -> bool:
    items = data[:20] if isinstance(data, list) else []
    return bool(items) and all(
        isinstance(m, dict) and m.get("type") in ("say", "ask") and isinstance(m.get("ts"), int)
        for m in items
    )


def _is_task_metadata(data: Any) -> bool:
    return isinstance(data, dict) and "files_in_context" in data and "messages" not in data


def _shaped(m: Any, roles: frozenset[str] = _ROLES) -> bool:
    if not isinstance(m, dict):
        return False
    if "role" not in m:
        return m.get("type") == "reasoning"
    if not isinstance(m.get("role"), str) or m.get("role") not in roles:
        return False
    content = m.get("content")
    return isinstance(content, str) or (
        isinstance(content, list)
        and all(isinstance(b, dict) and isinstance(b.get("type"), str) for b in content)
    )


def _all_shaped(data: Any, messages: list[Any]) -> bool:
    """Every item a message of the legacy array, or (in Roo Code's envelope) of AI SDK messages."""
    roles = _ROLES | {"tool"} if isinstance(data, dict) else _ROLES
    return all(_shaped(m, roles) for m in messages)


def _user_texts(m: dict[str, Any]) -> Iterator[str]:
    content = m.get("content")
    if isinstance(content, str):
        yield content
    elif isinstance(content, list):
        for b in content:
            if b.get("type") == "text" and isinstance(b.get("text"), str):
                yield b["text"]


def _signed(messages: list[Any]) -> bool:
    """Something only Cline or Roo Code writes into a saved message array."""
    for m in messages:
        if any(key in m for key in ("modelInfo", *_ROO_KEYS)):
            return True
        if m.get("role") != "user":
            continue
        for text in _user_texts(m):
            head = text.lstrip()
            if (
                "<environment_details>" in text
                or "<potentially_relevant_details>" in text
                or head.startswith("[TASK RESUMPTION]")
                or _HEADER.match(head)
            ):
                return True
    return False


# --------------------------------------------------------------------------- assistant: XML calls


def _param_value(name: str, raw: str) -> str:
    if name in ("content", "diff"):
        return raw.removeprefix("\n").removesuffix("\n")
    return raw.strip()


def _params(body: str) -> dict[str, JsonValue]:
    """The child tags of one XML-style call, in order (a repeated tag keeps its first value)."""
    out: dict[str, JsonValue] = {}
    pos = 0
    while (match := _PARAM_OPEN.search(body, pos)) is not None:
        name = match.group(1)
        close = f"</{name}>"
        end = body.rfind(close, match.end()) if name in _LONG_PARAMS else -1
        if end < 0:
            end = body.find(close, match.end())
        if end < 0:  # unterminated (an interrupted stream): the rest is its value
            out.setdefault(name, _param_value(name, body[match.end() :]))
            break
        out.setdefault(name, _param_value(name, body[match.end() : end]))
        pos = end + len(close)
    return out


def split_tool_calls(text: str) -> list[str | tuple[str, dict[str, JsonValue]]]:
    """`text` as prose pieces and `(tool name, input)` calls, in order."""
    out: list[str | tuple[str, dict[str, JsonValue]]] = []
    pos = 0
    for match in _TOOL_OPEN.finditer(text):
        if match.start() < pos:
            continue
        name = match.group(1)
        close = f"</{name}>"
        end = text.find(close, match.end())
        body = text[match.end() : end] if end >= 0 else text[match.end() :]
        params = _params(body)
        if end >= 0 or params:
            before = text[pos : match.start()]
            if before.strip():
                out.append(before.strip("\n"))
            out.append((name, params))
            pos = len(text) if end < 0 else end + len(close)
    rest = text[pos:]
    if rest.strip():
        out.append(rest.strip("\n") if pos else rest)
    return out


# --------------------------------------------------------------------------- user: results and text


def _is_error_text(text: str) -> bool:
    head = text.lstrip()
    return (
        head.startswith(_ERROR_STARTS)
        or bool(_BLOCKED.match(head))
        or bool(_JSON_FAILED.match(head))
    )


_JSON_FAILED = re.compile(r'\A\{"status":\s*"(?:denied|error)"')
"""Roo Code's JSON results of a call that did not run (src/core/prompts/responses.ts:
`toolDenied`, `toolDeniedWithFeedback`, `toolError`, `rooIgnoreError`)."""


def _split_user_words(text: str) -> tuple[str, str]:
    """(result part, the user's words from the first USER_CONTENT_TAG on)."""
    found = [i for i in (text.find(tag) for tag in _USER_TAGS) if i >= 0]
    if not found:
        return text, ""
    at = min(found)
    return text[:at].rstrip("\n"), text[at:]


_JSON_FEEDBACK = re.compile(r'\A\s*\{"status":\s*"(?:denied|approved|guidance)",\s*"feedback":\s*"')
"""Roo Code's `formatResponse.toolDeniedWithFeedback` / `toolApprovedWithFeedback` /
`tooManyMistakes` (src/core/prompts/responses.ts): JSON whose `feedback` the user typed."""
_USER_EDITS = "The user made the following updates to your content:\n\n"
_USER_EDITS_END = ("\n\nThe user's editor also applied", "\n\nThe updated content")
"""Cline's `formatResponse.fileEditWithUserChanges` and Roo Code's write tools: the diff of what
the user changed in the proposed file before approving it, then the saved file."""


def _users_words(where: Where, text: str) -> list[Span]:
    """The user's words left inside tool results (those in `USER_CONTENT_TAGS` are split off into
    the user message while reading): Roo Code's JSON feedback, and the user's own edits."""
    if where.result is None:
        return []
    if _JSON_FEEDBACK.match(text):
        return [Span(0, len(text), "user-feedback")]
    edits = find_after(text, _USER_EDITS, _USER_EDITS_END)
    return [Span(*edits, "user-feedback")] if edits is not None else []


def _text_kind(text: str) -> str:
    """ "harness", "human" or "plain" for a user text block that is no tool result."""
    head = text.lstrip()
    if _ENV.fullmatch(head.rstrip()) or head.startswith(_HARNESS_PREFIXES):
        return "harness"
    if head.startswith(_HUMAN_PREFIXES) or head.startswith("<task>"):
        return "human"
    return "plain"


def _env_split(text: str) -> list[str]:
    """A text block with its environment-details spans cut out as pieces of their own."""
    pieces: list[str] = []
    pos = 0
    for match in _ENV.finditer(text):
        before = text[pos : match.start()]
        if before.strip():
            pieces.append(before.strip("\n"))
        pieces.append(match.group(0))
        pos = match.end()
    if pos == 0:
        return [text]
    rest = text[pos:]
    if rest.strip():
        pieces.append(rest.strip("\n"))
    return pieces


@dataclass
class _Result:
    call_id: str
    parts: list[ContentPart] = field(default_factory=list)
    is_error: bool = False
    orphan: bool = False
    """A result no call answers: its text stays in the user message as tool output."""


@dataclass
class _UserTurn:
    """What one saved user message becomes: results, then the rest of its blocks."""

    results: list[_Result] = field(default_factory=list)
    blocks: list[Block] = field(default_factory=list)
    human: bool = False
    tool_output: bool = False
    harness: list[int] = field(default_factory=list)
    """Indexes in `blocks` of harness text (environment details, resumption notes)."""

    def add_text(self, text: str, kind: str) -> None:
        if not text:
            return
        if kind == "harness":
            self.harness.append(len(self.blocks))
        self.blocks.append(TextBlock(text=text))
        if kind in ("human", "plain"):
            self.human = True


def _ai_sdk_output(output: Any) -> tuple[list[ContentPart], bool]:
    """An AI SDK tool-result `output` ({type: text|json|error-text|error-json|content, value})."""
    if not isinstance(output, dict):
        return ([TextBlock(text=as_text(output))] if output is not None else []), False
    kind = output.get("type")
    value = output.get("value")
    error = isinstance(kind, str) and kind.startswith("error")
    if kind == "content" and isinstance(value, list):
        parts: list[ContentPart] = []
        for item in value:
            if isinstance(item, dict) and item.get("type") == "text":
                parts.append(TextBlock(text=as_text(item.get("text"))))
            elif isinstance(item, dict) and item.get("type") in ("media", "image-data"):
                parts.append(ImageBlock(media_type=item.get("mediaType"), data=item.get("data")))
            else:
                parts.append(TextBlock(text=as_text(item)))
        return parts, error
    return [TextBlock(text=as_text(value))], error


def _image(block: dict[str, Any]) -> ImageBlock:
    if block.get("type") == "image" and "image" in block:  # AI SDK ImagePart
        image = image_from_url(block.get("image"))
        media = block.get("mediaType")
        if isinstance(media, str) and image.media_type is None:
            return ImageBlock(media_type=media, url=image.url, data=image.data)
        return image
    return anthropic_image(block)


def _result_parts(content: Any) -> list[ContentPart]:
    if isinstance(content, str):
        return [TextBlock(text=content)]
    parts: list[ContentPart] = []
    for item in content if isinstance(content, list) else []:
        if isinstance(item, dict) and item.get("type") == "image":
            parts.append(_image(item))
        elif isinstance(item, dict) and item.get("type") == "text":
            parts.append(TextBlock(text=as_text(item.get("text"))))
        else:
            parts.append(TextBlock(text=as_text(item)))
    return parts


def _plain_text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(
            as_text(b.get("text"))
            for b in content
            if isinstance(b, dict) and b.get("type") == "text"
        )
    return as_text(content)


def _string_inputs(value: Any) -> set[str]:
    """The string values of a call's input (a tool's `path`, `command`, `regex`, ...)."""
    if isinstance(value, str):
        return {value}
    if isinstance(value, dict):
        return {v for v in value.values() if isinstance(v, str)}
    return set()


__all__ = ["HISTORY_FILE", "TOOL_NAMES", "ClineFormat", "split_tool_calls"]
