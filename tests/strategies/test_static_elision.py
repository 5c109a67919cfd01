"""static-elision on real sessions: repeats become references, first copies and the task stay,
everything stays recoverable."""

from __future__ import annotations

import json
import re
from collections import Counter
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import compactkit
import compactkit.pipeline
from compactkit import AgentContext
from compactkit.context import (
    CollapsedBlock,
    ElidedBlock,
    Message,
    TextBlock,
    ThinkingBlock,
    ToolCallBlock,
    ToolResultBlock,
    marker_text,
)
from compactkit.errors import ConfigError
from compactkit.recovery import expand, payload_etag
from compactkit.registry import get_counter
from compactkit.strategies.static_elision import StaticElision, split_paragraphs
from compactkit.testing import check_strategy
from compactkit.testing.generate import contexts
from compactkit.validate import validate

from ..conftest import ROOT, corpus_file, sample
from ..conftest import every_conversation as corpus_contexts

NON_DEFAULT = {"min_tokens": 10, "include_assistant": True, "snippet": False}
REF_LINE = re.compile(r"\[static text elided[^\]]*\]")


def _elided(ctx: AgentContext) -> list[tuple[int, ElidedBlock]]:
    out: list[tuple[int, ElidedBlock]] = []
    for i, msg in enumerate(ctx.messages):
        for block in msg.content:
            parts = block.content if isinstance(block, ToolResultBlock) else (block,)
            out.extend((i, p) for p in parts if isinstance(p, ElidedBlock))
    return out


def _original_text(ctx: AgentContext, block: ElidedBlock) -> str:
    (item,) = json.loads(ctx.recovery[block.etag])
    assert item["type"] == "text"
    text: str = item["text"]
    return text


def _keys(text: str) -> list[str]:
    return [p.strip() for p in split_paragraphs(text)[::2] if p.strip()]


def _removed_text_was_shown_before(out: AgentContext) -> list[str]:
    """Walk the output as a model reads it: every paragraph an elided block dropped must be
    visible earlier (system instruction, skills, an earlier text or tool-result part) or earlier
    in the same block."""
    visible: set[str] = set()
    for text in [out.system_instruction or "", *out.activated_skills.values()]:
        visible.update(_keys(text))
    problems = []
    for i, msg in enumerate(out.messages):
        for block in msg.content:
            parts = block.content if isinstance(block, ToolResultBlock) else (block,)
            for part in parts:
                if isinstance(part, TextBlock):
                    visible.update(_keys(part.text))
                elif isinstance(part, ElidedBlock):
                    shown = [k for k in _keys(part.text) if not REF_LINE.fullmatch(k)]
                    removed = Counter(_keys(_original_text(out, part))) - Counter(shown)
                    for key in removed:
                        if key not in visible and key not in shown:
                            problems.append(f"message {i}: dropped text shown nowhere: {key[:60]}")
                    visible.update(shown)
    return problems


# --------------------------------------------------------------------------- the contract


def test_every_conversation_keeps_the_contract() -> None:
    failures: list[str] = []
    for name, ctx in corpus_contexts():
        for options in ({}, NON_DEFAULT):
            strat = StaticElision(options)
            failures.extend(f"{name} {options}: {p}" for p in check_strategy(strat, ctx))
            out = strat.compact(ctx)
            failures.extend(f"{name} {options}: {p}" for p in _removed_text_was_shown_before(out))
            task = ctx.first_user_index
            if task is not None:
                assert out.messages[task] is ctx.messages[task], name
    assert failures == []


def test_saves_tokens_on_the_corpus() -> None:
    saved = 0
    for _, ctx in corpus_contexts():
        out = StaticElision().compact(ctx)
        saved += compactkit.count_tokens(ctx) - compactkit.count_tokens(out)
    assert saved > 0


@settings(max_examples=60, deadline=None)
@given(contexts())
def test_generated_contexts_keep_the_contract(ctx: AgentContext) -> None:
    for options in ({}, NON_DEFAULT):
        strat = StaticElision(options)
        assert check_strategy(strat, ctx) == []
        assert _removed_text_was_shown_before(strat.compact(ctx)) == []


# Texts made of paragraphs from a small pool, with varied separators: partial repeats everywhere.
_POOL = [
    "<system-reminder>\nWhenever you read a file, consider whether it looks malicious. You may "
    "read it, but you must refuse to improve or augment malicious code.\n</system-reminder>",
    "Please always provide EXACTLY ONE action in triple backticks. If you have completed your "
    "assignment, consult the first message about how to submit your solution.",
    "\n".join(f"{n}| line {n} of the file under edit" for n in range(12)),
    "short note",
    "Tool ran without output or errors.",
]
_SEPARATORS = ["\n\n", "\n \n", "\r\n\r\n", "\n\n\n    ", "\n\t\n"]


@st.composite
def _text(draw: st.DrawFn) -> str:
    parts = draw(
        st.lists(
            st.sampled_from(_POOL) | st.text("abc xyz\n", min_size=1, max_size=30),
            min_size=1,
            max_size=5,
        )
    )
    out = parts[0]
    for part in parts[1:]:
        out += draw(st.sampled_from(_SEPARATORS)) + part
    return out


@st.composite
def _pooled_contexts(draw: st.DrawFn) -> AgentContext:
    messages = [Message(role="user", content=(TextBlock(text=draw(_text())),))]
    for n in range(draw(st.integers(0, 8))):
        call = ToolCallBlock(id=f"c{n}", name="read", input={"text": draw(_text())})
        content: list[TextBlock | ThinkingBlock] = (
            [TextBlock(text=draw(_text()))] if draw(st.booleans()) else []
        )
        if draw(st.booleans()):
            content.insert(0, ThinkingBlock(thinking=draw(_text())))
        messages.append(Message(role="assistant", content=(*content, call)))
        parts = tuple(TextBlock(text=draw(_text())) for _ in range(draw(st.integers(1, 2))))
        messages.append(
            Message(role="tool", content=(ToolResultBlock(tool_call_id=call.id, content=parts),))
        )
        if draw(st.booleans()):
            messages.append(Message(role="user", content=(TextBlock(text=draw(_text())),)))
    system = draw(st.none() | _text())
    skills = {"pool": _POOL[1]} if draw(st.booleans()) else {}
    return AgentContext(
        system_instruction=system, messages=tuple(messages), activated_skills=skills
    )


@settings(max_examples=60, deadline=None)
@given(_pooled_contexts())
def test_pooled_paragraphs_keep_the_contract(ctx: AgentContext) -> None:
    for options in ({}, NON_DEFAULT, {"min_tokens": 1, "min_saved": 1}):
        strat = StaticElision(options)
        assert check_strategy(strat, ctx) == []
        out = strat.compact(ctx)
        assert _removed_text_was_shown_before(out) == []
        for i, msg in enumerate(out.messages):
            if msg.role == "assistant" and not strat.options.include_assistant:
                assert msg is ctx.messages[i]
            for a, b in zip(msg.content, ctx.messages[i].content, strict=True):
                if isinstance(b, (ThinkingBlock, ToolCallBlock)):
                    assert a is b


# --------------------------------------------------------------------------- what it does


def test_repeated_error_footer_collapses_to_one_reference_line() -> None:
    """OpenHands resolver: every failed edit repeats the 'original code before your edit' block
    of the first failure; each repeat becomes one line naming message 10, the rest stays."""
    ctx = compactkit.load(sample("resolver_mock_output"))[1]
    first = ctx.messages[10].tool_results[0].text
    static = next(p for p in split_paragraphs(first)[::2] if p.startswith("[This is the original"))
    out = StaticElision().compact(ctx)
    assert out.messages[10] is ctx.messages[10]  # the first copy is never touched
    earlier = {first}
    checked = 0
    for i, msg in enumerate(ctx.messages):
        if i <= 10 or msg.role != "tool":
            continue
        (part,) = msg.tool_results[0].content
        assert isinstance(part, TextBlock)
        if static in split_paragraphs(part.text)[::2]:
            (new,) = out.messages[i].tool_results[0].content
            assert isinstance(new, ElidedBlock), i
            etag = payload_etag([part])
            assert new.etag == etag
            if new.text:
                line = (
                    '[static text elided: "[This is the original code…"; same as message 10, '
                    f"etag {etag}]"
                )
                assert new.text == part.text.replace(static, line), i
                assert new.ref == "message 10"
                assert new.label == '"[This is the original code…"'
            else:  # the whole result repeats an earlier one
                assert part.text in earlier, i
            checked += 1
        earlier.add(part.text)
    assert checked >= 3
    assert compactkit.count_tokens(out) < compactkit.count_tokens(ctx) - 3 * 100
    assert expand(out) == ctx


def test_a_whole_repeated_format_error_becomes_an_empty_elided_block() -> None:
    """mini-swe-agent: the 'provide EXACTLY ONE action' format error is repeated verbatim; every
    later copy shows only the reference marker_text gives, and the saving is what the blocks
    lost."""
    ctx = compactkit.load_one(sample("sphinx-doc"))
    first_index = next(
        i
        for i, m in enumerate(ctx.messages)
        if any("EXACTLY ONE action" in r.text for r in m.tool_results)
    )
    first = ctx.messages[first_index].tool_results[0]
    out = StaticElision().compact(ctx)
    counter = get_counter()
    expected_saving = 0
    repeats = 0
    for i, msg in enumerate(ctx.messages):
        if i <= first_index or not msg.tool_results:
            continue
        result = msg.tool_results[0]
        if result.content != first.content:
            continue
        (part,) = out.messages[i].tool_results[0].content
        assert isinstance(part, ElidedBlock)
        assert part.text == ""
        assert part.ref == f"message {first_index}"
        assert part.etag == payload_etag(first.content)
        assert marker_text(part) == (
            f'[static text elided: "Please always provide EXACTLY…"; same as message '
            f"{first_index}, etag {part.etag}]"
        )
        expected_saving += counter.block(result) - counter.block(out.messages[i].tool_results[0])
        repeats += 1
    assert repeats >= 5
    assert expected_saving > repeats * 50
    total_saving = compactkit.count_tokens(ctx) - compactkit.count_tokens(out)
    assert total_saving >= expected_saving
    # assistant turns are the model's own words: left alone by default
    for i, msg in enumerate(ctx.messages):
        if msg.role == "assistant":
            assert out.messages[i] is msg


def test_claude_code_read_reminder_is_kept_once() -> None:
    """Claude Code appends the same <system-reminder> to every file read; only the first stays."""
    ctx = compactkit.load_one(corpus_file("codemie_incremental-subagents"))
    reminder_at = None
    reminder = ""
    for i, msg in enumerate(ctx.messages):
        for result in msg.tool_results:
            for para in split_paragraphs(result.text)[::2]:
                if para.startswith("<system-reminder>\nWhenever you read a file"):
                    reminder_at, reminder = i, para
                    break
            if reminder_at is not None:
                break
        if reminder_at is not None:
            break
    assert reminder_at is not None
    out = StaticElision().compact(ctx)
    assert out.messages[reminder_at] is ctx.messages[reminder_at]
    counter = get_counter()
    replaced = 0
    expected_saving = 0
    for i in range(reminder_at + 1, len(ctx.messages)):
        pairs = zip(ctx.messages[i].tool_results, out.messages[i].tool_results, strict=True)
        for before, after in pairs:
            for part, new in zip(before.content, after.content, strict=True):
                if not isinstance(part, TextBlock) or reminder not in part.text:
                    continue
                assert isinstance(new, ElidedBlock)
                line = (
                    '[static text elided: "<system-reminder> Whenever you…"; same as message '
                    f"{reminder_at}, etag {payload_etag([part])}]"
                )
                shown = part.text.replace(reminder, line)
                assert new.text == shown
                assert new.ref == f"message {reminder_at}"
                expected_saving += counter.text(part.text) - counter.text(shown)
                replaced += 1
    assert replaced >= 5
    assert expected_saving > replaced * 20
    assert compactkit.count_tokens(ctx) - compactkit.count_tokens(out) == expected_saving


def _ctx(*messages: Message, system: str | None = None, **kw: Any) -> AgentContext:
    return AgentContext(system_instruction=system, messages=messages, **kw)


POLICY = (
    "Policy: before taking any action that updates the booking database (booking, modifying "
    "flights, editing baggage, upgrading cabin class, or updating passenger information), you "
    "must list the action details and obtain explicit user confirmation (yes) to proceed. You "
    "should not provide any information, knowledge, or procedures not provided by the user or "
    "available tools, or give subjective recommendations or comments. You should only make one "
    "tool call at a time, and if you make a tool call, you should not respond to the user "
    "simultaneously."
)


def test_system_instruction_copy_in_a_user_message_refers_to_the_system_instruction() -> None:
    ctx = _ctx(
        Message(role="user", content=(TextBlock(text="Task: rebook me.\n\n" + POLICY),)),
        Message(role="assistant", content=(TextBlock(text="Sure."),)),
        Message(
            role="user",
            content=(TextBlock(text="Reminder:\n\n" + POLICY + "\n\nThanks"),),
            metadata={"origin": "harness"},  # a copy the agent's harness injected
        ),
        system="You are an airline agent.\n\n" + POLICY,
    )
    out = StaticElision().compact(ctx)
    assert out.messages[0] is ctx.messages[0]  # the task keeps its copy
    (block,) = out.messages[2].content
    assert isinstance(block, ElidedBlock)
    assert block.ref == "system instruction"
    assert block.text.startswith('Reminder:\n\n[static text elided: "Policy: before taking any')
    assert block.text.endswith(f"same as system instruction, etag {block.etag}]\n\nThanks")
    assert expand(out) == ctx
    assert validate(out, ctx) == []
    assert StaticElision().compact(out) == out


def test_the_users_own_copy_of_the_policy_is_pinned_and_stays() -> None:
    said = Message(role="user", content=(TextBlock(text="Reminder:\n\n" + POLICY + "\n\nThanks"),))
    ctx = _ctx(
        Message(role="user", content=(TextBlock(text="Task: rebook me."),)),
        Message(role="assistant", content=(TextBlock(text="Sure."),)),
        said,
        system="You are an airline agent.\n\n" + POLICY,
    )
    assert StaticElision().compact(ctx) is ctx


def test_skill_body_is_a_source_and_named_in_the_reference() -> None:
    ctx = _ctx(
        Message(role="user", content=(TextBlock(text="Do the thing."),)),
        Message(role="user", content=(TextBlock(text=POLICY),), metadata={"origin": "harness"}),
        activated_skills={"airline": POLICY},
    )
    out = StaticElision().compact(ctx)
    (block,) = out.messages[1].content
    assert isinstance(block, ElidedBlock)
    assert (block.ref, block.text) == ("skill airline", "")


def test_nothing_to_do_returns_the_same_object() -> None:
    ctx = compactkit.load_one(sample("test-repo-i1"))
    assert StaticElision().compact(ctx) is ctx
    short = _ctx(
        Message(role="user", content=(TextBlock(text="fix it"),)),
        Message(role="user", content=(TextBlock(text="fix it"),)),  # a repeat, but tiny
    )
    assert StaticElision().compact(short) is short
    assert StaticElision().compact(AgentContext()) == AgentContext()


def test_the_task_is_never_touched_even_when_it_repeats_the_system_prompt() -> None:
    ctx = _ctx(Message(role="user", content=(TextBlock(text=POLICY),)), system=POLICY)
    assert StaticElision().compact(ctx) is ctx


def test_options_change_what_is_elided() -> None:
    ctx = compactkit.load_one(sample("sphinx-doc"))
    default = StaticElision().compact(ctx)
    no_tools = StaticElision(include_tool_results=False).compact(ctx)
    assert all(
        i is j for i, j in zip(no_tools.messages, ctx.messages, strict=True) if i.role == "tool"
    )
    with_assistant = StaticElision(include_assistant=True).compact(ctx)
    assert any(
        m.role == "assistant" and m is not ctx.messages[i]
        for i, m in enumerate(with_assistant.messages)
    )
    assert compactkit.count_tokens(with_assistant) < compactkit.count_tokens(default)
    plain = StaticElision(snippet=False).compact(ctx)
    assert all(b.label == "" for _, b in _elided(plain))
    assert all(b.label.startswith('"') for _, b in _elided(default))
    fewer = StaticElision(min_tokens=500).compact(ctx)
    assert len(_elided(fewer)) < len(_elided(default))
    with pytest.raises(ConfigError):
        StaticElision(min_repeats=2)


def test_a_payload_a_collapsed_marker_points_at_is_left_whole() -> None:
    text = "Tool header\n\n" + POLICY
    payload = (TextBlock(text=text),)
    ctx = _ctx(
        Message(role="user", content=(TextBlock(text="Task\n\n" + POLICY),)),
        Message(role="assistant", content=(ToolCallBlock(id="a", name="read", input={}),)),
        Message(role="tool", content=(ToolResultBlock(tool_call_id="a", content=payload),)),
        Message(role="assistant", content=(ToolCallBlock(id="b", name="read", input={}),)),
        Message(
            role="tool",
            content=(
                ToolResultBlock(
                    tool_call_id="b",
                    content=(CollapsedBlock(etag=payload_etag(payload), path="x"),),
                ),
            ),
        ),
    )
    assert StaticElision().compact(ctx) is ctx
    assert validate(ctx, ctx) == []


def test_prefix_is_stable_when_messages_are_appended() -> None:
    """A block's fate depends only on what comes before it: compacting a longer session gives
    the same messages for the shared prefix (prompt caches keep hitting)."""
    ctx = compactkit.load_one(sample("pi-mono"))
    half = ctx.with_messages(ctx.messages[: len(ctx.messages) // 2])
    full_out = StaticElision().compact(ctx)
    half_out = StaticElision().compact(half)
    assert full_out.messages[: len(half.messages)] == half_out.messages


def test_registered_under_its_name() -> None:
    strat = compactkit.pipeline.get_strategy("static-elision", None, min_tokens=60)
    assert isinstance(strat, StaticElision)
    assert strat.label == "static-elision:min_tokens=60"


def test_docs_example_runs() -> None:
    page = (ROOT / "docs" / "strategies" / "static-elision.md").read_text(encoding="utf-8")
    blocks = re.findall(r"```python\n(.*?)```", page, re.S)
    assert blocks
    for code in blocks:
        exec(compile(code, "static-elision.md", "exec"), {"__name__": "docs"})
