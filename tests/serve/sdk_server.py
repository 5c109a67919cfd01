"""A small MCP server on the official Python SDK, for the in-server serve state and the replay
bench: `python sdk_server.py MODE ROOT`, MODE one of `plain` (an `MCPServer`, no serve state),
`mcpserver` (the same with `serve_tools`), `lowlevel` (a low-level `Server` with `serve_tools`).

Tools: `read_text_file(path)` (the file's text; `MCPServer` gives it an output schema
`{"result": string}`), `stat(path)` (a typed object: every field required, the first lines in
`head`), `notes(path)` (a free object, the file's lines by number), `big_text(path)` (the
low-level server's only tool: text, no schema). A third argument, PORT, serves the `MCPServer` over
streamable HTTP at http://127.0.0.1:PORT/mcp instead of stdio.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any, TypedDict

import anyio

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # this checkout's compactkit

from compactkit.serve import serve_tools


class Stat(TypedDict):
    path: str
    size: int
    lines: int
    head: str


def mcpserver(root: Path, served: bool, port: int | None = None) -> None:
    from mcp.server.mcpserver import MCPServer

    server = MCPServer("sdk-test")

    @server.tool()
    def read_text_file(path: str) -> str:
        """The text of a file."""
        return (root / path).read_text(encoding="utf-8")

    @server.tool()
    def stat(path: str) -> Stat:
        """Size and line count of a file."""
        text = (root / path).read_text(encoding="utf-8")
        head = "".join(text.splitlines(keepends=True)[:20])
        return Stat(path=path, size=len(text), lines=text.count("\n"), head=head)

    @server.tool()
    def notes(path: str) -> dict[str, Any]:
        """The lines of a file by number."""
        lines = (root / path).read_text(encoding="utf-8").splitlines()
        return {str(n): line for n, line in enumerate(lines, 1)}

    if served:
        serve_tools(server)
    if port is None:
        server.run()
    else:
        server.run("streamable-http", host="127.0.0.1", port=port)


def lowlevel(root: Path) -> None:
    from mcp import types
    from mcp.server.lowlevel import Server
    from mcp.server.stdio import stdio_server

    async def list_tools(ctx: Any, params: Any) -> types.ListToolsResult:
        schema = {"type": "object", "properties": {"path": {"type": "string"}}}
        return types.ListToolsResult(
            tools=[types.Tool(name="big_text", description="A file's text", input_schema=schema)]
        )

    async def call_tool(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
        text = (root / str((params.arguments or {})["path"])).read_text(encoding="utf-8")
        return types.CallToolResult(content=[types.TextContent(type="text", text=text)])

    server = serve_tools(Server("sdk-lowlevel", on_list_tools=list_tools, on_call_tool=call_tool))

    async def main() -> None:
        async with stdio_server() as (read, write):
            await server.run(read, write, server.create_initialization_options())

    anyio.run(main)


if __name__ == "__main__":
    mode, folder = sys.argv[1], Path(sys.argv[2])
    http_port = int(sys.argv[3]) if len(sys.argv) > 3 else None
    if mode == "lowlevel":
        lowlevel(folder)
    else:
        mcpserver(folder, served=mode == "mcpserver", port=http_port)
