"""The gateway's HTTP connections with a header read timeout.

uvicorn's protocols (h11 or httptools) wait for a request's line and headers as long as the client
takes to send them, and an open connection that sends nothing is never closed: a client sending
its headers a byte at a time holds a connection, and its memory, for ever. `timed_protocol` gives
each request `timeout` seconds from its first byte (from the connection's opening, for the first
request) to the end of its headers; a slower client is answered 408 and its connection closed. The
body has its own timeout, in the app (`GatewayConfig.read_timeout`).
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

from uvicorn.protocols.http.auto import AutoHTTPProtocol

_MESSAGE = "compactkit gateway: request headers not received within {:g} s"


def _answer(timeout: float) -> bytes:
    """A 408 in Anthropic's error shape (the API is not known before the headers are)."""
    error = {"type": "timeout_error", "message": _MESSAGE.format(timeout)}
    body = json.dumps({"type": "error", "error": error}).encode()
    head = (
        "HTTP/1.1 408 Request Timeout\r\ncontent-type: application/json\r\n"
        f"content-length: {len(body)}\r\nconnection: close\r\n\r\n"
    )
    return head.encode() + body


def timed_protocol(timeout: float) -> type[asyncio.Protocol]:
    """uvicorn's HTTP protocol (its `http=`) whose requests' headers must arrive within `timeout`
    seconds."""
    answer = _answer(timeout)

    class TimedProtocol(AutoHTTPProtocol):  # type: ignore[misc,valid-type]
        _timer: asyncio.TimerHandle | None = None

        def connection_made(self, transport: Any) -> None:
            super().connection_made(transport)
            self._arm()

        def data_received(self, data: bytes) -> None:
            cycle = self.cycle
            if self._timer is None and (cycle is None or cycle.response_complete):
                self._arm()  # the first bytes of a request on a kept-alive connection
            super().data_received(data)
            if self.cycle is not cycle:  # its headers are in: the request has begun
                self._disarm()

        def connection_lost(self, exc: Exception | None) -> None:
            self._disarm()
            super().connection_lost(exc)

        def _arm(self) -> None:
            self._disarm()
            self._timer = self.loop.call_later(timeout, self._expired)

        def _disarm(self) -> None:
            if self._timer is not None:
                self._timer.cancel()
                self._timer = None

        def _expired(self) -> None:
            self._timer = None
            if not self.transport.is_closing():
                self.transport.write(answer)
                self.transport.close()

    return TimedProtocol


__all__ = ["timed_protocol"]
