"""compactkit.integrations.adk: contents conversion, and the callback in a real ADK runner
(`InMemoryRunner`) driven by a scripted `BaseLlm`, offline."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator
from typing import Any

import pytest

pytest.importorskip("google.adk", reason="the adk extra is in compactkit[test]")

from google.adk.agents import LlmAgent
from google.adk.models.base_llm import BaseLlm
from google.adk.models.llm_request import LlmRequest
from google.adk.models.llm_response import LlmResponse
from google.adk.runners import InMemoryRunner
from google.genai import types

import compactkit
from compactkit.integrations.adk import CompactionCallback, from_adk_contents, to_adk_contents

from ..conftest import every_conversation
from .scripted import ANSWER, FILES, TASK, assert_bounded, assert_nothing_lost, read_file, run_both

CONTENTS = [
    types.Content(role="user", parts=[types.Part(text="Find the bug in io.py")]),
    types.Content(
        role="model",
        parts=[
            types.Part(text="io.py first", thought=True, thought_signature=b"\x01sig"),
            types.Part(text="Reading it."),
            types.Part(
                function_call=types.FunctionCall(id="c1", name="read_file", args={"path": "io.py"})
            ),
        ],
    ),
    types.Content(
        role="user",
        parts=[
            types.Part(
                function_response=types.FunctionResponse(
                    id="c1", name="read_file", response={"result": "def write_atomic(): ..."}
                )
            )
        ],
    ),
    types.Content(
        role="user",
        parts=[
            types.Part(text="and this"),
            types.Part(inline_data=types.Blob(mime_type="image/png", data=b"\x89PNG")),
        ],
    ),
    types.Content(role="model", parts=[types.Part(text="The bug is on line 40.")]),
]


def test_adk_contents_round_trip_through_a_context() -> None:
    ctx = from_adk_contents(CONTENTS)
    assert [m.role for m in ctx.messages] == ["user", "assistant", "tool", "user", "assistant"]
    assert compactkit.validate(ctx) == []
    assert [b.type for b in ctx.messages[1].content] == ["thinking", "text", "tool_call"]
    assert to_adk_contents(ctx) == CONTENTS
    again = compactkit.AgentContext.from_native(__import__("json").loads(ctx.to_json()))
    assert to_adk_contents(again) == CONTENTS


def test_every_corpus_conversation_converts_and_reads_back_the_same() -> None:
    for name, ctx in every_conversation():
        contents = to_adk_contents(ctx)
        back = from_adk_contents(contents)
        assert to_adk_contents(back) == contents, name  # from there on, exactly
        calls = [b.id for m in back.messages for b in m.tool_calls]
        assert calls == [b.id for m in ctx.messages for b in m.tool_calls], name


class ScriptedLlm(BaseLlm):
    """Reads the twelve files one call at a time, then answers; records each request."""

    seen: list[list[types.Content]] = []

    async def generate_content_async(
        self, llm_request: LlmRequest, stream: bool = False
    ) -> AsyncGenerator[LlmResponse, None]:
        self.seen.append(list(llm_request.contents))
        step = len(self.seen) - 1
        if step < len(FILES):
            call = types.FunctionCall(
                id=f"call_{step}", name="read_file", args={"path": str(FILES[step])}
            )
            part = types.Part(function_call=call)
        else:
            part = types.Part(text=ANSWER)
        yield LlmResponse(content=types.Content(role="model", parts=[part]))


def _run(callbacks: list[Any]) -> tuple[str, list[list[types.Content]]]:
    model = ScriptedLlm(model="scripted", seen=[])
    agent = LlmAgent(
        name="reviewer",
        model=model,
        tools=[read_file],
        before_model_callback=callbacks[0] if callbacks else None,
    )
    runner = InMemoryRunner(agent=agent, app_name="compactkit")

    async def go() -> str:
        session = await runner.session_service.create_session(app_name="compactkit", user_id="u")
        text = ""
        message = types.Content(role="user", parts=[types.Part(text=TASK)])
        async for event in runner.run_async(
            user_id="u", session_id=session.id, new_message=message
        ):
            if event.content and event.content.parts and event.content.parts[0].text:
                text = event.content.parts[0].text
        return text

    return asyncio.run(go()), model.seen


def _tokens(contents: list[types.Content]) -> int:
    return compactkit.count_tokens(from_adk_contents(contents))


def test_the_callback_compacts_a_runner_loop() -> None:
    runs = run_both(_run, CompactionCallback)
    assert runs.result == runs.plain == ANSWER
    assert_bounded(
        [_tokens(c) for c in runs.calls], [_tokens(c) for c in runs.plain_calls], runs.trigger
    )
    assert any(e.kind == "compacted" for e in runs.events)
    for call in runs.calls:
        assert call[0].parts[0].text == TASK  # the task stays
        called: set[str] = set()
        for content in call:
            for part in content.parts or []:
                if part.function_call:
                    called.add(part.function_call.id or "")
                if part.function_response:
                    assert part.function_response.id in called
    (session,) = runs.adapter.sessions.values()
    assert_nothing_lost(compactkit.expand(session.context))
