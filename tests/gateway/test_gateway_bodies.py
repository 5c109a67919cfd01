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
