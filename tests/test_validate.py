"""The validator: one breaking example per rule, generated from the rule list (a new rule without
an example fails here)."""

from __future__ import annotations

from collections.abc import Callable

import pytest

import compactkit
from compactkit import (
    AgentContext,
    MaskedBlock,
    Message,
    TextBlock,
    ThinkingBlock,
    ToolCallBlock,
    ToolResultBlock,
    message,
    validate,
)
from compactkit.validate import RULES


def _call(cid: str) -> ToolCallBlock:
    return ToolCallBlock(id=cid, name="Bash", input={"command": "ls"})


def _result(cid: str) -> ToolResultBlock:
    return ToolResultBlock(tool_call_id=cid, content=(TextBlock(text="ok"),))


BASE = AgentContext(
    system_instruction="be brief",
    messages=(
        message("user", "list the files"),
        Message(
            role="assistant",
            content=(ThinkingBlock(thinking="ls will do", signature="sig"), _call("a"), _call("b")),
        ),
        Message(role="tool", content=(_result("a"), _result("b"))),
        message("assistant", "done"),
        message("user", "thanks"),
        message("assistant", "welcome"),
    ),
)

Breaker = Callable[[AgentContext], AgentContext]


def _swap(i: int, msg: Message) -> Breaker:
    return lambda ctx: ctx.with_messages([*ctx.messages[:i], msg, *ctx.messages[i + 1 :]])


BREAKERS: dict[str, Breaker] = {
    "tool-result-without-call": _swap(1, Message(role="assistant", content=(_call("a"),))),
    "unanswered-tool-call": _swap(2, Message(role="tool", content=(_result("a"),))),
    "duplicate-tool-call-id": lambda ctx: ctx.with_messages(
        [*ctx.messages[:4], Message(role="assistant", content=(_call("a"),)), *ctx.messages[4:]]
    ),
    "tool-result-outside-tool-message": lambda ctx: ctx.with_messages(
        [
            *ctx.messages[:2],
            Message(role="tool", content=(_result("a"),)),
            Message(role="user", content=(_result("b"),)),
            *ctx.messages[3:],
        ]
    ),
    "parallel-results-split": lambda ctx: ctx.with_messages(
        [
            *ctx.messages[:2],
            Message(role="tool", content=(_result("a"),)),
            message("assistant", "one more"),
            Message(role="tool", content=(_result("b"),)),
            *ctx.messages[3:],
        ]
    ),
    "starts-with-tool-result": lambda ctx: ctx.with_messages(ctx.messages[2:]),
    "system-instruction-changed": lambda ctx: ctx.replace(system_instruction="be verbose"),
    "task-missing": _swap(0, message("user", "something else")),
    "thinking-detached": _swap(1, Message(role="assistant", content=(_call("a"), _call("b")))),
    "dangling-marker": _swap(
        2,
        Message(
            role="tool",
            content=(
                _result("a"),
                ToolResultBlock(
                    tool_call_id="b", content=(MaskedBlock(etag="0123456789abcdef", label="x"),)
                ),
            ),
        ),
    ),
    # the user's "thanks" (message 4) dropped from the middle
    "pin-broken": lambda ctx: ctx.with_messages([*ctx.messages[:4], *ctx.messages[5:]]),
}


def test_every_rule_has_a_breaking_example() -> None:
    assert set(BREAKERS) == set(RULES)


def test_the_base_context_is_valid() -> None:
    assert validate(BASE, BASE) == []


@pytest.mark.parametrize("rule", sorted(RULES))
def test_each_rule_catches_its_breakage_and_names_it(rule: str) -> None:
    broken = BREAKERS[rule](BASE)
    found = validate(broken, BASE)
    assert rule in {v.rule for v in found}, [str(v) for v in found]
    assert all(str(v).count(": ") >= 2 for v in found)  # where: rule: detail


def test_a_final_pending_call_is_allowed() -> None:
    pending = BASE.append(Message(role="assistant", content=(_call("z"),)))
    assert validate(pending, BASE) == []


def test_a_marker_whose_content_is_in_the_stash_is_not_dangling() -> None:
    broken = BREAKERS["dangling-marker"](BASE)
    stash = {"0123456789abcdef": "[]"}  # not the content address of "[]": checked separately
    problems = validate(broken, BASE, stash=stash, verify=False)
    assert "dangling-marker" not in {v.rule for v in problems}


def test_the_rule_list_is_documented() -> None:
    from pathlib import Path

    doc = (Path(compactkit.__file__).parent.parent / "docs" / "strategies.md").read_text()
    missing = [rule for rule in RULES if f"`{rule}`" not in doc]
    assert missing == []
