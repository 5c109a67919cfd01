"""OpenAI chat-completions messages (arrays, requests, tau-bench, OpenHands SDK logs).

Upstream: the chat-completions API reference (`messages`, `tools`) and openai/openai-python
`src/openai/types/chat/` (`ChatCompletionMessageParam` and its parts); sierra-research/tau-bench
`historical_trajectories/*.json` (`traj`, `task_id`, `trial`, `reward`); litellm's
`thinking_blocks` / `reasoning_content` (as OpenHands/software-agent-sdk logs them).

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
- `name` is kept on every message;
- user messages: every `role: user` message is a user message in the human's words (tau-bench's
  simulated user counts as the user; text and `image_url` parts kept); what a tool returned is
  never in one (it is a `role: tool` message), except a second result for an already answered
  call, moved to user text marked `metadata["origin"] = "tool-output"`. Nothing is skipped.
Pairing (`_chat.repair_chat_pairing`, shared with anthropic-messages): a call id that an earlier
call already used (tau-bench reuses ids once answered) becomes `<id>_<n>`, with the results after
it; calls that never get a result get a synthesized error result (tool message metadata
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

import itertools
import json
from collections.abc import Iterable, Sequence
from typing import Any

from pydantic import JsonValue

from ..context import (
    MARKER_TYPES,
    AgentContext,
    Block,
    ContentPart,
    ImageBlock,
    Message,
    Role,
    TextBlock,
    ThinkingBlock,
    ToolCallBlock,
    ToolResultBlock,
)
from ..errors import BadInputError
from ._chat import (
    anthropic_call_blocks,
    anthropic_marks,
    block_as_text,
    body_text,
    chat_context,
    conversations_of,
    has_foreign_keys,
    json_array_text,
    message_metadata,
    openai_marks,
    read_conversations,
)
from ._pairing import Turn, freeze_all
from ._util import as_text, image_from_url, parse_arguments, text_of
from .base import Document, Format
from .export import ExportNotes, ProviderWriter, WriterOptions, prepare, request_settings
from .provider_rules import OPENAI_ID_MAX

_OPENAI_ROLES = ("system", "developer", "user", "assistant", "tool", "function")


class OpenAIChatFormat(ProviderWriter, Format):
    name = "openai-chat"
    description = (
        "OpenAI chat-completions messages (arrays, requests, tau-bench, OpenHands SDK logs)"
    )
    extension = ".json"
    priority = 0
    can_write = True

    def sniff(self, doc: Document) -> bool:
        try:
            convs = conversations_of(doc)
            if not convs or has_foreign_keys(convs) or anthropic_call_blocks(convs):
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
        return read_conversations(doc, convs, OpenAIChatContextBuilder)

    def request_body(
        self, ctx: AgentContext, options: WriterOptions | None, notes: ExportNotes
    ) -> dict[str, Any]:
        return to_openai_request(ctx, options, notes)

    def body_text(self, body: dict[str, Any]) -> str:
        return _body_text(body)


# --------------------------------------------------------------------------- messages -> turns


class OpenAIChatContextBuilder:
    """Builds the `AgentContext` of one OpenAI Chat Completions messages array: `add` each
    message in order, then `context(index)`. Calls are counted for synthesized ids. Public: the
    gateway reads a request's messages with it, as the `openai-chat` format reads a file's."""

    def __init__(self, container: dict[str, Any]) -> None:
        self.container = container  # the request body or log holding the messages, or {}
        self.turns: list[Turn] = []
        self.system: str | None = None
        self.first = True
        self.calls = 0
        self.open: list[tuple[str, str]] = []  # (id, name) of calls not yet answered, in order

    def add(self, m: Any) -> None:
        """The next saved message; a leading system (or developer) one is the system prompt."""
        first, self.first = self.first, False
        if not isinstance(m, dict):
            return
        if first and m.get("role") in ("system", "developer"):
            self.system = text_of(m.get("content"))
            return
        self.message(m)

    def message(self, m: dict[str, Any]) -> None:
        role = m.get("role")
        name = m.get("name") if isinstance(m.get("name"), str) else None
        meta = message_metadata(m)
        if role == "assistant":
            self.turns.append(Turn("assistant", self.assistant(m), meta, name))
            return
        if role in ("tool", "function"):
            raw = m.get("tool_call_id")
            if isinstance(raw, str) and raw:
                cid = raw
                self.answer(cid)
            else:
                cid = self.take_open(name)
            result = ToolResultBlock(tool_call_id=cid, content=_result_parts(m.get("content")))
            self.turns.append(Turn("tool", [result], meta, name))
            return
        kind: Role = "system" if role in ("system", "developer") else "user"
        self.turns.append(Turn(kind, _parts(m.get("content")), meta, name))

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

    def context(self, index: int | None) -> AgentContext:
        """The conversation (the logged response's message last) as a context."""
        container = self.container
        response = _response_message(container.get("response"))
        if response is not None:
            if isinstance(container.get("timestamp"), (int, float, str)):
                response.setdefault("timestamp", container["timestamp"])
            self.message(response)
        turns = freeze_all(self.turns)
        return chat_context(OpenAIChatFormat.name, self.system, turns, container, index)


# --------------------------------------------------------------------------- reading


def _openai_shaped(m: Any) -> bool:
    if not isinstance(m, dict) or m.get("role") not in _OPENAI_ROLES:
        return False
    content = m.get("content")
    if content is None or isinstance(content, str):
        return True
    if isinstance(content, list):
        return all(isinstance(p, (dict, str)) for p in content)
    return False


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


# --------------------------------------------------------------------------- writing


def _text_part(text: str) -> dict[str, Any]:
    return {"type": "text", "text": text}


def data_url(image: ImageBlock) -> str:
    """The URL an image is sent by: its own URL, or a `data:` URL holding its inline data."""
    if image.data is not None:
        return f"data:{image.media_type or 'image/png'};base64,{image.data}"
    return image.url or ""


def _image_part(image: ImageBlock) -> dict[str, Any]:
    return {"type": "image_url", "image_url": {"url": data_url(image)}}


def _content_out(
    blocks: Iterable[Block], notes: ExportNotes, *, images: bool = True
) -> str | list[dict[str, Any]]:
    """Blocks as OpenAI content: one text -> a string, else a list of text / image_url parts.
    `images=False` for assistant and tool messages, whose content takes text parts only."""
    parts: list[dict[str, Any]] = []
    for block in blocks:
        if isinstance(block, ImageBlock):
            if images:
                parts.append(_image_part(block))
            else:
                notes.drop("images")
            continue
        if block.type in MARKER_TYPES:
            notes.drop("markers written as text")
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


def _thinking_out(
    blocks: Sequence[ThinkingBlock], out: dict[str, Any], request: bool, notes: ExportNotes
) -> None:
    if not blocks:
        return
    if request:  # the API takes no reasoning in messages (litellm's extra keys are refused)
        notes.drop("thinking blocks", len(blocks))
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


def _assistant_out(msg: Message, request: bool, notes: ExportNotes) -> dict[str, Any]:
    out: dict[str, Any] = {"role": "assistant"}
    _thinking_out([b for b in msg.content if isinstance(b, ThinkingBlock)], out, request, notes)
    body = [b for b in msg.content if not isinstance(b, (ThinkingBlock, ToolCallBlock))]
    content = _content_out(body, notes, images=False)
    calls = msg.tool_calls
    after_call = itertools.dropwhile(lambda b: not isinstance(b, ToolCallBlock), msg.content)
    notes.change(  # a chat message holds its content, then its calls
        "assistant texts moved before the tool calls",
        sum(not isinstance(b, (ThinkingBlock, ToolCallBlock, ImageBlock)) for b in after_call),
    )
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


def _result_out(
    result: ToolResultBlock, name: str | None, request: bool, notes: ExportNotes
) -> dict[str, Any]:
    if result.is_error:
        notes.drop("error flags of results")
    out: dict[str, Any] = {
        "role": "tool",
        "tool_call_id": result.tool_call_id,
        "content": _content_out(result.content, notes, images=False),
    }
    if name is not None and not request:  # a tool message has no `name` in the API
        out["name"] = name
    elif name is not None:
        notes.drop("tool message names")
    return out


def to_openai_messages(
    ctx: AgentContext, options: WriterOptions | None = None, notes: ExportNotes | None = None
) -> list[dict[str, Any]]:
    """The context as an OpenAI chat-completions `messages` array.

    `options` (default: a saved session) choose a request to send and what happens to a pending
    call (`export.WriterOptions`); what is dropped or changed is counted in `notes`.
    """
    options = options or WriterOptions()
    notes = notes if notes is not None else ExportNotes()
    request = options.request
    ctx = prepare(ctx, options, notes, lambda cid: 0 < len(cid) <= OPENAI_ID_MAX)
    out: list[dict[str, Any]] = []
    if ctx.system_instruction is not None:
        out.append({"role": "system", "content": ctx.system_instruction})
    for msg in ctx.messages:
        if msg.role == "assistant":
            out.append(_assistant_out(msg, request, notes))
            continue
        results = msg.tool_results
        others = [b for b in msg.content if not isinstance(b, ToolResultBlock)]
        out.extend(_result_out(r, msg.name, request, notes) for r in results)
        if msg.role == "tool" or results:
            # text beside results (not something a tool message can hold) follows as user text
            if others:
                out.append({"role": "user", "content": _content_out(others, notes)})
            continue
        item: dict[str, Any] = {"role": msg.role, "content": _content_out(others, notes)}
        if msg.name is not None:
            item["name"] = msg.name
        out.append(item)
    return _request_messages(out, notes) if request else out


def _request_messages(out: list[dict[str, Any]], notes: ExportNotes) -> list[dict[str, Any]]:
    """Written messages as the API takes them: no message left empty, and the tool messages of
    an assistant message right after it (a user message that came between them moves after)."""
    kept = []
    for m in out:
        empty = m["content"] in ("", None, []) and not m.get("tool_calls")
        if empty and m["role"] != "tool":  # a tool's empty output is still its answer
            notes.drop("empty messages")
        else:
            kept.append(m)
    ordered: list[dict[str, Any]] = []
    i = 0
    while i < len(kept):
        m = kept[i]
        ordered.append(m)
        i += 1
        open_ids = {c["id"] for c in m.get("tool_calls") or []}
        if not open_ids:
            continue
        between: list[dict[str, Any]] = []
        moved = 0  # messages that came before a result of this assistant message
        while i < len(kept) and open_ids and kept[i]["role"] != "assistant":
            if kept[i]["role"] == "tool" and kept[i]["tool_call_id"] in open_ids:
                open_ids.discard(kept[i]["tool_call_id"])
                ordered.append(kept[i])
                moved = len(between)
            else:
                between.append(kept[i])
            i += 1
        notes.change("messages moved after tool results", moved)
        ordered.extend(between)
    return ordered


def openai_tool_out(tool: Any) -> dict[str, Any] | None:
    """A tool definition in the chat-completions shape, else None.

    Chat-completions tools pass through; Responses-shape function tools and Anthropic tools
    (`input_schema`) become `{"type": "function", "function": {...}}`; free-text `custom` tools
    become chat-completions custom tools. Nameless built-ins and Anthropic server tools (typed,
    without a schema) have no chat-completions form.
    """
    if not isinstance(tool, dict):
        return None
    kind = tool.get("type")
    if kind == "function" and isinstance(tool.get("function"), dict):
        return tool
    if kind == "custom" and isinstance(tool.get("custom"), dict):
        return tool
    name = tool.get("name")
    if not isinstance(name, str):
        return None
    if kind == "custom":
        custom = {k: tool[k] for k in ("name", "description", "format") if k in tool}
        return {"type": "custom", "custom": custom}
    schema = tool.get("parameters") if kind == "function" else tool.get("input_schema")
    if kind not in ("function", None) and schema is None:
        return None  # an Anthropic server tool such as web_search_20250305
    fn: dict[str, Any] = {"name": name}
    if isinstance(tool.get("description"), str):
        fn["description"] = tool["description"]
    fn["parameters"] = schema if isinstance(schema, dict) else {"type": "object"}
    return {"type": "function", "function": fn}


def _tools_out(ctx: AgentContext, notes: ExportNotes) -> list[dict[str, Any]]:
    tools = ctx.metadata.get("tools")
    if not isinstance(tools, list):
        return []
    converted = [t for t in (openai_tool_out(x) for x in tools) if t is not None]
    notes.drop("tool definitions with no chat-completions form", len(tools) - len(converted))
    return converted


def to_openai_request(
    ctx: AgentContext, options: WriterOptions | None = None, notes: ExportNotes | None = None
) -> dict[str, Any]:
    """The context as a chat-completions request body `{"messages", "tools"?}`, with `model` and
    `max_completion_tokens` first when a request's `options` give them."""
    notes = notes if notes is not None else ExportNotes()
    body: dict[str, Any] = {"messages": to_openai_messages(ctx, options, notes)}
    tools = _tools_out(ctx, notes)
    if tools:
        body["tools"] = tools
    return request_settings(body, ctx, options or WriterOptions(), "max_completion_tokens")


def _body_text(body: dict[str, Any]) -> str:
    """One context: its messages array (one message per line), or, when it has tools or a
    model, the body `{"model"?, ..., "messages": [...], "tools"?: [...]}`."""
    if list(body) == ["messages"]:
        return json_array_text(body["messages"])
    return body_text(body)


__all__ = [
    "OpenAIChatFormat",
    "data_url",
    "openai_tool_out",
    "to_openai_messages",
    "to_openai_request",
]
