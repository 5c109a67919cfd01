"""compactkit's own strategies: the five built-ins (`BUILTIN`), the arrival folders
(`ARRIVAL_BUILTIN`) and the peers' policies
(`peers.PEERS`). The built-in plugins register these classes, and the pipeline trusts these
classes alone (by identity, never by name)."""

from __future__ import annotations

from .etag_collapse import EtagCollapse
from .fold_json import FoldJson
from .fold_listings import FoldListings
from .fold_logs import FoldLogs
from .fold_repeats import FoldRepeats
from .llm_summary import LlmSummary
from .observation_mask import ObservationMask
from .sliding_window import SlidingWindow
from .static_elision import StaticElision

BUILTIN: tuple[type, ...] = (
    SlidingWindow,
    ObservationMask,
    EtagCollapse,
    StaticElision,
    LlmSummary,
)
"""The built-in strategies, in the order `compactkit strategies` has always registered them."""

ARRIVAL_BUILTIN: tuple[type, ...] = (FoldJson, FoldListings, FoldLogs, FoldRepeats)
"""The built-in arrival strategies (`Strategy.stage == "arrival"`): each new tool output folded
once, as it is appended."""

__all__ = [
    "ARRIVAL_BUILTIN",
    "BUILTIN",
    "EtagCollapse",
    "FoldJson",
    "FoldListings",
    "FoldLogs",
    "FoldRepeats",
    "LlmSummary",
    "ObservationMask",
    "SlidingWindow",
    "StaticElision",
]
