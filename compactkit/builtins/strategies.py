"""Built-in strategies, registered exactly as a third-party strategy plugin would be."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..hookspecs import hookimpl
from ..strategies.etag_collapse import EtagCollapse
from ..strategies.fold_json import FoldJson
from ..strategies.fold_listings import FoldListings
from ..strategies.fold_logs import FoldLogs
from ..strategies.fold_repeats import FoldRepeats
from ..strategies.llm_summary import LlmSummary
from ..strategies.observation_mask import ObservationMask
from ..strategies.sliding_window import SlidingWindow
from ..strategies.static_elision import StaticElision


@hookimpl
def register_strategies(register: Callable[[Any], None]) -> None:
    """Register the built-in strategies: five at the trigger, the folders on arrival."""
    for cls in (SlidingWindow, ObservationMask, EtagCollapse, StaticElision, LlmSummary):
        register(cls)
    for arrival in ARRIVAL_FOLDERS:
        register(arrival)


ARRIVAL_FOLDERS = (FoldJson, FoldListings, FoldLogs, FoldRepeats)
"""The built-in arrival strategies (`Strategy.stage == "arrival"`)."""
