"""Reset by compaction, across processes: the gateway (`compactkit gateway --state DB`), a `Session`
and the LangChain middleware compact a conversation, and the serve state of the same session in the
same store forgets what the compaction removed, so the next read of it is sent in full while what
the compacted context still shows stays a marker.

The reset test runs real processes: the gateway in front of the scripted fake model of tests/live,
and `compactkit mcp-proxy --state DB --session S` in front of an MCP server on the official SDK,
driven by the official MCP client; the gateway's requests name the session as Claude Code does
(`metadata.user_id`)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest

pytest.importorskip("mcp", reason="the mcp extra is not installed: pip install -e '.[test]'")
pytest.importorskip("uvicorn", reason="the gateway extra is not installed")

from compactkit import Session, message
from compactkit.context import AgentContext, TextBlock, ToolCallBlock, ToolResultBlock
from compactkit.errors import ConfigError
from compactkit.gateway import GatewayConfig, wire
from compactkit.gateway.app import Policy
from compactkit.serve import (
    MemoryServeStore,
    SqliteServeStore,
    held_etags,
    lost_etags,
    serve_key,
    text_etag,
)
from tests.live.upstream import FakeUpstream, answer

from .test_mcp_proxy import Client, connect, proxied, served

ROOT = Path(__file__).resolve().parents[2]
SERVER = [sys.executable, str(Path(__file__).with_name("sdk_server.py")), "plain"]
# real files to read: the serve state, the SQLite store, the gateway's conversations
FILES = {
    "state.py": ROOT / "compactkit" / "serve" / "state.py",
    "store.py": ROOT / "compactkit" / "serve" / "store.py",
    "conversations.py": ROOT / "compactkit" / "gateway" / "conversations.py",
}
TRIGGER, TARGET = 6000, 3500
TOOL = "mcp__files__read_text_file"
TASK = "Review the serve state, its SQLite store and the gateway's conversations."


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    folder = tmp_path / "ws"
    folder.mkdir()
    for name, source in FILES.items():
        (folder / name).write_text(source.read_text(encoding="utf-8"), encoding="utf-8")
    return folder


@contextmanager
def running_gateway(upstream: FakeUpstream, db: Path, trigger: int, target: int) -> Iterator[str]:
    """`compactkit gateway --state DB` in a process of its own, in front of `upstream`."""
    command = [sys.executable, "-m", "compactkit", "gateway", "--listen", "127.0.0.1:0"]
    command += ["--upstream-anthropic", upstream.url, "--upstream-openai", upstream.url]
    command += ["--trigger", str(trigger), "--target", str(target), "--state", str(db)]
    command += ["--policy", "always", "--summarizer", "extractive"]  # short conversations
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen(command, cwd=ROOT, env=env, stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stderr is not None
        line = proc.stderr.readline()
        found = re.search(r"listening on (http://\S+)", line)
        assert found, f"the gateway did not start: {line}{proc.stderr.read()}"
        yield found.group(1)
    finally:
        proc.terminate()
        proc.wait(timeout=30)


@pytest.fixture
def gateway(tmp_path: Path) -> Iterator[tuple[str, FakeUpstream, Path]]:
    """The gateway in front of the fake model, and its --state file."""
    db = tmp_path / "state.db"
    with (
        FakeUpstream([answer("noted")] * 4) as upstream,
        running_gateway(upstream, db, TRIGGER, TARGET) as url,
    ):
        yield url, upstream, db


def _read(client: Client, name: str) -> dict[str, Any]:
    """What the proxy says of one read: `{"etag", "full", "call", ...}`."""
    return served(client.call("read_text_file", {"path": name}))


def _text(result: Any) -> str:
    return "\n".join(p.text for p in result.content)


class Conversation:
    """An agent's conversation as Claude Code sends it: each read's answer is a tool result."""

    def __init__(self, session: str) -> None:
        self.session = session
        self.messages: list[dict[str, Any]] = [{"role": "user", "content": TASK}]

    def read(self, client: Client, name: str) -> dict[str, Any]:
        """Read through the proxy; the model is shown the structured content when there is one
        (`{"result": TEXT}`), as Claude Code shows it, else the text."""
        result = client.call("read_text_file", {"path": name})
        structured = result.structured_content
        shown = (
            _text(result) if structured is None else json.dumps(structured, separators=(",", ":"))
        )
        n = len(self.messages)
        self.messages.append(
            {
                "role": "assistant",
                "content": [
                    {"type": "tool_use", "id": f"toolu_{n}", "name": TOOL, "input": {"path": name}}
                ],
            }
        )
        self.messages.append(
            {
                "role": "user",
                "content": [
                    {
                        "type": "tool_result",
                        "tool_use_id": f"toolu_{n}",
                        "content": [{"type": "text", "text": shown}],
                    }
                ],
            }
        )
        return {"text": _text(result), "shown": shown, **served(result)}

    def body(self) -> dict[str, Any]:
        user_id = json.dumps({"device_id": "0" * 64, "session_id": self.session})
        return {
            "model": "claude-sonnet-4-5",
            "max_tokens": 1024,
            "metadata": {"user_id": user_id},
            "system": "You are a coding agent.",
            "tools": [
                {"name": TOOL, "description": "Read a file", "input_schema": {"type": "object"}}
            ],
            "messages": self.messages,
        }


def _shows(body: Any, text: str) -> bool:
    """Whether a request body holds `text` in a tool result."""
    return any(
        isinstance(block, dict)
        and block.get("type") == "tool_result"
        and any(part.get("text") == text for part in block.get("content") or [])
        for msg in body["messages"]
        if isinstance(msg.get("content"), list)
        for block in msg["content"]
    )


def test_a_compaction_in_the_gateway_resets_the_proxy_of_the_same_session(
    gateway: tuple[str, FakeUpstream, Path], workspace: Path
) -> None:
    url, upstream, db = gateway
    texts = {name: (workspace / name).read_text(encoding="utf-8") for name in FILES}
    session = "0b6f3c1e-8d1a-4f3e-9c55-claude-session"
    conv = Conversation(session)
    with (
        connect(
            proxied([*SERVER, str(workspace)], "--state", str(db), "--session", session)
        ) as proxy,
        connect(
            proxied([*SERVER, str(workspace)], "--state", str(db), "--session", "another")
        ) as other,
    ):
        first = conv.read(proxy, "state.py")
        again = conv.read(proxy, "state.py")
        assert first["full"] and first["text"] == texts["state.py"]
        assert json.loads(first["shown"]) == {"result": texts["state.py"]}
        assert not again["full"]
        assert json.loads(again["text"])["etag"] == text_etag(texts["state.py"])
        between = conv.read(proxy, "conversations.py")
        newest = conv.read(proxy, "store.py")  # the compaction keeps the newest read
        assert between["full"] and newest["full"]
        assert _read(other, "state.py")["full"] and not _read(other, "state.py")["full"]

        response = httpx.post(url + "/v1/messages", json=conv.body(), timeout=60)
        assert response.status_code == 200, response.text
        stats = httpx.get(url + "/compactkit/stats").json()
        assert stats["counters"]["compacted_requests"] == 1
        sent = upstream.requests[-1].body
        # the model was sent the newest read and not the first: the compaction removed it
        assert _shows(sent, newest["shown"]) and not _shows(sent, first["shown"])
        assert not _shows(sent, between["shown"])

        # the next read through the proxy is sent in full: the model no longer has it
        after = proxy.call("read_text_file", {"path": "state.py"})
        assert served(after)["full"] and _text(after) == texts["state.py"]
        assert served(proxy.call("read_text_file", {"path": "conversations.py"}))["full"]
        # what the compacted context still shows stays served
        kept = proxy.call("read_text_file", {"path": "store.py"})
        assert not served(kept)["full"] and json.loads(_text(kept))["unchanged"] is True
        # and another session's state is its own
        assert not _read(other, "state.py")["full"]


# --------------------------------------------------------------------------- the gateway, in process


def _policy(db: Path) -> Policy:
    return Policy(GatewayConfig(state=str(db), trigger=TRIGGER, target=TARGET))


def _plan(policy: Policy, api: wire.Api, body: dict[str, Any], header: str | None = None) -> Any:
    key = wire.conversation_key(api, body, header)
    raw = json.dumps(body).encode()
    return policy.plan(api, body, key, raw, wire.session_name(api, body, header))


def _store_read(store: SqliteServeStore, session: str, name: str, text: str) -> bool:
    key, path = serve_key("read_text_file", {"path": name})
    return store.serve(session, key, text, path=path).full


def test_the_client_s_own_compaction_through_the_gateway_resets_too(tmp_path: Path) -> None:
    """Claude Code's /compact or a rewind: the next request no longer shows a result the last one
    did; below the trigger, the gateway sends it as it came and resets what it dropped."""
    db = tmp_path / "state.db"
    policy, store = _policy(db), SqliteServeStore(db)
    text = FILES["conversations.py"].read_text(encoding="utf-8")
    assert _store_read(store, "s1", "conversations.py", text)
    conv = Conversation("s1")
    conv.messages += [
        {
            "role": "assistant",
            "content": [
                {
                    "type": "tool_use",
                    "id": "t1",
                    "name": TOOL,
                    "input": {"path": "conversations.py"},
                }
            ],
        },
        {
            "role": "user",
            "content": [{"type": "tool_result", "tool_use_id": "t1", "content": text}],
        },
    ]
    _plan(policy, "anthropic", conv.body())
    assert not _store_read(store, "s1", "conversations.py", text)  # held: a marker
    conv.messages = [{"role": "user", "content": "Summary of the review so far: nothing found."}]
    assert _plan(policy, "anthropic", conv.body()).body is not None
    assert _store_read(store, "s1", "conversations.py", text)  # dropped: full again


def test_codex_and_a_header_name_the_session_too(tmp_path: Path) -> None:
    """Codex's requests name the session by `prompt_cache_key`; any client by the
    `X-Compactkit-Session` header. A request past the trigger resets that session only."""
    db = tmp_path / "state.db"
    policy, store = _policy(db), SqliteServeStore(db)
    texts = {name: path.read_text(encoding="utf-8") for name, path in FILES.items()}
    for session in ("codex-thread", "named", "bystander"):
        for name, text in texts.items():
            assert _store_read(store, session, name, text)
    items: list[dict[str, Any]] = [
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": TASK}]}
    ]
    for n, name in enumerate(["state.py", "conversations.py", "store.py"]):
        args = json.dumps({"path": name})
        items.append(
            {
                "type": "function_call",
                "call_id": f"c{n}",
                "name": "read_text_file",
                "arguments": args,
            }
        )
        items.append({"type": "function_call_output", "call_id": f"c{n}", "output": texts[name]})
    codex = {
        "model": "gpt-5",
        "instructions": "You are Codex.",
        "input": items,
        "prompt_cache_key": "codex-thread",
        "tools": [{"type": "function", "name": "read_text_file", "parameters": {"type": "object"}}],
    }
    assert _plan(policy, "openai-responses", codex).conversation.compactions == 1
    _plan(policy, "openai-responses", {**codex, "prompt_cache_key": "x"}, header="named")
    for session in ("codex-thread", "named"):
        assert _store_read(store, session, "state.py", texts["state.py"])
        assert not _store_read(store, session, "store.py", texts["store.py"])
    assert not _store_read(store, "bystander", "state.py", texts["state.py"])


# --------------------------------------------------------------------------- Session and middleware


def _result_messages(name: str, text: str, n: int) -> list[Any]:
    call = ToolCallBlock(id=f"c{n}", name="read_text_file", input={"path": name})
    result = ToolResultBlock(tool_call_id=f"c{n}", content=(TextBlock(text=text),))
    return [message("assistant", call), message("tool", result)]


def test_a_session_compaction_resets_the_serve_state_it_names(tmp_path: Path) -> None:
    db = tmp_path / "state.db"
    store = SqliteServeStore(db)
    session = Session(trigger=TRIGGER, target=TARGET, serve_state=db, serve_session="run-7")
    session.append(message("user", TASK))
    for n, (name, path) in enumerate(FILES.items()):
        text = path.read_text(encoding="utf-8")
        key, p = serve_key("read_text_file", {"path": name})
        shown = store.serve("run-7", key, text, path=p)
        assert shown.full
        session.append(*_result_messages(name, shown.text, n))
    before = session.context
    session.compact()
    kept = {n for n, p in FILES.items() if text_etag(p.read_text()) in held_etags(session.context)}
    assert kept and kept != set(FILES)  # the compaction removed some reads and kept others
    assert lost_etags(before, session.context) == {
        text_etag(p.read_text()) for n, p in FILES.items() if n not in kept
    }
    for name, path in FILES.items():  # removed: full again; kept: still a marker
        assert _store_read(store, "run-7", name, path.read_text()) is (name not in kept), name


def test_restoring_a_snapshot_forgets_what_came_after_it() -> None:
    store = MemoryServeStore()
    session = Session(serve_state=store, serve_session="s")
    session.append(message("user", TASK))
    snapshot = session.snapshot()
    text = FILES["state.py"].read_text(encoding="utf-8")
    key, path = serve_key("read_text_file", {"path": "state.py"})
    session.append(*_result_messages("state.py", store.serve("s", key, text, path=path).text, 0))
    assert not store.serve("s", key, text, path=path).full
    session.restore(snapshot)
    assert store.serve("s", key, text, path=path).full


def test_a_partial_serve_s_fields_are_forgotten_with_the_result_that_showed_them() -> None:
    store = MemoryServeStore()
    first = json.dumps({"path": "a.json", "size": 1200, "body": "x = 1\n" * 200})
    changed = json.dumps({"path": "a.json", "size": 1300, "body": "x = 1\n" * 200})
    key, _ = serve_key("stat", {"path": "a.json"})
    full = store.serve("s", key, first)
    partial = store.serve("s", key, changed)
    assert full.full and not partial.full and "1300" in partial.text.splitlines()[0]
    held = ToolResultBlock(tool_call_id="1", content=(TextBlock(text=partial.text),))
    before = AgentContext(messages=(message("tool", held),))
    session = Session(context=before, serve_state=store, serve_session="s")
    session.restore(AgentContext())  # the partial serve is gone: its changed field with it
    assert store.serve("s", key, changed).full


def test_serve_state_and_serve_session_go_together(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="go together"):
        Session(serve_state=tmp_path / "state.db")
    with pytest.raises(ConfigError, match="go together"):
        Session(serve_session="s")


def test_an_empty_serve_state_path_is_refused_not_a_private_database() -> None:
    # `serve_state=os.environ.get("CK_STATE", "")`: SQLite would open a private temporary
    # database, and no tool server would ever see what a compaction made it forget
    with pytest.raises(ConfigError, match="serve-state file path is empty"):
        Session(serve_state="", serve_session="s")


def test_the_langchain_middleware_resets_what_it_compacted(tmp_path: Path) -> None:
    pytest.importorskip("langchain", reason="the langchain extra is not installed")
    from langchain_core.messages import AIMessage, HumanMessage, ToolMessage

    from compactkit.integrations.langchain import CompactionMiddleware

    db = tmp_path / "state.db"
    store = SqliteServeStore(db)
    middleware = CompactionMiddleware(
        trigger=TRIGGER, target=TARGET, serve_state=str(db), serve_session="lc"
    )
    messages: list[Any] = [HumanMessage(TASK)]
    for n, (name, path) in enumerate(FILES.items()):
        text = path.read_text(encoding="utf-8")
        assert _store_read(store, "lc", name, text)
        messages.append(
            AIMessage(
                "", tool_calls=[{"id": f"c{n}", "name": "read_text_file", "args": {"path": name}}]
            )
        )
        messages.append(ToolMessage(text, tool_call_id=f"c{n}"))
    update = middleware.before_model({"messages": messages}, None)  # type: ignore[typeddict-item]
    assert update is not None
    shown = "".join(str(m.content) for m in update["messages"][1:])
    kept = {name for name, path in FILES.items() if path.read_text() in shown}
    assert kept and kept != set(FILES)  # the compaction removed some reads and kept others
    for name, path in FILES.items():  # removed: full again; kept: still a marker
        assert _store_read(store, "lc", name, path.read_text()) is (name not in kept), name


def test_a_loaded_session_resets_the_serve_state_it_is_given(tmp_path: Path) -> None:
    store = MemoryServeStore()
    text = FILES["store.py"].read_text(encoding="utf-8")
    key, path = serve_key("read_text_file", {"path": "store.py"})
    with Session(trigger=TRIGGER) as session:
        session.append(message("user", TASK))
        session.save(tmp_path / "run.jsonl")
        start = session.snapshot()
        session.append(
            *_result_messages("store.py", store.serve("s", key, text, path=path).text, 0)
        )
    loaded = Session.load(tmp_path / "run.jsonl", serve_state=store, serve_session="s")
    try:
        assert not store.serve("s", key, text, path=path).full
        loaded.restore(start)
        assert store.serve("s", key, text, path=path).full
    finally:
        loaded.close()
