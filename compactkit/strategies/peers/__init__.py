"""The peers: compaction policies other agents and frameworks ship, as reference strategies.

Each reproduces one peer's published policy (when it triggers, what it keeps verbatim, what it
summarizes, what it drops) on compactkit's context, with the peer's defaults as options. The summary
text comes from the same summarizer backends as llm-summary (extractive by default), so a bench run
compares policies, not one model's prose. The sources each was read from are in its module and in
docs/bench.md ("The peers").
"""

from __future__ import annotations

from .adk import PeerAdk
from .anthropic import PeerAnthropicClear, PeerAnthropicCompact
from .claude_code import PeerClaudeCode
from .codex import PeerCodex
from .gemini_cli import PeerGeminiCli
from .langchain import PeerLangChain
from .openai_agents import PeerOpenAIAgents
from .openhands import PeerOpenHands
from .pi import PeerPi

PEERS = (
    PeerOpenHands,
    PeerClaudeCode,
    PeerCodex,
    PeerLangChain,
    PeerPi,
    PeerAnthropicClear,
    PeerAnthropicCompact,
    PeerGeminiCli,
    PeerOpenAIAgents,
    PeerAdk,
)
"""The peer policies in the order the bench's peers table lists them."""

__all__ = [
    "PEERS",
    "PeerAdk",
    "PeerAnthropicClear",
    "PeerAnthropicCompact",
    "PeerClaudeCode",
    "PeerCodex",
    "PeerGeminiCli",
    "PeerLangChain",
    "PeerOpenAIAgents",
    "PeerOpenHands",
    "PeerPi",
]
