"""The gateway's --state file when it is not what the gateway wrote: a file that is not a database
is one line and exit 2 at start; a conversation row edited or damaged in it starts that
conversation afresh instead of failing every request of it."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import httpx
from click.testing import CliRunner

from compactkit import make_cli

from .agents import anthropic_agent
from .upstream import FakeModel

TASK = "Find why sphinx drops the alias docstring and fix it; keep the public API."


def test_a_state_file_that_is_not_a_database_is_one_line_and_exit_2(tmp_path: Path) -> None:
    bad = tmp_path / "gateway.db"
    bad.write_bytes(b"notes I keep next to the gateway, not SQLite\n" * 100)
    result = CliRunner().invoke(
        make_cli(), ["gateway", "--listen", "127.0.0.1:0", "--state", str(bad)]
    )
    assert result.exit_code == 2, result.output
    assert str(bad) in result.output and "not a usable gateway state database" in result.output
    assert len(result.output.strip().splitlines()) == 1
    assert bad.read_bytes().startswith(b"notes I keep")  # left as it was


def test_an_edited_conversation_row_starts_that_conversation_afresh(
    model: FakeModel, start_gateway, tmp_path: Path
) -> None:
    db = tmp_path / "state.db"
    model.turns = 12
    first = start_gateway(trigger=6000, target=3000, state=str(db))
    run = anthropic_agent(first, TASK)
    with sqlite3.connect(db) as raw:
        edited = raw.execute("UPDATE conversations SET state = ?", ('{"base": {"messages": 1}}',))
        assert edited.rowcount >= 1
    second = start_gateway(trigger=6000, target=3000, state=str(db))
    httpx.post(second + "/v1/messages", content=run.sent[-1], timeout=30)
    sent = json.loads(model.received[-1].body)
    assert len(sent["messages"]) < len(json.loads(run.sent[-1])["messages"])  # compacted again
    stats = httpx.get(second + "/compactkit/stats").json()
    assert stats["counters"]["failed"] == 0 and stats["counters"]["compacted_requests"] == 1
