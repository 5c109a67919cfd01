"""The peer policies on real sessions: each triggers where its peer does, keeps what its peer keeps,
and stays valid and recoverable like every built-in strategy."""

from __future__ import annotations

from typing import Any

import pytest

import compactkit
from compactkit import AgentContext, MaskedBlock, SummaryBlock, ToolResultBlock
from compactkit.context import render_block
from compactkit.pipeline import get_strategy
from compactkit.recovery import expand, message_marker
from compactkit.registry import get_counter
from compactkit.strategies.peers.openhands import events

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
    "peer-anthropic-clear": {"trigger": 5_000, "keep": 3},
    "peer-anthropic-compact": {"trigger": 50_000},
    "peer-gemini-cli": {"token_limit": 20_000},
    "peer-openai-agents": {"recent_turns": 1, "max_output_chars": 200, "preview_chars": 80},
    "peer-adk": {
        "compaction_interval": 1,
        "overlap_size": 1,
        "token_threshold": 8_000,
        "event_retention_size": 6,
    },
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


# --------------------------------------------------------------------------- the newer peers


def result_blocks(ctx: AgentContext) -> list[ToolResultBlock]:
    return [r for m in ctx.messages for r in m.tool_results]


def masked_label(result: ToolResultBlock) -> str | None:
    """The label of a result replaced whole by one marker, else None."""
    if len(result.content) == 1 and isinstance(result.content[0], MaskedBlock):
        return result.content[0].label
    return None


def prefix_over(ctx: AgentContext, tokens: int) -> AgentContext:
    """The shortest prefix of `ctx` (ending before an assistant turn) over `tokens` tokens."""
    counter = get_counter()
    for end in range(1, len(ctx.messages)):
        if ctx.messages[end].role == "assistant":
            cut = ctx.replace(messages=ctx.messages[:end])
            if counter.context(cut) > tokens:
                return cut
    raise AssertionError(f"never over {tokens} tokens")


def test_anthropic_clear_keeps_the_newest_three_tool_uses_over_100k(
    pi_session: AgentContext,
) -> None:
    strategy = get_strategy("peer-anthropic-clear")
    assert (strategy.options.trigger, strategy.options.keep) == (None, 3)  # unset: 100,000
    out = strategy.compact(pi_session)
    before, after = result_blocks(pi_session), result_blocks(out)
    assert len(after) == len(before)
    assert [masked_label(r) for r in after[-3:]] == [None, None, None]
    assert after[-3:] == before[-3:]
    assert all(masked_label(r) == "cleared" for r in after[:-3] if r.content)
    shown = [t for r in after[:-3] if r.content for t in render_block(r)]
    assert shown and all(t.startswith("[cleared; etag ") for t in shown)
    assert expand(out) == pi_session
    assert strategy.compact(out) is out
    below = pi_session.replace(messages=pi_session.messages[:150])
    assert get_counter().context(below) <= 100_000
    assert strategy.compact(below) is below


def test_anthropic_clear_counts_the_full_history_the_client_sends(
    pi_session: AgentContext,
) -> None:
    # the API clears on its side: the client keeps sending every result, so once the full
    # history is over the trigger, each new call clears what fell out of the newest three
    counter = get_counter()
    strategy = get_strategy("peer-anthropic-clear")
    first = prefix_over(pi_session, 100_000)
    cleared = strategy.compact(first)
    more = pi_session.messages[len(first.messages) : len(first.messages) + 12]
    grown = cleared.replace(messages=(*cleared.messages, *more))
    assert counter.context(grown) < 100_000 < counter.context(expand(grown))
    again = strategy.compact(grown)
    assert again is not grown
    assert [masked_label(r) for r in result_blocks(again)[-3:]] == [None, None, None]
    assert expand(again) == pi_session.replace(
        messages=pi_session.messages[: len(first.messages) + 12]
    )


def test_anthropic_clear_options_exclude_tools_and_clear_at_least(
    pi_session: AgentContext,
) -> None:
    out = get_strategy("peer-anthropic-clear", exclude_tools="bash|read").compact(pi_session)
    calls = {c.id: c.name for m in out.messages for c in m.tool_calls}
    for result in result_blocks(out):
        if calls[result.tool_call_id] in ("bash", "read"):
            assert masked_label(result) is None
    assert any(masked_label(r) == "cleared" for r in result_blocks(out))
    huge = get_strategy("peer-anthropic-clear", clear_at_least=10_000_000)
    assert huge.compact(pi_session) is pi_session  # cannot clear that much: not applied
    with pytest.raises(compactkit.ConfigError, match="clear_tool_inputs=true is not modelled"):
        get_strategy("peer-anthropic-clear", clear_tool_inputs=True)


def test_anthropic_compact_summarizes_everything_over_150k(pi_session: AgentContext) -> None:
    strategy = get_strategy("peer-anthropic-compact")
    assert strategy.at_trigger() == 150_000
    out = strategy.compact(pi_session)
    assert [m.role for m in out.messages] == ["user", "user"]  # the task, the summary
    assert get_counter().text(summary_of(out).text) <= 4_000 + 16
    assert expand(out) == pi_session
    assert strategy.compact(out) == out
    below = pi_session.replace(messages=pi_session.messages[:300])
    assert get_counter().context(below) <= 150_000
    assert strategy.compact(below) is below
    with pytest.raises(compactkit.ConfigError, match="native=true keeps the native trigger"):
        get_strategy("peer-anthropic-compact", trigger=40_000, native=True)


def test_gemini_cli_compresses_at_half_the_limit_and_keeps_the_newest_30_percent(
    pi_session: AgentContext,
) -> None:
    default = get_strategy("peer-gemini-cli")
    # 412,727 tokens: under half of Gemini's 1,048,576, so Gemini CLI would not compress
    assert get_counter().context(pi_session) < 0.5 * 1_048_576
    assert default.compact(pi_session) is pi_session
    strategy = get_strategy("peer-gemini-cli", token_limit=600_000)  # compresses at 300,000
    out = strategy.compact(pi_session)
    marker = next(i for i, m in enumerate(out.messages) if message_marker(m) is not None)
    assert marker == 1
    kept = out.messages[marker + 1 :]
    assert kept[0].role == "user" and not kept[0].tool_results  # cut at a user message
    original = pi_session.messages[len(pi_session.messages) - len(kept) :]
    assert [m.role for m in kept] == [m.role for m in original]

    def chars(messages: tuple[compactkit.Message, ...]) -> int:
        return sum(len(t) for m in messages for b in m.content for t in render_block(b))

    share = chars(original) / chars(pi_session.messages)
    assert 0.2 < share <= 0.3 + 0.05  # the first user message past 70% of the characters
    assert expand(out) == pi_session
    assert strategy.compact(out) == out


def test_gemini_cli_truncates_old_tool_responses_past_the_budget(
    pi_session: AgentContext,
) -> None:
    # keeping 90%: the kept part holds outputs of over 40,000 characters past the newest
    # 50,000 tokens of tool responses
    counter = get_counter()
    strategy = get_strategy("peer-gemini-cli", token_limit=600_000, preserve=0.9)
    out = strategy.compact(pi_session)
    marker = next(i for i, m in enumerate(out.messages) if message_marker(m) is not None)
    kept = out.messages[marker + 1 :]
    original = pi_session.messages[len(pi_session.messages) - len(kept) :]
    newest_first = []
    for old, new in zip(original, kept, strict=True):
        for before, after in zip(old.tool_results, new.tool_results, strict=True):
            newest_first.insert(0, (before, after))
    used = 0
    cut = 0
    for before, after in newest_first:
        text = "\n".join(render_block(before))
        label = masked_label(after)
        if used + counter.text(text) <= 50_000 or len(text) <= 40_000:
            assert after == before
            used += counter.text(text)
            continue
        cut += 1
        assert label is not None
        assert label.startswith(
            "Output too large. Showing first 8,000 and last 32,000 characters.\n" + text[:8_000]
        )
        assert label.endswith(text[-32_000:])
        used += counter.text(label)
    assert cut >= 1
    assert expand(out) == pi_session


def test_openai_agents_trims_old_long_outputs_to_a_preview(pi_session: AgentContext) -> None:
    strategy = get_strategy("peer-openai-agents")
    out = strategy.compact(pi_session)
    users = [i for i, m in enumerate(pi_session.messages) if m.role == "user"]
    boundary = users[-2]  # the second user message from the end
    calls = {c.id: c.name for m in pi_session.messages for c in m.tool_calls}
    trimmed = 0
    for before, after in zip(pi_session.messages, out.messages, strict=True):
        for old, new in zip(before.tool_results, after.tool_results, strict=True):
            label = masked_label(new)
            if label is None:
                assert new == old
                continue
            trimmed += 1
            text = "\n".join(render_block(old))
            assert len(text) > 500
            assert label == (
                f"Trimmed: {calls[old.tool_call_id]} output — {len(text)} chars → 200 char "
                f"preview]\n{text[:200]}..."
            )
    assert trimmed > 100
    assert out.messages[boundary:] == pi_session.messages[boundary:]
    assert expand(out) == pi_session
    assert strategy.compact(out) is out
    one_user = compactkit.load_one(corpus_file("gemini3pro_sphinx-doc__sphinx-9229"))
    assert sum(m.role == "user" for m in one_user.messages) < 2
    assert strategy.compact(one_user) is one_user


def test_adk_summarizes_every_three_invocations_with_one_of_overlap(
    pi_session: AgentContext,
) -> None:
    # the history as the agent grows it: the policy runs before every model call
    strategy = get_strategy("peer-adk")
    human = [i for i, m in enumerate(pi_session.messages) if m.is_human]
    history = pi_session.replace(messages=())
    done = 0
    compactions: list[int] = []
    last = 1  # invocations begun at the last compaction (the task's at first)
    for index, msg in enumerate(pi_session.messages):
        if msg.role == "assistant" and index > done:
            history = history.replace(
                messages=(*history.messages, *pi_session.messages[done:index])
            )
            done = index
            begun = sum(1 for h in human if h < index)
            out = strategy.compact(history)
            # compacted exactly when 3 invocations have completed since the last compaction
            assert (out is not history) == (begun - last >= 3), index
            if out is not history:
                compactions.append(begun)
                last = begun
            history = out
    assert len(compactions) >= 10
    summaries = [m for m in history.messages if message_marker(m) is not None]
    assert len(summaries) == len(compactions)
    # the second summary was written from invocations 3 to 6: invocation 3's request (inside the
    # first summary) is in it too
    second = summaries[1].content[0]
    assert isinstance(second, SummaryBlock)
    third_request = pi_session.messages[human[2]].text.strip()[:200]
    assert third_request in second.text
    assert expand(history) == pi_session.replace(messages=pi_session.messages[:done])


def test_adk_token_threshold_keeps_the_newest_events(pi_session: AgentContext) -> None:
    strategy = get_strategy(
        "peer-adk", compaction_interval=1000, token_threshold=100_000, event_retention_size=5
    )
    out = strategy.compact(pi_session)
    marker = next(i for i, m in enumerate(out.messages) if message_marker(m) is not None)
    tail = out.messages[marker + 1 :]
    assert tail == pi_session.messages[len(pi_session.messages) - len(tail) :]
    assert 3 <= len(tail) <= 8  # five events: a model turn is one, its tool responses another
    assert strategy.compact(out) == out
    with pytest.raises(compactkit.ConfigError, match="set together"):
        get_strategy("peer-adk", token_threshold=100_000)
