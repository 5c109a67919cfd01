"""`compactkit mcp-proxy --http HOST:PORT`: the proxy serving MCP over streamable HTTP (the
official SDK's `StreamableHTTPServerTransport`, one per client session, under uvicorn).

Each client session (an `initialize` without an `mcp-session-id`) gets its own transport and its
own upstream connection (a process started for it, or a session of the upstream URL), relayed as
on stdio; its serve-state session is the proxy's `--session` when given, else its MCP session id.
A DELETE, or the client's session ending, closes the upstream connection. A session whose upstream
cannot be started, or whose upstream URL does not answer, is refused with 502 and the reason, in
one line (on stderr too); one whose upstream fails later ends alone, with one line on stderr.
"""

from __future__ import annotations

import dataclasses
import socket
import uuid
from typing import Any

import anyio
from mcp.server.streamable_http import MCP_SESSION_ID_HEADER, StreamableHTTPServerTransport
from starlette.responses import PlainTextResponse
from starlette.types import Receive, Scope, Send

from ..errors import CompactkitError, ConfigError
from .mcp_proxy import ProxyConfig, _log, check_reachable, relay, upstream_streams


class ProxyApp:
    """The ASGI app: routes each request to its session's transport."""

    def __init__(
        self, config: ProxyConfig, path: str = "/mcp", shared_session: str | None = None
    ) -> None:
        self.config = config
        self.path = path
        self.sessions: dict[str, StreamableHTTPServerTransport] = {}
        self.tg: anyio.abc.TaskGroup | None = None
        self.shared_session = shared_session

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            await self._lifespan(receive, send)
            return
        if scope["type"] != "http" or scope["path"].rstrip("/") != self.path.rstrip("/"):
            await PlainTextResponse("not found", status_code=404)(scope, receive, send)
            return
        header = MCP_SESSION_ID_HEADER.encode()
        session_id = next((v.decode() for k, v in scope["headers"] if k == header), None)
        if session_id is not None:
            transport = self.sessions.get(session_id)
            if transport is None:
                await PlainTextResponse("unknown session", status_code=404)(scope, receive, send)
                return
            await transport.handle_request(scope, receive, send)
            return
        if scope["method"] != "POST":
            await PlainTextResponse("no session", status_code=400)(scope, receive, send)
            return
        transport = StreamableHTTPServerTransport(mcp_session_id=uuid.uuid4().hex)
        assert self.tg is not None
        try:
            await self.tg.start(self._run_session, transport)
        except CompactkitError as exc:  # its upstream cannot be started or reached
            _log(f"session {transport.mcp_session_id}: {exc}")
            await PlainTextResponse(f"mcp-proxy: {exc}\n", status_code=502)(scope, receive, send)
            return
        await transport.handle_request(scope, receive, send)

    async def _run_session(
        self,
        transport: StreamableHTTPServerTransport,
        *,
        task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED,
    ) -> None:
        sid = transport.mcp_session_id
        assert sid is not None
        config = dataclasses.replace(self.config, session=self.shared_session or sid)
        started = False
        await check_reachable(config)  # else the first request would get an empty event stream
        try:
            async with upstream_streams(config) as upstream:
                self.sessions[sid] = transport
                try:
                    async with transport.connect() as client:
                        task_status.started()
                        started = True
                        await relay(config, client, upstream)
                finally:
                    self.sessions.pop(sid, None)
                    await transport.terminate()
        except Exception as exc:
            if not started:
                raise  # the request that opened the session says why
            _log(f"session {sid}: {exc}")  # one session's failure never ends the others

    async def _lifespan(self, receive: Receive, send: Send) -> None:
        async with anyio.create_task_group() as tg:
            self.tg = tg
            while True:
                message = await receive()
                if message["type"] == "lifespan.startup":
                    await send({"type": "lifespan.startup.complete"})
                elif message["type"] == "lifespan.shutdown":
                    tg.cancel_scope.cancel()
                    await send({"type": "lifespan.shutdown.complete"})
                    return


async def serve_http(
    config: ProxyConfig,
    host: str,
    port: int,
    path: str = "/mcp",
    shared_session: str | None = None,
) -> None:
    """Serve MCP over streamable HTTP at http://HOST:PORT/PATH in front of the upstream; every
    client session is a serve-state session of its own unless `shared_session` names one."""
    import uvicorn

    try:  # bound here, so an address in use is one line (uvicorn logs a traceback)
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        sock = socket.create_server((host, port), family=family)
    except OSError as exc:
        reason = str(exc.strerror).split(" (while attempting")[0]  # which address: said already
        raise ConfigError(f"cannot listen on {host}:{port}: {reason}") from None
    app: Any = ProxyApp(config, path, shared_session)
    server = uvicorn.Server(uvicorn.Config(app, lifespan="on", log_level="warning"))
    await server.serve(sockets=[sock])
