"""Planner processes (`--processes`): a client's requests are read, planned and compacted in a
process of their own, and what the gateway's process learns after (the provider's usage, the
upstream summary) reaches the conversation there."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import httpx

from compactkit.serve.store import SqliteServeStore

from .agents import anthropic_agent
from .conftest import KEY, Start
from .test_gateway_summary import SUMMARY, TASK, TRIGGER
from .upstream import FakeModel, is_summary_request


def test_the_upstream_summary_and_usage_reach_a_planners_conversation(
    model: FakeModel, start_gateway: Start
) -> None:
    """With the conversation in a planner process, the summary the agent's model writes (asked
    by the gateway's process) is swapped into the compaction, and the usage of every response,
    and of the summary calls, is counted in the conversation's figures."""
    model.turns, model.summary = 16, SUMMARY
    base = start_gateway(trigger=TRIGGER, summarizer="upstream", processes=2)
    run = anthropic_agent(base, TASK)
    assert run.answer == "All done."
    stats: dict[str, Any] = httpx.get(base + "/compactkit/stats", headers={"x-api-key": KEY}).json()
    (conv,) = stats["conversations"].values()
    asks = [r for r in model.received if is_summary_request(r.json())]
    assert conv["summary_calls"] == len(asks) >= 1 and conv["summaries_used"] >= 1
    assert conv["summary_usage"]["responses"] == len(asks)
    assert conv["usage"]["responses"] == conv["requests"] == len(run.sent)
    assert stats["counters"]["requests"] == len(run.sent)
    assert stats["counters"]["compacted_requests"] >= 1
    compacted = [r.body.decode() for r in model.received if b"7f3a" in r.body]
    assert compacted and all(TASK in text for text in compacted)
    assert not any("7f3a" in sent.decode() for sent in run.sent)  # the client never sees it


def test_another_key_in_another_planner_does_not_reset_a_session(
    tmp_path: Path, start_gateway: Start
) -> None:
    """The session a serve state is reset for is owned by the credential that first named it,
    whichever planner process each credential's requests go to: another key's rewind under the
    same session id, planned in the other planner, leaves the state as it was; the owner's
    resets it."""
    from tests.serve.test_reset import FILES, Conversation, _store_read

    db = tmp_path / "state.db"
    base = start_gateway(state=str(db), trigger=6000, target=3500, processes=2)
    store = SqliteServeStore(db)
    text = FILES["conversations.py"].read_text(encoding="utf-8")
    assert _store_read(store, "s1", "conversations.py", text)
    conv = Conversation("s1")
    start = list(conv.messages)
    call = {"type": "tool_use", "id": "t1", "name": "read", "input": {"path": "conversations.py"}}
    read = [
        {"role": "assistant", "content": [call]},
        {
            "role": "user",
            "content": [{"type": "tool_result", "tool_use_id": "t1", "content": text}],
        },
    ]
    rewound = [{"role": "user", "content": "Summary of the review so far: nothing found."}]

    def send(key: str, messages: list[Any]) -> None:
        conv.messages = messages
        answer = httpx.post(
            base + "/v1/messages", json=conv.body(), headers={"x-api-key": key}, timeout=60
        )
        assert answer.status_code == 200

    send(KEY, start)  # the first to name session s1
    for key in ("sk-2", KEY):  # a new credential (the other planner), then the owner
        send(key, start + read)
        send(key, rewound)  # what the model was shown is gone from the prompt
        # the owner's rewind resets the file's serve state (the next read is full), no other's
        assert _store_read(store, "s1", "conversations.py", text) == (key == KEY)


def test_a_locked_state_database_costs_planners_nothing(
    start_gateway: Start, tmp_path: Path
) -> None:
    """Another process holds the --state file locked once the planners are up: every request is
    answered as usual, kept in memory, none counted failed (the gateway waits at start-up for
    its planners to open the file)."""
    db = tmp_path / "state.db"
    base = start_gateway(state=str(db), processes=2)
    other = sqlite3.connect(db, isolation_level=None)
    other.execute("BEGIN IMMEDIATE")  # holds the write lock
    try:
        with httpx.Client(timeout=60) as client:
            for n in range(6):
                body = {"model": "m", "max_tokens": 9, "messages": [{"role": "user"}]}
                body["messages"][0]["content"] = f"conversation {n}"
                headers = {"x-api-key": f"key-{n % 2}"}  # both planners
                assert (
                    client.post(base + "/v1/messages", json=body, headers=headers).status_code
                    == 200
                )
            stats = [
                client.get(base + "/compactkit/stats", headers={"x-api-key": f"key-{k}"}).json()
                for k in range(2)
            ]
    finally:
        other.execute("ROLLBACK")
        other.close()
    assert all(s["counters"]["failed"] == 0 for s in stats)
    assert [len(s["conversations"]) for s in stats] == [3, 3]
