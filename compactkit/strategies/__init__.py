"""compactkit's own strategies: the five built-ins (`BUILTIN`) and the peers' policies
(`peers.PEERS`). The built-in plugins register these classes, and the pipeline trusts these
classes alone (by identity, never by name)."""

from __future__ import annotations

from .etag_collapse import EtagCollapse
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

__all__ = [
    "BUILTIN",
    "EtagCollapse",
    "LlmSummary",
    "ObservationMask",
    "SlidingWindow",
    "StaticElision",
]
