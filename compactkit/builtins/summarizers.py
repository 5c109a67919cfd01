"""Built-in llm-summary backends, registered exactly as a third-party backend plugin would be."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..hookspecs import hookimpl
from ..summarize.anthropic_backend import AnthropicSummarizer
from ..summarize.extractive import ExtractiveSummarizer
from ..summarize.openai_backend import OpenAISummarizer


@hookimpl
def register_summarizers(register: Callable[[Any], None]) -> None:
    """Register the offline `extractive` backend and the `openai` and `anthropic` backends (whose
    SDKs are imported only when a summary is asked for)."""
    for cls in (ExtractiveSummarizer, OpenAISummarizer, AnthropicSummarizer):
        register(cls)
