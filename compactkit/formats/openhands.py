"""OpenHands event streams: V0 action/observation events and software-agent-sdk (V1) events.

Shapes that hold OpenHands events:
- an event list (`[event, ...]`, e.g. a saved trajectory), JSONL with one event per line, or
  `{"trajectory": [...]}` (the V0 trajectory export) / `{"events"|"items": [...]}` (the V1 agent
  server's event search page): one conversation;
- an eval/resolver `output.jsonl`: one run per line (`instruction`, `history[]` of events,
  `instance_id` or `issue`, `metadata`, ...): one conversation per line;
- a single run object (`{"history": [...], ...}`) as JSON.

Upstream sources read for the record types (All-Hands-AI/OpenHands, V0):
`openhands/events/serialization/event.py` (`event_to_dict`: `action` / `observation`, `args`,
`content`, `extras`, `source` user/agent/environment, `cause`, `tool_call_metadata`),
`openhands/core/schema/action.py` and `observation.py` (the type names),
`openhands/events/action/message.py` (`MessageAction`: `content`, `image_urls`, `file_urls`),
`openhands/events/action/agent.py` (`CondensationAction` with `summary`, `RecallAction`, ...),
`openhands/memory/conversation_memory.py` (what each event becomes in the model's messages) and
`evaluation/utils/shared.py` (`codeact_user_response`, the eval harness's fake user reply).
OpenHands/software-agent-sdk (V1): `openhands-sdk/openhands/sdk/event/` (`base.py`,
`llm_convertible/{message,action,observation,system}.py`, `condenser.py`, `user_action.py`,
`conversation_state.py`) and `openhands/sdk/llm/message.py` (`Message`, `TextContent`,
`ImageContent`, `MessageToolCall`).

Records that carry what the user typed or attached, each loaded as one user message:
- V0 `message` action with `source: "user"` (its `content`, its `image_urls` as images, its
  `file_urls` kept in message metadata `file_urls`); the eval row's `instruction` when the
  history holds no user message; a user-sourced `run` action (the command the user ran in the
  terminal: `"User executed the command:\n<command>"`, as the agent was shown it) and other
  user-sourced actions without tool metadata; a user-sourced `finish` (`/exit`) with text;
- V1 `MessageEvent` with `source: "user"` and `llm_message.role: "user"` (text and
  `ImageContent.image_urls`).
User-role messages that are not the human's words carry `metadata["origin"]`:
- `"harness"`: `recall` observations (workspace context / microagent knowledge), the eval
  harness's fake user reply ("Please continue working on the task ..."), a user-role message
  from another source (V0 `source: "environment"`, V1 `MessageEvent` not from the user), and a V1
  `MessageEvent`'s `extended_content` (skill knowledge added by the agent context; a user message
  of its own right after the human's, `metadata["activated_skills"]` naming the skills);
- `"tool-output"`: an observation that answers no recorded call (e.g. the error for a rejected
  malformed call, or the output of a command the user ran), with `metadata["observation"]`;
- `"summary"`: a condensation summary the agent made (V0 `condensation` action with a `summary`,
  V0 `condense` observation, V1 `Condensation` with a `summary`, V1
  `CondensationSummaryEvent`): the summary text as it was sent, at the position it was recorded,
  with `metadata["openhands_condensation"]` (what it replaced); the forgotten events stay loaded.

Mapping of the rest:
- V0 `system` action / V1 `SystemPromptEvent` -> `system_instruction` (V1: the static prompt,
  then its `dynamic_context`; the tool names in context metadata `tools`); agent message actions
  / V1 assistant `MessageEvent`s -> assistant text;
- V0 action with `tool_call_metadata` -> a tool call in the assistant message rebuilt from its
  model response (text, reasoning and the calls of that response, with its usage); several
  actions of one response share that message. V1 `ActionEvent`s of one `llm_response_id` -> one
  assistant message (reasoning / thinking blocks, `thought`, the calls);
- other V0 actions that execute something -> a tool call named after the action
  (`call_{event id}`, or `call_{n}` without ids), its `thought` as text before it;
  `think` without tool metadata -> a thinking block; `finish` without it -> assistant text;
- a V0 observation answering a call (by tool call id, by `cause`, or, without ids, in order) ->
  a tool result (`error` observations are errors); V1 `ObservationEvent` -> a tool result
  (`observation.content`, `is_error`), `UserRejectObservation` -> an error result
  `"Action rejected: <reason>"` (tool message metadata `rejected_by`; a reason the user typed is
  pinned, see `_users_words`), `AgentErrorEvent` -> an
  error result;
- a call no observation answers gets a synthesized error result (`"[no result recorded]"`),
  except the calls of a final assistant message.
Skipped, and counted by kind in `metadata["skipped_records"]`: V0 `recall`,
`change_agent_state`, `null`, `condensation_request`, `pause` / `resume` / `stop` actions, a
`condensation` action without a summary, `agent_state_changed` / `null` observations, a `recall`
observation with nothing in it (`"action/<type>"`, `"observation/<type>"`); V1
`ConversationStateUpdateEvent`, `PauseEvent`, `InterruptEvent`, `CondensationRequest`, a
`Condensation` without a summary, `TokenEvent`, `LLMCompletionLogEvent`, `HookExecutionEvent`,
`ConversationErrorEvent` and any other kind the model never sees (by its `kind`).

Rewound turns (software-agent-sdk event tree: each event's `parent_id`, the HEAD in
`base_state.json`'s `leaf_event_id`): only the active branch is loaded, as `ConversationState.view`
builds what the agent sends. A turn rolled back after a provider rejection
(`conversation/turn_rollback.py`) or left by `navigate_to` stays on disk off that branch; its
events are counted as `"off-branch/<kind>"` in `skipped_records` and their ids listed in
`metadata["openhands_off_branch"]` (recoverable from the events folder).
"""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path
from typing import Any

from pydantic import JsonValue

from ..context import (
    ORIGIN_KEY,
    AgentContext,
    Block,
    ContentPart,
    Role,
    TextBlock,
    ThinkingBlock,
    ToolCallBlock,
    ToolResultBlock,
)
from ..errors import BadInputError
from ._marks import Span, Where, find_after, mark_words
from ._pairing import Turn, repair_pairing
from ._util import (
    as_dict,
    as_list,
    as_text,
    context_metadata,
    image_from_url,
    nonempty_parts,
    note_repairs,
    note_skipped,
    parse_arguments,
    str_or_none,
)
from .base import Document, Format, read_document

_SKIP_ACTIONS = (
    "recall",
    "change_agent_state",
    "null",
    "condensation_request",
    "pause",
    "resume",
    "stop",
)
_SKIP_OBSERVATIONS = ("agent_state_changed", "null")
_FAKE_USER_REPLY = "Please continue working on the task on whatever approach you think is suitable"
"""How the eval harness's `codeact_user_response` (the fake user of benchmark runs) begins."""
_BOOKKEEPING = {
    "action",
    "action_risk",
    "args",
    "blocking",
    "cause",
    "confirmation_state",
    "hidden",
    "id",
    "file_urls",
    "images_urls",
    "image_urls",
    "impl_source",
    "is_confirmed",
    "keep_prompt",
    "kernel_init_code",
    "llm_metrics",
    "message",
    "security_risk",
    "source",
    "thought",
    "timeout",
    "timestamp",
    "tool_call_metadata",
    "translated_ipython_code",
    "wait_for_response",
}
BASE_STATE = "base_state.json"
EVENTS_DIR = "events"
_EVENT_FILE = re.compile(r"^event-(?P<idx>\d{5,})(?:-[0-9a-fA-F\-]{8,})?\.json$")
"""`persistence_const.py`: `event-{idx:05d}-{event_id}.json` (older SDKs: `event-{idx:05d}.json`)."""
_RUN_KEYS = ("instance_id", "instruction", "issue", "metadata", "test_result", "instance")


class OpenHandsEventsFormat(Format):
    name = "openhands-events"
    description = "OpenHands event stream JSON / eval output.jsonl"
    extension = ".json"
    priority = 10

    def sniff(self, doc: Document) -> bool:
        data = doc.data
        if _event_list(data) is not None:
            return True
        if doc.kind == "json":
            return _is_run(data)
        return isinstance(data, list) and bool(data) and _is_run(data[0])

    def read_layout(self, path: Path) -> Document | None:
        """A software-agent-sdk conversation directory (`ConversationState` persistence:
        `base_state.json` and `events/event-<index>-<id>.json`), given as the directory or as
        its `base_state.json`: one document `{"base_state": ..., "events": [...]}`."""
        directory = path.parent if path.name == BASE_STATE and path.is_file() else path
        events_dir = directory / EVENTS_DIR
        if not (directory.is_dir() and events_dir.is_dir()):
            return None
        state_file = directory / BASE_STATE
        state = read_document(state_file).data if state_file.is_file() else {}
        return Document(
            path=str(path),
            kind="json",
            data={"base_state": as_dict(state), "events": _event_files(events_dir)},
        )

    def load(self, doc: Document) -> list[AgentContext]:
        data = doc.data
        events = _event_list(data)
        if events is not None:
            state = as_dict(data.get("base_state")) if isinstance(data, dict) else {}
            return [_context(_events(events), {}, None, state)]
        if isinstance(data, dict) and isinstance(data.get("base_state"), dict):
            raise BadInputError("an OpenHands conversation directory with no events", path=doc.path)
        runs = [data] if doc.kind == "json" else data
        if not isinstance(runs, list) or not runs or not all(_is_run(r) for r in runs):
            raise BadInputError(
                "not an OpenHands event list or output.jsonl (no events with action/observation)",
                path=doc.path,
                hint="expected a list of events or rows with a history[] of events",
            )
        return [_context(_events(run["history"]), run, n) for n, run in enumerate(runs)]


# --------------------------------------------------------------------------- events -> turns


class _OpenHandsContextBuilder:
    """Turns the events of one conversation, in order, into turns: V0 action / observation
    events, or software-agent-sdk events (`kind` names each event's class)."""

    def __init__(self, events: list[dict[str, Any]]) -> None:
        self.sdk = any(_is_sdk_event(e) for e in events)
        self.legacy = not any("id" in e for e in events)  # V0 without ids: pair in order
        self.turns: list[Turn] = []
        self.skipped: Counter[str] = Counter()
        self.system: str | None = None
        self.model: str | None = None
        self.tools: list[str] = []
        self.summaries: set[str] = set()
        self.user_actions: set[int] = (
            set()
        )  # ids of actions the user ran (their output is no result)
        self.call_of_action: dict[int, str] = {}
        self.known: set[str] = set()
        self.answered: set[str] = set()
        self.open_in_order: list[str] = []  # legacy pairing: observations answer in order
        self.by_response: dict[str, Turn] = {}
        self.n_calls = 0
        self.rebuilt_calls = 0
        self.orphans = 0

    def add(self, event: dict[str, Any]) -> None:
        if not self.sdk:
            if "action" in event:
                self.action(event)
            else:
                self.observation(event)
        elif not _is_sdk_event(event):
            self.skipped["action" if "action" in event else "observation"] += 1
        else:
            handler = getattr(self, f"on_{event['kind']}", None)
            if handler is None:
                self.skipped[event["kind"]] += 1  # state updates, pauses, token logs, ...
            else:
                handler(event)

    def summary(self, event: dict[str, Any], text: str, info: dict[str, JsonValue]) -> None:
        """A condensation summary the agent sent its model (once, however many records hold it)."""
        if text in self.summaries:
            return
        self.summaries.add(text)
        meta = _sdk_stamp(event) if self.sdk else _stamp(event)
        meta[ORIGIN_KEY] = "summary"
        meta["openhands_condensation"] = info
        self.turns.append(Turn("user", [TextBlock(text=text)], meta))

    # ----------------------------------------------------------------- V0 actions

    def action(self, event: dict[str, Any]) -> None:
        kind = event["action"]
        args = _args(event)
        tcm = event.get("tool_call_metadata")
        if kind in _SKIP_ACTIONS:
            self.skipped[f"action/{kind}"] += 1
            return
        if kind == "condensation":
            summary = _text(args.get("summary"))
            if not summary:
                self.skipped["action/condensation"] += 1
                return
            info = {
                k: v
                for k, v in args.items()
                if k not in ("summary", "thought") and v is not None and k not in _BOOKKEEPING
            }
            self.summary(event, summary, {"action": "condensation", **info})
            return
        if kind == "system":
            text = _text(args.get("content")) or _text(event.get("message"))
            if self.system is None and not self.turns:
                self.system = text
            else:
                self.turns.append(Turn("system", [TextBlock(text=text)], _stamp(event)))
            return
        if event.get("source") == "user" and kind != "message" and not isinstance(tcm, dict):
            self.user_action(event, kind, args)
            return
        if isinstance(tcm, dict) and kind != "message":
            self.tool_call(event, tcm)
            return
        if kind == "message":
            self.message(event, args)
        elif kind == "think":
            thought = _text(args.get("thought")) or _text(event.get("message"))
            self.turns.append(Turn("assistant", [ThinkingBlock(thinking=thought)], _stamp(event)))
        elif kind in ("finish", "reject"):
            text = (
                _text(args.get("final_thought"))
                or _text(args.get("thought"))
                or _text(args.get("reason"))
                or _text(event.get("message"))
            )
            self.turns.append(Turn("assistant", [TextBlock(text=text)], _stamp(event)))
        else:
            self.plain_call(event, kind, args)

    def human_said(self) -> bool:
        return any(t.role == "user" and ORIGIN_KEY not in t.metadata for t in self.turns)

    def message(self, event: dict[str, Any], args: dict[str, Any]) -> None:
        source = event.get("source")
        if source is None:  # old flat events: the task first, the agent's replies after it
            source = "agent" if any(t.role == "user" for t in self.turns) else "user"
        role: Role = "assistant" if source == "agent" else "user"
        text = _text(args.get("content")) or _text(event.get("message"))
        blocks: list[Block] = [TextBlock(text=text)]
        urls = args.get("image_urls") or args.get("images_urls")
        if isinstance(urls, list):
            blocks.extend(image_from_url(u) for u in urls if isinstance(u, str) and u.strip())
        meta = _stamp(event)
        if role == "user":
            files = args.get("file_urls")
            if isinstance(files, list) and files:
                meta["file_urls"] = [f for f in files if isinstance(f, str)]
            if source != "user" or (text.startswith(_FAKE_USER_REPLY) and self.human_said()):
                meta[ORIGIN_KEY] = "harness"  # an environment message or the eval's fake user
        self.turns.append(Turn(role, blocks, meta))

    def user_action(self, event: dict[str, Any], kind: str, args: dict[str, Any]) -> None:
        """An action the user ran themselves, as the agent was told about it."""
        if kind == "run":
            text = f"User executed the command:\n{_text(args.get('command'))}"
        elif kind == "finish":
            text = _text(args.get("final_thought")) or _text(args.get("thought"))
            if not text:
                self.skipped["action/finish"] += 1  # the user's /exit: nothing was said
                return
        else:
            text = f"User requested {kind}: {as_text(_action_input(args))}"
        meta = _stamp(event)
        meta["action"] = kind
        self.turns.append(Turn("user", [TextBlock(text=text)], meta))
        if isinstance(event.get("id"), int):
            self.user_actions.add(event["id"])

    def new_call_id(self, event: dict[str, Any]) -> str:
        self.n_calls += 1
        if isinstance(event.get("id"), int):
            return f"call_{event['id']}"
        return f"call_{self.n_calls}"

    def register(self, event: dict[str, Any], call_id: str) -> None:
        self.known.add(call_id)
        if isinstance(event.get("id"), int):
            self.call_of_action[event["id"]] = call_id
        if self.legacy:
            self.open_in_order.append(call_id)

    def plain_call(self, event: dict[str, Any], kind: str, args: dict[str, Any]) -> None:
        call_id = self.new_call_id(event)
        blocks: list[Block] = []
        thought = _text(args.get("thought"))
        if thought:
            blocks.append(TextBlock(text=thought))
        blocks.append(ToolCallBlock(id=call_id, name=kind, input=_action_input(args)))
        self.turns.append(Turn("assistant", blocks, _stamp(event)))
        self.register(event, call_id)

    def tool_call(self, event: dict[str, Any], tcm: dict[str, Any]) -> str:
        """The call an event's tool_call_metadata records, added to its response's message."""
        call_id = tcm.get("tool_call_id")
        if not isinstance(call_id, str) or not call_id:
            call_id = self.new_call_id(event)
        else:
            self.n_calls += 1
        response = tcm.get("model_response")
        message = _model_message(response)
        response_id = response.get("id") if isinstance(response, dict) else None
        turn = self.by_response.get(response_id) if isinstance(response_id, str) else None
        if turn is None:
            meta = _stamp(event)
            blocks: list[Block]
            if message:
                blocks = _response_blocks(message)
                if isinstance(response, dict):
                    if isinstance(response.get("model"), str):
                        meta["model"] = response["model"]
                        self.model = self.model or response["model"]
                    if isinstance(response.get("usage"), dict):
                        meta["usage"] = response["usage"]
                if isinstance(response_id, str):
                    meta["response_id"] = response_id
            else:
                thought = _text(_args(event).get("thought"))
                blocks = [TextBlock(text=thought)] if thought else []
            turn = Turn("assistant", blocks, meta)
            self.turns.append(turn)
            if isinstance(response_id, str):
                self.by_response[response_id] = turn
        arguments = _call_arguments(message, call_id)
        if arguments is None:
            arguments = _action_input(_args(event)) if "action" in event else {}
        name = tcm.get("function_name")
        if not isinstance(name, str) or not name:
            name = _text(event.get("action")) or "tool"
        turn.blocks.append(ToolCallBlock(id=call_id, name=name, input=arguments))
        self.register(event, call_id)
        return call_id

    # ----------------------------------------------------------------- V0 observations

    def observation(self, event: dict[str, Any]) -> None:
        kind = event["observation"]
        if kind in _SKIP_OBSERVATIONS:
            self.skipped[f"observation/{kind}"] += 1
            return
        if kind == "recall":
            if _recall_text(event).strip():
                meta = _stamp(event)
                meta["observation"] = "recall"
                meta[ORIGIN_KEY] = "harness"
                self.turns.append(Turn("user", [TextBlock(text=_recall_text(event))], meta))
            else:
                self.skipped["observation/recall"] += 1
            return
        if kind == "condense":
            self.summary(event, as_text(event.get("content")), {"observation": "condense"})
            return
        cause = event.get("cause")
        if isinstance(cause, (dict, list)):  # not an event id
            cause = None
        call_id = None if cause in self.user_actions else self.find_call(event)
        if call_id is None:
            if cause not in self.user_actions:
                self.orphans += 1
            meta = _stamp(event)
            meta["observation"] = kind
            meta[ORIGIN_KEY] = "tool-output"
            self.turns.append(Turn("user", list(_observation_parts(event)), meta))
            return
        self.answered.add(call_id)
        if call_id in self.open_in_order:
            self.open_in_order.remove(call_id)
        result = ToolResultBlock(
            tool_call_id=call_id, content=_observation_parts(event), is_error=kind == "error"
        )
        last = self.turns[-1] if self.turns else None
        if last is not None and last.role == "tool":
            last.blocks.append(result)
        else:
            self.turns.append(Turn("tool", [result], _stamp(event)))

    def find_call(self, event: dict[str, Any]) -> str | None:
        tcm = event.get("tool_call_metadata")
        tcm_id = tcm.get("tool_call_id") if isinstance(tcm, dict) else None
        cause = event.get("cause")
        by_cause = self.call_of_action.get(cause) if isinstance(cause, int) else None
        candidates: list[Any] = [tcm_id, by_cause]
        for candidate in candidates:
            if isinstance(candidate, str) and candidate in self.known:
                return None if candidate in self.answered else candidate
        if (
            isinstance(tcm, dict)
            and isinstance(tcm_id, str)
            and _model_message(tcm.get("model_response"))
        ):
            # the action was not recorded, but its model response was: rebuild the call
            self.rebuilt_calls += 1
            return self.tool_call(event, tcm)
        if self.legacy and self.open_in_order and "cause" not in event:
            return self.open_in_order.pop(0)
        return None

    # ----------------------------------------------------------------- software-agent-sdk events

    def on_SystemPromptEvent(self, event: dict[str, Any]) -> None:
        parts = [
            _text(p.get("text")) if isinstance(p, dict) else _text(p)
            for p in (event.get("system_prompt"), event.get("dynamic_context"))
        ]
        text = "\n\n".join(p for p in parts if p)
        for tool in event.get("tools") or []:
            if isinstance(tool, dict):
                function = tool.get("function")
                name = tool.get("name") or (function or {}).get("name")
                if isinstance(name, str):
                    self.tools.append(name)
        if self.system is None and not self.turns:
            self.system = text
        else:
            self.turns.append(Turn("system", [TextBlock(text=text)], _sdk_stamp(event)))

    def on_MessageEvent(self, event: dict[str, Any]) -> None:
        message = event.get("llm_message")
        message = message if isinstance(message, dict) else {}
        meta = _sdk_stamp(event)
        blocks: list[Block] = list(_sdk_parts(message.get("content")))
        extended = _sdk_parts(event.get("extended_content"))
        if isinstance(event.get("sender"), str):
            meta["sender"] = event["sender"]
        role = message.get("role")
        if role == "assistant":
            blocks = [*_sdk_thinking(message), *blocks, *extended]
            self.turns.append(Turn("assistant", blocks, meta))
            return
        if role == "system":
            self.turns.append(Turn("system", [*blocks, *extended], meta))
            return
        if event.get("source") != "user":
            meta[ORIGIN_KEY] = "harness"  # a hook, another agent or the environment wrote it
        self.turns.append(Turn("user", blocks, meta))
        if extended:  # skill knowledge the agent context appended to the user's message
            info: dict[str, JsonValue] = {ORIGIN_KEY: "harness"}
            skills: list[JsonValue] = [
                s for s in event.get("activated_skills") or [] if isinstance(s, str)
            ]
            if skills:
                info["activated_skills"] = skills
            self.turns.append(Turn("user", list(extended), info))

    def on_ActionEvent(self, event: dict[str, Any]) -> None:
        response_id = event.get("llm_response_id")
        last = self.turns[-1] if self.turns else None
        if (
            last is None
            or last.role != "assistant"
            or not isinstance(response_id, str)
            or last.metadata.get("response_id") != response_id
        ):
            meta = _sdk_stamp(event)
            if isinstance(response_id, str):
                meta["response_id"] = response_id
            blocks = [*_sdk_thinking(event), *_sdk_parts(event.get("thought"))]
            last = Turn("assistant", blocks, meta)
            self.turns.append(last)
        call = event.get("tool_call")
        call = call if isinstance(call, dict) else {}
        function = call["function"] if isinstance(call.get("function"), dict) else {}
        call_id = _text(call.get("id")) or _text(event.get("tool_call_id"))
        name = _text(call.get("name")) or _text(function.get("name"))
        arguments = call.get("arguments", function.get("arguments"))
        last.blocks.append(
            ToolCallBlock(
                id=call_id,
                name=name or _text(event.get("tool_name")) or "tool",
                input=parse_arguments(arguments),
            )
        )

    def sdk_result(
        self, event: dict[str, Any], parts: list[ContentPart], error: bool, **info: JsonValue
    ) -> None:
        block = ToolResultBlock(
            tool_call_id=_text(event.get("tool_call_id")), content=tuple(parts), is_error=error
        )
        last = self.turns[-1] if self.turns else None
        if last is not None and last.role == "tool" and not info:
            last.blocks.append(block)
        else:
            self.turns.append(Turn("tool", [block], {**_sdk_stamp(event), **info}))

    def on_ObservationEvent(self, event: dict[str, Any]) -> None:
        observation = event.get("observation")
        observation = observation if isinstance(observation, dict) else {}
        parts = _sdk_parts(observation.get("content"))
        if not parts:  # older SDK observations held their text in `output` / `error`
            text = _text(observation.get("output")) or _text(observation.get("error"))
            parts = [TextBlock(text=text or as_text(observation))]
        parts.extend(_sdk_parts(event.get("extended_content")))
        error = observation.get("is_error") is True or bool(_text(observation.get("error")))
        self.sdk_result(event, parts, error)

    def on_UserRejectObservation(self, event: dict[str, Any]) -> None:
        reason = _text(event.get("rejection_reason")) or _DEFAULT_REJECTION
        source = _text(event.get("rejection_source")) or "user"
        self.sdk_result(
            event, [TextBlock(text=f"Action rejected: {reason}")], True, rejected_by=source
        )

    def on_AgentErrorEvent(self, event: dict[str, Any]) -> None:
        self.sdk_result(event, [TextBlock(text=_text(event.get("error")))], True)

    def on_Condensation(self, event: dict[str, Any]) -> None:
        text = _text(event.get("summary"))
        if not text:
            self.skipped["Condensation"] += 1  # forgetting without a summary adds nothing
            return
        forgotten = event.get("forgotten_event_ids")
        info: dict[str, JsonValue] = {
            "kind": "Condensation",
            "forgotten_events": len(forgotten) if isinstance(forgotten, list) else 0,
        }
        if isinstance(event.get("summary_offset"), int):
            info["summary_offset"] = event["summary_offset"]
        self.summary(event, text, info)

    def on_CondensationSummaryEvent(self, event: dict[str, Any]) -> None:
        self.summary(event, _text(event.get("summary")), {"kind": "CondensationSummaryEvent"})

    # ----------------------------------------------------------------- the context

    def context(
        self, run: dict[str, Any], number: int | None, state: dict[str, Any]
    ) -> AgentContext:
        """The context, with the metadata of the eval / resolver `run` holding it (`{}` for a
        bare event list), its index `number` in a file of runs, and what the `base_state.json`
        of a conversation directory says (`state`, else `{}`)."""
        turns = self.turns
        instruction = run.get("instruction")
        if (
            isinstance(instruction, str)
            and instruction
            and not any(t.role == "user" and ORIGIN_KEY not in t.metadata for t in turns)
        ):
            turns.insert(0, Turn("user", [TextBlock(text=instruction)]))
        repaired = repair_pairing(
            [t.freeze() for t in turns],
            close="unless_answered",
            keep_pending="last_assistant",
            # V0 observations answering no call are user text already; V1 results name their call
            orphan_results="user_message_each",
        )
        issue = as_dict(run.get("issue"))
        run_meta = as_dict(run.get("metadata"))
        llm_model = as_dict(run_meta.get("llm_config")).get("model")
        state_llm = as_dict(as_dict(state.get("agent")).get("llm")).get("model")
        if not isinstance(llm_model, str) and isinstance(state_llm, str):
            llm_model = state_llm
        meta = context_metadata(
            OpenHandsEventsFormat.name,
            session_id=str_or_none(state.get("id")),
            cwd=str_or_none(as_dict(state.get("workspace")).get("working_dir")),
            conversation=number,
            instance_id=str_or_none(run.get("instance_id")),
            title=str_or_none(issue.get("title")),
            issue=(
                f"{issue['owner']}/{issue['repo']}#{issue['number']}"
                if issue.get("owner") and issue.get("repo") and issue.get("number") is not None
                else None
            ),
            model=llm_model if isinstance(llm_model, str) else self.model or None,
            agent_class=str_or_none(run_meta.get("agent_class")),
            error=str_or_none(run.get("error")),
        )
        note_repairs(meta, repaired)
        if self.rebuilt_calls:
            meta["rebuilt_calls"] = self.rebuilt_calls
        if self.orphans:
            meta["unpaired_observations"] = self.orphans
        if self.tools:
            meta["tools"] = list(self.tools)
        note_skipped(meta, self.skipped)
        ctx = AgentContext(
            system_instruction=self.system, messages=tuple(repaired.messages), metadata=meta
        )
        return mark_words(ctx, _users_words)


# --------------------------------------------------------------------------- helpers


def _context(
    events: list[dict[str, Any]],
    run: dict[str, Any],
    number: int | None,
    state: dict[str, Any] | None = None,
) -> AgentContext:
    builder = _OpenHandsContextBuilder(events)
    live = _active_branch(events, state or {}) if builder.sdk else None
    off_branch: list[JsonValue] = []
    for event in events:
        kind = str(event.get("kind"))
        if live is None or id(event) in live or not hasattr(builder, f"on_{kind}"):
            builder.add(event)  # kinds the model never sees are skipped by kind, on or off branch
        else:
            builder.skipped[f"off-branch/{kind}"] += 1
            off_branch.append(str(event["id"]))
    ctx = builder.context(run, number, state or {})
    if off_branch:
        ctx = ctx.replace(metadata={**ctx.metadata, "openhands_off_branch": off_branch})
    return ctx


_ROOT_PARENT_ID = "__root__"
"""`event/types.py`: the `parent_id` of a tree root made after `navigate_to(None)`."""
_NOT_TREE_NODES = ("ConversationStateUpdateEvent", "ConversationErrorEvent")
"""`ConversationState._resolve_active_leaf`: artifacts that never become the HEAD."""


def _active_branch(events: list[dict[str, Any]], state: dict[str, Any]) -> set[int] | None:
    """The events on the active branch of a software-agent-sdk event tree, as `ConversationState`
    resolves it (`_resolve_active_leaf` and `EventLog.path_to_root`): from `leaf_event_id` of the
    base state (else the last event that is no state/error artifact; none when `head_is_empty`)
    up through each event's `parent_id` (`"__root__"` ends it; an event without one hangs on the
    event before it, as legacy logs do). A rollback or navigation leaves the abandoned turns in
    the log off this branch, and the agent never sends them again. None (load every event) when
    no event names a parent, or the tree is broken (a missing parent or a cycle, which the SDK
    would refuse to open) -- then nothing is dropped."""
    if not any(isinstance(e.get("parent_id"), str) for e in events):
        return None
    index = {str(e.get("id")): n for n, e in enumerate(events)}
    leaf = state.get("leaf_event_id")
    if not isinstance(leaf, str):
        if state.get("head_is_empty") is True:
            return set()
        real = [e for e in events if e.get("kind") not in _NOT_TREE_NODES]
        leaf = str(real[-1].get("id")) if real else None
    live: set[int] = set()
    cursor: str | None = leaf
    while cursor is not None:
        n = index.get(cursor)
        if n is None or id(events[n]) in live:
            return None
        event = events[n]
        live.add(id(event))
        parent = event.get("parent_id")
        if parent == _ROOT_PARENT_ID or (parent is None and n == 0):
            cursor = None
        else:
            cursor = parent if isinstance(parent, str) else str(events[n - 1].get("id"))
    return live


def _event_files(events_dir: Path) -> list[Any]:
    """The events of a conversation directory in index order, read as `EventLog` reads them:
    files named `event-<index>[-<id>].json`, up to the first missing index (the SDK logs the gap
    and stops there too); an empty file is skipped, as `EventLog.__iter__` skips it."""
    by_index: dict[int, Path] = {}
    for file in events_dir.iterdir():
        match = _EVENT_FILE.match(file.name)
        if match is not None:
            by_index.setdefault(int(match.group("idx")), file)
    events: list[Any] = []
    for index in range(len(by_index)):
        if index not in by_index:
            break
        if by_index[index].stat().st_size:
            events.append(read_document(by_index[index]).data)
    return events


def _is_event(value: Any) -> bool:
    if not isinstance(value, dict) or "role" in value or "payload" in value:
        return False
    return isinstance(value.get("action"), str) or isinstance(value.get("observation"), str)


def _is_sdk_event(value: Any) -> bool:
    """A software-agent-sdk event: `kind` names its class, plus `id` and `source`."""
    return (
        isinstance(value, dict)
        and isinstance(value.get("kind"), str)
        and "id" in value
        and isinstance(value.get("source"), str)
        and "role" not in value
    )


def _is_any_event(value: Any) -> bool:
    return _is_event(value) or _is_sdk_event(value)


def _events(history: Any) -> list[dict[str, Any]]:
    """The events of a history, flattening the old `[[action, observation], ...]` pairs."""
    out: list[dict[str, Any]] = []
    for item in history if isinstance(history, list) else []:
        if isinstance(item, list):
            out.extend(e for e in item if _is_any_event(e))
        elif _is_any_event(item):
            out.append(item)
    return out


def _event_list(data: Any) -> list[Any] | None:
    """The events of a bare event list or of an export wrapping one (`trajectory`, `events`,
    `items`), when its first items are events; else None."""
    if isinstance(data, dict):
        for key in ("trajectory", "events", "items"):
            if isinstance(data.get(key), list) and "history" not in data:
                data = data[key]
                break
    if not isinstance(data, list) or not data:
        return None
    head = data[:10]
    return data if all(_is_any_event(e) for e in head) else None


def _is_run(value: Any) -> bool:
    if not isinstance(value, dict) or not isinstance(value.get("history"), list):
        return False
    if not any(k in value for k in _RUN_KEYS):
        return False
    history = value["history"]
    head = [e for item in history[:5] for e in (item if isinstance(item, list) else [item])]
    return all(_is_any_event(e) for e in head)


def _args(event: dict[str, Any]) -> dict[str, Any]:
    """An action's arguments (`args`, or the event itself in the flat old layout)."""
    args = event.get("args")
    return args if isinstance(args, dict) else event


def _action_input(args: dict[str, Any]) -> dict[str, JsonValue]:
    return {k: v for k, v in args.items() if k not in _BOOKKEEPING and v is not None}


def _text(value: Any) -> str:
    return value if isinstance(value, str) else ""


def _model_message(response: Any) -> dict[str, Any]:
    if not isinstance(response, dict):
        return {}
    choices = response.get("choices")
    if isinstance(choices, list) and choices and isinstance(choices[0], dict):
        message = choices[0].get("message")
        if isinstance(message, dict):
            return message
    return {}


def _response_blocks(message: dict[str, Any]) -> list[Block]:
    """Reasoning and text of a model response message (its calls are added per action)."""
    blocks: list[Block] = []
    thinking = message.get("thinking_blocks")
    if isinstance(thinking, list) and thinking:
        for item in thinking:
            if not isinstance(item, dict):
                continue
            if item.get("type") == "redacted_thinking":
                blocks.append(
                    ThinkingBlock(
                        thinking="", signature=_text(item.get("data")) or None, redacted=True
                    )
                )
            else:
                blocks.append(
                    ThinkingBlock(
                        thinking=_text(item.get("thinking")),
                        signature=_text(item.get("signature")) or None,
                    )
                )
    elif isinstance(message.get("reasoning_content"), str) and message["reasoning_content"]:
        blocks.append(ThinkingBlock(thinking=message["reasoning_content"]))
    blocks.extend(nonempty_parts(message.get("content")))
    return blocks


def _call_arguments(message: dict[str, Any], call_id: str) -> Any:
    for call in as_list(message.get("tool_calls")):
        if isinstance(call, dict) and call.get("id") == call_id:
            function = call.get("function")
            if isinstance(function, dict):
                return parse_arguments(function.get("arguments"))
    return None


def _observation_parts(event: dict[str, Any]) -> tuple[ContentPart, ...]:
    text = as_text(event.get("content"))
    extras = event.get("extras")
    meta = extras.get("metadata") if isinstance(extras, dict) else None
    if isinstance(meta, dict):  # command output: the agent was shown prefix + output + suffix
        text = _text(meta.get("prefix")) + text + _text(meta.get("suffix"))
    return (TextBlock(text=text),)


def _recall_text(event: dict[str, Any]) -> str:
    """A recall observation: its content and the non-empty context it added."""
    lines = [as_text(event.get("content"))]
    extras = event.get("extras")
    if isinstance(extras, dict):
        for key, value in extras.items():
            if key != "recall_type" and value not in (None, "", [], {}):
                lines.append(f"{key}: {as_text(value)}")
    return "\n".join(lines)


def _stamp(event: dict[str, Any]) -> dict[str, JsonValue]:
    meta: dict[str, JsonValue] = {}
    if isinstance(event.get("id"), int):
        meta["id"] = event["id"]
    if isinstance(event.get("timestamp"), str):
        meta["timestamp"] = event["timestamp"]
    return meta


def _sdk_parts(content: Any) -> list[ContentPart]:
    """SDK message content (`TextContent` / `ImageContent` dicts, or a string) as parts."""
    if isinstance(content, str):
        return [TextBlock(text=content)] if content else []
    parts: list[ContentPart] = []
    for item in content if isinstance(content, list) else []:
        if not isinstance(item, dict):
            parts.append(TextBlock(text=as_text(item)))
        elif item.get("type") == "image" or isinstance(item.get("image_urls"), list):
            urls = item.get("image_urls") or []
            parts.extend(image_from_url(u) for u in urls if isinstance(u, str) and u.strip())
        elif "text" in item:
            parts.append(TextBlock(text=as_text(item.get("text"))))
        else:
            parts.append(TextBlock(text=as_text(item)))
    return parts


def _sdk_thinking(event: dict[str, Any]) -> list[Block]:
    blocks: list[Block] = []
    for item in event.get("thinking_blocks") or []:
        if not isinstance(item, dict):
            continue
        if item.get("type") == "redacted_thinking":
            blocks.append(
                ThinkingBlock(thinking="", signature=_text(item.get("data")) or None, redacted=True)
            )
        else:
            blocks.append(
                ThinkingBlock(
                    thinking=_text(item.get("thinking")),
                    signature=_text(item.get("signature")) or None,
                )
            )
    if not blocks and _text(event.get("reasoning_content")):
        blocks.append(ThinkingBlock(thinking=event["reasoning_content"]))
    return blocks


def _sdk_stamp(event: dict[str, Any]) -> dict[str, JsonValue]:
    meta: dict[str, JsonValue] = {}
    for key in ("id", "timestamp"):
        if isinstance(event.get(key), str):
            meta[key] = event[key]
    return meta


# --------------------------------------------------------------------------- the user's words

_DEFAULT_REJECTION = "User rejected the action"
"""openhands-sdk `UserRejectObservation.rejection_reason`'s default: no words of the user."""


def _users_words(where: Where, text: str) -> list[Span]:
    """The reason the user typed when rejecting an action in confirmation mode (V1
    `UserRejectObservation` with `rejection_source` "user", read as "Action rejected: <reason>")."""
    if where.result is None or where.message.metadata.get("rejected_by") != "user":
        return []
    span = find_after(text, "Action rejected: ")
    if span is None or text[span[0] : span[1]].strip() == _DEFAULT_REJECTION:
        return []
    return [Span(*span, "user-feedback")]


__all__ = ["OpenHandsEventsFormat"]
