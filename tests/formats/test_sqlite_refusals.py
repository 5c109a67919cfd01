"""A SQLite file that no reader takes is refused in one line that says what it is: a known
agent's store that compactkit does not read names the agent and what to pass instead; any other
says it is a SQLite database and lists its tables (never "binary data, not a text session
file")."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest
from click.testing import CliRunner

from compactkit.cli import make_cli
from compactkit.registry import make_registry

CLI = make_cli(lambda: make_registry(entry_points=False))


def database(path: Path, *statements: str) -> Path:
    with sqlite3.connect(path) as db:
        for statement in statements:
            db.execute(statement)
    db.close()
    return path


@pytest.mark.parametrize("command", ["inspect", "run"])
def test_an_unknown_sqlite_database_is_refused_listing_its_tables(
    tmp_path: Path, command: str
) -> None:
    path = database(
        tmp_path / "notes.db",
        "CREATE TABLE notes (id INTEGER PRIMARY KEY, body TEXT)",
        "CREATE TABLE tags (note INTEGER, tag TEXT)",
    )
    before = path.read_bytes()
    result = CliRunner().invoke(CLI, [command, str(path)])
    assert result.exit_code == 2 and result.stderr.count("\n") == 1, result.stderr
    assert f"{path}: a SQLite database that no compactkit reader knows (tables: notes, tags)" in (
        result.stderr
    )
    assert "crush.db" in result.stderr and "binary data" not in result.stderr
    assert path.read_bytes() == before and sorted(p.name for p in tmp_path.iterdir()) == [
        "notes.db"
    ]


def test_cursor_editor_state_is_refused_naming_cursor_and_what_to_pass(tmp_path: Path) -> None:
    """Cursor's editor keeps its chats in `state.vscdb` (`cursorDiskKV`), a layout compactkit
    does not read: the line says so and names the transcript and the cursor-agent store."""
    path = database(
        tmp_path / "state.vscdb",
        "CREATE TABLE ItemTable (key TEXT UNIQUE ON CONFLICT REPLACE, value BLOB)",
        "CREATE TABLE cursorDiskKV (key TEXT UNIQUE ON CONFLICT REPLACE, value BLOB)",
    )
    result = CliRunner().invoke(CLI, ["inspect", str(path)])
    assert result.exit_code == 2 and result.stderr.count("\n") == 1, result.stderr
    assert "Cursor's editor state database (state.vscdb)" in result.stderr
    assert "agent-transcripts" in result.stderr and "store.db" in result.stderr


def test_an_empty_sqlite_database_says_it_has_no_tables(tmp_path: Path) -> None:
    path = database(tmp_path / "empty.db", "PRAGMA user_version = 1")
    result = CliRunner().invoke(CLI, ["inspect", str(path)])
    assert result.exit_code == 2 and "(tables: none)" in result.stderr, result.stderr


def test_compactkit_formats_lists_the_sqlite_readers() -> None:
    result = CliRunner().invoke(CLI, ["formats"])
    assert result.exit_code == 0
    listed = {line.split()[0] for line in result.output.splitlines() if line.strip()}
    assert {"crush", "opencode-go", "cursor-agent", "opencode", "goose"} <= listed


def test_a_wal_file_given_for_its_database_names_the_database(tmp_path: Path) -> None:
    database(tmp_path / "crush.db", "CREATE TABLE t (x)")
    wal = tmp_path / "crush.db-wal"
    wal.write_bytes(b"\x37\x7f\x06\x82" + b"\x00" * 28)
    result = CliRunner().invoke(CLI, ["inspect", str(wal)])
    assert result.exit_code == 2 and result.stderr.count("\n") == 1, result.stderr
    assert "the write-ahead log of a SQLite database, not a session" in result.stderr
    assert "pass the database, crush.db" in result.stderr


def test_codex_state_database_is_refused_naming_the_rollouts(tmp_path: Path) -> None:
    """Codex's `state_<n>.sqlite` (codex-rs/state: `threads` with each thread's `rollout_path`)
    indexes the sessions; their messages are in the rollout files, which compactkit reads."""
    path = database(
        tmp_path / "state_5.sqlite",
        "CREATE TABLE threads (id TEXT PRIMARY KEY, rollout_path TEXT NOT NULL,"
        " created_at INTEGER NOT NULL, updated_at INTEGER NOT NULL, cwd TEXT NOT NULL,"
        " title TEXT NOT NULL)",
    )
    result = CliRunner().invoke(CLI, ["inspect", str(path)])
    assert result.exit_code == 2 and result.stderr.count("\n") == 1, result.stderr
    assert "Codex's state database" in result.stderr and "rollout-" in result.stderr
