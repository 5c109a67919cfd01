"""Built-in session formats, registered exactly as a third-party format plugin would be."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..formats.aider import AiderFormat
from ..formats.anthropic_messages import AnthropicMessagesFormat
from ..formats.claude_code import ClaudeCodeFormat
from ..formats.claude_stream import ClaudeCodeStreamFormat
from ..formats.cline import ClineFormat
from ..formats.codex import CodexRolloutFormat
from ..formats.codex_exec import CodexExecFormat
from ..formats.continue_dev import ContinueFormat
from ..formats.copilot_cli import CopilotCliFormat
from ..formats.crush import CrushFormat, OpenCodeGoFormat
from ..formats.cursor import CursorFormat
from ..formats.cursor_agent import CursorAgentFormat
from ..formats.cursor_text import CursorTextFormat
from ..formats.gemini_cli import GeminiCliFormat
from ..formats.gemini_stream import GeminiCliStreamFormat
from ..formats.goose import GooseFormat
from ..formats.kilo_code import KiloCodeFormat
from ..formats.managed_agents import ManagedAgentsFormat
from ..formats.mini_swe_agent import MiniSweAgentFormat
from ..formats.native import NativeFormat
from ..formats.openai_chat import OpenAIChatFormat
from ..formats.opencode import OpenCodeFormat
from ..formats.openhands import OpenHandsEventsFormat
from ..formats.pi import PiSessionFormat
from ..formats.qwen_code import QwenCodeFormat
from ..formats.session_log import SessionLogFormat
from ..formats.swe_agent import SweAgentFormat
from ..formats.vscode_chat import VSCodeChatFormat
from ..hookspecs import hookimpl


@hookimpl
def register_formats(register: Callable[[Any], None]) -> None:
    """Register every built-in format: the agents' saved sessions, then their SQLite stores,
    then the headless streams, event logs and forks."""
    for fmt in (
        NativeFormat(),
        ClaudeCodeFormat(),
        CodexRolloutFormat(),
        PiSessionFormat(),
        MiniSweAgentFormat(),
        SweAgentFormat(),
        OpenAIChatFormat(),
        AnthropicMessagesFormat(),
        ClineFormat(),
        OpenHandsEventsFormat(),
        GeminiCliFormat(),
        SessionLogFormat(),
        AiderFormat(),
        CopilotCliFormat(),
        OpenCodeFormat(),
        GooseFormat(),
        CursorFormat(),
        CrushFormat(),
        OpenCodeGoFormat(),
        CursorAgentFormat(),
        ClaudeCodeStreamFormat(),
        CodexExecFormat(),
        GeminiCliStreamFormat(),
        ManagedAgentsFormat(),
        QwenCodeFormat(),
        CursorTextFormat(),
        KiloCodeFormat(),
        ContinueFormat(),
        VSCodeChatFormat(),
    ):
        register(fmt)
