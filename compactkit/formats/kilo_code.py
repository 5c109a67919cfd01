"""Kilo Code task histories (`.../globalStorage/kilocode.kilo-code/tasks/<task id>/`).

Upstream: Kilo-Org/kilocode, a fork of Roo Code (itself a fork of Cline): its task persistence is
Roo Code's (`src/core/task-persistence/apiMessages.ts`, `taskMessages.ts`, `taskMetadata.ts`;
`GlobalFileNames` in `src/shared/globalFileNames.ts`, commit
74d6e4839d20b7b8af79c013e09fe9b1ede35539): `api_conversation_history.json` holds the messages sent
to the model, `ui_messages.json` the chat panel's record, `task_metadata.json` the files in
context. Kilo Code shares Roo Code's variants: the legacy array of Anthropic messages (`ts`,
XML-style tool calls in text or native `tool_use` / `tool_result` blocks, condense summaries
with `isSummary`, encrypted reasoning items) and Roo's tool names, result headers
(`[read_file for 'a.ts'] Result:`), feedback tags and JSON feedback; nothing in a history says
Kilo wrote it. So this is the `cline` reader (`compactkit.formats.cline`, every rule and every
pin of it) for a file under Kilo Code's storage folder, `source_format: "kilo-code"`; the same
file copied elsewhere reads as `cline` (`--format kilo-code` reads it as Kilo Code's).
`ui_messages.json` and `task_metadata.json` are refused with the error naming the history beside
them.
"""

from __future__ import annotations

from pathlib import PurePath

from ..context import AgentContext
from .base import Document
from .cline import ClineFormat

STORAGE = "kilocode.kilo-code"
"""Kilo Code's extension id: the folder its tasks are kept under (VS Code's globalStorage)."""


class KiloCodeFormat(ClineFormat):
    name = "kilo-code"
    description = (
        "Kilo Code task history (kilocode.kilo-code/tasks/<id>/api_conversation_history.json)"
    )
    priority = 11  # the same content as Roo Code's: the storage folder tells them apart
    agent = "Kilo Code"

    def sniff(self, doc: Document) -> bool:
        return STORAGE in PurePath(doc.path).parts and super().sniff(doc)

    def load(self, doc: Document) -> list[AgentContext]:
        """The history as `cline` reads it, named Kilo Code's (also for a file elsewhere given
        with `--format kilo-code`)."""
        contexts = super().load(doc)
        return [c.replace(metadata={**c.metadata, "source_format": self.name}) for c in contexts]


__all__ = ["KiloCodeFormat"]
