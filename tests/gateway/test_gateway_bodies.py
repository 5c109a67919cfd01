"""The gateway's body parser (`compactkit.gateway.body.Bodies`) reads what `json.loads` reads, and
takes the items a body re-sends from the body before it, ASCII bodies (compared as bytes, no copy)
and others alike."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

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


_TEXT = st.text(alphabet=st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=12)
_JSON = st.recursive(
    st.none() | st.booleans() | st.integers(-(10**6), 10**6) | _TEXT,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(_TEXT, inner, max_size=3),
    max_leaves=8,
)
_ITEM = st.dictionaries(st.sampled_from(["role", "content", "type", "id"]), _JSON, min_size=1)
_DUMPS = st.sampled_from(
    [
        {},
        {"ensure_ascii": False},
        {"ensure_ascii": False, "separators": (",", ":")},
        {"indent": 1, "ensure_ascii": False},
    ]
)


@given(
    head=st.dictionaries(st.sampled_from(["model", "max_tokens", "stream"]), _JSON, max_size=2),
    items=st.lists(_ITEM, min_size=1, max_size=6),
    tail=st.dictionaries(st.sampled_from(["system", "tools", "metadata"]), _JSON, max_size=2),
    edits=st.lists(st.tuples(st.integers(0, 8), _ITEM), max_size=3),
    grown=st.lists(_ITEM, max_size=3),
    options=_DUMPS,
    flip=st.integers(0, 10_000),
)
@settings(max_examples=150, deadline=None)
def test_any_body_after_any_other_reads_as_json_reads_it(
    head: dict[str, Any],
    items: list[Any],
    tail: dict[str, Any],
    edits: list[tuple[int, Any]],
    grown: list[Any],
    options: dict[str, Any],
    flip: int,
) -> None:
    """A body, then the same conversation grown and edited (an item rewritten, items added, a
    field changed), then that body with one byte changed: each reads as `json.loads` reads it,
    or is left to it (None), never as a different value; and what the gateway writes from it
    serializes as `dumps` does."""
    # a long first field, as a real body's model and first message: the bodies are matched by
    # their first bytes, so the second one is read against the first
    lead = {"model": "claude-" + "x" * 600}
    first = {**lead, **head, "messages": items, **tail}
    later = [*items, *grown]
    for at, item in edits:
        later[at % len(later)] = item
    second = {**lead, **head, "messages": later, **tail, "system": "changed"}
    bodies = Bodies()
    raws = [json.dumps(b, **options).encode() for b in (first, second)]
    broken = bytearray(raws[1])
    broken[flip % len(broken)] ^= 0x20
    for raw in (*raws, bytes(broken)):
        got = bodies.loads(raw)
        try:
            expected = json.loads(raw)
        except (ValueError, RecursionError):
            assert got is None
            continue
        if got is not None:
            assert got == expected and list(got) == list(expected)
            # a body the gateway writes from it serializes as `dumps` does (or raises as it does:
            # a lone surrogate a flipped escape made has no UTF-8)
            if not isinstance(got.get("messages"), list):
                continue
            written = {**got, "messages": [{"role": "user"}, *got["messages"][1:]]}
            try:
                want = dumps(written)
            except UnicodeEncodeError:
                with pytest.raises(UnicodeEncodeError):
                    bodies.dumps(written, got)
                continue
            assert bodies.dumps(written, got) == want
