"""LangChain: messages to and from `AgentContext`, and an agent middleware that compacts the agent's
state before every model call with any compactkit pipeline (`pip install 'compactkit[langchain]'`).

```python
from langchain.agents import create_agent
from compactkit.integrations.langchain import CompactionMiddleware

agent = create_agent(model, tools, middleware=[CompactionMiddleware(trigger=60_000, target=30_000)])
```

How messages map (both directions lossless):

- a leading `SystemMessage` is the `system_instruction` (its id and other fields are kept in the
  context metadata under `"langchain_system"`); later ones are `system` messages;
- `HumanMessage` -> `user`, `AIMessage` -> `assistant` (`tool_calls` -> `ToolCallBlock`s; content
  parts `text`, `image`, `thinking`/`redacted_thinking`/`reasoning`, `tool_use`/`tool_call` map to
  blocks; any other part becomes text holding its JSON), `ToolMessage` -> a `tool` message with
  one `ToolResultBlock` (`status="error"` is `is_error`);
- what blocks cannot say (ids, `additional_kwargs`, `response_metadata`, `usage_metadata`,
  `invalid_tool_calls`, `artifact`, a content list that did not come out of blocks as it was) is
  kept in the message metadata under `"langchain"` and restored on the way back, as long as the
  blocks still say the same (a compaction that rewrote a message is not undone);
- a compactkit message that LangChain cannot say as it is (a marker, a tool call between texts,
  a non-object tool input, several results in one tool message, metadata) is written as what the
  model sees, with the message itself under `additional_kwargs["compactkit"]`, read back only
  while the LangChain message(s) still say the same.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from langchain.agents.middleware import AgentMiddleware, AgentState
from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    HumanMessage,
    RemoveMessage,
    SystemMessage,
    ToolMessage,
)
from langgraph.graph.message import REMOVE_ALL_MESSAGES
from typing_extensions import NotRequired

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
    canonical_json,
    render_block,
)
from ..defaults import DEFAULT_TRIGGER
from ..errors import ConfigError
from ..events import Observer
from ..formats._util import image_from, image_from_url
from ..pins import parse_rule
from ..pipeline import Pipeline
from ..registry import Registry
from ..serve.reset import served_session
from ..serve.store import ServeStore
from ..session import CompactionSetup, PipelineArg
from ..tokens import DEFAULT_TOKENIZER, TokenCounter

LANGCHAIN_KEY = "langchain"
"""Message metadata: the LangChain fields a message had that blocks do not hold."""
SYSTEM_KEY = "langchain_system"
"""Context metadata: the LangChain fields of the leading `SystemMessage`."""
STASH_KEY = "compactkit"
"""`additional_kwargs` key holding a compactkit message LangChain cannot say as it is."""
RECOVERY_STATE_KEY = "compactkit_recovery"
"""Agent state key where the middleware keeps what compaction removed (see `state_context`)."""

_ROLES = {"human": "user", "ai": "assistant", "system": "system", "tool": "tool"}
_EXTRA_FIELDS = (
    "id",
    "additional_kwargs",
    "response_metadata",
    "usage_metadata",
    "invalid_tool_calls",
    "artifact",
)


# --------------------------------------------------------------------------- LangChain -> compactkit


def from_langchain(
    messages: Sequence[BaseMessage], base: AgentContext | None = None
) -> AgentContext:
    """The context of LangChain `messages`; other context fields (skills, metadata, recovery)
    come from `base`."""
    base = base or AgentContext()
    items = list(messages)
    system: str | None = base.system_instruction
    metadata = dict(base.metadata)
    if items and _is_system_instruction(items[0]):
        first = items.pop(0)
        system = str(first.content)
        extra = _extra_fields(first)
        if extra:
            metadata[SYSTEM_KEY] = extra
    out = _Converter().messages(items)
    ctx: AgentContext = base.model_copy(
        update={"system_instruction": system, "messages": tuple(out), "metadata": metadata}
    )
    return ctx


class _Converter:
    """Converts LangChain messages one by one, remembering the compactkit message of each (by
    identity), so that a growing conversation converts only its new messages."""

    def __init__(self) -> None:
        self.cache: dict[int, tuple[BaseMessage, Message]] = {}

    def messages(self, items: Sequence[BaseMessage]) -> list[Message]:
        out: list[Message] = []
        fresh: dict[int, tuple[BaseMessage, Message]] = {}
        i = 0
        while i < len(items):
            item = items[i]
            known = self.cache.get(id(item))
            if known is not None and known[0] is item:
                out.append(known[1])
                fresh[id(item)] = known
                i += 1
                continue
            stashed, used = _stashed(items, i)
            if stashed is not None:
                out.append(stashed)
                i += used
                continue
            msg = message_from_langchain(item)
            fresh[id(item)] = (item, msg)
            out.append(msg)
            i += 1
        self.cache = fresh
        return out

    def originals(self) -> dict[int, BaseMessage]:
        """compactkit message id -> the LangChain message it was converted from."""
        return {id(msg): item for item, msg in self.cache.values()}


def message_from_langchain(item: BaseMessage) -> Message:
    """One LangChain message as a compactkit message (see the module docs)."""
    role = _ROLES.get(item.type)
    if role is None:
        raise ConfigError(f"cannot convert a LangChain {item.type!r} message")
    metadata: dict[str, Any] = {}
    extra = _extra_fields(item)
    if role == "tool":
        assert isinstance(item, ToolMessage)
        parts = tuple(_as_part(b) for b in _blocks(item.content))
        blocks: list[Block] = [
            ToolResultBlock(
                tool_call_id=item.tool_call_id, content=parts, is_error=item.status == "error"
            )
        ]
    else:
        blocks = _blocks(item.content)
        if isinstance(item, AIMessage):
            have = {b.id for b in blocks if isinstance(b, ToolCallBlock)}
            blocks.extend(
                ToolCallBlock(id=str(c["id"]), name=c["name"], input=c["args"])
                for c in item.tool_calls
                if c["id"] not in have
            )
    msg = Message(role=role, content=tuple(blocks), name=item.name, metadata=metadata)
    if _content_of(msg) != item.content:
        extra["content"] = _json(item.content)
    if extra:
        msg = msg.model_copy(update={"metadata": {LANGCHAIN_KEY: extra}})
    return msg


def _stashed(items: Sequence[BaseMessage], start: int) -> tuple[Message | None, int]:
    """The compactkit message stashed on `items[start]`, with how many LangChain messages it
    spans, while they still say what it says."""
    stash = items[start].additional_kwargs.get(STASH_KEY)
    if not isinstance(stash, dict):
        return None, 0
    try:
        msg = Message.model_validate(stash["message"])
    except Exception:
        return None, 0
    expected = _plain_to_langchain(msg)
    got = items[start : start + len(expected)]
    if len(got) == len(expected) and all(map(_says_the_same, expected, got)):
        return msg, len(expected)
    return None, 0


# --------------------------------------------------------------------------- compactkit -> LangChain


def to_langchain(ctx: AgentContext) -> list[BaseMessage]:
    """LangChain messages for `ctx` (the system instruction first, as a `SystemMessage`)."""
    out: list[BaseMessage] = []
    if ctx.system_instruction is not None:
        fields = ctx.metadata.get(SYSTEM_KEY)
        out.append(SystemMessage(content=ctx.system_instruction, **_fields(fields)))
    for msg in ctx.messages:
        out.extend(message_to_langchain(msg))
    return out


def message_to_langchain(msg: Message) -> list[BaseMessage]:
    """The LangChain message(s) for one compactkit message (a tool message gives one per
    result)."""
    items = _plain_to_langchain(msg)
    back = _Converter().messages(items)
    if back != [msg]:
        first = items[0]
        kwargs = {**first.additional_kwargs, STASH_KEY: {"message": msg.model_dump(mode="json")}}
        items[0] = first.model_copy(update={"additional_kwargs": kwargs})
    return items


def _plain_to_langchain(msg: Message) -> list[BaseMessage]:
    """`msg` as LangChain says it, its recorded LangChain fields restored; the content as it was
    recorded while it still gives the same blocks."""
    fields = _fields(msg.metadata.get(LANGCHAIN_KEY))
    raw = fields.pop("content", None)
    if raw is not None:
        items = _build(msg, fields, raw)
        if [message_from_langchain(i).content for i in items] == [msg.content]:
            return items
    return _build(msg, fields, None)


def _build(msg: Message, fields: dict[str, Any], raw: Any) -> list[BaseMessage]:
    if msg.role == "tool":
        results = [b for b in msg.content if isinstance(b, ToolResultBlock)]
        if not results:
            return [HumanMessage(content=_content(list(msg.content)))]
        mine = _only(fields, "id", "additional_kwargs", "response_metadata", "artifact")
        return [
            ToolMessage(
                content=raw if k == 0 and raw is not None else _content(list(result.content)),
                tool_call_id=result.tool_call_id,
                status="error" if result.is_error else "success",
                name=msg.name,
                **(mine if k == 0 else {}),
            )
            for k, result in enumerate(results)
        ]
    others = [b for b in msg.content if not isinstance(b, ToolCallBlock)]
    content = raw if raw is not None else _content(others)
    if msg.role == "assistant":
        tool_calls = [
            {
                "id": c.id,
                "name": c.name,
                "args": c.input if isinstance(c.input, dict) else {"input": c.input},
            }
            for c in msg.content
            if isinstance(c, ToolCallBlock)
        ]
        mine = _only(fields, *(f for f in _EXTRA_FIELDS if f != "artifact"))
        return [AIMessage(content=content, tool_calls=tool_calls, name=msg.name, **mine)]
    cls = SystemMessage if msg.role == "system" else HumanMessage
    mine = _only(fields, "id", "additional_kwargs", "response_metadata")
    return [cls(content=content, name=msg.name, **mine)]


def _only(fields: dict[str, Any], *keys: str) -> dict[str, Any]:
    return {k: fields[k] for k in keys if k in fields}


# --------------------------------------------------------------------------- content


def _blocks(content: Any) -> list[Block]:
    if isinstance(content, str):
        return [TextBlock(text=content)] if content else []
    if isinstance(content, list):
        return [_block(part) for part in content]
    return [TextBlock(text=canonical_json(content))]


def _block(part: Any) -> Block:
    if isinstance(part, str):
        return TextBlock(text=part)
    if not isinstance(part, dict):
        return TextBlock(text=canonical_json(part))
    kind = part.get("type")
    if kind == "text" and isinstance(part.get("text"), str) and set(part) <= {"type", "text"}:
        return TextBlock(text=part["text"])
    if kind == "thinking" and set(part) <= {"type", "thinking", "signature"}:
        return ThinkingBlock(
            thinking=str(part.get("thinking", "")), signature=part.get("signature")
        )
    if kind == "redacted_thinking" and set(part) <= {"type", "data"}:
        return ThinkingBlock(thinking="", signature=str(part.get("data", "")), redacted=True)
    if kind == "reasoning" and isinstance(part.get("reasoning"), str):
        return ThinkingBlock(thinking=part["reasoning"])
    if kind == "image" and set(part) <= {"type", "url", "base64", "mime_type"}:
        return ImageBlock(
            url=part.get("url"), data=part.get("base64"), media_type=part.get("mime_type")
        )
    if kind == "image_url":
        return image_from_url(part.get("image_url"))
    if kind == "image" and isinstance(part.get("source"), dict):
        return image_from(part)
    if kind in ("tool_use", "tool_call") and isinstance(part.get("id"), str):
        arguments = part.get("input", part.get("args", {}))
        return ToolCallBlock(id=part["id"], name=str(part.get("name", "")), input=_json(arguments))
    if kind == "text" and isinstance(part.get("text"), str):
        return TextBlock(text=part["text"])
    return TextBlock(text=canonical_json(part))


def _part(block: Block | ContentPart) -> Any:
    if isinstance(block, TextBlock):
        return {"type": "text", "text": block.text}
    if isinstance(block, ThinkingBlock):
        if block.redacted:
            return {"type": "redacted_thinking", "data": block.signature or ""}
        part: dict[str, Any] = {"type": "thinking", "thinking": block.thinking}
        if block.signature is not None:
            part["signature"] = block.signature
        return part
    if isinstance(block, ImageBlock):
        image: dict[str, Any] = {"type": "image"}
        for key, value in (
            ("url", block.url),
            ("base64", block.data),
            ("mime_type", block.media_type),
        ):
            if value is not None:
                image[key] = value
        return image
    if isinstance(block, ToolCallBlock):
        return {"type": "tool_use", "id": block.id, "name": block.name, "input": block.input}
    return {"type": "text", "text": "\n".join(render_block(block))}


def _content(blocks: Sequence[Block | ContentPart]) -> Any:
    if not blocks:
        return ""
    if len(blocks) == 1 and isinstance(blocks[0], TextBlock) and blocks[0].text:
        return blocks[0].text
    return [_part(b) for b in blocks]


def _content_of(msg: Message) -> Any:
    if msg.role == "tool":
        result = msg.content[0]
        assert isinstance(result, ToolResultBlock)
        return _content(list(result.content))
    return _content([b for b in msg.content if not isinstance(b, ToolCallBlock)])


def _as_part(block: Block) -> ContentPart:
    if isinstance(block, (TextBlock, ImageBlock)):
        return block
    return TextBlock(text="\n".join(render_block(block)) or canonical_json(block.model_dump()))


# --------------------------------------------------------------------------- helpers


def _is_system_instruction(item: BaseMessage) -> bool:
    return (
        isinstance(item, SystemMessage)
        and isinstance(item.content, str)
        and STASH_KEY not in item.additional_kwargs
        and item.name is None
    )


def _extra_fields(item: BaseMessage) -> dict[str, Any]:
    data = item.model_dump()
    return {k: _json(data[k]) for k in _EXTRA_FIELDS if data.get(k) not in (None, {}, [])}


def _fields(extra: Any) -> dict[str, Any]:
    return dict(extra) if isinstance(extra, dict) else {}


def _json(value: Any) -> Any:
    """`value` as plain JSON (what message metadata holds)."""
    return json.loads(json.dumps(value, default=str))


def _says_the_same(a: BaseMessage, b: BaseMessage) -> bool:
    """Whether two LangChain messages show a model the same thing."""
    keys = ("type", "content", "name", "tool_calls", "tool_call_id", "status")
    return all(getattr(a, k, None) == getattr(b, k, None) for k in keys)


# --------------------------------------------------------------------------- the middleware


class CompactionState(AgentState[Any]):
    """The agent state with what compaction removed (recoverable, never sent to the model)."""

    compactkit_recovery: NotRequired[dict[str, str]]


def state_context(state: dict[str, Any]) -> AgentContext:
    """The compactkit context of an agent state, with what compaction removed from it, so that
    `compactkit.expand(state_context(state))` gives the whole conversation back."""
    ctx = from_langchain(state["messages"])
    return ctx.replace(recovery=_recovery(state))


def _recovery(state: Any) -> dict[str, str]:
    stored = state.get(RECOVERY_STATE_KEY)
    return dict(stored) if isinstance(stored, dict) else {}


class CompactionMiddleware(AgentMiddleware[CompactionState, Any, Any]):
    """A LangChain v1 agent middleware: before every model call, when the agent's messages are
    over `trigger` tokens, they are compacted with a compactkit pipeline down to `target`.

    A drop-in for LangChain's `SummarizationMiddleware`; the options are `compactkit.Session`'s.
    Counting is incremental across calls (only new messages are converted and counted), messages
    a compaction keeps stay the same LangChain objects (ids and the prompt prefix survive), and
    what it removes is kept in the state under `compactkit_recovery`. `pins`: user pin rules
    (`compactkit.pins`); the user's words are always pinned. `serve_state` and `serve_session`:
    the serve-state store (or SQLite file) and session of the agent's tool server, which then
    forgets what a compaction removed (`compactkit.serve.reset`).
    """

    state_schema = CompactionState

    def __init__(
        self,
        pipeline: PipelineArg = "default",
        *,
        trigger: int = DEFAULT_TRIGGER,
        target: int | None = None,
        tokenizer: str = DEFAULT_TOKENIZER,
        registry: Registry | None = None,
        pins: Sequence[str] = (),
        serve_state: ServeStore | str | Path | None = None,
        serve_session: str | None = None,
    ) -> None:
        super().__init__()
        setup = CompactionSetup.of("middleware", pipeline, trigger, target, tokenizer, registry)
        self._served = served_session(serve_state, serve_session)
        self.pins = tuple(str(parse_rule(rule)) for rule in pins)
        self.trigger, self.target = trigger, setup.target
        self.pipeline: Pipeline = setup.pipeline
        self._counter: TokenCounter = setup.counter
        self._converter = _Converter()

    @property
    def name(self) -> str:
        return "CompactionMiddleware"

    def subscribe(self, observer: Observer) -> Callable[[], None]:
        """Receive the events of every compaction; returns the function that unsubscribes."""
        return self.pipeline.subscribe(observer)

    def before_model(self, state: CompactionState, runtime: Any) -> dict[str, Any] | None:
        messages = list(state["messages"])
        system = messages[0] if messages and _is_system_instruction(messages[0]) else None
        converted = self._converter.messages(messages[1:] if system else messages)
        ctx = AgentContext.model_construct(
            system_instruction=str(system.content) if system else None,
            messages=tuple(converted),
            activated_skills={},
            metadata={},
            recovery=_recovery(state),
            pins=(),
            pin_rules=self.pins,
        )
        if self._counter.context(ctx) <= self.trigger:
            return None
        result = self.pipeline.run(ctx, self._counter)
        out = result.context
        if out is ctx:
            return None
        if self._served is not None:
            self._served.forget(ctx, out)
        originals = self._converter.originals()
        new: list[BaseMessage] = [system] if system else []
        for msg in out.messages:
            original = originals.get(id(msg))
            new.extend([original] if original is not None else message_to_langchain(msg))
        return {
            "messages": [RemoveMessage(id=REMOVE_ALL_MESSAGES), *new],
            RECOVERY_STATE_KEY: dict(out.recovery),
        }

    async def abefore_model(self, state: CompactionState, runtime: Any) -> dict[str, Any] | None:
        return self.before_model(state, runtime)


__all__ = [
    "CompactionMiddleware",
    "CompactionState",
    "from_langchain",
    "message_from_langchain",
    "message_to_langchain",
    "state_context",
    "to_langchain",
]
