"""Anthropic Messages API request or saved messages array.

Upstream: the Messages API reference (request body, content blocks, tool use) and
anthropics/anthropic-sdk-python `src/anthropic/types/` (`MessageParam`, `MessageCreateParams` and
the block params); Cline's saved `api_conversation_history.json` arrays for the `ts` key.

Accepted shapes (JSON): a request body `{"model"?, "system"?: str | [text blocks], "messages":
[...], "tools"?}`; a bare messages array as Cline and others save it (messages may carry `ts`,
`id`, `model`, `usage`); a list of request bodies (one conversation each). JSONL: one body per line
(one conversation per line) or one message per line. A file is recognised by what only this API has:
a top-level `system` or `anthropic_version` (Bedrock / Vertex bodies), or content blocks
`tool_use` / `tool_result` / `thinking` / `redacted_thinking` / `document` / server-tool blocks /
images with a `source`. An array whose messages hold only strings or text blocks is ambiguous and
read by `openai-chat`.

Reading:
- `system` (text blocks joined with newlines) -> `system_instruction`; without one, a leading
  `role: system` message (the SDK accepts them in `messages`) takes its place;
- the `tool_result` blocks of a user message -> one tool message (content string or text/image
  blocks, `is_error` kept), followed, when the user message also holds text or images, by a user
  message with those;
- `thinking` -> ThinkingBlock(thinking, signature); `redacted_thinking` ->
  ThinkingBlock(thinking="", signature=<the encrypted data>, redacted=True);
- `tool_use` -> ToolCallBlock; `document` blocks with a text source -> their text; server-tool
  blocks (`server_tool_use` with its result inside the same assistant message) and any other block
  -> their JSON as text, so nothing the model saw is dropped and no call is left unpaired.
User messages: the text and image blocks of a `role: user` message are the human's words (the
tool results it carries are a tool message of their own; text sent next to them, such as a user's
note after a tool result, stays the human's too), so a user message is not marked; a result moved
to user text by pairing repair is marked `metadata["origin"] = "tool-output"`. Nothing is skipped.
Pairing is repaired as in `openai-chat` (`_chat.repair_chat_pairing`; synthesized results / calls,
counted in metadata).

Writing (`dump`): one context -> a request body `{"system": ..., "messages": [...], "tools"?}`;
several -> JSONL, one body per line. Tool messages become user messages of `tool_result` blocks
(consecutive tool messages, and the user message right after them, share one user message, results
first); marker blocks become text (`marker_text`); thinking keeps its signature; tools kept in
`metadata["tools"]` are written in the Anthropic shape (OpenAI function tools converted).

What a written request cannot carry: unsigned thinking (the API requires a signature, so it is
dropped), thinking of a message whose recorded model (message or context `metadata["model"]`) is
known and not Claude (Gemini / OpenAI signatures would be refused; dropped too), a
`ToolCallBlock.input` that is not an object (written as `{"input": value}`), mid-conversation
system messages (written as user messages), `Message.name`, empty text blocks and messages left
empty, message and context metadata other than tools, `recovery`, `activated_skills`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..context import (
    MARKER_TYPES,
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
from ._chat import (
    Conversation,
    anthropic_block,
    anthropic_document_text,
    anthropic_image,
    anthropic_marks,
    block_as_text,
    body_text,
    chat_context,
    conversations_of,
    has_foreign_keys,
    message_metadata,
    openai_marks,
    read_conversations,
)
from ._pairing import Turn, freeze_all
from ._util import as_text, image_from_url, text_of
from .base import Document, Format
from .export import (
    PLACEHOLDER_USER_TEXT,
    ExportNotes,
    ProviderWriter,
    WriterOptions,
    prepare,
    request_settings,
)
from .provider_rules import ANTHROPIC_ID

_ROLES = ("user", "assistant", "system")
_FREE_TEXT_SCHEMA = {
    "type": "object",
    "properties": {"input": {"type": "string"}},
    "required": ["input"],
}
"""The input schema of an OpenAI free-text `custom` tool written as an Anthropic tool."""


class AnthropicMessagesFormat(ProviderWriter, Format):
    name = "anthropic-messages"
    description = "Anthropic Messages API request or saved messages array"
    extension = ".json"
    priority = 0
    can_write = True
    request_needs = ("model", "max_tokens")

    def serves(self, model: str) -> bool:
        return not foreign_model(model)

    def sniff(self, doc: Document) -> bool:
        try:
            convs = conversations_of(doc)
            return bool(convs) and _is_anthropic(convs or [])
        except Exception:
            return False

    def load(self, doc: Document) -> list[AgentContext]:
        convs = conversations_of(doc)
        if convs is None or not all(_anthropic_shaped(m) for msgs, _ in convs for m in msgs):
            raise BadInputError(
                "not Anthropic messages (no array of {role: user|assistant, content} found)",
                path=doc.path,
            )
        return read_conversations(doc, convs, AnthropicMessagesContextBuilder)

    def request_body(
        self, ctx: AgentContext, options: WriterOptions | None, notes: ExportNotes
    ) -> dict[str, Any]:
        return to_anthropic_request(ctx, options, notes)

    def body_text(self, body: dict[str, Any]) -> str:
        return body_text(body)


# --------------------------------------------------------------------------- messages -> turns


class AnthropicMessagesContextBuilder:
    """Builds the `AgentContext` of one Anthropic Messages array: `add` each message in order,
    then `context(index)`. Public: the gateway reads a request's messages with it, as the
    `anthropic-messages` format reads a file's."""

    def __init__(self, container: dict[str, Any]) -> None:
        self.container = container  # the request body holding the messages, or {}
        self.turns: list[Turn] = []
        raw_system = container.get("system")
        self.system = text_of(raw_system) if isinstance(raw_system, (str, list)) else None
        # without a top-level system, a leading `role: system` message stands in for it
        self.leading_system = not isinstance(raw_system, (str, list))

    def add(self, raw: Any) -> None:
        """One saved message (a user message with results gives a tool turn, then a user turn)."""
        if not isinstance(raw, dict):
            return
        role = raw.get("role")
        if self.leading_system:
            self.leading_system = False
            if role == "system":
                self.system = text_of(raw.get("content"))
                return
        meta = message_metadata(raw)
        blocks = _content_blocks(raw.get("content"))
        if role in ("assistant", "system"):
            self.turns.append(Turn(role, [anthropic_block(b) for b in blocks], meta))
            return
        results: list[Block] = [
            ToolResultBlock(
                tool_call_id=as_text(b.get("tool_use_id")),
                content=_result_parts(b.get("content")),
                is_error=b.get("is_error") is True,
            )
            for b in blocks
            if b.get("type") == "tool_result"
        ]
        others = [anthropic_block(b) for b in blocks if b.get("type") != "tool_result"]
        if results:
            self.turns.append(Turn("tool", results, meta))
        if others or not results:
            self.turns.append(Turn("user", others, {} if results else meta))

    def context(self, index: int | None) -> AgentContext:
        """The conversation (with its body's system and tools) as a context."""
        turns = freeze_all(self.turns)
        return chat_context(AnthropicMessagesFormat.name, self.system, turns, self.container, index)


# --------------------------------------------------------------------------- reading


def _anthropic_shaped(m: Any) -> bool:
    if not isinstance(m, dict) or m.get("role") not in _ROLES:
        return False
    content = m.get("content")
    if isinstance(content, str):
        return True
    return isinstance(content, list) and all(
        isinstance(b, dict) and isinstance(b.get("type"), str) for b in content
    )


def _is_anthropic(convs: Sequence[Conversation]) -> bool:
    if has_foreign_keys(convs):
        return False
    if not all(_anthropic_shaped(m) for msgs, _ in convs for m in msgs):
        return False
    return anthropic_marks(convs) and not openai_marks(convs)


def _content_blocks(content: Any) -> list[dict[str, Any]]:
    if content is None:
        return []
    if isinstance(content, str):
        return [{"type": "text", "text": content}] if content else []
    if isinstance(content, dict):
        return [content]
    if isinstance(content, list):
        return [b if isinstance(b, dict) else {"type": "text", "text": as_text(b)} for b in content]
    return [{"type": "text", "text": as_text(content)}]


def _result_parts(content: Any) -> tuple[ContentPart, ...]:
    parts: list[ContentPart] = []
    for block in _content_blocks(content):
        kind = block.get("type")
        if kind == "text":
            parts.append(TextBlock(text=as_text(block.get("text"))))
        elif kind == "image":
            parts.append(anthropic_image(block))
        elif kind == "document":
            parts.append(TextBlock(text=anthropic_document_text(block)))
        else:
            parts.append(TextBlock(text=as_text(block)))
    return tuple(parts)


# --------------------------------------------------------------------------- writing


def _image_out(image: ImageBlock) -> dict[str, Any]:
    if image.data is None and image.url is not None and image.url.startswith("data:"):
        image = image_from_url(image.url)
    if image.data is not None:
        source: dict[str, Any] = {
            "type": "base64",
            "media_type": image.media_type or "image/png",
            "data": image.data,
        }
    else:
        source = {"type": "url", "url": image.url or ""}
    return {"type": "image", "source": source}


def _text_out(block: Block, notes: ExportNotes) -> dict[str, Any] | None:
    if block.type in MARKER_TYPES:
        notes.drop("markers written as text")
    text = block_as_text(block)
    return {"type": "text", "text": text} if text else None


def _result_out(result: ToolResultBlock, notes: ExportNotes) -> dict[str, Any]:
    out: dict[str, Any] = {"type": "tool_result", "tool_use_id": result.tool_call_id}
    parts: list[dict[str, Any]] = []
    for part in result.content:
        item = _image_out(part) if isinstance(part, ImageBlock) else _text_out(part, notes)
        if item is not None:
            parts.append(item)
    if len(parts) == 1 and parts[0]["type"] == "text":
        out["content"] = parts[0]["text"]
    elif parts:
        out["content"] = parts
    if result.is_error:
        out["is_error"] = True
    return out


def foreign_model(model: Any) -> bool:
    """True for a known model that is not Claude: its thinking signatures mean nothing here."""
    if not isinstance(model, str) or not model:
        return False
    name = model.lower()
    return "claude" not in name and "anthropic" not in name


def _assistant_block(block: Block, foreign: bool, notes: ExportNotes) -> dict[str, Any] | None:
    if isinstance(block, ThinkingBlock):
        if block.signature is None or foreign:
            # the API refuses thinking without a (valid, Anthropic) signature
            notes.drop(
                "unsigned thinking blocks" if block.signature is None else "foreign thinking blocks"
            )
            return None
        if block.redacted:
            return {"type": "redacted_thinking", "data": block.signature}
        return {"type": "thinking", "thinking": block.thinking, "signature": block.signature}
    if isinstance(block, ToolCallBlock):
        if not isinstance(block.input, dict):
            notes.change("non-object tool inputs wrapped")
        value = block.input if isinstance(block.input, dict) else {"input": block.input}
        return {"type": "tool_use", "id": block.id, "name": block.name, "input": value}
    if isinstance(block, ImageBlock):
        return _image_out(block)
    return _text_out(block, notes)


def _user_block(block: Block, notes: ExportNotes) -> dict[str, Any] | None:
    if isinstance(block, ImageBlock):
        return _image_out(block)
    return _text_out(block, notes)


def tool_out(tool: Any) -> dict[str, Any] | None:
    """A tool definition in the Anthropic shape, else None.

    Anthropic tools (`input_schema`, or a typed server tool such as `web_search_20250305`) pass
    through; OpenAI function tools (chat-completions or Responses shape) are converted; OpenAI
    free-text `custom` tools get a schema with one string `input`, matching how a non-object tool
    input is written (`{"input": value}`). Anything else (nameless built-ins) is left out.
    """
    if not isinstance(tool, dict):
        return None
    kind = tool.get("type")
    fn = tool.get("function")
    if kind == "function" and isinstance(fn, dict):
        tool = fn  # chat-completions shape
    elif kind not in ("function", "custom"):
        anthropic = "input_schema" in tool or isinstance(kind, str)
        return tool if anthropic and isinstance(tool.get("name"), str) else None
    if not isinstance(tool.get("name"), str):
        return None
    out: dict[str, Any] = {"name": tool["name"]}
    if isinstance(tool.get("description"), str):
        out["description"] = tool["description"]
    schema = tool.get("parameters")
    if kind == "custom":
        schema = _FREE_TEXT_SCHEMA
    out["input_schema"] = schema if isinstance(schema, dict) else {"type": "object"}
    return out


def _tools_out(ctx: AgentContext, notes: ExportNotes) -> list[dict[str, Any]]:
    tools = ctx.metadata.get("tools")
    if not isinstance(tools, list):
        return []
    converted = [t for t in (tool_out(x) for x in tools) if t is not None]
    notes.drop("tool definitions with no Anthropic form", len(tools) - len(converted))
    return converted


def to_anthropic_request(
    ctx: AgentContext, options: WriterOptions | None = None, notes: ExportNotes | None = None
) -> dict[str, Any]:
    """The context as a Messages API request body `{"system"?, "messages", "tools"?}`.

    `options` (default: a saved session) choose a request to send, with its `model` and
    `max_tokens` first when they give them, and what happens to a pending call
    (`export.WriterOptions`); what is dropped or changed is counted in `notes`.
    """
    options = options or WriterOptions()
    notes = notes if notes is not None else ExportNotes()
    ctx = prepare(ctx, options, notes, lambda cid: bool(ANTHROPIC_ID.match(cid)))
    body: dict[str, Any] = {}
    system = ctx.system_instruction
    messages = list(ctx.messages)
    if system is None and messages and messages[0].role == "system":
        system = messages.pop(0).text
    if system:
        body["system"] = system
    out: list[dict[str, Any]] = []
    # True while the last written message is a user message holding only tool results: the
    # next results, and the user text right after them, join it (results first, as required).
    joinable = False
    for msg in messages:
        if msg.name is not None:
            notes.drop("message names")
        if msg.role == "assistant":
            foreign = foreign_model(msg.metadata.get("model") or ctx.metadata.get("model"))
            written = (_assistant_block(x, foreign, notes) for x in msg.content)
            blocks = [b for b in written if b is not None]
            if blocks:
                out.append({"role": "assistant", "content": blocks})
                joinable = False
            continue
        if msg.role == "system":
            notes.change("system messages written as user text")
        results = [_result_out(r, notes) for r in msg.tool_results]
        others = [
            b
            for b in (
                _user_block(x, notes) for x in msg.content if not isinstance(x, ToolResultBlock)
            )
            if b is not None
        ]
        if not results and not others:
            continue
        if joinable:
            out[-1]["content"].extend(results + others)
        else:
            out.append({"role": "user", "content": results + others})
        joinable = (joinable or bool(results)) and not others
    tools = _tools_out(ctx, notes)
    if options.request:
        out = _request_messages(out, notes)
        tools = _request_tools(out, tools, notes)
    body["messages"] = out
    if tools:
        body["tools"] = tools
    return request_settings(body, ctx, options, "max_tokens")


def _request_messages(out: list[dict[str, Any]], notes: ExportNotes) -> list[dict[str, Any]]:
    """Written messages as the API takes them: no blank text blocks, a first user turn, roles
    alternating (consecutive turns of one role merged, tool results first in a user turn), and
    no whitespace at the end of a final assistant turn."""
    merged: list[dict[str, Any]] = []
    for m in out:
        blocks = [b for b in m["content"] if not _blank(b)]
        notes.drop("blank text blocks", len(m["content"]) - len(blocks))
        if not blocks:
            continue
        if not merged and m["role"] != "user":
            merged.append(
                {"role": "user", "content": [{"type": "text", "text": PLACEHOLDER_USER_TEXT}]}
            )
            notes.change("placeholder first user turns added")
        if merged and merged[-1]["role"] == m["role"]:
            merged[-1]["content"].extend(blocks)
            notes.change("consecutive turns merged")
        else:
            merged.append({"role": m["role"], "content": blocks})
    for m in merged:
        if m["role"] == "user":  # results first, as the API requires (stable otherwise)
            m["content"].sort(key=lambda b: b.get("type") != "tool_result")
    if not merged:
        merged.append(
            {"role": "user", "content": [{"type": "text", "text": PLACEHOLDER_USER_TEXT}]}
        )
        notes.change("placeholder first user turns added")
    last = merged[-1]
    if last["role"] == "assistant" and last["content"][-1].get("type") == "text":
        tail = last["content"][-1]
        if tail["text"] != tail["text"].rstrip():
            last["content"][-1] = {**tail, "text": tail["text"].rstrip()}
            notes.change("final turns stripped of trailing whitespace")
    return merged


def _blank(block: dict[str, Any]) -> bool:
    return block.get("type") == "text" and not block.get("text", "").strip()


def _request_tools(
    out: list[dict[str, Any]], tools: list[dict[str, Any]], notes: ExportNotes
) -> list[dict[str, Any]]:
    """`tools`, plus a minimal definition (`{"type": "object"}` input) for each tool the
    messages call that none defines: the API refuses tool_use blocks in a request without tools."""
    defined = {t.get("name") for t in tools}
    called = [
        b["name"]
        for m in out
        for b in m["content"]
        if b.get("type") == "tool_use" and b["name"] not in defined
    ]
    results = any(b.get("type") == "tool_result" for m in out for b in m["content"])
    if results and not called and not tools:
        called = ["unknown_tool"]
    added = [{"name": name, "input_schema": {"type": "object"}} for name in dict.fromkeys(called)]
    notes.change("tool definitions synthesized from calls", len(added))
    return tools + added


__all__ = ["AnthropicMessagesFormat", "foreign_model", "to_anthropic_request", "tool_out"]
