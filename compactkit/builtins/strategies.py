"""Built-in strategies, registered exactly as a third-party strategy plugin would be."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..hookspecs import hookimpl
from ..strategies import ARRIVAL_BUILTIN, BUILTIN


@hookimpl
def register_strategies(register: Callable[[Any], None]) -> None:
    """Register the built-in strategies: five at the trigger, the folders on arrival."""
    for cls in (*BUILTIN, *ARRIVAL_BUILTIN):
        register(cls)
