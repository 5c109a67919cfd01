"""Replay on real sessions: pricing of the cached prefix, per-call figures, repeated compactions."""

from __future__ import annotations

import re

import pytest

import compactkit
import compactkit.recovery
from compactkit.bench.pricing import PROFILES, get_profile
from compactkit.bench.replay import call_points, run_session
from compactkit.errors import ConfigError
from compactkit.pipeline import Pipeline, get_strategy
from compactkit.tokens import TiktokenTokenizer, TokenCounter

from ..conftest import sample


def test_pricing_profiles_bill_the_cached_prefix_as_documented() -> None:
    anthropic, openai = get_profile("anthropic"), get_profile("openai")
    # 10,000-token prompt, 8,000 of them the previous prompt, 500 output tokens
    assert anthropic.cost(10_000, 8_000, 500) == pytest.approx(
        (8_000 * 3.0 * 0.1 + 2_000 * 3.0 * 1.25 + 500 * 15.0) / 1e6
    )
    # OpenAI caches from 1,024 tokens in 128-token steps: 8,000 -> 1,024 + 54 * 128 = 7,936
    assert openai.billable_cached(8_000) == 7_936
    assert openai.billable_cached(1_000) == 0
    assert openai.cost(10_000, 8_000, 500) == pytest.approx(
        (7_936 * 2.0 * 0.25 + 2_064 * 2.0 + 500 * 8.0) / 1e6
    )
    with pytest.raises(ConfigError, match="unknown pricing profile"):
        get_profile("acme")
    assert {"anthropic", "openai"} <= set(PROFILES)


def test_replay_of_no_compaction_matches_an_independent_count() -> None:
    ctx = compactkit.load_one(sample("test-repo-i1"))
    counter = TokenCounter(TiktokenTokenizer("o200k_base"))
    result = run_session("s", ctx, Pipeline([]), "persistent", counter, [get_profile("anthropic")])
    points = call_points(ctx)
    prompts = [counter.context(ctx.with_messages(ctx.messages[:i])) for i in points]
    assert [c.prompt_tokens for c in result.calls] == prompts
    # with no compaction, each prompt starts with the whole previous prompt
    assert [c.cached_tokens for c in result.calls] == [0, *prompts[:-1]]
    assert result.prompt_tokens == sum(prompts)
    assert result.retention["share"] == 1.0
    assert result.violations == 0


def test_a_prefix_rewriting_strategy_shows_its_real_cost() -> None:
    ctx = compactkit.load_one(sample("sphinx-doc"))
    counter = TokenCounter(TiktokenTokenizer("o200k_base"))
    profiles = [get_profile("anthropic")]
    none = run_session("s", ctx, Pipeline([]), "view", counter, profiles)
    masked = run_session(
        "s",
        ctx,
        Pipeline([get_strategy("observation-mask", keep_last=1, min_tokens=1)]),
        "view",
        counter,
        profiles,
    )
    # fewer prompt tokens, but the moving mask breaks the cached prefix on every call
    assert masked.prompt_tokens < none.prompt_tokens
    assert masked.cached_tokens / masked.prompt_tokens < none.cached_tokens / none.prompt_tokens


def _nesting(store: dict[str, str]) -> int:
    """How many marker levels deep the recovery store goes."""
    refs = {
        k: set(re.findall(r'"etag":"([0-9a-f]{16})"', v)) & store.keys() for k, v in store.items()
    }

    def depth(key: str, seen: frozenset[str]) -> int:
        return 1 + max((depth(c, seen | {c}) for c in refs[key] - seen), default=0)

    return max((depth(k, frozenset({k})) for k in store), default=0)


@pytest.mark.parametrize("name", ["sliding-window", "llm-summary"])
def test_many_persistent_compactions_stay_flat_and_recoverable(name: str) -> None:
    ctx = compactkit.load_one(sample("pi-mono"))
    counter = TokenCounter(TiktokenTokenizer("o200k_base"))
    strategy = get_strategy(name, max_tokens=8000)
    result = run_session(
        "pi",
        ctx,
        Pipeline([strategy]),
        "persistent",
        counter,
        [get_profile("openai")],
        trigger=8000,
    )
    assert result.compactions >= 5
    assert result.violations == 0
    assert result.recoverability["share"] == 1.0
    # the same loop by hand: every compaction stores one flat window, not one level more
    history = ctx.with_messages(())
    for msg in ctx.messages:
        history = history.append(msg)
        if compactkit.count_tokens(history) > 8000:
            history = strategy.compact(history)
    assert _nesting(history.recovery) <= 2
    assert compactkit.recovery.expand(history) == ctx
