"""Built-in tokenizers: tiktoken's o200k_base and cl100k_base from verified local vocabularies."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..hookspecs import hookimpl
from ..tokens import TiktokenTokenizer

# one instance per process: a vocabulary loads once, however many registries are built
O200K_BASE = TiktokenTokenizer("o200k_base")
CL100K_BASE = TiktokenTokenizer("cl100k_base")


@hookimpl
def register_tokenizers(register: Callable[[Any], None]) -> None:
    """Register o200k_base (the default) and cl100k_base."""
    register(O200K_BASE)
    register(CL100K_BASE)
