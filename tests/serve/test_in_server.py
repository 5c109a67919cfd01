"""The serve state inside a Python MCP server on the official SDK (`serve_tools`, one line), and
tools with an `outputSchema` served through it and through `compactkit mcp-proxy`: the official
client validates every structured result against the tool's schema."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from pathlib import Path

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


def test_the_low_level_server_gets_it_with_one_line(root: Path) -> None:
    with connect([*SERVER, "lowlevel", str(root)]) as client:
        (tool,) = client.tools()
        assert tool.input_schema["properties"][REFRESH]["type"] == "boolean"
        assert client.text("big_text", {"path": "app.py"}) == TEXT
        marker = _marker(client.text("big_text", {"path": "app.py"}))
        assert marker["etag"] == text_etag(TEXT)
        assert client.text("big_text", {"path": "app.py", REFRESH: True}) == TEXT
