"""llm-summary backends: the `Summarizer` plugin interface and the built-in backends.

A backend is a `Summarizer` subclass registered through the `register_summarizers` hook (called with
the class). The `llm-summary` strategy looks it up by name in the plugin registry.
"""

from __future__ import annotations

from ..prompts import SYSTEM_PROMPT
from .base import CACHE, SUMMARY_SECTIONS, Summarizer, SummaryCache, SummaryRequest

__all__ = [
    "CACHE",
    "SUMMARY_SECTIONS",
    "SYSTEM_PROMPT",
    "Summarizer",
    "SummaryCache",
    "SummaryRequest",
]
