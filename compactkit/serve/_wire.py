"""The proxy's stdio transports without the SDK's: JSON-RPC lines relayed as the bytes they came as.

The SDK's stdio transports (`stdio_server`, `stdio_client`) parse each line into a message, hand it
through a memory stream to the relay, and dump it again to write it: for a 46 KB file read that is
a parse and a dump on each side of the proxy, and four task hand-offs, for an answer the proxy
changes only in its result. Here each line is parsed once (the SDK's own `JSONRPCMessage`
validator, so what is unreadable is what the SDK finds unreadable) and a message the relay passes
on unchanged is written as the line it came as; only a message the relay builds is dumped.

Both sides offer what the relay expects of the SDK's streams (items to iterate: a `SessionMessage`
or the `Exception` of a line that is not a message; `send` and `aclose`), so the relay runs on
either. The upstream is started as the SDK starts it (`get_default_environment()` merged under the
configured environment, a session of its own, stderr passed through) and stopped as the SDK stops
it (stdin closed, two seconds' grace while its output is drained, then its process group killed).
"""

from __future__ import annotations

import asyncio
import os
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager, suppress
from dataclasses import dataclass
from typing import Any, cast

import anyio
import mcp_types
from mcp.client.stdio import get_default_environment
from mcp.shared.message import SessionMessage

from ._pipes import PipeLines, PipeWriter

_orjson: Any
try:
    import orjson as _orjson
except ImportError:  # pragma: no cover - pydantic dumps what orjson would
    _orjson = None

_LIMIT = 1 << 32  # one line may be a whole file
_CHUNK = 1 << 16

GRACE = 2.0
"""Seconds an upstream has to exit once its stdin is closed, and then once it is terminated."""


@dataclass
class WireMessage(SessionMessage):
    """A message and the bytes to write for it: the line it came as, or a wire dict to dump."""

    raw: bytes | None = None
    data: dict[str, Any] | None = None


def parse(line: bytes) -> SessionMessage | Exception:
    """One line as a message that keeps its bytes, or the error that makes it unreadable."""
    try:
        message = mcp_types.jsonrpc_message_adapter.validate_json(line, by_name=False)
    except ValueError as exc:
        return exc
    return WireMessage(message, raw=line if line.endswith(b"\n") else line + b"\n")


def dump(item: SessionMessage) -> bytes:
    """The line to write for a message: as it came when unchanged, else its JSON."""
    if isinstance(item, WireMessage):
        if item.raw is not None:
            return item.raw
        if item.data is not None and _orjson is not None:
            try:
                return bytes(_orjson.dumps(item.data, option=_orjson.OPT_APPEND_NEWLINE))
            except TypeError:  # an integer past 64 bits, a lone surrogate: pydantic's dump
                pass
    text = item.message.model_dump_json(by_alias=True, exclude_unset=True)
    return text.encode("utf-8") + b"\n"


class LineMessages:
    """Messages (or the errors of unreadable lines) read from an asyncio stream."""

    def __init__(self, reader: asyncio.StreamReader, *, replace: bool) -> None:
        self._reader = reader
        self._replace = replace  # bad UTF-8 replaced (the SDK's server side) or unreadable

    def __aiter__(self) -> LineMessages:
        return self

    async def __anext__(self) -> SessionMessage | Exception:
        try:
            line = await self._reader.readuntil(b"\n")
        except asyncio.IncompleteReadError as end:  # the last line may lack its newline
            if not end.partial:
                raise StopAsyncIteration from None
            line = end.partial
        except asyncio.LimitOverrunError as exc:
            return exc
        if self._replace and not line.isascii():
            line = line.decode("utf-8", errors="replace").encode("utf-8")
        return parse(line)


class PipeSender:
    """`send` of messages to the client's non-blocking descriptor."""

    def __init__(self, pipe: PipeWriter) -> None:
        self._pipe = pipe
        self._closed = False

    async def send(self, item: SessionMessage) -> None:
        if self._closed:
            raise anyio.ClosedResourceError
        try:
            await self._pipe.write_bytes(dump(item))
        except OSError as exc:  # the client closed its end
            raise anyio.BrokenResourceError from exc

    async def aclose(self) -> None:
        self._closed = True


@asynccontextmanager
async def client_streams(
    pipes: tuple[PipeLines, PipeWriter],
) -> AsyncIterator[tuple[LineMessages, PipeSender]]:
    """(messages from, sender to) the client on the proxy's own stdin and stdout: read through an
    asyncio stream (its descriptor watched once, not per read), written straight to the pipe."""
    lines, writer = pipes
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader(limit=_LIMIT, loop=loop)
    pipe = os.fdopen(lines.fd, "rb", buffering=0, closefd=False)  # the descriptor stays ours
    transport, _ = await loop.connect_read_pipe(
        lambda: asyncio.StreamReaderProtocol(reader, loop=loop), pipe
    )
    try:
        yield LineMessages(reader, replace=True), PipeSender(writer)
    finally:
        transport.close()


class _ProcessSender:
    def __init__(self, stdin: asyncio.StreamWriter) -> None:
        self._stdin = stdin

    async def send(self, item: SessionMessage) -> None:
        if self._stdin.is_closing():
            raise anyio.BrokenResourceError
        try:
            self._stdin.write(dump(item))
            await self._stdin.drain()
        except (OSError, RuntimeError) as exc:  # the upstream closed its stdin
            raise anyio.BrokenResourceError from exc

    async def aclose(self) -> None:
        with suppress(OSError, RuntimeError):
            self._stdin.close()


@asynccontextmanager
async def upstream_process(
    command: str, args: list[str], env: dict[str, str] | None, cwd: str | None
) -> AsyncIterator[tuple[LineMessages, _ProcessSender]]:
    """(messages from, sender to) an upstream MCP server started on stdio. Raises `OSError` when it
    cannot be started."""
    process = await asyncio.create_subprocess_exec(
        command,
        *args,
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=sys.stderr,
        env=get_default_environment() | (env or {}),
        cwd=cwd,
        start_new_session=True,
        limit=_LIMIT,
    )
    assert process.stdin is not None and process.stdout is not None
    sender = _ProcessSender(process.stdin)
    try:
        yield LineMessages(process.stdout, replace=False), sender
    finally:
        with anyio.CancelScope(shield=True):
            await _stop(process, sender)


async def _stop(process: asyncio.subprocess.Process, sender: _ProcessSender) -> None:
    """Close the upstream's stdin, give it `GRACE` seconds (its output drained meanwhile, so a
    server blocked writing can exit), then kill its process group."""
    from mcp.os.posix.utilities import terminate_posix_process_tree

    async def drain() -> None:
        assert process.stdout is not None
        with suppress(OSError, asyncio.IncompleteReadError, asyncio.LimitOverrunError):
            while await process.stdout.read(_CHUNK):
                pass

    async with anyio.create_task_group() as tg:
        tg.start_soon(drain)
        await sender.aclose()
        if not await _exited(process, GRACE):
            await terminate_posix_process_tree(cast(Any, process), GRACE)
            await _exited(process, GRACE)
        tg.cancel_scope.cancel()
    # the asyncio transport closed here (as the SDK does), else it warns when collected; not
    # `process.wait()`, which a child of the upstream holding its pipes would never end
    transport = getattr(process, "_transport", None)
    close = getattr(transport, "close", None)
    if callable(close):
        with suppress(PermissionError):
            close()


async def _exited(process: asyncio.subprocess.Process, timeout: float) -> bool:
    """Whether the process exits within `timeout` seconds (its returncode polled: waiting on it
    would also wait for the end of pipes a child of it may hold)."""
    with anyio.move_on_after(timeout):
        while process.returncode is None:
            await anyio.sleep(0.01)
        return True
    return False
