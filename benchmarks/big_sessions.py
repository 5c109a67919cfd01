"""Big sessions of every format compactkit reads, made from real sessions for the big-session
benchmark (`test_big_session_bench.py`).

Each maker repeats the records of one real session (its steps: the messages, events or entries
after its header) until the file reaches a size, every copy with its own ids (uuids, tool-call
and response ids tagged with the copy's number) and its long strings tagged too, so that no copy
repeats another's payloads (repeats within one copy, as the real session has them, stay repeats),
chained onto the previous copy where the format chains records. Each is written in the format's
own layout: a JSON Lines file, a whole JSON document, a folder, an SQLite database or Markdown.

Formats with a real session in the corpus repeat that session's own records. The formats the
corpus holds no session of (Goose, OpenCode, aider, Cline, Copilot CLI, Cursor) take the messages
of the corpus's largest Claude Code session, as compactkit loads them, and write each in the
shape the format's writer gives it (the shapes the format tests in `tests/formats/` are built
after). Formats compactkit writes and whose records are chained by compactkit itself (the Session
log) are a Claude Code session of the right size converted by `compactkit convert`.
"""

from __future__ import annotations

import json
import re
import sqlite3
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import compactkit
from tests.formats.shapes import COPILOT_START, GOOSE_SCHEMA

_UUID = re.compile(r"\b([0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-)([0-9a-f]{12})\b")
_IDS = re.compile(r"\b(?:toolu|msg|call|req|ws)_[A-Za-z0-9_]+(?![A-Za-z0-9_]|\":)")
"""Tool-call, web-search, message and request ids (not a JSON key such as Codex's `"call_id":`)."""


def make_session(source: Path, target: Path, size: int) -> int:
    """Write to `target` copies of `source`'s records (a Claude Code session), with ids varied
    per copy, until `size` bytes; return the bytes written."""
    lines = [line for line in source.read_text(encoding="utf-8").splitlines() if line.strip()]
    written = 0
    copy = 0
    last_uuid: str | None = None
    with target.open("w", encoding="utf-8") as out:
        while written < size:
            copy += 1
            first = True
            for line in lines:
                record = _varied(json.loads(_ids_of(line, copy)), f" [{copy}]")
                if first and record.get("uuid") and record.get("parentUuid") is None:
                    record["parentUuid"] = last_uuid  # the copy continues the previous one
                    first = False
                text = json.dumps(record, ensure_ascii=False, separators=(",", ":"))
                if isinstance(record.get("uuid"), str):
                    last_uuid = record["uuid"]
                written += out.write(text + "\n")
    return target.stat().st_size


def make_trajectory(source: Path, target: Path, size: int) -> int:
    """Write to `target` the mini-swe-agent trajectory `source` with its steps (the messages
    between the task and the submission) repeated, long strings varied per copy, until `size`
    bytes; return the bytes written."""
    data = json.loads(source.read_text(encoding="utf-8"))
    messages = data["messages"]
    first, steps, last = messages[:2], messages[2:-2], messages[-2:]
    one = len(json.dumps(steps, ensure_ascii=False))
    copies = max(1, size // one)
    repeated = [m for k in range(1, copies + 1) for m in _varied(steps, f" [{k}]")]
    data["messages"] = [*first, *repeated, *last]
    target.write_text(json.dumps(data, ensure_ascii=False, indent=1), encoding="utf-8")
    return target.stat().st_size


def _varied(value: Any, tag: str) -> Any:
    """`value` with `tag` added to each long string, so that no copy repeats another's payloads
    (repeats within one copy, as the real session has them, stay repeats)."""
    if isinstance(value, dict):
        return {k: _varied(v, tag) for k, v in value.items()}
    if isinstance(value, list):
        return [_varied(v, tag) for v in value]
    if isinstance(value, str) and len(value) >= 256:
        return value + tag
    return value


def _ids_of(text: str, copy: int) -> str:
    """`text` (JSON) with its uuids and tool-call / message / request ids made the copy's own."""
    text = _UUID.sub(lambda m: f"{m[1]}{int(m[2], 16) ^ copy:012x}", text)
    return _IDS.sub(lambda m: f"{m[0]}c{copy}", text)


def _copy(value: Any, copy: int) -> Any:
    """Copy number `copy` of `value`: its ids and long strings its own."""
    return _varied(json.loads(_ids_of(json.dumps(value, ensure_ascii=False), copy)), f" [{copy}]")


def _dumps(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def _until(records: Callable[[int], list[Any]], size: int) -> Iterator[Any]:
    """The records of copies 1, 2, ... (`records(k)`), whole copies, until their JSON (or text)
    reaches `size` bytes."""
    written, copy = 0, 0
    while written < size:
        copy += 1
        for record in records(copy):
            text = record if isinstance(record, str) else _dumps(record)
            written += len(text.encode("utf-8"))
            yield record


def _write_jsonl(target: Path, records: Iterator[Any]) -> Path:
    with target.open("w", encoding="utf-8") as out:
        for record in records:
            out.write(_dumps(record) + "\n")
    return target


def _write_document(target: Path, data: Any) -> Path:
    target.write_text(json.dumps(data, ensure_ascii=False, indent=1), encoding="utf-8")
    return target


def _records(source: Path) -> list[Any]:
    return [json.loads(line) for line in source.read_text(encoding="utf-8").splitlines() if line]


# --------------------------------------------------------------------------- real sessions


def make_codex(source: Path, folder: Path, size: int) -> Path:
    """A Codex rollout: its lines up to the first turn's `turn_context` (`session_meta`, the
    developer instructions and the AGENTS.md message Codex writes once a session), then the rest
    of its lines (its turns) repeated."""
    records = _records(source)
    start = next(i for i, r in enumerate(records) if r.get("type") == "turn_context")
    head, body = records[:start], records[start:]
    turns = _until(lambda k: _copy(body, k), size)
    return _write_jsonl(folder / "rollout-big.jsonl", iter([*head, *turns]))


def make_pi(source: Path, folder: Path, size: int) -> Path:
    """A pi session: its `session` header, then its entries repeated (a compaction's
    `firstKeptEntryIndex` moved with its copy, so that it keeps the entries it kept)."""
    head, *body = _records(source)

    def entries(k: int) -> list[Any]:
        copied = _copy(body, k)
        for entry in copied:
            if isinstance(entry.get("firstKeptEntryIndex"), int):
                entry["firstKeptEntryIndex"] += (k - 1) * len(body)
        return copied

    return _write_jsonl(folder / "pi-big.jsonl", iter([head, *_until(entries, size)]))


def make_gemini(source: Path, folder: Path, size: int) -> Path:
    """A Gemini CLI chat: its messages (after the first user message) repeated, the tool calls'
    ids (`<tool>-<epoch ms>-<hex>`, named again by their results) the copy's own."""
    data = json.loads(source.read_text(encoding="utf-8"))
    first, *rest = data["messages"]

    def messages(k: int) -> list[Any]:
        text = _GEMINI_CALL.sub(lambda m: f"{m[0]}c{k}", json.dumps(rest, ensure_ascii=False))
        return list(_copy(json.loads(text), k))

    data["messages"] = [first, *_until(messages, size)]
    return _write_document(folder / "session-big.json", data)


_GEMINI_CALL = re.compile(r"\b[a-z_]+-\d{13}-[0-9a-f]+\b")


def make_openai_chat(source: Path, folder: Path, size: int) -> Path:
    """A tau-bench file of one trajectory, its largest: the chat messages after the system
    prompt repeated."""
    runs = json.loads(source.read_text(encoding="utf-8"))
    run = max(runs, key=lambda r: len(json.dumps(r["traj"])))
    system, *rest = run["traj"]
    run["traj"] = [system, *_until(lambda k: _copy(rest, k), size)]
    return _write_document(folder / "chat-big.json", [run])


def make_swe_agent(source: Path, folder: Path, size: int) -> Path:
    """A SWE-agent `.traj`: the steps of `history` (after the system prompt, the demonstration
    and the issue) and of `trajectory` repeated together."""
    data = json.loads(source.read_text(encoding="utf-8"))
    head, steps = data["history"][:3], data["history"][3:]
    trajectory = data["trajectory"]
    per_copy = len(_dumps(steps)) + len(_dumps(trajectory))
    copies = max(1, size // per_copy)
    data["history"] = [*head, *(m for k in range(1, copies + 1) for m in _copy(steps, k))]
    data["trajectory"] = [s for k in range(1, copies + 1) for s in _copy(trajectory, k)]
    return _write_document(folder / "big.traj", data)


def make_openhands(source: Path, folder: Path, size: int) -> Path:
    """An OpenHands event list (a saved trajectory) from the largest run of an eval
    `output.jsonl`: its first events (system prompt, task, recalled context) once, then its
    agent steps repeated with event ids (and the `cause` naming them) renumbered per copy, each
    model response's id its copy's own (the actions of one response are one message)."""
    runs = _records(source)
    events = max(runs, key=lambda r: len(r["history"]))["history"]
    start = next(i for i, e in enumerate(events) if "tool_call_metadata" in e)
    head, body = events[:start], events[start:-1]
    span = max(e["id"] for e in events) + 1

    def steps(k: int) -> list[Any]:
        copied = _copy(body, k)
        for event in copied:
            event["id"] += k * span
            if isinstance(event.get("cause"), int) and event["cause"] >= start:
                event["cause"] += k * span
            response = event.get("tool_call_metadata", {}).get("model_response", {})
            if isinstance(response.get("id"), str):  # OpenRouter's `gen-...`: not a uuid
                response["id"] += f"-c{k}"
        return copied

    return _write_document(folder / "events-big.json", [*head, *_until(steps, size)])


# --------------------------------------------------------------------------- from messages


def messages_of(source: Path) -> list[dict[str, Any]]:
    """The messages of a real session (as compactkit loads it) as plain JSON, for the formats
    the corpus holds no session of."""
    return [m.model_dump(mode="json") for m in compactkit.load_one(source).messages]


def _results(messages: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {
        b["tool_call_id"]: b for m in messages for b in m["content"] if b["type"] == "tool_result"
    }


def _result_text(block: dict[str, Any]) -> str:
    return "\n".join(p["text"] for p in block["content"] if p["type"] == "text")


def _text(message: dict[str, Any]) -> str:
    return "\n\n".join(b["text"] for b in message["content"] if b["type"] == "text")


def make_goose(messages: list[dict[str, Any]], folder: Path, size: int) -> Path:
    """A Goose `sessions.db` holding one session, its rows as `session_manager.rs` writes them
    (`content_json`: `MessageContent` items, a tool's results in a user message)."""
    visible = json.dumps({"userVisible": True, "agentVisible": True})

    def rows(k: int) -> list[Any]:
        out: list[Any] = []
        for message in _copy(messages, k):
            content: list[Any] = []
            for b in message["content"]:
                if b["type"] == "text":
                    content.append({"type": "text", "text": b["text"]})
                elif b["type"] == "thinking":
                    content.append(
                        {"type": "thinking", "thinking": b["thinking"], "signature": "sig"}
                    )
                elif b["type"] == "tool_call":
                    value = {"name": b["name"], "arguments": b["input"]}
                    call = {"status": "success", "value": value}
                    content.append({"type": "toolRequest", "id": b["id"], "toolCall": call})
                elif b["type"] == "tool_result":
                    parts = [{"type": "text", "text": _result_text(b)}]
                    result = {"content": parts, "isError": b["is_error"]}
                    content.append(
                        {
                            "type": "toolResponse",
                            "id": b["tool_call_id"],
                            "toolResult": {"status": "success", "value": result},
                        }
                    )
            role = "assistant" if message["role"] == "assistant" else "user"
            out.append((role, _dumps(content)))
        return out

    path = folder / "sessions.db"
    with sqlite3.connect(path) as db:
        db.executescript(GOOSE_SCHEMA)
        db.execute(
            "INSERT INTO sessions (id, name, working_dir, created_at) VALUES (?,?,?,?)",
            ("20260408_1", "big session", "/home/u/app", "2026-04-08 14:54:20"),
        )
        db.executemany(
            "INSERT INTO messages (message_id, session_id, role, content_json,"
            " created_timestamp, metadata_json) VALUES (?,?,?,?,?,?)",
            (
                (f"msg_{n}", "20260408_1", role, content, 1775660060 + n, visible)
                for n, (role, content) in enumerate(_until(rows, size))
            ),
        )
    return path


_OPENCODE_SESSION = "ses_469cf929cffeBICghRNeI7BWy6"
_OPENCODE_PROJECT = "a1b2c3d4"


def _opencode(messages: list[dict[str, Any]], k: int) -> list[tuple[dict[str, Any], list[Any]]]:
    """Copy `k` of `messages` as OpenCode (`MessageV2.Info`, parts) pairs: a tool call and its
    result are one `tool` part, as `message-v2.ts` keeps them."""
    copied = _copy(messages, k)
    results = _results(copied)
    out: list[tuple[dict[str, Any], list[Any]]] = []
    for n, message in enumerate(m for m in copied if m["role"] != "tool"):
        mid = f"msg_{k:06d}{n:05d}UHECFoapZ6W4q0"
        info: dict[str, Any] = {
            "id": mid,
            "sessionID": _OPENCODE_SESSION,
            "role": message["role"],
            "time": {"created": 1760000000000 + k * 10000 + n},
        }
        if message["role"] == "assistant":
            info |= {
                "modelID": "claude-sonnet-4-5",
                "providerID": "anthropic",
                "mode": "build",
                "path": {"cwd": "/home/u/app", "root": "/home/u/app"},
            }
        parts: list[Any] = []
        for b in message["content"]:
            part = {"id": f"prt_{k:06d}{n:05d}{len(parts):03d}", "sessionID": _OPENCODE_SESSION}
            part["messageID"] = mid
            if b["type"] == "text":
                parts.append(part | {"type": "text", "text": b["text"]})
            elif b["type"] == "thinking":
                parts.append(part | {"type": "reasoning", "text": b["thinking"]})
            elif b["type"] == "tool_call":
                result = results.get(b["id"])
                state: dict[str, Any] = {"input": b["input"], "time": {"start": 1, "end": 2}}
                if result is None:
                    state["status"] = "running"
                elif result["is_error"]:
                    state |= {"status": "error", "error": _result_text(result)}
                else:
                    state |= {"status": "completed", "output": _result_text(result)}
                    state |= {"title": b["name"], "metadata": {}}
                parts.append(
                    part | {"type": "tool", "callID": b["id"], "tool": b["name"], "state": state}
                )
        out.append((info, parts))
    return out


def _opencode_session() -> dict[str, Any]:
    return {
        "id": _OPENCODE_SESSION,
        "projectID": _OPENCODE_PROJECT,
        "directory": "/home/u/app",
        "title": "big session",
        "version": "1.0.150",
        "time": {"created": 1760000000000, "updated": 1760000100000},
    }


def make_opencode_db(messages: list[dict[str, Any]], folder: Path, size: int) -> Path:
    """An `opencode.db` (`session.sql.ts`: `session`, `message` and `part` rows, their `data`
    the JSON of the info or part without its ids)."""
    path = folder / "opencode.db"
    with sqlite3.connect(path) as db:
        db.executescript(
            """
            CREATE TABLE project (id text PRIMARY KEY, worktree text);
            CREATE TABLE session (id text PRIMARY KEY, project_id text NOT NULL,
              workspace_id text, parent_id text, slug text NOT NULL, directory text NOT NULL,
              path text, title text NOT NULL, version text NOT NULL, share_url text,
              time_created integer NOT NULL, time_updated integer NOT NULL);
            CREATE TABLE message (id text PRIMARY KEY, session_id text NOT NULL,
              time_created integer NOT NULL, time_updated integer NOT NULL, data text NOT NULL);
            CREATE TABLE part (id text PRIMARY KEY, message_id text NOT NULL,
              session_id text NOT NULL, time_created integer NOT NULL,
              time_updated integer NOT NULL, data text NOT NULL);
            """
        )
        info = _opencode_session()
        row = (info["id"], info["projectID"], None, None, "big", info["directory"], None)
        times = (info["time"]["created"], info["time"]["updated"])
        row += (info["title"], info["version"], None, *times)
        db.execute("INSERT INTO session VALUES (?,?,?,?,?,?,?,?,?,?,?,?)", row)
        for info, parts in _until(lambda k: _opencode(messages, k), size):
            created = info["time"]["created"]
            data = {k: v for k, v in info.items() if k not in ("id", "sessionID")}
            db.execute(
                "INSERT INTO message VALUES (?,?,?,?,?)",
                (info["id"], _OPENCODE_SESSION, created, created, _dumps(data)),
            )
            db.executemany(
                "INSERT INTO part VALUES (?,?,?,?,?,?)",
                (
                    (p["id"], info["id"], _OPENCODE_SESSION, created, created, _dumps(d))
                    for p in parts
                    for d in [{k: v for k, v in p.items() if k not in _PART_IDS}]
                ),
            )
    return path


_PART_IDS = ("id", "sessionID", "messageID")


def make_opencode_storage(messages: list[dict[str, Any]], folder: Path, size: int) -> Path:
    """OpenCode's older `storage/` folder: `session/<project>/<id>.json`,
    `message/<session>/<id>.json` and `part/<message>/<id>.json`, one file each."""
    root = folder / "storage"
    session = root / "session" / _OPENCODE_PROJECT
    session.mkdir(parents=True)
    (session / f"{_OPENCODE_SESSION}.json").write_text(_dumps(_opencode_session()))
    infos = root / "message" / _OPENCODE_SESSION
    infos.mkdir(parents=True)
    for info, parts in _until(lambda k: _opencode(messages, k), size):
        (infos / f"{info['id']}.json").write_text(_dumps(info), encoding="utf-8")
        holder = root / "part" / info["id"]
        holder.mkdir(parents=True)
        for p in parts:
            (holder / f"{p['id']}.json").write_text(_dumps(p), encoding="utf-8")
    return root


def make_aider(messages: list[dict[str, Any]], folder: Path, size: int) -> Path:
    """`.aider.chat.history.md` as aider's `io.py` appends to it: the user's input as `#### `
    lines, a tool's output as `> ` lines, the model's reply as it is (aider has no tool calls:
    the calls' text is not in its history)."""

    def chunks(k: int) -> list[str]:
        out: list[str] = []
        for message in _copy(messages, k):
            if message["role"] == "user" and _text(message):
                lines = _text(message).splitlines() or [""]
                out.append("\n#### " + "  \n#### ".join(lines) + "\n\n")
            elif message["role"] == "assistant" and _text(message):
                out.append(_text(message) + "\n\n")
            elif message["role"] == "tool":
                text = "\n".join(_result_text(b) for b in message["content"])
                out.append("".join(f"> {line}  \n" for line in text.splitlines()) + "\n")
        return out

    path = folder / ".aider.chat.history.md"
    with path.open("w", encoding="utf-8") as out:
        out.write("\n# aider chat started at 2024-05-01 10:00:00\n\n")
        for chunk in _until(chunks, size):
            out.write(chunk)
    return path


_CLINE_ENV = (
    "<environment_details>\n# VSCode Visible Files\nsrc/app.ts\n\n# Current Time\n"
    "4/18/2025, 10:00:00 AM (Europe/Paris, UTC+2:00)\n\n# Current Mode\nACT MODE\n"
    "</environment_details>"
)


def _anthropic_blocks(message: dict[str, Any]) -> list[Any]:
    blocks: list[Any] = []
    for b in message["content"]:
        if b["type"] == "text":
            blocks.append({"type": "text", "text": b["text"]})
        elif b["type"] == "thinking":
            blocks.append({"type": "thinking", "thinking": b["thinking"], "signature": "sig"})
        elif b["type"] == "tool_call":
            blocks.append(
                {"type": "tool_use", "id": b["id"], "name": b["name"], "input": b["input"]}
            )
        elif b["type"] == "tool_result":
            blocks.append(
                {
                    "type": "tool_result",
                    "tool_use_id": b["tool_call_id"],
                    "content": _result_text(b),
                    "is_error": b["is_error"],
                }
            )
    return blocks


def make_cline(messages: list[dict[str, Any]], folder: Path, size: int) -> Path:
    """A Cline task's `api_conversation_history.json` with native tool calls (newer Cline):
    Anthropic blocks, the tool results and the user's next words in one user message with the
    environment details, `modelInfo` on each reply."""

    def turns(k: int) -> list[Any]:
        out: list[Any] = []
        for n, message in enumerate(_copy(messages, k)):
            ts = 1745000000000 + k * 10000 + n
            blocks = _anthropic_blocks(message)
            if message["role"] == "assistant":
                model = {"modelId": "claude-sonnet-4-5", "providerId": "anthropic", "mode": "act"}
                out.append({"role": "assistant", "content": blocks, "ts": ts, "modelInfo": model})
            elif out and out[-1]["role"] == "user":
                out[-1]["content"][-1:-1] = blocks  # before the environment details
            else:
                out.append({"role": "user", "content": [*blocks, _cline_env()], "ts": ts})
        return out

    history = list(_until(turns, size))
    first = history[0]["content"][0]
    first["text"] = f"<task>\n{first['text']}\n</task>"
    folder = folder / "tasks" / "1745000000000"
    folder.mkdir(parents=True)
    return _write_document(folder / "api_conversation_history.json", history)


def _cline_env() -> dict[str, str]:
    return {"type": "text", "text": _CLINE_ENV}


def make_copilot(messages: list[dict[str, Any]], folder: Path, size: int) -> Path:
    """A Copilot CLI session folder (`session-state/<id>/events.jsonl`): `session.start`, then
    `user.message`, `assistant.message` (with `toolRequests`) and `tool.execution_complete`
    events, each event's `parentId` the one before it."""
    count = 0

    def event(kind: str, **data: Any) -> dict[str, Any]:
        nonlocal count
        count += 1
        return {
            "type": kind,
            "data": data,
            "id": f"0b6c{count:08x}-5e1f-4d7a-9c0e-6f3a2b1c0d9e",
            "timestamp": "2025-12-13T16:27:00.000Z",
            "parentId": f"0b6c{count - 1:08x}-5e1f-4d7a-9c0e-6f3a2b1c0d9e",
        }

    def events(k: int) -> list[Any]:
        out: list[Any] = []
        for n, message in enumerate(_copy(messages, k)):
            if message["role"] == "user":
                out.append(event("user.message", content=_text(message), attachments=[]))
            elif message["role"] == "assistant":
                thinking = [b["thinking"] for b in message["content"] if b["type"] == "thinking"]
                calls = [
                    {"toolCallId": b["id"], "name": b["name"], "arguments": b["input"]}
                    for b in message["content"]
                    if b["type"] == "tool_call"
                ]
                extra = {"reasoningText": "\n".join(thinking)} if thinking else {}
                out.append(
                    event(
                        "assistant.message",
                        messageId=f"m{k}-{n}",
                        content=_text(message),
                        toolRequests=calls,
                        **extra,
                    )
                )
            else:
                for b in message["content"]:
                    out.append(
                        event(
                            "tool.execution_complete",
                            toolCallId=b["tool_call_id"],
                            success=not b["is_error"],
                            result={"content": _result_text(b)},
                        )
                    )
        return out

    start = event("session.start", **COPILOT_START, context={"cwd": "/home/u/app"})
    start["parentId"] = None
    session = folder / "session-state" / "5e1f0b6c-4d7a-9c0e-6f3a-2b1c0d9e8f7a"
    session.mkdir(parents=True)
    _write_jsonl(session / "events.jsonl", iter([start, *_until(events, size)]))
    return session


def make_cursor(messages: list[dict[str, Any]], folder: Path, size: int) -> Path:
    """A Cursor agent transcript (`agent-transcripts/<id>/<id>.jsonl`): `{role, message:
    {content}}` lines, the user's words in `<user_query>` tags, tool results in user lines."""

    def lines(k: int) -> list[Any]:
        out: list[Any] = []
        for message in _copy(messages, k):
            blocks = _anthropic_blocks(message)
            if message["role"] == "user":
                blocks = [
                    {"type": "text", "text": f"<user_query>\n{b['text']}\n</user_query>"}
                    for b in blocks
                ]
            role = "assistant" if message["role"] == "assistant" else "user"
            out.append({"role": role, "message": {"content": blocks}})
        return out

    name = "8f2d1c3e-5b4a-4e6f-9a7b-0c1d2e3f4a5b"
    folder = folder / "agent-transcripts" / name
    folder.mkdir(parents=True)
    return _write_jsonl(folder / f"{name}.jsonl", _until(lines, size))


def make_anthropic(messages: list[dict[str, Any]], folder: Path, size: int) -> Path:
    """A saved Anthropic Messages request: `model`, `max_tokens`, the `messages` (tool results
    in user messages, alternating roles as the API requires)."""

    def turns(k: int) -> list[Any]:
        out: list[Any] = []
        for message in _copy(messages, k):
            role = "assistant" if message["role"] == "assistant" else "user"
            blocks = _anthropic_blocks(message)
            if out and out[-1]["role"] == role:
                out[-1]["content"].extend(blocks)
            else:
                out.append({"role": role, "content": blocks})
        return out

    request = {
        "model": "claude-sonnet-4-5",
        "max_tokens": 8192,
        "messages": list(_until(turns, size)),
    }
    return _write_document(folder / "anthropic-big.json", request)


# --------------------------------------------------------------------------- SQLite stores


def _crush_parts(message: dict[str, Any]) -> list[Any]:
    """A message's parts as Crush's `marshalParts` writes them (`[{"type", "data"}]`)."""
    parts: list[Any] = []
    for b in message["content"]:
        if b["type"] == "text":
            parts.append({"type": "text", "data": {"text": b["text"]}})
        elif b["type"] == "thinking":
            parts.append(
                {"type": "reasoning", "data": {"thinking": b["thinking"], "signature": ""}}
            )
        elif b["type"] == "tool_call":
            data = {"id": b["id"], "name": b["name"], "input": _dumps(b["input"]), "finished": True}
            parts.append({"type": "tool_call", "data": data})
        elif b["type"] == "tool_result":
            data = {
                "tool_call_id": b["tool_call_id"],
                "name": "",
                "content": _result_text(b),
                "is_error": b["is_error"],
            }
            parts.append({"type": "tool_result", "data": data})
    parts.append({"type": "finish", "data": {"reason": "end_turn", "time": 1760000000}})
    return parts


def make_crush(messages: list[dict[str, Any]], folder: Path, size: int) -> Path:
    """A Crush `crush.db` holding one session, its rows as `internal/message/message.go` writes
    them (a tool's results in a `tool` message), at the schema of Crush's last migration."""
    from tests.formats.shapes import crush_schema

    def rows(k: int) -> list[Any]:
        return [(m["role"], _dumps(_crush_parts(m))) for m in _copy(messages, k)]

    path = folder / "crush.db"
    with sqlite3.connect(path) as db:
        db.executescript(crush_schema())
        db.execute(
            "INSERT INTO sessions (id, title, created_at, updated_at) VALUES (?,?,?,?)",
            ("5f0c3a1e-8d2b-4c6f-9a7e-1b2c3d4e5f60", "big session", 1760000000, 1760000000),
        )
        db.executemany(
            "INSERT INTO messages (id, session_id, role, parts, created_at, updated_at)"
            " VALUES (?,?,?,?,?,?)",
            (
                (f"msg-{n}", "5f0c3a1e-8d2b-4c6f-9a7e-1b2c3d4e5f60", role, parts, n, n)
                for n, (role, parts) in enumerate(_until(rows, size))
            ),
        )
    return path


def _ai_sdk(message: dict[str, Any]) -> dict[str, Any]:
    """A message as an AI SDK model message, as cursor-agent stores it."""
    content: list[Any] = []
    for b in message["content"]:
        if b["type"] == "text":
            content.append({"type": "text", "text": b["text"]})
        elif b["type"] == "thinking":
            content.append({"type": "reasoning", "text": b["thinking"]})
        elif b["type"] == "tool_call":
            call = {"toolCallId": b["id"], "toolName": b["name"], "args": b["input"]}
            content.append({"type": "tool-call", **call})
        elif b["type"] == "tool_result":
            result = {"toolCallId": b["tool_call_id"], "result": _result_text(b)}
            content.append({"type": "tool-result", "toolName": "", **result})
    return {"role": message["role"], "content": content}


def make_cursor_agent(messages: list[dict[str, Any]], folder: Path, size: int) -> Path:
    """A cursor-agent `store.db`: each message a JSON blob named by its SHA-256, the root blob
    listing them in protobuf field 1, the metadata in meta row "0" (hex-encoded JSON)."""
    import hashlib

    def field(payload: bytes) -> bytes:
        out, n = bytearray([0x0A]), len(payload)
        while n >= 0x80:
            out.append((n & 0x7F) | 0x80)
            n >>= 7
        return bytes([*out, n]) + payload

    path = folder / "store.db"
    ids: list[bytes] = []
    with sqlite3.connect(path) as db:
        db.execute("CREATE TABLE blobs (id TEXT PRIMARY KEY, data BLOB)")
        db.execute("CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT)")
        for record in _until(lambda k: [_ai_sdk(m) for m in _copy(messages, k)], size):
            data = _dumps(record).encode("utf-8")
            digest = hashlib.sha256(data).digest()
            db.execute("INSERT OR IGNORE INTO blobs VALUES (?, ?)", (digest.hex(), data))
            ids.append(digest)
        root = b"".join(field(i) for i in ids)
        root_id = hashlib.sha256(root).hexdigest()
        db.execute("INSERT INTO blobs VALUES (?, ?)", (root_id, root))
        meta = {"agentId": "ac437fdf-3e7e-4a54-98a4-7bb04fd3efc6", "latestRootBlobId": root_id}
        db.execute("INSERT INTO meta VALUES ('0', ?)", (_dumps(meta).encode("utf-8").hex(),))
    return path
