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
