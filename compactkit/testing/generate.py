"""Hypothesis strategies that generate realistic, valid agent contexts for property tests."""

from __future__ import annotations

from typing import Any

from hypothesis import strategies as st

from ..context import (
    AgentContext,
    Message,
    TextBlock,
    ThinkingBlock,
    ToolCallBlock,
    ToolResultBlock,
)

_FILES = ["src/app.py", "src/util.py", "tests/test_app.py", "README.md", "setup.cfg"]
_WORDS = st.sampled_from(
    [
        "the",
        "of",
        "fix",
        "test",
        "error",
        "file",
        "read",
        "patch",
        "def",
        "return",
        "import",
        "value",
        "none",
        "assert",
        "class",
    ]
)


def _text(min_words: int = 1, max_words: int = 60) -> st.SearchStrategy[str]:
    return st.lists(_WORDS, min_size=min_words, max_size=max_words).map(" ".join)


@st.composite
def _payload(draw: st.DrawFn) -> str:
    # a small pool makes repeats (the thing compaction exploits) common
    pool = [f"contents of {f}\n" + "\n".join(f"line {k} of {f}" for k in range(40)) for f in _FILES]
    if draw(st.booleans()):
        return draw(st.sampled_from(pool))
    return draw(_text(1, 200))


@st.composite
def _turn(draw: st.DrawFn, n: int) -> list[Message]:
    content: list[Any] = []
    if draw(st.booleans()):
        content.append(
            ThinkingBlock(thinking=draw(_text()), signature=draw(st.none() | _text(1, 2)))
        )
    if draw(st.booleans()):
        content.append(TextBlock(text=draw(_text())))
    calls = []
    for k in range(draw(st.integers(0, 3))):
        call_id = f"call_{n}_{k}"
        if draw(st.booleans()):
            tool_input: Any = {"path": draw(st.sampled_from(_FILES))}
            name = "read"
        else:
            tool_input = {"command": f"cat {draw(st.sampled_from(_FILES))}"}
            name = "bash"
        calls.append(ToolCallBlock(id=call_id, name=name, input=tool_input))
    if not content and not calls:
        content.append(TextBlock(text=draw(_text())))
    turn = [Message(role="assistant", content=(*content, *calls))]
    if calls:
        results = tuple(
            ToolResultBlock(
                tool_call_id=c.id,
                content=(TextBlock(text=draw(_payload())),),
                is_error=draw(st.booleans()),
            )
            for c in calls
        )
        if draw(st.booleans()):
            turn.append(Message(role="tool", content=results))
        else:
            turn.extend(Message(role="tool", content=(r,)) for r in results)
    if draw(st.integers(0, 5)) == 0:
        turn.append(Message(role="user", content=(TextBlock(text=draw(_text())),)))
    return turn


@st.composite
def contexts(draw: st.DrawFn, max_turns: int = 25) -> AgentContext:
    """A valid context: optional system instruction, a task, then assistant turns with tool calls,
    their results (sometimes parallel in one tool message), thinking and occasional user messages."""
    messages = [Message(role="user", content=(TextBlock(text="Task: " + draw(_text(3, 30))),))]
    for n in range(draw(st.integers(0, max_turns))):
        messages.extend(draw(_turn(n)))
    system = draw(st.none() | _text(5, 80))
    return AgentContext(
        system_instruction=system, messages=tuple(messages), metadata={"source_format": "generated"}
    )
