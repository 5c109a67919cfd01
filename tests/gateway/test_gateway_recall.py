"""`--recall`: the model asks for removed content by etag; the gateway answers from the store and
continues the upstream call itself, streamed or not, so the client never sees the tool."""

from __future__ import annotations

import json
import re
from typing import Any

import httpx
import pytest

import compactkit
import compactkit.recovery as recovery
from compactkit.gateway.recall import answer

from ..conftest import corpus_file
from .agents import anthropic_agent, chat_agent, responses_agent
from .conftest import chunk
from .upstream import FakeModel

TASK = "Explain what the trajectory did first; keep it short."
AGENTS = {
    "anthropic": (anthropic_agent, "/v1/messages"),
    "openai-chat": (chat_agent, "/v1/chat/completions"),
    "openai-responses": (responses_agent, "/v1/responses"),
}


def _tool_name(tool: dict[str, Any]) -> str | None:
    fn = tool.get("function")
    return fn.get("name") if isinstance(fn, dict) else tool.get("name")


def _recall_result(api: str, body: dict[str, Any]) -> str | None:
    if api == "anthropic":
        for m in body["messages"]:
            for b in m["content"] if isinstance(m["content"], list) else []:
                if b.get("type") == "tool_result" and b["tool_use_id"] == "toolu_recall_1":
                    return str(b["content"])
    elif api == "openai-chat":
        for m in body["messages"]:
            if m.get("role") == "tool" and m["tool_call_id"] == "recall_1":
                return str(m["content"])
    else:
        for i in body["input"]:
            if i.get("type") == "function_call_output" and i["call_id"] == "recall_1":
                return str(i["output"])
    return None


def recalling_model(api: str, body: dict[str, Any]) -> tuple[str, str, dict[str, Any]] | str | None:
    """Once the recall tool is offered: recall the first etag it lists, then quote the answer."""
    tool = next((t for t in body.get("tools", []) if _tool_name(t) == "compactkit_recall"), None)
    if tool is None:
        return None
    answered = _recall_result(api, body)
    if answered is not None:
        return "recalled: " + answered
    description = tool.get("description") or tool["function"]["description"]
    etag = re.search(r"Recallable: ([0-9a-f]{16}):", description)
    assert etag, description
    return "recall_1", "compactkit_recall", {"etag": etag.group(1)}


@pytest.mark.parametrize("stream", [False, True], ids=["sync", "streamed"])
@pytest.mark.parametrize("api", list(AGENTS))
def test_the_model_recalls_what_compaction_removed(
    model: FakeModel, start_gateway, api: str, stream: bool
) -> None:
    agent, path = AGENTS[api]
    model.turns = 14
    model.script = recalling_model
    base = start_gateway(trigger=6000, target=3000, recall=True)
    run = agent(base, TASK, stream=stream)

    # the client got the answer that followed the recall, and never the tool itself
    assert run.answer.startswith("recalled: ")
    assert not any(b"compactkit_recall" in body for body in run.sent)
    received = [json.loads(r.body) for r in model.received if r.path == path]
    offered, continued = received[-2], received[-1]
    assert any(_tool_name(t) == "compactkit_recall" for t in offered["tools"])
    # what the gateway answered is content the compacted request no longer held
    recalled = _recall_result(api, continued)
    assert recalled is not None and recalled == run.answer.removeprefix("recalled: ")
    offered_text = json.dumps(offered, ensure_ascii=False)
    back = [
        n
        for n in range(14)
        if chunk(f"chunk{n}") in recalled
        and json.dumps(chunk(f"chunk{n}"), ensure_ascii=False)[1:-1] not in offered_text
    ]
    assert back, "the recall did not bring back a tool output the compacted request lacked"
    stats = httpx.get(base + "/compactkit/stats").json()
    assert stats["counters"]["recalls"] == 1


def test_a_window_stored_in_parts_is_recalled_as_its_messages(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    messages = compactkit.load_one(corpus_file("codemie_session-3fe1b6bc")).messages[1:60]
    whole: dict[str, str] = {}
    monkeypatch.setattr(recovery, "_CHUNK_ABOVE", 10**9)
    etag = recovery.put(whole, messages)
    monkeypatch.setattr(recovery, "_CHUNK_ABOVE", 2000)
    monkeypatch.setattr(recovery, "_CHUNK", 500)
    parted: dict[str, str] = {}
    parted_etag = recovery.put(parted, messages)
    assert len(whole) == 1 and len(parted) > 3
    # the model reads the removed messages, not a list of the parts they are stored in
    assert answer(parted, parted_etag) == answer(whole, etag)
    assert "omitted: part 1" not in answer(parted, parted_etag)
