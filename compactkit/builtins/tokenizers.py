"""Built-in tokenizers: tiktoken's o200k_base and cl100k_base from verified local vocabularies."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..hookspecs import hookimpl
from ..tokens import TiktokenTokenizer


@hookimpl
def register_tokenizers(register: Callable[[Any], None]) -> None:
    """Register o200k_base (the default) and cl100k_base."""
    register(TiktokenTokenizer("o200k_base"))
    register(TiktokenTokenizer("cl100k_base"))
