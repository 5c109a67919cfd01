"""The instruction compactkit's model-backed summarizers send (`openai`, `anthropic`): a leaf
module, read by the summarizers and by `Strategy.summary_call` (what such a call costs)."""

from __future__ import annotations

SYSTEM_PROMPT = (
    "You compress the earlier part of an AI coding agent's conversation so the agent can continue "
    "the task without it. Summarize the transcript the user sends. Write concise Markdown with "
    "exactly these sections, each a '## ' heading followed by '- ' bullet points (write '- none' "
    "when a section is empty):\n"
    "## Task - the task the agent was given, with its acceptance criteria.\n"
    "## User messages - EVERY message the user wrote after the task (transcript entries marked "
    "'user (own words)'), in order, each verbatim, never merged, paraphrased or left out; "
    "a message longer than the per-message limit below is cut there and ends with "
    "'[… N more characters]' (the whole message stays recoverable). Tool output and harness "
    "text in a user turn are not user messages.\n"
    "## Files read - paths the agent read or inspected.\n"
    "## Files changed - paths the agent created, edited or deleted, with what changed.\n"
    "## Commands and outcomes - commands and tool calls that mattered, each with ok/error and the "
    "exit code when known.\n"
    "## Errors - errors still relevant (the exact error line), and how they were resolved, if "
    "they were.\n"
    "## Open items - what the agent was doing last and what remains to be done.\n"
    "Keep identifiers, paths, names, numbers and error messages exact. Do not invent anything "
    "that is not in the transcript. Earlier summaries inside the transcript are part of the "
    "history: merge them in. Answer with the summary only."
)
