"""`compactkit mcp-proxy`: an MCP server on stdio in front of another MCP server, serving its tool
results through a `ServeState` so a repeat of an unchanged result is a one-line marker.

Built on the official `mcp` SDK (`compactkit[mcp]`): the low-level `Server` faces the client, a
`ClientSession` over `stdio_client` talks to the upstream. Tools are listed as the upstream lists
them, plus an optional `refresh` boolean argument, and without `outputSchema` (a marker cannot
conform to it; structured content still passes through with every full result). Resources and
prompts pass through untouched where the upstream has them.

Per call, `_meta` may carry `compactkit/known` (etags the model holds: a restarted proxy does not
resend them) and `compactkit/skip` (true, or field names: omit, record as served). Each served
result carries `_meta["compactkit/serve"]` (etag, field etags, full or not). A client notification
`notifications/compactkit/compacted` (params `{"etags": [...]}`, or none: everything) says what a
compaction removed, so it is sent in full next time.

Upstream protocol errors, timeouts, malformed results and an upstream that dies become MCP errors
on the call that met them; a tool result marked `isError` and any result that is not one text part
pass through unchanged.
"""

from __future__ import annotations

import sys
import uuid
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

import anyio
from mcp import ClientSession, StdioServerParameters, stdio_client, types
from mcp.server.context import ServerRequestContext
from mcp.server.lowlevel.server import Server
from mcp.server.stdio import stdio_server
from mcp.shared.exceptions import MCPError
from pydantic import BaseModel, ValidationError

from ..errors import BadInputError
from ._pipes import event_loop_stdio
from .state import serve_key
from .store import MemoryServeStore, ServeStore

REFRESH = "refresh"
REFRESH_SCHEMA: dict[str, Any] = {
    "type": "boolean",
    "default": False,
    "description": "Send the full result even if it is unchanged since an earlier call. Use it "
    "when a result says unchanged but you no longer have that earlier result.",
}
AGAIN = "call again with refresh=true for the full content"
META_KNOWN = "compactkit/known"
META_SKIP = "compactkit/skip"
META_SERVE = "compactkit/serve"
COMPACTED = "notifications/compactkit/compacted"
UPSTREAM_ERROR = -32000


@dataclass
class ProxyConfig:
    """What `run_proxy` needs: the upstream command line and where serve state lives."""

    command: str
    args: list[str] = field(default_factory=list)
    store: ServeStore = field(default_factory=MemoryServeStore)
    session: str = field(default_factory=lambda: uuid.uuid4().hex)
    """Serve-state session id (a fresh one per proxy process unless given)."""
    timeout: float = 60.0
    """Seconds to wait for the upstream's answer to one request."""
    startup_timeout: float = 30.0
    env: dict[str, str] | None = None
    cwd: str | None = None


class CompactedParams(types.NotificationParams):
    """Params of `notifications/compactkit/compacted`: the etags a compaction removed (none: all)."""

    etags: list[str] | None = None


class _Proxy:
    def __init__(self, config: ProxyConfig, upstream: ClientSession) -> None:
        self.config = config
        self.upstream = upstream
        self.own_refresh: set[str] = set()  # upstream tools that already take a `refresh`

    async def forward(self, what: str, call: Any) -> Any:
        """Await an upstream request; its failure becomes one MCP error naming `what`."""
        try:
            with anyio.fail_after(self.config.timeout + 1):  # the SDK's own timeout comes first
                return await call
        except MCPError as exc:
            raise MCPError(exc.code, f"upstream {what}: {exc.message}", exc.data) from exc
        except TimeoutError as exc:
            raise MCPError(
                types.REQUEST_TIMEOUT, f"upstream {what}: no answer in {self.config.timeout}s"
            ) from exc
        except ValidationError as exc:
            first = exc.errors()[0]["msg"] if exc.errors() else str(exc)
            raise MCPError(UPSTREAM_ERROR, f"upstream {what}: malformed result ({first})") from exc
        except (anyio.ClosedResourceError, anyio.BrokenResourceError, anyio.EndOfStream) as exc:
            raise MCPError(types.CONNECTION_CLOSED, f"upstream {what}: connection closed") from exc

    async def list_tools(
        self, ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        listed: types.ListToolsResult = await self.forward(
            "tools/list", self.upstream.list_tools(params=params)
        )
        tools = []
        for tool in listed.tools:
            schema = dict(tool.input_schema)
            props = dict(schema.get("properties") or {})
            if REFRESH in props:
                self.own_refresh.add(tool.name)
            else:
                props[REFRESH] = REFRESH_SCHEMA
            schema["properties"] = props
            tools.append(tool.model_copy(update={"input_schema": schema, "output_schema": None}))
        return types.ListToolsResult(tools=tools, next_cursor=listed.next_cursor)

    async def call_tool(
        self, ctx: ServerRequestContext[Any], params: types.CallToolRequestParams
    ) -> types.CallToolResult:
        arguments = dict(params.arguments or {})
        refresh = False
        if params.name not in self.own_refresh:
            refresh = bool(arguments.pop(REFRESH, False))
        meta = dict(ctx.meta or {})
        known = meta.pop(META_KNOWN, None)
        skip = meta.pop(META_SKIP, False)
        result = await self.forward(
            f"tools/call {params.name}",
            self.upstream.call_tool(
                params.name, arguments, read_timeout_seconds=self.config.timeout
            ),
        )
        if not isinstance(result, types.CallToolResult):
            raise MCPError(UPSTREAM_ERROR, f"upstream tools/call {params.name}: not a tool result")
        return self.serve(params.name, arguments, result, refresh, known, skip)

    def serve(
        self,
        tool: str,
        arguments: dict[str, Any],
        result: types.CallToolResult,
        refresh: bool,
        known: Any,
        skip: Any,
    ) -> types.CallToolResult:
        """`result` passed through the serve state (unchanged when it is not one text part)."""
        if result.is_error or len(result.content) != 1:
            return result
        part = result.content[0]
        if not isinstance(part, types.TextContent):
            return result
        key, path = serve_key(tool, arguments)
        served = self.config.store.serve(
            self.config.session,
            key,
            part.text,
            path=path,
            refresh=refresh,
            known=[str(k) for k in known] if isinstance(known, list) else (),
            skip=skip if isinstance(skip, bool) else [str(s) for s in skip or ()],
            again=AGAIN,
        )
        note = {"etag": served.etag, "full": served.full, "call": served.call}
        if served.fields:
            note["fields"] = dict(served.fields)
        meta = {**(result.meta or {}), META_SERVE: note}
        if served.full:
            return result.model_copy(update={"meta": meta})
        content = [part.model_copy(update={"text": served.text})] if served.parts else []
        return types.CallToolResult(content=content, is_error=False, _meta=meta)

    async def compacted(self, ctx: ServerRequestContext[Any], params: CompactedParams) -> None:
        self.config.store.reset(self.config.session, params.etags)

    def server(self, init: types.InitializeResult) -> Server[Any]:
        caps = init.capabilities
        passthrough: dict[str, Any] = {}
        if caps.resources is not None:
            passthrough["on_list_resources"] = self._pass("resources/list", "list_resources")
            passthrough["on_list_resource_templates"] = self._pass(
                "resources/templates/list", "list_resource_templates"
            )
            passthrough["on_read_resource"] = self._read_resource
        if caps.prompts is not None:
            passthrough["on_list_prompts"] = self._pass("prompts/list", "list_prompts")
            passthrough["on_get_prompt"] = self._get_prompt
        server: Server[Any] = Server(
            init.server_info.name,
            version=init.server_info.version,
            instructions=init.instructions,
            on_list_tools=self.list_tools,
            on_call_tool=self.call_tool,
            **passthrough,
        )
        server.middleware = []  # no per-message tracing span: a proxy adds as little as it can
        server.add_notification_handler(COMPACTED, CompactedParams, self.compacted)
        return server

    def _pass(self, what: str, method: str) -> Any:
        async def handler(ctx: ServerRequestContext[Any], params: BaseModel | None) -> Any:
            return await self.forward(what, getattr(self.upstream, method)(params=params))

        return handler

    async def _read_resource(
        self, ctx: ServerRequestContext[Any], params: types.ReadResourceRequestParams
    ) -> types.ReadResourceResult:
        result: types.ReadResourceResult = await self.forward(
            "resources/read", self.upstream.read_resource(params.uri)
        )
        return result

    async def _get_prompt(
        self, ctx: ServerRequestContext[Any], params: types.GetPromptRequestParams
    ) -> types.GetPromptResult:
        result: types.GetPromptResult = await self.forward(
            "prompts/get", self.upstream.get_prompt(params.name, params.arguments)
        )
        return result


@asynccontextmanager
async def upstream_session(config: ProxyConfig) -> AsyncIterator[tuple[ClientSession, Any]]:
    """(session, initialize result) of the upstream server, started and initialized."""
    params = StdioServerParameters(
        command=config.command, args=list(config.args), env=config.env, cwd=config.cwd
    )
    async with AsyncExitStack() as stack:
        try:
            read, write = await stack.enter_async_context(stdio_client(params, errlog=sys.stderr))
        except OSError as exc:
            raise BadInputError(
                f"cannot start the upstream MCP server {config.command!r}: {exc}",
                hint="check the command after --",
            ) from exc
        session = await stack.enter_async_context(
            ClientSession(read, write, read_timeout_seconds=config.timeout)
        )
        try:
            with anyio.fail_after(config.startup_timeout):
                init = await session.initialize()
        except (MCPError, TimeoutError, anyio.ClosedResourceError) as exc:
            raise BadInputError(
                f"the upstream MCP server {config.command!r} did not initialize: "
                f"{exc or type(exc).__name__}",
                hint=f"it must speak MCP on stdio within {config.startup_timeout:g}s",
            ) from exc
        yield session, init


async def run_proxy(config: ProxyConfig, streams: tuple[Any, Any] | None = None) -> None:
    """Serve MCP on stdio (or on `streams`) in front of the upstream until the client leaves."""
    async with upstream_session(config) as (session, init):
        proxy = _Proxy(config, session)
        server = proxy.server(init)
        if streams is not None:
            await server.run(streams[0], streams[1], server.create_initialization_options())
            return
        with event_loop_stdio() as pipes:
            stdin, stdout = pipes if pipes is not None else (None, None)
            async with stdio_server(stdin, stdout) as (read, write):  # type: ignore[arg-type]  # duck-typed AsyncFile
                await server.run(read, write, server.create_initialization_options())
