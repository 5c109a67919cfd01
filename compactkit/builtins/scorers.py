"""The built-in retention scorer, registered exactly as a third-party scorer would be."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..bench.retention import FactRetention
from ..hookspecs import hookimpl


@hookimpl
def register_scorers(register: Callable[[Any], None]) -> None:
    """Register `facts`: task, the user's messages, last instruction, file paths and errors, read
    from what the model saw in the original."""
    register(FactRetention())
