"""compactkit: pluggable context-compaction strategies for LLM agents.

The public API is what `__all__` lists; everything else is private and may change.
"""

from __future__ import annotations

from ._version import __version__
from .context import (
    AgentContext,
    Block,
    CollapsedBlock,
    ContentPart,
    ContextDiff,
    ElidedBlock,
    ImageBlock,
    MaskedBlock,
    Message,
    OmittedBlock,
    SummaryBlock,
    TextBlock,
    ThinkingBlock,
    ToolCallBlock,
    ToolResultBlock,
    diff,
    marker_text,
    message,
)
from .defaults import default_pipeline
from .errors import (
    BadInputError,
    BudgetExceeded,
    CompactkitError,
    ConfigError,
    ContractViolation,
    PluginError,
    StrategyError,
)
from .events import (
    Change,
    CompactionFailed,
    CompactionFinished,
    CompactionStarted,
    Event,
    StrategyApplied,
)
from .formats.base import Document, Format
from .hookspecs import hookimpl
from .io import dump, load, load_one, render
from .observers import ProgressDisplay, StatsRecorder
from .pipeline import Pipeline, RunResult, StepReport, build_pipeline, get_strategy
from .recovery import expand, split_stash, unrecoverable
from .registry import Registry, get_registry, make_registry
from .strategies.etag_collapse import EtagCollapse
from .strategies.llm_summary import LlmSummary
from .strategies.observation_mask import ObservationMask
from .strategies.sliding_window import SlidingWindow
from .strategies.static_elision import StaticElision
from .strategy import Strategy, StrategyOptions, strategy
from .tokens import TiktokenTokenizer, TokenCounter, Tokenizer, count_tokens, get_counter
from .validate import Violation, validate

__all__ = [
    "AgentContext",
    "BadInputError",
    "Block",
    "BudgetExceeded",
    "Change",
    "CollapsedBlock",
    "CompactionFailed",
    "CompactionFinished",
    "CompactionStarted",
    "CompactkitError",
    "ConfigError",
    "ContentPart",
    "ContextDiff",
    "ContractViolation",
    "Document",
    "ElidedBlock",
    "EtagCollapse",
    "Event",
    "Format",
    "ImageBlock",
    "LlmSummary",
    "MaskedBlock",
    "Message",
    "ObservationMask",
    "OmittedBlock",
    "Pipeline",
    "PluginError",
    "ProgressDisplay",
    "Registry",
    "RunResult",
    "SlidingWindow",
    "StaticElision",
    "StatsRecorder",
    "StepReport",
    "Strategy",
    "StrategyApplied",
    "StrategyError",
    "StrategyOptions",
    "SummaryBlock",
    "TextBlock",
    "ThinkingBlock",
    "TiktokenTokenizer",
    "TokenCounter",
    "Tokenizer",
    "ToolCallBlock",
    "ToolResultBlock",
    "Violation",
    "__version__",
    "build_pipeline",
    "count_tokens",
    "default_pipeline",
    "diff",
    "dump",
    "expand",
    "get_counter",
    "get_registry",
    "get_strategy",
    "hookimpl",
    "load",
    "load_one",
    "make_registry",
    "marker_text",
    "message",
    "render",
    "split_stash",
    "strategy",
    "unrecoverable",
    "validate",
]
