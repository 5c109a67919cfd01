"""Summaries are paid for: a compaction whose summary a model would write in production records a
summarizer call in the replay (its input, cached where it shares the conversation's prefix, and
its output), counted in the session's cost; the extractive summarizer costs nothing and the report
says so."""

from __future__ import annotations

from typing import Any

import compactkit
from compactkit import AgentContext, Strategy, SummaryBlock, SummaryCall
from compactkit.bench.pricing import get_profile
from compactkit.bench.report import render_markdown, summary_rows
from compactkit.bench.runner import run_bench
from compactkit.registry import DEFAULT_PLUGINS, make_registry
from compactkit.spec import parse_pipeline
from compactkit.summarize import SYSTEM_PROMPT, Summarizer
from compactkit.tokens import TokenCounter

from ..conftest import sample

PI = str(sample("pi-mono_before-compaction"))


def _bench(
    *names: str, registry: Any = None, mode: Any = "persistent", policy: Any = "pays"
) -> dict[str, Any]:
    specs = [parse_pipeline(n, None, trigger=30_000) for n in names]
    return run_bench([PI], specs, trigger=30_000, registry=registry, mode=mode, policy=policy)


def _session(report: dict[str, Any], name: str) -> dict[str, Any]:
    (row,) = [s for s in report["sessions"] if s["pipeline"] == name]
    return row


def _calls_cost(session: dict[str, Any], profile: str) -> float:
    pricing = get_profile(profile)
    return sum(pricing.cost(tokens, cached, out) for _, tokens, cached, out, _ in session["calls"])


def test_peers_that_summarize_with_a_model_pay_for_it() -> None:
    report = _bench("default", "peer-claude-code", "peer-pi", "peer-anthropic-clear")
    claude, pi = _session(report, "peer-claude-code"), _session(report, "peer-pi")
    for row in (claude, pi):
        used = row["summarizer"]
        assert used["calls"] == row["compactions"] >= 1
        assert used["input_tokens"] > used["output_tokens"] > 0
        for profile in ("anthropic", "openai"):
            # the session's cost is its model calls' plus its summarizer calls'
            assert used["cost"][profile] > 0
            total = _calls_cost(row, profile) + used["cost"][profile]
            assert abs(row["cost"][profile] - total) < 1e-5
    # Claude Code sends the conversation, then its instruction: nearly all of it read from cache;
    # pi serializes the window into a prompt of its own: nothing cached
    assert claude["summarizer"]["cached_tokens"] > 0.8 * claude["summarizer"]["input_tokens"]
    assert pi["summarizer"]["cached_tokens"] == 0
    # the default's summary is extractive: no call, and the report says so
    default = _session(report, "default")
    assert default["compactions"] >= 1
    assert default["summarizer"]["calls"] == 0
    assert default["summarizer"]["note"] == "extractive: no model call"
    assert abs(default["cost"]["anthropic"] - _calls_cost(default, "anthropic")) < 1e-5
    # clearing writes no summary at all: no call, no note
    assert _session(report, "peer-anthropic-clear")["summarizer"] == {
        "calls": 0,
        "input_tokens": 0,
        "cached_tokens": 0,
        "output_tokens": 0,
        "cost": {"anthropic": 0.0, "openai": 0.0},
    }
    by_name = {p["name"]: p["totals"] for p in report["pipelines"]}
    assert by_name["peer-pi"]["summarizer"]["calls"] == pi["summarizer"]["calls"]
    assert by_name["default"]["summarizer"]["note"] == "extractive: no model call"
    rows = {r["pipeline"]: r for r in summary_rows(report)}
    assert rows["peer-pi"]["summarizer"].startswith(f"{pi['summarizer']['calls']} calls, $")
    assert rows["default"]["summarizer"] == "none (extractive)"
    header = next(line for line in render_markdown(report).splitlines() if "| saved |" in line)
    assert "| summarizer |" in header


def test_a_summary_call_is_priced_input_cached_and_output() -> None:
    anthropic, openai = get_profile("anthropic"), get_profile("openai")
    assert anthropic.summary_cost(10_000, 8_000, 1_000) * 1e6 == 8_000 * 0.3 + 2_000 * 3 + 15_000
    # OpenAI bills cache in 128-token steps from 1,024
    assert openai.summary_cost(10_000, 1_100, 0) * 1e6 == 1_024 * 0.5 + 8_976 * 2


class _Echo(Summarizer):
    name = "echo-model"
    description = "stands for a model backend"

    def summarize(self, request: Any) -> str:
        return f"summary of {len(request.messages)} messages"


class _Plugin:
    @compactkit.hookimpl
    def register_summarizers(self, register: Any) -> None:
        register(_Echo)


def test_llm_summary_pays_when_a_model_backend_writes_it() -> None:
    plugins = tuple(dict.fromkeys((*DEFAULT_PLUGINS, "compactkit.builtins.summarizers")))
    registry = make_registry(entry_points=False, defaults=plugins, plugins=[_Plugin()])
    model = "llm-summary:max_tokens=30000,backend=echo-model"
    # compacting to the trigger itself never pays (the policy's `cleared`): measured as written
    report = _bench(model, "llm-summary:max_tokens=30000", registry=registry, policy="always")
    paid, free = _session(report, model), _session(report, "llm-summary:max_tokens=30000")
    assert paid["summarizer"]["calls"] == paid["compactions"] >= 1
    assert free["summarizer"]["calls"] == 0 and free["summarizer"]["note"]
    counter = TokenCounter(registry.tokenizers.get("o200k_base"))
    # compactkit's summarizer prompt is the instruction; a separate prompt: nothing cached
    assert paid["summarizer"]["input_tokens"] > paid["summarizer"]["calls"] * counter.text(
        SYSTEM_PROMPT
    )
    assert paid["summarizer"]["cached_tokens"] == 0


class _ThirdParty(Strategy):
    """A third-party strategy that declares its own summarizer call through the hook."""

    name = "third-party-summary"

    def compact(self, ctx: AgentContext) -> AgentContext:
        return ctx

    def summary_call(
        self, block: SummaryBlock, before: AgentContext, after: AgentContext, counter: Any
    ) -> SummaryCall | None:
        return SummaryCall(1_000, 100, shares_prefix=True)


def test_the_hook_is_the_strategys_to_answer() -> None:
    from compactkit.bench.replay import SummarizerUse, charge_summaries
    from compactkit.pipeline import Pipeline

    ctx = compactkit.load_one(PI)
    out = compactkit.build_pipeline(["llm-summary:max_tokens=30000"]).run(ctx).context
    use = SummarizerUse()
    pipeline = Pipeline([_ThirdParty()])
    counter = TokenCounter(compactkit.get_registry().tokenizers.get("o200k_base"))
    charge_summaries(pipeline, ctx, out, counter, 5_000, [get_profile("anthropic")], use)
    assert (use.calls, use.input_tokens, use.cached_tokens, use.output_tokens) == (
        1,
        1_000,
        1_000,
        100,
    )
    charge_summaries(pipeline, ctx, out, counter, 5_000, [get_profile("anthropic")], use)
    assert use.calls == 1  # the same summary shown again is not a second call


def test_view_mode_pays_each_summary_once() -> None:
    # view mode compacts the full history before every call: each new window is a new summary
    report = _bench("peer-pi", mode="view")
    row = _session(report, "peer-pi")
    compacted = sum(c[4] for c in row["calls"])
    assert 1 <= row["summarizer"]["calls"] <= compacted
