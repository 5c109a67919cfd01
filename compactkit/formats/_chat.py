"""Helpers shared by the chat-API adapters (openai-chat and anthropic-messages; cline reads
Anthropic blocks and repairs pairing the same way).

Both read the same containers (a messages array, a request body, a log, a list of those), tell
each other's files apart by what only one API has, read Anthropic content blocks the same way,
keep the same message and context metadata, repair tool-call pairing the same way, and write JSON
one message per line.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from typing import Any, Protocol, cast

from pydantic import JsonValue

from ..context import (
    MARKER_TYPES,
    NATIVE_FORMAT_TAG,
    AgentContext,
    Block,
    ImageBlock,
    Marker,
    Message,
    TextBlock,
    ThinkingBlock,
    ToolCallBlock,
    ToolResultBlock,
    marker_text,
)
from ._pairing import Repaired, repair_pairing
from ._util import as_text, context_metadata, image_from_url, note_repairs, str_or_none
from .base import Document

_OPENAI_ONLY_ROLES = ("tool", "function", "developer")
_OPENAI_ONLY_KEYS = (
    "tool_calls",
    "tool_call_id",
    "function_call",
    "reasoning_content",
    "thinking_blocks",
    "refusal",
)
_OPENAI_ONLY_PARTS = ("image_url", "input_audio", "file", "refusal")
_ANTHROPIC_ONLY_BLOCKS = (
    "tool_use",
    "tool_result",
    "thinking",
    "redacted_thinking",
    "document",
    "search_result",
    "server_tool_use",
    "web_search_tool_result",
    "web_fetch_tool_result",
    "code_execution_tool_result",
    "bash_code_execution_tool_result",
    "text_editor_code_execution_tool_result",
    "tool_search_tool_result",
    "container_upload",
    "mcp_tool_use",
    "mcp_tool_result",
)
_MESSAGE_META_KEYS = ("id", "timestamp", "model", "usage")

Conversation = tuple[list[Any], dict[str, Any]]
"""The messages of one conversation and the container that held them (`{}` for a bare array)."""


# --------------------------------------------------------------------------- reading


def _message_list(value: Any) -> list[Any] | None:
    """The messages of a container dict (`messages` or tau-bench's `traj`), else None."""
    if not isinstance(value, dict):
        return None
    for key in ("messages", "traj"):
        msgs = value.get(key)
        if isinstance(msgs, list) and all(isinstance(m, dict) and "role" in m for m in msgs):
            return msgs
    return None


def _is_message_array(value: Any) -> bool:
    return (
        isinstance(value, list)
        and bool(value)
        and all(isinstance(m, dict) and "role" in m for m in value)
    )


def conversations_of(doc: Document) -> list[Conversation] | None:
    """The conversations in `doc` as (messages, container) pairs; None when it holds none.

    The container is the dict that held the messages (a request body, a log, a trajectory), or
    `{}` for a bare array. At least one message must exist somewhere.
    """
    data = doc.data
    if doc.kind == "jsonl" or isinstance(data, list):
        items = data if isinstance(data, list) else list(data)
        if _is_message_array(items):
            return [(items, {})]
        if not items:
            return None
        out: list[Conversation] = []
        for item in items:
            msgs = _message_list(item)
            if msgs is None:
                return None
            out.append((msgs, item))
    else:
        msgs = _message_list(data)
        if msgs is None:
            return None
        out = [(msgs, data)]
    return out if any(msgs for msgs, _ in out) else None


def _blocks_of(message: dict[str, Any]) -> list[dict[str, Any]]:
    content = message.get("content")
    if isinstance(content, list):
        return [b for b in content if isinstance(b, dict)]
    return []


def anthropic_marks(conversations: Sequence[Conversation]) -> bool:
    """True when something only the Anthropic Messages shape has is present."""
    for msgs, container in conversations:
        if isinstance(container.get("system"), (str, list)) or "anthropic_version" in container:
            return True  # a top-level system prompt; Bedrock / Vertex request bodies
        for m in msgs:
            for b in _blocks_of(m):
                kind = b.get("type")
                if kind in _ANTHROPIC_ONLY_BLOCKS or (kind == "image" and "source" in b):
                    return True
    return False


def anthropic_call_blocks(conversations: Sequence[Conversation]) -> bool:
    """True when a message holds an Anthropic `tool_use` or `tool_result` block, which no OpenAI
    chat message can (a Roo Code history has them beside OpenAI-style `reasoning_content`)."""
    return any(
        b.get("type") in ("tool_use", "tool_result")
        for msgs, _ in conversations
        for m in msgs
        for b in _blocks_of(m)
    )


def openai_marks(conversations: Sequence[Conversation]) -> bool:
    """True when something only the OpenAI chat shape has is present."""
    for msgs, _ in conversations:
        for m in msgs:
            if m.get("role") in _OPENAI_ONLY_ROLES or any(k in m for k in _OPENAI_ONLY_KEYS):
                return True
            if any(b.get("type") in _OPENAI_ONLY_PARTS for b in _blocks_of(m)):
                return True
    return False


def has_foreign_keys(conversations: Sequence[Conversation]) -> bool:
    """Containers that belong to another format (mini-swe-agent, compactkit native)."""
    return any(
        "trajectory_format" in c or c.get("format") == NATIVE_FORMAT_TAG for _, c in conversations
    )


def message_metadata(m: dict[str, Any]) -> dict[str, JsonValue]:
    """What a saved message recorded about itself: id, timestamp (or Cline's `ts`), model, usage."""
    meta: dict[str, JsonValue] = {}
    for key in _MESSAGE_META_KEYS:
        if m.get(key) is not None:
            meta[key] = m[key]
    if "timestamp" not in meta and m.get("ts") is not None:
        meta["timestamp"] = m["ts"]
    return meta


class ChatBuilder(Protocol):
    """What `read_conversations` drives: a builder made from a conversation's container, given
    each saved message in order, then asked for the context."""

    def add(self, message: Any) -> None: ...

    def context(self, index: int | None) -> AgentContext: ...


def read_conversations(
    doc: Document,
    conversations: Sequence[Conversation],
    builder: Callable[[dict[str, Any]], ChatBuilder],
) -> list[AgentContext]:
    """The context of each conversation of `doc`: `builder(container)`, each of its messages
    added (`doc.take`), then `context(index)`, `index` being its position when there are
    several, else None."""
    several = len(conversations) > 1
    out: list[AgentContext] = []
    for n, (msgs, container) in enumerate(conversations):
        reader = builder(container)
        for message in doc.take(msgs):
            reader.add(message)
        out.append(reader.context(n if several else None))
    return out


def repair_chat_pairing(messages: Sequence[Message]) -> Repaired:
    """`repair_pairing` as both chat adapters apply it: a call id reused by a later call is renamed
    `<id>_<n>` (tau-bench reuses ids once answered); a call with no result later gets a
    synthesized error result when the next non-tool message starts (calls of the last assistant
    message may stay pending); a result whose id no call in `messages` has gets a synthesized
    call just before it (named after the tool message, else `unknown_tool`; once per id); any
    other result whose call is not open (answered already, or called only later) becomes a user
    message with metadata `{"orphan_tool_result": <id>, "origin": "tool-output"}`."""
    return repair_pairing(
        messages,
        rename_reused_ids=True,
        close="unless_answered_later",
        keep_pending="last_assistant",
        synthesize_calls="if_never_called",
        unknown_tool_name="unknown_tool",
        orphan_results="user_message_each",
    )


def chat_context(
    fmt: str,
    system: str | None,
    messages: Sequence[Message],
    container: dict[str, Any],
    index: int | None,
) -> AgentContext:
    """The context of one conversation read by format `fmt`: `messages` after
    `repair_chat_pairing`, with `chat_metadata` and the repair counts."""
    return repaired_chat_context(fmt, system, repair_chat_pairing(messages), container, index)


def repaired_chat_context(
    fmt: str,
    system: str | None,
    repaired: Repaired,
    container: dict[str, Any],
    index: int | None,
) -> AgentContext:
    """`chat_context` from messages `repair_chat_pairing` already repaired."""
    meta = chat_metadata(fmt, container, index)
    note_repairs(meta, repaired)
    return AgentContext(system_instruction=system, messages=tuple(repaired.messages), metadata=meta)


def chat_metadata(fmt: str, container: dict[str, Any], index: int | None) -> dict[str, JsonValue]:
    """Context metadata of a conversation and the container that held it: model, tau-bench keys,
    tools, a request's `max_tokens` (or `max_completion_tokens`), conversation number."""
    model = container.get("model")
    response = container.get("response")
    if not isinstance(model, str) and isinstance(response, dict):
        model = response.get("model")
    run: dict[str, JsonValue] = {}
    for key in ("instance_id", "task_id", "trial", "reward"):
        value = container.get(key)
        if isinstance(value, (str, int, float)) and not isinstance(value, bool):
            run[key] = value
    tools = container.get("tools")
    limit = container.get("max_tokens", container.get("max_completion_tokens"))
    return context_metadata(
        fmt,
        model=str_or_none(model),
        **run,
        tools=tools if isinstance(tools, list) and tools else None,
        max_tokens=limit if isinstance(limit, int) and not isinstance(limit, bool) else None,
        conversation=index,
    )


# --------------------------------------------------------------------------- Anthropic blocks


def anthropic_image(block: dict[str, Any]) -> ImageBlock:
    """An Anthropic `image` block (`source` base64, url or file)."""
    source = block.get("source")
    source = source if isinstance(source, dict) else {}
    kind = source.get("type")
    media_type = source.get("media_type") if isinstance(source.get("media_type"), str) else None
    if kind == "base64":
        return ImageBlock(media_type=media_type, data=as_text(source.get("data")))
    if kind == "url":
        image = image_from_url(source.get("url"))
        if media_type is None:
            return image
        return ImageBlock(media_type=media_type, url=image.url, data=image.data)
    return ImageBlock(media_type=media_type, url=as_text(source.get("file_id")) or None)


def anthropic_document_text(block: dict[str, Any]) -> str:
    """A `document` block's text (a text source), else the block as JSON."""
    source = block.get("source")
    if isinstance(source, dict) and source.get("type") == "text":
        return as_text(source.get("data"))
    return as_text(block)


def anthropic_block(block: dict[str, Any]) -> Block:
    """One Anthropic content block other than `tool_result` as a context block: text, image,
    thinking (signed or redacted), `tool_use`, a document's text; any other block as its JSON."""
    kind = block.get("type")
    if kind == "text":
        return TextBlock(text=as_text(block.get("text")))
    if kind == "image":
        return anthropic_image(block)
    if kind == "thinking":
        signature = block.get("signature")
        return ThinkingBlock(
            thinking=as_text(block.get("thinking")),
            signature=signature if isinstance(signature, str) else None,
        )
    if kind == "redacted_thinking":
        data = block.get("data")
        return ThinkingBlock(
            thinking="", signature=data if isinstance(data, str) else None, redacted=True
        )
    if kind == "tool_use":
        value = block.get("input")
        return ToolCallBlock(
            id=as_text(block.get("id")),
            name=as_text(block.get("name")),
            input=value if value is not None else {},
        )
    if kind == "document":
        return TextBlock(text=anthropic_document_text(block))
    return TextBlock(text=as_text(block))


# --------------------------------------------------------------------------- writing


def block_as_text(block: Block) -> str:
    """Any block as the text a model would be shown (for blocks a format cannot hold as such):
    text, every marker type via `marker_text`, thinking, a call as JSON, a result's text."""
    if isinstance(block, TextBlock):
        return block.text
    if block.type in MARKER_TYPES:
        return marker_text(cast(Marker, block))
    if isinstance(block, ThinkingBlock):
        return block.thinking
    if isinstance(block, ToolCallBlock):
        return as_text({"tool_call": block.name, "id": block.id, "input": block.input})
    if isinstance(block, ToolResultBlock):
        return block.text
    return ""


def json_array_text(items: Sequence[Any], indent: str = "") -> str:
    """A JSON array with one item per line: readable, and written by the fast C encoder."""
    if not items:
        return "[]\n" if not indent else "[]"
    lines = f",\n{indent} ".join(json.dumps(item, ensure_ascii=False) for item in items)
    return f"[\n{indent} {lines}\n{indent}]" + ("" if indent else "\n")


def body_text(body: dict[str, Any]) -> str:
    """A request body as JSON text, its messages one a line."""
    fields = [
        f"{json.dumps(key)}: "
        + (
            json_array_text(value, indent=" ")
            if key == "messages"
            else json.dumps(value, ensure_ascii=False)
        )
        for key, value in body.items()
    ]
    return "{\n " + ",\n ".join(fields) + "\n}\n"
