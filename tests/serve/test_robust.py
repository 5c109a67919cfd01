"""Hostile and unlucky cases of serving: a client's malformed `_meta`, an answer the client never
took, a client that gave up and asked again, and a damaged state file."""

from __future__ import annotations

import json
import logging
import sqlite3
import subprocess
from pathlib import Path
from typing import Any

import anyio
import pytest
from click.testing import CliRunner

pytest.importorskip("mcp", reason="the mcp extra is not installed: pip install -e '.[test]'")

from mcp import types
from mcp.shared.exceptions import MCPError
from mcp.shared.message import SessionMessage

from compactkit import make_cli
from compactkit.serve import MemoryServeStore, SqliteServeStore, serve_key
from compactkit.serve.mcp_proxy import (
    META_KNOWN,
    META_SERVE,
    META_SKIP,
    ProxyConfig,
    relay,
    upstream_streams,
)

from .test_mcp_proxy import FAKE, connect, proxied, served

BIG = "A line the upstream sends, long enough that a marker is shorter.\n" * 30


@pytest.mark.parametrize(
    "meta",
    [{META_SKIP: 5}, {META_SKIP: [1, 2]}, {META_KNOWN: "abc"}, {META_KNOWN: {"a": 1}}],
    ids=["skip-int", "skip-ints", "known-str", "known-object"],
)
def test_a_malformed_compactkit_meta_value_fails_that_call_alone(meta: dict[str, Any]) -> None:
    with connect(proxied(FAKE)) as client:
        with pytest.raises(MCPError, match="must be a list of strings") as err:
            client.call("echo", {"text": BIG}, meta=meta)
        assert err.value.code == types.INVALID_PARAMS
        assert client.text("echo", {"text": BIG}) == BIG  # the proxy lives on
        assert not served(client.call("echo", {"text": BIG}))["full"]


def _rpc(proc: subprocess.Popen[bytes], msg_id: int, method: str, params: Any) -> None:
    assert proc.stdin is not None
    line = {"jsonrpc": "2.0", "id": msg_id, "method": method, "params": params}
    proc.stdin.write(json.dumps(line).encode() + b"\n")
    proc.stdin.flush()


def test_a_call_repeated_before_its_answer_came_is_answered_in_full() -> None:
    # a client that timed out without cancelling asks again: the answer it gave up on is not
    # what the model holds, so the retry's answer is the content, not a marker
    proxy = subprocess.Popen(
        proxied(FAKE), stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL
    )
    assert proxy.stdout is not None
    try:
        hello = {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t"}}
        _rpc(proxy, 1, "initialize", hello)
        assert "result" in json.loads(proxy.stdout.readline())
        call = {"name": "slow", "arguments": {"text": BIG, "seconds": 0.5}}
        _rpc(proxy, 2, "tools/call", call)  # the one the client gave up on
        _rpc(proxy, 3, "tools/call", call)  # its retry
        answers = {}
        for _ in range(2):
            answer = json.loads(proxy.stdout.readline())
            answers[answer["id"]] = answer["result"]
        assert answers[3]["content"][0]["text"] == BIG
        _rpc(proxy, 4, "tools/call", call)  # now the model holds it: a marker
        fourth = json.loads(proxy.stdout.readline())["result"]
        assert not fourth["_meta"][META_SERVE]["full"]
        assert '"unchanged":true' in fourth["content"][0]["text"]
    finally:
        proxy.kill()
        proxy.wait()


def test_an_answer_the_client_never_took_is_not_recorded_as_served() -> None:
    store = MemoryServeStore()
    config = ProxyConfig(command=FAKE[0], args=FAKE[1:], store=store, session="s")

    async def scenario() -> None:
        to_proxy, proxy_reads = anyio.create_memory_object_stream[Any](10)
        proxy_writes, to_client = anyio.create_memory_object_stream[Any](10)
        async with upstream_streams(config) as upstream, anyio.create_task_group() as tg:
            tg.start_soon(relay, config, (proxy_reads, proxy_writes), upstream)
            await to_client.aclose()  # the client is gone before the answer is on its way
            call = {"name": "echo", "arguments": {"text": BIG}}
            request = types.JSONRPCRequest(jsonrpc="2.0", id=1, method="tools/call", params=call)
            await to_proxy.send(SessionMessage(request))
            await anyio.sleep(2)  # the upstream answers an echo at once
            await to_proxy.aclose()

    anyio.run(scenario)
    key, _ = serve_key("echo", {"text": BIG})
    assert key not in store.load("s").served
    assert store.serve("s", key, BIG).full  # so the next client gets it in full


def test_a_state_file_that_is_not_a_database_is_one_clear_line(tmp_path: Path) -> None:
    bad = tmp_path / "serve.db"
    bad.write_bytes(b"this is not SQLite, it is a text file someone named serve.db\n" * 100)
    result = CliRunner().invoke(make_cli(), ["mcp-proxy", "--state", str(bad), "--", *FAKE])
    assert result.exit_code == 2
    assert str(bad) in result.output and "not a usable serve-state database" in result.output
    assert len(result.output.strip().splitlines()) == 1


def test_a_state_file_damaged_past_its_header_serves_in_full_naming_the_file(
    tmp_path: Path,
) -> None:
    # the header and schema read at start are intact; the tables' pages are not, so the first
    # call is where it shows: each call is answered in full, one line on stderr names the file
    db = tmp_path / "serve.db"
    store = SqliteServeStore(db)
    for n in range(200):
        store.serve("s", f"/src/f{n}.py", BIG + str(n))
    store.close()
    with sqlite3.connect(db) as raw:
        raw.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    page = 4096
    data = bytearray(db.read_bytes())
    assert len(data) > 2 * page
    data[page:] = b"\xde\xad\xbe\xef" * ((len(data) - page) // 4)
    db.write_bytes(bytes(data))
    proxy = subprocess.Popen(
        proxied(FAKE, "--state", str(db), "--session", "s"),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert proxy.stdout is not None and proxy.stdin is not None
    try:
        hello = {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t"}}
        _rpc(proxy, 1, "initialize", hello)
        assert "result" in json.loads(proxy.stdout.readline())
        for n in (2, 3):
            _rpc(proxy, n, "tools/call", {"name": "echo", "arguments": {"text": BIG}})
            answer = json.loads(proxy.stdout.readline())
            assert answer["result"]["content"][0]["text"] == BIG
        proxy.stdin.close()
        assert proxy.wait(timeout=30) == 0
    finally:
        proxy.kill()
        proxy.wait()
    assert proxy.stderr is not None
    lines = proxy.stderr.read().decode().splitlines()
    assert lines and all(str(db) in line and "malformed" in line for line in lines)


def test_an_unreadable_row_is_forgotten_with_a_warning_naming_the_file(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    db = tmp_path / "serve.db"
    store = SqliteServeStore(db)
    store.serve("s", "k", BIG)
    store.serve("s", "other", BIG + "x")
    assert not store.serve("s", "k", BIG).full
    with sqlite3.connect(db) as raw:
        raw.execute("UPDATE serve_entry SET entry = '{\"etag\": 12' WHERE key = 'k'")
    with caplog.at_level(logging.WARNING, logger="compactkit.serve"):
        again = SqliteServeStore(db).serve("s", "k", BIG)
    assert again.full  # what it recorded is sent again, not blamed on anyone
    assert str(db) in caplog.text and "'k'" in caplog.text
    assert not SqliteServeStore(db).serve("s", "other", BIG + "x").full  # the rest is kept


def test_an_unreadable_call_count_forgets_the_session_with_a_warning_naming_the_file(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    # markers name calls by number: a session whose count is lost is sent in full again, and the
    # proxy goes on serving (it failed every call of that session as an upstream message)
    db = tmp_path / "serve.db"
    store = SqliteServeStore(db)
    key, _ = serve_key("echo", {"text": BIG})
    for session in ("s", "t", "other"):
        store.serve(session, key, BIG)
    with sqlite3.connect(db) as raw:
        raw.execute("UPDATE serve_session SET calls = 'many' WHERE session IN ('s', 't')")
    with connect(proxied(FAKE, "--state", str(db), "--session", "s")) as client:
        first = client.call("echo", {"text": BIG})
        assert not first.is_error and served(first)["full"] and served(first)["call"] == 1
        assert not served(client.call("echo", {"text": BIG}))["full"]
    with caplog.at_level(logging.WARNING, logger="compactkit.serve"):
        assert SqliteServeStore(db).load("t").served == {}
    assert str(db) in caplog.text and "'t'" in caplog.text and "call count" in caplog.text
    assert not SqliteServeStore(db).serve("other", key, BIG).full  # other sessions are kept


def test_a_state_file_of_the_first_layout_is_carried_over(tmp_path: Path) -> None:
    db = tmp_path / "serve.db"
    state = MemoryServeStore()
    state.serve("s", "k", BIG)
    with sqlite3.connect(db) as raw:
        raw.execute("CREATE TABLE serve_state (session TEXT PRIMARY KEY, state TEXT)")
        raw.execute(
            "INSERT INTO serve_state VALUES (?, ?)", ("s", state.load("s").model_dump_json())
        )
    store = SqliteServeStore(db)
    assert store.load("s") == state.load("s")
    assert not store.serve("s", "k", BIG).full
