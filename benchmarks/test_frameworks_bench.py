"""The OpenAI Agents SDK adapter against the SDK's own local compaction (`ToolOutputTrimmer` as
`call_model_input_filter`) and against none, over the same scripted session: twelve
`Runner.run` calls, each asking to read one module of the repository (the model calls
`read_file`, then answers). For every model call: prompt tokens (o200k_base), the prefix shared
with the previous call, and the cost under the OpenAI pricing profile (cached input 0.25x from
1,024 tokens in 128-token steps); all three in one run."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncGenerator, Callable
from typing import Any

import pytest

pytest.importorskip("agents")
pytest.importorskip("google.adk")

from agents import Agent, RunConfig, Runner, SQLiteSession, function_tool
from agents.extensions import ToolOutputTrimmer
from google.adk.agents import LlmAgent
from google.adk.apps.app import App, EventsCompactionConfig
from google.adk.apps.llm_event_summarizer import LlmEventSummarizer
from google.adk.models.base_llm import BaseLlm
from google.adk.models.llm_request import LlmRequest
from google.adk.models.llm_response import LlmResponse
from google.adk.runners import Runner as AdkRunner
from google.adk.sessions import InMemorySessionService
from google.genai import types

from compactkit.bench.pricing import get_profile
from compactkit.bench.replay import prefix_tokens
from compactkit.integrations.adk import CompactionCallback, from_adk_contents
from compactkit.integrations.openai_agents import CompactionSession, from_agents_items
from compactkit.registry import get_counter
from tests.integrations.scripted import FILES, SYSTEM, budget, read_file
from tests.integrations.test_openai_agents import ScriptedModel

PROFILE = get_profile("openai")


def _session(session: Any, config: RunConfig | None) -> tuple[ScriptedModel, float]:
    model = ScriptedModel()
    agent = Agent(
        name="reviewer", instructions=SYSTEM, model=model, tools=[function_tool(read_file)]
    )

    async def go() -> None:
        for path in FILES:
            await Runner.run(agent, f"Read {path}", session=session, run_config=config)

    start = time.perf_counter()
    asyncio.run(go())
    return model, time.perf_counter() - start


def _figures(calls: list[Any], convert: Callable[[Any], Any]) -> dict[str, float]:
    counter = get_counter("o200k_base")
    tokens = cached = 0
    cost = 0.0
    prev = None
    for call in calls:
        ctx = convert(call)
        prompt = counter.context(ctx)
        prefix = prefix_tokens(prev, ctx, counter)
        tokens += prompt
        cached += PROFILE.billable_cached(prefix)
        cost += PROFILE.cost(prompt, prefix, 0)
        prev = ctx
    return {"calls": len(calls), "tokens": tokens, "cached": cached, "cost": cost}


def _report(benchmark: Any, head: str, rows: dict[str, tuple[dict[str, float], float]]) -> None:
    print(f"\n{head}")
    for name, (fig, seconds) in rows.items():
        print(
            f"{name:>18}: {int(fig['calls'])} calls, {int(fig['tokens']):,} tokens sent, "
            f"{int(fig['cached']):,} billed cached, ${fig['cost']:.4f}, {seconds:.2f} s"
        )
        benchmark.extra_info[name] = {**fig, "seconds": seconds}


def test_agents_sdk_session_against_tool_output_trimmer(benchmark: Any, tmp_path: Any) -> None:
    trigger, target = budget()
    plain, plain_s = _session(SQLiteSession("none", str(tmp_path / "none.db")), None)
    trimmer = RunConfig(call_model_input_filter=ToolOutputTrimmer())
    trimmed, trimmed_s = _session(SQLiteSession("trim", str(tmp_path / "trim.db")), trimmer)

    def run() -> tuple[ScriptedModel, float]:
        wrapped = SQLiteSession("ck", str(tmp_path / f"ck{time.perf_counter_ns()}.db"))
        return _session(CompactionSession(wrapped, trigger=trigger, target=target), None)

    ours, ours_s = benchmark.pedantic(run, rounds=1, iterations=1)
    rows = {
        "none": (_figures(plain.seen, from_agents_items), plain_s),
        "ToolOutputTrimmer": (_figures(trimmed.seen, from_agents_items), trimmed_s),
        "CompactionSession": (_figures(ours.seen, from_agents_items), ours_s),
    }
    _report(benchmark, f"trigger {trigger:,} target {target:,}; {len(FILES)} runs", rows)
    assert rows["none"][0]["calls"] == rows["CompactionSession"][0]["calls"]


# --------------------------------------------------------------------------- Google ADK


class _ReadingLlm(BaseLlm):
    """Reads the file the last user text names, then says it did; records each request."""

    seen: list[list[Any]] = []

    async def generate_content_async(
        self, llm_request: LlmRequest, stream: bool = False
    ) -> AsyncGenerator[LlmResponse, None]:
        contents = list(llm_request.contents)
        self.seen.append(contents)
        last = contents[-1].parts[0] if contents and contents[-1].parts else None
        if last is not None and last.function_response is not None:
            part = types.Part(text="Read it.")
        else:
            path = (last.text or "").split()[-1] if last is not None else ""
            call = types.FunctionCall(
                id=f"call_{len(self.seen)}", name="read_file", args={"path": path}
            )
            part = types.Part(function_call=call)
        yield LlmResponse(content=types.Content(role="model", parts=[part]))


class _SummaryLlm(BaseLlm):
    """ADK's summarizer model: records what it is asked to summarize, answers a fixed summary."""

    seen: list[list[Any]] = []

    async def generate_content_async(
        self, llm_request: LlmRequest, stream: bool = False
    ) -> AsyncGenerator[LlmResponse, None]:
        self.seen.append(list(llm_request.contents))
        text = "The user asked to read modules of compactkit; each was read."
        yield LlmResponse(content=types.Content(role="model", parts=[types.Part(text=text)]))


def _adk_session(callback: Any, compaction: Any) -> tuple[_ReadingLlm, _SummaryLlm, float]:
    model, summarizer = _ReadingLlm(model="scripted", seen=[]), _SummaryLlm(model="s", seen=[])
    agent = LlmAgent(
        name="reviewer", model=model, tools=[read_file], before_model_callback=callback
    )
    config = (
        EventsCompactionConfig(summarizer=LlmEventSummarizer(llm=summarizer), **compaction)
        if compaction
        else None
    )
    app = App(name="bench", root_agent=agent, events_compaction_config=config)
    runner = AdkRunner(app=app, session_service=InMemorySessionService())

    async def go() -> None:
        session = await runner.session_service.create_session(app_name="bench", user_id="u")
        for path in FILES:
            message = types.Content(role="user", parts=[types.Part(text=f"Read {path}")])
            async for _ in runner.run_async(
                user_id="u", session_id=session.id, new_message=message
            ):
                pass

    start = time.perf_counter()
    asyncio.run(go())
    return model, summarizer, time.perf_counter() - start


def test_adk_callback_against_events_compaction(benchmark: Any) -> None:
    trigger, target = budget()
    plain, _, plain_s = _adk_session(None, None)
    events = {"compaction_interval": 3, "overlap_size": 1}
    theirs, summarizer, theirs_s = _adk_session(None, events)

    def run() -> tuple[_ReadingLlm, _SummaryLlm, float]:
        return _adk_session(CompactionCallback(trigger=trigger, target=target), None)

    ours, _, ours_s = benchmark.pedantic(run, rounds=1, iterations=1)
    summaries = _figures(summarizer.seen, from_adk_contents)
    rows = {
        "none": (_figures(plain.seen, from_adk_contents), plain_s),
        "events compaction": (_figures(theirs.seen, from_adk_contents), theirs_s),
        "CompactionCallback": (_figures(ours.seen, from_adk_contents), ours_s),
    }
    _report(benchmark, f"trigger {trigger:,} target {target:,}; {len(FILES)} invocations", rows)
    print(
        f"{'its summarizer':>18}: {int(summaries['calls'])} calls, "
        f"{int(summaries['tokens']):,} tokens, ${summaries['cost']:.4f}"
    )
    benchmark.extra_info["events compaction summarizer"] = summaries
    assert rows["none"][0]["calls"] == rows["CompactionCallback"][0]["calls"]
