"""The Claude Code writer (`--to claude-code`): every corpus conversation written as a Claude Code
session reads back with the user's words all present, valid, and as a fixed point of a second
round trip. That the real CLI resumes such a file, and sends exactly its history, is tested with
the CLI itself in tests/live/test_resume.py."""

from __future__ import annotations

import itertools
import json

import compactkit
from compactkit.formats.base import parse_text
from compactkit.formats.claude_code import session_id_of
from compactkit.registry import make_registry
from tests.conftest import every_conversation

FMT = make_registry(entry_points=False).formats.get("claude-code")


def test_every_conversation_written_for_claude_code_reads_back_with_the_users_words() -> None:
    checked = 0
    for name, ctx in every_conversation():
        text = FMT.dump([ctx])
        back = FMT.load(parse_text(text, name))
        assert len(back) == 1, name
        assert compactkit.validate(back[0]) == [], name
        human = [m.text for m in ctx.messages if m.is_human]
        assert [m.text for m in back[0].messages if m.is_human] == human, name
        assert FMT.dump(back) == text, name  # a fixed point after one round trip
        checked += 1
    assert checked > 20


def test_records_chain_and_name_the_session_as_claude_code_resumes_it() -> None:
    _, ctx = next((n, c) for n, c in every_conversation() if n.startswith("claude_code_jsonl/"))
    records = [json.loads(line) for line in FMT.dump([ctx]).splitlines()]
    session = session_id_of(ctx)
    assert session == ctx.metadata["session_id"]  # a Claude Code session keeps its own id
    assert {r["sessionId"] for r in records} == {session}
    assert records[0]["parentUuid"] is None
    assert all(r["parentUuid"] == p["uuid"] for p, r in itertools.pairwise(records))
    assert {r["type"] for r in records} <= {"user", "assistant"}
