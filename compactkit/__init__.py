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
    message,
)
from .errors import (
    BadInputError,
    BudgetExceeded,
    CompactkitError,
    ConfigError,
    ContractViolation,
    PluginError,
    StrategyError,
)
from .formats.base import Document, Format
from .hookspecs import hookimpl
from .io import dump, load, load_one, render
from .registry import Registry, get_registry, make_registry
from .tokens import TokenCounter, Tokenizer, count_tokens

__all__ = [
    "AgentContext",
    "BadInputError",
    "Block",
    "BudgetExceeded",
    "CollapsedBlock",
    "CompactkitError",
    "ConfigError",
    "ContentPart",
    "ContextDiff",
    "ContractViolation",
    "Document",
    "ElidedBlock",
    "Format",
    "ImageBlock",
    "MaskedBlock",
    "Message",
    "OmittedBlock",
    "PluginError",
    "Registry",
    "StrategyError",
    "SummaryBlock",
    "TextBlock",
    "ThinkingBlock",
    "TokenCounter",
    "Tokenizer",
    "ToolCallBlock",
    "ToolResultBlock",
    "__version__",
    "count_tokens",
    "diff",
    "dump",
    "get_registry",
    "hookimpl",
    "load",
    "load_one",
    "make_registry",
    "message",
    "render",
]
