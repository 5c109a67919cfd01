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
from compactkit import (
    AgentContext,
    Message,
    TextBlock,
    ToolCallBlock,
    ToolResultBlock,
)
from compactkit.bench.pricing import PROFILES, get_profile
from compactkit.bench.replay import call_points, run_session
from compactkit.bench.retention import FACT_KINDS, FactRetention, extract_facts
from compactkit.bench.runner import PipelineSpec, parse_pipeline, run_bench
from compactkit.cli import make_cli
from compactkit.errors import ConfigError
from compactkit.pipeline import Pipeline, get_strategy
from compactkit.registry import make_registry
from compactkit.tokens import TiktokenTokenizer, TokenCounter

from .conftest import SAMPLES, every_conversation, sample

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


def test_none_keeps_every_fact_of_every_corpus_conversation() -> None:
    """Facts are what the model saw in the original, so the unchanged context keeps them all."""
    kinds: dict[str, int] = {}
    for name, ctx in every_conversation():
        kept, recovered = FactRetention().score(ctx, ctx)
        for kind, (got, total) in kept.by_kind.items():
            assert got == total, f"{name}: {kind} {got}/{total}"
            kinds[kind] = kinds.get(kind, 0) + total
        assert recovered.share == 1.0, name
    assert set(kinds) == set(FACT_KINDS) and min(kinds.values()) > 0
    assert kinds["user_message"] >= kinds["task"]


def _said(text: str) -> Message:
    return Message(role="user", content=(TextBlock(text=text),))


def test_a_dropped_user_message_lowers_user_retention() -> None:
    ctx = compactkit.load_one(sample("pi-mono"))
    said = [i for i, m in enumerate(ctx.messages) if m.is_human]
    assert len(said) >= 5
    dropped = said[3]
    # the message replaced by something else the model sees: one user message fewer
    out = ctx.with_messages(
        (*ctx.messages[:dropped], _said("(removed)"), *ctx.messages[dropped + 1 :])
    )
    kept, recovered = FactRetention().score(ctx, out)
    total = kept.by_kind["user_message"][1]
    assert total == len({" ".join(ctx.messages[i].text.split())[:1000] for i in said})
    assert kept.by_kind["user_message"] == [total - 1, total]
    assert kept.kind_share("path") == 1.0 and recovered.by_kind["user_message"][0] == total - 1
    # cut to its first 100 characters, a message is not retained either
    text = ctx.messages[said[1]].text
    assert len(text) > 100
    shortened = ctx.with_messages(
        (*ctx.messages[: said[1]], _said(text[:100]), *ctx.messages[said[1] + 1 :])
    )
    assert FactRetention().score(ctx, shortened)[0].by_kind["user_message"] == [total - 1, total]
    # harness text in a user turn is not the user's words: no fact, whatever happens to it
    harness = ctx.with_messages(
        (
            *ctx.messages,
            Message(
                role="user",
                content=(TextBlock(text="<system-reminder>tests pass</system-reminder>"),),
                metadata={"origin": "harness"},
            ),
        )
    )
    assert all(
        f.kind != "user_message" or "system-reminder" not in f.text for f in extract_facts(harness)
    )


def test_facts_are_only_what_the_model_saw() -> None:
    call = ToolCallBlock(id="c1", name="bash", input={"command": "cd app && cat src/io.py | head"})
    edit = ToolCallBlock(id="c2", name="edit", input={"file_path": "src/api.py", "old": "a"})
    failed = ToolResultBlock(
        tool_call_id="c1",
        content=(
            TextBlock(
                text="<returncode>1</returncode>\n<output>\nTraceback (most recent call last):\n"
                '  File "src/io.py", line 3\n    raise ValueError(x)\nValueError: bad header\n'
                "npm error Lifecycle script `test` failed with error:\n</output>"
            ),
        ),
    )
    ok = ToolResultBlock(tool_call_id="c2", content=(TextBlock(text="Exit code: 0\nerror: none"),))
    ctx = AgentContext(
        system_instruction="You are a coding agent.",
        messages=(
            Message(
                role="user",
                content=(TextBlock(text="Fix the header parsing"),),
                metadata={"cwd": "/home/me/secret-path.py"},
            ),
            Message(role="assistant", content=(call, edit)),
            Message(role="tool", content=(failed, ok)),
        ),
        recovery={
            "0123456789abcdef": '[{"role":"user","content":[{"type":"text","text":"x.py"}]}]'
        },
    )
    facts = {(f.kind, f.text) for f in extract_facts(ctx)}
    assert facts == {
        ("task", "Fix the header parsing"),
        ("user_message", "Fix the header parsing"),
        ("last_instruction", "Fix the header parsing"),
        ("path", "src/io.py"),
        ("path", "src/api.py"),
        ("error", "ValueError: bad header"),  # the report, not the npm wrapper or the source line
    }


def test_the_scorer_imports_nothing_from_what_it_judges() -> None:
    """The scorer's extraction is its own: no module it imports (directly or through other
    compactkit modules) is a summarizer or a strategy."""
    import ast
    import importlib.util

    def is_module(name: str) -> bool:
        try:
            return importlib.util.find_spec(name) is not None
        except ModuleNotFoundError:  # `package.module.attribute`
            return False

    seen: set[str] = set()
    todo = ["compactkit.bench.retention"]
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        spec = importlib.util.find_spec(name)
        assert spec is not None and spec.origin is not None
        tree = ast.parse(Path(spec.origin).read_text(encoding="utf-8"))
        package = name if spec.origin.endswith("__init__.py") else name.rpartition(".")[0]
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom):
                base = importlib.util.resolve_name("." * node.level + (node.module or ""), package)
                found = [base] + [f"{base}.{a.name}" for a in node.names]
            elif isinstance(node, ast.Import):
                found = [a.name for a in node.names]
            else:
                continue
            for module in found:
                if module.startswith("compactkit") and is_module(module):
                    todo.append(module)
    assert "compactkit.recovery" in seen and "compactkit.context" in seen
    judged = sorted(
        m for m in seen if m.startswith(("compactkit.summarize", "compactkit.strategies"))
    )
    assert judged == []


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
