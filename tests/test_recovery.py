"""The recovery store: content addresses, expand, prune, stash files."""

from __future__ import annotations

import hashlib
import json

import pytest

import compactkit
from compactkit import (
    AgentContext,
    BadInputError,
    TextBlock,
    build_pipeline,
    expand,
    split_stash,
    unrecoverable,
)
from compactkit.context import canonical_json
from compactkit.recovery import prune, put, read_stash, stash_json

from .conftest import sample

CTX = compactkit.load_one(sample("sphinx-doc__sphinx-9229"))


def test_an_entry_is_addressed_by_its_content_and_stored_once() -> None:
    store: dict[str, str] = {}
    blocks = [TextBlock(text="the same payload")]
    etag = put(store, blocks)
    assert put(store, [TextBlock(text="the same payload")]) == etag
    assert len(store) == 1
    payload = canonical_json([b.model_dump(mode="json", exclude_none=True) for b in blocks])
    assert etag == hashlib.sha256(payload.encode()).hexdigest()[:16]
    assert json.loads(store[etag]) == [{"type": "text", "text": "the same payload"}]


def test_repeated_compactions_expand_back_in_one_step() -> None:
    once = build_pipeline(["default"], budget=30_000).run(CTX).context
    twice = build_pipeline(["default"], budget=5_000).run(once).context
    assert compactkit.count_tokens(twice) < compactkit.count_tokens(once)
    assert expand(twice) == CTX
    assert expand(twice).recovery == {}  # every entry used up


def test_a_stash_moves_the_store_out_and_back() -> None:
    out = build_pipeline(["default"], budget=12_000).run(CTX).context
    bare, stash = split_stash(out)
    assert bare.recovery == {} and stash == out.recovery
    assert unrecoverable(bare) != []  # markers whose content is elsewhere
    assert unrecoverable(bare, stash) == []
    assert expand(bare, read_stash(stash_json(stash), "s.json")) == CTX


def test_prune_keeps_only_entries_a_marker_still_reaches() -> None:
    out = build_pipeline(["default"], budget=12_000).run(CTX).context
    padded = out.replace(recovery={**out.recovery, "ffffffffffffffff": "[]"})
    assert prune(padded) == out
    assert prune(out) is out  # nothing to drop: the same value


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("{not json", "stash is not JSON"),
        ('{"format": "other"}', "not a compactkit stash file"),
        ('{"format": "compactkit.stash/1", "entries": {"a": 1}}', "map etags to strings"),
    ],
)
def test_a_bad_stash_file_is_one_clear_error(text: str, problem: str) -> None:
    with pytest.raises(BadInputError, match=problem):
        read_stash(text, "bad.stash.json")


def test_a_window_stored_in_parts_keeps_wide_text_as_escapes_and_expands_back() -> None:
    """A removed window over the part size is stored in parts; a part holding wide characters (an
    emoji, CJK, a lone surrogate) is kept one byte a character as JSON escapes, and expand gives
    back exactly the messages that were removed."""
    wide = "日本語 🧪 \ud800 é " * 40
    messages = [
        compactkit.Message(
            role="user" if i % 2 else "assistant", content=(TextBlock(text=f"{i} {wide}"),)
        )
        for i in range(1200)
    ]
    store: dict[str, str] = {}
    etag = put(store, messages)
    parts = [json.loads(raw) for key, raw in store.items() if key != etag]
    assert len(parts) > 1
    assert all(raw.isascii() or max(raw) <= "\xff" for raw in store.values())
    assert "\\ud83e\\uddea" in store[next(k for k in store if k != etag)]
    for key, raw in store.items():  # every entry is still addressed by its own text
        assert hashlib.sha256(raw.encode("utf-8", "surrogatepass")).hexdigest()[:16] == key
    marker = compactkit.AgentContext(
        messages=(
            compactkit.Message(
                role="user",
                content=(compactkit.OmittedBlock(etag=etag, messages=len(messages)),),
                metadata={"compactkit_marker": "omitted"},
            ),
        ),
        recovery=store,
    )
    assert expand(marker).messages == tuple(messages)


def test_windows_stored_again_before_every_call_are_byte_identical_to_fresh_ones() -> None:
    """sliding-window before every model call of a growing session stores the same oldest
    messages again on every call; what it remembers of them (their JSON, the parts of a long
    window) gives exactly the store entries new values give, parts included."""
    from compactkit.recovery import CHUNK_MARKER, spilling
    from compactkit.strategies.sliding_window import SlidingWindow

    ctx = compactkit.load_one(sample("pi-mono"))
    window = SlidingWindow(max_tokens=8_000)
    calls = [i for i, m in enumerate(ctx.messages) if m.role == "assistant"][10::25]
    parted = False
    for index in calls:
        grown = ctx.replace(messages=ctx.messages[:index])
        again = window.compact(grown)
        fresh = window.compact(AgentContext.model_validate_json(grown.model_dump_json()))
        assert again.recovery == fresh.recovery and again.messages == fresh.messages
        assert expand(again) == grown
        parts = [
            m["content"][0]["etag"]
            for entry in again.recovery.values()
            if CHUNK_MARKER in entry
            for m in json.loads(entry)
        ]
        parted = parted or bool(parts)
        with spilling() as spill:  # a command that spills keeps the parts in its file
            spilled = window.compact(grown)
            assert spilled.messages == again.messages
            assert [spill.get(e) for e in parts] == [again.recovery[e] for e in parts]
    assert parted  # the longest windows were stored in parts
