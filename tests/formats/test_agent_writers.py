"""The writers back into the agents (`--to claude-code`, `--to codex-rollout`, `--to pi-session`):
every corpus conversation written as the agent's session reads back with the user's words all present, valid,
and as a fixed point of a second round trip. That the real CLIs resume such files, and send exactly
their history, is tested with the CLIs themselves in tests/live/test_resume.py."""

from __future__ import annotations

import itertools
import json

import pytest

import compactkit
from compactkit.formats.base import parse_text
from compactkit.formats.claude_code import session_id_of
from compactkit.formats.codex import rollout_id_of
from compactkit.registry import make_registry
from tests.conftest import every_conversation

REGISTRY = make_registry(entry_points=False)
FMT = REGISTRY.formats.get("claude-code")


@pytest.mark.parametrize("writer", ["claude-code", "codex-rollout", "pi-session"])
def test_every_conversation_written_for_the_agent_reads_back_with_the_users_words(
    writer: str,
) -> None:
    fmt = REGISTRY.formats.get(writer)
    checked = 0
    for name, ctx in every_conversation():
        text = fmt.dump([ctx])
        back = fmt.load(parse_text(text, name))
        assert len(back) == 1, name
        assert compactkit.validate(back[0]) == [], name
        human = [m.text for m in ctx.messages if m.is_human]
        assert [m.text for m in back[0].messages if m.is_human] == human, name
        assert fmt.dump(back) == text, name  # a fixed point after one round trip
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


def test_a_rollout_keeps_the_thread_id_and_what_was_not_the_users_words() -> None:
    _, ctx = next((n, c) for n, c in every_conversation() if n.startswith("codex_rollout_jsonl/"))
    text = REGISTRY.formats.get("codex-rollout").dump([ctx])
    records = [json.loads(line) for line in text.splitlines()]
    assert records[0]["type"] == "session_meta"
    assert records[0]["payload"]["id"] == rollout_id_of(ctx) == ctx.metadata["session_id"]
    assert {r["type"] for r in records[1:]} == {"response_item"}
    harness = [m for m in ctx.messages if m.role == "user" and m.origin is not None]
    marked = [r for r in records if r["payload"].get("compactkit_origin")]
    assert harness and len(marked) == len(harness)
