"""The proxy's own stdin and stdout as non-blocking pipes on the event loop.

The SDK's `stdio_server()` reads every line and writes every message through a worker thread
(`anyio.wrap_file`): three thread hand-offs per call, which on a busy machine cost more than the
proxy's own work. `stdio_server(stdin, stdout)` takes any object that iterates lines and has
`write`/`flush`, so when both standard streams are pipes or sockets (as an MCP client starts a
server) the proxy hands it these instead: reads and writes wait on the descriptor in the event loop.

As the SDK does, fd 0 and fd 1 are diverted while serving (to the null device and to stderr), so a
stray print or a child that inherits them cannot corrupt the wire, and restored afterwards.
"""

from __future__ import annotations

import fcntl
import os
import stat
from collections.abc import Iterator
from contextlib import contextmanager, suppress

import anyio

_CHUNK = 1 << 16


def _is_pipe(fd: int) -> bool:
    try:
        mode = os.fstat(fd).st_mode
    except OSError:
        return False
    return stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode)


class PipeLines:
    """Lines (decoded as UTF-8, errors replaced, newline kept) read from a non-blocking descriptor."""

    def __init__(self, fd: int) -> None:
        self.fd = fd
        self._buf = bytearray()
        self._searched = 0  # bytes of _buf known to hold no newline

    def __aiter__(self) -> PipeLines:
        return self

    async def __anext__(self) -> str:
        while True:
            end = self._buf.find(b"\n", self._searched)
            if end >= 0:
                line = bytes(self._buf[: end + 1])
                del self._buf[: end + 1]
                self._searched = 0
                return line.decode("utf-8", errors="replace")
            self._searched = len(self._buf)
            try:
                chunk = os.read(self.fd, _CHUNK)
            except BlockingIOError:
                await anyio.wait_readable(self.fd)
                continue
            if not chunk:
                if not self._buf:
                    raise StopAsyncIteration
                rest = bytes(self._buf)
                self._buf.clear()
                self._searched = 0
                return rest.decode("utf-8", errors="replace")
            self._buf += chunk


class PipeWriter:
    """`write` and `flush` on a non-blocking descriptor. Concurrent writers never interleave: a
    write the pipe takes at once returns without yielding, and one it cannot take whole holds
    the others back until it is all written."""

    def __init__(self, fd: int) -> None:
        self.fd = fd
        self._lock = anyio.Lock()

    async def write(self, text: str) -> None:
        await self.write_bytes(text.encode("utf-8"))

    async def write_bytes(self, data: bytes) -> None:
        view = memoryview(data)
        if not self._lock.locked():
            with suppress(BlockingIOError):
                view = view[os.write(self.fd, view) :]
            if not view:
                return
        async with self._lock:
            while view:
                try:
                    written = os.write(self.fd, view)
                except BlockingIOError:
                    await anyio.wait_writable(self.fd)
                    continue
                view = view[written:]

    async def flush(self) -> None:
        """Writes go straight to the descriptor: nothing is buffered."""


@contextmanager
def event_loop_stdio() -> Iterator[tuple[PipeLines, PipeWriter] | None]:
    """(stdin lines, stdout writer) on private duplicates of fd 0 and 1 while they are diverted,
    or None when either is not a pipe or socket (a terminal or a file: the SDK's default then)."""
    if not (_is_pipe(0) and _is_pipe(1)):
        yield None
        return
    wire_in = fcntl.fcntl(0, fcntl.F_DUPFD_CLOEXEC, 3)
    wire_out = fcntl.fcntl(1, fcntl.F_DUPFD_CLOEXEC, 3)
    saved_in, saved_out = os.dup(0), os.dup(1)
    null = os.open(os.devnull, os.O_RDONLY)
    try:
        os.dup2(null, 0)
        os.dup2(2, 1)
        os.set_blocking(wire_in, False)
        os.set_blocking(wire_out, False)
        yield PipeLines(wire_in), PipeWriter(wire_out)
    finally:
        os.close(null)
        for fd in (wire_in, wire_out):
            os.set_blocking(fd, True)  # the pipe's description is shared with whoever holds it next
            os.close(fd)
        os.dup2(saved_in, 0)
        os.dup2(saved_out, 1)
        os.close(saved_in)
        os.close(saved_out)
