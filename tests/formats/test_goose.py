"""Goose sessions: `sessions.db` rows after block/goose `crates/goose/src/session/session_manager.rs`
(`sessions`: id, name, description, working_dir, created_at, ...; `messages`: message_id,
session_id, role, content_json, created_timestamp, metadata_json) and the legacy `.jsonl` after
`crates/goose/src/session/legacy.rs` (a `SessionMetadata` line, then one `Message` per line);
content after `crates/goose/src/conversation/message.rs` (`MessageContent` tagged by `type`:
text, toolRequest `{id, toolCall: {status, value: {name, arguments}}}`, toolResponse
`{id, toolResult: {status, value}}`, thinking, toolConfirmationRequest, ...)."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

from click.testing import CliRunner

import compactkit
from compactkit.cli import make_cli
from compactkit.registry import make_registry
from tests.formats._checks import pairing_problems
from tests.formats.shapes import GOOSE_SCHEMA

CLI = make_cli(lambda: make_registry(entry_points=False))
VISIBLE = {"userVisible": True, "agentVisible": True}


def request(call_id: str, name: str, **arguments: Any) -> dict[str, Any]:
    return {
        "type": "toolRequest",
        "id": call_id,
        "toolCall": {"status": "success", "value": {"name": name, "arguments": arguments}},
    }


def response(call_id: str, text: str, error: bool = False) -> dict[str, Any]:
    return {
        "type": "toolResponse",
        "id": call_id,
        "toolResult": {
            "status": "success",
            "value": {"content": [{"type": "text", "text": text}], "isError": error},
        },
    }


MESSAGES: list[tuple[str, list[dict[str, Any]], dict[str, bool]]] = [
    ("user", [{"type": "text", "text": "add a health route to the server"}], VISIBLE),
    (
        "assistant",
        [
            {"type": "thinking", "thinking": "Find the router.", "signature": "sig"},
            {"type": "text", "text": "Looking at the routes."},
            request("c1", "developer__shell", command="rg -n router src"),
        ],
        VISIBLE,
    ),
    ("user", [response("c1", "src/app.ts:3: const router = express.Router()")], VISIBLE),
    (
        "assistant",
        [
            {
                "type": "toolConfirmationRequest",
                "id": "c2",
                "toolName": "developer__text_editor",
                "arguments": {},
            },
            request("c2", "developer__text_editor", command="write", path="src/health.ts"),
        ],
        VISIBLE,
    ),
    (
        "user",
        [
            {
                "type": "toolResponse",
                "id": "c2",
                "toolResult": {"status": "error", "error": "denied by user"},
            }
        ],
        VISIBLE,
    ),
    (
        "user",
        [
            {
                "type": "text",
                "text": "Here is a summary of the conversation so far: health route pending.",
            }
        ],
        {"userVisible": False, "agentVisible": True},
    ),
    ("user", [{"type": "text", "text": "ok, write it to src/health.ts"}], VISIBLE),
    (
        "assistant",
        [request("c3", "developer__text_editor", command="write", path="src/health.ts")],
        VISIBLE,
    ),
]


def database(folder: Path) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "sessions.db"
    with sqlite3.connect(path) as db:
        db.executescript(GOOSE_SCHEMA)
        db.execute(
            "INSERT INTO sessions (id, name, working_dir, created_at, model_config_json) VALUES (?,?,?,?,?)",
            (
                "20260408_1",
                "Health route",
                "/home/u/server",
                "2026-04-08 14:54:20",
                json.dumps({"model_name": "gpt-4o"}),
            ),
        )
        db.execute(
            "INSERT INTO sessions (id, name, working_dir, created_at) VALUES (?,?,?,?)",
            ("20260409_1", "Other", "/home/u/other", "2026-04-09 09:00:00"),
        )
        for n, (role, content, meta) in enumerate(MESSAGES):
            db.execute(
                "INSERT INTO messages (message_id, session_id, role, content_json,"
                " created_timestamp, metadata_json) VALUES (?,?,?,?,?,?)",
                (
                    f"m{n}",
                    "20260408_1",
                    role,
                    json.dumps(content),
                    1775660060 + n,
                    json.dumps(meta),
                ),
            )
        db.execute(
            "INSERT INTO messages (message_id, session_id, role, content_json, created_timestamp)"
            " VALUES (?,?,?,?,?)",
            (
                "o1",
                "20260409_1",
                "user",
                json.dumps([{"type": "text", "text": "list the files"}]),
                1775700000,
            ),
        )
    return path


def legacy(folder: Path) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "20250101_120000.jsonl"
    lines = [
        {
            "working_dir": "/home/u/server",
            "description": "Health route",
            "schedule_id": None,
            "message_count": len(MESSAGES),
            "total_tokens": 1200,
        }
    ]
    lines += [
        {
            "id": f"m{n}",
            "role": role,
            "created": 1735732800 + n,
            "content": content,
            "metadata": meta,
        }
        for n, (role, content, meta) in enumerate(MESSAGES)
    ]
    path.write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")
    return path


def samples(folder: Path) -> list[Path]:
    return [database(folder / "db"), legacy(folder / "legacy")]


def test_a_goose_database_holds_a_conversation_per_session(tmp_path: Path) -> None:
    db, old = samples(tmp_path)
    first, second = compactkit.load(db)
    assert (
        first.metadata["session_id"] == "20260408_1" and first.metadata["cwd"] == "/home/u/server"
    )
    assert first.metadata["title"] == "Health route" and first.metadata["model"] == "gpt-4o"
    assert [m.text for m in first.messages if m.is_human] == [
        "add a health route to the server",
        "ok, write it to src/health.ts",
    ]
    assert [m.origin for m in first.messages if m.role == "user" and not m.is_human] == ["summary"]
    results = {r.tool_call_id: (r.text, r.is_error) for m in first.messages for r in m.tool_results}
    assert results == {
        "c1": ("src/app.ts:3: const router = express.Router()", False),
        "c2": ("denied by user", True),
    }
    assert first.messages[-1].tool_calls[0].id == "c3"  # the last call stays pending
    assert pairing_problems(first) == [] and compactkit.validate(first) == []
    assert first.metadata["skipped_records"] == {"content/toolConfirmationRequest": 1}
    assert [m.text for m in second.messages] == ["list the files"]
    legacy_ctx = compactkit.load_one(old)  # the same messages in a legacy file
    assert [(m.role, m.content) for m in legacy_ctx.messages] == [
        (m.role, m.content) for m in first.messages
    ]


def test_a_legacy_file_skips_a_malformed_line_as_goose_does(tmp_path: Path) -> None:
    _, old = samples(tmp_path)
    lines = old.read_text(encoding="utf-8").splitlines(keepends=True)
    broken = tmp_path / "broken.jsonl"
    broken.write_text("".join([*lines[:2], "{cut\n", *lines[2:]]), encoding="utf-8")
    result = CliRunner().invoke(CLI, ["inspect", str(broken)])
    assert result.exit_code == 0, result.stderr
    assert f"{broken}:3: skipped a malformed line" in result.stderr


def test_a_database_from_before_schema_7_loads(tmp_path: Path) -> None:
    """Goose's `SessionStorage::create` at schema 5: `messages` has no `message_id` (migration 7
    added it, as `msg_<session>_<id>`), `sessions` no `model_config_json` (migration 6). A user
    of an older Goose release has such a database; it loads with every word typed."""
    path = tmp_path / "sessions.db"
    with sqlite3.connect(path) as db:
        db.executescript(
            """
            CREATE TABLE schema_version (version INTEGER PRIMARY KEY,
              applied_at TIMESTAMP DEFAULT CURRENT_TIMESTAMP);
            INSERT INTO schema_version (version) VALUES (5);
            CREATE TABLE sessions (id TEXT PRIMARY KEY, name TEXT NOT NULL DEFAULT '',
              description TEXT NOT NULL DEFAULT '', user_set_name BOOLEAN DEFAULT FALSE,
              session_type TEXT NOT NULL DEFAULT 'user', working_dir TEXT NOT NULL,
              created_at TIMESTAMP DEFAULT CURRENT_TIMESTAMP,
              updated_at TIMESTAMP DEFAULT CURRENT_TIMESTAMP, extension_data TEXT DEFAULT '{}',
              total_tokens INTEGER, input_tokens INTEGER, output_tokens INTEGER,
              accumulated_total_tokens INTEGER, accumulated_input_tokens INTEGER,
              accumulated_output_tokens INTEGER, schedule_id TEXT, recipe_json TEXT,
              user_recipe_values_json TEXT);
            CREATE TABLE messages (id INTEGER PRIMARY KEY AUTOINCREMENT,
              session_id TEXT NOT NULL REFERENCES sessions(id), role TEXT NOT NULL,
              content_json TEXT NOT NULL, created_timestamp INTEGER NOT NULL,
              timestamp TIMESTAMP DEFAULT CURRENT_TIMESTAMP, tokens INTEGER, metadata_json TEXT);
            """
        )
        db.execute(
            "INSERT INTO sessions (id, name, working_dir) VALUES (?,?,?)",
            ("20251020_1", "Health route", "/home/u/server"),
        )
        for n, (role, content, meta) in enumerate(MESSAGES):
            db.execute(
                "INSERT INTO messages (session_id, role, content_json, created_timestamp,"
                " metadata_json) VALUES (?,?,?,?,?)",
                ("20251020_1", role, json.dumps(content), 1760950000 + n, json.dumps(meta)),
            )
    result = CliRunner().invoke(CLI, ["inspect", str(path)])
    assert result.exit_code == 0, result.stderr
    ctx = compactkit.load_one(path)
    assert [m.text for m in ctx.messages if m.is_human] == [
        "add a health route to the server",
        "ok, write it to src/health.ts",
    ]
    assert ctx.messages[0].metadata["id"] == "msg_20251020_1_1"
    assert ctx.metadata["title"] == "Health route" and ctx.metadata["cwd"] == "/home/u/server"
    assert pairing_problems(ctx) == [] and compactkit.validate(ctx) == []


def test_a_damaged_sqlite_file_is_not_called_a_goose_database(tmp_path: Path) -> None:
    """A file that starts as SQLite but cannot be read (an opencode.db cut by a copy, say) is
    refused in one line that does not claim it for Goose."""
    path = tmp_path / "opencode.db"
    path.write_bytes(b"SQLite format 3\x00" + b"\x07" * 200)
    result = CliRunner().invoke(CLI, ["inspect", str(path)])
    assert result.exit_code == 2 and result.stderr.count("\n") == 1
    assert f"{path}: cannot read the SQLite database" in result.stderr
    assert "Goose" not in result.stderr


def with_subagents(folder: Path) -> Path:
    """The database of `database` at today's schema (`session_type`, `parent_session_id`,
    `parent_delegation`, as `SessionStorage` writes them): a sub-agent the first session
    delegated to with its call `c3` (`save_foreground_delegation_message`), then a hidden session
    and a sub-agent whose parent is not recorded."""
    path = database(folder)
    with sqlite3.connect(path) as db:
        for column in ("session_type TEXT NOT NULL DEFAULT 'user'", "parent_session_id TEXT"):
            db.execute(f"ALTER TABLE sessions ADD COLUMN {column}")
        db.execute("ALTER TABLE sessions ADD COLUMN parent_delegation TEXT")
        delegation = {
            "execution_mode": "foreground",
            "parent_delegate_message_id": f"m{len(MESSAGES) - 1}",
            "result_delivered_to_parent": True,
        }
        children = [
            ("20260408_2", "sub_agent", "20260408_1", json.dumps(delegation), "write health.ts"),
            ("20260408_3", "hidden", None, None, "name this session"),
            ("20260408_4", "sub_agent", None, None, "scan the repo"),
        ]
        for n, (sid, kind, parent, delegated, text) in enumerate(children):
            db.execute(
                "INSERT INTO sessions (id, name, working_dir, created_at, session_type,"
                " parent_session_id, parent_delegation) VALUES (?,?,?,?,?,?,?)",
                (sid, text, "/home/u/server", f"2026-04-08 15:0{n}:00", kind, parent, delegated),
            )
            db.execute(
                "INSERT INTO messages (message_id, session_id, role, content_json,"
                " created_timestamp) VALUES (?,?,?,?,?)",
                (f"s{n}", sid, "user", json.dumps([{"type": "text", "text": text}]), 1775661000),
            )
    return path


def test_sub_agent_sessions_come_after_the_users_own_and_name_their_parent(
    tmp_path: Path,
) -> None:
    contexts = compactkit.load(with_subagents(tmp_path))
    assert [c.metadata["session_id"] for c in contexts] == [
        "20260408_1",
        "20260409_1",
        "20260408_2",
        "20260408_3",
        "20260408_4",
    ]
    assert [c.metadata.get("sidechain") for c in contexts] == [None, None, True, True, True]
    delegated, hidden, orphan = contexts[2:]
    assert delegated.metadata["goose_session_type"] == "sub_agent"
    assert delegated.metadata["parent_session_id"] == "20260408_1"
    assert delegated.metadata["parent_tool_call_id"] == "c3"
    assert hidden.metadata["goose_session_type"] == "hidden"
    assert "parent_session_id" not in orphan.metadata
    assert [m.text for m in orphan.messages] == ["scan the repo"]  # loaded, marked
    result = CliRunner().invoke(CLI, ["inspect", str(tmp_path / "sessions.db") + "#0"])
    assert result.exit_code == 0, result.output
