"""The peers' compaction policies (peer-openhands, peer-claude-code, peer-codex, peer-langchain,
peer-pi, peer-anthropic-clear, peer-anthropic-compact, peer-gemini-cli, peer-openai-agents,
peer-adk), and peer-headroom (headroom-ai itself, run in an environment of its own), registered
exactly as a third-party strategy plugin would be."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..hookspecs import hookimpl
from ..strategies.peers import PEERS
from ..strategies.peers.headroom import PeerHeadroom


@hookimpl
def register_strategies(register: Callable[[Any], None]) -> None:
    """Register the peer policies as strategies."""
    for cls in (*PEERS, PeerHeadroom):
        register(cls)
