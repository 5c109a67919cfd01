"""Every corpus file loads, is claimed by exactly one format, and pairs every tool call."""

from __future__ import annotations

from pathlib import Path

import pytest

import compactkit
from compactkit.defaults import default_pipeline
from compactkit.formats.base import read_document
from compactkit.pipeline import build_pipeline
from compactkit.recovery import expand
from compactkit.registry import Registry
from compactkit.validate import validate

from .conftest import corpus_files, every_conversation
from .formats._checks import pairing_problems

FILES = corpus_files()


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.name[:50])
def test_loads_with_exactly_one_format_and_valid_pairing(path: Path, registry: Registry) -> None:
    doc = read_document(path)
    claimed = [name for name, fmt in registry.formats.items() if fmt.sniff(doc)]
    assert len(claimed) == 1, claimed
    contexts = compactkit.load(path, registry=registry)
    assert contexts
    for n, ctx in enumerate(contexts):
        assert ctx.metadata["source_format"] == claimed[0]
        assert pairing_problems(ctx) == [], f"#{n}"
        assert validate(ctx) == [], f"#{n}"
        assert ctx.first_user_index is not None, f"#{n} has no task"
        assert any(m.is_human for m in ctx.messages), f"#{n} lost every word the user typed"
        assert expand(ctx) == ctx, f"#{n}: a loaded session is not a fixed point of expand"
        assert compactkit.AgentContext.from_native(ctx.to_native()) == ctx


def test_the_corpus_is_all_there() -> None:
    folders = {p.parent.name for p in FILES}
    if len(folders) == 1:  # bundled samples only
        assert len(FILES) >= 10
    else:
        assert len(FILES) == 23 and len(folders) == 8


def test_expand_undoes_the_default_pipeline_on_every_conversation() -> None:
    """`expand(compact(x)) == x`: what the default pipeline removes comes back exactly, source-agent
    summaries included (they are part of the original, not markers)."""
    pipeline = build_pipeline(default_pipeline(8_000))
    failures = [
        name for name, ctx in every_conversation() if expand(pipeline.run(ctx).context) != ctx
    ]
    assert failures == []
