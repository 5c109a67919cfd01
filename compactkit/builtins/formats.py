"""Built-in session formats, registered exactly as a third-party format plugin would be."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..formats.aider import AiderFormat
from ..formats.anthropic_messages import AnthropicMessagesFormat
from ..formats.claude_code import ClaudeCodeFormat
from ..formats.cline import ClineFormat
from ..formats.codex import CodexRolloutFormat
from ..formats.copilot_cli import CopilotCliFormat
from ..formats.cursor import CursorFormat
from ..formats.gemini_cli import GeminiCliFormat
from ..formats.goose import GooseFormat
from ..formats.mini_swe_agent import MiniSweAgentFormat
from ..formats.native import NativeFormat
from ..formats.openai_chat import OpenAIChatFormat
from ..formats.opencode import OpenCodeFormat
from ..formats.openhands import OpenHandsEventsFormat
from ..formats.pi import PiSessionFormat
from ..formats.session_log import SessionLogFormat
from ..formats.swe_agent import SweAgentFormat
from ..hookspecs import hookimpl


@hookimpl
def register_formats(register: Callable[[Any], None]) -> None:
    """Register every built-in format."""
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
    ):
        register(fmt)
    for fmt in _stream_formats():
        register(fmt)


# --------------------------------------------------------------------------- issue 32: headless
# streams, event logs and forks, kept in a block of their own (registered after the ones above)


def _stream_formats() -> tuple[Any, ...]:
    """The headless-output, event-log and fork readers."""
    from ..formats.claude_stream import ClaudeCodeStreamFormat
    from ..formats.codex_exec import CodexExecFormat
    from ..formats.cursor_text import CursorTextFormat
    from ..formats.gemini_stream import GeminiCliStreamFormat
    from ..formats.kilo_code import KiloCodeFormat
    from ..formats.managed_agents import ManagedAgentsFormat
    from ..formats.qwen_code import QwenCodeFormat

    return (
        ClaudeCodeStreamFormat(),
        CodexExecFormat(),
        GeminiCliStreamFormat(),
        ManagedAgentsFormat(),
        QwenCodeFormat(),
        CursorTextFormat(),
        KiloCodeFormat(),
    )
