"""Running one plugin strategy in a child process that can be stopped, and telling a real Ctrl-C
from a `KeyboardInterrupt` raised by strategy code.

A Python thread cannot be killed, and a strategy stuck in C code never returns to the interpreter,
so a strategy with a timeout runs in a forked child: the parent waits for its result up to the
deadline, then kills the child's whole process group (SIGKILL). Only what the strategy changed
travels back: messages it kept are sent as their index in the input and rebuilt from the caller's
own objects, so unchanged messages keep their identity.
"""

from __future__ import annotations

import os
import pickle
import select
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from types import FrameType
from typing import Any

from ._exitguard import stdout_to_stderr_for_good
from .context import AgentContext, Message
from .errors import CompactkitError, StrategyError, StrategyTimeout
from .registry import Registry, use_registry

CAN_ISOLATE = hasattr(os, "fork")
"""Whether strategies can run in a child process here (POSIX); elsewhere timeouts are not
enforced and strategies run in-process."""

_FIELDS = ("system_instruction", "activated_skills", "metadata", "recovery", "pins", "pin_rules")


class InterruptWatch:
    """Inside `watch_interrupts`: whether a real SIGINT or SIGTERM reached this process."""

    def __init__(self) -> None:
        self.signalled = False


@contextmanager
def watch_interrupts() -> Iterator[InterruptWatch]:
    """Record real SIGINTs (and SIGTERMs, when a handler of the program turns them into an
    exception) while the body runs, then do what the handler in place would have done. Signals
    are delivered to the main thread only, so elsewhere nothing is installed. An exception seen
    inside while `signalled` is False (a `KeyboardInterrupt` included) was raised by code."""
    watch = InterruptWatch()
    installed: list[tuple[int, Any]] = []
    if threading.current_thread() is threading.main_thread():
        for signum in (signal.SIGINT, signal.SIGTERM):
            previous = signal.getsignal(signum)
            if signum == signal.SIGTERM and not callable(previous):
                continue  # the default action ends the process: nothing to tell apart
            try:
                signal.signal(signum, _recorder(watch, previous))
            except (ValueError, OSError):  # not the main interpreter
                continue
            installed.append((signum, previous))
    try:
        yield watch
    finally:
        for signum, previous in reversed(installed):
            signal.signal(signum, previous)


def _recorder(watch: InterruptWatch, previous: Any) -> Callable[[int, FrameType | None], None]:
    def handler(signum: int, frame: FrameType | None) -> None:
        if previous == signal.SIG_IGN:
            return
        watch.signalled = True
        if callable(previous):
            previous(signum, frame)
        else:
            raise KeyboardInterrupt

    return handler


def _pack(out: AgentContext, given: AgentContext, current: AgentContext) -> dict[str, Any]:
    """`out` as little as needed to rebuild it from `current`: kept messages by index."""
    index = {id(m): k for k, m in enumerate(given.messages)}
    index.update((id(m), k) for k, m in enumerate(current.messages))
    messages: list[int | Message] = [index.get(id(m), m) for m in out.messages]
    fields: dict[str, Any] = {}
    for name in _FIELDS:
        value = getattr(out, name)
        if value != getattr(current, name):
            fields[name] = value
    return {"messages": messages, "fields": fields}


def _unpack(packed: dict[str, Any], current: AgentContext) -> AgentContext:
    messages = tuple(current.messages[m] if isinstance(m, int) else m for m in packed["messages"])
    fields = {name: getattr(current, name) for name in _FIELDS}
    fields.update(packed["fields"])
    return AgentContext.model_construct(messages=messages, **fields)


def _child_result(
    strat: Any,
    given: AgentContext,
    current: AgentContext,
    guarded: bool,
    registry: Registry | None,
) -> tuple[Any, ...]:
    try:
        with use_registry(registry):
            out = strat.compact(given)
    except CompactkitError as exc:
        try:
            pickle.loads(pickle.dumps(exc))
            return ("exc", exc)
        except Exception:
            return ("error", type(exc).__name__, str(exc), exc.exit_code)
    except BaseException as exc:
        return ("raised", type(exc).__name__, str(exc))
    mutated = guarded and given != current
    if not isinstance(out, AgentContext):
        return ("type", type(out).__name__, mutated)
    return ("ok", _pack(out, given, current), mutated)


def _die_with(parent: int) -> None:
    """Have the kernel kill this child when the parent dies (Linux), so that a parent killed
    outright (SIGKILL) leaves no strategy running on; elsewhere the parent's own handling of
    errors and signals kills it."""
    if sys.platform.startswith("linux"):
        try:
            import ctypes

            libc = ctypes.CDLL(None, use_errno=True)
            libc.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
        except (OSError, AttributeError):
            pass
    if os.getppid() != parent:  # the parent died before the request took effect
        os._exit(1)


def _child(
    write: int,
    strat: Any,
    given: AgentContext,
    current: AgentContext,
    guarded: bool,
    registry: Registry | None,
    parent: int,
) -> None:
    os.setpgid(0, 0)  # its own group: killing it takes what it started along
    _die_with(parent)
    stdout_to_stderr_for_good()  # the caller's stdout carries its results
    _subreaper()
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the parent's to handle
    signal.signal(signal.SIGTERM, signal.SIG_DFL)  # never the parent's cleanup handlers
    result = _child_result(strat, given, current, guarded, registry)
    _reap_own()  # nothing the strategy started outlives it (nor holds the result pipe open)
    try:
        data = pickle.dumps(result, protocol=pickle.HIGHEST_PROTOCOL)
    except Exception as exc:
        data = pickle.dumps(("raised", type(exc).__name__, f"result cannot be sent back: {exc}"))
    for stream in (sys.stdout, sys.stderr):
        with suppress(Exception):
            stream.flush()
    view = memoryview(data)
    while view:
        view = view[os.write(write, view) :]


def _descendants(root: int) -> list[int]:
    """Every process below `root` (Linux: from /proc; elsewhere none known), deepest last."""
    children: dict[int, list[int]] = {}
    try:
        entries = os.listdir("/proc")
    except OSError:
        return []
    for name in entries:
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as handle:
                stat = handle.read()
        except OSError:
            continue
        fields = stat[stat.rfind(b")") + 2 :].split()
        if len(fields) > 1:
            children.setdefault(int(fields[1]), []).append(int(name))
    found: list[int] = []
    queue = list(children.get(root, ()))
    while queue:
        pid = queue.pop()
        found.append(pid)
        queue.extend(children.get(pid, ()))
    return found


def _kill_descendants(root: int) -> None:
    """SIGKILL whatever `root` started, sessions of their own (`setsid`) included."""
    for pid in _descendants(root):
        with suppress(OSError):
            os.kill(pid, signal.SIGKILL)


def _reap_own() -> None:
    """In the child: end what the strategy started and collect it (orphans of its own children
    come back to it, a subreaper), for at most a second."""
    deadline = time.monotonic() + 1.0
    while time.monotonic() < deadline:
        _kill_descendants(os.getpid())
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return  # nothing left
        if pid == 0:
            time.sleep(0.002)


def _subreaper() -> None:
    """Linux: orphans of what this process starts come back to it (not to init), so that a
    `setsid` or double-forked grandchild can still be found and ended."""
    if sys.platform.startswith("linux"):
        try:
            import ctypes

            ctypes.CDLL(None, use_errno=True).prctl(36, 1)  # PR_SET_CHILD_SUBREAPER
        except (OSError, AttributeError):
            pass


def _kill(pid: int) -> None:
    for kill in (os.killpg, os.kill):
        try:
            kill(pid, signal.SIGKILL)
            break
        except OSError:
            continue


def _read(read: int, deadline: float) -> bytes | None:
    """Everything the child writes until it closes the pipe; None at the deadline."""
    chunks: list[bytes] = []
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            return None
        ready, _, _ = select.select([read], [], [], left)
        if not ready:
            continue
        chunk = os.read(read, 1 << 20)
        if not chunk:
            return b"".join(chunks)
        chunks.append(chunk)


def run_in_child(
    strat: Any,
    given: AgentContext,
    current: AgentContext,
    *,
    guarded: bool,
    timeout: float,
    registry: Registry | None = None,
) -> tuple[Any, bool]:
    """`strat.compact(given)` in a forked child stopped after `timeout` seconds: (the output, or a
    non-context placeholder, and whether the strategy mutated `given`). Raises `StrategyTimeout`
    when it ran too long, `StrategyError` when it raised or died, the strategy's own
    `CompactkitError` type when it raised one."""
    for stream in (sys.stdout, sys.stderr):  # else the child would print the parent's buffer
        with suppress(Exception):
            stream.flush()
    read, write = os.pipe()
    parent = os.getpid()
    pid = os.fork()
    if pid == 0:  # the child: never returns into the caller's code
        code = 0
        try:
            os.close(read)
            _child(write, strat, given, current, guarded, registry, parent)
        except BaseException:
            code = 70
        finally:
            os._exit(code)
    os.close(write)
    status: int | None = None
    try:
        data = _read(read, time.monotonic() + timeout)
        if data is None:
            raise StrategyTimeout(
                f"strategy {strat.name!r} did not finish within {timeout:g} s and was stopped "
                "(see --timeout)"
            )
    except BaseException:
        _kill_descendants(pid)  # what it started, in sessions of their own too
        _kill(pid)
        raise
    finally:
        os.close(read)
        with suppress(ChildProcessError):
            status = os.waitpid(pid, 0)[1]
    try:
        result = pickle.loads(data) if data else None
    except Exception:
        result = None
    return _outcome(strat, result, status, current)


def _outcome(
    strat: Any, result: Any, status: int | None, current: AgentContext
) -> tuple[Any, bool]:
    name = strat.name
    if not isinstance(result, tuple) or not result:
        how = "" if status is None else f" ({_status(status)})"
        raise StrategyError(f"strategy {name!r} failed: its process ended without a result{how}")
    kind = result[0]
    if kind == "ok":
        return _unpack(result[1], current), bool(result[2])
    if kind == "type":
        return Returned(result[1]), bool(result[2])
    if kind == "exc" and isinstance(result[1], CompactkitError):
        raise result[1]
    if kind == "error":
        error = CompactkitError(result[2])
        error.exit_code = int(result[3])
        raise error
    raise StrategyError(f"strategy {name!r} failed: {result[1]}: {result[2]}".splitlines()[0])


def _status(status: int) -> str:
    if os.WIFSIGNALED(status):
        return f"killed by signal {os.WTERMSIG(status)}"
    return f"exit status {os.WEXITSTATUS(status)}"


class Returned:
    """Stands for a non-context value a strategy returned in the child (only its type travels)."""

    def __init__(self, type_name: str) -> None:
        self.type_name = type_name
