"""mini-swe-agent .traj.json trajectory.

A trajectory is `{"info": {...}, "messages": [...], "trajectory_format": "mini-swe-agent-1",
"instance_id": ...}`. `messages` is exactly what the model was sent: the system prompt, the task
(user), then model replies (assistant, with the raw API response in `extra.response`) each
followed by the environment's answer as a user message.

How the text-based protocol maps onto compactkit's blocks:

- An assistant reply keeps its full text as a `TextBlock` (nothing is lost); reasoning the API
  returned (`reasoning` / `reasoning_details` / `reasoning_content` / `thinking_blocks` in
  `extra.response.choices[0].message`) comes first as a `ThinkingBlock`.
- A reply with exactly one action block (the configured `action_regex`, by default
  ```` ```bash ... ``` ````) also gets `ToolCallBlock(id=f"call_{n}", name="bash",
  input={"command": <block>})`; the next user message is its result. `is_error` is True when
  the observation's `<returncode>` is not 0, when it is a timeout notice, and for format errors.
- A reply with zero or several action blocks is rejected by mini-swe-agent and nothing runs; the
  format-error message it gets back is still the answer to that step, so the reply gets a call
  `input={"rejected_actions": [<every block found>]}` and the format error becomes its result
  with `is_error=True` (tool message metadata `{"format_error": true}`). Every model step is
  thus one call/result pair and the number of calls equals `info.model_stats.api_calls`.
- The final message after the submit command (the submitted output) is the result of that call.
- v2 files (`trajectory_format` "mini-swe-agent-1.1") with native tool calls (`tool_calls` on
  assistant messages, `role: "tool"` results) use the recorded ids; an `exit` message answers a
  still-open call or is dropped (its status is in the context metadata).
- User messages (upstream: SWE-agent/mini-swe-agent `src/minisweagent/agents/default.py`
  `run` / `add_messages`, `agents/interactive.py`, `agents/compaction.py`, `exceptions.py`; the
  format-error and observation messages of `models/utils/actions_*.py`). The first user message
  is the task (the instance template holding it) and stays the human's message. What the user
  typed in the interactive agent is a user message of its own, never a call's result:
  `"Interrupted by user: ..."`, `"The user added a new task: ..."`, `"Command(s) not executed.
  The user rejected your command(s) with the following message: ..."` (v2 marks them with
  `extra.interrupt_type` UserInterruption / UserNewTask / UserRejection), and a command run in
  human mode (`"User command: ..."`, whose output follows as a user message marked
  `metadata["origin"] = "tool-output"`). A call such a message interrupts gets a synthesized
  result. Any other user message that answers no call is the harness's (`"harness"`: limit
  notices, a submission after no call), and a compaction checkpoint
  (`"<conversation_summary>..."`) is `"summary"`.
- Skipped (counted in `metadata["skipped_records"]`): an `exit` message that answers no call
  (`"exit"`) and the empty final notice of a run stopped by its limits (`"user/empty"`).
- Pairing: a call still open when the next non-tool message starts gets a synthesized error
  result (`"[no result recorded]"`, tool message metadata `{"synthesized": true}`), as do open
  calls at the end unless they are exactly the calls of the last message; results of a tool
  message whose call is not open become one user message with their content (metadata
  `{"orphan_result": true}`). The swe-agent adapter pairs the same way.
"""

from __future__ import annotations

import re
from collections import Counter
from datetime import datetime, timezone
from typing import Any

from pydantic import JsonValue

from ..context import (
    ORIGIN_KEY,
    AgentContext,
    Block,
    ContentPart,
    ToolCallBlock,
    ToolResultBlock,
)
from ..errors import BadInputError
from ._pairing import Turn, freeze_all, repair_pairing
from ._util import (
    as_dict,
    as_text,
    content_text,
    context_metadata,
    nonempty_str,
    note_repairs,
    note_skipped,
    parse_arguments,
    parts_from_content,
    str_or_none,
    thinking_from,
)
from .base import Document, Format

_BASH_REGEX = r"```bash\s*\n(.*?)\n```"
_MSWEA_REGEX = r"```mswea_bash_command\s*\n(.*?)\n```"
_RETURNCODE = re.compile(r"<returncode>\s*(-?\d+)\s*</returncode>")
_DEFAULT_FORMAT_ERROR = "Please always provide EXACTLY ONE action"
_DEFAULT_TIMEOUT = "The last command <command>"
_HUMAN_PREFIXES = (
    "Interrupted by user:",
    "The user added a new task:",
    "Command not executed. The user rejected your command",
    "Commands not executed. The user rejected your commands",
    "User command:",
)
"""How the interactive agent (`agents/interactive.py`, v1 and v2) frames what the user typed."""
_HUMAN_INTERRUPTS = ("UserInterruption", "UserNewTask", "UserRejection")
_SUMMARY_PREFIX = "<conversation_summary>"
"""How a compaction checkpoint (`agents/compaction.py` `summary_message`) begins."""


class MiniSweAgentFormat(Format):
    name = "mini-swe-agent"
    description = "mini-swe-agent .traj.json trajectory"
    extension = ".json"
    priority = 10

    def sniff(self, doc: Document) -> bool:
        try:
            return doc.kind == "json" and _is_mini(doc.data)
        except Exception:
            return False

    def load(self, doc: Document) -> list[AgentContext]:
        if doc.kind != "json" or not _is_mini(doc.data):
            raise BadInputError(
                "not a mini-swe-agent trajectory (expected an object with messages[] and "
                "trajectory_format or info.mini_version)",
                path=doc.path,
            )
        builder = _MiniSweAgentContextBuilder(doc.data)
        try:
            for msg in doc.take(doc.data["messages"]):
                builder.add(msg)
            return [builder.context()]
        except BadInputError as exc:
            raise BadInputError(exc.what, path=doc.path, hint=exc.hint) from None


# --------------------------------------------------------------------------- records -> turns


class _MiniSweAgentContextBuilder:
    """Turns the `messages` of one trajectory into turns."""

    def __init__(self, data: dict[str, Any]) -> None:
        self.data = data
        info = data.get("info")
        self.info = as_dict(info)
        config = self.info.get("config")
        self.config = as_dict(config)
        tag = data.get("trajectory_format")
        default = _BASH_REGEX if tag in (None, "mini-swe-agent-1") else _MSWEA_REGEX
        regex = _get(self.config, "agent", "action_regex") or _get(
            self.config, "model", "action_regex"
        )
        try:
            self.action_regex = re.compile(regex if isinstance(regex, str) else default, re.DOTALL)
        except re.error:
            self.action_regex = re.compile(default, re.DOTALL)
        self.format_error_prefix = self._template_prefix(
            "format_error_template", _DEFAULT_FORMAT_ERROR
        )
        self.timeout_prefix = self._template_prefix("timeout_template", _DEFAULT_TIMEOUT)
        self.turns: list[Turn] = []
        self.skipped: Counter[str] = Counter()
        self.system: str | None = None
        self.index = 0  # of the next message
        self.calls = 0
        self.models: Counter[str] = Counter()
        self.open_ids: list[str] = []  # calls of the latest assistant turn still waiting
        self.rejected: list[str] | None = None  # actions of a latest reply that had no valid one
        self.last_assistant: Turn | None = None
        self.task_seen = False
        self.user_ran = False  # a command the user ran in human mode waits for its output

    def _template_prefix(self, key: str, default: str) -> str:
        template = _get(self.config, "agent", key) or _get(self.config, "model", key)
        if isinstance(template, str):
            prefix = re.split(r"\{\{|\{%", template, maxsplit=1)[0].strip()
            if len(prefix) >= 10:
                return prefix
        return default

    def next_id(self) -> str:
        self.calls += 1
        return f"call_{self.calls}"

    # ----------------------------------------------------------------- per message

    def assistant(self, msg: dict[str, Any]) -> tuple[Turn, list[str] | None]:
        """The assistant turn and, for a reply without exactly one action, the blocks found."""
        extra = as_dict(msg.get("extra"))
        response = as_dict(extra.get("response"))
        choices = response.get("choices")
        first_choice = as_dict(choices[0]) if isinstance(choices, list) and choices else {}
        api_message = as_dict(first_choice.get("message"))
        blocks: list[Block] = [*(thinking_from(msg) or thinking_from(api_message))]
        blocks.extend(text_blocks(msg.get("content")))
        metadata: dict[str, JsonValue] = {}
        if isinstance(response.get("id"), str):
            metadata["id"] = response["id"]
        stamp = iso_time(extra.get("timestamp", response.get("created")))
        if stamp:
            metadata["timestamp"] = stamp
        model = response.get("model")
        if isinstance(model, str):
            metadata["model"] = model
            self.models[model] += 1
        usage = as_dict(response.get("usage")) or as_dict(extra.get("usage"))
        if usage:
            metadata["usage"] = usage
        if isinstance(extra.get("cost"), (int, float)):
            metadata["cost"] = extra["cost"]
        rejected: list[str] | None = None
        tool_calls = msg.get("tool_calls") or api_message.get("tool_calls")
        if isinstance(tool_calls, list) and tool_calls:
            for call in tool_calls:
                if not isinstance(call, dict):
                    continue
                function = as_dict(call.get("function"))
                call_id = call.get("id") if isinstance(call.get("id"), str) else self.next_id()
                blocks.append(
                    ToolCallBlock(
                        id=call_id,
                        name=as_text(function.get("name")) or "bash",
                        input=parse_arguments(function.get("arguments")),
                    )
                )
        else:
            actions = self.actions(msg, extra)
            if len(actions) == 1:
                blocks.append(
                    ToolCallBlock(id=self.next_id(), name="bash", input={"command": actions[0]})
                )
            else:
                rejected = actions
        return Turn(role="assistant", blocks=blocks, metadata=metadata), rejected

    def actions(self, msg: dict[str, Any], extra: dict[str, Any]) -> list[str]:
        recorded = extra.get("actions")
        if isinstance(recorded, list) and recorded:
            return [as_text(a.get("command") if isinstance(a, dict) else a) for a in recorded]
        return [m.strip() for m in self.action_regex.findall(content_text(msg.get("content")))]

    def is_error(self, text: str, extra: dict[str, Any], final: bool) -> bool:
        code = extra.get("returncode")
        if isinstance(code, int) and not isinstance(code, bool):
            return code != 0
        match = _RETURNCODE.match(text.lstrip())
        if match:
            return int(match.group(1)) != 0
        if text.lstrip().startswith((self.format_error_prefix, self.timeout_prefix)):
            return True
        return final and self.info.get("exit_status") not in (None, "Submitted")

    def user_origin(self, msg: dict[str, Any], text: str, task_seen: bool) -> str | None:
        """`metadata["origin"]` of a user message that answers no call: None for the task and
        for what the user typed in the interactive agent, else where it came from."""
        if not task_seen:
            return None  # the instance template holding the task
        if text.lstrip().startswith(_SUMMARY_PREFIX):
            return "summary"
        interrupt = as_dict(msg.get("extra")).get("interrupt_type")
        if text.lstrip().startswith(_HUMAN_PREFIXES) and interrupt in (None, *_HUMAN_INTERRUPTS):
            return None
        return "harness"

    def is_human_input(self, msg: dict[str, Any]) -> bool:
        """A user message carrying what the user typed (interruption, rejection, new task, a
        command run in human mode): never a call's result."""
        extra = as_dict(msg.get("extra"))
        interrupt = extra.get("interrupt_type")
        if interrupt is not None and interrupt not in _HUMAN_INTERRUPTS:
            return False
        text = content_text(msg.get("content")).lstrip()
        return text.startswith(_HUMAN_PREFIXES)

    # ----------------------------------------------------------------- whole file

    def add(self, msg: Any) -> None:
        """The next message of the trajectory."""
        index = self.index
        self.index += 1
        if index == 0 and isinstance(msg, dict) and msg.get("role") == "system":
            self.system = content_text(msg.get("content"))
            return
        if not isinstance(msg, dict):
            raise BadInputError(f"message {index} is not an object")
        role = msg.get("role")
        extra = as_dict(msg.get("extra"))
        final = index == len(self.data["messages"]) - 1
        if role == "assistant":
            turn, self.rejected = self.assistant(msg)
            self.turns.append(turn)
            self.last_assistant = turn
            self.open_ids = [b.id for b in turn.blocks if isinstance(b, ToolCallBlock)]
            self.user_ran = False
        elif role == "user" and self.task_seen and self.is_human_input(msg):
            # what the user typed; a call it interrupted is closed as unanswered
            self.turns.append(Turn(role="user", blocks=text_blocks(msg.get("content"))))
            self.rejected = None
            self.open_ids = []
            self.user_ran = content_text(msg.get("content")).lstrip().startswith("User command:")
        elif role == "user" and self.user_ran and not self.open_ids:
            meta: dict[str, JsonValue] = {ORIGIN_KEY: "tool-output"}
            self.turns.append(
                Turn(role="user", blocks=text_blocks(msg.get("content")), metadata=meta)
            )
            self.user_ran = False
        elif role == "tool":
            call_id = msg.get("tool_call_id")
            if not isinstance(call_id, str):
                call_id = self.open_ids[0] if self.open_ids else "unknown"
            if call_id in self.open_ids:
                self.open_ids.remove(call_id)
            text = content_text(msg.get("content"))
            self.turns.append(self.result(call_id, msg, self.is_error(text, extra, final)))
        elif role in ("user", "exit") and (self.open_ids or self.rejected is not None):
            text = content_text(msg.get("content"))
            metadata: dict[str, JsonValue] = {}
            if not self.open_ids and self.last_assistant is not None and self.rejected is not None:
                # the format error answering a reply without exactly one action
                call_id = self.next_id()
                self.last_assistant.blocks.append(
                    ToolCallBlock(
                        id=call_id, name="bash", input={"rejected_actions": self.rejected}
                    )
                )
                metadata["format_error"] = True
                is_error = True
            else:
                call_id = self.open_ids.pop(0) if self.open_ids else "unknown"
                is_error = self.is_error(text, extra, final)
            if role == "exit" or (final and self.info.get("exit_status")):
                status = _get(extra, "exit_status") or self.info.get("exit_status")
                if isinstance(status, str):
                    metadata["exit_status"] = status
            self.turns.append(self.result(call_id, msg, is_error, metadata))
            self.rejected = None
        elif role == "exit":
            self.skipped["exit"] += 1  # the run's end; its status is in the context metadata
        elif role in ("user", "system"):
            self.rejected = None
            blocks = text_blocks(msg.get("content"))
            if not blocks and final:
                self.skipped[f"{role}/empty"] += 1  # the notice of a run stopped by its limits
                return
            user_meta: dict[str, JsonValue] = {}
            if role == "user":
                origin = self.user_origin(msg, content_text(msg.get("content")), self.task_seen)
                if origin is not None:
                    user_meta[ORIGIN_KEY] = origin
                self.task_seen = True
            self.turns.append(Turn(role=role, blocks=blocks, metadata=user_meta))
        else:
            raise BadInputError(f"message {index} has unknown role {role!r}")

    def context(self) -> AgentContext:
        repaired = repair_pairing(
            freeze_all(self.turns),
            close="all",
            keep_pending="last_message",
            orphan_results="user_message_joined",
        )
        meta = self.metadata()
        note_repairs(meta, repaired)
        note_skipped(meta, self.skipped)
        return AgentContext(
            system_instruction=self.system, messages=tuple(repaired.messages), metadata=meta
        )

    def result(
        self,
        call_id: str,
        msg: dict[str, Any],
        is_error: bool,
        metadata: dict[str, JsonValue] | None = None,
    ) -> Turn:
        parts: tuple[ContentPart, ...] = parts_from_content(msg.get("content"))
        block = ToolResultBlock(tool_call_id=call_id, content=parts, is_error=is_error)
        meta: dict[str, JsonValue] = dict(metadata or {})
        extra = as_dict(msg.get("extra"))
        stamp = iso_time(extra.get("timestamp"))
        if stamp:
            meta["timestamp"] = stamp
        return Turn(role="tool", blocks=[block], metadata=meta)

    def metadata(self) -> dict[str, JsonValue]:
        model = _get(self.config, "model", "model_name")
        if not isinstance(model, str) and self.models:
            model = self.models.most_common(1)[0][0]
        stats = self.info.get("model_stats")
        submission = self.info.get("submission")
        return context_metadata(
            MiniSweAgentFormat.name,
            instance_id=str_or_none(self.data.get("instance_id")),
            model=str_or_none(model),
            cwd=nonempty_str(_get(self.config, "environment", "cwd")),
            exit_status=self.info["exit_status"] if _small(self.info.get("exit_status")) else None,
            mini_version=self.info["mini_version"]
            if _small(self.info.get("mini_version"))
            else None,
            model_stats=(
                {k: v for k, v in stats.items() if _small(v)} if isinstance(stats, dict) else None
            ),
            submission_chars=len(submission) if isinstance(submission, str) else None,
            trajectory_format=str_or_none(self.data.get("trajectory_format")),
        )


# --------------------------------------------------------------------------- helpers


def _is_mini(data: Any) -> bool:
    if not isinstance(data, dict) or not isinstance(data.get("messages"), list):
        return False
    tag = data.get("trajectory_format")
    if isinstance(tag, str) and tag.startswith("mini-swe-agent"):
        return True
    info = data.get("info")
    return isinstance(info, dict) and "mini_version" in info


def _get(value: Any, *keys: str) -> Any:
    for key in keys:
        if not isinstance(value, dict):
            return None
        value = value.get(key)
    return value


def text_blocks(content: Any) -> list[Block]:
    """Message content (a string or a list of parts) as blocks; empty text gives no block."""
    return list(parts_from_content(content))


def iso_time(value: Any) -> str | None:
    """An epoch number (seconds) as an ISO-8601 UTC string; strings pass through."""
    if isinstance(value, str):
        return value
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        try:
            return datetime.fromtimestamp(value, tz=timezone.utc).isoformat().replace("+00:00", "Z")
        except (OverflowError, OSError, ValueError):
            return None
    return None


def _small(value: Any) -> bool:
    return isinstance(value, (str, int, float, bool)) and (
        not isinstance(value, str) or len(value) <= 500
    )


__all__ = ["MiniSweAgentFormat"]
