"""The OpenAI Agents SDK adapter against the SDK's own local compaction (`ToolOutputTrimmer` as
`call_model_input_filter`) and against none, over the same scripted session: twelve
`Runner.run` calls, each asking to read one module of the repository (the model calls
`read_file`, then answers). For every model call: prompt tokens (o200k_base), the prefix shared
with the previous call, and the cost under the OpenAI pricing profile (cached input 0.25x from
1,024 tokens in 128-token steps); all three in one run."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest

pytest.importorskip("agents")

from agents import Agent, RunConfig, Runner, SQLiteSession, function_tool
from agents.extensions import ToolOutputTrimmer

from compactkit.bench.pricing import get_profile
from compactkit.bench.replay import prefix_tokens
from compactkit.integrations.openai_agents import CompactionSession, from_agents_items
from compactkit.tokens import get_counter
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


def _figures(model: ScriptedModel) -> dict[str, float]:
    counter = get_counter("o200k_base")
    tokens = cached = 0
    cost = 0.0
    prev = None
    for call in model.seen:
        ctx = from_agents_items(call)
        prompt = counter.context(ctx)
        prefix = prefix_tokens(prev, ctx, counter)
        tokens += prompt
        cached += PROFILE.billable_cached(prefix)
        cost += PROFILE.cost(prompt, prefix, 0)
        prev = ctx
    return {"calls": len(model.seen), "tokens": tokens, "cached": cached, "cost": cost}


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
        "none": (_figures(plain), plain_s),
        "ToolOutputTrimmer": (_figures(trimmed), trimmed_s),
        "CompactionSession": (_figures(ours), ours_s),
    }
    print(f"\ntrigger {trigger:,} target {target:,}; {len(FILES)} runs")
    for name, (fig, seconds) in rows.items():
        print(
            f"{name:>18}: {int(fig['calls'])} calls, {int(fig['tokens']):,} tokens sent, "
            f"{int(fig['cached']):,} billed cached, ${fig['cost']:.4f}, {seconds:.2f} s"
        )
        benchmark.extra_info[name] = {**fig, "seconds": seconds}
    assert rows["none"][0]["calls"] == rows["CompactionSession"][0]["calls"]
