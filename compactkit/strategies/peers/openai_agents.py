"""peer-openai-agents: the OpenAI Agents SDK's ToolOutputTrimmer (a `call_model_input_filter` run
before every model call: tool outputs older than the last `recent_turns` = 2 user messages and
longer than `max_output_chars` = 500 characters become a `preview_chars` = 200 character preview).

Read from openai/openai-agents-python: src/agents/extensions/tool_output_trimmer.py (commit
204b71a7: `ToolOutputTrimmer` and its defaults, `_find_recent_boundary` (the index of the
`recent_turns`-th user message from the end; nothing is old when there are fewer),
`_trim_function_call_output` ("[Trimmed: {tool} output — {n} chars → {preview_chars} char
preview]\\n{preview}...", skipped when that is not shorter than the output), `trimmable_tools`
(None: every tool)). The SDK's filter has no trigger and writes no summary.
"""

from __future__ import annotations

from typing import ClassVar

from pydantic import Field

from ...context import AgentContext
from ...recovery import prune
from ...strategy import Strategy
from .._common import TokenizerOption, ToolNames
from ._results import Replacements, apply, calls_by_id, editable, masked, results, shown_text


class ToolOutputTrimmerOptions(TokenizerOption):
    recent_turns: int = Field(
        default=2,
        ge=1,
        description="User messages from the end whose items (and everything after) are never "
        "trimmed (`recent_turns`).",
    )
    max_output_chars: int = Field(
        default=500,
        ge=1,
        description="Tool outputs longer than this many characters are trimmed "
        "(`max_output_chars`).",
    )
    preview_chars: int = Field(
        default=200,
        ge=0,
        description="Characters of the output kept as a preview (`preview_chars`).",
    )
    trimmable_tools: ToolNames | None = Field(
        default=None,
        description="Only these tools' outputs are trimmed (`trimmable_tools`; unset: every "
        "tool); on the command line names separated by '|'.",
    )


class PeerOpenAIAgents(Strategy):
    """The Agents SDK's ToolOutputTrimmer: before every call, each tool output before the
    `recent_turns`-th user message from the end that is longer than `max_output_chars` becomes
    `[Trimmed: TOOL output — N chars → P char preview]` and its first `preview_chars` characters
    (recoverable by the marker's etag)."""

    name = "peer-openai-agents"
    description = "OpenAI Agents SDK's ToolOutputTrimmer: outputs before the last 2 user turns."
    Options = ToolOutputTrimmerOptions
    options: ToolOutputTrimmerOptions
    self_triggered: ClassVar[bool] = True
    """Runs before every model call (the bench calls it before every model call)."""
    keeps_pins: ClassVar[bool] = False
    """Measured as the SDK ships it (see `PeerPolicy.keeps_pins`)."""

    def compact(self, ctx: AgentContext) -> AgentContext:
        opts = self.options
        boundary = self.recent_boundary(ctx)
        if boundary == 0:
            return ctx
        calls = calls_by_id(ctx)
        recovery = dict(ctx.recovery)
        replaced: Replacements = {}
        for i, j, result in results(ctx.messages[:boundary]):
            call = calls.get(result.tool_call_id)
            tool = call.name if call is not None else ""
            if opts.trimmable_tools is not None and tool not in opts.trimmable_tools:
                continue
            if not editable(result):
                continue
            output = shown_text(result)
            if len(output) <= opts.max_output_chars:
                continue
            label = (
                f"Trimmed: {tool or 'unknown_tool'} output — {len(output)} chars → "
                f"{opts.preview_chars} char preview]\n{output[: opts.preview_chars]}..."
            )
            if len(label) + 1 >= len(output):
                continue
            replaced.setdefault(i, {})[j] = masked(result, label, recovery)
        if not replaced:
            return ctx
        return prune(ctx.replace(messages=apply(ctx.messages, replaced), recovery=recovery))

    def recent_boundary(self, ctx: AgentContext) -> int:
        """Index of the `recent_turns`-th user message from the end (0 when there are fewer)."""
        seen = 0
        for i in range(len(ctx.messages) - 1, -1, -1):
            msg = ctx.messages[i]
            if msg.role == "user" and not msg.tool_results:
                seen += 1
                if seen >= self.options.recent_turns:
                    return i
        return 0
