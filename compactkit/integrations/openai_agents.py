"""The OpenAI Agents SDK: session items to and from `AgentContext`, and a session that wraps any
SDK session and hands the runner a compacted history (`pip install 'compactkit[openai-agents]'`).

```python
from agents import Agent, Runner, SQLiteSession
from compactkit.integrations.openai_agents import CompactionSession

session = CompactionSession(SQLiteSession("user-42"), trigger=60_000, target=30_000)
result = await Runner.run(agent, "Where are files written?", session=session)
```

How items map (Responses API input items, as the SDK stores them):

- consecutive model-side items (an assistant `message`, `reasoning`, `function_call`, and the
  provider-run calls such as `web_search_call`) are one `assistant` message: output text and
  refusals -> text, `reasoning` -> a thinking block (its summary text; the encrypted content as
  the signature), `function_call` -> `ToolCallBlock` (arguments parsed), other items -> text
  holding their JSON; consecutive `function_call_output`s are one `tool` message; a `user`,
  `system` or `developer` message is one message (`developer` -> `system`), its `input_text` and
  `input_image` parts text and image blocks;
- every item is recorded in the message metadata under `"openai_agents"` (its strings that the
  blocks hold by reference), and written back exactly while the blocks still say the same;
- written from blocks (a message a compaction rewrote, or a context from another format):
  markers become the text a model reads, thinking a `reasoning` item without an id, consecutive
  assistant (or tool) messages read back as one, and message names and metadata that is not an
  item's record are not written (items have no place the API would not read). These are the
  conversion's losses; the wrapped session keeps every item the runner
  added, so nothing is lost from the history itself.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from typing_extensions import Unpack

from .. import ThinkingBlock, ToolCallBlock, ToolResultBlock
from ..context import AgentContext, Block, ImageBlock, Message, TextBlock
from ..events import Observer
from ..session import PipelineArg
from . import _bridge as bridge

Item = dict[str, Any]
AGENTS_KEY = "openai_agents"
"""Message metadata: the items a message was read from, by reference into its blocks."""

_MODEL_SIDE = ("reasoning", "function_call")
_INPUT_ROLES = {"user": "user", "system": "system", "developer": "system"}


def from_agents_items(items: Sequence[Item], base: AgentContext | None = None) -> AgentContext:
    """The context of the SDK session items; other context fields come from `base`."""
    ctx = bridge.read_all(_CODEC, items)
    return ctx if base is None else base.replace(messages=ctx.messages)


def to_agents_items(ctx: AgentContext) -> list[Item]:
    """The SDK session items for `ctx` (a system instruction first, as a `system` message)."""
    return bridge.write_all(_CODEC, ctx)


def _side(item: Item) -> str:
    role = item.get("role")
    kind = item.get("type", "message")
    if kind == "message" and role in _INPUT_ROLES:
        return _INPUT_ROLES[role]
    if kind == "function_call_output":
        return "tool"
    return "assistant"


def _blocks(item: Item) -> list[Block]:
    kind = item.get("type", "message")
    if kind == "message":
        content = item.get("content")
        if isinstance(content, str):
            return [TextBlock(text=content)] if content else []
        return [_part(p) for p in content or []]
    if kind == "reasoning":
        texts = [s.get("text", "") for s in item.get("summary") or [] if isinstance(s, dict)]
        return [ThinkingBlock(thinking="\n".join(texts), signature=item.get("encrypted_content"))]
    if kind == "function_call":
        raw = item.get("arguments", "")
        try:
            args: Any = json.loads(raw) if raw else {}
        except (TypeError, ValueError):
            args = raw
        return [ToolCallBlock(id=str(item.get("call_id")), name=str(item.get("name")), input=args)]
    if kind == "function_call_output":
        output = item.get("output")
        text = output if isinstance(output, str) else bridge.sorted_json(output)
        content = (TextBlock(text=text),) if text else ()
        return [ToolResultBlock(tool_call_id=str(item.get("call_id")), content=content)]
    return [TextBlock(text=bridge.sorted_json(item))]


def _part(part: Any) -> Block:
    kind = part.get("type") if isinstance(part, dict) else None
    if kind in ("input_text", "output_text") and isinstance(part.get("text"), str):
        return TextBlock(text=part["text"])
    if kind == "refusal" and isinstance(part.get("refusal"), str):
        return TextBlock(text=part["refusal"])
    if kind == "input_image" and isinstance(part.get("image_url"), str):
        return ImageBlock(url=part["image_url"])
    return TextBlock(text=bridge.sorted_json(part))


class _AgentsCodec(bridge.OneToOne):
    def read(self, items: Sequence[Item]) -> list[tuple[list[Item], list[Message]]]:
        out: list[tuple[list[Item], list[Message]]] = []
        run: list[Item] = []
        for item in items:
            side = _side(item)
            if run and side == _side(run[0]) and side in ("assistant", "tool"):
                run.append(item)
                continue
            if run:
                out.append((run, [self._message(run)]))
            run = [item]
        if run:
            out.append((run, [self._message(run)]))
        return out

    def _message(self, run: list[Item]) -> Message:
        blocks = [b for item in run for b in _blocks(item)]
        meta = bridge.record(run, blocks)
        return Message(role=_side(run[0]), content=tuple(blocks), metadata={AGENTS_KEY: meta})

    def write(self, group: Sequence[Message], names: Mapping[str, str]) -> list[Item]:
        msg = group[0]
        items = bridge.restored(msg.metadata.get(AGENTS_KEY), msg.content)
        if isinstance(items, list):
            return items
        return _plain(msg)


def _plain(msg: Message) -> list[Item]:
    if msg.role == "tool":
        out: list[Item] = []
        rest: list[Block] = []
        for block in msg.content:
            if isinstance(block, ToolResultBlock):
                out.append(
                    {
                        "type": "function_call_output",
                        "call_id": block.tool_call_id,
                        "output": bridge.shown_text(block.content),
                    }
                )
            else:
                rest.append(block)
        if rest:
            out.append({"role": "user", "content": _input_content(rest)})
        return out
    if msg.role != "assistant":
        return [{"role": msg.role, "content": _input_content(list(msg.content))}]
    items: list[Item] = []
    for block in msg.content:
        if isinstance(block, ToolCallBlock):
            args = block.input if isinstance(block.input, str) else json.dumps(block.input)
            items.append(
                {
                    "type": "function_call",
                    "call_id": block.id,
                    "name": block.name,
                    "arguments": args,
                }
            )
        elif isinstance(block, ThinkingBlock):
            reasoning: Item = {
                "type": "reasoning",
                "summary": [{"type": "summary_text", "text": block.thinking}],
            }
            if block.signature:
                reasoning["encrypted_content"] = block.signature
            items.append(reasoning)
        else:
            items.append({"role": "assistant", "content": bridge.shown(block)})
    return items


def _input_content(blocks: list[Block]) -> str | list[Item]:
    text = bridge.only_text(blocks)
    if text is not None:
        return text
    parts: list[Item] = []
    for block in blocks:
        if isinstance(block, ImageBlock) and (block.url or block.data):
            url = block.url or f"data:{block.media_type or 'image/png'};base64,{block.data}"
            parts.append({"type": "input_image", "image_url": url, "detail": "auto"})
        else:
            parts.append({"type": "input_text", "text": bridge.shown(block)})
    return parts


_CODEC = _AgentsCodec()


class CompactionSession:
    """An OpenAI Agents SDK session (`agents.memory.Session`) over any other: `add_items`,
    `pop_item` and `clear_session` go to the wrapped session, which keeps every item the runner
    added; `get_items` hands the runner that history compacted by a `compactkit.Session`
    (`self.session`) once it passes the trigger, down to the target, the items a compaction kept
    unchanged (so the prefix the provider caches holds between compactions).

    The options are `compactkit.Session`'s (`pins` among them); `subscribe(observer)` gets its
    events, `self.session.save(path)` logs it.
    """

    def __init__(
        self,
        wrapped: Any,
        pipeline: PipelineArg = "default",
        **options: Unpack[bridge.SessionOptions],
    ) -> None:
        self.wrapped = wrapped
        self.session_id: str = wrapped.session_id
        self.session_settings = getattr(wrapped, "session_settings", None)
        self.session = bridge.live_session(pipeline, options)
        self._bridge: bridge.LiveBridge[Item] = bridge.LiveBridge(_CODEC, self.session)

    def subscribe(self, observer: Observer) -> Callable[[], None]:
        """Receive the session's events (appends, compactions and the pipeline's own)."""
        return self.session.subscribe(observer)

    async def get_items(self, limit: int | None = None) -> list[Item]:
        items = self._bridge.view(await self.wrapped.get_items())
        return items if limit is None else items[-limit:] if limit > 0 else []

    async def add_items(self, items: list[Item]) -> None:
        await self.wrapped.add_items(items)

    async def pop_item(self) -> Item | None:
        item: Item | None = await self.wrapped.pop_item()
        return item

    async def clear_session(self) -> None:
        await self.wrapped.clear_session()


__all__ = ["CompactionSession", "from_agents_items", "to_agents_items"]
