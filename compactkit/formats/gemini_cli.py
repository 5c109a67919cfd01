"""Gemini CLI chat session JSON (`~/.gemini/tmp/<project>/chats/session-*.json`).

`{"sessionId", "projectHash", "startTime", "lastUpdated", "messages": [...]}`; each message has
`type` user / gemini / info / error / warning. A gemini message holds the model's text
(`content`), its thoughts (`thoughts[]` of `{subject, description}`), its token counts (`tokens`)
and the tool calls it made (`toolCalls[]` of `{id, name, args, result, status}`), each call's
`result` being the Gemini API parts sent back (`functionResponse.response.output` / `.error`).

Mapping: user -> user; gemini -> assistant (thoughts as thinking blocks, then text, then calls),
followed by one tool message with the results of its calls; info / error / warning messages are
shown in the terminal only (never sent to the model) and are skipped. A call with no result gets
a synthesized error result (`"[no result recorded]"`), except the calls of a final gemini message.
"""

from __future__ import annotations

from typing import Any

from pydantic import JsonValue

from ..context import (
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
from ._pairing import repair_pairing
from ._util import as_text
from .base import Document, Format

_UI_TYPES = {"info", "error", "warning"}
_ERROR_STATUSES = {"error", "cancelled"}


def _parts(value: Any) -> list[ContentPart]:
    """Gemini API content (a string, a Part, or a list of Parts) as text/image parts."""
    if value is None:
        return []
    if isinstance(value, str):
        return [TextBlock(text=value)] if value else []
    if isinstance(value, dict):
        value = [value]
    if not isinstance(value, list):
        return [TextBlock(text=as_text(value))]
    out: list[ContentPart] = []
    for part in value:
        if isinstance(part, str):
            if part:
                out.append(TextBlock(text=part))
        elif not isinstance(part, dict):
            out.append(TextBlock(text=as_text(part)))
        elif isinstance(part.get("text"), str):
            if part["text"] and not part.get("thought"):
                out.append(TextBlock(text=part["text"]))
        elif isinstance(part.get("inlineData"), dict):
            data = part["inlineData"]
            out.append(ImageBlock(media_type=data.get("mimeType"), data=data.get("data")))
        elif isinstance(part.get("fileData"), dict):
            data = part["fileData"]
            out.append(ImageBlock(media_type=data.get("mimeType"), url=data.get("fileUri")))
        elif "functionResponse" in part:
            out.extend(_function_response(part["functionResponse"])[0])
        else:
            out.append(TextBlock(text=as_text(part)))
    return out


def _function_response(value: Any) -> tuple[list[ContentPart], bool]:
    """The text the model was sent for one functionResponse, and whether it was an error."""
    if not isinstance(value, dict):
        return [TextBlock(text=as_text(value))], False
    response = value.get("response")
    if isinstance(response, dict):
        if "output" in response:
            return _parts(response["output"]) or [TextBlock(text="")], False
        if "error" in response:
            return [TextBlock(text=as_text(response["error"]))], True
        if "content" in response:
            return _parts(response["content"]), False
    out: list[ContentPart] = [TextBlock(text=as_text(response))] if response is not None else []
    out.extend(_parts(value.get("parts")))
    return out, False


def _result_parts(result: Any) -> tuple[tuple[ContentPart, ...], bool]:
    """A tool call's `result` (a list of Parts around a functionResponse)."""
    items = result if isinstance(result, list) else [result]
    parts: list[ContentPart] = []
    is_error = False
    for item in items:
        if isinstance(item, dict) and "functionResponse" in item:
            found, error = _function_response(item["functionResponse"])
            parts.extend(found)
            is_error = is_error or error
        else:
            parts.extend(_parts(item))
    return tuple(parts), is_error


def _thought(value: Any) -> ThinkingBlock | None:
    if isinstance(value, str):
        return ThinkingBlock(thinking=value) if value else None
    if not isinstance(value, dict):
        return None
    subject = as_text(value.get("subject")).strip()
    description = as_text(value.get("description"))
    text = f"**{subject}**\n{description}" if subject else description
    return ThinkingBlock(thinking=text) if text else None


def _meta(msg: dict[str, Any], *keys: str) -> dict[str, JsonValue]:
    out: dict[str, JsonValue] = {}
    for key in keys:
        value = msg.get(key)
        if value is not None:
            out["usage" if key == "tokens" else key] = value
    return out


class GeminiCliFormat(Format):
    name = "gemini-cli"
    description = "Gemini CLI chat session JSON"
    priority = 10

    def sniff(self, doc: Document) -> bool:
        data = doc.data
        if doc.kind != "json" or not isinstance(data, dict):
            return False
        messages = data.get("messages")
        if not isinstance(messages, list):
            return False
        if "sessionId" in data and "projectHash" in data:
            return True
        return any(isinstance(m, dict) and m.get("type") == "gemini" for m in messages[:50])

    def load(self, doc: Document) -> list[AgentContext]:
        data = doc.data
        if not self.sniff(doc) or not isinstance(data, dict):
            raise BadInputError(
                "not a Gemini CLI session (no sessionId/projectHash, no gemini messages)",
                path=doc.path,
                hint="expected ~/.gemini/tmp/<project>/chats/session-*.json",
            )
        messages: list[Any] = data["messages"]
        out: list[Message] = []
        n_calls = 0
        model: str | None = None
        for msg in messages:
            if not isinstance(msg, dict):
                continue
            kind = msg.get("type")
            if kind in _UI_TYPES:
                continue
            if kind != "gemini":
                out.append(
                    Message(
                        role="user",
                        content=tuple(_parts(msg.get("content"))),
                        metadata=_meta(msg, "id", "timestamp"),
                    )
                )
                continue
            if model is None and isinstance(msg.get("model"), str):
                model = msg["model"]
            blocks: list[Block] = []
            for thought in msg.get("thoughts") or []:
                block = _thought(thought)
                if block is not None:
                    blocks.append(block)
            blocks.extend(_parts(msg.get("content")))
            results: list[ToolResultBlock] = []
            for call in msg.get("toolCalls") or []:
                if not isinstance(call, dict):
                    continue
                n_calls += 1
                call_id = call.get("id")
                if not isinstance(call_id, str) or not call_id:
                    call_id = f"call_{n_calls}"
                args = call.get("args")
                blocks.append(
                    ToolCallBlock(
                        id=call_id,
                        name=as_text(call.get("name")) or "tool",
                        input=args if args is not None else {},
                    )
                )
                result = call.get("result")
                if result is None:
                    continue  # never answered: repair_pairing decides
                parts, is_error = _result_parts(result)
                results.append(
                    ToolResultBlock(
                        tool_call_id=call_id,
                        content=parts,
                        is_error=is_error or call.get("status") in _ERROR_STATUSES,
                    )
                )
            out.append(
                Message(
                    role="assistant",
                    content=tuple(blocks),
                    metadata=_meta(msg, "id", "timestamp", "model", "tokens"),
                )
            )
            if results:
                out.append(Message(role="tool", content=tuple(results)))
        repaired = repair_pairing(
            out, close="unless_answered", keep_pending="last_assistant", orphan_results="keep"
        )
        meta: dict[str, JsonValue] = {"source_format": self.name}
        for src, dst in (
            ("sessionId", "session_id"),
            ("projectHash", "project_hash"),
            ("startTime", "start_time"),
            ("lastUpdated", "last_updated"),
            ("summary", "title"),
        ):
            if isinstance(data.get(src), str):
                meta[dst] = data[src]
        if model:
            meta["model"] = model
        if repaired.synthesized_results:
            meta["synthesized_results"] = repaired.synthesized_results
        return [AgentContext(messages=tuple(repaired.messages), metadata=meta)]
