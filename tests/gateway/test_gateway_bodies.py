"""The gateway's body parser (`compactkit.gateway.body.Bodies`) reads what `json.loads` reads, and
takes the items a body re-sends from the body before it, ASCII bodies (compared as bytes, no copy)
and others alike."""

from __future__ import annotations

import json
from typing import Any

import pytest

from compactkit.gateway.body import Bodies, dumps


def _body(texts: list[str]) -> bytes:
    messages = [
        {"role": "user" if n % 2 == 0 else "assistant", "content": [{"type": "text", "text": t}]}
        for n, t in enumerate(texts)
    ]
    return json.dumps({"model": "m", "max_tokens": 10, "messages": messages}).encode()


@pytest.mark.parametrize("ascii_only", [True, False], ids=["ascii", "non-ascii"])
def test_bodies_read_what_json_reads_and_reuse_what_was_re_sent(ascii_only: bool) -> None:
    word = "step" if ascii_only else "étape ✓"
    history = [f"{word} {n} " * 40 for n in range(30)]
    bodies = Bodies()
    first = dumps(json.loads(_body(history)))  # as JSON.stringify sends it: non-ASCII as it is
    assert first.isascii() == ascii_only
    got = bodies.loads(first)
    assert got == json.loads(first)
    grown = dumps({**json.loads(first), "messages": [*got["messages"], got["messages"][0]]})
    again: Any = bodies.loads(grown)
    assert again == json.loads(grown)
    # the re-sent items are the earlier body's objects: read once
    assert all(a is b for a, b in zip(again["messages"][:30], got["messages"], strict=True))
    edited = json.loads(grown)
    edited["messages"][10]["content"][0]["text"] = "rewritten"
    third: Any = bodies.loads(dumps(edited))
    assert third == edited
    assert all(a is b for a, b in zip(third["messages"][:10], got["messages"], strict=False))
    assert third["messages"][10] is not again["messages"][10]


def _claude_like(n: int, word: str, breakpoint_at: int | None) -> dict[str, Any]:
    """A body shaped as Claude Code sends it: the messages first, then the system prompt and the
    tools, a cache breakpoint on one message."""
    messages: list[Any] = []
    for k in range(n):
        block: dict[str, Any] = {"type": "text", "text": f"{word} {k} " * 80}
        if k == breakpoint_at:
            block["cache_control"] = {"type": "ephemeral"}
        messages.append({"role": "user" if k % 2 == 0 else "assistant", "content": [block]})
    return {
        "model": "m",
        "messages": messages,
        "system": [{"type": "text", "text": f"You are {word}."}],
        "tools": [{"name": "read", "input_schema": {"type": "object"}}],
        "max_tokens": 64,
        "stream": True,
    }


@pytest.mark.parametrize("word", ["step", "étape ✓"], ids=["ascii", "non-ascii"])
@pytest.mark.parametrize("indent", [None, 2], ids=["compact", "indented"])
def test_a_conversation_read_body_after_body_is_what_json_reads(
    word: str, indent: int | None
) -> None:
    """Each request re-sends the last one's messages, its cache breakpoint moved to its new last
    message, the fields after the messages as they were (or the system prompt changed once):
    every body reads as `json.loads` reads it, the re-sent messages and fields are the last
    body's objects, and a body written from it serializes as `dumps` does."""
    bodies = Bodies()
    before: Any = None
    for n in range(2, 14):
        sent = _claude_like(n, word, breakpoint_at=n - 1)
        if n >= 9:  # from here on
            sent["system"][0]["text"] += " Be brief."
        raw = json.dumps(sent, ensure_ascii=False, indent=indent).encode()
        got: Any = bodies.loads(raw)
        assert got == json.loads(raw)
        assert list(got) == list(json.loads(raw))  # the keys in the order sent
        if before is not None:
            # all but the one that lost its breakpoint, read once
            assert all(
                a is b
                for a, b in zip(got["messages"][: n - 2], before["messages"][: n - 2], strict=True)
            )
            assert got["messages"][n - 2] is not before["messages"][n - 2]
            assert (got["tools"] is before["tools"]) and (
                (got["system"] is before["system"]) == (n != 9)
            )
        written = {
            **got,
            "messages": [{"role": "user", "content": "summary"}, *got["messages"][3:]],
        }
        assert bodies.dumps(written, got) == dumps(written)
        before = got


ODD = [
    b'{"model":"m","messages":[{"a":1}],"model":"n"}',  # a key twice: the last one wins
    b'{"input":"just text","model":"m"}',  # Responses: input as a string
    b'{"input":["text",{"type":"message"},3,null],"x":[]}',
    b'{"messages":[]}',
    b"{}",
    b' {"messages":[{"a":1}]}',
    b'{"messages":[{"a":1}]} x',
    b'{"messages":[{"a":1},]}',
    b'{"messages":[{"a":"\\ud83d\\ude00 \\u00e9"}],"s":"\xc3\xa9"}',
    b'{"messages":[{"a":"\xff"}]}',  # not UTF-8
    b'{"messages":[{"a":1}],"messages":[{"b":2}]}',
    b'{"messages":[{"a":1}], "system" : "s" ,"n": 1.5e3}',
]


@pytest.mark.parametrize("raw", ODD, ids=range(len(ODD)))
def test_odd_bodies_read_as_json_reads_them_or_are_left_to_it(raw: bytes) -> None:
    """Whatever a body holds, the parser reads what `json.loads` reads, or leaves it to it (None),
    first or after a body that shares its beginning."""
    for before in (None, b'{"model":"m","messages":[{"a":1}],"system":"s"}', raw):
        bodies = Bodies()
        if before is not None:
            bodies.loads(before)
        got = bodies.loads(raw)
        if got is None:
            continue
        assert got == json.loads(raw)
        assert list(got) == list(json.loads(raw))
