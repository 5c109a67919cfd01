"""`compactkit mcp-proxy` over stdio, driven by the official MCP Python client, in front of real
MCP servers from the registries (the reference filesystem server from npm, `mcp-server-git` from
PyPI) and of a misbehaving one (errors, a hang, a malformed result, a death)."""

from __future__ import annotations

import functools
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path
from typing import Any, cast

import pytest
from anyio.from_thread import BlockingPortal, start_blocking_portal
from click.testing import CliRunner

mcp = pytest.importorskip("mcp", reason="the mcp extra is not installed: pip install -e '.[test]'")

from mcp import ClientSession, StdioServerParameters, stdio_client, types  # noqa: E402
from mcp.shared.exceptions import MCPError  # noqa: E402

from compactkit import make_cli  # noqa: E402
from compactkit.serve import text_etag  # noqa: E402
from compactkit.serve.mcp_proxy import COMPACTED, META_KNOWN, META_SERVE, REFRESH  # noqa: E402

from .servers import PROXY, filesystem_server, git_server, node  # noqa: E402

FAKE = [sys.executable, str(Path(__file__).with_name("fake_upstream.py"))]


class Client:
    """A synchronous face on an MCP `ClientSession` running in a portal's event loop."""

    def __init__(self, portal: BlockingPortal, session: ClientSession) -> None:
        self.portal = portal
        self.session = session

    def tools(self) -> list[types.Tool]:
        return self.portal.call(self.session.list_tools).tools

    def call(self, name: str, arguments: dict[str, Any], **kw: Any) -> types.CallToolResult:
        return self.portal.call(functools.partial(self.session.call_tool, name, arguments, **kw))

    def text(self, name: str, arguments: dict[str, Any], **kw: Any) -> str:
        result = self.call(name, arguments, **kw)
        return "\n".join(p.text for p in result.content if isinstance(p, types.TextContent))

    def notify(self, method: str, params: dict[str, Any] | None = None) -> None:
        note = types.Notification(method=method, params=params)
        self.portal.call(self.session.send_notification, cast(Any, note))
        self.portal.call(self.session.send_ping)


@asynccontextmanager
async def _session(
    command: list[str], log: Any, env: dict[str, str] | None = None
) -> AsyncIterator[ClientSession]:
    params = StdioServerParameters(command=command[0], args=command[1:], env=env)
    async with (
        stdio_client(params, errlog=log) as (read, write),
        ClientSession(read, write, read_timeout_seconds=60) as session,
    ):
        await session.initialize()
        yield session


@contextmanager
def connect(command: list[str], env: dict[str, str] | None = None) -> Iterator[Client]:
    with (
        tempfile.TemporaryFile("w+") as log,
        start_blocking_portal() as portal,
        portal.wrap_async_context_manager(_session(command, log, env)) as session,
    ):
        yield Client(portal, session)


def proxied(upstream: list[str], *options: str) -> list[str]:
    return [*PROXY, *options, "--", *upstream]


def served(result: types.CallToolResult) -> dict[str, Any]:
    return cast(dict[str, Any], (result.meta or {})[META_SERVE])


# --------------------------------------------------------------------------- filesystem (npm)

needs_node = pytest.mark.skipif(node() is None, reason="node is not installed on this machine")


@pytest.fixture(scope="module")
def workspace(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("ws").resolve()
    (root / "conf.py").write_text(
        "project = 'demo'\n" + "extensions = ['sphinx.ext.autodoc']\n" * 40
    )
    return root


@pytest.fixture(scope="module")
def fs(workspace: Path) -> Iterator[Client]:
    with connect(proxied([*filesystem_server(), str(workspace)])) as client:
        yield client


@needs_node
def test_tools_are_listed_as_upstream_lists_them_plus_refresh(fs: Client, workspace: Path) -> None:
    with connect([*filesystem_server(), str(workspace)]) as direct:
        upstream = {t.name: t for t in direct.tools()}
    tools = {t.name: t for t in fs.tools()}
    assert tools.keys() == upstream.keys()
    for name, tool in tools.items():
        props = tool.input_schema["properties"]
        assert props[REFRESH]["type"] == "boolean"
        assert {k: v for k, v in props.items() if k != REFRESH} == upstream[name].input_schema[
            "properties"
        ]
        assert tool.description == upstream[name].description
        assert tool.output_schema == upstream[name].output_schema  # kept: markers conform


@needs_node
def test_repeat_read_of_an_unchanged_file_is_a_one_line_marker(fs: Client, workspace: Path) -> None:
    path = str(workspace / "conf.py")
    content = (workspace / "conf.py").read_text()
    first = fs.call("read_text_file", {"path": path})
    assert first.content[0].text == content  # type: ignore[union-attr]
    marker = fs.text("read_text_file", {"path": path})
    assert "\n" not in marker and len(marker) < len(content) / 4
    assert f'"etag":"{text_etag(content)}"' in marker and f'"path":"{path}"' in marker
    assert '"unchanged":true' in marker and "refresh=true" in marker
    assert fs.text("read_text_file", {"path": path, REFRESH: True}) == content
    fs.call("write_file", {"path": path, "content": content + "html_theme = 'alabaster'\n"})
    assert fs.text("read_text_file", {"path": path}).endswith("html_theme = 'alabaster'\n")


@needs_node
def test_known_etags_and_compaction_notifications(fs: Client, workspace: Path) -> None:
    (workspace / "index.rst").write_text("Welcome\n=======\n\n" + ".. toctree::\n   usage\n" * 30)
    path = str(workspace / "index.rst")
    content = (workspace / "index.rst").read_text()
    known = fs.call("read_text_file", {"path": path}, meta={META_KNOWN: [text_etag(content)]})
    assert not served(known)["full"] and '"unchanged":true' in known.content[0].text  # type: ignore[union-attr]
    fs.notify(COMPACTED, {"etags": [text_etag(content)]})
    assert fs.text("read_text_file", {"path": path}) == content  # the model lost it: full again
    assert not served(fs.call("read_text_file", {"path": path}))["full"]
    fs.notify(COMPACTED)  # no etags: everything
    assert fs.text("read_text_file", {"path": path}) == content


@needs_node
def test_tool_errors_pass_through_unchanged(fs: Client, workspace: Path) -> None:
    with connect([*filesystem_server(), str(workspace)]) as direct:
        expected = direct.call("read_text_file", {"path": str(workspace / "missing.txt")})
    got = fs.call("read_text_file", {"path": str(workspace / "missing.txt")})
    assert got.is_error and got.content == expected.content


@needs_node
def test_state_db_carries_a_session_across_proxy_restarts(tmp_path: Path, workspace: Path) -> None:
    db = str(tmp_path / "serve.db")
    path = str(workspace / "conf.py")
    command = proxied([*filesystem_server(), str(workspace)], "--state", db, "--session", "s1")
    with connect(command) as first:
        assert served(first.call("read_text_file", {"path": path}))["full"]
    with connect(command) as restarted:
        assert not served(restarted.call("read_text_file", {"path": path}))["full"]


@needs_node
def test_claude_code_s_session_id_names_the_session_of_a_shared_state(
    tmp_path: Path, workspace: Path
) -> None:
    db = str(tmp_path / "serve.db")
    path = str(workspace / "conf.py")
    command = proxied([*filesystem_server(), str(workspace)], "--state", db)
    env = {k: v for k, v in os.environ.items() if k != "COMPACTKIT_SESSION"}
    claude = {**env, "CLAUDE_CODE_SESSION_ID": "7f9c0b1e-claude-session"}
    with connect(command, claude) as first:
        assert served(first.call("read_text_file", {"path": path}))["full"]
    with connect(command, claude) as second:  # another proxy of the same Claude Code session
        assert not served(second.call("read_text_file", {"path": path}))["full"]
    with connect(command, {**env, "CLAUDE_CODE_SESSION_ID": "another-session"}) as other:
        assert served(other.call("read_text_file", {"path": path}))["full"]


# --------------------------------------------------------------------------- mcp-server-git (PyPI)


@pytest.fixture(scope="module")
def repo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    if shutil.which("git") is None:
        pytest.skip("git is not installed on this machine")
    root = tmp_path_factory.mktemp("repo").resolve()
    env = ["-c", "user.name=t", "-c", "user.email=t@example.com"]
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    (root / "README.md").write_text("# demo\n" + "A line of the readme.\n" * 40)
    subprocess.run(["git", "-C", str(root), "add", "."], check=True)
    subprocess.run(["git", "-C", str(root), *env, "commit", "-q", "-m", "first"], check=True)
    return root


@pytest.fixture(scope="module")
def git(repo: Path) -> Iterator[Client]:
    with connect(proxied([*git_server(), "--repository", str(repo)])) as client:
        yield client


def test_git_server_repeat_results_collapse_and_changes_resend(git: Client, repo: Path) -> None:
    show = git.text("git_show", {"repo_path": str(repo), "revision": "HEAD"})
    assert "A line of the readme." in show
    again = git.call("git_show", {"repo_path": str(repo), "revision": "HEAD"})
    assert not served(again)["full"] and '"path":null' in again.content[0].text  # type: ignore[union-attr]
    (repo / "README.md").write_text("# demo, changed\n")
    diff = git.text("git_diff_unstaged", {"repo_path": str(repo)})
    assert "+# demo, changed" in diff
    assert git.text("git_diff_unstaged", {"repo_path": str(repo), REFRESH: True}) == diff


def test_git_server_error_becomes_an_mcp_error_or_error_result(git: Client, repo: Path) -> None:
    bad = git.call("git_show", {"repo_path": str(repo), "revision": "no-such-revision"})
    assert bad.is_error and "no-such-revision" in bad.content[0].text  # type: ignore[union-attr]
    with pytest.raises(MCPError, match="upstream tools/call no_such_tool"):
        git.call("no_such_tool", {})


# --------------------------------------------------------------------------- failures


@pytest.fixture(scope="module")
def fake() -> Iterator[Client]:
    with connect(proxied(FAKE, "--timeout", "1.5")) as client:
        yield client


def test_requests_reach_the_upstream_as_sent_but_for_compactkit_s_own_keys(fake: Client) -> None:
    # a relay, not a second session: what compactkit does not use (here a progress token and the
    # caller's own `_meta` keys) reaches the upstream unchanged; `refresh` and compactkit's keys do not
    result = fake.call(
        "meta",
        {"text": "x", REFRESH: True},
        meta={META_KNOWN: ["0" * 16], "trace/id": "abc", "progressToken": 7},
    )
    seen = json.loads(result.content[0].text)  # type: ignore[union-attr]
    assert seen == {"meta": {"trace/id": "abc", "progressToken": 7}, "arguments": {"text": "x"}}
    assert served(result)["full"]


def test_upstream_protocol_error_is_an_mcp_error(fake: Client) -> None:
    with pytest.raises(MCPError, match="upstream tools/call fail: no such thing") as err:
        fake.call("fail", {})
    assert err.value.code == -32602
    assert fake.text("echo", {"text": "still here"}) == "still here"


def test_upstream_timeout_is_an_mcp_error_not_a_hang(fake: Client) -> None:
    start = time.monotonic()
    with pytest.raises(MCPError, match="upstream tools/call hang"):
        fake.call("hang", {})
    assert time.monotonic() - start < 10
    assert fake.text("echo", {"text": "after the hang"}) == "after the hang"


def test_malformed_upstream_result_is_an_mcp_error(fake: Client) -> None:
    with pytest.raises(MCPError, match="upstream tools/call malformed"):
        fake.call("malformed", {})
    assert fake.text("echo", {"text": "fine"}) == "fine"


def test_upstream_death_is_an_mcp_error_on_every_later_call() -> None:
    with connect(proxied(FAKE, "--timeout", "5")) as client:
        start = time.monotonic()
        with pytest.raises(MCPError, match="upstream tools/call die"):
            client.call("die", {})
        with pytest.raises(MCPError, match="upstream tools/call echo"):
            client.call("echo", {"text": "anyone?"})
        assert time.monotonic() - start < 12


def test_the_proxy_exits_when_its_client_closes_the_connection() -> None:
    proxy = subprocess.Popen(
        proxied(FAKE), stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL
    )
    assert proxy.stdin is not None and proxy.stdout is not None
    hello = {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t"}}
    proxy.stdin.write(
        json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": hello}).encode()
        + b"\n"
    )
    proxy.stdin.flush()
    assert json.loads(proxy.stdout.readline())["result"]["serverInfo"]["name"] == "fake-upstream"
    proxy.stdin.close()  # the client leaves, without killing anything
    try:
        assert proxy.wait(timeout=20) == 0
    finally:
        proxy.kill()


def test_cli_needs_a_command_and_a_server_that_starts() -> None:
    runner = CliRunner()
    missing = runner.invoke(make_cli(), ["mcp-proxy"])
    assert missing.exit_code == 2
    bad = runner.invoke(make_cli(), ["mcp-proxy", "--", "/nonexistent/mcp-server"])
    assert bad.exit_code == 2
    assert "cannot start the upstream MCP server" in bad.output
    assert len(bad.output.strip().splitlines()) == 1
