"""Built-in strategies, registered exactly as a third-party strategy plugin would be."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..hookspecs import hookimpl
from ..strategies.etag_collapse import EtagCollapse
from ..strategies.llm_summary import LlmSummary
from ..strategies.observation_mask import ObservationMask
from ..strategies.sliding_window import SlidingWindow
from ..strategies.static_elision import StaticElision


@hookimpl
def register_strategies(register: Callable[[Any], None]) -> None:
    """Register the five built-in strategies."""
    for cls in (SlidingWindow, ObservationMask, EtagCollapse, StaticElision, LlmSummary):
        register(cls)
