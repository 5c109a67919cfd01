"""compactkit.integrations.openai_agents: item conversion (exact one way, losses listed the
other), and the compacting session in real `Runner.run` calls driven by a scripted model."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

pytest.importorskip("agents", reason="the openai-agents extra is in compactkit[test]")

from agents import Agent, Runner, SQLiteSession, function_tool, set_tracing_disabled
from agents.items import ModelResponse
from agents.models.interface import Model
from agents.usage import Usage
from openai.types.responses import ResponseFunctionToolCall, ResponseOutputMessage
from openai.types.responses.response_output_text import ResponseOutputText

import compactkit
from compactkit import AgentContext, Message, TextBlock
from compactkit.context import render_block
from compactkit.integrations.openai_agents import (
    CompactionSession,
    from_agents_items,
    to_agents_items,
)

from ..conftest import every_conversation
from .scripted import FILES, SYSTEM, assert_nothing_lost, budget, read_file

set_tracing_disabled(True)

ITEMS: list[dict[str, Any]] = [
    {"role": "user", "content": "Find the bug in io.py"},
    {
        "role": "user",
        "content": [
            {"type": "input_text", "text": "and look at this"},
            {"type": "input_image", "image_url": "https://example.com/t.png", "detail": "auto"},
        ],
    },
    {
        "type": "reasoning",
        "id": "rs_1",
        "summary": [{"type": "summary_text", "text": "io.py first"}],
        "encrypted_content": "gAAAA==",
    },
    {
        "type": "message",
        "id": "msg_1",
        "role": "assistant",
        "status": "completed",
        "content": [{"type": "output_text", "text": "Reading it.", "annotations": []}],
    },
    {
        "type": "function_call",
        "id": "fc_1",
        "call_id": "call_1",
        "name": "read_file",
        "arguments": '{"path": "io.py"}',
        "status": "completed",
    },
    {
        "type": "function_call",
        "id": "fc_2",
        "call_id": "call_2",
        "name": "grep",
        "arguments": '{"pattern":"fsync"}',
    },
    {"type": "function_call_output", "call_id": "call_1", "output": "def write_atomic(): ..."},
    {"type": "function_call_output", "call_id": "call_2", "output": "io.py:40: os.fsync"},
    {"type": "web_search_call", "id": "ws_1", "status": "completed", "action": {"type": "search"}},
    {"role": "developer", "content": "Answer briefly."},
    {"role": "assistant", "content": "The bug is on line 40."},
]


def test_agents_items_round_trip_through_a_context() -> None:
    ctx = from_agents_items(ITEMS)
    roles = "user user assistant tool assistant system assistant"
    assert [m.role for m in ctx.messages] == roles.split()
    assert compactkit.validate(ctx) == []
    turn = ctx.messages[2]
    assert [b.type for b in turn.content] == ["thinking", "text", "tool_call", "tool_call"]
    assert turn.content[3] == compactkit.ToolCallBlock(
        id="call_2", name="grep", input={"pattern": "fsync"}
    )
    assert to_agents_items(ctx) == ITEMS
    again = AgentContext.from_native(__import__("json").loads(ctx.to_json()))
    assert to_agents_items(again) == ITEMS


def _representable(ctx: AgentContext) -> AgentContext:
    """What session items can say of `ctx` (the losses the module docs list): message metadata
    goes, markers become their text, the system instruction a system message, consecutive
    assistant (or tool) messages one."""

    def plain(msg: Message) -> Message:
        blocks = [
            b
            if b.type not in compactkit.context.MARKER_TYPES
            else TextBlock(text="\n".join(render_block(b)))
            for b in msg.content
        ]
        return Message(role=msg.role, content=tuple(blocks), name=None)

    system = ctx.system_instruction
    lead = [Message(role="system", content=(TextBlock(text=system),))] if system is not None else []
    out: list[Message] = []
    for msg in (plain(m) for m in [*lead, *ctx.messages]):
        if out and msg.role == out[-1].role and msg.role in ("assistant", "tool"):
            out[-1] = Message(role=msg.role, content=out[-1].content + msg.content)
        else:
            out.append(msg)
    return AgentContext(messages=tuple(out))


def _shown(ctx: AgentContext) -> list[tuple[str, list[str]]]:
    return [(m.role, ["\n".join(render_block(b)) for b in m.content]) for m in ctx.messages]


def test_every_corpus_conversation_round_trips_through_agents_items() -> None:
    for name, ctx in every_conversation():
        items = to_agents_items(ctx)
        back = from_agents_items(items)
        assert _shown(back) == _shown(_representable(ctx)), name
        assert to_agents_items(back) == items, name  # and from there on, exactly


# --------------------------------------------------------------------------- a real runner


class ScriptedModel(Model):
    """A model that asks to read the file named in the last user turn, then says it read it;
    it records the input of every call."""

    def __init__(self) -> None:
        self.seen: list[list[Any]] = []

    async def get_response(
        self, system_instructions: Any, input: Any, *args: Any, **kw: Any
    ) -> ModelResponse:
        items = [input] if isinstance(input, str) else list(input)
        self.seen.append(items)
        last = items[-1]
        if last.get("type") == "function_call_output":
            text = ResponseOutputText(type="output_text", text="Read it.", annotations=[])
            out: Any = ResponseOutputMessage(
                id=f"msg_{len(self.seen)}",
                type="message",
                role="assistant",
                status="completed",
                content=[text],
            )
        else:
            path = str(last["content"]).split()[-1]
            out = ResponseFunctionToolCall(
                type="function_call",
                call_id=f"call_{len(self.seen)}",
                name="read_file",
                arguments=__import__("json").dumps({"path": path}),
            )
        return ModelResponse(output=[out], usage=Usage(), response_id=None)

    def stream_response(self, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError


def _conversation(session: Any) -> tuple[ScriptedModel, list[Any]]:
    model = ScriptedModel()
    agent = Agent(
        name="reviewer", instructions=SYSTEM, model=model, tools=[function_tool(read_file)]
    )

    async def go() -> list[Any]:
        outputs = []
        for path in FILES:
            result = await Runner.run(agent, f"Read {path}", session=session)
            outputs.append(result.final_output)
        return outputs

    return model, asyncio.run(go())


def _tokens(items: list[Any]) -> int:
    return compactkit.count_tokens(from_agents_items(items))


def test_the_session_compacts_between_runs(tmp_path: Any) -> None:
    trigger, target = budget()
    plain_model, plain_out = _conversation(SQLiteSession("plain", str(tmp_path / "plain.db")))
    wrapped = SQLiteSession("c", str(tmp_path / "c.db"))
    session = CompactionSession(wrapped, trigger=trigger, target=target)
    events: list[Any] = []
    session.subscribe(events.append)
    model, out = _conversation(session)

    assert out == plain_out == ["Read it."] * len(FILES)
    assert len(model.seen) == len(plain_model.seen) == 2 * len(FILES)
    firsts = [c for c in model.seen[::2]]  # what each run starts from: the session's items
    plain_firsts = [c for c in plain_model.seen[::2]]
    assert max(_tokens(c) for c in plain_firsts) > 2 * trigger
    assert max(_tokens(c) for c in firsts) <= trigger + 200
    assert any(e.kind == "compacted" for e in events)
    for call in model.seen:
        assert call[0]["content"] == f"Read {FILES[0]}"  # the task stays
        called = {i["call_id"] for i in call if i.get("type") == "function_call"}
        outputs = {i["call_id"] for i in call if i.get("type") == "function_call_output"}
        assert outputs <= called
    # the wrapped session keeps every item; the compactkit session what was removed
    everything = asyncio.run(wrapped.get_items())
    assert len(everything) == len(
        asyncio.run(SQLiteSession("plain", str(tmp_path / "plain.db")).get_items())
    )
    asyncio.run(session.get_items())  # what the next run would start from
    assert_nothing_lost(compactkit.expand(session.session.context))
