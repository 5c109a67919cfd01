"""The arrival stage: strategies that run once on each new message as it is appended (Session,
the bench's persistent replay), held to their contract by the pipeline and the conformance kit,
and named in the spec language (`default:arrival=on|off`)."""

from __future__ import annotations

from pathlib import Path

import pytest

import compactkit
from compactkit import (
    AgentContext,
    ContractViolation,
    Message,
    Pipeline,
    Session,
    StrategyOptions,
    TextBlock,
    ToolCallBlock,
    ToolResultBlock,
    message,
)
from compactkit.bench.pricing import PROFILES
from compactkit.bench.replay import SessionResult, call_points, run_session
from compactkit.errors import ConfigError
from compactkit.recovery import expand, put
from compactkit.registry import get_counter
from compactkit.spec import parse_pipeline
from compactkit.testing import check_strategy

from .conftest import sample

LONG = "\n".join(f"line {n}: some output of the tool" for n in range(200))


def _turn(cid: str, text: str, command: str = "make") -> list[Message]:
    call = ToolCallBlock(id=cid, name="bash", input={"command": command})
    result = ToolResultBlock(tool_call_id=cid, content=(TextBlock(text=text),))
    return [
        Message(role="assistant", content=(call,)),
        Message(role="tool", content=(result,)),
    ]


@compactkit.strategy("first-line", stage="arrival")
def first_line(ctx: AgentContext, options: StrategyOptions) -> AgentContext:
    """Keep the first line of each new tool output (a third party's arrival strategy)."""
    if not ctx.messages or ctx.messages[-1].role != "tool":
        return ctx
    store = dict(ctx.recovery)
    blocks = []
    for _, result, _ in compactkit.new_results(ctx):
        text = result.text
        if "\n" not in text or not all(isinstance(p, TextBlock) for p in result.content):
            blocks.append(result)
            continue
        etag = put(store, result.content)
        shown = compactkit.ElidedBlock(etag=etag, ref="tool output", text=text.split("\n")[0])
        blocks.append(result.model_copy(update={"content": (shown,)}))
    last = ctx.messages[-1]
    return compactkit.replace_last(ctx, last.model_copy(update={"content": tuple(blocks)}), store)


@compactkit.strategy("rewrites-history", stage="arrival")
def rewrites_history(ctx: AgentContext, options: StrategyOptions) -> AgentContext:
    """Breaks the contract: changes the first message on every arrival."""
    first = message("user", "not what the user said")
    return ctx.with_messages([first, *ctx.messages[1:]]) if len(ctx.messages) > 1 else ctx


class _Growing(compactkit.Strategy):
    """Breaks the contract: each run adds a line to the new assistant message."""

    name = "growing"
    stage = "arrival"

    def compact(self, ctx: AgentContext) -> AgentContext:
        last = ctx.messages[-1]
        if last.role != "assistant":
            return ctx
        grown = (*last.content, TextBlock(text="+"))
        return compactkit.replace_last(ctx, last.model_copy(update={"content": grown}))


def test_a_pipeline_keeps_the_two_stages_apart() -> None:
    pipeline = Pipeline([first_line(), compactkit.SlidingWindow(max_tokens=100)])
    assert [s.name for s in pipeline.arrival] == ["first-line"]
    assert [s.name for s in pipeline.strategies] == ["sliding-window"]
    start = AgentContext(messages=(message("user", "build it"),))
    arrived = pipeline.arrive(start, _turn("c1", LONG))
    assert arrived.messages[0] is start.messages[0]
    assert compactkit.render(arrived, "openai-chat")  # a valid context a provider accepts
    shown = arrived.messages[-1].tool_results[0].content[0]
    assert (
        isinstance(shown, compactkit.ElidedBlock)
        and shown.text == "line 0: some output of the tool"
    )
    assert expand(arrived).messages[-1].tool_results[0].text == LONG
    # the trigger-time stage never runs the arrival strategy
    assert (
        pipeline.run(AgentContext(messages=(message("user", "x"), *_turn("c", LONG))))
        .steps[0]
        .strategy.startswith("sliding-window")
    )


def test_session_append_folds_each_message_once_and_the_log_resumes_as_it_was(
    tmp_path: Path,
) -> None:
    session = Session(pipeline=Pipeline([first_line()]), trigger=100_000)
    session.save(tmp_path / "s.jsonl")
    session.append(message("user", "build it"), *_turn("c1", LONG))
    assert session.tokens == get_counter("o200k_base").context(session.context)
    assert session.tokens < 100
    session.close()
    loaded = Session.load(tmp_path / "s.jsonl", pipeline=Pipeline([first_line()]))
    assert loaded.context == session.context
    assert expand(loaded.context).messages[-1].tool_results[0].text == LONG
    # the transcript keeps the messages as the agent appended them
    transcript = compactkit.load_one(tmp_path / "s.jsonl")
    assert transcript.messages[-1].tool_results[0].text == LONG
    loaded.close()


@pytest.mark.parametrize(
    ("strategy", "rule"),
    [(rewrites_history(), "arrival-changed-sent"), (_Growing(), "arrival-not-idempotent")],
)
def test_a_plugin_that_breaks_the_arrival_contract_is_stopped(
    strategy: compactkit.Strategy, rule: str
) -> None:
    start = AgentContext(messages=(message("user", "build it"),))
    with pytest.raises(ContractViolation, match=rule):
        Pipeline([strategy]).arrive(start, [message("assistant", "ok"), message("user", "so?")])


def test_the_conformance_kit_replays_an_arrival_strategy_message_by_message() -> None:
    ctx = compactkit.load_one(sample("gemini3pro"))
    assert check_strategy(first_line(), ctx, runs=2) == []
    problems = check_strategy(rewrites_history(), ctx, runs=2)
    assert problems and "arrival-changed-sent" in problems[0]
    assert any("arrival-not-idempotent" in p for p in check_strategy(_Growing(), ctx, runs=2))


def test_the_spec_says_whether_default_runs_its_arrival_stage() -> None:
    on = parse_pipeline("default:arrival=on", budget=15_000).strategies
    off = parse_pipeline("default:arrival=off", budget=15_000).strategies
    assert on[: len(on) - len(off)] == ("fold-json", "fold-listings", "fold-logs", "fold-repeats")
    assert on[len(on) - len(off) :] == off
    assert "fold-repeats" not in off
    with pytest.raises(ConfigError, match=r"arrival=on\|off"):
        parse_pipeline("default:arrival=maybe")
    pipeline = compactkit.build_pipeline(["default:arrival=on"], budget=15_000)
    assert [s.name for s in pipeline.arrival] == [
        "fold-json",
        "fold-listings",
        "fold-logs",
        "fold-repeats",
    ]
    assert "fold-repeats" not in [s.name for s in pipeline.strategies]


def _replayed(ctx: AgentContext, trigger: int) -> dict[str, SessionResult]:
    """The bench's persistent replay of `ctx` under the default with its arrival stage ("on")
    and without it ("off"), built as a `Session` builds it, priced as Anthropic and OpenAI
    bill."""
    return {
        arrival: run_session(
            "s",
            ctx,
            Session(pipeline=f"default:arrival={arrival}", trigger=trigger).pipeline,
            "persistent",
            get_counter("o200k_base"),
            [PROFILES["anthropic"], PROFILES["openai"]],
            trigger=trigger,
        )
        for arrival in ("on", "off")
    }


def test_the_persistent_replay_folds_each_appended_message() -> None:
    """A session that never reaches the trigger: every call is sent the folded outputs."""
    results = _replayed(compactkit.load_one(sample("gemini3pro")), 1_000_000)
    on, off = results["on"], results["off"]
    assert on.prompt_tokens < 0.95 * off.prompt_tokens
    assert on.cost["anthropic"] < 0.97 * off.cost["anthropic"]
    assert on.compactions == off.compactions == 0
    assert on.retention["share"] == off.retention["share"] == 1.0
    assert on.recoverability["share"] == 1.0
    assert on.violations == 0


def _compactions(
    ctx: AgentContext, spec: str, trigger: int, reload: tuple[Path, int] | None = None
) -> list[int]:
    """The model calls (indexes of the session's answers) before which a `Session` running
    `spec` compacted, appending the session's messages as an agent does; with `reload` (a path
    and a message index), the session is saved there and loaded again past that message."""
    session = Session(ctx.replace(messages=()), pipeline=spec, trigger=trigger)
    if reload is not None:
        session.save(reload[0])
    messages, consumed, compacted = ctx.messages, 0, []
    for index in call_points(ctx):
        session.append(*messages[consumed:index])
        if reload is not None and index > reload[1]:
            session.close()
            session, reload = Session.load(reload[0]), None
        if session.compact_if_needed() is not None:
            compacted.append(index)
        session.append(messages[index])
        consumed = index + 1
    session.close()
    return compacted


def test_arrival_does_not_put_a_compaction_off(tmp_path: Path) -> None:
    """Arrival makes each message smaller as it comes; the policy asks whether a compaction is
    due of the history plus what arrival took off its messages (since the last compaction, and
    the folds that compaction kept), so no compaction falls later with arrival than without it
    (else the calls meanwhile send a large cached prompt where a compacted one is small: the
    session below cost 1.02x/1.04x what it cost without arrival, its first compaction 18 calls
    later), in the bench, in a `Session` and in one resumed from its log between compactions;
    and the session costs less with arrival, not more."""
    ctx = compactkit.load_one(sample("sphinx"))
    runs = _replayed(ctx, 30_000)
    on, off = ([c.message for c in runs[a].calls if c.compacted] for a in ("on", "off"))
    # the first where it was; each after it no later (what a compaction kept is weighed as it
    # arrived, and with its folds it keeps more messages than without them)
    assert len(off) > 1 and on[0] == off[0]
    assert len(on) >= len(off) and all(a <= b for a, b in zip(on, off, strict=False))

    def before(arrival: str) -> int:  # prompt tokens sent up to the first compaction
        return sum(c.prompt_tokens for c in runs[arrival].calls if c.message < off[0])

    assert before("on") < before("off")  # folded, the compaction where it was
    for profile in ("anthropic", "openai"):
        assert runs["on"].cost[profile] < runs["off"].cost[profile]
    # a Session compacts where the bench does, and so does one resumed from its log between
    # compactions
    assert _compactions(ctx, "default:arrival=off", 30_000) == off
    assert _compactions(ctx, "default:arrival=on", 30_000) == on
    between = (on[0] + on[1]) // 2
    assert _compactions(ctx, "default:arrival=on", 30_000, (tmp_path / "s.jsonl", between)) == on
