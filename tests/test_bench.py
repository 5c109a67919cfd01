"""The benchmark harness on real sessions: replay figures, pricing, retention, reports, workers."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

import compactkit
import compactkit.recovery
from compactkit.bench.pricing import PROFILES, get_profile
from compactkit.bench.replay import call_points, run_session
from compactkit.bench.retention import FactRetention, extract_facts
from compactkit.bench.runner import PipelineSpec, parse_pipeline, run_bench
from compactkit.cli import make_cli
from compactkit.errors import ConfigError
from compactkit.pipeline import Pipeline, get_strategy
from compactkit.registry import make_registry
from compactkit.tokens import TiktokenTokenizer, TokenCounter

from .conftest import SAMPLES, sample

SPECS = [
    parse_pipeline("observation-mask:keep_last=5", []),
    parse_pipeline("sliding-window:max_tokens=20000", []),
]


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


def test_retention_counts_what_the_model_can_still_see() -> None:
    ctx = compactkit.load_one(sample("sphinx-doc"))
    facts = extract_facts(ctx)
    kinds = {f.kind for f in facts}
    assert {"task", "last_instruction", "path", "error"} <= kinds
    assert facts[0].kind == "task" and facts[0].text in " ".join(ctx.task.split())
    out = get_strategy("sliding-window", max_tokens=15_000).compact(ctx)
    kept, recovered = FactRetention().score(ctx, out)
    assert kept.kind_share("task") == 1.0
    assert kept.share < 1.0  # the dropped middle held paths and errors
    assert recovered.share == 1.0  # expand brings everything back


def _strip_seconds(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _strip_seconds(v) for k, v in value.items() if k != "seconds"}
    if isinstance(value, list):
        return [_strip_seconds(v) for v in value]
    return value


def test_workers_give_identical_results() -> None:
    paths = [str(sample("sphinx-doc")), str(sample("tau_bench")), str(sample("resolver_mock"))]
    one = run_bench(paths, SPECS, trigger=20_000, workers=1)
    two = run_bench(paths, SPECS, trigger=20_000, workers=2)
    assert _strip_seconds(one) == _strip_seconds(two)
    assert next(p["name"] for p in one["pipelines"]) == "none"
    sessions = {s["session"] for s in one["sessions"]}
    assert len(sessions) == 1 + 3 + 2  # tau-bench and the resolver file hold several


def test_bench_command_writes_json_markdown_and_html(tmp_path: Path) -> None:
    broken = tmp_path / "broken.json"
    broken.write_text('{"not": "a session"}')
    cli = make_cli(lambda: make_registry(entry_points=False))
    out = tmp_path / "r"
    result = CliRunner().invoke(
        cli,
        [
            "bench",
            str(sample("sphinx-doc")),
            str(broken),
            "-s",
            "observation-mask:keep_last=5",
            "-s",
            "sliding-window:max_tokens=20000",
            "--trigger",
            "20000",
            "--json",
            f"{out}.json",
            "--markdown",
            f"{out}.md",
            "--html",
            f"{out}.html",
        ],
    )
    assert result.exit_code == 0, result.output
    report = json.loads(Path(f"{out}.json").read_text())
    assert report["schema"] == "compactkit.bench/1"
    assert report["failed"] and "unknown session format" in report["failed"][0]["error"]
    for session in report["sessions"]:
        for key in ("prompt_tokens", "cached_tokens", "cost", "retention", "violations", "seconds"):
            assert key in session
        assert set(session["cost"]) == {"anthropic", "openai"}
    names = [p["name"] for p in report["pipelines"]]
    assert names == ["none", "observation-mask:keep_last=5", "sliding-window:max_tokens=20000"]
    page = Path(f"{out}.html").read_text()
    assert "<svg" in page and "polyline" in page and "<script" not in page
    assert "http://" not in page.replace('xmlns="http://www.w3.org/2000/svg"', "")
    assert "| none |" in Path(f"{out}.md").read_text()
    assert "sliding-window" in result.stdout


def test_bench_rejects_unknown_strategies_and_profiles() -> None:
    cli = make_cli(lambda: make_registry(entry_points=False))
    result = CliRunner().invoke(cli, ["bench", str(SAMPLES), "-s", "nope"])
    assert result.exit_code == 2 and "unknown strategy 'nope'" in result.stderr
    result = CliRunner().invoke(cli, ["bench", str(SAMPLES), "--pricing", "acme"])
    assert result.exit_code == 2 and "unknown pricing profile" in result.stderr
    assert parse_pipeline("none", []) == PipelineSpec("none", ())


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


class _TaskLengthScorer:
    """A third-party scorer: is the task still visible, scored on its own."""

    name = "task-only"
    description = "the task, alone"

    def score(self, original: Any, compacted: Any, stash: Any = None) -> Any:
        from compactkit.bench.retention import Fact, score_facts, visible_text

        facts = [Fact("task", " ".join(original.task.split())[:200])]
        return score_facts(facts, visible_text(compacted)), score_facts(
            facts, visible_text(compactkit.recovery.expand(compacted))
        )


class _BrokenScorer:
    name = "broken"
    description = "raises"

    def score(self, original: Any, compacted: Any, stash: Any = None) -> Any:
        raise RuntimeError("scorer bug")


class _ScorerPlugin:
    @compactkit.hookimpl
    def register_scorers(self, register: Any) -> None:
        register(_TaskLengthScorer())
        register(_BrokenScorer())


def test_scorer_plugins_are_reported_and_cannot_break_a_run() -> None:
    registry = make_registry(entry_points=False, plugins=[_ScorerPlugin()])
    assert registry.scorers.names() == ["broken", "facts", "task-only"]
    report = run_bench([str(sample("sphinx-doc"))], SPECS[1:], trigger=20_000, registry=registry)
    for session in report["sessions"]:
        assert session["scores"]["task-only"]["retention"]["share"] == 1.0
        assert "scorer bug" in session["scores"]["broken"]["error"]
        assert "facts" not in session["scores"]  # the built-in one fills `retention` itself
