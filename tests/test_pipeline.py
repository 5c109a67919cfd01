"""Pipelines: order, validation after every strategy, events to independent observers."""

from __future__ import annotations

from typing import Any

import pytest

import compactkit
from compactkit import AgentContext, hookimpl
from compactkit.errors import ConfigError, ContractViolation, StrategyError
from compactkit.events import CompactionFailed, StrategyApplied
from compactkit.pipeline import Pipeline, build_pipeline, get_strategy
from compactkit.registry import make_registry
from compactkit.strategy import StrategyOptions, strategy

from .conftest import sample

CTX = compactkit.load_one(sample("test-repo-i1"))


def drop_last_tool_result(ctx: AgentContext) -> AgentContext:
    """Breaks the contract: leaves a tool call unanswered in the middle."""
    index = max(i for i, m in enumerate(ctx.messages[:-2]) if m.role == "tool")
    return ctx.with_messages(ctx.messages[:index] + ctx.messages[index + 1 :])


def explode(ctx: AgentContext) -> AgentContext:
    raise RuntimeError("boom")


def test_observers_receive_every_event_and_can_unsubscribe() -> None:
    pipeline = build_pipeline(["sliding-window"], budget=6000)
    first: list[Any] = []
    second: list[Any] = []
    pipeline.subscribe(first.append)
    unsubscribe = pipeline.subscribe(second.append)
    result = pipeline.run(CTX)
    assert [e.kind for e in first] == ["started", "applied", "finished"]
    assert first == second
    applied = first[1]
    assert isinstance(applied, StrategyApplied)
    assert applied.tokens_before == compactkit.count_tokens(CTX)
    assert applied.tokens_after == compactkit.count_tokens(result.context) < applied.tokens_before
    assert applied.elided and all(len(e) == 16 for e in applied.elided)
    unsubscribe()
    pipeline.run(CTX)
    assert len(first) == 6 and len(second) == 3


def test_a_strategy_that_breaks_the_contract_is_named_with_message_and_rule() -> None:
    pipeline = Pipeline([drop_last_tool_result])
    events: list[Any] = []
    pipeline.subscribe(events.append)
    snapshot = CTX.to_json()
    with pytest.raises(ContractViolation) as info:
        pipeline.compact(CTX)
    text = str(info.value)
    assert "'drop_last_tool_result'" in text
    assert "unanswered-tool-call" in text
    assert "message " in text
    assert info.value.exit_code == 3
    assert isinstance(events[-1], CompactionFailed)
    assert CTX.to_json() == snapshot


def test_a_failing_strategy_leaves_the_context_intact() -> None:
    snapshot = CTX.to_json()
    with pytest.raises(StrategyError, match="'explode' failed: RuntimeError: boom"):
        Pipeline([get_strategy("sliding-window", max_tokens=8000), explode]).compact(CTX)
    assert CTX.to_json() == snapshot


class KeepLast(StrategyOptions):
    n: int = 4


@strategy("keep-tail", options=KeepLast)
def keep_tail(ctx: AgentContext, options: KeepLast) -> AgentContext:
    """A function strategy (deliberately naive)."""
    return ctx


def test_function_strategies_and_nested_pipelines() -> None:
    inner = Pipeline([keep_tail(n=2), get_strategy("sliding-window", max_tokens=7000)])
    outer = Pipeline([inner, get_strategy("observation-mask")])
    out = outer.compact(CTX)
    assert compactkit.count_tokens(out) <= compactkit.count_tokens(CTX)
    assert keep_tail.name == "keep-tail"
    assert keep_tail(n=3).options.n == 3


def test_bad_names_and_options_are_configuration_errors() -> None:
    with pytest.raises(ConfigError, match="unknown strategy 'nope'"):
        build_pipeline(["nope"])
    with pytest.raises(ConfigError, match="max_tokens"):
        build_pipeline(["sliding-window:max_tokens=lots"])
    with pytest.raises(ConfigError, match="options: tokenizer, max_tokens, keep_first"):
        get_strategy("sliding-window", window=3)
    with pytest.raises(ConfigError, match="bad option"):
        build_pipeline(["sliding-window:max_tokens"])


class EventPlugin:
    def __init__(self) -> None:
        self.kinds: list[str] = []

    @hookimpl
    def compaction_event(self, event: Any) -> None:
        self.kinds.append(event.kind)


class BrokenObserverPlugin:
    @hookimpl
    def compaction_event(self, event: Any) -> None:
        raise ValueError("observer bug")


def test_plugins_observe_through_the_hook_and_cannot_break_a_run(
    capsys: pytest.CaptureFixture[str],
) -> None:
    plugin = EventPlugin()
    registry = make_registry(entry_points=False, plugins=[plugin, BrokenObserverPlugin()])
    pipeline = build_pipeline(["sliding-window"], budget=6000, registry=registry)
    out = pipeline.compact(CTX)
    assert plugin.kinds == ["started", "applied", "finished"]
    assert "observer bug" in capsys.readouterr().err
    assert compactkit.count_tokens(out) < compactkit.count_tokens(CTX)


def hostile(ctx: AgentContext) -> AgentContext:
    """Mutates what it was given (frozen models still hold dicts) and returns it."""
    ctx.metadata["owned"] = True
    ctx.messages[0].metadata["owned"] = True
    return ctx


def test_a_strategy_mutating_its_input_cannot_corrupt_the_callers_context() -> None:
    snapshot = CTX.to_json()
    with pytest.raises(
        ContractViolation, match="'hostile' broke the contract: it mutated its input"
    ):
        Pipeline([hostile]).compact(CTX)
    assert CTX.to_json() == snapshot
    assert "owned" not in CTX.metadata


def cap_first_tool_output(ctx: AgentContext) -> AgentContext:
    """An outside strategy that changes exactly one message (it rebuilds that one only)."""
    index = next(i for i, m in enumerate(ctx.messages) if m.tool_results)
    msg = ctx.messages[index]
    result = msg.tool_results[0].model_copy(update={"content": (compactkit.TextBlock(text="…"),)})
    messages = list(ctx.messages)
    messages[index] = msg.model_copy(update={"content": (result, *msg.content[1:])})
    return ctx.with_messages(messages)


def rebuild_everything(ctx: AgentContext) -> AgentContext:
    """An outside strategy that returns an equal context made of new objects."""
    return AgentContext.from_native(ctx.to_native())


def test_an_outside_strategy_is_reported_by_what_it_changed_not_by_object_identity() -> None:
    pipeline = Pipeline([cap_first_tool_output, rebuild_everything])
    result = pipeline.run(CTX)
    first, second = result.steps
    assert [c.message for c in first.changes] == [
        next(i for i, m in enumerate(CTX.messages) if m.tool_results)
    ]
    assert all(c.action == "changed" for c in first.changes)
    assert second.changes == []  # an equal context rebuilt from scratch changed nothing
    # messages the strategies left alone are the caller's own objects (warm caches, no copies)
    untouched = [i for i, m in enumerate(result.context.messages) if i != first.changes[0].message]
    assert all(result.context.messages[i] is CTX.messages[i] for i in untouched)


def test_a_pipeline_built_with_a_registry_uses_it_inside_its_strategies() -> None:
    """A tokenizer that only the explicit registry knows is found by the strategies it runs."""
    from tests.fixture_plugins import words_tokenizer

    registry = make_registry(entry_points=False, plugins=[words_tokenizer])
    pipeline = build_pipeline(["sliding-window"], budget=5000, registry=registry, tokenizer="words")
    out = pipeline.run(CTX)
    assert out.tokens_after <= 5000 < out.tokens_before  # counted in words
    with pytest.raises(ConfigError, match="unknown tokenizer 'words'"):
        build_pipeline(["sliding-window"], budget=5000, tokenizer="words").run(CTX)


def test_default_names_the_default_pipeline_in_the_python_api_too() -> None:
    from compactkit import parse_pipeline

    assert (
        build_pipeline(["default"], budget=8000).label
        == build_pipeline(compactkit.default_pipeline(8000, fill=True)).label
    )
    assert parse_pipeline("default").strategies == tuple(compactkit.default_pipeline(15_000))
