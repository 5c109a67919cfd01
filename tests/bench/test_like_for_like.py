"""Like for like: every peer compacts at the bench's trigger, its keep-windows and targets the same
shares of that trigger as of its native one; `native=true` keeps the native trigger."""

from __future__ import annotations

from typing import Any

import pytest

import compactkit
from compactkit import AgentContext
from compactkit.bench.runner import run_bench
from compactkit.pipeline import get_strategy
from compactkit.recovery import expand, message_marker
from compactkit.registry import get_counter, make_registry
from compactkit.spec import PipelineSpec, parse_pipeline
from compactkit.strategies.peers import PEERS
from compactkit.tokens import TokenCounter

from ..conftest import sample

# 144 messages of a real pi session, 92,409 tokens at the end: under every native token trigger
# but Anthropic's clearing (100,000 of the full prompt is not reached either)
PI = sample("pi-mono_before-compaction")
TRIGGERED = [p.name for p in PEERS if p.trigger_option]


def _counter() -> TokenCounter:
    return get_counter()


def _prefix_over(ctx: AgentContext, tokens: int) -> AgentContext:
    counter = _counter()
    for n in range(1, len(ctx.messages) + 1):
        cut = ctx.replace(messages=ctx.messages[:n])
        if counter.context(cut) > tokens and ctx.messages[n - 1].role == "assistant":
            return cut
    raise AssertionError(f"never over {tokens} tokens")


def test_every_peer_but_the_per_call_trimmer_takes_the_trigger() -> None:
    assert sorted(TRIGGERED) == sorted(p.name for p in PEERS if p.name != "peer-openai-agents")
    spec = PipelineSpec(
        "x",
        ("peer-pi", "peer-codex:trigger=5000", "peer-adk:native=true", "sliding-window"),
        trigger=30_000,
    )
    options = [opts for _, opts in spec.steps()]
    assert options == [{"trigger": 30_000}, {"trigger": 5_000}, {"native": True}, {}]
    with pytest.raises(compactkit.ConfigError, match="give no trigger with it"):
        get_strategy("peer-pi", trigger=30_000, native=True)


def test_at_the_benchs_trigger_every_peer_compacts_and_natively_most_never_do() -> None:
    names = [*TRIGGERED, *(f"{n}:native=true" for n in TRIGGERED)]
    report = run_bench([str(PI)], [parse_pipeline(n, None) for n in names], trigger=30_000)
    by_name = {p["name"]: p["totals"] for p in report["pipelines"]}
    none = by_name["none"]
    for name in TRIGGERED:
        totals = by_name[name]
        assert totals["compactions"] >= 1, name
        assert totals["prompt_tokens"] < none["prompt_tokens"], name
        assert totals["violations"] == 0, name
    # the native triggers of the six that wait for a nearly full window are out of reach here
    for name in (
        "peer-claude-code",
        "peer-codex",
        "peer-langchain",
        "peer-pi",
        "peer-anthropic-compact",
        "peer-gemini-cli",
        "peer-anthropic-clear",
    ):
        native = by_name[f"{name}:native=true"]
        assert native["compactions"] == 0, name
        assert native["prompt_tokens"] == none["prompt_tokens"], name


def test_keep_windows_are_shares_of_the_trigger() -> None:
    ctx = compactkit.load_one(PI)
    history = _prefix_over(ctx, 30_000)
    counter = _counter()
    # pi keeps the newest 20,000 of its 183,616-token threshold: at 30,000, the newest 3,268
    pi = get_strategy("peer-pi", trigger=30_000)
    assert pi.native_trigger() == 200_000 - 16_384
    assert pi.share(20_000) == 3_268
    out = pi.compact(history)
    marker = next(i for i, m in enumerate(out.messages) if message_marker(m) is not None)
    kept = counter.messages(out.messages[marker + 1 :])
    assert 3_268 <= sum(kept) < 20_000
    assert expand(out) == history
    # Codex keeps the user's messages within 20,000 of its 244,800 tokens: at 30,000, 2,451
    codex = get_strategy("peer-codex", trigger=30_000)
    assert (codex.native_trigger(), codex.share(20_000)) == (244_800, 2_451)
    # Claude Code's files and summary: 5,000 / 50,000 / 20,000 of 167,000
    claude = get_strategy("peer-claude-code", trigger=30_000)
    assert [claude.share(n) for n in (5_000, 50_000, 20_000)] == [898, 8_982, 3_593]
    # natively nothing changes
    assert get_strategy("peer-pi").share(20_000) == 20_000
    assert get_strategy("peer-pi", native=True).at_trigger() == 183_616


def test_openhands_and_adk_compact_on_tokens_at_the_trigger() -> None:
    ctx = compactkit.load_one(PI)
    counter = _counter()
    history = _prefix_over(ctx, 30_000)
    below = history.replace(messages=history.messages[:-2])
    openhands = get_strategy("peer-openhands", trigger=30_000)
    assert openhands.compact(below) is below or counter.context(below) > 30_000
    out = openhands.compact(history)
    marker = next(i for i, m in enumerate(out.messages) if message_marker(m) is not None)
    # the tail kept: the newest events within 35 / 80 of the trigger
    assert sum(counter.messages(out.messages[marker + 1 :])) <= 30_000 * 35 // 80
    # ADK keeps its newest 5 events raw (the 7 messages above hold fewer: nothing to summarize)
    adk = get_strategy("peer-adk", trigger=30_000)
    assert adk.compact(history) is history
    out = adk.compact(ctx)
    assert len(out.messages) < len(ctx.messages)
    assert expand(out) == ctx


class _AtOptions(compactkit.StrategyOptions):
    at: int | None = None


@compactkit.strategy("compact-at", options=_AtOptions, trigger_option="at")
def _compact_at(ctx: AgentContext, options: _AtOptions) -> AgentContext:
    """Changes nothing; takes the runner's trigger."""
    return ctx


class _Plugin:
    @compactkit.hookimpl
    def register_strategies(self, register: Any) -> None:
        register(_compact_at)


def test_a_third_party_strategy_takes_the_trigger_too() -> None:
    registry = make_registry(entry_points=False, plugins=[_Plugin()])
    spec = PipelineSpec("x", ("compact-at", "compact-at:at=5"), trigger=40_000)
    assert [opts for _, opts in spec.steps(registry)] == [{"at": 40_000}, {"at": 5}]
    assert [opts for _, opts in PipelineSpec("x", ("compact-at",)).steps(registry)] == [{}]
