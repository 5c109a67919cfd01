"""Built-in strategies, registered exactly as a third-party strategy plugin would be."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..hookspecs import hookimpl
from ..strategies import BUILTIN


@hookimpl
def register_strategies(register: Callable[[Any], None]) -> None:
    """Register the five built-in strategies."""
    for cls in BUILTIN:
        register(cls)
