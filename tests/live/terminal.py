"""An agent CLI's interactive terminal UI, driven through a pseudo-terminal as a user would: type a
prompt, press keys, wait for text on the screen or for a file the agent's tools write.

Some session records are only written by the interactive UI: the feedback a user types when
rejecting a tool call ("the user said: ..."), a turn interrupted with Esc, `/compact` typed at the
prompt. `Terminal` runs the CLI under a pty (120x50), keeps everything it printed and compares
screen text with whitespace removed (the UI moves the cursor instead of printing spaces).
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import pty
import re
import select
import signal
import struct
import termios
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

# CSI, OSC and the short escape sequences a terminal UI prints
_ANSI = re.compile(
    r"\x1b\[[0-9;?<>=]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)|\x1b[=>()][0-9A-Za-z]?|\x1b[78DEMc]"
)

KEYS = {
    "enter": b"\r",
    "esc": b"\x1b",
    "tab": b"\t",
    "down": b"\x1b[B",
    "up": b"\x1b[A",
    "ctrl-c": b"\x03",
}


_QUERIES = {
    b"\x1b[6n": b"\x1b[1;1R",  # DSR: where is the cursor? (row 1, column 1)
    b"\x1b[c": b"\x1b[?62;22c",  # DA1: which terminal? (a VT220 with colour)
}


class TerminalError(AssertionError):
    """What the test waited for did not show: the message ends with the screen's last lines."""


def _flat(text: str) -> str:
    return "".join(text.split())


class Terminal:
    """A program under a pseudo-terminal; use as a context manager (it is ended on exit)."""

    def __init__(
        self,
        args: Sequence[str],
        env: Mapping[str, str],
        cwd: Path,
        size: tuple[int, int] = (50, 120),
    ) -> None:
        self.args = list(args)
        pid, fd = pty.fork()
        if pid == 0:  # the child: the program, in its own session with the pty as its terminal
            try:
                os.chdir(cwd)
                os.execve(self.args[0], self.args, dict(env))
            finally:
                os._exit(127)
        self.pid, self.fd = pid, fd
        rows, cols = size
        fcntl.ioctl(fd, termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols, 0, 0))
        self.raw = b""
        self.returncode: int | None = None

    # reading
    def pump(self, seconds: float = 0.2) -> None:
        """Read what the program prints for `seconds` (less if it exits)."""
        end = time.monotonic() + seconds
        while self.returncode is None:
            ready, _, _ = select.select([self.fd], [], [], max(0.0, end - time.monotonic()))
            if not ready:
                return
            try:
                data = os.read(self.fd, 65536)
            except OSError:  # the program closed the terminal
                data = b""
            if not data:
                self._reap(block=True)
                return
            self.raw += data
            self._answer_queries(data)

    def _answer_queries(self, data: bytes) -> None:
        """Reply as a terminal does to what a full-screen UI asks at start (a UI that gets no
        answer waits): the cursor position and the device attributes."""
        for query, reply in _QUERIES.items():
            for _ in range(data.count(query)):
                os.write(self.fd, reply)

    @property
    def text(self) -> str:
        """Everything printed so far, escape sequences removed."""
        return _ANSI.sub("", self.raw.decode("utf-8", "replace"))

    def mark(self) -> int:
        """A position in the output: `wait_for(..., since=mark)` looks only at what follows."""
        return len(_flat(self.text))

    def tail(self, chars: int = 1500) -> str:
        return self.text[-chars:]

    def wait_for(self, text: str, *, since: int = 0, timeout: float = 60) -> int:
        """Wait until `text` shows (whitespace ignored) after the `since` mark; the mark just
        after it."""
        wanted = _flat(text)
        self.wait_until(lambda: wanted in _flat(self.text)[since:], f"{text!r} on screen", timeout)
        return _flat(self.text).index(wanted, since) + len(wanted)

    def wait_until(self, condition: Callable[[], bool], what: str, timeout: float = 60) -> None:
        end = time.monotonic() + timeout
        while not condition():
            if time.monotonic() > end or self.returncode is not None:
                state = "exited" if self.returncode is not None else f"not after {timeout} s"
                raise TerminalError(f"waited for {what}: {state}\nscreen tail:\n{self.tail()}")
            self.pump(0.2)

    # writing
    def type(self, text: str) -> None:
        """Type `text` (no Enter), then let the UI draw it."""
        os.write(self.fd, text.encode())
        self.pump(0.5)

    def press(self, *keys: str) -> None:
        """Press keys by name (`KEYS`), each followed by a short pause so the UI sees them apart."""
        for key in keys:
            os.write(self.fd, KEYS[key])
            self.pump(0.4)

    def submit(self, text: str) -> None:
        """Type a prompt and press Enter."""
        self.type(text)
        self.press("enter")

    # ending
    def _reap(self, block: bool) -> None:
        if self.returncode is not None:
            return
        pid, status = os.waitpid(self.pid, 0 if block else os.WNOHANG)
        if pid:
            self.returncode = os.waitstatus_to_exitcode(status)

    def close(self, keys: Sequence[str] = ("ctrl-c", "ctrl-c"), timeout: float = 10) -> int:
        """End the program as a user does (Ctrl-C twice by default); killed with its process
        group if it is still running after `timeout`. Returns the exit code."""
        if self.returncode is None:
            for key in keys:
                try:
                    os.write(self.fd, KEYS[key])
                except OSError:
                    break
                self.pump(0.4)
            end = time.monotonic() + timeout
            while self.returncode is None and time.monotonic() < end:
                self.pump(0.2)
                self._reap(block=False)
            if self.returncode is None:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(self.pid, signal.SIGKILL)
                self._reap(block=True)
        with contextlib.suppress(OSError):
            os.close(self.fd)
        assert self.returncode is not None
        return self.returncode

    def __enter__(self) -> Terminal:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
