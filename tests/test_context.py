"""The context value: immutable, JSON round-trips, diff says what changed."""

from __future__ import annotations

import json
from pathlib import Path

import pydantic
import pytest

import compactkit
from compactkit import AgentContext, message
from compactkit.schema import context_schema

from .conftest import ROOT, sample


def test_values_are_frozen_and_reject_unknown_keys() -> None:
    ctx = compactkit.load_one(sample("test-repo-i1"))
    with pytest.raises(pydantic.ValidationError):
        ctx.messages = ()  # type: ignore[misc]
    data = ctx.to_native()
    data["surprise"] = 1
    with pytest.raises(ValueError):
        AgentContext.from_native(data)


def test_native_json_round_trips_exactly(tmp_path: Path) -> None:
    for path in (sample("test-repo-i1"), sample("gemini_session")):
        ctx = compactkit.load_one(path)
        out = tmp_path / "ctx.json"
        compactkit.dump(ctx, out)
        again = compactkit.load_one(out)
        assert again == ctx
        compactkit.dump(again, tmp_path / "ctx2.json")
        assert (tmp_path / "ctx2.json").read_text() == out.read_text()


def test_fork_leaves_the_original_untouched() -> None:
    ctx = compactkit.load_one(sample("test-repo-i1"))
    snapshot = ctx.to_json()
    forked = ctx.append(message("user", "one more thing"))
    assert len(forked.messages) == len(ctx.messages) + 1
    assert ctx.to_json() == snapshot


def test_diff_names_removed_and_changed_messages() -> None:
    ctx = compactkit.load_one(sample("test-repo-i1"))
    msgs = list(ctx.messages)
    removed = msgs.pop(3)
    msgs[5] = msgs[5].model_copy(update={"content": (compactkit.TextBlock(text="changed"),)})
    after = ctx.with_messages(msgs)
    d = compactkit.diff(ctx, after)
    kinds = [(m.change, m.before_index, m.after_index) for m in d.messages]
    assert ("removed", 3, None) in kinds
    assert ("changed", 6, 5) in kinds
    assert len(kinds) == 2
    assert removed.role == d.messages[kinds.index(("removed", 3, None))].role
    assert compactkit.diff(ctx, ctx).empty


def test_published_schema_matches_the_model() -> None:
    published = json.loads((ROOT / "docs" / "context.schema.json").read_text())
    assert published == json.loads(json.dumps(context_schema())), "run `make schema`"


# --------------------------------------------------------------------------- long wide text


def _lean_blocks(ctx: AgentContext) -> list[compactkit.TextBlock]:
    from compactkit.context import text_utf8

    found = []
    for _, _, block in ctx.iter_blocks():
        for part in (block, *getattr(block, "content", ())):
            if isinstance(part, compactkit.TextBlock) and text_utf8(part) is not None:
                found.append(part)
    return found


def _raw_texts(value: object) -> set[str]:
    if isinstance(value, str):
        return {value}
    items = value.values() if isinstance(value, dict) else value if isinstance(value, list) else ()
    return {t for item in items for t in _raw_texts(item)}


def test_long_text_with_wide_characters_is_held_as_utf8_and_reads_back_the_same() -> None:
    """A real Codex rollout's tool outputs holding a character above U+00FF (box drawing,
    emoji) are held at their UTF-8 size, not at two or four bytes a character, and read,
    compare, hash, copy, pickle and serialize exactly as the text they were given."""
    import copy
    import pickle
    import sys

    from compactkit.context import text_utf8

    path = sample("codemie_rollout-019e1625.head120")
    ctx = compactkit.load_one(path)
    lean = _lean_blocks(ctx)
    assert len(lean) >= 5
    originals = _raw_texts([json.loads(line) for line in path.read_text().splitlines()])
    for block in lean:
        text = block.text
        assert isinstance(text, str) and any(ord(c) > 0xFF for c in text)
        held = text_utf8(block)
        assert held is not None and sys.getsizeof(held) < sys.getsizeof(text) * 3 / 4
        assert held.decode() == text
        twin = compactkit.TextBlock(text=str(text))  # the same text from elsewhere
        assert twin == block and hash(twin) == hash(block) and twin is not block
        assert compactkit.TextBlock(text=text + "!") != block
        assert pickle.loads(pickle.dumps(block)) == block
        assert copy.deepcopy(block) == block and block.model_copy() == block
        assert block.model_copy(update={"text": "short"}).text == "short"
        assert block.model_dump() == {"type": "text", "text": text}
        assert json.loads(block.model_dump_json()) == {"type": "text", "text": text}
        assert block.model_dump(exclude={"text"}) == {"type": "text"}
        assert repr(block).startswith("TextBlock(type='text', text=")
    # what was in the file is what the blocks give back
    assert sum(1 for block in lean if block.text in originals) >= len(lean) - 1
    again = AgentContext.from_native(json.loads(ctx.to_json()))
    assert again == ctx and again.to_json() == ctx.to_json()


def test_metadata_with_nested_usage_is_held_as_json_and_reads_back_the_same() -> None:
    """A real mini-swe-agent trajectory's per-step metadata (ids, timestamps, token usage and its
    details, nested dicts) is held as its JSON text, far smaller than the dicts, and reads,
    compares, copies, pickles and serializes as the dict it was given; a marker's metadata and
    metadata JSON cannot give back exactly (NaN, a tuple) are held as given."""
    import copy
    import pickle
    import sys

    ctx = compactkit.load_one(sample("gemini3pro_sphinx-doc__sphinx-9229"))
    lean = [m for m in ctx.messages if "_meta" in m.__dict__]
    assert len(lean) >= 10
    for msg in lean:
        metadata = msg.metadata
        assert isinstance(metadata, dict) and any(isinstance(v, dict) for v in metadata.values())
        assert msg.metadata is not metadata  # a new dict each read: changing it changes nothing
        held = msg.__dict__["_meta"]
        assert sys.getsizeof(held) < _deep_size(metadata) / 3
        twin = compactkit.Message(role=msg.role, content=msg.content, metadata=dict(metadata))
        assert twin == msg and twin is not msg
        other = {**metadata, "id": "another"}
        assert compactkit.Message(role=msg.role, content=msg.content, metadata=other) != msg
        assert pickle.loads(pickle.dumps(msg)) == msg and copy.deepcopy(msg) == msg
        assert msg.model_copy(update={"content": ()}).metadata == metadata
        assert msg.model_copy(update={"metadata": {"k": 1}}).metadata == {"k": 1}
        assert msg.model_dump()["metadata"] == metadata
        assert json.loads(msg.model_dump_json())["metadata"] == metadata
        assert "metadata" not in msg.model_dump(exclude={"metadata"})
        assert repr(msg).endswith(f"metadata={metadata!r})")
    again = AgentContext.from_native(json.loads(ctx.to_json()))
    assert again == ctx and again.to_json() == ctx.to_json()
    for metadata in (
        {"compactkit_marker": "summary", "usage": {"tokens": 1}},
        {"usage": {"x": float("nan")}},
        {"id": "flat", "n": 3},
    ):
        msg = compactkit.Message(role="user", metadata=metadata)
        assert "_meta" not in msg.__dict__ and msg.metadata is msg.__dict__["metadata"]
    built = compactkit.Message.model_construct(role="user", metadata={"u": {"pair": (1, 2)}})
    assert built.metadata == {"u": {"pair": (1, 2)}}  # a tuple would come back a list: kept


def _deep_size(value: object) -> int:
    import sys

    items = value.items() if isinstance(value, dict) else value if isinstance(value, list) else ()
    inner = (
        sum(_deep_size(k) + _deep_size(v) for k, v in items)
        if isinstance(value, dict)
        else (sum(_deep_size(v) for v in items))
    )
    return sys.getsizeof(value) + inner


def test_short_and_narrow_text_is_held_as_given() -> None:
    from compactkit.context import text_utf8

    for text in ("✓ done", "x" * 5000, "café " * 1000, "日本語のテキスト" * 500):
        block = compactkit.TextBlock(text=text)
        assert text_utf8(block) is None and block.text is text
