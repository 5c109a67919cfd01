"""`--recall`: a `compactkit_recall` tool the gateway offers in compacted requests and answers
itself from the store of what compactions removed, continuing the upstream call so that the
client never sees the tool.

The tool's description lists the etags the compacted prefix refers to (it changes only at a
compaction, so the prefix stays byte-stable in between). A response that calls the tool is not
passed on: the gateway appends the model's turn and the tool's results to the request and calls
the upstream again (at most `MAX_ROUNDS` times); the client gets the response that follows. A
streamed response is read to its end first when the tool is offered, so that a call can be
caught; what the client then receives is that response's own bytes.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from pydantic import TypeAdapter, ValidationError

from ..context import AgentContext, Block, ContentPart, Message, marker_text
from ..formats._chat import block_as_text
from ..recovery import markers, unparted
from .sse import events
from .wire import Api

TOOL = "compactkit_recall"
MAX_ROUNDS = 4
NOT_RUN = "[not run: the conversation's context was being recalled; call it again]"
_messages = TypeAdapter(list[Message])
_blocks = TypeAdapter(list[Block])
_parts = TypeAdapter(list[ContentPart])


def offered_etags(ctx: AgentContext) -> list[tuple[str, str]]:
    """(etag, what it stands for) of every marker in `ctx` whose content is stored."""
    out: dict[str, str] = {}
    for _, marker in markers(ctx):
        text = marker_text(marker).splitlines()[0][:80]
        out.setdefault(marker.etag, text)
    return list(out.items())


def tool_definition(api: Api, etags: list[tuple[str, str]]) -> dict[str, Any]:
    listed = "; ".join(f"{etag}: {label}" for etag, label in etags)
    description = (
        "Recall content that was removed from this conversation to save space, by its etag. "
        f"Recallable: {listed}"
    )
    schema = {
        "type": "object",
        "properties": {"etag": {"type": "string", "description": "The etag to recall."}},
        "required": ["etag"],
    }
    if api == "anthropic":
        return {"name": TOOL, "description": description, "input_schema": schema}
    if api == "openai-chat":
        return {
            "type": "function",
            "function": {"name": TOOL, "description": description, "parameters": schema},
        }
    return {"type": "function", "name": TOOL, "description": description, "parameters": schema}


def answer(store: Mapping[str, str], etag: Any) -> str:
    """What the store holds under `etag`, as text (markers inside it show their own etags)."""
    raw = store.get(etag) if isinstance(etag, str) else None
    if raw is None:
        return f"[nothing stored under etag {etag!r}]"
    data = json.loads(raw)
    try:
        messages = list(unparted(_messages.validate_python(data), store))
        return "\n\n".join(
            f"{m.role}: " + "\n".join(block_as_text(b) for b in m.content) for m in messages
        )
    except ValidationError:
        pass
    for adapter in (_blocks, _parts):
        try:
            return "\n".join(block_as_text(b) for b in adapter.validate_python(data))
        except ValidationError:
            continue
    return raw


# --------------------------------------------------------------------------- reading responses


@dataclass
class Turn:
    """A model response as the next request needs it: the items to append, and its calls."""

    items: list[dict[str, Any]] = field(default_factory=list)
    calls: list[tuple[str, str, Any]] = field(default_factory=list)
    """(call id, tool name, arguments) of every tool call."""

    def recalls(self) -> bool:
        return any(name == TOOL for _, name, _ in self.calls)


def _arguments(text: Any) -> Any:
    try:
        return json.loads(text) if isinstance(text, str) else text
    except ValueError:
        return {}


def read_response(api: Api, body: bytes, streamed: bool) -> Turn | None:
    """The model's turn in a response (streamed or not); None when it cannot be read."""
    try:
        if api == "anthropic":
            message = _anthropic_stream(body) if streamed else json.loads(body)
            content = [b for b in message.get("content", []) if isinstance(b, dict)]
            calls = [
                (b["id"], b["name"], b.get("input", {}))
                for b in content
                if b.get("type") == "tool_use"
            ]
            return Turn([{"role": "assistant", "content": content}], calls)
        if api == "openai-chat":
            msg = _chat_stream(body) if streamed else json.loads(body)["choices"][0]["message"]
            tool_calls = msg.get("tool_calls") or []
            calls = [
                (c["id"], c["function"]["name"], _arguments(c["function"].get("arguments")))
                for c in tool_calls
            ]
            item = {"role": "assistant", "content": msg.get("content")}
            if tool_calls:
                item["tool_calls"] = tool_calls
            return Turn([item], calls)
        response = _responses_stream(body) if streamed else json.loads(body)
        output = [o for o in response.get("output", []) if isinstance(o, dict)]
        calls = [
            (o["call_id"], o["name"], _arguments(o.get("arguments")))
            for o in output
            if o.get("type") == "function_call"
        ]
        return Turn(output, calls)
    except (ValueError, KeyError, TypeError, IndexError, AttributeError):
        return None


def _anthropic_stream(body: bytes) -> dict[str, Any]:
    message: dict[str, Any] = {}
    blocks: dict[int, dict[str, Any]] = {}
    partial: dict[int, str] = {}
    for event in events(body):
        kind = event.get("type")
        if kind == "message_start":
            message = dict(event["message"])
        elif kind == "content_block_start":
            blocks[event["index"]] = dict(event["content_block"])
        elif kind == "content_block_delta":
            block, delta = blocks[event["index"]], event["delta"]
            dtype = delta.get("type")
            if dtype == "text_delta":
                block["text"] = block.get("text", "") + delta["text"]
            elif dtype == "input_json_delta":
                partial[event["index"]] = partial.get(event["index"], "") + delta["partial_json"]
            elif dtype == "thinking_delta":
                block["thinking"] = block.get("thinking", "") + delta["thinking"]
            elif dtype == "signature_delta":
                block["signature"] = delta["signature"]
    for index, text in partial.items():
        blocks[index]["input"] = json.loads(text) if text else {}
    message["content"] = [blocks[i] for i in sorted(blocks)]
    return message


def _chat_stream(body: bytes) -> dict[str, Any]:
    content = ""
    calls: dict[int, dict[str, Any]] = {}
    for event in events(body):
        for choice in event.get("choices") or []:
            delta = choice.get("delta") or {}
            content += delta.get("content") or ""
            for tc in delta.get("tool_calls") or []:
                call = calls.setdefault(
                    tc["index"],
                    {"id": "", "type": "function", "function": {"name": "", "arguments": ""}},
                )
                call["id"] = tc.get("id") or call["id"]
                fn = tc.get("function") or {}
                call["function"]["name"] += fn.get("name") or ""
                call["function"]["arguments"] += fn.get("arguments") or ""
    return {"content": content or None, "tool_calls": [calls[i] for i in sorted(calls)]}


def _responses_stream(body: bytes) -> dict[str, Any]:
    for event in events(body):
        if event.get("type") == "response.completed":
            response: dict[str, Any] = event["response"]
            return response
    raise ValueError("no response.completed event")


# --------------------------------------------------------------------------- continuing


def continued(
    api: Api, body: dict[str, Any], turn: Turn, store: Mapping[str, str]
) -> dict[str, Any]:
    """`body` with the model's turn and an answer to each of its calls: the store's content for
    a recall, a 'not run' note for a client tool (the model calls it again)."""
    answers: list[dict[str, Any]] = []
    for call_id, name, arguments in turn.calls:
        etag = arguments.get("etag") if isinstance(arguments, dict) else None
        text = answer(store, etag) if name == TOOL else NOT_RUN
        if api == "anthropic":
            answers.append({"type": "tool_result", "tool_use_id": call_id, "content": text})
        elif api == "openai-chat":
            answers.append({"role": "tool", "tool_call_id": call_id, "content": text})
        else:
            answers.append({"type": "function_call_output", "call_id": call_id, "output": text})
    key = "input" if api == "openai-responses" else "messages"
    appended = [*body[key], *turn.items]
    if api == "anthropic":
        appended.append({"role": "user", "content": answers})
    else:
        appended.extend(answers)
    return {**body, key: appended}


__all__ = ["TOOL", "answer", "continued", "offered_etags", "read_response", "tool_definition"]
