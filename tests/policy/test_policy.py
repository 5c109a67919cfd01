"""The default earns its place by construction: on every corpus session and on generated sessions
shaped to make a policy thrash (large pinned turns, re-sent templates, chats of user text,
sessions that end right after a compaction), at every trigger of the sweep, it never compacts on
two calls in a row, and no prefix of any replay (a session may end after any call) costs more than
1.05x sending the whole history every call, under either pricing."""

from __future__ import annotations

from collections.abc import Iterator
from itertools import accumulate, pairwise

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from compactkit import AgentContext, ConfigError
from compactkit.bench.replay import SessionResult, run_session
from compactkit.pipeline import build_pipeline
from compactkit.policy import SLACK, CompactionPolicy
from compactkit.pricing import get_profile
from compactkit.registry import get_counter
from compactkit.spec import parse_pipeline

from ..conftest import every_conversation
from . import sessions

TRIGGERS = (30_000, 60_000, 100_000, 150_000)
PROFILES = [get_profile("anthropic"), get_profile("openai")]


def _replay(ctx: AgentContext, pipeline: str, trigger: int, policy: str = "pays") -> SessionResult:
    spec = parse_pipeline(pipeline, trigger=trigger)
    return run_session(
        "s",
        ctx,
        build_pipeline(spec),
        "persistent",
        get_counter(),
        PROFILES,
        trigger=trigger,
        policy=policy,  # type: ignore[arg-type]
    )


def _running_costs(result: SessionResult, profile_name: str) -> list[float]:
    profile = get_profile(profile_name)
    return list(
        accumulate(
            profile.cost(c.prompt_tokens, c.cached_tokens, c.output_tokens) for c in result.calls
        )
    )


def _generated() -> Iterator[tuple[str, AgentContext]]:
    yield "agent-long", sessions.agent(seed=7, calls=420, lines=36)
    for name, make in sessions.ALL.items():
        yield name, make()


def _every_session() -> Iterator[tuple[str, AgentContext]]:
    yield from _generated()
    counter = get_counter()
    for name, ctx in every_conversation():
        if counter.context(ctx) > TRIGGERS[0]:  # below every trigger nothing is ever compacted
            yield name, ctx


def _problems(name: str, ctx: AgentContext, trigger: int) -> list[str]:
    ours = _replay(ctx, "default", trigger)
    none = _replay(ctx, "none", trigger)
    out = []
    flags = [c.compacted for c in ours.calls]
    if any(a and b for a, b in pairwise(flags)):
        out.append(f"{name} @ {trigger}: two compactions in a row")
    for profile in ("anthropic", "openai"):
        for k, (mine, bare) in enumerate(
            zip(_running_costs(ours, profile), _running_costs(none, profile), strict=True)
        ):
            if mine > (1 + SLACK) * bare + 1e-9:
                out.append(
                    f"{name} @ {trigger}: after call {k} it cost {mine / bare:.3f}x none ({profile})"
                )
                break
    return out


@pytest.mark.parametrize("trigger", TRIGGERS)
def test_the_default_never_thrashes_nor_costs_more_than_5_percent_over_none(trigger: int) -> None:
    problems = [p for name, ctx in _every_session() for p in _problems(name, ctx, trigger)]
    assert problems == []


def test_the_generated_sessions_reach_every_trigger_and_the_default_compacts_them() -> None:
    """The property above is not vacuous: the long generated session crosses the highest trigger,
    and the default does compact it (and saves) at every trigger of the sweep."""
    long = sessions.agent(seed=7, calls=420, lines=36)
    assert get_counter().context(long) > TRIGGERS[-1]
    for trigger in TRIGGERS:
        ours = _replay(long, "default", trigger)
        none = _replay(long, "none", trigger)
        assert ours.compactions >= 1, trigger
        assert ours.cost["anthropic"] < none.cost["anthropic"], trigger


def test_when_the_users_words_pass_the_target_the_policy_stops_the_thrash() -> None:
    """The thrash loop: the user's words alone grow past the target, so every compaction keeps
    almost all it found. Compacting whenever over the trigger (`always`, the old rule) then
    compacts again and again and costs more than not compacting at all; the policy does not."""
    ctx = sessions.pinned(words=3_000)
    none = _replay(ctx, "none", 30_000)
    always = _replay(ctx, "default", 30_000, policy="always")
    pays = _replay(ctx, "default", 30_000)
    assert always.cost["anthropic"] > none.cost["anthropic"]
    assert always.compactions > 2 * pays.compactions
    for profile in ("anthropic", "openai"):
        assert pays.cost[profile] <= (1 + SLACK) * none.cost[profile]
    assert pays.policy["compacted"] == pays.compactions
    assert pays.retention["by_kind"]["user_message"]["share"] == 1.0


def test_a_template_sent_again_is_carried_once() -> None:
    """Re-sent ~3k-token templates: the summary carries the template once and each later copy
    as a note pointing at it (the validator counts the notes), so compaction pays again."""
    ctx = sessions.templates()
    template = ctx.messages[0].content[0].text.split("\n</custom prompt>")[0]
    none = _replay(ctx, "none", 30_000)
    pays = _replay(ctx, "default", 30_000)
    assert pays.compactions >= 1 and pays.violations == 0
    assert pays.cost["anthropic"] < 0.9 * none.cost["anthropic"]
    assert pays.retention["by_kind"]["user_message"]["share"] == 1.0
    assert template


@settings(max_examples=300, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.integers(0, 40_000),  # tokens appended before the call
            st.integers(0, 2_000),  # output tokens
            st.floats(0.0, 1.0),  # how much a compaction would keep
        ),
        min_size=1,
        max_size=120,
    ),
    st.sampled_from([4_000, 30_000, 100_000]),
)
def test_the_ledger_keeps_every_conversation_within_the_slack(
    calls: list[tuple[int, int, float]], trigger: int
) -> None:
    """Any sequence of calls and compaction outcomes: what the policy lets through never makes
    the conversation cost more than (1 + slack) times sending everything, after any call."""
    policy = CompactionPolicy(trigger, profiles=tuple(PROFILES))
    ledger = policy.ledger()
    history = raw = 0
    last = 0
    for grow, output, keep in calls:
        history += grow
        raw += grow
        cached, compacted = last, False
        if ledger.due(history):
            after = int(history * keep)
            if ledger.judge(history, last, after, 0, raw=raw, floor=after) is None:
                history, cached, compacted = after, 0, True
        ledger.record(history, cached, output, raw=raw, compacted=compacted)
        last = history
        for p in PROFILES:
            assert ledger.paid[p.name] <= (1 + SLACK) * ledger.uncompacted[p.name] + 1e-12


def test_policy_options_are_checked() -> None:
    with pytest.raises(ConfigError, match="unknown policy"):
        CompactionPolicy(1_000, mode="sometimes")  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="trigger"):
        CompactionPolicy(0)


def test_a_repeat_note_stands_for_a_pinned_copy_only_beside_the_text_itself() -> None:
    """The validator counts a note as a copy of the user's text only while the text is there
    verbatim: a strategy that keeps notes alone breaks the pin."""
    from compactkit import Message, TextBlock, validate
    from compactkit.pins import repeat_note

    template = "Follow these review rules:\n" + "\n".join(f"rule {k}: be exact" for k in range(80))
    ask = Message(role="user", content=(TextBlock(text=template),))
    answer = Message(role="assistant", content=(TextBlock(text="ok"),))
    original = AgentContext(messages=(ask, answer, ask, answer, ask, answer))
    note = Message(role="user", content=(TextBlock(text=repeat_note(template)),))
    kept_once = original.replace(messages=(ask, answer, note, answer, note, answer))
    assert [v for v in validate(kept_once, original) if v.rule == "pin-broken"] == []
    notes_only = original.replace(messages=(note, answer, note, answer, note, answer))
    assert any(v.rule == "pin-broken" for v in validate(notes_only, original))
