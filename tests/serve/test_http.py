"""Serving over streamable HTTP, against real servers on loopback: `mcp-proxy --url` in front of a
remote MCP server, `mcp-proxy --http` serving clients over HTTP (in front of a stdio server and of
an HTTP one), and `serve_tools` inside an `MCPServer` that serves HTTP. The clients are the
official SDK's."""

from __future__ import annotations

import json
import socket
import subprocess
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path

import pytest

pytest.importorskip("mcp", reason="the mcp extra is not installed: pip install -e '.[test]'")

from anyio.from_thread import start_blocking_portal
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client

from compactkit.serve import text_etag

from .servers import PROXY
from .test_in_server import SERVER, TEXT
from .test_mcp_proxy import Client, connect, served


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextmanager
def listening_to(proc: subprocess.Popen[bytes], port: int) -> Iterator[str]:
    """The URL of a server process once it accepts connections on `port`."""
    deadline = time.monotonic() + 60
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            break
        except OSError:
            if proc.poll() is not None or time.monotonic() > deadline:
                err = proc.stderr.read().decode() if proc.stderr else ""
                raise RuntimeError(f"{proc.args} did not listen on {port}: {err}") from None
            time.sleep(0.2)
    yield f"http://127.0.0.1:{port}/mcp"


@contextmanager
def listening(command: list[str], port: int) -> Iterator[str]:
    """Start a server process that listens on `port`; its URL once it accepts connections."""
    proc = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        with listening_to(proc, port) as url:
            yield url
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


@asynccontextmanager
async def _http_session(url: str) -> AsyncIterator[ClientSession]:
    async with (
        streamable_http_client(url) as (read, write),
        ClientSession(read, write, read_timeout_seconds=60) as session,
    ):
        await session.initialize()
        yield session


@contextmanager
def connect_http(url: str) -> Iterator[Client]:
    with (
        start_blocking_portal() as portal,
        portal.wrap_async_context_manager(_http_session(url)) as session,
    ):
        yield Client(portal, session)


@pytest.fixture(scope="module")
def root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("http").resolve()
    (folder / "app.py").write_text(TEXT)
    return folder


@pytest.fixture(scope="module")
def remote(root: Path) -> Iterator[str]:
    """An MCPServer (no serve state) serving streamable HTTP on loopback."""
    port = _free_port()
    with listening([*SERVER, "plain", str(root), str(port)], port) as url:
        yield url


def _reads_then_marker(client: Client) -> None:
    first = client.call("read_text_file", {"path": "app.py"})
    assert first.content[0].text == TEXT and served(first)["full"]  # type: ignore[union-attr]
    again = client.call("read_text_file", {"path": "app.py"})
    assert not served(again)["full"] and served(again)["etag"] == text_etag(TEXT)
    assert '"unchanged":true' in again.content[0].text  # type: ignore[union-attr]
    assert again.structured_content == {"result": again.content[0].text}  # type: ignore[union-attr]


def test_stdio_proxy_in_front_of_a_remote_server_by_url(remote: str) -> None:
    with connect([*PROXY, "--url", remote]) as client:
        assert {t.name for t in client.tools()} >= {"read_text_file", "stat", "notes"}
        _reads_then_marker(client)


@pytest.mark.parametrize("upstream", ["stdio", "url"])
def test_proxy_serving_http_each_client_session_its_own_state(
    upstream: str, root: Path, remote: str
) -> None:
    port = _free_port()
    behind = ["--", *SERVER, "plain", str(root)] if upstream == "stdio" else ["--url", remote]
    command = [*PROXY, "--http", f"127.0.0.1:{port}", *behind]
    with listening(command, port) as url, connect_http(url) as one:
        _reads_then_marker(one)
        with connect_http(url) as two:  # a new conversation: sent in full, then a marker
            _reads_then_marker(two)
        assert not served(one.call("read_text_file", {"path": "app.py"}))["full"]


def test_serve_tools_inside_a_server_that_serves_http(root: Path) -> None:
    port = _free_port()
    command = [*SERVER, "mcpserver", str(root), str(port)]
    with listening(command, port) as url, connect_http(url) as one, connect_http(url) as two:
        _reads_then_marker(one)
        _reads_then_marker(two)  # each MCP session is a serve-state session


def test_proxy_serving_http_whose_upstream_cannot_start_answers_502_in_one_line(
    tmp_path: Path,
) -> None:
    # each client session starts its own upstream: one that cannot start fails that session
    # with the reason (was: 500 'Internal Server Error' and a traceback on stderr)
    import httpx

    missing = str(tmp_path / "no-such-server")
    port = _free_port()
    command = [*PROXY, "--http", f"127.0.0.1:{port}", "--", missing]
    hello = {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t"}}
    initialize = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": hello}
    headers = {"accept": "application/json, text/event-stream"}
    proc = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        with listening_to(proc, port) as url:
            for _ in range(2):  # the proxy lives on
                answer = httpx.post(url, json=initialize, headers=headers, timeout=30)
                assert answer.status_code == 502
                assert (
                    "cannot start the upstream MCP server" in answer.text and missing in answer.text
                )
                assert len(answer.text.strip().splitlines()) == 1
    finally:
        proc.terminate()
        proc.wait(timeout=10)
    assert proc.stderr is not None
    err = proc.stderr.read().decode()
    assert "Traceback" not in err
    assert [line for line in err.splitlines() if missing in line] == [
        line for line in err.splitlines() if "cannot start the upstream MCP server" in line
    ]
    assert err.count("cannot start the upstream MCP server") == 2


def test_stdio_proxy_whose_url_cannot_be_reached_exits_2_in_one_line() -> None:
    url = f"http://127.0.0.1:{_free_port()}/mcp"  # nothing listens there
    hello = {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t"}}
    initialize = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": hello}
    proc = subprocess.Popen(
        [*PROXY, "--url", url],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert proc.stdin is not None and proc.stdout is not None and proc.stderr is not None
    try:
        proc.stdin.write(json.dumps(initialize).encode() + b"\n")
        proc.stdin.flush()  # and the client waits for its answer
        assert proc.stdout.readline() == b""  # none comes: the proxy ends
        assert proc.wait(timeout=60) == 2
    finally:
        proc.kill()
        proc.wait()
    err = proc.stderr.read().decode().strip()
    assert len(err.splitlines()) == 1 and url in err and "cannot reach" in err, err


def test_proxy_serving_http_whose_url_cannot_be_reached_answers_502_in_one_line() -> None:
    # each session's first request is refused with the reason, naming the URL with its secrets
    # masked (was: an empty event stream, and the reason on stderr only)
    import httpx

    where = f"127.0.0.1:{_free_port()}/mcp"  # nothing listens there
    url = f"http://alice:pa55word@{where}?token=t0ps3cret"
    port = _free_port()
    hello = {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t"}}
    initialize = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": hello}
    headers = {"accept": "application/json, text/event-stream"}
    command = [*PROXY, "--http", f"127.0.0.1:{port}", "--url", url]
    proc = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        with listening_to(proc, port) as proxy_url:
            for _ in range(2):  # each session fails alone; the proxy lives on
                answer = httpx.post(proxy_url, json=initialize, headers=headers, timeout=60)
                assert answer.status_code == 502, answer.text
                (line,) = answer.text.strip().splitlines()
                assert "cannot reach the upstream MCP server at" in line and where in line, line
                assert "pa55word" not in line and "t0ps3cret" not in line, line
            assert proc.poll() is None
    finally:
        proc.terminate()
        proc.wait(timeout=10)
    assert proc.stderr is not None
    err = proc.stderr.read().decode()
    assert "Traceback" not in err and "TaskGroup" not in err
    assert "pa55word" not in err and "t0ps3cret" not in err, err
    assert err.count("cannot reach the upstream MCP server at") == 2, err


def test_proxy_serving_http_on_an_address_in_use_exits_2_in_one_line() -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        done = subprocess.run(
            [*PROXY, "--http", f"127.0.0.1:{port}", "--", "cat"],
            stdin=subprocess.DEVNULL,
            capture_output=True,
            timeout=60,
        )
    err = done.stderr.decode().strip()
    assert done.returncode == 2, err
    assert err == f"compactkit: error: cannot listen on 127.0.0.1:{port}: Address already in use"
