"""compactkit: pluggable context-compaction strategies for LLM agents.

The public API is what `__all__` lists, plus the modules the docs name for plugin and tool authors:
`compactkit.testing` (the conformance kit), `compactkit.recovery` (`put`: the recovery store a
strategy puts what it removes into), `compactkit.serve` (serve state for tool servers, `serve_key`),
`compactkit.toolcall` (what a tool call did: `read_call`, `payload_path`, `error_line`),
`compactkit.spec` (the spec language) and `compactkit.integrations.*`. Everything else is private and
may change.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ._version import __version__
from .arrival import new_results, replace_last
from .context import (
    ORIGIN_KEY,
    ORIGINS,
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
    Pin,
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
    CompactkitError,
    ConfigError,
    ContractViolation,
    PluginError,
    RecoveryError,
    SessionLogBusy,
    StrategyError,
    StrategyTimeout,
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
from .formats.export import Export, WriterOptions
from .formats.loading import load, load_one
from .formats.writing import dump, export, render
from .hookspecs import hookimpl
from .observers import ProgressDisplay, StatsRecorder
from .pipeline import Pipeline, RunResult, StepReport, build_pipeline, get_strategy
from .recovery import expand, split_stash, unrecoverable
from .registry import Registry, count_tokens, get_counter, get_registry, make_registry
from .serve import MemoryServeStore, Served, ServeState, SqliteServeStore, serve_tools
from .session import Session
from .spec import PipelineSpec, parse_pipeline
from .strategies.etag_collapse import EtagCollapse
from .strategies.fold_json import FoldJson
from .strategies.fold_listings import FoldListings
from .strategies.fold_logs import FoldLogs
from .strategies.fold_repeats import FoldRepeats
from .strategies.llm_summary import LlmSummary
from .strategies.observation_mask import ObservationMask
from .strategies.sliding_window import SlidingWindow
from .strategies.static_elision import StaticElision
from .strategy import Strategy, StrategyOptions, SummaryCall, strategy
from .summarize import Summarizer, SummaryRequest
from .tokens import TiktokenTokenizer, TokenCounter, Tokenizer
from .validate import Violation, validate, validate_arrival

if TYPE_CHECKING:
    from .bench.runner import run_bench, run_frontier
    from .cli import make_cli

_LAZY = {
    "make_cli": "compactkit.cli",
    "run_bench": "compactkit.bench.runner",
    "run_frontier": "compactkit.bench.runner",
}
"""Names imported on first use: the CLI and the bench pull in click, rich and process pools."""


_MOVED = {
    "CallFacts": ("compactkit.toolcall", "CallFacts"),
    "error_line": ("compactkit.toolcall", "error_line"),
    "payload_path": ("compactkit.toolcall", "payload_path"),
    "read_call": ("compactkit.toolcall", "read_call"),
    "put_recovery": ("compactkit.recovery", "put"),
    "serve_key": ("compactkit.serve", "serve_key"),
}
"""Helpers that left the root for their own modules: still found here, with a DeprecationWarning."""


def __getattr__(name: str) -> Any:
    import importlib

    module = _LAZY.get(name)
    if module is not None:
        value = getattr(importlib.import_module(module), name)
        globals()[name] = value
        return value
    if name in _MOVED:
        import warnings

        module, attr = _MOVED[name]
        warnings.warn(
            f"compactkit.{name} is deprecated: use {module}.{attr}",
            DeprecationWarning,
            stacklevel=2,
        )
        return getattr(importlib.import_module(module), attr)
    raise AttributeError(f"module 'compactkit' has no attribute {name!r}")


__all__ = [
    "ORIGINS",
    "ORIGIN_KEY",
    "AgentContext",
    "BadInputError",
    "Block",
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
    "Export",
    "FoldJson",
    "FoldListings",
    "FoldLogs",
    "FoldRepeats",
    "Format",
    "ImageBlock",
    "LlmSummary",
    "MaskedBlock",
    "MemoryServeStore",
    "Message",
    "ObservationMask",
    "OmittedBlock",
    "Pin",
    "Pipeline",
    "PipelineSpec",
    "PluginError",
    "ProgressDisplay",
    "RecoveryError",
    "Registry",
    "RunResult",
    "ServeState",
    "Served",
    "Session",
    "SessionLogBusy",
    "SlidingWindow",
    "SqliteServeStore",
    "StaticElision",
    "StatsRecorder",
    "StepReport",
    "Strategy",
    "StrategyApplied",
    "StrategyError",
    "StrategyOptions",
    "StrategyTimeout",
    "Summarizer",
    "SummaryBlock",
    "SummaryCall",
    "SummaryRequest",
    "TextBlock",
    "ThinkingBlock",
    "TiktokenTokenizer",
    "TokenCounter",
    "Tokenizer",
    "ToolCallBlock",
    "ToolResultBlock",
    "Violation",
    "WriterOptions",
    "__version__",
    "build_pipeline",
    "count_tokens",
    "default_pipeline",
    "diff",
    "dump",
    "expand",
    "export",
    "get_counter",
    "get_registry",
    "get_strategy",
    "hookimpl",
    "load",
    "load_one",
    "make_cli",
    "make_registry",
    "marker_text",
    "message",
    "new_results",
    "parse_pipeline",
    "render",
    "replace_last",
    "run_bench",
    "run_frontier",
    "serve_tools",
    "split_stash",
    "strategy",
    "unrecoverable",
    "validate",
    "validate_arrival",
]
