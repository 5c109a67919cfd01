"""SWE-agent .traj trajectory.

A `.traj` file is `{"environment", "trajectory": [steps], "history": [chat messages], "info"}`
(SWE-agent 1.x adds `replay_config`, and a retry run keeps one such record per attempt under
`attempts`). The context is built from `history`, the messages the model was sent; the
`trajectory` steps (and their per-step `query` prompt copies) repeat it and are only counted.

- The leading system message is the system instruction.
- A demonstration shown as one user message (`is_demo`, `message_type: "demonstration"`) stays a
  user message with metadata `{"message_type": "demonstration", "is_demo": true}`. Demonstration
  turns put into the history step by step keep their roles (the model saw them as assistant and
  tool turns) and are marked `is_demo` the same way.
- An assistant message keeps its full text (`content`: discussion plus the command block) and
  gets one `ToolCallBlock` per action: from `tool_calls` with their ids for function-calling
  runs, else `id=f"call_{n}"`, `input={"command": action}` and, as name, the action's first word
  when that is one of the interface's commands listed in the system prompt (open, edit,
  submit, ...), otherwise "bash". `thinking_blocks` become `ThinkingBlock`s; the `thought` field
  is part of the text already and is not repeated.
- The observation after an action (a user message, or a `tool` message with `tool_call_ids`) is
  that action's result. SWE-agent records no exit code, so results are never marked as errors.
- 0.x runs do not add the observation of the final `submit` to the history; that call is left
  pending at the end of the context (the submitted patch is `info.submission`).

User messages (upstream: SWE-agent/SWE-agent `sweagent/types.py` `HistoryItem` with
`message_type` system_prompt / demonstration / observation / action / user, `is_demo`, `agent`,
`thought`, `action`, `tool_calls`, `tool_call_ids`; `sweagent/agent/agents.py`
`add_system_message_to_history`, `_add_demonstration_to_history`,
`add_instance_template_to_history`, `_add_templated_messages_to_history`,
`get_model_requery_history`; 0.x `history` items carry only role / content / agent / is_demo).
SWE-agent has no channel for a human to write mid-run (a human "model" answers as the assistant),
so the only record holding the user's words is the instance template with the problem statement:
the first user message that is no demonstration is the task and stays the human's (text and any
image parts). Every other user-role message carries `metadata["origin"]`: `"demonstration"` for
demonstrations, `"tool-output"` for an observation with no call to answer (after an assistant
turn), `"harness"` for other templated text. Format-error requeries are not part of the history
(they live only in the trajectory steps' `query` copies), so nothing is skipped.
"""

from __future__ import annotations

import json
import re
from typing import Any

from pydantic import JsonValue

from ..context import ORIGIN_KEY, AgentContext, Block, ToolCallBlock, ToolResultBlock
from ..errors import BadInputError
from ._pairing import Turn, freeze_all, repair_pairing
from ._util import (
    as_dict,
    as_text,
    content_text,
    context_metadata,
    nonempty_str,
    note_repairs,
    parse_arguments,
    parts_from_content,
    str_or_none,
    thinking_from,
)
from .base import Document, Format

_DOCSTRING_COMMAND = re.compile(r"^(\w+):\n[ \t]+docstring:", re.MULTILINE)
_LISTED_COMMAND = re.compile(r"^(\w+)(?=$|[ \t]+(?:<|\[|-))", re.MULTILINE)


class SweAgentFormat(Format):
    name = "swe-agent"
    description = "SWE-agent .traj trajectory"
    extension = ".traj"
    priority = 10

    def sniff(self, doc: Document) -> bool:
        try:
            return doc.kind == "json" and _is_swe_agent(doc.data)
        except Exception:
            return False

    def load(self, doc: Document) -> list[AgentContext]:
        data = doc.data
        if doc.kind != "json" or not _is_swe_agent(data):
            raise BadInputError(
                "not a SWE-agent trajectory (expected an object with history[] and trajectory[])",
                path=doc.path,
            )
        attempts = data.get("attempts")
        try:
            if isinstance(attempts, list) and attempts and all(_is_run(a) for a in attempts):
                # a retry run: one conversation per attempt (the top-level copy of the best
                # attempt is not loaded twice)
                best = as_dict(data.get("info")).get("best_attempt_idx")
                contexts = []
                for number, attempt in enumerate(attempts):
                    ctx = _context(doc, attempt, number)
                    if best == number:
                        ctx = ctx.replace(metadata={**ctx.metadata, "best_attempt": True})
                    contexts.append(ctx)
                return contexts
            return [_context(doc, data, None)]
        except BadInputError as exc:
            raise BadInputError(exc.what, path=doc.path, hint=exc.hint) from None


# --------------------------------------------------------------------------- records -> turns


class _SweAgentContextBuilder:
    """Turns the `history` of one run (or attempt) into turns."""

    def __init__(self, run: dict[str, Any]) -> None:
        self.run = run
        self.history: list[Any] = run.get("history") or []
        self.turns: list[Turn] = []
        self.calls = 0
        self.ids: dict[str, str] = {}  # recorded call id -> id used in the context
        self.used: set[str] = set()
        self.commands: set[str] = set()  # the interface's commands, from the system prompt
        self.system: str | None = None
        self.index = 0  # of the next history entry
        self.demonstrations = 0  # entries marked is_demo
        self.open_ids: list[str] = []  # calls of the latest assistant turn still waiting
        self.task_seen = False
        self.after_assistant = (
            False  # an assistant turn came since the task (a user turn is output)
        )
        self.agents: set[str] = {
            m["agent"]
            for m in self.history
            if isinstance(m, dict) and isinstance(m.get("agent"), str)
        }

    def call_id(self, recorded: Any) -> str:
        """A unique id for a call (the recorded one unless it was used already)."""
        if isinstance(recorded, str) and recorded:
            unique = recorded
            n = 1
            while unique in self.used:
                n += 1
                unique = f"{recorded}_{n}"
            self.ids[recorded] = unique
        else:
            self.calls += 1
            unique = f"call_{self.calls}"
            while unique in self.used:
                self.calls += 1
                unique = f"call_{self.calls}"
        self.used.add(unique)
        return unique

    def message_metadata(self, msg: dict[str, Any]) -> dict[str, JsonValue]:
        meta: dict[str, JsonValue] = {}
        kind = msg.get("message_type")
        if msg.get("is_demo"):
            meta["is_demo"] = True
            if msg.get("role") == "user":
                meta[ORIGIN_KEY] = "demonstration"
                if kind in (None, "demonstration", "user"):
                    kind = "demonstration"
        if isinstance(kind, str):
            meta["message_type"] = kind
        if len(self.agents) > 1 and isinstance(msg.get("agent"), str):
            meta["agent"] = msg["agent"]
        return meta

    def assistant(self, msg: dict[str, Any]) -> Turn:
        blocks: list[Block] = [*thinking_from(msg)]
        blocks.extend(parts_from_content(msg.get("content")))
        tool_calls = msg.get("tool_calls")
        if isinstance(tool_calls, list) and tool_calls:
            for call in tool_calls:
                if not isinstance(call, dict):
                    continue
                function = as_dict(call.get("function"))
                blocks.append(
                    ToolCallBlock(
                        id=self.call_id(call.get("id")),
                        name=as_text(function.get("name")) or "bash",
                        input=parse_arguments(function.get("arguments")),
                    )
                )
        else:
            action = msg.get("action")
            if isinstance(action, str) and action.strip():
                first = action.split(None, 1)[0]
                name = first if first in self.commands else "bash"
                blocks.append(
                    ToolCallBlock(id=self.call_id(None), name=name, input={"command": action})
                )
        return Turn(role="assistant", blocks=blocks, metadata=self.message_metadata(msg))

    def add(self, msg: Any) -> None:
        """The next `history` entry."""
        index = self.index
        self.index += 1
        if isinstance(msg, dict) and msg.get("is_demo"):
            self.demonstrations += 1
        if index == 0 and isinstance(msg, dict) and msg.get("role") == "system":
            self.system = content_text(msg.get("content"))
            self.commands = interface_commands(self.system)
            return
        if not isinstance(msg, dict):
            raise BadInputError(f"history entry {index} is not an object")
        role = msg.get("role")
        if role == "assistant":
            turn = self.assistant(msg)
            self.turns.append(turn)
            self.open_ids = [b.id for b in turn.blocks if isinstance(b, ToolCallBlock)]
            self.after_assistant = self.task_seen and not msg.get("is_demo")
        elif role == "tool" or (role == "user" and self.open_ids):
            recorded = msg.get("tool_call_ids")
            if isinstance(recorded, list) and recorded:
                targets = [self.ids.get(as_text(r), as_text(r)) for r in recorded]
            else:
                targets = self.open_ids[:1] or ["unknown"]
            parts = parts_from_content(msg.get("content"))
            results: list[Block] = [ToolResultBlock(tool_call_id=t, content=parts) for t in targets]
            self.open_ids = [i for i in self.open_ids if i not in targets]
            self.turns.append(
                Turn(role="tool", blocks=results, metadata=self.message_metadata(msg))
            )
        elif role in ("user", "system"):
            meta = self.message_metadata(msg)
            if role == "user" and ORIGIN_KEY not in meta:
                if self.task_seen:
                    meta[ORIGIN_KEY] = "tool-output" if self.after_assistant else "harness"
                self.task_seen = True  # the instance template: the task, in the human's name
            self.turns.append(
                Turn(role=role, blocks=list(parts_from_content(msg.get("content"))), metadata=meta)
            )
        else:
            raise BadInputError(f"history entry {index} has unknown role {role!r}")

    def context(self, conversation: int | None) -> AgentContext:
        """The run's context (`conversation`: the attempt's index, in a retry run)."""
        repaired = repair_pairing(  # as mini-swe-agent pairs
            freeze_all(self.turns),
            close="all",
            keep_pending="last_message",
            orphan_results="user_message_joined",
        )
        meta = self.metadata(conversation)
        note_repairs(meta, repaired)
        return AgentContext(
            system_instruction=self.system, messages=tuple(repaired.messages), metadata=meta
        )

    def metadata(self, conversation: int | None) -> dict[str, JsonValue]:
        run = self.run
        info = as_dict(run.get("info"))
        replay = run.get("replay_config")
        if isinstance(replay, str):
            try:
                replay = json.loads(replay)
            except json.JSONDecodeError:
                replay = None
        replay = as_dict(replay)
        steps = run.get("trajectory") or []
        state = as_dict(steps[0]).get("state") if steps else None
        if isinstance(state, str):
            try:
                state = json.loads(state)
            except json.JSONDecodeError:
                state = None
        stats = info.get("model_stats")
        submission = info.get("submission")
        return context_metadata(
            SweAgentFormat.name,
            instance_id=str_or_none(as_dict(replay.get("problem_statement")).get("id")),
            model=str_or_none(as_dict(as_dict(replay.get("agent")).get("model")).get("name")),
            cwd=nonempty_str(as_dict(state).get("working_dir")),
            environment=str_or_none(run.get("environment")),
            agent=next(iter(self.agents)) if len(self.agents) == 1 else None,
            exit_status=str_or_none(info.get("exit_status")),
            swe_agent_version=str_or_none(info.get("swe_agent_version")),
            model_stats=(
                {k: v for k, v in stats.items() if isinstance(v, (int, float, str, bool))}
                if isinstance(stats, dict)
                else None
            ),
            submission_chars=len(submission) if isinstance(submission, str) else None,
            trajectory_steps=len(steps),
            demonstration_messages=self.demonstrations,
            conversation=conversation,
        )


# --------------------------------------------------------------------------- helpers


def _context(doc: Document, run: dict[str, Any], conversation: int | None) -> AgentContext:
    builder = _SweAgentContextBuilder(run)
    for msg in doc.take(builder.history):
        builder.add(msg)
    return builder.context(conversation)


def _is_run(value: Any) -> bool:
    return (
        isinstance(value, dict)
        and isinstance(value.get("history"), list)
        and isinstance(value.get("trajectory"), list)
        and all(isinstance(m, dict) and "role" in m for m in value["history"][:3])
    )


def _is_swe_agent(data: Any) -> bool:
    if not isinstance(data, dict):
        return False
    if _is_run(data):
        return True
    attempts = data.get("attempts")
    return isinstance(attempts, list) and bool(attempts) and all(_is_run(a) for a in attempts)


def interface_commands(system_prompt: str) -> set[str]:
    """The special commands a SWE-agent system prompt documents (both doc styles)."""
    names = set(_DOCSTRING_COMMAND.findall(system_prompt))
    marker = system_prompt.find("COMMANDS:\n")
    if marker >= 0:
        section = system_prompt[marker + len("COMMANDS:\n") :].split("\n\n", 1)[0]
        names.update(_LISTED_COMMAND.findall(section))
    return names


__all__ = ["SweAgentFormat", "interface_commands"]
