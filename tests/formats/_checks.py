"""Structural checks every loaded conversation must pass, shared by the format tests
(`pairing_problems` is the conformance kit's, `compactkit.testing`)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import compactkit
from compactkit import AgentContext, Format
from compactkit.formats.base import read_document
from compactkit.testing import pairing_problems

from ..conftest import corpus_files

__all__ = ["assert_sniffs_only_its_own", "load_single", "pairing_problems", "raw_json"]


def load_single(path: Path) -> AgentContext:
    """The one conversation a session file holds (fails the test if it holds several)."""
    contexts = compactkit.load(path)
    assert len(contexts) == 1
    return contexts[0]


def raw_json(path: Path) -> Any:
    """A session file's JSON, parsed independently of compactkit."""
    return json.loads(path.read_text(encoding="utf-8"))


def assert_sniffs_only_its_own(fmt: Format, folder: str, prefix: str) -> None:
    """`fmt` recognises exactly the corpus files of its folder (and bundled samples named `prefix*`)."""
    for path in corpus_files():
        expected = path.parent.name == folder or path.name.startswith(prefix)
        assert fmt.sniff(read_document(path)) is expected, path.name
