"""OpenAI chat-completions messages (arrays, requests, tau-bench, OpenHands SDK logs).

Accepted shapes (JSON): a bare messages array; a request body `{"model", "messages", "tools"}`; an
OpenHands SDK / litellm log `{"messages", "tools", "response", ...}` (the response's message is
appended as the last assistant message, with its `id`, `model` and `usage`); a list of
trajectories `[{"traj": [...]}, ...]` (tau-bench) or of request bodies, one conversation each.
JSONL: one message per line (one conversation), or one body `{"messages": [...]}` per line (one
conversation per line, the fine-tuning layout).

Reading:
- a leading `system` (or `developer`) message -> `system_instruction`; later ones stay
  `Message(role="system")`;
- `content` may be a string or a list of parts (`text`, `image_url`, `refusal`; `input_audio` and
  `file` parts are kept as their JSON text);
- assistant `thinking_blocks` (litellm: signed `thinking` / `redacted_thinking`, the redacted data
  kept in `ThinkingBlock.signature` with `redacted=True`) -> ThinkingBlocks; otherwise
  `reasoning_content` (or OpenRouter's `reasoning`) -> one unsigned ThinkingBlock;
- `tool_calls[].function.arguments` (a JSON string) is parsed into `ToolCallBlock.input`; text
  that is not JSON stays a string. Custom tool calls keep their free-text input; the legacy
  `function_call` gets a synthesized id `call_N` (N counts the calls of the conversation);
- each `role: tool` (or legacy `function`) message -> a tool message with one ToolResultBlock;
- `name` is kept on every message.
Pairing (`repair_tool_pairing`, shared with anthropic-messages): a call id that an earlier call
already used (tau-bench reuses ids once answered) becomes `<id>_<n>`, with the results after it;
calls that never get a result get a synthesized error result (tool message metadata
`{"synthesized": true}`); results whose call is missing get a synthesized call (assistant message
metadata `{"synthesized": true}`); a second result for one call becomes user text. The counts go to
`metadata["renamed_calls"]`, `["synthesized_results"]`, `["synthesized_calls"]`,
`["orphan_results"]`. Context metadata also keeps `model`, `tools` (as recorded) and tau-bench's
`task_id` / `trial` / `reward`.

Writing (`dump`): one context -> a JSON messages array `[{"role": "system", ...}, ...]` (one
message per line), several -> JSONL, one `{"messages": [...]}` per line. Tool calls carry
`arguments` as a JSON string, each result is its own `role: tool` message, marker blocks become
text (`marker_text`), images become `image_url` parts (inline data as a `data:` URL). Thinking is
written the way litellm takes it back: `reasoning_content`, plus `thinking_blocks` when any block
is signed, redacted or there are several (so signatures survive; strict OpenAI endpoints may
refuse these two extra keys).

What the written messages cannot carry: `is_error` of a result, the order of thinking / text /
tool calls inside one assistant message (always thinking, text, calls), results grouped in one
tool message (one message per result), message and context metadata (ids, usage, tools,
`recovery`, `activated_skills`), `detail` of images, an image's missing media type (written as
`image/png`).
"""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any, cast

from pydantic import JsonValue

from ..context import (
    MARKER_TYPES,
    NATIVE_FORMAT_TAG,
    AgentContext,
    Block,
    ContentPart,
    ImageBlock,
    Marker,
    Message,
    TextBlock,
    ThinkingBlock,
    ToolCallBlock,
    ToolResultBlock,
    marker_text,
)
from ..errors import BadInputError
from ._util import as_text, parse_arguments
from .base import Document, Format

NO_RESULT_TEXT = "[no result recorded]"

_OPENAI_ROLES = frozenset({"system", "developer", "user", "assistant", "tool", "function"})
_OPENAI_ONLY_ROLES = frozenset({"tool", "function", "developer"})
_OPENAI_ONLY_KEYS = (
    "tool_calls",
    "tool_call_id",
    "function_call",
    "reasoning_content",
    "thinking_blocks",
    "refusal",
)
_OPENAI_ONLY_PARTS = frozenset({"image_url", "input_audio", "file", "refusal"})
_ANTHROPIC_ONLY_BLOCKS = frozenset(
    {
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
    }
)
_MESSAGE_META_KEYS = ("id", "timestamp", "model", "usage")
_DATA_URL = re.compile(r"^data:(?P<type>[^;,]*)(?:;[^,]*)?;base64,(?P<data>.*)$", re.DOTALL)

Conversation = tuple[list[Any], dict[str, Any]]


# --------------------------------------------------------------------------- shared helpers
# (the anthropic-messages adapter uses these too)


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
        items = list(data)
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


def image_from_url(url: Any) -> ImageBlock:
    """An image from a URL; a base64 `data:` URL becomes inline data with its media type."""
    if isinstance(url, dict):
        url = url.get("url")
    text = url if isinstance(url, str) else ""
    match = _DATA_URL.match(text)
    if match:
        return ImageBlock(media_type=match.group("type") or None, data=match.group("data"))
    return ImageBlock(url=text or None)


def data_url(image: ImageBlock) -> str:
    """The URL an image is sent by: its own URL, or a `data:` URL holding its inline data."""
    if image.data is not None:
        return f"data:{image.media_type or 'image/png'};base64,{image.data}"
    return image.url or ""


def text_of(content: Any) -> str:
    """The text of a message content (a string, or text parts joined with newlines)."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(
            as_text(p.get("text")) if isinstance(p, dict) else as_text(p)
            for p in content
            if not isinstance(p, dict) or p.get("type") in ("text", "input_text", None)
        )
    return as_text(content)


def _synthesized_call_message(ids: Sequence[tuple[str, str]]) -> Message:
    return Message(
        role="assistant",
        content=tuple(ToolCallBlock(id=cid, name=name, input={}) for cid, name in ids),
        metadata={"synthesized": True},
    )


def _synthesized_result_message(ids: Sequence[str]) -> Message:
    return Message(
        role="tool",
        content=tuple(
            ToolResultBlock(
                tool_call_id=cid, content=(TextBlock(text=NO_RESULT_TEXT),), is_error=True
            )
            for cid in ids
        ),
        metadata={"synthesized": True},
    )


def _with_content(msg: Message, content: Sequence[Block]) -> Message:
    # a new value, not model_copy: that would carry over the cached text/tool_calls properties
    return Message(role=msg.role, content=tuple(content), name=msg.name, metadata=msg.metadata)


def _unique_call_ids(messages: Sequence[Message]) -> tuple[list[Message], int]:
    """Rename a call id that an earlier call already used to `<id>_<n>` (n-th use), and the results
    after it that name that id. Returns the messages and the number of calls renamed."""
    taken = {c.id for m in messages for c in m.tool_calls}
    uses: Counter[str] = Counter()
    current: dict[str, str] = {}  # id as recorded -> id of its latest call
    out: list[Message] = []
    renamed = 0
    for msg in messages:
        blocks: list[Block] = []
        for block in msg.content:
            if isinstance(block, ToolCallBlock):
                uses[block.id] += 1
                current[block.id] = block.id
                if uses[block.id] > 1:
                    n = uses[block.id]
                    while f"{block.id}_{n}" in taken:
                        n += 1
                    new_id = f"{block.id}_{n}"
                    taken.add(new_id)
                    renamed += 1
                    current[block.id] = new_id
                    block = ToolCallBlock(id=new_id, name=block.name, input=block.input)
            elif isinstance(block, ToolResultBlock) and block.tool_call_id in current:
                new_id = current[block.tool_call_id]
                if new_id != block.tool_call_id:
                    block = ToolResultBlock(
                        tool_call_id=new_id, content=block.content, is_error=block.is_error
                    )
            blocks.append(block)
        changed = any(a is not b for a, b in zip(blocks, msg.content, strict=True))
        out.append(_with_content(msg, blocks) if changed else msg)
    return out, renamed


@dataclass
class Repaired:
    """Messages after `repair_tool_pairing`, with what it had to do."""

    messages: list[Message]
    synthesized_results: int = 0
    synthesized_calls: int = 0
    renamed_calls: int = 0
    orphan_results: int = 0


def repair_tool_pairing(messages: Sequence[Message]) -> Repaired:
    """Make every result pair with an earlier call and every call get a result.

    - a call id used again by a later call is renamed `<id>_<n>` (with the results that follow it);
    - a call still open when the next non-tool message starts (and never answered later) gets a
      synthesized error result `"[no result recorded]"` in a tool message with metadata
      `{"synthesized": true}`; calls of the last assistant message may stay pending;
    - a result whose call never occurs gets a synthesized call (an assistant message with metadata
      `{"synthesized": true}`, name from the tool message's `name`) just before it;
    - a result for a call already answered, or for a call made only later, becomes a user message
      with its content (metadata `{"orphan_tool_result": id}`).
    """
    messages, renamed = _unique_call_ids(messages)
    repaired = Repaired(messages=[], renamed_calls=renamed)
    out = repaired.messages
    all_calls = {c.id for m in messages for c in m.tool_calls}
    remaining = Counter(
        r.tool_call_id for m in messages if m.role == "tool" for r in m.tool_results
    )
    last_assistant = max((i for i, m in enumerate(messages) if m.role == "assistant"), default=-1)
    open_calls: dict[str, int] = {}  # id -> index in `messages` of the calling message
    seen: set[str] = set()  # calls made so far

    def close(final: bool) -> None:
        missing = [
            cid
            for cid, index in open_calls.items()
            if remaining[cid] <= 0 and not (final and index == last_assistant)
        ]
        if missing:
            out.append(_synthesized_result_message(missing))
            repaired.synthesized_results += len(missing)
            for cid in missing:
                del open_calls[cid]

    for i, msg in enumerate(messages):
        if msg.role != "tool":
            close(final=False)
            for call in msg.tool_calls:
                seen.add(call.id)
                open_calls[call.id] = i
            out.append(msg)
            continue
        kept: list[Block] = []
        orphans: list[Message] = []
        unknown: list[tuple[str, str]] = []
        for block in msg.content:
            if not isinstance(block, ToolResultBlock):
                kept.append(block)
                continue
            cid = block.tool_call_id
            remaining[cid] -= 1
            if cid in open_calls:
                del open_calls[cid]
                kept.append(block)
            elif cid in seen or cid in all_calls:  # answered already, or called only later
                orphans.append(
                    Message(
                        role="user", content=block.content, metadata={"orphan_tool_result": cid}
                    )
                )
            else:
                unknown.append((cid, msg.name or "unknown_tool"))
                seen.add(cid)
                kept.append(block)
        if unknown:
            out.append(_synthesized_call_message(unknown))
            repaired.synthesized_calls += len(unknown)
        if kept:
            out.append(msg if len(kept) == len(msg.content) else _with_content(msg, kept))
        out.extend(orphans)
        repaired.orphan_results += len(orphans)
    close(final=True)
    return repaired


def context_metadata(
    fmt: str, container: dict[str, Any], index: int | None, repaired: Repaired
) -> dict[str, JsonValue]:
    """Context metadata: source format, model, tools, conversation number, tau-bench keys and
    the counts of what pairing repair did."""
    meta: dict[str, JsonValue] = {"source_format": fmt}
    model = container.get("model")
    response = container.get("response")
    if not isinstance(model, str) and isinstance(response, dict):
        model = response.get("model")
    if isinstance(model, str):
        meta["model"] = model
    for key in ("instance_id", "task_id", "trial", "reward"):
        value = container.get(key)
        if isinstance(value, (str, int, float)) and not isinstance(value, bool):
            meta[key] = value
    tools = container.get("tools")
    if isinstance(tools, list) and tools:
        meta["tools"] = tools
    if index is not None:
        meta["conversation"] = index
    for key in ("synthesized_results", "synthesized_calls", "renamed_calls", "orphan_results"):
        if getattr(repaired, key):
            meta[key] = getattr(repaired, key)
    return meta


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


# --------------------------------------------------------------------------- reading


def _parts(content: Any, *, assistant: bool = False) -> list[Block]:
    """Message content (string or list of parts) as blocks; empty strings give nothing."""
    if content is None:
        return []
    if isinstance(content, str):
        return [TextBlock(text=content)] if content else []
    if isinstance(content, dict):
        content = [content]
    if not isinstance(content, list):
        return [TextBlock(text=as_text(content))]
    out: list[Block] = []
    for part in content:
        if not isinstance(part, dict):
            out.append(TextBlock(text=as_text(part)))
            continue
        kind = part.get("type")
        if kind in ("text", "input_text", "output_text"):
            out.append(TextBlock(text=as_text(part.get("text"))))
        elif kind == "refusal":
            out.append(TextBlock(text=as_text(part.get("refusal"))))
        elif kind == "image_url":
            out.append(image_from_url(part.get("image_url")))
        elif assistant and kind in ("thinking", "redacted_thinking"):
            out.extend(_thinking([part]))
        else:
            out.append(TextBlock(text=as_text(part)))
    return out


def _result_parts(content: Any) -> tuple[ContentPart, ...]:
    return tuple(
        b if isinstance(b, (TextBlock, ImageBlock)) else TextBlock(text=block_as_text(b))
        for b in _parts(content)
    )


def _thinking(items: Iterable[Any]) -> list[Block]:
    out: list[Block] = []
    for item in items:
        if not isinstance(item, dict):
            continue
        signature = item.get("signature")
        if item.get("type") == "redacted_thinking":
            data = item.get("data")
            out.append(
                ThinkingBlock(
                    thinking="", signature=data if isinstance(data, str) else None, redacted=True
                )
            )
        else:
            out.append(
                ThinkingBlock(
                    thinking=as_text(item.get("thinking")),
                    signature=signature if isinstance(signature, str) else None,
                )
            )
    return out


class _Reader:
    """Turns one OpenAI messages array into messages, counting calls for synthesized ids."""

    def __init__(self) -> None:
        self.calls = 0
        self.open: list[tuple[str, str]] = []  # (id, name) of calls not yet answered, in order

    def call_id(self, raw: Any) -> str:
        cid = raw if isinstance(raw, str) and raw else f"call_{self.calls}"
        self.calls += 1
        return cid

    def take_open(self, name: Any) -> str:
        """The id for a result that names no call: the earliest open call (same name first)."""
        for pos, (_, call_name) in enumerate(self.open):
            if call_name == name:
                return self.open.pop(pos)[0]
        if self.open:
            return self.open.pop(0)[0]
        return self.call_id(None)

    def answer(self, cid: str) -> None:
        self.open = [(c, n) for c, n in self.open if c != cid]

    def assistant(self, m: dict[str, Any]) -> list[Block]:
        blocks: list[Block] = []
        thinking_blocks = m.get("thinking_blocks")
        if isinstance(thinking_blocks, list) and thinking_blocks:
            blocks.extend(_thinking(thinking_blocks))
        else:
            for key in ("reasoning_content", "reasoning"):
                text = m.get(key)
                if isinstance(text, str) and text:
                    blocks.append(ThinkingBlock(thinking=text))
                    break
        blocks.extend(_parts(m.get("content"), assistant=True))
        refusal = m.get("refusal")
        if isinstance(refusal, str) and refusal:
            blocks.append(TextBlock(text=refusal))
        calls = m.get("tool_calls")
        for call in calls if isinstance(calls, list) else []:
            if not isinstance(call, dict):
                continue
            custom = call.get("custom")
            fn = call.get("function")
            value: Any
            if call.get("type") == "custom" and isinstance(custom, dict):
                name, value = custom.get("name"), as_text(custom.get("input"))
            else:
                fn = fn if isinstance(fn, dict) else {}
                name, value = fn.get("name"), parse_arguments(fn.get("arguments"))
            cid = self.call_id(call.get("id"))
            blocks.append(ToolCallBlock(id=cid, name=as_text(name), input=value))
            self.open.append((cid, as_text(name)))
        legacy = m.get("function_call")
        if isinstance(legacy, dict):
            cid = self.call_id(None)
            name = as_text(legacy.get("name"))
            blocks.append(
                ToolCallBlock(id=cid, name=name, input=parse_arguments(legacy.get("arguments")))
            )
            self.open.append((cid, name))
        return blocks

    def message(self, m: dict[str, Any]) -> Message:
        role = m.get("role")
        name = m.get("name") if isinstance(m.get("name"), str) else None
        meta = message_metadata(m)
        if role == "assistant":
            return Message(
                role="assistant", content=tuple(self.assistant(m)), name=name, metadata=meta
            )
        if role in ("tool", "function"):
            raw = m.get("tool_call_id")
            if isinstance(raw, str) and raw:
                cid = raw
                self.answer(cid)
            else:
                cid = self.take_open(name)
            result = ToolResultBlock(tool_call_id=cid, content=_result_parts(m.get("content")))
            return Message(role="tool", content=(result,), name=name, metadata=meta)
        kind = "system" if role in ("system", "developer") else "user"
        return Message(role=kind, content=tuple(_parts(m.get("content"))), name=name, metadata=meta)


def _response_message(response: Any) -> dict[str, Any] | None:
    """The assistant message of a logged chat-completions response, with its id/model/usage."""
    if not isinstance(response, dict):
        return None
    choices = response.get("choices")
    if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
        return None
    message = choices[0].get("message")
    if not isinstance(message, dict):
        return None
    out = dict(message)
    out.setdefault("role", "assistant")
    for key in ("id", "model", "usage"):
        if response.get(key) is not None:
            out[key] = response[key]
    return out


def read_conversation(
    msgs: list[Any], container: dict[str, Any], index: int | None
) -> AgentContext:
    """One OpenAI messages array (plus its container's response, model and tools) as a context."""
    reader = _Reader()
    system: str | None = None
    rest = list(msgs)
    if rest and isinstance(rest[0], dict) and rest[0].get("role") in ("system", "developer"):
        system = text_of(rest.pop(0).get("content"))
    messages = [reader.message(m) for m in rest if isinstance(m, dict)]
    response = _response_message(container.get("response"))
    if response is not None:
        if isinstance(container.get("timestamp"), (int, float, str)):
            response.setdefault("timestamp", container["timestamp"])
        messages.append(reader.message(response))
    repaired = repair_tool_pairing(messages)
    return AgentContext(
        system_instruction=system,
        messages=tuple(repaired.messages),
        metadata=context_metadata("openai-chat", container, index, repaired),
    )


# --------------------------------------------------------------------------- writing


def _text_part(text: str) -> dict[str, Any]:
    return {"type": "text", "text": text}


def _image_part(image: ImageBlock) -> dict[str, Any]:
    return {"type": "image_url", "image_url": {"url": data_url(image)}}


def _content_out(blocks: Iterable[Block]) -> str | list[dict[str, Any]]:
    """Blocks as OpenAI content: one text -> a string, else a list of text / image_url parts."""
    parts: list[dict[str, Any]] = []
    for block in blocks:
        if isinstance(block, ImageBlock):
            parts.append(_image_part(block))
            continue
        text = block_as_text(block)
        if text:
            parts.append(_text_part(text))
    if not parts:
        return ""
    if len(parts) == 1 and parts[0]["type"] == "text":
        return str(parts[0]["text"])
    return parts


def _arguments(value: JsonValue) -> str:
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)


def _thinking_out(blocks: Sequence[ThinkingBlock], out: dict[str, Any]) -> None:
    if not blocks:
        return
    out["reasoning_content"] = "\n".join(b.thinking for b in blocks if not b.redacted)
    if len(blocks) == 1 and blocks[0].signature is None and not blocks[0].redacted:
        return
    items: list[dict[str, Any]] = []
    for b in blocks:
        if b.redacted:
            items.append({"type": "redacted_thinking", "data": b.signature or ""})
        else:
            item: dict[str, Any] = {"type": "thinking", "thinking": b.thinking}
            if b.signature is not None:
                item["signature"] = b.signature
            items.append(item)
    out["thinking_blocks"] = items


def _assistant_out(msg: Message) -> dict[str, Any]:
    out: dict[str, Any] = {"role": "assistant"}
    _thinking_out([b for b in msg.content if isinstance(b, ThinkingBlock)], out)
    body = [b for b in msg.content if not isinstance(b, (ThinkingBlock, ToolCallBlock))]
    content = _content_out(body)
    calls = msg.tool_calls
    out["content"] = None if calls and content == "" else content
    if calls:
        out["tool_calls"] = [
            {
                "id": c.id,
                "type": "function",
                "function": {"name": c.name, "arguments": _arguments(c.input)},
            }
            for c in calls
        ]
    if msg.name is not None:
        out["name"] = msg.name
    return out


def _result_out(result: ToolResultBlock, name: str | None) -> dict[str, Any]:
    out: dict[str, Any] = {
        "role": "tool",
        "tool_call_id": result.tool_call_id,
        "content": _content_out(result.content),
    }
    if name is not None:
        out["name"] = name
    return out


def to_openai_messages(ctx: AgentContext) -> list[dict[str, Any]]:
    """The context as an OpenAI chat-completions `messages` array."""
    out: list[dict[str, Any]] = []
    if ctx.system_instruction is not None:
        out.append({"role": "system", "content": ctx.system_instruction})
    for msg in ctx.messages:
        if msg.role == "assistant":
            out.append(_assistant_out(msg))
            continue
        results = msg.tool_results
        others = [b for b in msg.content if not isinstance(b, ToolResultBlock)]
        out.extend(_result_out(r, msg.name) for r in results)
        if msg.role == "tool" or results:
            # text beside results (not something a tool message can hold) follows as user text
            if others:
                out.append({"role": "user", "content": _content_out(others)})
            continue
        item: dict[str, Any] = {"role": msg.role, "content": _content_out(others)}
        if msg.name is not None:
            item["name"] = msg.name
        out.append(item)
    return out


def json_array_text(items: Sequence[Any], indent: str = "") -> str:
    """A JSON array with one item per line: readable, and written by the fast C encoder."""
    if not items:
        return "[]\n" if not indent else "[]"
    lines = f",\n{indent} ".join(json.dumps(item, ensure_ascii=False) for item in items)
    return f"[\n{indent} {lines}\n{indent}]" + ("" if indent else "\n")


# --------------------------------------------------------------------------- the format


def _openai_shaped(m: Any) -> bool:
    if not isinstance(m, dict) or m.get("role") not in _OPENAI_ROLES:
        return False
    content = m.get("content")
    if content is None or isinstance(content, str):
        return True
    if isinstance(content, list):
        return all(isinstance(p, (dict, str)) for p in content)
    return False


class OpenAIChatFormat(Format):
    name = "openai-chat"
    description = (
        "OpenAI chat-completions messages (arrays, requests, tau-bench, OpenHands SDK logs)"
    )
    can_write = True

    def sniff(self, doc: Document) -> bool:
        try:
            convs = conversations_of(doc)
            if not convs or has_foreign_keys(convs):
                return False
            if not all(_openai_shaped(m) for msgs, _ in convs for m in msgs):
                return False
            return openai_marks(convs) or not anthropic_marks(convs)
        except Exception:
            return False

    def load(self, doc: Document) -> list[AgentContext]:
        convs = conversations_of(doc)
        if convs is None:
            raise BadInputError(
                "not OpenAI chat messages (no array of {role, content} messages found)",
                path=doc.path,
            )
        several = len(convs) > 1
        return [
            read_conversation(msgs, container, n if several else None)
            for n, (msgs, container) in enumerate(convs)
        ]

    def dump(self, contexts: Sequence[AgentContext]) -> str:
        if len(contexts) == 1:
            return json_array_text(to_openai_messages(contexts[0]))
        return "".join(
            json.dumps({"messages": to_openai_messages(c)}, ensure_ascii=False) + "\n"
            for c in contexts
        )
