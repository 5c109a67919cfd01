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
