"""llm-summary on real sessions (extractive): one summary message, recoverable, in budget."""

from __future__ import annotations

import re
from collections.abc import Iterator

import pytest
from hypothesis import given, settings

import compactkit
from compactkit import AgentContext, ConfigError, Message, SummaryBlock, TextBlock
from compactkit.pipeline import build_pipeline
from compactkit.recovery import expand, message_marker, prune
from compactkit.registry import (
    DEFAULT_PLUGINS,
    count_tokens,
    get_counter,
    make_registry,
    set_registry,
)
from compactkit.strategies._common import head_end, units
from compactkit.strategies.llm_summary import MIN_SUMMARY_TOKENS, LlmSummary
from compactkit.summarize.extractive import parse_sections
from compactkit.testing import check_strategy
from compactkit.testing.generate import contexts
from compactkit.tokens import MESSAGE_OVERHEAD
from compactkit.validate import validate

from ..conftest import CORPUS, sample
from ..conftest import every_conversation as all_contexts

SUMMARY_PLUGINS = tuple(dict.fromkeys((*DEFAULT_PLUGINS, "compactkit.builtins.summarizers")))


@pytest.fixture(autouse=True, scope="module")
def summarizer_registry() -> Iterator[None]:
    set_registry(make_registry(entry_points=False, defaults=SUMMARY_PLUGINS))
    yield
    set_registry(None)


def _summary_messages(ctx: AgentContext) -> list[Message]:
    return [m for m in ctx.messages if m.metadata.get("compactkit_marker") == "llm-summary"]


def _only_summary(ctx: AgentContext) -> SummaryBlock:
    found = _summary_messages(ctx)
    assert len(found) == 1
    block = found[0].content[0]
    assert isinstance(block, SummaryBlock)
    return block


# --------------------------------------------------------------------------- the contract


def test_every_conversation_keeps_the_contract() -> None:
    failures = []
    checked = 0
    for name, ctx in all_contexts():
        tokens = count_tokens(ctx)
        for strat in (LlmSummary(), LlmSummary(max_tokens=max(tokens // 2, 1), keep_last=2)):
            problems = check_strategy(strat, ctx)
            failures.extend(f"{name} [{strat.label}]: {p}" for p in problems)
            checked += 1
    assert failures == []
    # tau-bench alone has 150 conversations in the full corpus; the bundled sample keeps 3
    assert checked >= (2 * 150 if CORPUS is not None else 2 * 10)


@settings(max_examples=60, deadline=None)
@given(ctx=contexts())
def test_generated_contexts_keep_the_contract(ctx: AgentContext) -> None:
    assert check_strategy(LlmSummary(keep_last=2), ctx) == []
    budget = max(count_tokens(ctx) // 3, 50)
    assert check_strategy(LlmSummary(max_tokens=budget, keep_last=3), ctx) == []


# --------------------------------------------------------------------------- what it does


def test_a_real_session_becomes_head_summary_and_newest_turns() -> None:
    ctx = compactkit.load_one(sample("sphinx-doc"))
    out = LlmSummary().compact(ctx)
    task = ctx.first_user_index
    assert task is not None
    start = head_end(ctx)
    rest = units(ctx.messages[start:])
    tail_start = start + rest[-6].start
    # the head and the six newest turns are the very same objects; everything between is one
    # summary message that says how many messages it stands for
    assert out.messages[:start] == ctx.messages[:start]
    assert all(
        a is b for a, b in zip(out.messages[start + 1 :], ctx.messages[tail_start:], strict=True)
    )
    assert len(out.messages) == start + 1 + len(ctx.messages) - tail_start
    marker = out.messages[start]
    assert marker.role == "user"
    assert marker.metadata == {"compactkit_marker": "llm-summary"}
    block = _only_summary(out)
    assert block.backend == "extractive"
    assert block.summarized_messages == tail_start - start
    assert message_marker(marker) is block
    # savings, computed independently: the window's tokens minus the summary message's
    counter = get_counter()
    window_tokens = sum(counter.message(m) for m in ctx.messages[start:tail_start])
    assert count_tokens(ctx) - count_tokens(out) == window_tokens - counter.message(marker)
    assert window_tokens - counter.message(marker) > 50_000
    assert count_tokens(block.text) <= 1_500
    # everything is recoverable
    assert expand(out) == ctx
    # the store holds the window alone (its entry, and the parts of a window this long)
    assert block.etag in out.recovery and prune(out) is out


def test_the_summary_names_the_task_files_changed_and_last_error() -> None:
    ctx = compactkit.load_one(sample("sphinx-doc"))
    strat = LlmSummary()
    span = strat.window(ctx)
    assert span is not None
    window = ctx.messages[span[0] : span[1]]
    sections = parse_sections(_only_summary(strat.compact(ctx)).text)
    # the task: the start of the first user message
    task = " ".join(ctx.task.split())
    assert sections["Task"][0].startswith(task[:300])
    # files changed: every `sed -i` target in the window's commands, found by a plain regex
    sed_targets = {
        m.group(1)
        for msg in window
        for call in msg.tool_calls
        if isinstance(call.input, dict) and isinstance(call.input.get("command"), str)
        for m in re.finditer(r"sed -i '[^']*' (\S+)$", call.input["command"], re.M)
    }
    assert "sphinx/ext/autodoc/__init__.py" in sed_targets
    changed = sections["Files changed"]
    assert sed_targets <= set(changed)
    assert "reproduce_issue/file.py" in changed  # cd reproduce_issue && cat <<EOF > file.py
    # the last error: the last `XxxError: ...` line of the last failed command in the window
    last_error = None
    for msg in window:
        for result in msg.tool_results:
            code = re.search(r"<returncode>(\d+)</returncode>", result.text)
            if code and code.group(1) != "0":
                lines = re.findall(r"^\w*Error: .+$", result.text, re.M)
                if lines:
                    last_error = lines[-1].strip()
    assert last_error == "SyntaxError: invalid syntax"
    assert any(item.endswith(last_error) for item in sections["Errors"][-3:])
    # commands keep their outcome and exit code
    assert any(item.endswith("→ error (exit 1)") for item in sections["Commands and outcomes"])
    assert sections["Open items"][0].startswith("last assistant message: THOUGHT:")


def _carried(ctx: AgentContext) -> list[str]:
    """The texts the summary message carries verbatim after its marker."""
    (msg,) = _summary_messages(ctx)
    return [b.text for b in msg.content[1:] if isinstance(b, TextBlock)]


def test_later_user_messages_are_kept_verbatim() -> None:
    ctx = compactkit.load_one(sample("pi-mono"))
    strat = LlmSummary(summary_max_tokens=20_000)
    span = strat.window(ctx)
    assert span is not None
    out = strat.compact(ctx)
    carried = _carried(out)
    assert "ok, create a branch refactor" in carried
    # a two-line message is carried whole, its lines as they were
    assert any(
        "i would only want e2e tests for AgentSession, anything else is shitty.\n\n"
        "alright, createa  full implementation plan in coding-agent/docs/refactor.md" in text
        for text in carried
    )
    # the summary says where they are instead of repeating them
    sections = parse_sections(_only_summary(out).text)
    (said,) = sections["User messages"]
    assert said.endswith("in the user's words: kept verbatim after this summary")
    assert any(p.endswith("src/core/agent-session.ts") for p in sections["Files changed"])
    assert any("error TS2305" in e for e in sections["Errors"])


def _fold(text: str) -> str:
    return " ".join(text.split())


def _users_words(window: tuple[Message, ...]) -> list[str]:
    """Every text block of the messages in the user's own words in a window, read independently
    of compactkit's pins (role user, no origin, no tool results)."""
    out = []
    for msg in window:
        if msg.role == "user" and msg.metadata.get("origin") is None and not msg.tool_results:
            out.extend(b.text for b in msg.content if isinstance(b, TextBlock) and b.text.strip())
    return out


def test_every_user_message_of_a_window_is_carried_verbatim() -> None:
    """On every corpus conversation: each text the user wrote in a window the summary replaces is
    carried verbatim, whole, by the summary message, whatever the summary's own limit."""
    checked = 0
    failures = []
    for name, ctx in all_contexts():
        for strat in (LlmSummary(summary_max_tokens=50_000), LlmSummary(summary_max_tokens=64)):
            span = strat.window(ctx)
            out = strat.compact(ctx)
            if span is None or out is ctx:
                continue
            carried = _carried(out)
            for words in _users_words(ctx.messages[span[0] : span[1]]):
                checked += 1
                if words not in carried:
                    failures.append(f"{name} [{strat.label}]: {words[:80]!r}")
            assert validate(out, ctx) == [], name
    assert failures == []
    assert checked > (100 if CORPUS is not None else 20)


def test_harness_text_is_not_a_user_message_and_an_agents_own_summary_is_history() -> None:
    def user(text: str, **meta: str) -> Message:
        return Message(role="user", content=(TextBlock(text=text),), metadata=dict(meta))

    def reply(text: str) -> Message:
        return Message(role="assistant", content=(TextBlock(text=text),))

    ctx = AgentContext(
        messages=(
            user("Fix the flaky test in tests/test_io.py"),
            reply("Looking."),
            user("## Goal\n- fix tests/test_io.py\n## Done\n- found the race", origin="summary"),
            reply("Continuing."),
            user("<system-reminder>todo list is empty</system-reminder>", origin="harness"),
            reply("Ok."),
            user("use pytest -p no:randomly, never sleep()"),
            reply("Done."),
            user("thanks"),
            reply("Bye."),
        )
    )
    out = LlmSummary(keep_last=1).compact(ctx)
    sections = parse_sections(_only_summary(out).text)
    assert sections["User messages"] == [
        "2 messages in the user's words: kept verbatim after this summary"
    ]
    assert _carried(out) == ["use pytest -p no:randomly, never sleep()", "thanks"]
    assert sections["Earlier summary"] == [
        "## Goal - fix tests/test_io.py ## Done - found the race"
    ]
    assert "system-reminder" not in _only_summary(out).text
    assert "system-reminder" not in "".join(_carried(out))
    assert expand(out) == ctx


def _long_paste_session(paste: str) -> AgentContext:
    return AgentContext(
        messages=(
            Message(role="user", content=(TextBlock(text="Write the exporter."),)),
            Message(role="assistant", content=(TextBlock(text="Which fields?"),)),
            Message(role="user", content=(TextBlock(text=paste),)),
            Message(role="assistant", content=(TextBlock(text="On it."),)),
            Message(role="user", content=(TextBlock(text="go"),)),
            Message(role="assistant", content=(TextBlock(text="Done."),)),
        )
    )


def test_a_long_user_message_is_carried_whole() -> None:
    long = "\n".join(
        f"requirement {i}: the exporter must keep field_{i} as it is" for i in range(200)
    )
    ctx = _long_paste_session(long)
    out = LlmSummary(keep_last=1, user_message_chars=500).compact(ctx)
    assert _carried(out) == [long, "go"]
    assert expand(out) == ctx


def test_a_very_long_paste_is_carried_cut_and_recoverable() -> None:
    """The one exception: a paste over pins.PASTE_CHARS is carried as its head and tail around a
    note naming its etag; the whole text comes back with expand."""
    from compactkit.context import etag_of
    from compactkit.pins import PASTE_CHARS, PASTE_HEAD, PASTE_TAIL

    log = "\n".join(f"2026-12-01T10:{i // 60:02d}:{i % 60:02d} worker {i} ok" for i in range(3_000))
    assert len(log) > PASTE_CHARS
    ctx = _long_paste_session(log)
    out = LlmSummary(keep_last=1).compact(ctx)
    cut, go = _carried(out)
    assert go == "go"
    assert cut.startswith(log[:PASTE_HEAD]) and cut.endswith(log[-PASTE_TAIL:])
    assert f"etag {etag_of(log)}" in cut
    assert validate(out, ctx) == []
    assert expand(out) == ctx


def test_many_user_messages_are_all_kept_whatever_the_summary_limit() -> None:
    turns = []
    for i in range(60):
        said = f"instruction {i:03d}: " + " ".join(f"keep-{i}-{k}" for k in range(60))
        turns += [
            Message(role="user", content=(TextBlock(text=said),)),
            Message(role="assistant", content=(TextBlock(text=f"ack {i}"),)),
        ]
    ctx = AgentContext(messages=tuple(turns))
    for limit in (64, 2_000):
        out = LlmSummary(keep_last=1, summary_max_tokens=limit).compact(ctx)
        block = _only_summary(out)
        assert count_tokens(block.text) <= limit
        carried = _carried(out)
        # every message between the task and the kept turn, verbatim and in order
        assert carried == [m.text for m in ctx.messages[2:-1] if m.role == "user"]
        assert validate(out, ctx) == []


# --------------------------------------------------------------------------- budgets


def _lower_bound(ctx: AgentContext, strat: LlmSummary) -> int:
    """Tokens of what the output can never drop: preamble, head, newest unit, the summary's
    reserve (a quarter of the budget, at most summary_max_tokens, never below the minimum) and the
    user's words between them, which the summary carries verbatim."""
    budget = strat.options.max_tokens or 0
    reserve = min(strat.options.summary_max_tokens, max(budget // 4, MIN_SUMMARY_TOKENS))
    counter = get_counter()
    start = head_end(ctx)
    newest = units(ctx.messages)[-1]
    return (
        counter.preamble(ctx)
        + sum(counter.message(m) for m in ctx.messages[:start])
        + sum(counter.message(m) for m in ctx.messages[newest.start : newest.end])
        + MESSAGE_OVERHEAD
        + reserve
        + sum(counter.text(t) for t in _users_words(ctx.messages[start : newest.start]))
    )


def test_with_a_budget_the_output_fits_or_fitting_was_impossible() -> None:
    fitted = impossible = 0
    for name, ctx in all_contexts():
        tokens = count_tokens(ctx)
        budget = tokens // 2
        strat = LlmSummary(max_tokens=budget)
        out = strat.compact(ctx)
        after = count_tokens(out)
        if after <= budget:
            fitted += out is not ctx
            continue
        # over budget only when the head, the newest turn and a minimal summary alone exceed it
        assert _lower_bound(ctx, strat) > budget - 16, name
        impossible += 1
    assert fitted > (100 if CORPUS is not None else 5)
    assert impossible < fitted


def test_fewer_newest_turns_are_kept_when_they_leave_no_room() -> None:
    ctx = compactkit.load_one(sample("pi-mono"))
    budget = 2_500
    out = LlmSummary(max_tokens=budget).compact(ctx)
    assert count_tokens(out) <= budget
    assert expand(out) == ctx
    # independently: the most newest units (at most 6) that fit beside the head and a summary of
    # the minimal size, counted message by message
    counter = get_counter()
    start = head_end(ctx)
    fixed = counter.preamble(ctx) + sum(counter.message(m) for m in ctx.messages[:start])
    fixed += counter.message(out.messages[start]) - count_tokens(_only_summary(out).text)
    fixed += MIN_SUMMARY_TOKENS
    expected = 0
    used = 0
    for unit in reversed(units(ctx.messages[start:])[-6:]):
        used += sum(counter.message(m) for m in ctx.messages[unit.start + start : unit.end + start])
        if fixed + used > budget:
            break
        expected += 1
    assert 1 <= expected < 6
    kept = units(out.messages[start + 1 :])
    assert len(kept) == expected
    assert out.messages[-1] is ctx.messages[-1]
    # and the summary took what room was left, below its own limit
    block = _only_summary(out)
    assert count_tokens(block.text) < 1_500
    assert count_tokens(out) > budget - 200


def test_the_pipeline_reports_an_impossible_budget() -> None:
    ctx = compactkit.load(sample("tau_bench"))[0]  # a long policy as the system instruction
    registry = make_registry(entry_points=False, defaults=SUMMARY_PLUGINS)
    pipeline = build_pipeline(["llm-summary"], budget=500, registry=registry)
    result = pipeline.run(ctx)
    assert result.tokens_after < result.tokens_before
    assert "over its budget of 500 tokens" in result.steps[0].note
    assert validate(result.context, ctx) == []


def test_a_context_that_fits_the_budget_is_returned_as_is() -> None:
    ctx = compactkit.load_one(sample("sphinx-doc"))
    assert LlmSummary(max_tokens=10**7).compact(ctx) is ctx


# --------------------------------------------------------------------------- edge cases


def test_nothing_to_summarize_returns_the_same_object() -> None:
    ctx = compactkit.load_one(sample("runtime_trajs_basic"))  # task plus two short turns
    assert LlmSummary().compact(ctx) is ctx
    tiny = AgentContext(messages=(Message(role="user", content=(TextBlock(text="hi"),)),))
    assert LlmSummary(keep_last=0).compact(tiny) is tiny
    assert LlmSummary().compact(AgentContext()) == AgentContext()


def test_a_second_run_changes_nothing() -> None:
    ctx = compactkit.load_one(sample("pi-mono"))
    for strat in (LlmSummary(), LlmSummary(max_tokens=30_000), LlmSummary(keep_last=0)):
        once = strat.compact(ctx)
        assert once is not ctx
        assert strat.compact(once) is once


def test_an_earlier_summary_is_summarized_again_and_expands_recursively() -> None:
    ctx = compactkit.load_one(sample("pi-mono"))
    users = [i for i, m in enumerate(ctx.messages) if m.role == "user" and i > 40]
    cut = users[0]
    first = LlmSummary().compact(ctx.with_messages(ctx.messages[:cut]))
    earlier = _only_summary(first)
    grown = first.with_messages((*first.messages, *ctx.messages[cut:]))
    second = LlmSummary().compact(grown)
    block = _only_summary(second)
    assert block.etag != earlier.etag
    assert expand(second) == ctx  # the summary inside the summary expands too
    start = head_end(ctx)
    kept = len(second.messages) - start - 1
    assert block.summarized_messages == len(ctx.messages) - start - kept
    first_changed = set(parse_sections(earlier.text)["Files changed"])
    assert first_changed <= set(parse_sections(block.text)["Files changed"])
    assert check_strategy(LlmSummary(), grown) == []


def test_options_are_validated() -> None:
    with pytest.raises(ConfigError, match="keep_last"):
        LlmSummary(keep_last=-1)
    with pytest.raises(ConfigError, match="fallback"):
        LlmSummary(fallback="maybe")
    with pytest.raises(ConfigError, match="api_key: Extra inputs are not permitted"):
        LlmSummary(api_key="sk-nope")
    strat = LlmSummary(max_tokens=1000)
    assert strat.label == "llm-summary:max_tokens=1000"
    assert LlmSummary.budget_option == "max_tokens"
