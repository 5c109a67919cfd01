"""The scorer judges the user's words as the pins define them: the human text of a message, not the
harness blocks its adapter marked beside it (Cline's `<environment_details>`, `[TASK RESUMPTION]`).

Cline tasks written after Cline's source (the fixture of tests/formats/test_cline.py): every user
turn there carries the environment details, and the user's feedback, answers and new instructions
sit beside them in the same message."""

from __future__ import annotations

from pathlib import Path

from compactkit import AgentContext, Message
from compactkit.bench.retention import FactRetention, extract_facts, human_runs
from compactkit.context import HARNESS_BLOCKS_KEY, TextBlock

from ..formats.test_cline import XML_TASK, load, write


def _cline_task(tmp_path: Path) -> AgentContext:
    ctx = load(write(tmp_path, XML_TASK))
    assert any(m.metadata.get(HARNESS_BLOCKS_KEY) for m in ctx.messages if m.is_human)
    return ctx


def _drop_blocks(ctx: AgentContext, drop: str) -> AgentContext:
    """A hostile strategy: every text block of a human message that holds `drop` is gone, the rest
    of the message (and of the context) as it was."""
    out: list[Message] = []
    for msg in ctx.messages:
        if msg.is_human and any(isinstance(b, TextBlock) and drop in b.text for b in msg.content):
            kept = tuple(
                b for b in msg.content if not (isinstance(b, TextBlock) and drop in b.text)
            )
            out.append(msg.model_copy(update={"content": kept, "metadata": {}}))
        else:
            out.append(msg)
    return ctx.with_messages(tuple(out))


def test_user_facts_are_the_human_text_without_the_environment(tmp_path: Path) -> None:
    ctx = _cline_task(tmp_path)
    said = [f.text for f in extract_facts(ctx) if f.kind == "user_message"]
    assert said == [
        "<task> The build fails on src/app.ts, fix it </task>",
        "The user provided the following feedback: <feedback> also keep it a string in .env "
        "</feedback>",
        "<feedback> use pnpm, not npm </feedback>",
        "<answer> both please </answer>",
        "New instructions for task continuation: <user_message> now bump the version "
        "</user_message>",
    ]
    assert not any("environment_details" in s or "TASK RESUMPTION" in s for s in said)
    task = next(f.text for f in extract_facts(ctx) if f.kind == "task")
    assert task == "<task> The build fails on src/app.ts, fix it </task>"


def test_dropping_the_feedback_but_keeping_the_environment_loses_it(tmp_path: Path) -> None:
    ctx = _cline_task(tmp_path)
    out = _drop_blocks(ctx, "<feedback>\nuse pnpm")
    assert any("<environment_details>" in m.text for m in out.messages)
    kept, _ = FactRetention().score(ctx, out)
    assert kept.by_kind["user_message"] == [4, 5]


def test_dropping_only_the_environment_loses_no_user_words(tmp_path: Path) -> None:
    ctx = _cline_task(tmp_path)
    out = _drop_blocks(ctx, "<environment_details>")
    out = _drop_blocks(out, "[TASK RESUMPTION]")
    assert not any("<environment_details>" in m.text for m in out.messages if m.is_human)
    kept, _ = FactRetention().score(ctx, out)
    for kind in ("task", "user_message", "last_instruction"):
        assert kept.kind_share(kind) == 1.0, (kind, kept.by_kind[kind])
    # the scorer before: a message matched by its first 1,000 characters, harness included
    before = [" ".join(m.text.split())[:1000] for m in ctx.messages if m.is_human]
    shown = " ".join(" ".join(m.text.split()) for m in out.messages)
    assert sum(text not in shown for text in before) >= 4  # all but the last counted lost


def test_words_on_both_sides_of_a_harness_block_are_one_fact(tmp_path: Path) -> None:
    msg = Message(
        role="user",
        content=(
            TextBlock(text="first part of my request"),
            TextBlock(text="<environment_details>\nx\n</environment_details>"),
            TextBlock(text="and its second part"),
        ),
        metadata={HARNESS_BLOCKS_KEY: [1]},
    )
    ctx = AgentContext(messages=(msg,))
    assert human_runs(msg) == ["first part of my request", "and its second part"]
    (fact,) = [f for f in extract_facts(ctx) if f.kind == "user_message"]
    assert fact.parts == ("first part of my request", "and its second part")
    assert FactRetention().score(ctx, ctx)[0].share == 1.0
    lost = ctx.with_messages((msg.model_copy(update={"content": msg.content[:2], "metadata": {}}),))
    assert FactRetention().score(ctx, lost)[0].by_kind["user_message"] == [0, 1]


def test_the_words_an_adapter_pinned_in_a_tool_result_are_user_words() -> None:
    from compactkit import ToolCallBlock, ToolResultBlock
    from compactkit.pins import mark

    words = "yes, but run it with pnpm, never npm"
    call = ToolCallBlock(id="c1", name="bash", input={"command": "npm test"})
    result = ToolResultBlock(
        tool_call_id="c1",
        content=(TextBlock(text="The user rejected the call."), TextBlock(text=words)),
    )
    ctx = AgentContext(
        messages=(
            Message(role="user", content=(TextBlock(text="make the tests pass"),)),
            Message(role="assistant", content=(call,)),
            Message(role="tool", content=(result,)),
        ),
        pins=(mark(words, 2, "user-feedback"),),
    )
    said = [f.text for f in extract_facts(ctx) if f.kind == "user_message"]
    assert said == ["make the tests pass", words]
    assert FactRetention().score(ctx, ctx)[0].kind_share("user_message") == 1.0
    cleared = result.model_copy(update={"content": (TextBlock(text="[cleared]"),)})
    out = ctx.with_messages((*ctx.messages[:2], Message(role="tool", content=(cleared,))))
    assert FactRetention().score(ctx, out)[0].by_kind["user_message"] == [1, 2]
