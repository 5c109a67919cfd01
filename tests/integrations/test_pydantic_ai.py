"""compactkit.integrations.pydantic_ai: lossless conversion both ways, and the history processor
in a real `Agent.run` loop driven by pydantic-ai's own `FunctionModel`."""

from __future__ import annotations

import json
from datetime import datetime, timezone
from typing import Any

import pytest

pytest.importorskip("pydantic_ai", reason="the pydantic-ai extra is in compactkit[test]")

import itertools

from pydantic_ai import Agent
from pydantic_ai import messages as pm
from pydantic_ai.capabilities import ProcessHistory
from pydantic_ai.models.function import AgentInfo, FunctionModel

import compactkit
from compactkit import AgentContext
from compactkit.integrations.pydantic_ai import (
    CompactionProcessor,
    from_pydantic_ai,
    to_pydantic_ai,
)

from ..conftest import every_conversation
from .scripted import (
    ANSWER,
    FILES,
    SYSTEM,
    TASK,
    assert_bounded,
    assert_nothing_lost,
    read_file,
    run_both,
)

T0 = datetime(2026, 11, 3, 9, 30, tzinfo=timezone.utc)


def test_every_corpus_conversation_round_trips_through_pydantic_ai() -> None:
    for name, ctx in every_conversation():
        items = to_pydantic_ai(ctx)
        assert all(isinstance(m, (pm.ModelRequest, pm.ModelResponse)) for m in items)
        again = pm.ModelMessagesTypeAdapter.validate_json(
            pm.ModelMessagesTypeAdapter.dump_json(items)
        )  # what a builder stores between runs
        base = ctx.replace(system_instruction=None, messages=())
        assert from_pydantic_ai(items, base=base) == ctx, name
        assert from_pydantic_ai(again, base=base) == ctx, name


HISTORY: list[pm.ModelMessage] = [
    pm.ModelRequest(
        parts=[
            pm.SystemPromptPart("You are a careful agent.", timestamp=T0),
            pm.SystemPromptPart("Answer in English.", timestamp=T0),
            pm.UserPromptPart(
                [
                    "Find the bug in io.py",
                    pm.ImageUrl("https://example.com/trace.png"),
                    pm.BinaryContent(b"\x89PNG\r\n", media_type="image/png"),
                    pm.DocumentUrl("https://example.com/spec.pdf"),
                ],
                timestamp=T0,
            ),
        ],
        run_id="run-1",
        metadata={"tenant": "acme"},
    ),
    pm.ModelResponse(
        parts=[
            pm.ThinkingPart("io.py first", signature="sig==", provider_name="anthropic"),
            pm.TextPart("Reading it."),
            pm.ToolCallPart("read_file", {"path": "io.py"}, tool_call_id="call_1"),
            pm.ToolCallPart("grep", '{"pattern": "fsync"}', tool_call_id="call_2"),
        ],
        usage=pm.RequestUsage(input_tokens=120, output_tokens=30),
        model_name="claude-sonnet-4-5",
        timestamp=T0,
        provider_response_id="msg_1",
        finish_reason="tool_call",
    ),
    pm.ModelRequest(
        parts=[
            pm.ToolReturnPart("read_file", "def write_atomic(path): ...", "call_1", timestamp=T0),
            pm.ToolReturnPart(
                "grep", "pattern must not be empty", "call_2", outcome="retried", timestamp=T0
            ),
        ],
        run_id="run-1",
    ),
    pm.ModelResponse(
        parts=[
            pm.ToolCallPart("grep", {"pattern": "os.replace"}, tool_call_id="call_3"),
            pm.FilePart(pm.BinaryContent(b"GIF89a", media_type="image/gif")),
        ],
        timestamp=T0,
    ),
    pm.ModelRequest(
        parts=[
            pm.ToolReturnPart(
                "grep", {"matches": 0}, "call_3", outcome="failed", timestamp=T0, metadata={"n": 1}
            ),
            pm.UserPromptPart("also check the tests", timestamp=T0),
        ],
    ),
    pm.ModelResponse(parts=[pm.TextPart("The bug is on line 40.")], timestamp=T0),
    pm.ModelRequest(
        parts=[
            pm.RetryFeedbackPart(
                "answer as JSON", retry=pm.RetryInfo(cause="validation_error"), timestamp=T0
            )
        ]
    ),
]


def _dumped(items: list[pm.ModelMessage]) -> Any:
    return json.loads(pm.ModelMessagesTypeAdapter.dump_json(items))


def test_pydantic_ai_messages_round_trip_through_a_context() -> None:
    ctx = from_pydantic_ai(HISTORY)
    assert ctx.system_instruction == "You are a careful agent."
    roles = "system user assistant tool assistant tool user assistant user"
    assert [m.role for m in ctx.messages] == roles.split()
    assert compactkit.validate(ctx) == []
    user = ctx.messages[1]
    assert user.content[1] == compactkit.ImageBlock(url="https://example.com/trace.png")
    assert user.content[2] == compactkit.ImageBlock(media_type="image/png", data="iVBORw0K")
    call = ctx.messages[2]
    assert [b.type for b in call.content] == ["thinking", "text", "tool_call", "tool_call"]
    assert call.content[3] == compactkit.ToolCallBlock(
        id="call_2", name="grep", input={"pattern": "fsync"}
    )
    retry = ctx.messages[3].tool_results[1]
    assert retry.is_error and "pattern must not be empty" in retry.text
    assert ctx.messages[5].tool_results[0].is_error  # a failed outcome
    assert _dumped(to_pydantic_ai(ctx)) == _dumped(HISTORY)
    # through the native JSON too (what a session log stores)
    again = AgentContext.from_native(json.loads(ctx.to_json()))
    assert _dumped(to_pydantic_ai(again)) == _dumped(HISTORY)


def test_a_compacted_context_round_trips_and_shows_the_model_its_markers() -> None:
    _, ctx = max(every_conversation(), key=lambda item: len(item[1].messages))
    budget = compactkit.count_tokens(ctx) // 5
    out = compactkit.build_pipeline(["default"], budget=budget).compact(ctx)
    items = to_pydantic_ai(out)
    base = out.replace(system_instruction=None, messages=())
    assert from_pydantic_ai(items, base=base) == out
    summary = next(
        m
        for m in items
        if isinstance(m, pm.ModelRequest)
        and any("[summary of" in str(getattr(p, "content", "")) for p in m.parts)
    )
    assert summary.metadata is not None and "compactkit" in summary.metadata


def test_a_rewritten_message_is_not_undone_by_what_was_recorded() -> None:
    big = pm.ToolReturnPart("read_file", "def write_atomic(path):\n" + "    pass\n" * 400, "call_1")
    history = [*HISTORY[:2], pm.ModelRequest(parts=[big, HISTORY[2].parts[1]]), *HISTORY[3:]]
    ctx = from_pydantic_ai(history)
    assert _dumped(to_pydantic_ai(ctx)) == _dumped(history)  # the part is recorded...
    masked = compactkit.ObservationMask(keep_last=0).compact(ctx)
    items = to_pydantic_ai(masked)  # ...and not put back once masked
    returns = [p for m in items for p in m.parts if isinstance(p, pm.ToolReturnPart)]
    assert returns and all("def write_atomic" not in p.model_response_str() for p in returns)
    base = masked.replace(system_instruction=None, messages=())
    assert from_pydantic_ai(items, base=base) == masked


# --------------------------------------------------------------------------- a real agent loop


def _run(processors: list[Any]) -> tuple[Any, list[list[pm.ModelMessage]]]:
    seen: list[list[pm.ModelMessage]] = []

    def model(messages: list[pm.ModelMessage], info: AgentInfo) -> pm.ModelResponse:
        seen.append(list(messages))
        step = len(seen) - 1
        if step < len(FILES):
            call = pm.ToolCallPart(
                "read_file", {"path": str(FILES[step])}, tool_call_id=f"call_{step}"
            )
            return pm.ModelResponse(parts=[pm.TextPart(f"Reading {FILES[step].name}."), call])
        return pm.ModelResponse(parts=[pm.TextPart(ANSWER)])

    agent = Agent(
        FunctionModel(model),
        system_prompt=SYSTEM,
        tools=[read_file],
        capabilities=[ProcessHistory(p) for p in processors],
    )
    return agent.run_sync(TASK), seen


def _tokens(messages: list[pm.ModelMessage]) -> int:
    return compactkit.count_tokens(from_pydantic_ai(messages))


def test_the_processor_compacts_an_agent_run() -> None:
    runs = run_both(_run, CompactionProcessor)
    processor, result, calls = runs.adapter, runs.result, runs.calls
    assert result.output == runs.plain.output == ANSWER
    assert_bounded(
        [_tokens(c) for c in calls], [_tokens(c) for c in runs.plain_calls], runs.trigger
    )
    assert sum(e.kind == "compacted" for e in runs.events) >= 1
    for call in calls:
        first = call[0]
        assert isinstance(first, pm.ModelRequest)
        assert isinstance(first.parts[0], pm.SystemPromptPart)  # the system prompt stays
        assert any(isinstance(p, pm.UserPromptPart) and p.content == TASK for p in first.parts)
        called: set[str] = set()
        for m in call:  # every tool return answers a call made before it
            for p in m.parts:
                if isinstance(p, pm.ToolCallPart):
                    called.add(p.tool_call_id)
                if isinstance(p, pm.ToolReturnPart):
                    assert p.tool_call_id in called
    # between compactions the history the model gets goes on from the same prefix (the cache)
    grew = [(a, b) for a, b in itertools.pairwise(calls) if len(b) > len(a)]
    assert len(grew) >= len(calls) // 2
    assert all(_dumped(a) == _dumped(b[: len(a)]) for a, b in grew)
    # nothing lost: what compaction removed is in the session
    assert_nothing_lost(compactkit.expand(processor.session.context))
    # the history pydantic-ai keeps is the compacted one, and it reads back as the session
    kept = result.all_messages()
    assert _tokens(kept) < _tokens(runs.plain.all_messages())


def test_the_processor_starts_over_for_another_history() -> None:
    processor = CompactionProcessor(["sliding-window"], trigger=2_000, target=1_000)
    first = [pm.ModelRequest(parts=[pm.UserPromptPart("task one")])]
    assert processor(first) == first
    other = [pm.ModelRequest(parts=[pm.UserPromptPart("task two")])]
    assert processor(other) == other
    assert [m.text for m in processor.session.context.messages] == ["task two"]


def _reading_history(n: int) -> list[pm.ModelMessage]:
    history: list[pm.ModelMessage] = [pm.ModelRequest(parts=[pm.UserPromptPart(TASK)])]
    for k, path in enumerate(FILES[:n]):
        call = pm.ToolCallPart("read_file", {"path": str(path)}, tool_call_id=f"call_{k}")
        history.append(pm.ModelResponse(parts=[call]))
        ret = pm.ToolReturnPart("read_file", read_file(str(path)), f"call_{k}")
        history.append(pm.ModelRequest(parts=[ret]))
    return history


def test_pinned_tool_output_is_never_compacted() -> None:
    history = _reading_history(6)
    size = compactkit.count_tokens(from_pydantic_ai(history))
    options = {"trigger": size // 2, "target": size // 4}
    plain = CompactionProcessor(["observation-mask:keep_last=1"], **options)(history)
    pinned = CompactionProcessor(
        ["observation-mask:keep_last=1"], pins=["tool=read_file"], **options
    )
    out = pinned(history)

    def returned(items: list[pm.ModelMessage]) -> str:
        return "\n".join(
            p.model_response_str()
            for m in items
            for p in m.parts
            if isinstance(p, pm.ToolReturnPart)
        )

    assert read_file(str(FILES[0])) not in returned(plain)  # masked without the pin
    assert all(read_file(str(p)) in returned(out) for p in FILES[:6])
    assert pinned.session.context.pin_rules == ("tool=read_file",)
