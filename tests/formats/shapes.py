"""Records shaped after upstream agents' own writers, shared by the format tests and the
big-session benchmark's generators (`benchmarks/big_sessions.py`)."""

from __future__ import annotations

GOOSE_SCHEMA = """
CREATE TABLE sessions (id TEXT PRIMARY KEY, name TEXT NOT NULL DEFAULT '',
  description TEXT NOT NULL DEFAULT '', working_dir TEXT NOT NULL,
  created_at TIMESTAMP DEFAULT CURRENT_TIMESTAMP, updated_at TIMESTAMP,
  accumulated_input_tokens INTEGER, accumulated_output_tokens INTEGER, model_config_json TEXT);
CREATE TABLE messages (id INTEGER PRIMARY KEY AUTOINCREMENT, message_id TEXT,
  session_id TEXT NOT NULL, role TEXT NOT NULL, content_json TEXT NOT NULL,
  created_timestamp INTEGER NOT NULL,
  timestamp TIMESTAMP DEFAULT CURRENT_TIMESTAMP, tokens INTEGER, metadata_json TEXT);
"""
"""Goose's `sessions.db` tables from schema 7 on (goose `session_manager.rs`)."""

COPILOT_START = {
    "sessionId": "5e1f0b6c-4d7a-9c0e-6f3a-2b1c0d9e8f7a",
    "version": 1,
    "producer": "copilot-agent",
    "copilotVersion": "0.0.369",
    "startTime": "2025-12-13T16:26:51Z",
}
"""The fields of a Copilot CLI `session.start` event's data that every session has."""

CRUSH_INITIAL = """
CREATE TABLE IF NOT EXISTS sessions (
    id TEXT PRIMARY KEY,
    parent_session_id TEXT,
    title TEXT NOT NULL,
    message_count INTEGER NOT NULL DEFAULT 0 CHECK (message_count >= 0),
    prompt_tokens  INTEGER NOT NULL DEFAULT 0 CHECK (prompt_tokens >= 0),
    completion_tokens  INTEGER NOT NULL DEFAULT 0 CHECK (completion_tokens>= 0),
    cost REAL NOT NULL DEFAULT 0.0 CHECK (cost >= 0.0),
    updated_at INTEGER NOT NULL,  -- Unix timestamp in milliseconds
    created_at INTEGER NOT NULL   -- Unix timestamp in milliseconds
);
CREATE TABLE IF NOT EXISTS files (
    id TEXT PRIMARY KEY,
    session_id TEXT NOT NULL,
    path TEXT NOT NULL,
    content TEXT NOT NULL,
    version {files_version},
    created_at INTEGER NOT NULL,  -- Unix timestamp in milliseconds
    updated_at INTEGER NOT NULL,  -- Unix timestamp in milliseconds
    FOREIGN KEY (session_id) REFERENCES sessions (id) ON DELETE CASCADE,
    UNIQUE(path, session_id, version)
);
CREATE INDEX IF NOT EXISTS idx_files_session_id ON files (session_id);
CREATE INDEX IF NOT EXISTS idx_files_path ON files (path);
CREATE TABLE IF NOT EXISTS messages (
    id TEXT PRIMARY KEY,
    session_id TEXT NOT NULL,
    role TEXT NOT NULL,
    parts TEXT NOT NULL default '[]',
    model TEXT,
    created_at INTEGER NOT NULL,  -- Unix timestamp in milliseconds
    updated_at INTEGER NOT NULL,  -- Unix timestamp in milliseconds
    finished_at INTEGER,  -- Unix timestamp in milliseconds
    FOREIGN KEY (session_id) REFERENCES sessions (id) ON DELETE CASCADE
);
CREATE INDEX IF NOT EXISTS idx_messages_session_id ON messages (session_id);
CREATE TRIGGER IF NOT EXISTS update_session_message_count_on_insert
AFTER INSERT ON messages
BEGIN
UPDATE sessions SET
    message_count = message_count + 1
WHERE id = new.session_id;
END;
CREATE TABLE goose_db_version (id INTEGER PRIMARY KEY AUTOINCREMENT, version_id INTEGER NOT NULL,
  is_applied INTEGER NOT NULL, tstamp TIMESTAMP DEFAULT (datetime('now')));
"""
"""`internal/db/migrations/20250424200609_initial.sql` (Up) of opencode-ai/opencode and
charmbracelet/crush, with goose's version table: `files.version` is `TEXT NOT NULL` in the Go
OpenCode (f0571f5f5adef12eba9ddf6d07223a043d63dca8) and `INTEGER NOT NULL DEFAULT 0` in Crush
(37f36e93824e5c4f892e4a817f7f628e2682fe14, since ac5fb91e2)."""

OPENCODE_GO_SCHEMA = CRUSH_INITIAL.format(files_version="TEXT NOT NULL") + (
    "ALTER TABLE sessions ADD COLUMN summary_message_id TEXT;"
)
"""The Go OpenCode's database after its two migrations (`20250515105448_add_summary_message_id`)."""

CRUSH_MIGRATIONS = (
    "ALTER TABLE sessions ADD COLUMN summary_message_id TEXT;",  # 20250515105448
    "CREATE INDEX IF NOT EXISTS idx_sessions_created_at ON sessions (created_at);"  # 20250624000000
    "CREATE INDEX IF NOT EXISTS idx_messages_created_at ON messages (created_at);",
    "ALTER TABLE messages ADD COLUMN provider TEXT;",  # 20250627000000
    "ALTER TABLE messages ADD COLUMN is_summary_message INTEGER DEFAULT 0 NOT NULL;",  # 20250810
    "ALTER TABLE sessions ADD COLUMN todos TEXT;",  # 20250812000000
    """CREATE TABLE IF NOT EXISTS read_files (
    session_id TEXT NOT NULL CHECK (session_id != ''),
    path TEXT NOT NULL CHECK (path != ''),
    read_at INTEGER NOT NULL,  -- Unix timestamp in seconds when file was last read
    FOREIGN KEY (session_id) REFERENCES sessions (id) ON DELETE CASCADE,
    PRIMARY KEY (path, session_id)
);""",  # 20260127000000
)
"""Crush's later migrations (`internal/db/migrations/`, in order) after its initial one."""


def crush_schema(migrations: int = len(CRUSH_MIGRATIONS)) -> str:
    """Crush's database after its initial migration and the first `migrations` later ones."""
    initial = CRUSH_INITIAL.format(files_version="INTEGER NOT NULL DEFAULT 0")
    return initial + "\n".join(CRUSH_MIGRATIONS[:migrations])
