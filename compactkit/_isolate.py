"""Running plugin strategies in a worker process that can be stopped, giving untrusted strategies a
private copy of their input, and telling a real Ctrl-C from a `KeyboardInterrupt` raised by
strategy code.

A Python thread cannot be killed, and a strategy stuck in C code never returns to the interpreter,
so a strategy with a timeout runs in a worker process: the caller waits for its result up to the
deadline, then kills the worker's whole process group (SIGKILL) and what it started, and the next
call forks a fresh worker.

The worker is forked once and reused (one per thread of the caller). A fork per call cost 6 to 7
times the in-process time over the corpus bench, and the fork itself was the smaller part: the
child wrote to most pages of the inherited heap as it read the context (reference counts), so the
kernel copied them, then loaded ctypes and walked /proc for what the strategy started, then tore
the copied address space down again. The worker instead holds the messages of its last call (its
input and its output, by slot) and is sent, as a pickle, only the messages it does not hold and
the context's fields that changed; the caller's context never leaves the caller, so nothing the
strategy does can touch it. The strategy is given the held messages themselves, each checked after
the call against a snapshot of what could be changed in place (its attributes, metadata, its
blocks' fields and tool inputs), and copies of the context's dicts: no whole-context copy per
call, which the in-process path pays. Only what the strategy changed travels back: messages it
kept are sent as their index in the input and rebuilt from the caller's own objects, so unchanged
messages keep their identity.

A worker is replaced (the old one stopped) when the call needs a strategy or registry the worker
was not forked with, when the caller's working directory, environment or stdout protection changed
since the fork, after a strategy failed (raised, mutated its input, returned something else, timed
out or ended the worker), and when a strategy left a thread running in it.
"""

from __future__ import annotations

import copy
import operator
import os
import pickle
import select
import signal
import sys
import threading
import time
import weakref
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager, suppress
from types import FrameType
from typing import Any, NoReturn

from ._exitguard import stdout_is_protected, stdout_to_stderr_for_good
from .context import _UTF8 as TEXT_UTF8_KEY
from .context import AgentContext, Message, ToolCallBlock
from .errors import CompactkitError, StrategyError, StrategyTimeout
from .registry import Registry, use_registry
from .tokens import POOL_THREAD_PREFIX

CAN_ISOLATE = hasattr(os, "fork")
"""Whether strategies can run in a worker process here (POSIX); elsewhere timeouts are not
enforced and strategies run in-process."""

_FIELDS = ("system_instruction", "activated_skills", "metadata", "recovery", "pins", "pin_rules")
_KNOWN_AT_MOST = 32
"""Strategies and registries a new worker inherits from the one it replaces, at most."""


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


# --------------------------------------------------------------------------- private copies


def _json_copy(value: Any) -> Any:
    """A copy of a JSON value's mutable containers (strings and numbers are shared)."""
    if isinstance(value, dict):
        return {k: _json_copy(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_json_copy(v) for v in value]
    return value


def _copy_block(block: Any) -> Any:
    # a tool call's parsed input is mutable; every block is copied, frozen or not: a strategy can
    # still set a field in place (`object.__setattr__`), and must not reach the caller's block
    if isinstance(block, ToolCallBlock) and isinstance(block.input, (dict, list)):
        return ToolCallBlock.model_construct(
            id=block.id, name=block.name, input=_json_copy(block.input)
        )
    return copy.copy(block)


def _copy_message(m: Message) -> Message:
    return Message.model_construct(
        role=m.role,
        content=tuple(_copy_block(b) for b in m.content),
        name=m.name,
        metadata=_json_copy(m.metadata),
    )


def private_copy(ctx: AgentContext) -> AgentContext:
    """A copy sharing nothing mutable with `ctx` (dicts, lists and blocks copied; strings shared),
    built without re-validation: far cheaper than a JSON round trip."""
    return AgentContext.model_construct(
        system_instruction=ctx.system_instruction,
        messages=tuple(_copy_message(m) for m in ctx.messages),
        activated_skills=dict(ctx.activated_skills),
        metadata=_json_copy(ctx.metadata),
        recovery=dict(ctx.recovery),
        pins=ctx.pins,
        pin_rules=ctx.pin_rules,
    )


# --------------------------------------------------------------------------- what crosses


def _field_change(held: Any, value: Any) -> tuple[str, Any]:
    """How to turn `held` into `value` on the other side: ("+", entries) when `value` is `held`
    with entries added or replaced (keys in the same order), else ("=", value)."""
    grown = isinstance(held, dict) and isinstance(value, dict) and len(value) >= len(held)
    if grown and all(a == b for a, b in zip(held, value, strict=False)):
        return "+", {k: v for k, v in value.items() if k not in held or held[k] is not v}
    return "=", value


def _apply(held: Any, change: tuple[str, Any]) -> Any:
    how, value = change
    return {**held, **value} if how == "+" else value


def _pack(out: AgentContext, given: AgentContext, current: AgentContext) -> dict[str, Any]:
    """`out` as little as needed to rebuild it from `current`: kept messages by index, new ones
    whole, fields only where they changed."""
    index = {id(m): k for k, m in enumerate(given.messages)}
    index.update((id(m), k) for k, m in enumerate(current.messages))
    messages: list[int | Message] = [index.get(id(m), m) for m in out.messages]
    fields: dict[str, tuple[str, Any]] = {}
    for name in _FIELDS:
        value, before = getattr(out, name), getattr(current, name)
        if value is not before and value != before:
            fields[name] = _field_change(before, value)
    return {"messages": messages, "fields": fields}


def _result(
    strat: Any,
    given: AgentContext,
    current: AgentContext,
    registry: Registry | None,
    mutated: Callable[[AgentContext, AgentContext], bool],
) -> tuple[Any, ...]:
    """What the strategy did, as it crosses back: ("ok", packed output, mutated), ("type",
    returned type's name, mutated), ("exc", its CompactkitError), ("error", ...) or ("raised",
    ...)."""
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
    if not isinstance(out, AgentContext):
        return ("type", type(out).__name__, mutated(given, current))
    return ("ok", _pack(out, given, current), mutated(given, current))


# --------------------------------------------------------------------------- the worker


def _snapshot(m: Message) -> tuple[Any, ...]:
    """What a strategy could change in place in a message (its attributes, its metadata, its
    blocks' fields, its tool calls' inputs), the dicts and lists copied."""
    inputs = tuple(
        (b, _json_copy(b.input))
        for b in m.content
        if isinstance(b, ToolCallBlock) and isinstance(b.input, (dict, list))
    )
    fields = tuple(_fields_of(b) for b in m.content)
    return m.role, m.content, m.name, _json_copy(m.metadata), inputs, fields


def _intact(m: Message, snapshot: tuple[Any, ...]) -> bool:
    role, content, name, metadata, inputs, fields = snapshot
    return (
        m.role is role
        and m.content is content
        and m.name is name
        and m.metadata == metadata
        and all(b.input == value for b, value in inputs)
        and all(_same_fields(b, held) for b, held in zip(content, fields, strict=True))
    )


def _fields_of(block: Any) -> tuple[Any, ...]:
    """The objects a block holds as its fields (a text kept as UTF-8 among them), not the caches
    beside them (token counts, rendered text), which counting may set."""
    held = vars(block)
    return tuple(held.get(name) for name in (*type(block).model_fields, TEXT_UTF8_KEY))


def _same_fields(block: Any, held: tuple[Any, ...]) -> bool:
    """Whether a frozen block still holds the very objects it held (none set in place)."""
    values = _fields_of(block)
    return len(values) == len(held) and all(a is b for a, b in zip(values, held, strict=True))


class _Held:
    """In the worker: the messages (by slot, each with its snapshot) and fields of the last
    call, as the caller has them. A strategy is given the held messages themselves (what it
    could change in them is checked against their snapshots after) and copies of the
    context's dicts: no copy of the whole context per call."""

    def __init__(self) -> None:
        self.messages: dict[int, tuple[Message, tuple[Any, ...]]] = {}
        self.fields: dict[str, Any] = {}
        self.order: list[int] = []
        self.next_out = 0

    def context(self, request: dict[str, Any]) -> AgentContext:
        self.order = request["order"]
        kept = {s: self.messages[s] for s in self.order if s in self.messages}
        kept.update((s, (m, _snapshot(m))) for s, m in request["new"].items())
        self.messages = kept
        for name, change in request["fields"].items():
            self.fields[name] = _apply(self.fields.get(name), change)
        return AgentContext.model_construct(
            messages=tuple(kept[s][0] for s in self.order), **self.fields
        )

    def mutated(self, given: AgentContext, current: AgentContext) -> bool:
        """Whether the strategy changed a held message or one of the context's dicts it got."""
        return (
            given.activated_skills != current.activated_skills
            or given.metadata != current.metadata
            or given.recovery != current.recovery
            or not all(_intact(*self.messages[s]) for s in self.order)
        )

    def keep_output(self, packed: dict[str, Any], current: AgentContext) -> None:
        """Hold the output too (a copy, as it was sent): the next call's input is often it."""
        for m in packed["messages"]:
            if isinstance(m, Message):
                self.next_out -= 1
                copy = _copy_message(m)
                self.messages[self.next_out] = (copy, _snapshot(copy))
        for name, change in packed["fields"].items():
            self.fields[name] = _json_copy(_apply(getattr(current, name), change))


def _given(current: AgentContext) -> AgentContext:
    """What the strategy gets: the held messages, copies of the context's dicts."""
    return AgentContext.model_construct(
        system_instruction=current.system_instruction,
        messages=current.messages,
        activated_skills=dict(current.activated_skills),
        metadata=_json_copy(current.metadata),
        recovery=dict(current.recovery),
        pins=current.pins,
        pin_rules=current.pin_rules,
    )


def _serve(read: int, write: int, known: dict[int, Any], parent: int) -> None:
    """The worker: answer requests until the caller closes the pipe or a call leaves it unfit."""
    os.setpgid(0, 0)  # its own group: killing it takes what it started along
    _die_with(parent)
    stdout_to_stderr_for_good()  # the caller's stdout carries its results
    _subreaper()
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the caller's to handle
    signal.signal(signal.SIGTERM, signal.SIG_DFL)  # never the caller's cleanup handlers
    held = _Held()
    while True:
        request = _read_request(read)
        if request is None:
            return
        current = held.context(request)
        given = _given(current)
        strat, registry = known[request["strategy"]], known[request["registry"]]
        result = _result(strat, given, current, registry, held.mutated)
        _reap_own()  # nothing the strategy started outlives it (nor holds the result pipe open)
        fit = result[0] == "ok" and not result[2] and not _threads_left()
        if fit:
            held.keep_output(result[1], current)
        try:
            data = pickle.dumps((result, fit), protocol=pickle.HIGHEST_PROTOCOL)
        except Exception as exc:
            fit = False
            error = ("raised", type(exc).__name__, f"result cannot be sent back: {exc}")
            data = pickle.dumps((error, fit))
        for stream in (sys.stdout, sys.stderr):
            with suppress(Exception):
                stream.flush()
        _write_all(write, len(data).to_bytes(8, "little") + data)
        if not fit:
            return


def _threads_left() -> bool:
    """Whether a thread the strategy started still runs (compactkit's own counting pool, which
    a strategy's token counts start, is not one)."""
    return any(
        t is not threading.current_thread() and not t.name.startswith(POOL_THREAD_PREFIX)
        for t in threading.enumerate()
    )


def _read_request(read: int) -> Any:
    """The next request (blocking), None once the caller closed its end."""
    header = _read_exactly(read, 8)
    if header is None:
        return None
    data = _read_exactly(read, int.from_bytes(header, "little"))
    return None if data is None else pickle.loads(data)


def _read_exactly(read: int, size: int) -> bytes | None:
    chunks: list[bytes] = []
    while size:
        chunk = os.read(read, min(size, 1 << 20))
        if not chunk:
            return None
        chunks.append(chunk)
        size -= len(chunk)
    return b"".join(chunks)


def _write_all(write: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(write, view) :]


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
    """In the worker: end what the strategy started and collect it (orphans of its own children
    come back to it, a subreaper), for at most a second. A strategy that started nothing costs
    one `waitpid`."""
    deadline = time.monotonic() + 1.0
    while time.monotonic() < deadline:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return  # nothing started, or nothing left
        if pid == 0:
            _kill_descendants(os.getpid())
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


def _fit() -> tuple[Any, ...]:
    """What a worker inherited at its fork that a later call must still find the same."""
    try:
        cwd = os.getcwd()
    except OSError:
        cwd = ""
    return cwd, hash(frozenset(os.environ.items())), stdout_is_protected()


_open: set[int] = set()
"""The caller's ends of every worker's pipes, closed in a new worker (not its to hold)."""
_forking = threading.Lock()


def _worker(
    known: dict[int, Any], owner: int, ends: tuple[int, int], others: tuple[int, int]
) -> NoReturn:
    """A new worker's life, from the fork to its exit."""
    global _forking
    _forking = threading.Lock()  # the caller's is held, by a thread this process does not have
    code = 0
    try:
        for fd in (*others, *_open):
            with suppress(OSError):
                os.close(fd)
        _open.clear()
        _serve(*ends, known, owner)
    except BaseException:
        code = 70
    finally:
        os._exit(code)


class _Worker:
    """The caller's side of one worker process: its pipes, the objects it inherited (strategies
    and registries, by id, held here so that no other object takes their id), and what it holds
    of the last call (messages by slot, fields)."""

    def __init__(self, known: dict[int, Any]) -> None:
        self.known = known
        self.fit = _fit()
        self.owner = os.getpid()
        self.sent: dict[int, tuple[int, Message]] = {}
        self.fields: dict[str, Any] = {}
        self.next_slot = 0
        self.next_out = 0
        for stream in (sys.stdout, sys.stderr):  # else the worker would print the caller's buffer
            with suppress(Exception):
                stream.flush()
        with _forking:  # no other thread's worker inherits this one's pipes half-made
            request_read, request_write = os.pipe()
            reply_read, reply_write = os.pipe()
            pid = os.fork()
            if pid == 0:  # the worker: never returns into the caller's code
                _worker(known, self.owner, (request_read, reply_write), (request_write, reply_read))
            os.close(request_read)
            os.close(reply_write)
            _open.update((request_write, reply_read))
        os.set_blocking(request_write, False)
        os.set_blocking(reply_read, False)
        self.pid, self.write, self.read = pid, request_write, reply_read
        self._stop = weakref.finalize(self, _stop, pid, (request_write, reply_read), self.owner)

    def knows(self, objects: Iterable[Any]) -> bool:
        return all(id(o) in self.known and self.known[id(o)] is o for o in objects)

    def alive(self) -> bool:
        try:
            return os.waitpid(self.pid, os.WNOHANG)[0] == 0
        except ChildProcessError:
            return False

    def request(self, strat: Any, registry: Registry | None, current: AgentContext) -> bytes:
        """The call, with only what the worker does not hold yet; what it will hold is noted."""
        sent: dict[int, tuple[int, Message]] = {}
        new: dict[int, Message] = {}
        order: list[int] = []
        for m in current.messages:
            entry = self.sent.get(id(m)) or sent.get(id(m))
            if entry is None:
                entry = (self.next_slot, m)
                new[self.next_slot] = m
                self.next_slot += 1
            sent[id(m)] = entry
            order.append(entry[0])
        self.sent = sent
        fields: dict[str, tuple[str, Any]] = {}
        for name in _FIELDS:
            value = getattr(current, name)
            if name not in self.fields:
                fields[name] = ("=", value)
            elif value is not self.fields[name]:
                fields[name] = _field_change(self.fields[name], value)
            self.fields[name] = value
        request = {
            "strategy": id(strat),
            "registry": id(registry),
            "new": new,
            "order": order,
            "fields": fields,
        }
        data = pickle.dumps(request, protocol=pickle.HIGHEST_PROTOCOL)
        return len(data).to_bytes(8, "little") + data

    def send(self, data: bytes, deadline: float) -> bool:
        """Write the request; False at the deadline."""
        view = memoryview(data)
        while view:
            left = deadline - time.monotonic()
            if left <= 0:
                return False
            _, ready, _ = select.select([], [self.write], [], left)
            if not ready:
                continue
            try:
                view = view[os.write(self.write, view) :]
            except BlockingIOError:
                continue
            except BrokenPipeError:  # it ended: `receive` finds no reply
                break
        return True

    def receive(self, deadline: float) -> bytes | None:
        """The reply; None at the deadline; b"" when the worker ended without one."""
        data = bytearray()
        size: int | None = None
        while size is None or len(data) < size + 8:
            left = deadline - time.monotonic()
            if left <= 0:
                return None
            ready, _, _ = select.select([self.read], [], [], left)
            if not ready:
                continue
            try:
                chunk = os.read(self.read, 1 << 20)
            except BlockingIOError:
                continue
            if not chunk:
                return b""
            data += chunk
            if size is None and len(data) >= 8:
                size = int.from_bytes(data[:8], "little")
        return bytes(data[8:])

    def unpack(self, packed: dict[str, Any], current: AgentContext) -> AgentContext:
        """The output from what crossed back, holding its new messages as the worker does."""
        messages: list[Message] = []
        for m in packed["messages"]:
            if isinstance(m, int):
                messages.append(current.messages[m])
                continue
            self.next_out -= 1
            self.sent[id(m)] = (self.next_out, m)
            messages.append(m)
        fields = packed["fields"]
        same = len(messages) == len(current.messages)
        if not fields and same and all(map(operator.is_, messages, current.messages)):
            return current  # the strategy changed nothing
        values = {name: getattr(current, name) for name in _FIELDS}
        for name, change in fields.items():
            values[name] = self.fields[name] = _apply(values[name], change)
        return AgentContext.model_construct(messages=tuple(messages), **values)

    def stop(self, grace: float = 0.0) -> int | None:
        """Kill it and what it started (after up to `grace` seconds for it to end by itself); its
        wait status (None when it was collected already)."""
        self._stop.detach()
        return _stop(self.pid, (self.write, self.read), self.owner, grace)


def _stop(pid: int, fds: tuple[int, ...], owner: int, grace: float = 0.0) -> int | None:
    if os.getpid() != owner:  # a forked copy of the caller: the worker is not its to stop
        return None
    _open.difference_update(fds)  # before the numbers are given to new pipes
    for fd in fds:
        with suppress(OSError):
            os.close(fd)
    deadline = time.monotonic() + grace
    while True:
        try:
            ended, status = os.waitpid(pid, os.WNOHANG)
        except ChildProcessError:
            return None
        if ended:  # what it started is orphaned now: what is left of its group goes
            with suppress(OSError):
                os.killpg(pid, signal.SIGKILL)
            return status
        if time.monotonic() >= deadline:
            break
        time.sleep(0.001)
    _kill_descendants(pid)  # what it started, in sessions of their own too
    _kill(pid)
    try:
        return os.waitpid(pid, 0)[1]
    except ChildProcessError:
        return None


_local = threading.local()


def _worker_for(needed: Sequence[Any]) -> _Worker:
    """This thread's worker, forked anew when it is gone, unfit or lacks one of `needed`."""
    worker: _Worker | None = getattr(_local, "worker", None)
    known: dict[int, Any] = {}
    if worker is not None and worker.owner != os.getpid():
        worker._stop.detach()  # inherited through a fork: the parent's, not ours
        worker = None
    if worker is not None:
        if worker.knows(needed) and worker.fit == _fit() and worker.alive():
            return worker
        known = worker.known if len(worker.known) < _KNOWN_AT_MOST else {}
        worker.stop()
    known = {**known, **{id(o): o for o in needed}}
    _local.worker = worker = _Worker(known)
    return worker


def _retire(worker: _Worker, grace: float = 0.0) -> int | None:
    if getattr(_local, "worker", None) is worker:
        _local.worker = None
    return worker.stop(grace)


def run_isolated(
    strat: Any,
    current: AgentContext,
    *,
    timeout: float,
    registry: Registry | None = None,
    siblings: Sequence[Any] = (),
) -> tuple[Any, bool]:
    """`strat.compact` on a private copy of `current` in this thread's worker process, stopped
    after `timeout` seconds: (the output, or a non-context placeholder, and whether the strategy
    mutated its input). `siblings`: the other strategies of its pipeline, which the worker then
    inherits too. Raises `StrategyTimeout` when it ran too long, `StrategyError` when it raised
    or ended its process, the strategy's own `CompactkitError` type when it raised one."""
    worker = _worker_for([strat, *siblings, registry])
    try:
        request = worker.request(strat, registry, current)  # (a failure here: out of step)
        deadline = time.monotonic() + timeout
        data = worker.receive(deadline) if worker.send(request, deadline) else None
        if data is None:
            raise StrategyTimeout(
                f"strategy {strat.name!r} did not finish within {timeout:g} s and was stopped "
                "(the plugin time limit: --timeout; the gateway's --strategy-timeout)"
            )
    except BaseException:
        _retire(worker)
        raise
    try:
        result, fit = pickle.loads(data) if data else (None, False)
    except Exception:
        result, fit = None, False
    # a worker that ended by itself (no result) is given a moment to, for its true status
    status = None if fit else _retire(worker, 0.0 if result else 1.0)
    if isinstance(result, tuple) and result and result[0] == "ok" and not result[2]:
        return worker.unpack(result[1], current), False
    return _outcome(strat, result, status)


def _outcome(strat: Any, result: Any, status: int | None) -> tuple[Any, bool]:
    """A failed call's outcome: raised, or a placeholder the pipeline reports."""
    name = strat.name
    if not isinstance(result, tuple) or not result:
        how = "" if status is None else f" ({_status(status)})"
        raise StrategyError(f"strategy {name!r} failed: its process ended without a result{how}")
    kind = result[0]
    if kind == "ok":  # it mutated its input: the pipeline says so
        return Returned("AgentContext"), True
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
    """Stands for a non-context value a strategy returned in the worker (only its type travels)."""

    def __init__(self, type_name: str) -> None:
        self.type_name = type_name
