"""cursor-agent CLI chats (`~/.cursor/chats/<hash>/<agent id>/store.db`), built as the CLI writes
them: `meta (key TEXT PRIMARY KEY, value TEXT)` with the row `"0"` holding hex-encoded JSON,
`blobs (id TEXT PRIMARY KEY, data BLOB)` content-addressed by SHA-256, a protobuf root blob whose
field 1 lists the message blobs in order (field 9 the workspace URI), each message an AI SDK
model message in JSON, and the database in WAL mode with its newest rows in `store.db-wal`
(see compactkit/formats/cursor_agent.py for the sources)."""

from __future__ import annotations

import hashlib
import json
import sqlite3
from pathlib import Path
from typing import Any

from click.testing import CliRunner

import compactkit
from compactkit.cli import make_cli
from compactkit.registry import make_registry
from tests.formats._checks import pairing_problems

CLI = make_cli(lambda: make_registry(entry_points=False))
AGENT = "ac437fdf-3e7e-4a54-98a4-7bb04fd3efc6"
SECRET = "k3y-0f-the-blobs-never-printed"
TASK = "<user_query>\nthe login form rejects valid passwords, fix it\n</user_query>"
FOLLOW_UP = "<user_query>also log failed logins</user_query>"


def varint(value: int) -> bytes:
    out = bytearray()
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def field(number: int, payload: bytes) -> bytes:
    return varint((number << 3) | 2) + varint(len(payload)) + payload


def blob(db: sqlite3.Connection, data: bytes) -> str:
    digest = hashlib.sha256(data).hexdigest()
    db.execute("INSERT OR IGNORE INTO blobs (id, data) VALUES (?, ?)", (digest, data))
    return digest


def encoded(message: dict[str, Any]) -> bytes:
    return json.dumps(message, separators=(",", ":")).encode("utf-8")


MESSAGES: list[dict[str, Any]] = [
    {"role": "system", "content": "You are a coding agent in the terminal."},
    {"role": "user", "content": "<user_info>OS: linux, shell: bash</user_info>"},
    {"role": "user", "content": [{"type": "text", "text": TASK}]},
    {
        "role": "assistant",
        "content": [
            {"type": "reasoning", "text": "Check the hashing."},
            {"type": "redacted-reasoning", "data": "EqQBCkgIARABGAIiQL"},
            {"type": "text", "text": "Reading the code."},
            {
                "type": "tool-call",
                "toolCallId": "tool_1",
                "toolName": "read_file",
                "args": {"path": "login.ts"},
            },
            {
                "type": "tool-call",
                "toolCallId": "tool_2",
                "toolName": "run_terminal_cmd",
                "args": {"command": "npm test"},
            },
        ],
    },
    {
        "role": "tool",
        "content": [
            {
                "type": "tool-result",
                "toolCallId": "tool_1",
                "toolName": "read_file",
                "result": "export function login() {}",
            },
            {
                "type": "tool-result",
                "toolCallId": "tool_2",
                "toolName": "run_terminal_cmd",
                "output": {"type": "error-text", "value": "exit 1"},
            },
        ],
    },
    {"role": "user", "content": FOLLOW_UP},
    {"role": "assistant", "content": "Done: the hash is compared in constant time now."},
]


def store(folder: Path, *, hex_meta: bool = True, wrapped: bool = False) -> tuple[Path, Any]:
    """The chat's store.db and the writer connection, still open: the last message and the
    metadata naming the root that holds it are in store.db-wal only."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "store.db"
    db = sqlite3.connect(path)
    db.execute("PRAGMA journal_mode=WAL")
    db.execute("CREATE TABLE blobs (id TEXT PRIMARY KEY, data BLOB)")
    db.execute("CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT)")
    ids = []
    for n, message in enumerate(MESSAGES[:-1]):
        data = encoded(message)
        ids.append(blob(db, field(4, data) if wrapped and n == 3 else data))
    node = blob(db, b"".join(field(1, bytes.fromhex(i)) for i in ids[:3]))  # a nested node
    db.commit()
    db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    db.execute("PRAGMA wal_autocheckpoint=0")
    ids.append(blob(db, encoded(MESSAGES[-1])))
    root = b"".join(field(1, bytes.fromhex(i)) for i in [node, *ids[3:]])
    root_id = blob(db, root + field(9, b"file:///home/u/app"))
    meta = {
        "agentId": AGENT,
        "latestRootBlobId": root_id,
        "name": "Fix the login bug",
        "mode": "default",
        "createdAt": 1781256145540,
        "lastUsedModel": "claude-4.5-sonnet",
        "blobEncryptionKey": SECRET,
    }
    if hex_meta:
        db.execute("INSERT INTO meta VALUES ('0', ?)", (encoded(meta).hex(),))
    else:
        db.executemany("INSERT INTO meta VALUES (?, ?)", [(k, str(v)) for k, v in meta.items()])
    db.commit()
    return path, db


def samples(folder: Path) -> list[Path]:
    path, db = store(folder / "chats" / "e4e90b7b" / AGENT)
    db.close()  # checkpointed: the conformance kit reads the database alone
    return [path]


def digests(folder: Path) -> dict[str, str]:
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(folder.iterdir())}


def test_a_store_loads_with_its_wal_and_stays_byte_identical(tmp_path: Path) -> None:
    path, writer = store(tmp_path)
    try:
        assert (tmp_path / "store.db-wal").stat().st_size > 0
        before = digests(tmp_path)
        ctx = compactkit.load_one(path)
        result = CliRunner().invoke(CLI, ["inspect", str(path)])
        assert result.exit_code == 0, result.stderr
        assert digests(tmp_path) == before
    finally:
        writer.close()
    assert ctx.metadata["source_format"] == "cursor-agent"
    assert ctx.metadata["session_id"] == AGENT and ctx.metadata["title"] == "Fix the login bug"
    assert ctx.metadata["model"] == "claude-4.5-sonnet"
    assert ctx.system_instruction == "You are a coding agent in the terminal."
    assert [m.text for m in ctx.messages if m.is_human] == [TASK, FOLLOW_UP]
    assert ctx.messages[0].origin == "harness"  # <user_info> only: what Cursor added
    thinking, redacted, text, *calls = ctx.messages[2].content
    assert thinking.type == "thinking" and redacted.redacted and text.type == "text"
    assert [c.input for c in calls] == [{"path": "login.ts"}, {"command": "npm test"}]
    results = {r.tool_call_id: (r.text, r.is_error) for m in ctx.messages for r in m.tool_results}
    assert results == {"tool_1": ("export function login() {}", False), "tool_2": ("exit 1", True)}
    assert ctx.messages[-1].text == "Done: the hash is compared in constant time now."
    assert pairing_problems(ctx) == [] and compactkit.validate(ctx) == []
    assert SECRET not in ctx.to_json() and SECRET not in result.output + result.stderr


def test_older_and_newer_layouts_load_the_same_conversation(tmp_path: Path) -> None:
    """Metadata as one row per key (older stores) and a message wrapped in a protobuf field
    (newer ones) give the same messages."""
    hexed, db = store(tmp_path / "hex")
    db.close()
    rows, db = store(tmp_path / "rows", hex_meta=False, wrapped=True)
    db.close()
    one, other = compactkit.load_one(hexed), compactkit.load_one(rows)
    assert one.messages == other.messages


def test_inspect_and_run_exit_codes(tmp_path: Path) -> None:
    (path,) = samples(tmp_path)
    out = tmp_path / "out.json"
    assert compactkit.load_one(path.parent).messages == compactkit.load_one(path).messages
    ran = CliRunner().invoke(CLI, ["run", str(path), "--budget", "20000", "-o", str(out)])
    assert ran.exit_code == 0, ran.stderr
    assert [m.text for m in compactkit.load_one(out).messages if m.is_human] == [TASK, FOLLOW_UP]


def test_a_store_with_no_root_is_refused_naming_cursor_agent(tmp_path: Path) -> None:
    """cursor-agent lists no chat whose metadata names no root blob."""
    path = tmp_path / "store.db"
    with sqlite3.connect(path) as db:
        db.execute("CREATE TABLE blobs (id TEXT PRIMARY KEY, data BLOB)")
        db.execute("CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT)")
        db.execute("INSERT INTO meta VALUES ('0', ?)", (encoded({"agentId": AGENT}).hex(),))
    db.close()
    result = CliRunner().invoke(CLI, ["inspect", str(path)])
    assert result.exit_code == 2 and result.stderr.count("\n") == 1, result.stderr
    assert "a cursor-agent store.db with no conversation in it" in result.stderr


def test_a_missing_root_blob_is_refused_in_one_line(tmp_path: Path) -> None:
    """The store copied without its -wal: the metadata names a root that is not there."""
    path, db = store(tmp_path)
    db.execute(
        "DELETE FROM blobs WHERE id = ?",
        (
            json.loads(
                bytes.fromhex(db.execute("SELECT value FROM meta WHERE key = '0'").fetchone()[0])
            )["latestRootBlobId"],
        ),
    )
    db.commit()
    db.close()
    result = CliRunner().invoke(CLI, ["inspect", str(path)])
    assert result.exit_code == 2 and result.stderr.count("\n") == 1, result.stderr
    assert "that its metadata names is not in the store" in result.stderr
    assert SECRET not in result.stderr


def test_the_same_words_typed_twice_load_twice(tmp_path: Path) -> None:
    """Blobs are named by their content: "continue" typed twice is one blob that the root lists
    twice, and both turns load."""
    path = tmp_path / "store.db"
    db = sqlite3.connect(path)
    db.execute("CREATE TABLE blobs (id TEXT PRIMARY KEY, data BLOB)")
    db.execute("CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT)")
    again = blob(db, encoded({"role": "user", "content": "<user_query>continue</user_query>"}))
    reply = blob(db, encoded({"role": "assistant", "content": "Working on it."}))
    order = [again, reply, again, reply]
    root = blob(db, b"".join(field(1, bytes.fromhex(i)) for i in order))
    db.execute("INSERT INTO meta VALUES ('0', ?)", (encoded({"latestRootBlobId": root}).hex(),))
    db.commit()
    db.close()
    ctx = compactkit.load_one(path)
    assert [m.text for m in ctx.messages if m.is_human] == ["<user_query>continue</user_query>"] * 2
