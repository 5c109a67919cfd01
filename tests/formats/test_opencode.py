"""OpenCode sessions in both stores, with rows and files shaped after anomalyco/opencode
`packages/opencode/src/session/session.sql.ts` (`session`, `message`, `part` tables; `data` JSON
columns) and `src/session/message-v2.ts` (`MessageV2.Info`, the `Part` types, `toModelMessages`);
the older `storage/session/<project>/<id>.json`, `storage/message/<session>/<id>.json`,
`storage/part/<message>/<id>.json` layout holds the same JSON."""

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

SESSION = {
    "id": "ses_469cf929cffeBICghRNeI7BWy6",
    "projectID": "a1b2c3d4",
    "directory": "/home/u/app",
    "title": "Fix the login bug",
    "version": "1.0.150",
    "time": {"created": 1760000000000, "updated": 1760000100000},
}


def msg(n: int, role: str, **info: Any) -> dict[str, Any]:
    return {
        "id": f"msg_b96306d83{n:03d}UHECFoapZ6W4q0",
        "sessionID": SESSION["id"],
        "role": role,
        "time": {"created": 1760000000000 + n},
        **info,
    }


def part(m: int, n: int, kind: str, **data: Any) -> dict[str, Any]:
    return {
        "id": f"prt_b96306d83{m:03d}{n:02d}xyz",
        "sessionID": SESSION["id"],
        "messageID": f"msg_b96306d83{m:03d}UHECFoapZ6W4q0",
        "type": kind,
        **data,
    }


ASSISTANT = {
    "modelID": "claude-sonnet-4-5",
    "providerID": "anthropic",
    "mode": "build",
    "path": {"cwd": "/home/u/app", "root": "/home/u/app"},
    "tokens": {"input": 10, "output": 5, "reasoning": 0, "cache": {"read": 0, "write": 0}},
}

MESSAGES = [
    (
        msg(
            1,
            "user",
            agent="build",
            model={"providerID": "anthropic", "modelID": "claude-sonnet-4-5"},
        ),
        [
            part(1, 1, "text", text="the login form rejects valid passwords, fix it"),
            part(
                1,
                2,
                "text",
                text='Called the Read tool with the following input: {"filePath":"login.ts"}',
                synthetic=True,
            ),
            part(
                1,
                3,
                "file",
                mime="image/png",
                filename="shot.png",
                url="data:image/png;base64,iVBORw0K",
            ),
        ],
    ),
    (
        msg(2, "assistant", parentID=msg(1, "user")["id"], **ASSISTANT),
        [
            part(2, 1, "step-start"),
            part(2, 2, "reasoning", text="Check the hashing."),
            part(2, 3, "text", text="Let me read the code."),
            part(
                2,
                4,
                "tool",
                callID="toolu_01",
                tool="read",
                state={
                    "status": "completed",
                    "input": {"filePath": "login.ts"},
                    "output": "export function login() {}",
                    "title": "login.ts",
                    "metadata": {},
                    "time": {"start": 1, "end": 2},
                },
            ),
            part(
                2,
                5,
                "tool",
                callID="toolu_02",
                tool="bash",
                state={
                    "status": "error",
                    "input": {"command": "npm test"},
                    "error": "exit 1",
                    "time": {"start": 3, "end": 4},
                },
            ),
            part(
                2,
                6,
                "tool",
                callID="toolu_03",
                tool="grep",
                state={
                    "status": "completed",
                    "input": {"pattern": "hash"},
                    "output": "old output",
                    "time": {"start": 5, "end": 6, "compacted": 7},
                },
            ),
            part(2, 7, "step-finish", reason="tool-calls"),
        ],
    ),
    (msg(3, "user"), [part(3, 1, "compaction", auto=True)]),
    (
        msg(4, "assistant", summary=True, finish="stop", **ASSISTANT),
        [
            part(4, 1, "text", text="We read login.ts; the test fails on hashing."),
        ],
    ),
    (msg(5, "user"), [part(5, 1, "text", text="use bcrypt")]),
    (
        msg(6, "assistant", **ASSISTANT),
        [
            part(
                6,
                1,
                "tool",
                callID="toolu_04",
                tool="edit",
                state={"status": "running", "input": {"filePath": "login.ts"}},
            ),
        ],
    ),
]


def storage(folder: Path, messages: list[Any] | None = None) -> Path:
    """The storage/ folder holding `messages` ((info, parts) pairs; `MESSAGES` by default)."""
    root = folder / "storage"
    (root / "session" / SESSION["projectID"]).mkdir(parents=True)
    (root / "session" / SESSION["projectID"] / f"{SESSION['id']}.json").write_text(
        json.dumps(SESSION)
    )
    for info, parts in MESSAGES if messages is None else messages:
        (root / "message" / SESSION["id"]).mkdir(parents=True, exist_ok=True)
        (root / "message" / SESSION["id"] / f"{info['id']}.json").write_text(json.dumps(info))
        (root / "part" / info["id"]).mkdir(parents=True, exist_ok=True)
        for p in parts:
            (root / "part" / info["id"] / f"{p['id']}.json").write_text(json.dumps(p))
    return root


def database(folder: Path) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "opencode.db"
    with sqlite3.connect(path) as db:
        db.executescript(
            """
            CREATE TABLE project (id text PRIMARY KEY, worktree text);
            CREATE TABLE session (id text PRIMARY KEY, project_id text NOT NULL, workspace_id text,
              parent_id text, slug text NOT NULL, directory text NOT NULL, path text, title text NOT NULL,
              version text NOT NULL, share_url text, time_created integer NOT NULL,
              time_updated integer NOT NULL);
            CREATE TABLE message (id text PRIMARY KEY, session_id text NOT NULL,
              time_created integer NOT NULL, time_updated integer NOT NULL, data text NOT NULL);
            CREATE TABLE part (id text PRIMARY KEY, message_id text NOT NULL, session_id text NOT NULL,
              time_created integer NOT NULL, time_updated integer NOT NULL, data text NOT NULL);
            """
        )
        db.execute(
            "INSERT INTO session VALUES (?,?,?,?,?,?,?,?,?,?,?,?)",
            (
                SESSION["id"],
                "a1b2c3d4",
                None,
                None,
                "fix-login",
                "/home/u/app",
                None,
                SESSION["title"],
                "1.0.150",
                None,
                1760000000000,
                1760000100000,
            ),
        )
        for info, parts in MESSAGES:
            data = {k: v for k, v in info.items() if k not in ("id", "sessionID")}
            db.execute(
                "INSERT INTO message VALUES (?,?,?,?,?)",
                (info["id"], SESSION["id"], 1, 1, json.dumps(data)),
            )
            for p in parts:
                pdata = {k: v for k, v in p.items() if k not in ("id", "sessionID", "messageID")}
                db.execute(
                    "INSERT INTO part VALUES (?,?,?,?,?,?)",
                    (p["id"], info["id"], SESSION["id"], 1, 1, json.dumps(pdata)),
                )
    return path


def samples(folder: Path) -> list[Path]:
    return [database(folder / "db"), storage(folder / "files")]


def test_both_stores_load_the_same_session(tmp_path: Path) -> None:
    db, files = samples(tmp_path)
    from_db = compactkit.load_one(db)
    from_files = compactkit.load_one(files)
    one = compactkit.load_one(files / "session" / "a1b2c3d4" / f"{SESSION['id']}.json")
    assert from_db.messages == from_files.messages == one.messages
    ctx = from_db
    assert ctx.metadata["source_format"] == "opencode"
    assert ctx.metadata["session_id"] == SESSION["id"] and ctx.metadata["cwd"] == "/home/u/app"
    assert [m.text for m in ctx.messages if m.is_human] == [
        "the login form rejects valid passwords, fix it",
        "use bcrypt",
    ]
    first = next(m for m in ctx.messages if m.is_human)
    assert [b.type for b in first.content] == ["text", "image"]
    origins = [m.origin for m in ctx.messages if m.role == "user" and not m.is_human]
    assert origins == ["harness", "harness"]  # the synthetic read, the compaction request
    results = {r.tool_call_id: (r.text, r.is_error) for m in ctx.messages for r in m.tool_results}
    assert results == {
        "toolu_01": ("export function login() {}", False),
        "toolu_02": ("exit 1", True),
        "toolu_03": ("[Old tool result content cleared]", False),
        "toolu_04": ("[Tool execution was interrupted]", True),
    }
    assert any(m.metadata.get("opencode_summary") for m in ctx.messages)
    assert pairing_problems(ctx) == [] and compactkit.validate(ctx) == []
    assert ctx.metadata["skipped_records"] == {"part/step-finish": 1, "part/step-start": 1}


def test_the_database_is_opened_read_only(tmp_path: Path) -> None:
    db, _ = samples(tmp_path)
    before = db.read_bytes()
    compactkit.load(db)
    assert db.read_bytes() == before
    assert sorted(p.name for p in db.parent.iterdir()) == ["opencode.db"]  # no -wal / -journal left


def test_a_database_row_that_is_not_json_is_refused_naming_the_file(tmp_path: Path) -> None:
    """OpenCode reads `data` through drizzle's JSON column (`JSON.parse`), which throws: the
    session does not open. compactkit refuses too, in one line naming the database and the row."""
    db, _ = samples(tmp_path)
    with sqlite3.connect(db) as conn:
        conn.execute(
            'UPDATE message SET data = \'{"role": "user", "ti\' WHERE id = ?',
            (MESSAGES[0][0]["id"],),
        )
    cli = make_cli(lambda: make_registry(entry_points=False))
    for args in (["inspect", str(db)], ["run", str(db), "--budget", "20000"]):
        result = CliRunner().invoke(cli, args)
        assert result.exit_code == 2, result.stderr
        assert result.stderr.count("\n") == 1 and "Traceback" not in result.stderr
        assert result.stderr.startswith(f"compactkit: error: {db}: message "), result.stderr
        assert "its data is not JSON" in result.stderr


def test_errored_replies_and_interrupted_calls_load_as_opencode_sends_them(
    tmp_path: Path,
) -> None:
    """`toModelMessages` (message-v2.ts) leaves out an assistant message that ended in an error
    unless the user aborted it (`MessageAbortedError`) after it produced text or calls; a call
    interrupted after it printed (`state.metadata.interrupted`) is sent that output."""
    api_error = {"name": "APIError", "data": {"message": "overloaded", "isRetryable": True}}
    aborted = {"name": "MessageAbortedError", "data": {"message": "aborted"}}
    output = {"interrupted": True, "output": "migrated 3 of 7"}
    interrupted = dict(status="error", input={}, error="aborted", metadata=output, time={})
    messages = [
        (msg(1, "user"), [part(1, 1, "text", text="run the migrations")]),
        (
            msg(2, "assistant", error=api_error, **ASSISTANT),
            [part(2, 1, "step-start"), part(2, 2, "text", text="Running the mig")],
        ),
        (msg(3, "user"), [part(3, 1, "text", text="try again")]),
        (
            msg(4, "assistant", error=aborted, **ASSISTANT),
            [
                part(4, 1, "text", text="Running them now."),
                part(4, 2, "tool", callID="toolu_m", tool="bash", state=interrupted),
            ],
        ),
    ]
    ctx = compactkit.load_one(storage(tmp_path, messages))
    assert [m.text for m in ctx.messages if m.is_human] == ["run the migrations", "try again"]
    assert "Running the mig" not in [m.text for m in ctx.messages]
    assert [m.text for m in ctx.messages if m.role == "assistant"] == ["Running them now."]
    results = {r.tool_call_id: (r.text, r.is_error) for m in ctx.messages for r in m.tool_results}
    assert results == {"toolu_m": ("migrated 3 of 7", False)}
    assert ctx.metadata["skipped_records"] == {"message/assistant (error)": 1}
