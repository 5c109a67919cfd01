"""The peer policies on real sessions: each triggers where its peer does, keeps what its peer keeps,
and stays valid and recoverable like every built-in strategy."""

from __future__ import annotations

from typing import Any

import pytest

import compactkit
from compactkit import AgentContext, SummaryBlock
from compactkit.pipeline import get_strategy
from compactkit.recovery import expand, message_marker
from compactkit.strategies.peers.openhands import events
from compactkit.tokens import get_counter

from ..conftest import contract_failures, corpus_file

SMALL: dict[str, dict[str, Any]] = {
    "peer-openhands": {"max_size": 20, "keep_first": 4},
    "peer-claude-code": {
        "context_window": 20_000,
        "summary_reserve": 2_000,
        "buffer_tokens": 3_000,
    },
    "peer-codex": {"context_window": 10_000, "user_message_tokens": 2_000},
    "peer-langchain": {"trigger_tokens": 6_000, "keep_messages": 6},
    "peer-pi": {"context_window": 12_000, "reserve_tokens": 2_000, "keep_recent_tokens": 3_000},
}
"""Thresholds small enough that most corpus conversations are compacted, some several times."""


@pytest.mark.parametrize(("name", "options"), SMALL.items(), ids=list(SMALL))
def test_every_sample_and_corpus_conversation_keeps_the_contract(
    name: str, options: dict[str, Any]
) -> None:
    assert contract_failures(get_strategy(name, **options)) == []


@pytest.fixture(scope="module")
def pi_session() -> AgentContext:
    """The corpus's long pi session: 983 messages, 412,727 tokens, 54 user messages."""
    return compactkit.load_one(corpus_file("pi-mono_before-compaction"))


def summary_of(ctx: AgentContext) -> SummaryBlock:
    found = [m for m in (message_marker(msg) for msg in ctx.messages) if m is not None]
    assert len(found) == 1
    assert isinstance(found[0], SummaryBlock)
    return found[0]


def test_each_peer_leaves_a_short_session_alone() -> None:
    ctx = compactkit.load_one(corpus_file("claude-code-viewer_sample-project_1af7fc5e"))
    for name in SMALL:
        assert get_strategy(name).compact(ctx) is ctx, name


def test_claude_code_summarizes_everything_past_its_threshold_and_rereads_files(
    pi_session: AgentContext,
) -> None:
    counter = get_counter()
    strategy = get_strategy("peer-claude-code")
    assert strategy.options.threshold == 167_000  # 200,000 - 20,000 - 13,000
    out = strategy.compact(pi_session)
    assert [m.role for m in out.messages] == ["user", "user"]  # the task, the summary
    text = summary_of(out).text
    # up to five recently read files come back, each within 5,000 tokens
    rereads = text.count("Called the Read tool with the following input")
    assert 1 <= rereads <= 5
    assert counter.context(out) < 20_000 + 50_000 + counter.message(out.messages[0])
    below = pi_session.replace(messages=pi_session.messages[:200])
    assert counter.context(below) <= 167_000
    assert strategy.compact(below) is below
    assert expand(out) == pi_session


def test_codex_keeps_the_users_messages_newest_first_then_the_summary(
    pi_session: AgentContext,
) -> None:
    counter = get_counter()
    strategy = get_strategy("peer-codex", context_window=100_000, user_message_tokens=3_000)
    out = strategy.compact(pi_session)
    assert [m.role for m in out.messages] == ["user", "user"]
    text = summary_of(out).text
    human = [m.text for m in pi_session.messages[1:] if m.is_human]
    assert human[-1] in text and human[-2] in text  # the newest ones, verbatim
    kept = [t for t in human if t in text]
    assert kept == human[len(human) - len(kept) :]  # a newest-first suffix, in order
    shown = text.split("Another language model worked on this task")[0]
    assert counter.text(shown) <= 3_000
    assert strategy.compact(out) == out


def test_pi_keeps_the_newest_tokens_and_lists_the_files(pi_session: AgentContext) -> None:
    counter = get_counter()
    out = get_strategy("peer-pi").compact(pi_session)
    marker = next(i for i, m in enumerate(out.messages) if message_marker(m) is not None)
    assert marker == 1
    kept = out.messages[marker + 1 :]
    assert kept == pi_session.messages[len(pi_session.messages) - len(kept) :]
    assert sum(counter.message(m) for m in kept) >= 20_000
    text = summary_of(out).text
    assert "<modified-files>" in text and "<read-files>" in text
    assert counter.text(text.split("\n\n<read-files>")[0]) <= int(0.8 * 16_384)


def test_openhands_counts_events_and_keeps_first_and_last(pi_session: AgentContext) -> None:
    strategy = get_strategy("peer-openhands")
    out = strategy.compact(pi_session)
    total = 1 + sum(events(m) for m in out.messages)  # the system prompt is one event
    assert total <= 80 // 2  # condensed to half of max_size
    marker = next(i for i, m in enumerate(out.messages) if message_marker(m) is not None)
    head = 1 + sum(events(m) for m in out.messages[:marker])
    assert head <= 4
    tail = out.messages[marker + 1 :]
    assert tail == pi_session.messages[len(pi_session.messages) - len(tail) :]
    assert sum(events(m) for m in tail) <= 80 // 2 - 4 - 1
    assert strategy.compact(out) == out


def test_langchain_keeps_twenty_messages_and_summarizes_from_the_last_4000_tokens(
    pi_session: AgentContext,
) -> None:
    out = get_strategy("peer-langchain").compact(pi_session)
    marker = next(i for i, m in enumerate(out.messages) if message_marker(m) is not None)
    tail = out.messages[marker + 1 :]
    assert len(tail) >= 20  # moved back so that no tool call loses its results
    assert tail[0].role != "tool"
    assert summary_of(out).text.startswith("Here is a summary of the conversation to date:\n\n")


def test_the_summary_comes_from_the_chosen_backend(pi_session: AgentContext) -> None:
    with pytest.raises(compactkit.ConfigError, match="unknown backend 'no-such-backend'"):
        get_strategy("peer-codex", backend="no-such-backend").compact(pi_session)
    assert summary_of(get_strategy("peer-codex").compact(pi_session)).backend == "extractive"
