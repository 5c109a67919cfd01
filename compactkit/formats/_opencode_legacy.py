"""OpenCode's first storage layout, read into the shape of today's messages and parts.

Before OpenCode kept `storage/{session,message,part}/`, each project had
`project/<project>/storage/session/` (sst/opencode `src/session/index.ts`, `Storage.writeJSON`):
`info/<session>.json` (`Session.Info`: `id`, `parentID`, `title`, `version`, `time`),
`message/<session>/<message>.json` and, from the `MessageV2` release on, `part/<session>/<message>/
<part>.json`. Messages written before that release (`src/session/message.ts`, `Message.Info`) hold
their parts inline: `{id, role, parts, metadata: {time, sessionID, error, tool, assistant:
{modelID, providerID, summary, tokens, path}}}`, each part `text`, `reasoning`, `file`
(`mediaType`, `url`, `filename`), `step-start`, `source-url` or `tool-invocation` (`toolInvocation:
{state: "call" | "partial-call" | "result", toolCallId, toolName, args, result}`). They are
given today's shape (`MessageV2.Info` and its `Part`s) so one reader maps both.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ._util import as_dict, as_list, as_text
from .base import read_document


def is_project_storage(folder: Path) -> bool:
    """A `storage/session/` folder of the first layout (`info/` and `message/` in it)."""
    return (folder / "info").is_dir() and (folder / "message").is_dir()


def project_storage_sessions(folder: Path, only: str | None) -> list[dict[str, Any]]:
    """The sessions of a first-layout `storage/session/` folder (`only`: that session's id), each
    `{"info", "messages": [{"info", "parts"}]}`, oldest first, messages and parts in id order."""
    infos = [read_document(f).data for f in sorted((folder / "info").glob("*.json"))]
    infos = [i for i in infos if isinstance(i, dict) and (only is None or i.get("id") == only)]
    infos.sort(key=lambda i: (as_dict(i.get("time")).get("created") or 0, as_text(i.get("id"))))
    out = []
    for info in infos:
        session = as_text(info.get("id"))
        messages = []
        for file in sorted((folder / "message" / session).glob("*.json")):
            message = read_document(file).data
            if not isinstance(message, dict):
                continue
            part_dir = folder / "part" / session / as_text(message.get("id"))
            if isinstance(message.get("parts"), list) and not part_dir.is_dir():
                messages.append(_inline(message))
                continue
            parts = [
                p
                for f in sorted(part_dir.glob("*.json"))
                if isinstance(p := read_document(f).data, dict)
            ]
            parts.sort(key=lambda p: as_text(p.get("id")))
            messages.append({"info": message, "parts": parts})
        messages.sort(key=lambda m: as_text(as_dict(m["info"]).get("id")))
        out.append({"info": info, "messages": messages})
    return out


def _inline(message: dict[str, Any]) -> dict[str, Any]:
    """A `Message.Info` with inline parts as `{"info": MessageV2.Info, "parts": [Part]}`."""
    meta = as_dict(message.get("metadata"))
    assistant = as_dict(meta.get("assistant"))
    info = {
        "id": message.get("id"),
        "role": message.get("role"),
        "sessionID": meta.get("sessionID"),
        "time": meta.get("time"),
        "error": meta.get("error"),
        "modelID": assistant.get("modelID"),
        "providerID": assistant.get("providerID"),
        "summary": assistant.get("summary"),
        "tokens": assistant.get("tokens"),
    }
    parts = [_part(as_dict(p)) for p in as_list(message.get("parts"))]
    return {"info": {k: v for k, v in info.items() if v is not None}, "parts": parts}


def _part(part: dict[str, Any]) -> dict[str, Any]:
    kind = part.get("type")
    if kind == "tool-invocation":
        call = as_dict(part.get("toolInvocation"))
        state: dict[str, Any] = {"status": "running", "input": call.get("args")}
        if call.get("state") == "result":
            state = {"status": "completed", "input": call.get("args"), "output": call.get("result")}
        return {
            "type": "tool",
            "callID": call.get("toolCallId"),
            "tool": call.get("toolName"),
            "state": state,
        }
    if kind == "file":
        return {
            "type": "file",
            "mime": part.get("mediaType"),
            "filename": part.get("filename"),
            "url": part.get("url"),
        }
    return part  # text and reasoning have today's shape; the rest is counted by its type
