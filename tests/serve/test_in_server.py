"""The serve state inside a Python MCP server on the official SDK (`serve_tools`, one line), and
tools with an `outputSchema` served through it and through `compactkit mcp-proxy`: the official
client validates every structured result against the tool's schema."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("mcp", reason="the mcp extra is not installed: pip install -e '.[test]'")

from mcp import types
from mcp.shared.exceptions import MCPError

from compactkit.serve import text_etag
from compactkit.serve.mcp_proxy import COMPACTED, META_SKIP, REFRESH

from .test_mcp_proxy import Client, connect, proxied, served

SERVER = [sys.executable, str(Path(__file__).with_name("sdk_server.py"))]
TEXT = "def handler(event):\n    return event  # a line of the served file\n" * 30


@pytest.fixture(scope="module")
def root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("sdk").resolve()
    (folder / "app.py").write_text(TEXT)
    return folder


@pytest.fixture(scope="module", params=["in-server", "proxy"])
def sdk(request: pytest.FixtureRequest, root: Path) -> Iterator[Client]:
    """The MCPServer with `serve_tools`, or the same server without it behind the proxy."""
    if request.param == "in-server":
        command = [*SERVER, "mcpserver", str(root)]
    else:
        command = proxied([*SERVER, "plain", str(root)])
    with connect(command) as client:
        yield client


def _marker(text: str) -> dict[str, object]:
    marker = json.loads(text)
    assert marker["unchanged"] is True and "refresh=true" in marker["same_as"]
    return marker  # type: ignore[no-any-return]


def test_tools_keep_their_output_schemas_and_gain_refresh(sdk: Client, root: Path) -> None:
    with connect([*SERVER, "plain", str(root)]) as direct:
        upstream = {t.name: t for t in direct.tools()}
    tools = {t.name: t for t in sdk.tools()}
    assert tools.keys() == upstream.keys()
    for name, tool in tools.items():
        assert tool.output_schema == upstream[name].output_schema is not None
        assert tool.input_schema["properties"][REFRESH]["type"] == "boolean"


def test_a_text_result_s_structured_field_holds_the_marker(sdk: Client, root: Path) -> None:
    (root / "a.py").write_text(TEXT)
    first = sdk.call("read_text_file", {"path": "a.py"})
    assert first.content[0].text == TEXT and first.structured_content == {"result": TEXT}  # type: ignore[union-attr]
    again = sdk.call("read_text_file", {"path": "a.py"})  # the client validated it
    marker = _marker(again.content[0].text)  # type: ignore[union-attr]
    assert marker["etag"] == text_etag(TEXT) and marker["path"] == "a.py"
    assert again.structured_content == {"result": again.content[0].text}  # type: ignore[union-attr]
    assert sdk.call("read_text_file", {"path": "a.py", REFRESH: True}).structured_content == {
        "result": TEXT
    }
    (root / "a.py").write_text(TEXT + "# changed\n")
    assert sdk.text("read_text_file", {"path": "a.py"}) == TEXT + "# changed\n"


def test_a_structured_result_whose_schema_rejects_a_marker_goes_in_full(sdk: Client) -> None:
    first = sdk.call("stat", {"path": "app.py"})
    assert first.structured_content is not None and first.structured_content["head"]
    again = sdk.call("stat", {"path": "app.py"})
    assert served(again)["full"] and again.structured_content == first.structured_content
    assert again.content == first.content


def test_a_free_structured_result_becomes_the_marker_object(sdk: Client) -> None:
    first = sdk.call("notes", {"path": "app.py"})
    assert first.structured_content is not None and first.structured_content["1"]
    again = sdk.call("notes", {"path": "app.py"})
    assert not served(again)["full"]
    assert again.structured_content == _marker(again.content[0].text)  # type: ignore[union-attr]


def test_compaction_and_hostile_meta_in_the_server(sdk: Client, root: Path) -> None:
    (root / "b.py").write_text(TEXT)
    assert sdk.text("read_text_file", {"path": "b.py"}) == TEXT
    with pytest.raises(MCPError, match="must be a list of strings") as err:
        sdk.call("read_text_file", {"path": "b.py"}, meta={META_SKIP: 5})
    assert err.value.code == types.INVALID_PARAMS
    assert not served(sdk.call("read_text_file", {"path": "b.py"}))["full"]
    sdk.notify(COMPACTED, {"etags": [text_etag(TEXT)]})
    assert sdk.text("read_text_file", {"path": "b.py"}) == TEXT  # the model lost it: full


def test_refresh_false_as_a_string_is_false_and_a_refresh_neither_true_nor_false_fails_alone(
    sdk: Client, root: Path
) -> None:
    # same rule in the server and in the proxy (was: "false" resent the result in full)
    (root / "r.py").write_text(TEXT)
    assert sdk.text("read_text_file", {"path": "r.py"}) == TEXT
    for no in ["false", "0", " False ", 0, None]:
        again = sdk.call("read_text_file", {"path": "r.py", REFRESH: no})
        assert not served(again)["full"], no
        _marker(again.content[0].text)  # type: ignore[union-attr]
    for yes in ["true", "1", "TRUE", 1]:
        assert sdk.text("read_text_file", {"path": "r.py", REFRESH: yes}) == TEXT, yes
    for bad in ["maybe", "", 2, [True], {"refresh": True}]:
        with pytest.raises(MCPError, match="'refresh' must be true or false") as err:
            sdk.call("read_text_file", {"path": "r.py", REFRESH: bad})
        assert err.value.code == types.INVALID_PARAMS and len(str(err.value).splitlines()) == 1
    assert not served(sdk.call("read_text_file", {"path": "r.py"}))["full"]  # it lives on


def test_the_low_level_server_gets_it_with_one_line(root: Path) -> None:
    with connect([*SERVER, "lowlevel", str(root)]) as client:
        (tool,) = client.tools()
        assert tool.input_schema["properties"][REFRESH]["type"] == "boolean"
        assert client.text("big_text", {"path": "app.py"}) == TEXT
        marker = _marker(client.text("big_text", {"path": "app.py"}))
        assert marker["etag"] == text_etag(TEXT)
        assert client.text("big_text", {"path": "app.py", REFRESH: True}) == TEXT


def test_two_sessions_reading_the_same_file_at_once_both_hold_it(root: Path) -> None:
    # each session's read is recorded for that session: a call of the same file by another
    # session in between is no later call of this one (was: one of the two went in full again)
    import anyio
    from mcp import Client as SdkClient
    from mcp.server.mcpserver import MCPServer

    from compactkit.serve import serve_tools

    server = MCPServer("two-sessions")
    entered: list[str] = []
    both = anyio.Event()

    @server.tool()
    async def read_text_file(path: str) -> str:
        """The text of a file (the first two calls wait for each other: both in flight)."""
        entered.append(path)
        if len(entered) == 2:
            both.set()
        with anyio.fail_after(30):
            await both.wait()
        return (root / path).read_text(encoding="utf-8")

    serve_tools(server)

    async def main() -> list[dict[str, Any]]:
        # handshake-era connections: one per client, each its own serve-state session
        clients = SdkClient(server, mode="legacy"), SdkClient(server, mode="legacy")
        async with clients[0] as one, clients[1] as two:
            firsts: list[types.CallToolResult] = []

            async def read(client: SdkClient) -> None:
                firsts.append(await client.call_tool("read_text_file", {"path": "app.py"}))

            async with anyio.create_task_group() as tg:
                tg.start_soon(read, one)
                tg.start_soon(read, two)
            assert [r.content[0].text for r in firsts] == [TEXT, TEXT]  # type: ignore[union-attr]
            again = [await c.call_tool("read_text_file", {"path": "app.py"}) for c in (one, two)]
            return [served(r) | {"text": r.content[0].text} for r in again]  # type: ignore[union-attr]

    for second in anyio.run(main):
        assert not second["full"], second  # each session holds its first read: a marker
        assert _marker(second["text"])["etag"] == text_etag(TEXT)


@pytest.mark.parametrize("session", [None, "build-7"])
def test_a_stateless_client_holds_its_reads_only_in_a_named_session(
    root: Path, session: str | None
) -> None:
    # a 2026-07-28 client sends each request on its own (no handshake, no connection that
    # lasts): by default nothing names it, so every read goes in full (never a marker for what
    # another client got); with `session=` its repeats are markers
    import anyio
    from mcp import Client as SdkClient
    from mcp.server.mcpserver import MCPServer

    from compactkit.serve import serve_tools

    server = MCPServer("stateless")

    @server.tool()
    def read_text_file(path: str) -> str:
        """The text of a file."""
        return (root / path).read_text(encoding="utf-8")

    serve_tools(server, session=session)

    async def main() -> list[dict[str, Any]]:
        async with SdkClient(server) as client:
            reads = [await client.call_tool("read_text_file", {"path": "app.py"}) for _ in "ab"]
            return [served(r) | {"text": r.content[0].text} for r in reads]  # type: ignore[union-attr]

    first, second = anyio.run(main)
    assert first["full"] and first["text"] == TEXT
    if session is None:
        assert second["full"] and second["text"] == TEXT
    else:
        assert not second["full"], second
        assert _marker(second["text"])["etag"] == text_etag(TEXT)
