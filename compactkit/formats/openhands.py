"""OpenHands event stream JSON / eval output.jsonl.

Three shapes hold OpenHands events:
- an event list (`[event, ...]`, e.g. a saved trajectory): one conversation;
- an eval/resolver `output.jsonl`: one run per line (`instruction`, `history[]` of events,
  `instance_id` or `issue`, `metadata`, ...): one conversation per line;
- a single run object (`{"history": [...], ...}`) as JSON.

An event is an action (`action`: message / system / run / read / edit / think / finish / ...,
`args`, `source`, `id`) or an observation (`observation`: run / read / edit / error / recall / ...,
`content`, `extras`, `cause` = the id of the action it answers). Function-calling agents record
`tool_call_metadata` on both: the tool call id, the function name and the raw model response.
Older runs (CodeAct 1.x) store flat events with no ids: each observation answers the action
before it.

Mapping:
- the `system` action -> `system_instruction`; user message actions -> user messages, agent
  message actions -> assistant text;
- an action with `tool_call_metadata` -> a tool call in the assistant message rebuilt from its
  model response (text, reasoning and the calls of that response, with its usage); several
  actions of one response share that message;
- other actions that execute something -> a tool call named after the action
  (`call_{event id}`, or `call_{n}` without ids), its `thought` as text before it;
  `think` without tool metadata -> a thinking block; `finish` without it -> assistant text;
- an observation answering a call (by tool call id, by `cause`, or, without ids, in order)
  -> a tool result (`error` observations are errors); an error observation that answers no call
  (e.g. a rejected malformed call) -> user text, which is what the agent was shown;
- `recall` observations (workspace context / microagent knowledge) -> user text;
- bookkeeping (recall actions, agent state changes, null events) is skipped;
- a call no observation answers gets a synthesized error result (`"[no result recorded]"`),
  except the calls of a final assistant message.
"""

from __future__ import annotations

from typing import Any

from pydantic import JsonValue

from ..context import (
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
from ._pairing import Turn, repair_pairing
from ._util import as_text, nonempty_parts, parse_arguments
from .base import Document, Format

_SKIP_ACTIONS = {"recall", "change_agent_state", "null", "condensation_request"}
_SKIP_OBSERVATIONS = {"agent_state_changed", "null", "condensation"}
_BOOKKEEPING = {
    "action",
    "action_risk",
    "args",
    "blocking",
    "cause",
    "confirmation_state",
    "hidden",
    "id",
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
_RUN_KEYS = ("instance_id", "instruction", "issue", "metadata", "test_result", "instance")


def _is_event(value: Any) -> bool:
    if not isinstance(value, dict) or "role" in value or "payload" in value:
        return False
    return isinstance(value.get("action"), str) or isinstance(value.get("observation"), str)


def _events(history: Any) -> list[dict[str, Any]]:
    """The events of a history, flattening the old `[[action, observation], ...]` pairs."""
    out: list[dict[str, Any]] = []
    for item in history if isinstance(history, list) else []:
        if isinstance(item, list):
            out.extend(e for e in item if _is_event(e))
        elif _is_event(item):
            out.append(item)
    return out


def _is_run(value: Any) -> bool:
    if not isinstance(value, dict) or not isinstance(value.get("history"), list):
        return False
    if not any(k in value for k in _RUN_KEYS):
        return False
    history = value["history"]
    head = [e for item in history[:5] for e in (item if isinstance(item, list) else [item])]
    return all(_is_event(e) for e in head)


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
    for call in message.get("tool_calls") or []:
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


class _Conversation:
    """Builds one conversation from a list of events."""

    def __init__(self, events: list[dict[str, Any]]) -> None:
        self.legacy = not any("id" in e for e in events)
        self.turns: list[Turn] = []
        self.system: str | None = None
        self.model: str | None = None
        self.call_of_action: dict[int, str] = {}
        self.known: set[str] = set()
        self.answered: set[str] = set()
        self.open_in_order: list[str] = []  # legacy pairing: observations answer in order
        self.by_response: dict[str, Turn] = {}
        self.n_calls = 0
        self.rebuilt_calls = 0
        self.orphans = 0
        for event in events:
            if "action" in event:
                self.action(event)
            else:
                self.observation(event)

    # ----------------------------------------------------------------- actions

    def action(self, event: dict[str, Any]) -> None:
        kind = event["action"]
        args = _args(event)
        tcm = event.get("tool_call_metadata")
        if kind in _SKIP_ACTIONS:
            return
        if kind == "system":
            text = _text(args.get("content")) or _text(event.get("message"))
            if self.system is None and not self.turns:
                self.system = text
            else:
                self.turns.append(Turn("system", [TextBlock(text=text)], _stamp(event)))
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

    def message(self, event: dict[str, Any], args: dict[str, Any]) -> None:
        source = event.get("source")
        if source is None:  # old flat events: the task first, the agent's replies after it
            source = "agent" if any(t.role == "user" for t in self.turns) else "user"
        role: Role = "assistant" if source == "agent" else "user"
        text = _text(args.get("content")) or _text(event.get("message"))
        blocks: list[Block] = [TextBlock(text=text)]
        urls = args.get("image_urls") or args.get("images_urls")
        if isinstance(urls, list):
            blocks.extend(ImageBlock(url=u) for u in urls if isinstance(u, str))
        self.turns.append(Turn(role, blocks, _stamp(event)))

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

    # ----------------------------------------------------------------- observations

    def observation(self, event: dict[str, Any]) -> None:
        kind = event["observation"]
        if kind in _SKIP_OBSERVATIONS:
            return
        if kind == "recall":
            if _recall_text(event).strip():
                meta = _stamp(event)
                meta["observation"] = "recall"
                self.turns.append(Turn("user", [TextBlock(text=_recall_text(event))], meta))
            return
        call_id = self.find_call(event)
        if call_id is None:
            self.orphans += 1
            meta = _stamp(event)
            meta["observation"] = kind
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


class OpenHandsEventsFormat(Format):
    name = "openhands-events"
    description = "OpenHands event stream JSON / eval output.jsonl"
    priority = 10

    def sniff(self, doc: Document) -> bool:
        data = doc.data
        if doc.kind == "json":
            if isinstance(data, list):
                head = data[:10]
                return bool(head) and all(_is_event(e) for e in head)
            return _is_run(data)
        return isinstance(data, list) and bool(data) and _is_run(data[0])

    def load(self, doc: Document) -> list[AgentContext]:
        data = doc.data
        if (
            doc.kind == "json"
            and isinstance(data, list)
            and data
            and all(_is_event(e) for e in data[:10])
        ):
            return [self._context(_events(data), {})]
        runs = [data] if doc.kind == "json" else data
        if not isinstance(runs, list) or not runs or not all(_is_run(r) for r in runs):
            raise BadInputError(
                "not an OpenHands event list or output.jsonl (no events with action/observation)",
                path=doc.path,
                hint="expected a list of events or rows with a history[] of events",
            )
        contexts = []
        for number, run in enumerate(runs):
            contexts.append(self._context(_events(run["history"]), run, number))
        return contexts

    def _context(
        self, events: list[dict[str, Any]], run: dict[str, Any], number: int | None = None
    ) -> AgentContext:
        conv = _Conversation(events)
        turns = conv.turns
        instruction = run.get("instruction")
        if (
            isinstance(instruction, str)
            and instruction
            and not any(t.role == "user" for t in turns)
        ):
            turns.insert(0, Turn("user", [TextBlock(text=instruction)]))
        repaired = repair_pairing(
            [t.freeze() for t in turns],
            close="unless_answered",
            keep_pending="last_assistant",
            orphan_results="keep",  # observations answering no call are user text already
        )
        meta: dict[str, JsonValue] = {"source_format": self.name}
        if number is not None:
            meta["conversation"] = number
        if isinstance(run.get("instance_id"), str):
            meta["instance_id"] = run["instance_id"]
        issue = run.get("issue")
        if isinstance(issue, dict):
            if isinstance(issue.get("title"), str):
                meta["title"] = issue["title"]
            if issue.get("owner") and issue.get("repo") and issue.get("number") is not None:
                meta["issue"] = f"{issue['owner']}/{issue['repo']}#{issue['number']}"
        run_meta = run.get("metadata")
        llm = run_meta.get("llm_config") if isinstance(run_meta, dict) else None
        if isinstance(llm, dict) and isinstance(llm.get("model"), str):
            meta["model"] = llm["model"]
        elif conv.model:
            meta["model"] = conv.model
        if isinstance(run_meta, dict) and isinstance(run_meta.get("agent_class"), str):
            meta["agent_class"] = run_meta["agent_class"]
        if isinstance(run.get("error"), str):
            meta["error"] = run["error"]
        if repaired.synthesized_results:
            meta["synthesized_results"] = repaired.synthesized_results
        if conv.rebuilt_calls:
            meta["rebuilt_calls"] = conv.rebuilt_calls
        if conv.orphans:
            meta["unpaired_observations"] = conv.orphans
        return AgentContext(
            system_instruction=conv.system, messages=tuple(repaired.messages), metadata=meta
        )
