"""Google ADK: `google.genai` contents to and from `AgentContext`, and a `before_model_callback`
that compacts the `LlmRequest` contents before every model call
(`pip install 'compactkit[adk]'`).

```python
from google.adk.agents import LlmAgent
from compactkit.integrations.adk import CompactionCallback

agent = LlmAgent(name="coder", model="gemini-2.5-flash", tools=[read_file],
                 before_model_callback=CompactionCallback(trigger=60_000, target=30_000))
```

How contents map: a `model` content is one `assistant` message (text, thought parts ->
thinking with the thought signature, `function_call` -> `ToolCallBlock`, inline data and file
data -> image blocks, other parts -> text holding their JSON); a `user` content holding
function responses is one `tool` message (each response -> a `ToolResultBlock`, the response
object as its JSON text, or the text of a plain `{"result": text}`), any other `user` content
one `user` message. Each content is recorded in the message metadata under `"adk"` (by
reference into the blocks), and written back exactly while the blocks still say the same.
Written from blocks (a message a compaction rewrote, a context from another format): markers
become their text, a `system` message a user text, message metadata and names are not written
(contents have no place a model would not read).
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from google.genai import types
from typing_extensions import Unpack

from .. import ThinkingBlock, ToolCallBlock, ToolResultBlock
from ..context import AgentContext, Block, ImageBlock, Message, TextBlock
from ..events import Observer
from ..session import PipelineArg, Session
from . import _bridge as bridge

ADK_KEY = "adk"
"""Message metadata: the content a message was read from, by reference into its blocks."""


def from_adk_contents(
    contents: Sequence[types.Content], base: AgentContext | None = None
) -> AgentContext:
    """The context of ADK (`google.genai`) contents; other context fields come from `base`."""
    ctx = bridge.read_all(_CODEC, contents)
    return ctx if base is None else base.replace(messages=ctx.messages)


def to_adk_contents(ctx: AgentContext) -> list[types.Content]:
    """The contents for `ctx` (a system instruction first, as user text)."""
    return bridge.write_all(_CODEC, ctx)


def _blocks(content: types.Content) -> list[Block]:
    out: list[Block] = []
    for part in content.parts or []:
        if part.function_response is not None:
            fr = part.function_response
            response = fr.response or {}
            result = response.get("result")  # how ADK wraps a tool's plain return value
            plain = set(response) == {"result"} and isinstance(result, str)
            text = result if plain else bridge.sorted_json(response)
            out.append(
                ToolResultBlock(
                    tool_call_id=fr.id or fr.name or "", content=(TextBlock(text=text),)
                )
            )
        elif part.function_call is not None:
            fc = part.function_call
            call = ToolCallBlock(id=fc.id or fc.name or "", name=fc.name or "", input=fc.args or {})
            out.append(call)
        elif part.text is not None and part.thought:
            sig = part.thought_signature
            signature = base64.b64encode(sig).decode() if sig else None
            out.append(ThinkingBlock(thinking=part.text, signature=signature))
        elif part.text is not None:
            out.append(TextBlock(text=part.text))
        elif part.inline_data is not None:
            data = base64.b64encode(part.inline_data.data or b"").decode()
            out.append(ImageBlock(media_type=part.inline_data.mime_type, data=data))
        elif part.file_data is not None:
            fd = part.file_data
            out.append(ImageBlock(media_type=fd.mime_type, url=fd.file_uri))
        else:
            out.append(TextBlock(text=bridge.sorted_json(part.model_dump(exclude_none=True))))
    return out


class _AdkCodec(bridge.OneToOne):
    def read(
        self, items: Sequence[types.Content]
    ) -> list[tuple[list[types.Content], list[Message]]]:
        return [([c], [self._message(c)]) for c in items]

    def _message(self, content: types.Content) -> Message:
        blocks = _blocks(content)
        if content.role == "model":
            role = "assistant"
        else:
            role = "tool" if any(isinstance(b, ToolResultBlock) for b in blocks) else "user"
        native = content.model_dump(mode="json", exclude_none=True)
        meta = bridge.record(native, blocks)
        return Message(role=role, content=tuple(blocks), metadata={ADK_KEY: meta})

    def write(self, group: Sequence[Message], names: Mapping[str, str]) -> list[types.Content]:
        msg = group[0]
        native = bridge.restored(msg.metadata.get(ADK_KEY), msg.content)
        if isinstance(native, dict):
            try:
                return [types.Content.model_validate_json(json.dumps(native))]
            except ValueError:
                pass  # a record this google-genai no longer reads: written from the blocks
        return [_plain(msg, names)]


def _plain(msg: Message, names: Mapping[str, str]) -> types.Content:
    parts: list[types.Part] = []
    for block in msg.content:
        if isinstance(block, ToolResultBlock):
            response = {"result": bridge.shown_text(block.content)}
            if block.is_error:
                response = {"error": response["result"]}
            fr = types.FunctionResponse(
                id=block.tool_call_id,
                name=names.get(block.tool_call_id, ""),
                response=response,
            )
            parts.append(types.Part(function_response=fr))
        elif isinstance(block, ToolCallBlock):
            args = block.input if isinstance(block.input, dict) else {"input": block.input}
            fc = types.FunctionCall(id=block.id, name=block.name, args=args)
            parts.append(types.Part(function_call=fc))
        elif isinstance(block, ThinkingBlock):
            sig = _bytes(block.signature)
            parts.append(types.Part(text=block.thinking, thought=True, thought_signature=sig))
        elif isinstance(block, ImageBlock) and block.data is not None:
            blob = types.Blob(mime_type=block.media_type, data=_bytes(block.data))
            parts.append(types.Part(inline_data=blob))
        elif isinstance(block, ImageBlock) and block.url is not None:
            fd = types.FileData(file_uri=block.url, mime_type=block.media_type)
            parts.append(types.Part(file_data=fd))
        else:
            parts.append(types.Part(text=bridge.shown(block)))
    return types.Content(role="model" if msg.role == "assistant" else "user", parts=parts)


def _bytes(text: str | None) -> bytes | None:
    if not text:
        return None
    try:
        return base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError):
        return text.encode()


_CODEC = _AdkCodec()


class CompactionCallback:
    """An ADK `before_model_callback`: before every model call, the request's contents (the
    ADK session's history as the model would read it) are fed to a `compactkit.Session` per ADK
    session, compacted past the trigger down to the target, and replaced by the result; contents
    a compaction kept are the very objects ADK built, so the prefix stays the same between
    compactions. The ADK session's events keep everything; `sessions[session_id]` is the
    `compactkit.Session` of one (`compactkit.expand(...context)` gives back what was removed).

    The options are `compactkit.Session`'s (`pins` among them).
    """

    def __init__(
        self, pipeline: PipelineArg = "default", **options: Unpack[bridge.SessionOptions]
    ) -> None:
        self.pipeline = pipeline
        self.options = options
        self.sessions: dict[str, Session] = {}
        self._bridges: dict[str, bridge.LiveBridge[types.Content]] = {}
        self._observers: list[Observer] = []

    def subscribe(self, observer: Observer) -> Callable[[], None]:
        """Receive the events of every ADK session's compactkit session."""
        stops = [s.subscribe(observer) for s in self.sessions.values()]
        self._observers.append(observer)

        def stop() -> None:
            for unsubscribe in stops:
                unsubscribe()
            if observer in self._observers:
                self._observers.remove(observer)

        return stop

    def _bridge(self, key: str) -> bridge.LiveBridge[types.Content]:
        live = self._bridges.get(key)
        if live is None:
            session = self.sessions[key] = bridge.live_session(self.pipeline, self.options)
            for observer in self._observers:
                session.subscribe(observer)
            live = self._bridges[key] = bridge.LiveBridge(_CODEC, session)
        return live

    def __call__(self, callback_context: Any, llm_request: Any) -> None:
        session = getattr(callback_context, "session", None)
        key = str(getattr(session, "id", ""))
        llm_request.contents = self._bridge(key).view(list(llm_request.contents))


__all__ = ["CompactionCallback", "from_adk_contents", "to_adk_contents"]
