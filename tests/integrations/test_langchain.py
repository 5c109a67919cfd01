"""compactkit.integrations.langchain: lossless message conversion both ways, and the middleware in a
real `create_agent` loop driven by LangChain's fake chat model."""

from __future__ import annotations

import json
from typing import Any

import pytest

pytest.importorskip("langchain", reason="the langchain extra is in compactkit[test]")

from langchain.agents import create_agent
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
)
from langchain_core.tools import tool

import compactkit
from compactkit import AgentContext
from compactkit.integrations.langchain import (
    CompactionMiddleware,
    from_langchain,
    state_context,
    to_langchain,
)

from ..conftest import every_conversation
from . import scripted
from .scripted import ANSWER, FILES, SYSTEM, TASK, assert_bounded, assert_nothing_lost, run_both


def test_every_corpus_conversation_round_trips_through_langchain() -> None:
    for name, ctx in every_conversation():
        messages = to_langchain(ctx)
        assert all(isinstance(m, BaseMessage) for m in messages)
        back = from_langchain(messages, base=ctx.replace(system_instruction=None, messages=()))
        assert back == ctx, name


def test_a_compacted_context_round_trips_and_shows_the_model_its_markers() -> None:
    _, ctx = max(every_conversation(), key=lambda item: len(item[1].messages))
    budget = compactkit.count_tokens(ctx) // 5
    out = compactkit.build_pipeline(["default"], budget=budget).compact(ctx)
    messages = to_langchain(out)
    assert from_langchain(messages, base=out.replace(system_instruction=None, messages=())) == out
    summary = next(m for m in messages if "[summary of" in m.text)
    assert "compactkit" in summary.additional_kwargs  # the marker itself rides along


LANGCHAIN_MESSAGES: list[BaseMessage] = [
    SystemMessage("You are a careful agent.", id="sys-1"),
    HumanMessage("Find the bug in io.py", id="h-1", name="ada"),
    HumanMessage(
        [
            {"type": "text", "text": "and look at this"},
            {"type": "image", "url": "https://example.com/trace.png"},
            {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}},
        ],
        id="h-2",
    ),
    AIMessage(
        [
            {"type": "thinking", "thinking": "io.py first", "signature": "sig=="},
            {"type": "text", "text": "Reading it."},
            {"type": "tool_use", "id": "toolu_1", "name": "read", "input": {"path": "io.py"}},
        ],
        tool_calls=[{"id": "toolu_1", "name": "read", "args": {"path": "io.py"}}],
        id="ai-1",
        response_metadata={"model_name": "claude-sonnet-4-5", "stop_reason": "tool_use"},
        usage_metadata={"input_tokens": 120, "output_tokens": 30, "total_tokens": 150},
    ),
    ToolMessage("def write_atomic(path): ...", tool_call_id="toolu_1", id="t-1", artifact={"n": 1}),
    AIMessage(
        "",
        tool_calls=[
            {"id": "call_a", "name": "grep", "args": {"pattern": "fsync"}},
            {"id": "call_b", "name": "grep", "args": {"pattern": "replace"}},
        ],
        invalid_tool_calls=[{"id": "call_c", "name": "grep", "args": "{oops", "error": "bad"}],
        id="ai-2",
    ),
    ToolMessage("io.py:40: os.fsync", tool_call_id="call_a", id="t-2"),
    ToolMessage("no match", tool_call_id="call_b", status="error", id="t-3"),
    AIMessage(
        [{"type": "reasoning", "reasoning": "done", "id": "rs_1"}, "The bug is on line 40."],
        id="ai-3",
        additional_kwargs={"refusal": None},
    ),
]


def test_langchain_messages_round_trip_through_a_context() -> None:
    ctx = from_langchain(LANGCHAIN_MESSAGES)
    assert ctx.system_instruction == "You are a careful agent."
    assert [m.role for m in ctx.messages] == [
        "user",
        "user",
        "assistant",
        "tool",
        "assistant",
        "tool",
        "tool",
        "assistant",
    ]
    assert compactkit.validate(ctx) == []
    first_call = ctx.messages[2]
    assert [b.type for b in first_call.content] == ["thinking", "text", "tool_call"]
    assert ctx.messages[6].tool_results[0].is_error
    assert ctx.messages[1].content[2] == compactkit.ImageBlock(media_type="image/png", data="AAAA")
    assert to_langchain(ctx) == LANGCHAIN_MESSAGES
    # through the native JSON too (what a session log stores)
    again = AgentContext.from_native(json.loads(ctx.to_json()))
    assert to_langchain(again) == LANGCHAIN_MESSAGES


def test_a_rewritten_message_is_not_undone_by_what_was_recorded() -> None:
    big = ToolMessage(
        [{"type": "text", "text": "def write_atomic(path):\n" + "    pass\n" * 400}],
        tool_call_id="toolu_1",
        id="t-1",
    )
    messages = [*LANGCHAIN_MESSAGES[:4], big, *LANGCHAIN_MESSAGES[5:]]
    ctx = from_langchain(messages)
    assert to_langchain(ctx) == messages  # the content list is recorded...
    masked = compactkit.ObservationMask(keep_last=0).compact(ctx)
    tool_messages = [m for m in to_langchain(masked) if isinstance(m, ToolMessage)]
    assert "def write_atomic" not in tool_messages[0].text  # ...and not put back once masked
    assert tool_messages[0].id == "t-1"


# --------------------------------------------------------------------------- a real agent loop


class ScriptedModel(GenericFakeChatModel):
    """LangChain's fake chat model, recording what it is sent, with tools bound (create_agent)."""

    seen: list[list[BaseMessage]] = []

    def bind_tools(self, tools: Any, **kwargs: Any) -> ScriptedModel:
        return self

    def _generate(self, messages: list[BaseMessage], *args: Any, **kwargs: Any) -> Any:
        self.seen.append(list(messages))
        return super()._generate(messages, *args, **kwargs)


def _script() -> list[AIMessage]:
    steps = [
        AIMessage(
            f"Reading {p.name}.",
            tool_calls=[{"id": f"call_{n}", "name": "read_file", "args": {"path": str(p)}}],
        )
        for n, p in enumerate(FILES)
    ]
    return [*steps, AIMessage(ANSWER)]


read_file = tool(scripted.read_file)


def _run(middleware: list[Any]) -> tuple[dict[str, Any], list[list[BaseMessage]]]:
    model = ScriptedModel(messages=iter(_script()), seen=[])
    agent = create_agent(model, [read_file], system_prompt=SYSTEM, middleware=middleware)
    state = agent.invoke({"messages": [HumanMessage(TASK)]}, {"recursion_limit": 100})
    return state, model.seen


def _tokens(messages: list[BaseMessage]) -> int:
    return compactkit.count_tokens(from_langchain(messages))


def test_the_middleware_compacts_a_create_agent_loop() -> None:
    runs = run_both(_run, CompactionMiddleware)
    state = runs.result
    assert state["messages"][-1].text == runs.plain["messages"][-1].text
    sizes = [_tokens(c) for c in runs.calls]
    assert_bounded(sizes, [_tokens(c) for c in runs.plain_calls], runs.trigger)
    assert any(e.kind == "finished" for e in runs.events)
    for call in runs.calls:
        assert isinstance(call[0], SystemMessage)
        assert call[1].text.startswith("Where does compactkit write files?")  # the task stays
        answered: set[str] = set()
        for m in call:  # every tool message answers a call made before it
            if isinstance(m, AIMessage):
                answered.update(c["id"] for c in m.tool_calls)
            if isinstance(m, ToolMessage):
                assert m.tool_call_id in answered
    # nothing lost: the state keeps what compaction removed
    assert_nothing_lost(compactkit.expand(state_context(state)))


def test_the_middleware_keeps_the_messages_it_does_not_compact() -> None:
    middleware = CompactionMiddleware(["sliding-window"], trigger=2_000, target=1_000)
    big = "word " * 3_000
    messages: list[BaseMessage] = [
        HumanMessage("task", id="h"),
        AIMessage(
            "", tool_calls=[{"id": "c1", "name": "read_file", "args": {"path": "a"}}], id="a1"
        ),
        ToolMessage(big, tool_call_id="c1", id="t1"),
        AIMessage("short answer", id="a2"),
        HumanMessage("next", id="h2"),
    ]
    assert middleware.before_model({"messages": messages[:2]}, None) is None
    update = middleware.before_model({"messages": messages}, None)
    assert update is not None
    kept = update["messages"][1:]
    assert kept[0] is messages[0] and kept[-1] is messages[-1]  # the same objects, same ids
    assert all(m is not messages[2] for m in kept)
