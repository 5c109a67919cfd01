"""`compactkit mcp-proxy`: an MCP server on stdio in front of another MCP server, serving its tool
results through a `ServeState` so a repeat of an unchanged result is a one-line marker.

Built on the official `mcp` SDK (`compactkit[mcp]`): its JSON-RPC and result types parse what
passes between client and upstream. The proxy relays messages rather than terminating the protocol
on each side: the client's `initialize` reaches the upstream and the upstream's answer (name,
version, capabilities, instructions, protocol version) reaches the client, so anything the proxy
does not change (resources, prompts, completions, progress and log notifications, requests the
upstream sends the client such as roots or sampling) passes through as it was sent. On stdio (the
proxy's own, and an upstream it starts) lines are relayed as bytes (`compactkit.serve._wire`):
each is parsed once, and one the proxy does not change is written as it came; over streamable
HTTP, and on a terminal or on Windows, the SDK's transports carry the same relay.

What it changes: `tools/list` answers get an optional `refresh` boolean argument on each tool (a
tool that already takes `refresh` keeps its own); `tools/call` answers that are one text part go
through the serve state (`compactkit.serve.mcp_tools`: a tool's `outputSchema` is kept, and its
`structuredContent` is the marker object only where that conforms to the schema). Per call, `_meta`
may carry `compactkit/known` (etags the model holds: a restarted proxy does not resend them) and
`compactkit/skip` (true, or field names: omit, record as served); both are removed before the call
goes upstream. Each served result carries `_meta["compactkit/serve"]` (etag, field etags, full or
not). A client notification `notifications/compactkit/compacted` (params `{"etags": [...]}`, or
none: everything) says what a compaction removed, so it is sent in full next time; it is not
forwarded.

Upstream protocol errors, timeouts, malformed results and an upstream that dies become MCP errors
on the request that met them (and on every later one, once the upstream is gone); a tool result
marked `isError` and any result that is not one text part pass through unchanged.
"""

from __future__ import annotations

import sys
import uuid
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, AsyncExitStack, asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

import anyio
from mcp import StdioServerParameters, stdio_client, types
from mcp.server.stdio import stdio_server
from mcp.shared.message import SessionMessage
from pydantic import ValidationError

from ..errors import BadInputError, redact
from ._pipes import event_loop_stdio
from ._wire import WireMessage, client_streams, upstream_process
from .mcp_tools import (
    AGAIN,
    COMPACTED,
    META_KNOWN,
    META_SERVE,
    META_SKIP,
    REFRESH,
    REFRESH_SCHEMA,
    BadMeta,
    ToolCall,
    ToolServing,
)
from .store import MemoryServeStore, ServeStore

__all__ = [
    "AGAIN",
    "COMPACTED",
    "META_KNOWN",
    "META_SERVE",
    "META_SKIP",
    "REFRESH",
    "REFRESH_SCHEMA",
    "ProxyConfig",
    "relay",
    "run_proxy",
    "upstream_streams",
]

UPSTREAM_ERROR = -32000


@dataclass
class ProxyConfig:
    """What `run_proxy` needs: the upstream (a command line, or the URL of a streamable HTTP
    server) and where serve state lives."""

    command: str = ""
    args: list[str] = field(default_factory=list)
    store: ServeStore = field(default_factory=MemoryServeStore)
    session: str = field(default_factory=lambda: uuid.uuid4().hex)
    """Serve-state session id (a fresh one per proxy process unless given)."""
    timeout: float = 60.0
    """Seconds to wait for the upstream's answer to one request."""
    startup_timeout: float = 30.0
    env: dict[str, str] | None = None
    cwd: str | None = None
    url: str | None = None
    """A remote MCP server's streamable HTTP endpoint, used instead of `command`."""


@dataclass
class _Pending:
    """A client request forwarded upstream and not yet answered."""

    what: str  # "tools/call NAME", "tools/list", ... as errors name it
    wait: float  # seconds the upstream has to answer it
    deadline: float = 0.0  # when that is up (event-loop time)
    call: ToolCall | None = None


def _error(msg_id: types.RequestId, code: int, message: str, data: Any = None) -> SessionMessage:
    error = types.ErrorData(code=code, message=message, data=data)
    return SessionMessage(types.JSONRPCError(jsonrpc="2.0", id=msg_id, error=error))


def _first_error(exc: ValidationError) -> str:
    errors = exc.errors()
    return str(errors[0]["msg"]) if errors else str(exc)


class _Relay:
    """Both directions of one proxied connection."""

    def __init__(self, config: ProxyConfig, to_client: Any, to_upstream: Any) -> None:
        self.config = config
        self.to_client = to_client
        self.to_upstream = to_upstream
        self.pending: dict[types.RequestId, _Pending] = {}
        self.serving = ToolServing(config.store)
        self.gone = False  # the upstream closed its side
        # one timer for every open request (`expire`), not a task each: it sleeps until the
        # earliest deadline, woken early only by a request due before that
        self._timer_at = 0.0
        self._wake = anyio.Event()

    # ------------------------------------------------------------------ client -> upstream

    async def from_client(self, item: SessionMessage) -> None:
        message = item.message
        if isinstance(message, types.JSONRPCNotification):
            if message.method == COMPACTED:
                self.serving.compacted(message.params, self.config.session)
                return
            if message.method == "notifications/cancelled":
                self.pending.pop((message.params or {}).get("requestId"), None)  # type: ignore[arg-type]  # any JSON value; a miss is None
            await self._upstream(item)
            return
        if not isinstance(message, types.JSONRPCRequest):
            await self._upstream(item)  # the client's answer to a request from the upstream
            return
        wait = (
            self.config.startup_timeout if message.method == "initialize" else self.config.timeout
        )
        pending = _Pending(message.method, wait)
        if message.method == "tools/call":
            try:
                item, pending = self._call(item, message, pending)
            except BadMeta as exc:
                await self.send_client(
                    _error(message.id, types.INVALID_PARAMS, f"{pending.what}: {exc}")
                )
                return
        if self.gone:
            await self.send_client(
                _error(
                    message.id,
                    types.CONNECTION_CLOSED,
                    f"upstream {pending.what}: connection closed",
                )
            )
            return
        pending.deadline = anyio.current_time() + wait
        self.pending[message.id] = pending
        if pending.deadline < self._timer_at:
            self._wake.set()
        await self._upstream(item)

    def _call(
        self, item: SessionMessage, message: types.JSONRPCRequest, pending: _Pending
    ) -> tuple[SessionMessage, _Pending]:
        """A tools/call with `refresh` and compactkit's `_meta` keys taken out, and what its answer
        needs to be served."""
        taken = self.serving.call(message.params or {}, self.config.session)
        if taken is None:
            return item, pending  # the upstream answers a malformed call as it sees fit
        params, call = taken
        pending.what = f"tools/call {call.tool}"
        for earlier in self.pending.values():
            if earlier.call is not None and earlier.call.key == call.key:
                earlier.call.superseded = True
        pending.call = call
        if params == message.params:
            return item, pending  # nothing of compactkit's to take out: the line as it came
        request = types.JSONRPCRequest(
            jsonrpc="2.0", id=message.id, method=message.method, params=params
        )
        return SessionMessage(request), pending

    async def _upstream(self, item: SessionMessage) -> None:
        try:
            await self.to_upstream.send(item)
        except (anyio.ClosedResourceError, anyio.BrokenResourceError):
            await self.upstream_gone()

    async def expire(self) -> None:
        """Fail each request the upstream has not answered by its deadline, and tell the upstream
        it is cancelled; runs until the relay ends."""
        while True:
            now = anyio.current_time()
            for msg_id, pending in list(self.pending.items()):
                if pending.deadline <= now and self.pending.get(msg_id) is pending:
                    del self.pending[msg_id]
                    await self._expired(msg_id, pending)
            now = anyio.current_time()
            deadlines = [p.deadline for p in self.pending.values()]
            self._timer_at = min(deadlines) if deadlines else now + self.config.timeout
            self._wake = anyio.Event()
            with anyio.move_on_after(max(0.0, self._timer_at - now)):
                await self._wake.wait()

    async def _expired(self, msg_id: types.RequestId, pending: _Pending) -> None:
        await self.send_client(
            _error(
                msg_id,
                types.REQUEST_TIMEOUT,
                f"upstream {pending.what}: no answer in {pending.wait:g}s",
            )
        )
        note = types.JSONRPCNotification(
            jsonrpc="2.0",
            method="notifications/cancelled",
            params={"requestId": msg_id, "reason": "no answer in time"},
        )
        await self._upstream(SessionMessage(note))

    async def send_client(self, message: SessionMessage) -> bool:
        """Send to the client; False when it has gone (its side of the stream is closed)."""
        try:
            await self.to_client.send(message)
        except (anyio.ClosedResourceError, anyio.BrokenResourceError):
            return False
        return True

    # ------------------------------------------------------------------ upstream -> client

    async def from_upstream(self, item: SessionMessage) -> None:
        message = item.message
        if isinstance(message, types.JSONRPCRequest | types.JSONRPCNotification):
            await self.send_client(item)
            return
        msg_id = message.id
        pending = self.pending.pop(msg_id, None) if msg_id is not None else None
        if msg_id is None or pending is None:
            return  # the answer to a request that timed out or was cancelled, or to none
        if isinstance(message, types.JSONRPCError):
            err = message.error
            await self.send_client(
                _error(msg_id, err.code, f"upstream {pending.what}: {err.message}", err.data)
            )
            return
        if pending.what != "tools/list" and pending.call is None:
            await self.send_client(item)  # an answer the proxy does not change
            return
        try:
            result, record = self._answer(message.result, pending)
        except ValidationError as exc:
            await self.send_client(
                _error(
                    msg_id,
                    UPSTREAM_ERROR,
                    f"upstream {pending.what}: malformed result ({_first_error(exc)})",
                )
            )
            return
        answer = WireMessage(
            types.JSONRPCResponse(jsonrpc="2.0", id=msg_id, result=result),
            data={"jsonrpc": "2.0", "id": msg_id, "result": result},
        )
        if await self.send_client(answer) and record is not None:
            self.serving.guarded(record)  # held by the client only once it is on its way to it

    def _answer(
        self, result: dict[str, Any], pending: _Pending
    ) -> tuple[dict[str, Any], Callable[[], Any] | None]:
        """The answer to send, and what records it as served once sent (if anything)."""
        if pending.what == "tools/list":
            types.ListToolsResult.model_validate(result)
            return self.serving.tools(result), None
        assert pending.call is not None
        types.CallToolResult.model_validate(result)
        return self.serving.answer(result, pending.call)

    async def upstream_gone(self) -> None:
        """Every open request fails now, and every later one at once."""
        self.gone = True
        for msg_id, pending in list(self.pending.items()):
            del self.pending[msg_id]
            await self.send_client(
                _error(
                    msg_id, types.CONNECTION_CLOSED, f"upstream {pending.what}: connection closed"
                )
            )


@asynccontextmanager
async def upstream_streams(config: ProxyConfig) -> AsyncIterator[tuple[Any, Any]]:
    """(read, write) streams of the upstream server, started (or connected to, by URL)."""
    if config.url is not None:
        from mcp.client.streamable_http import streamable_http_client

        try:
            async with streamable_http_client(config.url) as streams:
                yield streams[0], streams[1]
        except Exception as exc:
            reason = _http_failure(exc)
            if reason is None:
                raise
            raise _unreachable(config.url, reason) from exc
        return
    started: AbstractAsyncContextManager[tuple[Any, Any]]
    async with AsyncExitStack() as stack:
        try:
            if sys.platform == "win32":  # the SDK's transport (a job object holds the server)
                params = StdioServerParameters(
                    command=config.command, args=list(config.args), env=config.env, cwd=config.cwd
                )
                started = stdio_client(params, errlog=sys.stderr)
            else:
                started = upstream_process(
                    config.command, list(config.args), config.env, config.cwd
                )
            pipes = await stack.enter_async_context(started)
        except OSError as exc:
            raise BadInputError(
                f"cannot start the upstream MCP server {config.command!r}: {exc}",
                hint="check the command after --",
            ) from exc
        yield pipes


async def check_reachable(config: ProxyConfig) -> None:
    """Raise the error `upstream_streams` would when the upstream URL (if any) does not answer an
    HTTP request: the SDK's client connects only with the first message, and a failure there ends
    the connection rather than answering that message. Any HTTP answer (a 400 or 405 to the GET a
    streamable HTTP endpoint may refuse without a session) counts as reachable."""
    if config.url is None:
        return
    import httpx2
    from mcp.shared._httpx_utils import create_mcp_http_client  # the transport's own client

    timeout = httpx2.Timeout(config.startup_timeout)
    try:
        async with (
            create_mcp_http_client(timeout=timeout) as client,
            client.stream("GET", config.url, headers={"accept": "text/event-stream"}),
        ):
            pass  # the status line came: something answers there
    except Exception as exc:
        reason = _http_failure(exc)
        if reason is None:
            raise
        raise _unreachable(config.url, reason) from exc


def _unreachable(url: str, reason: str) -> BadInputError:
    """The error for an upstream URL that cannot be reached (credentials in it masked)."""
    return BadInputError(  # the URL masked alone: a query's masked value ends at no colon
        f"cannot reach the upstream MCP server at {redact(url)}: {redact(reason)}",
        hint="check --url",
    )


def _http_failure(exc: BaseException) -> str | None:
    """What went wrong on the way to an upstream URL (the HTTP client's error, found inside the
    exception groups its task groups raise), else None."""
    inner = getattr(exc, "exceptions", None)
    if isinstance(inner, tuple):
        return next((r for e in inner if (r := _http_failure(e)) is not None), None)
    # httpx's or the SDK's fork of it (httpx2): the same error tree
    http = any(
        c.__name__ == "HTTPError" and c.__module__.startswith("httpx") for c in type(exc).__mro__
    )
    return f"{type(exc).__name__}: {exc}" if http else None


async def relay(config: ProxyConfig, client: tuple[Any, Any], upstream: tuple[Any, Any]) -> None:
    """Relay between the client's and the upstream's (read, write) streams until the client
    leaves."""
    client_read, client_write = client
    up_read, up_write = upstream
    proxy = _Relay(config, client_write, up_write)
    async with anyio.create_task_group() as tg:

        async def downstream() -> None:
            async for item in up_read:
                if isinstance(item, Exception):
                    _log(f"unreadable message from the upstream: {item}")
                    continue
                try:
                    await proxy.from_upstream(item)
                except Exception as exc:  # one answer never ends the proxy: it fails alone
                    _log(f"cannot relay an upstream message: {type(exc).__name__}: {exc}")
                    msg_id = getattr(item.message, "id", None)
                    if msg_id is not None and not isinstance(item.message, types.JSONRPCRequest):
                        await proxy.send_client(
                            _error(msg_id, types.INTERNAL_ERROR, f"mcp-proxy: {exc}")
                        )
            await proxy.upstream_gone()

        tg.start_soon(downstream)
        tg.start_soon(proxy.expire)
        async for item in client_read:
            if isinstance(item, Exception):
                _log(f"unreadable message from the client: {item}")
                continue
            try:
                await proxy.from_client(item)
            except Exception as exc:  # one message never ends the proxy: it fails alone
                _log(f"cannot relay a client message: {type(exc).__name__}: {exc}")
                if isinstance(item.message, types.JSONRPCRequest):
                    await proxy.send_client(
                        _error(item.message.id, types.INTERNAL_ERROR, f"mcp-proxy: {exc}")
                    )
        tg.cancel_scope.cancel()  # the client left: stop the timers and the upstream
    await client_write.aclose()  # and the transport's writer, so the proxy exits


def _log(line: str) -> None:
    print(f"compactkit mcp-proxy: {line}", file=sys.stderr)


async def run_proxy(config: ProxyConfig, streams: tuple[Any, Any] | None = None) -> None:
    """Serve MCP on stdio (or on `streams`) in front of the upstream until the client leaves."""
    async with upstream_streams(config) as upstream:
        if streams is not None:
            await relay(config, streams, upstream)
            return
        with event_loop_stdio() as pipes:
            if pipes is not None:
                async with client_streams(pipes) as client:
                    await relay(config, client, upstream)
                return
            async with stdio_server() as client:  # a terminal or a file: the SDK's transport
                await relay(config, client, upstream)
