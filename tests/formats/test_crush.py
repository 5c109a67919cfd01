"""Crush's `crush.db` and the Go OpenCode's `opencode.db`, built with the tables of their
migrations (`tests/formats/shapes.py`: charmbracelet/crush 37f36e93824e5c4f892e4a817f7f628e2682fe14,
opencode-ai/opencode f0571f5f5adef12eba9ddf6d07223a043d63dca8) and rows shaped after their writer:
`internal/message/message.go` (`Create` appends `Finish{Reason: "stop"}` to every message but an
assistant's; `marshalParts`: `[{"type", "data"}]`), `content.go` (the part structs, Go's default
field names for `BinaryContent`), `internal/session/session.go` (`CreateTaskSession` with the id
`<message id>$$<tool call id>`, `CreateTitleSession` with `title-<parent>`), run in WAL mode as
`internal/db/connect.go` opens it."""

from __future__ import annotations

import base64
import hashlib
import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

import compactkit
from compactkit.cli import make_cli
from compactkit.registry import make_registry
from tests.formats import test_opencode
from tests.formats._checks import pairing_problems
from tests.formats.shapes import CRUSH_MIGRATIONS, OPENCODE_GO_SCHEMA, crush_schema

CLI = make_cli(lambda: make_registry(entry_points=False))
SESSION = "5f0c3a1e-8d2b-4c6f-9a7e-1b2c3d4e5f60"
PNG = base64.b64encode(b"\x89PNG\r\n\x1a\nfake").decode()
TASK = "the login form rejects valid passwords, fix it"
FOLLOW_UP = "also keep the old hash readable"
ANSWER = "User provided: keep bcrypt, cost 12\n\nNotes:\n- [hash]: do not touch the salt"
QUESTION_RESULT = "Q1: Which hash should stay?\n" + ANSWER


def part(kind: str, **data: Any) -> dict[str, Any]:
    return {"type": kind, "data": data}


def finish(reason: str = "stop") -> dict[str, Any]:
    return part("finish", reason=reason, time=1760000000)


def call(call_id: str, name: str, **arguments: Any) -> dict[str, Any]:
    return part(
        "tool_call",
        id=call_id,
        name=name,
        input=json.dumps(arguments),
        provider_executed=False,
        finished=True,
    )


def result(call_id: str, name: str, content: str, error: bool = False, **more: Any) -> Any:
    fields = {"data": "", "mime_type": "", "metadata": "", **more}
    return part(
        "tool_result", tool_call_id=call_id, name=name, content=content, is_error=error, **fields
    )


def reasoning(text: str, signature: str = "") -> dict[str, Any]:
    return part(
        "reasoning",
        thinking=text,
        signature=signature,
        thought_signature="",
        tool_id="",
        responses_data=None,
        started_at=1760000001,
        finished_at=1760000002,
    )


MESSAGES: list[tuple[str, list[dict[str, Any]]]] = [
    (
        "user",
        [
            part("text", text=TASK),
            part("binary", Path="shot.png", MIMEType="image/png", Data=PNG),
            part("image_url", url="https://example.com/a.png", detail=""),  # never sent
            part(
                "binary",
                Path="login.ts",
                MIMEType="text/plain",
                Data=base64.b64encode(b"export function login() {}").decode(),
            ),
            finish(),
        ],
    ),
    (
        "assistant",
        [
            reasoning("Check the hashing.", signature="sig-1"),
            part("text", text="Let me read the code."),
            call("toolu_01", "view", file_path="login.ts"),
            call("toolu_02", "bash", command="npm test"),
            finish("tool_use"),
        ],
    ),
    (
        "tool",
        [
            result("toolu_01", "view", "export function login() {}"),
            result("toolu_02", "bash", "User denied permission", error=True),
            result("toolu_99", "bash", "a result whose call is gone"),
            finish(),
        ],
    ),
    ("assistant", [finish("canceled")]),  # cancelled before it returned anything
    ("assistant", [reasoning("Maybe the salt?"), finish("canceled")]),  # only reasoning
    (
        "user",
        [part("shell_command", command="git status", output="\x1b[32mclean\x1b[0m", exit_code=0)],
    ),
    ("user", [part("text", text=FOLLOW_UP), finish()]),
    (
        "assistant",
        [
            call("toolu_03", "question", questions=[{"type": "free_text", "question": "Which?"}]),
            call("toolu_04", "agent", prompt="find the hash helper"),
            call("toolu_05", "view", file_path="shot.png"),
            finish("tool_use"),
        ],
    ),
    (
        "tool",
        [
            result("toolu_03", "question", QUESTION_RESULT),
            result("toolu_04", "agent", "src/hash.ts"),
            result("toolu_05", "view", "", data=PNG, mime_type="image/png"),
            finish(),
        ],
    ),
    ("assistant", [part("text", text="Summary: bcrypt kept, tests pass."), finish("end_turn")]),
    ("assistant", [call("toolu_06", "edit", file_path="login.ts"), finish("tool_use")]),
]
SUMMARY = 9
"""The index of the message the session's `summary_message_id` names."""


def message_id(n: int) -> str:
    return f"msg-{n:03d}"


def fill(db: sqlite3.Connection, crush: bool = True) -> None:
    """The rows of `MESSAGES` (each message at its own second, as `strftime('%s')` stamps them;
    the Go OpenCode has no bang-mode commands), a sub-agent session and a title session."""
    columns = "id, session_id, role, parts, model, created_at, updated_at"
    have = {r[1] for r in db.execute("PRAGMA table_info(messages)")}
    extra = "".join(f", {c}" for c in ("provider", "is_summary_message") if c in have)
    db.execute(
        "INSERT INTO sessions (id, title, created_at, updated_at, summary_message_id)"
        " VALUES (?,?,?,?,?)",
        (SESSION, "Fix the login bug", 1760000000, 1760000100, message_id(SUMMARY)),
    )
    for n, (role, parts) in enumerate(MESSAGES):
        if not crush and parts[0]["type"] == "shell_command":
            continue
        values: tuple[Any, ...] = (message_id(n), SESSION, role, json.dumps(parts))
        values += ("claude-sonnet-4-5", 1760000000 + n, 1760000000 + n)
        values += ("anthropic", int(n == SUMMARY))[: extra.count(",")]
        marks = ",".join("?" * len(values))
        db.execute(f"INSERT INTO messages ({columns}{extra}) VALUES ({marks})", values)
    child = f"{message_id(7)}$$toolu_04" if crush else "toolu_04"
    db.execute(
        "INSERT INTO sessions (id, parent_session_id, title, created_at, updated_at)"
        " VALUES (?,?,?,?,?)",
        (child, SESSION, "New Agent Session", 1760000050, 1760000060),
    )
    db.execute(
        "INSERT INTO sessions (id, parent_session_id, title, created_at, updated_at)"
        " VALUES (?,?,?,?,?)",
        (f"title-{SESSION}", SESSION, "Generate a title", 1760000001, 1760000001),
    )
    for n, (sid, role, parts) in enumerate(
        [
            (child, "user", [part("text", text="find the hash helper"), finish()]),
            (child, "assistant", [part("text", text="src/hash.ts"), finish("end_turn")]),
            (f"title-{SESSION}", "user", [part("text", text=TASK), finish()]),
        ]
    ):
        db.execute(
            "INSERT INTO messages (id, session_id, role, parts, created_at, updated_at)"
            " VALUES (?,?,?,?,?,?)",
            (f"sub-{n}", sid, role, json.dumps(parts), 1760000051 + n, 1760000051 + n),
        )


def database(folder: Path, schema: str | None = None, name: str = "crush.db") -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    db = sqlite3.connect(path)
    db.execute("PRAGMA journal_mode=WAL")
    db.executescript(schema or crush_schema())
    fill(db, crush=schema is None)
    db.commit()
    db.close()
    return path


def opencode_go(folder: Path) -> Path:
    return database(folder, OPENCODE_GO_SCHEMA, "opencode.db")


def samples(folder: Path) -> list[Path]:
    return [database(folder / ".crush")]


def go_samples(folder: Path) -> list[Path]:
    return [opencode_go(folder / ".opencode")]


def digests(folder: Path) -> dict[str, str]:
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(folder.iterdir())}


def test_a_crush_database_loads_as_crush_sends_it(tmp_path: Path) -> None:
    main, title, agent = compactkit.load(database(tmp_path))
    assert main.metadata["source_format"] == "crush" and main.metadata["session_id"] == SESSION
    assert main.metadata["title"] == "Fix the login bug"
    assert main.metadata["model"] == "claude-sonnet-4-5"
    assert [m.text for m in main.messages if m.is_human] == [TASK, FOLLOW_UP]
    first = main.messages[0]
    assert [b.type for b in first.content] == ["text", "image"]
    attached = main.messages[1]
    assert attached.origin == "harness" and "<file path='login.ts'>" in attached.text
    assert "export function login() {}" in attached.text
    thinking = main.messages[2].content[0]
    assert thinking.type == "thinking" and thinking.signature == "sig-1"
    results = {r.tool_call_id: (r.text, r.is_error) for m in main.messages for r in m.tool_results}
    assert results["toolu_01"] == ("export function login() {}", False)
    assert results["toolu_02"] == ("User denied permission", True)
    assert "toolu_99" not in results  # dropped as filterOrphanedToolResults drops it
    image = next(r for m in main.messages for r in m.tool_results if r.tool_call_id == "toolu_05")
    assert image.content[0].type == "image"
    shell = next(m for m in main.messages if m.metadata.get("crush_shell_command"))
    assert shell.origin == "harness" and shell.text == "$ git status\nclean\n(exit code 0)"
    summary = main.messages[-2]
    assert summary.role == "user" and summary.origin == "summary"
    assert summary.text == "Summary: bcrypt kept, tests pass."
    assert main.messages[-1].tool_calls[0].id == "toolu_06"  # the last call stays pending
    assert pairing_problems(main) == [] and compactkit.validate(main) == []
    assert main.metadata["skipped_records"] == {
        "message/assistant (empty)": 1,
        "part/finish": 10,
        "part/image_url (not sent)": 1,
    }
    assert main.metadata["orphan_results"] == 1
    # the sessions Crush runs for itself come after, hung on their parent
    assert title.metadata["crush_session_kind"] == "title" and title.metadata["sidechain"]
    assert agent.metadata["parent_session_id"] == SESSION
    assert agent.metadata["parent_tool_call_id"] == "toolu_04"
    assert [m.text for m in agent.messages] == ["find the hash helper", "src/hash.ts"]


def test_the_users_words_are_pinned_answers_and_bang_commands(tmp_path: Path) -> None:
    ctx = compactkit.load(database(tmp_path))[0]
    pinned = {p.reason for p in ctx.pins}
    assert pinned == {"user-answer", "user-command"}
    answer = next(r for m in ctx.messages for r in m.tool_results if r.tool_call_id == "toolu_03")
    assert answer.text == QUESTION_RESULT  # rendered as stored
    assert [p.text for p in answer.content] == ["Q1: Which hash should stay?", ANSWER]
    shell = next(m for m in ctx.messages if m.metadata.get("crush_shell_command"))
    assert shell.content[0].text == "$ git status"  # the command's line, pinned alone
    for strategy in ("observation-mask:keep_last=0", "sliding-window", "default"):
        out = compactkit.build_pipeline([strategy], budget=200).run(ctx).context
        kept = [p.text for m in out.messages for b in m.content for p in _texts(b)]
        assert ANSWER in kept and TASK in kept, strategy


def _texts(block: Any) -> list[Any]:
    if block.type == "text":
        return [block]
    return [p for p in getattr(block, "content", ()) if p.type == "text"]


@pytest.mark.parametrize("migrations", range(len(CRUSH_MIGRATIONS) + 1))
def test_every_schema_version_of_crush_loads(tmp_path: Path, migrations: int) -> None:
    """A database left at each of Crush's migrations (the oldest: its initial tables with
    `summary_message_id`... or not even that) loads with every word the user typed."""
    path = tmp_path / "crush.db"
    db = sqlite3.connect(path)
    db.executescript(crush_schema(migrations))
    if migrations == 0:
        db.execute("ALTER TABLE sessions ADD COLUMN summary_message_id TEXT")
    fill(db)
    db.commit()
    db.close()
    main = compactkit.load(path)[0]
    assert main.metadata["source_format"] == "crush"
    assert [m.text for m in main.messages if m.is_human] == [TASK, FOLLOW_UP]
    assert compactkit.validate(main) == []


def test_the_go_opencode_is_told_from_sst_opencode_by_its_schema(tmp_path: Path) -> None:
    """Both write `opencode.db`: the Go OpenCode's tables are Crush's first ones, sst's are
    `session`, `message`, `part`."""
    go_path = opencode_go(tmp_path / "go" / ".opencode")
    go = compactkit.load(go_path)[0]
    inspected = CliRunner().invoke(CLI, ["inspect", "--json", str(go_path)])
    assert inspected.exit_code == 0, inspected.stderr
    assert json.loads(inspected.stdout.splitlines()[0])["format"] == "opencode-go"
    ran = CliRunner().invoke(CLI, ["run", f"{go_path}#0", "--budget", "20000"])
    assert ran.exit_code == 0 and TASK in ran.stdout, ran.stderr
    sst = compactkit.load(test_opencode.database(tmp_path / "sst"))[0]
    assert go.metadata["source_format"] == "opencode-go"
    assert sst.metadata["source_format"] == "opencode"
    assert [m.text for m in go.messages if m.is_human] == [TASK, FOLLOW_UP]
    # its providers never send reasoning back: a reply holding only reasoning is left out
    assert go.metadata["skipped_records"]["message/assistant (empty)"] == 2
    assert all(any(b.type != "thinking" for b in m.content) for m in go.messages)
    assert pairing_problems(go) == [] and compactkit.validate(go) == []
    assert compactkit.load(opencode_go(tmp_path / "go2"))[2].metadata["parent_tool_call_id"] == (
        "toolu_04"  # the Go OpenCode names a sub-agent's session after the call
    )


def test_rows_still_in_the_wal_are_read_and_no_file_changes(tmp_path: Path) -> None:
    """Crush keeps its newest rows in `crush.db-wal` while it runs: they are read, and neither
    the database nor its `-wal` / `-shm` changes by a byte."""
    folder = tmp_path / ".crush"
    path = database(folder)
    writer = sqlite3.connect(path)
    try:
        writer.execute("PRAGMA wal_autocheckpoint=0")
        late = [part("text", text="one more thing: log failed logins"), finish()]
        writer.execute(
            "INSERT INTO messages (id, session_id, role, parts, created_at, updated_at)"
            " VALUES (?,?,?,?,?,?)",
            ("msg-late", SESSION, "user", json.dumps(late), 1760000999, 1760000999),
        )
        writer.commit()
        assert (folder / "crush.db-wal").stat().st_size > 0
        before = digests(folder)
        ctx = compactkit.load(path)[0]
        result = CliRunner().invoke(CLI, ["inspect", str(path)])
        assert result.exit_code == 0, result.stderr
        assert digests(folder) == before
        assert ctx.messages[-1].text == "one more thing: log failed logins"
    finally:
        writer.close()


def test_inspect_and_run_on_the_command_line(tmp_path: Path) -> None:
    path = database(tmp_path)
    inspected = CliRunner().invoke(CLI, ["inspect", str(path)])
    assert inspected.exit_code == 0, inspected.stderr
    out = tmp_path / "out.json"
    ran = CliRunner().invoke(CLI, ["run", f"{path}#0", "--budget", "20000", "-o", str(out)])
    assert ran.exit_code == 0, ran.stderr
    assert [m.text for m in compactkit.load_one(out).messages if m.is_human][:2] == [
        TASK,
        FOLLOW_UP,
    ]
    several = CliRunner().invoke(CLI, ["run", str(path), "--budget", "20000"])
    assert several.exit_code == 2 and f"{path}#N" in several.stderr
    folder = tmp_path / ".crush"  # the project's data folder holds it
    database(folder)
    assert compactkit.load(folder)[0].messages == compactkit.load(folder / "crush.db")[0].messages


def test_a_part_type_crush_does_not_know_is_refused_in_one_line(tmp_path: Path) -> None:
    """`unmarshalParts` fails on an unknown type, and the session does not open in Crush."""
    path = database(tmp_path)
    with sqlite3.connect(path) as db:
        db.execute(
            "UPDATE messages SET parts = ? WHERE id = ?",
            (json.dumps([part("hologram", text="x")]), message_id(0)),
        )
    db.close()
    result = CliRunner().invoke(CLI, ["inspect", str(path)])
    assert result.exit_code == 2 and result.stderr.count("\n") == 1, result.stderr
    assert f"{path}: message msg-000: part type 'hologram' is not one Crush knows" in (
        result.stderr
    )


def test_a_folder_given_to_bench_or_check_holds_the_crush_database(tmp_path: Path) -> None:
    from compactkit.paths import session_files

    path = database(tmp_path / "project" / ".crush")
    go = opencode_go(tmp_path / "old" / ".opencode")
    assert session_files(tmp_path) == [str(go), str(path)]  # walked in name order
