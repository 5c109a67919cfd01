"""pydantic-ai: `ModelMessage`s to and from `AgentContext`, and a history processor that compacts
an agent's history before every model request with any compactkit pipeline
(`pip install 'compactkit[pydantic-ai]'`).

```python
from pydantic_ai import Agent
from compactkit.integrations.pydantic_ai import CompactionProcessor

agent = Agent(model, history_processors=[CompactionProcessor(trigger=60_000, target=30_000)])
```

How messages map:

- a `ModelRequest` gives one compactkit message per run of its parts: `SystemPromptPart` ->
  `system` (the first part of the history is the `system_instruction`), `UserPromptPart` ->
  `user` (text, `TextContent`, images, audio, documents and video as URLs or binary data -> text
  and image blocks), tool returns (`ToolReturnPart` and its kinds, a `RetryPromptPart` naming a
  tool) -> one `tool` message (a failed outcome or a retry is `is_error`), a `RetryPromptPart`
  without a tool, `RetryFeedbackPart` and a `CompactionPart` -> `user` text as the model reads
  it; a `ModelResponse` is one `assistant` message (`TextPart`, `ThinkingPart` with its
  signature, `ToolCallPart` -> `ToolCallBlock`, `FilePart` -> an image block, provider-run
  tools and their returns -> text);
- everything blocks do not say (timestamps, ids, usage, provider details, the parts the model
  never reads, such as instruction and tool-availability deltas) is recorded in the message
  metadata under `"pydantic_ai"`, and the item is written back exactly as long as the blocks
  still say the same (a compaction that rewrote a message is not undone);
- a compactkit message pydantic-ai cannot say as it is (a marker, message metadata of another
  format) is written as what the model reads, with the messages themselves in the
  `ModelRequest.metadata` / `ModelResponse.provider_details` under `"compactkit"` (neither is
  sent to a model), read back only while the item still says the same.
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from pydantic_ai import messages as pm
from typing_extensions import Unpack

from .. import ThinkingBlock, ToolCallBlock, ToolResultBlock
from ..context import ORIGIN_KEY, AgentContext, Block, ImageBlock, Message, TextBlock
from ..events import Observer
from ..session import PipelineArg
from ._bridge import (
    LiveBridge,
    SessionOptions,
    live_session,
    only_text,
    read_all,
    record,
    restored,
    shown,
    shown_text,
    sorted_json,
    write_all,
)

PYDANTIC_AI_KEY = "pydantic_ai"
"""Message metadata: what the pydantic-ai item a message came from held beyond its blocks."""
SYSTEM_KEY = "pydantic_ai_system"
"""Context metadata: the metadata of the system prompt part that is the `system_instruction`."""
STASH_KEY = "compactkit"
"""`ModelRequest.metadata` / `ModelResponse.provider_details` key holding compactkit messages
pydantic-ai cannot say as they are."""

_LOWERED = "pydantic_ai_system_instruction"  # a system message that is a context's instruction
_ADAPTER = pm.ModelMessagesTypeAdapter


# --------------------------------------------------------------------------- reading


def from_pydantic_ai(
    messages: Sequence[pm.ModelMessage], base: AgentContext | None = None
) -> AgentContext:
    """The context of a pydantic-ai message history; other context fields (skills, metadata,
    recovery) come from `base`."""
    ctx = read_all(_CODEC, messages)
    if base is None:
        return ctx
    metadata = {**base.metadata, **ctx.metadata}
    system = ctx.system_instruction
    return base.replace(
        system_instruction=system if system is not None else base.system_instruction,
        messages=ctx.messages,
        metadata=metadata,
    )


def to_pydantic_ai(ctx: AgentContext) -> list[pm.ModelMessage]:
    """The pydantic-ai message history for `ctx` (the system instruction first, as a
    `SystemPromptPart`)."""
    return write_all(_CODEC, ctx)


def _dump(item: pm.ModelMessage) -> dict[str, Any]:
    out: dict[str, Any] = _ADAPTER.dump_python([item], mode="json")[0]
    return out


def _load(data: dict[str, Any]) -> pm.ModelMessage:
    return _ADAPTER.validate_python([data])[0]


def _kind(part: Any) -> str:
    """Which compactkit message a request part goes to."""
    if isinstance(part, pm.SystemPromptPart):
        return "system"
    if isinstance(part, pm.BaseToolReturnPart):
        return "tool"
    if isinstance(part, pm.RetryPromptPart):  # deprecated, still in histories
        return "tool" if part.tool_name is not None else "harness"
    if isinstance(part, pm.RetryFeedbackPart):
        return "harness"
    if isinstance(part, pm.CompactionPart):
        return "summary"
    return "user"


def _request_blocks(part: Any) -> list[Block]:
    if isinstance(part, pm.SystemPromptPart):
        return [TextBlock(text=part.content)]
    if isinstance(part, pm.UserPromptPart):
        if isinstance(part.content, str):
            return [TextBlock(text=part.content)] if part.content else []
        return [b for item in part.content for b in _user_content(item)]
    if isinstance(part, pm.BaseToolReturnPart):
        failed = part.outcome != "success"
        text = part.model_response_str()
        return [
            ToolResultBlock(
                tool_call_id=part.tool_call_id,
                content=(TextBlock(text=text),) if text else (),
                is_error=failed,
            )
        ]
    if isinstance(part, pm.RetryPromptPart):  # deprecated, still read
        text = part.model_response()
        if part.tool_name is not None:
            return [
                ToolResultBlock(
                    tool_call_id=part.tool_call_id,
                    content=(TextBlock(text=text),),
                    is_error=True,
                )
            ]
        return [TextBlock(text=text)]
    if isinstance(part, pm.RetryFeedbackPart):
        return [TextBlock(text=part.model_response())]
    if isinstance(part, pm.CompactionPart):
        return [TextBlock(text=part.content)] if part.content else []
    return []  # parts a model never reads as content (instruction, tool, settings deltas)


def _user_content(item: Any) -> list[Block]:
    if isinstance(item, str):
        return [TextBlock(text=item)]
    if isinstance(item, pm.TextContent):
        return [TextBlock(text=item.content)]
    if isinstance(item, pm.BinaryContent):
        return [ImageBlock(media_type=item.media_type, data=base64.b64encode(item.data).decode())]
    if isinstance(item, pm.FileUrl):
        return [ImageBlock(url=item.url)]
    if isinstance(item, pm.CachePoint):
        return []
    return [TextBlock(text=sorted_json(_json(item)))]


def _response_blocks(part: Any) -> list[Block]:
    if isinstance(part, pm.TextPart):
        return [TextBlock(text=part.content)]
    if isinstance(part, pm.ThinkingPart):
        return [ThinkingBlock(thinking=part.content, signature=part.signature)]
    if isinstance(part, pm.BaseToolCallPart) and not isinstance(part, pm.NativeToolCallPart):
        try:
            args: Any = part.args_as_dict(raise_if_invalid=True)
        except (ValueError, AssertionError):
            args = part.args if isinstance(part.args, str) else {}
        return [ToolCallBlock(id=part.tool_call_id, name=part.tool_name, input=_json(args))]
    if isinstance(part, pm.NativeToolCallPart):
        return [TextBlock(text=f"{part.tool_name}({sorted_json(_json(part.args))})")]
    if isinstance(part, pm.NativeToolReturnPart):
        return [TextBlock(text=part.model_response_str())]
    if isinstance(part, pm.FilePart):
        content = part.content
        return [
            ImageBlock(media_type=content.media_type, data=base64.b64encode(content.data).decode())
        ]
    if isinstance(part, pm.CompactionPart):
        return [TextBlock(text=part.content)] if part.content else []
    return []


class _PydanticAICodec:
    def read(
        self, items: Sequence[pm.ModelMessage]
    ) -> list[tuple[list[pm.ModelMessage], list[Message]]]:
        return [([item], self.read_one(item)) for item in items]

    def read_one(self, item: pm.ModelMessage) -> list[Message]:
        stashed = _stashed(item)
        if stashed is not None:
            return stashed
        dump = _dump(item)
        skeleton = {k: v for k, v in dump.items() if k != "parts"}
        if isinstance(item, pm.ModelResponse):
            blocks = [b for part in item.parts for b in _response_blocks(part)]
            meta = record({"message": skeleton, "messages": 1, "parts": dump["parts"]}, blocks)
            return [
                Message(role="assistant", content=tuple(blocks), metadata={PYDANTIC_AI_KEY: meta})
            ]
        runs: list[tuple[str, list[Any], list[Any]]] = []  # kind, parts, part dumps
        for part, part_dump in zip(item.parts, dump["parts"], strict=True):
            kind = _kind(part)
            if runs and runs[-1][0] == kind and kind != "system":
                runs[-1][1].append(part)
                runs[-1][2].append(part_dump)
            else:
                runs.append((kind, [part], [part_dump]))
        if not runs:
            runs.append(("user", [], []))
        out: list[Message] = []
        for n, (kind, parts, dumps) in enumerate(runs):
            blocks = [b for part in parts for b in _request_blocks(part)]
            native: dict[str, Any] = {"parts": dumps}
            if n == 0:
                native["message"] = skeleton
                native["messages"] = len(runs)
            metadata: dict[str, Any] = {PYDANTIC_AI_KEY: record(native, blocks)}
            if kind in ("harness", "summary"):  # not the human's words
                metadata[ORIGIN_KEY] = kind
            role = "user" if kind in ("harness", "summary") else kind
            out.append(Message(role=role, content=tuple(blocks), metadata=metadata))
        return out

    def group(self, messages: Sequence[Message], start: int) -> int:
        if messages[start].role == "assistant":
            return 1
        n = 1
        while start + n < len(messages):
            nxt = messages[start + n]
            if nxt.role == "assistant" or _native(nxt, "message") is not None:
                break
            n += 1
        return n

    def write(self, group: Sequence[Message], names: Mapping[str, str]) -> list[pm.ModelMessage]:
        item = self._plain(group, names)
        if self.read_one(item) != [_unlowered(m) for m in group]:
            item = _stash(item, group)
        return [item]

    def _plain(self, group: Sequence[Message], names: Mapping[str, str]) -> pm.ModelMessage:
        recs = [restored(m.metadata.get(PYDANTIC_AI_KEY), m.content) for m in group]
        first = recs[0] if isinstance(recs[0], dict) else None
        skeleton = first.get("message") if first else None
        exact = (
            isinstance(skeleton, dict)
            and first is not None
            and first.get("messages") == len(group)
            and all(isinstance(r, dict) for r in recs)
        )
        if exact:
            assert isinstance(skeleton, dict)
            parts = [p for r in recs if isinstance(r, dict) for p in r["parts"]]
            try:
                return _load({**skeleton, "parts": parts})
            except ValueError:
                pass  # a record pydantic-ai no longer reads: written from the blocks
        if group[0].role == "assistant":
            return pm.ModelResponse(parts=_response_parts(group[0]))
        request_parts: list[Any] = []
        for m, rec in zip(group, recs, strict=True):
            if isinstance(rec, dict):
                try:
                    request_parts.extend(_load({"kind": "request", "parts": rec["parts"]}).parts)
                    continue
                except ValueError:
                    pass
            request_parts.extend(_request_parts(m, names))
        return pm.ModelRequest(parts=request_parts)

    def context(self, messages: list[Message]) -> AgentContext:
        if messages and messages[0].role == "system" and _lifts(messages[0]):
            first = messages[0]
            metadata = {k: v for k, v in first.metadata.items() if k != _LOWERED}
            return AgentContext(
                system_instruction=first.text,
                messages=tuple(messages[1:]),
                metadata={SYSTEM_KEY: metadata} if metadata else {},
            )
        return AgentContext(messages=tuple(messages))

    def messages(self, ctx: AgentContext) -> list[Message]:
        if ctx.system_instruction is None:
            return list(ctx.messages)
        return [
            _system_message(ctx.system_instruction, ctx.metadata.get(SYSTEM_KEY)),
            *ctx.messages,
        ]


_SYSTEM_MEMO: dict[str, Message] = {}


def _system_message(text: str, metadata: Any) -> Message:
    """The system instruction as the leading system message (the same object while it is the
    same, so a live history keeps its first request)."""
    meta = dict(metadata) if isinstance(metadata, dict) else {}
    meta[_LOWERED] = True
    key = sorted_json([text, meta])
    msg = _SYSTEM_MEMO.get(key)
    if msg is None:
        if len(_SYSTEM_MEMO) > 64:
            _SYSTEM_MEMO.clear()
        msg = _SYSTEM_MEMO[key] = Message(
            role="system", content=(TextBlock(text=text),), metadata=meta
        )
    return msg


def _unlowered(msg: Message) -> Message:
    metadata = dict(msg.metadata)
    if metadata.pop(_LOWERED, None) is None:
        return msg
    return Message(role=msg.role, content=msg.content, name=msg.name, metadata=metadata)


def _lifts(msg: Message) -> bool:
    if msg.metadata.get(_LOWERED) is True:
        return True
    return (
        _native(msg, "message") is not None
        and len(msg.content) == 1
        and isinstance(msg.content[0], TextBlock)
    )


def _native(msg: Message, key: str) -> Any:
    rec = msg.metadata.get(PYDANTIC_AI_KEY)
    native = rec.get("native") if isinstance(rec, dict) else None
    return native.get(key) if isinstance(native, dict) else None


_CODEC = _PydanticAICodec()


# --------------------------------------------------------------------------- writing


def _request_parts(msg: Message, names: Mapping[str, str]) -> list[Any]:
    if msg.role == "system":
        return [pm.SystemPromptPart(content=shown_text(msg.content))]
    parts: list[Any] = []
    rest: list[Block] = []
    for block in msg.content:
        if isinstance(block, ToolResultBlock):
            parts.append(
                pm.ToolReturnPart(
                    tool_name=names.get(block.tool_call_id, ""),
                    content=shown_text(block.content),
                    tool_call_id=block.tool_call_id,
                    outcome="failed" if block.is_error else "success",
                )
            )
        else:
            rest.append(block)
    if rest or not parts:
        parts.append(pm.UserPromptPart(content=_user_prompt(rest)))
    return parts


def _user_prompt(blocks: Sequence[Block]) -> str | list[Any]:
    text = only_text(blocks)
    if text is not None:
        return text
    out: list[Any] = []
    for block in blocks:
        if isinstance(block, ImageBlock) and block.data is not None:
            media = _binary(block)
            out.append(media if media is not None else shown(block))
        elif isinstance(block, ImageBlock) and block.url is not None:
            out.append(pm.ImageUrl(url=block.url))
        elif isinstance(block, TextBlock):
            out.append(block.text)
        else:
            out.append(shown(block))
    return out if out else ""


def _response_parts(msg: Message) -> list[Any]:
    parts: list[Any] = []
    for block in msg.content:
        if isinstance(block, TextBlock):
            parts.append(pm.TextPart(content=block.text))
        elif isinstance(block, ThinkingBlock):
            parts.append(pm.ThinkingPart(content=block.thinking, signature=block.signature))
        elif isinstance(block, ToolCallBlock):
            args = block.input if isinstance(block.input, (dict, str)) else json.dumps(block.input)
            parts.append(pm.ToolCallPart(tool_name=block.name, args=args, tool_call_id=block.id))
        elif isinstance(block, ImageBlock) and _binary(block) is not None:
            media = _binary(block)
            assert media is not None
            parts.append(pm.FilePart(content=media))
        else:
            parts.append(pm.TextPart(content=shown(block)))
    return parts


def _binary(block: ImageBlock) -> pm.BinaryContent | None:
    try:
        data = base64.b64decode(block.data or "", validate=True)
    except (binascii.Error, ValueError):
        return None
    content = pm.BinaryContent(data=data, media_type=block.media_type or "application/octet-stream")
    return content


def _json(value: Any) -> Any:
    """`value` as plain JSON."""
    from pydantic_core import to_jsonable_python

    return json.loads(json.dumps(to_jsonable_python(value)))


# --------------------------------------------------------------------------- the stash


def _stash(item: pm.ModelMessage, group: Sequence[Message]) -> pm.ModelMessage:
    data = {STASH_KEY: [m.model_dump(mode="json") for m in group]}
    if isinstance(item, pm.ModelRequest):
        item.metadata = {**(item.metadata or {}), **data}
    else:
        item.provider_details = {**(item.provider_details or {}), **data}
    return item


def _stashed(item: pm.ModelMessage) -> list[Message] | None:
    holder = item.metadata if isinstance(item, pm.ModelRequest) else item.provider_details
    if not isinstance(holder, dict) or not isinstance(holder.get(STASH_KEY), list):
        return None
    try:
        group = [Message.model_validate(m) for m in holder[STASH_KEY]]
    except ValueError:
        return None
    if not group:
        return None
    plain = _CODEC._plain(group, _names_in(group, item))
    if _says_the_same(plain, item):
        return group
    return None


def _names_in(group: Sequence[Message], item: pm.ModelMessage) -> dict[str, str]:
    """The tool names the item's own returns give (what writing the group needs)."""
    return {p.tool_call_id: p.tool_name for p in item.parts if isinstance(p, pm.BaseToolReturnPart)}


def _says_the_same(a: pm.ModelMessage, b: pm.ModelMessage) -> bool:
    """Whether two items show a model the same parts (their metadata and timestamps aside)."""

    def shown(item: pm.ModelMessage) -> list[Any]:
        out = []
        for part in _dump(item)["parts"]:
            out.append({k: v for k, v in part.items() if k not in ("timestamp", "id")})
        return out

    return a.kind == b.kind and shown(a) == shown(b)


# --------------------------------------------------------------------------- the processor


class CompactionProcessor:
    """A pydantic-ai history processor: before every model request, when the agent's history is
    over `trigger` tokens, it is compacted with a compactkit pipeline down to `target`.

    The options are `compactkit.Session`'s; `session` is the `compactkit.Session` it feeds (events,
    `save(path)` for the append-only log, `compactkit.expand(processor.session.context)` for
    everything a compaction removed). Only new messages are converted and counted; items a
    compaction keeps stay the same pydantic-ai objects.
    """

    def __init__(
        self, pipeline: PipelineArg = "default", **options: Unpack[SessionOptions]
    ) -> None:
        self.session = live_session(pipeline, options)
        self._bridge: LiveBridge[pm.ModelMessage] = LiveBridge(_CODEC, self.session)

    def subscribe(self, observer: Observer) -> Callable[[], None]:
        """Receive the session's events (appends, compactions and the pipeline's own)."""
        return self.session.subscribe(observer)

    def __call__(self, messages: list[pm.ModelMessage]) -> list[pm.ModelMessage]:
        return self._bridge.view(messages)


__all__ = ["CompactionProcessor", "from_pydantic_ai", "to_pydantic_ai"]
