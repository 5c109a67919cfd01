"""What `inspect` reports about one conversation."""

from __future__ import annotations

import compactkit
from compactkit.inspection import INSPECT_SCHEMA, inspect_context
from compactkit.registry import get_counter

from .conftest import corpus_file, sample


def test_sizes_add_up_to_the_exact_count() -> None:
    ctx = compactkit.load_one(sample("sphinx-doc__sphinx-9229"))
    report = inspect_context(ctx, get_counter(), top=3)
    assert report["schema"] == INSPECT_SCHEMA
    assert report["tokens"] == compactkit.count_tokens(ctx)
    assert sum(report["tokens_by_role"].values()) + report["reply_priming"] == report["tokens"]
    assert len(report["largest_blocks"]) == 3
    sizes = [b["tokens"] for b in report["largest_blocks"]]
    assert sizes == sorted(sizes, reverse=True)


def test_repeated_payloads_are_named_by_the_call_that_read_them() -> None:
    ctx = compactkit.load_one(sample("codemie_gemini_session"))
    report = inspect_context(ctx, get_counter())
    assert report["redundant_tokens"] > 0
    top = report["repeated_payloads"][0]
    assert top["count"] >= 2 and top["label"].startswith("read_file /Users/")


def test_whose_words_and_what_the_loader_skipped_are_shown() -> None:
    ctx = compactkit.load_one(corpus_file("codemie_rollout-2026-05-11"))
    report = inspect_context(ctx, get_counter())
    assert report["user_messages"] == sum(m.is_human for m in ctx.messages) >= 1
    assert report["user_role_messages_by_origin"].get("harness", 0) >= 1
    skipped = report["skipped_records"]
    assert skipped and all(n > 0 for n in skipped.values())
    assert any(kind.startswith("event_msg/") for kind in skipped)
