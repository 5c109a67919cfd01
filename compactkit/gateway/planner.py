"""Planner processes: the gateway's reading, planning and compaction of requests, each client's
in a process of its own (`GatewayConfig.processes`).

A compaction is Python work that holds the interpreter: in a thread of the gateway's process, a
2 MB request of 25,000 turns held it for seconds, and every other client's request waited for it
at each of its steps (2.2-2.8x their latency). Planner processes are forked when the gateway
starts; each holds the conversations of the credentials sent to it (a new credential goes to the
next process in turn, so the first `processes` clients never share one) and runs their plans in
its own worker threads, a conversation's requests one at a time. The worker threads run at a
lower priority (`NICE`): the gateway's own process, which only relays bytes, and a planner's
main thread, which plans the requests too small to compact, are served first.

The gateway's process sends a planner the request's body, API, session header and credential tag
(never its headers: keys stay in the gateway's process) and gets back the body to send upstream.
A planner that does not answer within `PLAN_TIMEOUT`, or ends, costs its requests nothing but
their compaction: they go upstream as the client sent them, and the next request starts a fresh
planner (its conversations start over, or resume from `--state`).
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import itertools
import logging
import multiprocessing
import os
import queue
import signal
import threading
from collections import OrderedDict
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from multiprocessing.connection import Connection
from typing import TYPE_CHECKING, Any

from ..errors import BadInputError

if TYPE_CHECKING:
    from .app import Gateway, GatewayConfig, Plan, _Read

Make = Callable[["GatewayConfig"], "Gateway"]
"""What builds a planner's `Gateway` from its config (`Planners` is given it by the app, which
this module never imports at run time)."""

log = logging.getLogger("compactkit.gateway")

NICE = 10
"""How much lower the priority of a planner's worker threads, which compact, is than the
gateway's (`os.nice`)."""
START_TIMEOUT = 60.0
"""Seconds the gateway waits at start-up for its planners to be ready."""
PLAN_TIMEOUT = 120.0
"""Seconds a request waits for its plan; later it goes upstream as the client sent it."""


@dataclass
class Planned:
    """A planner's answer to one request: what to send, and where its conversation lives."""

    stream: bool
    body: bytes | None
    """The body to send upstream; None: the request's own."""
    key: str = ""
    """The request's conversation ('': none)."""
    recall: dict[str, Any] | None = None
    store: dict[str, str] | None = None
    summary: bytes | None = None
    """The summary request to send upstream in the background (`compactkit.gateway.summary`)."""


@dataclass
class Home:
    """Where a plan's conversation lives: the planner process and the conversation's key."""

    planner: int
    key: str


def _plan(gateway: Gateway, held: _Locks, api: Any, raw: bytes, header: Any, owner: str) -> Planned:
    """One request read and planned as the gateway's process would (in a planner's thread)."""
    return _planned(gateway, held, api, raw, gateway._read(api, raw, header, owner))


def _planned(gateway: Gateway, held: _Locks, api: Any, raw: bytes, read: _Read) -> Planned:
    """Request `raw`, read, planned (its conversation held meanwhile): what the gateway's
    process needs of its plan."""
    plan = read.plan
    if plan is None:
        with held.hold(read.key):
            plan = gateway._planned(api, read, raw)
    conv = plan.conversation
    out = Planned(read.stream, None if plan.body is raw else plan.body, conv.key if conv else "")
    out.recall, out.store = plan.recall, plan.store
    if plan.prepare is not None and conv is not None and plan.prompt is not None:
        if held.pool is not None:  # the compaction made beside the summary, as in-process
            held.pool.submit(gateway._compaction, plan.prepare, plan.prompt)
        if not plan.compact_only:
            out.summary = gateway.summary_request(api, plan)
            if out.summary is not None:
                held.prepared[conv.key] = plan
    return out


class _Locks:
    """A lock per conversation being planned (in a planner process), and the summaries asked."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._held: dict[str, tuple[threading.Lock, int]] = {}
        self.prepared: dict[str, Plan] = {}
        """The plans whose summary the gateway's process is asking for, by conversation."""
        self.pool: ThreadPoolExecutor | None = None
        """The planner's worker threads, where a preparation's compaction runs."""

    def busy(self, key: str) -> bool:
        """Whether conversation `key` is being planned (or waits to be)."""
        with self._lock:
            return key in self._held

    @contextlib.contextmanager
    def hold(self, key: str) -> Any:
        with self._lock:
            lock, users = self._held.get(key, (threading.Lock(), 0))
            self._held[key] = (lock, users + 1)
        try:
            with lock:
                yield
        finally:
            with self._lock:
                lock, users = self._held[key]
                if users == 1:
                    del self._held[key]
                else:
                    self._held[key] = (lock, users - 1)


def _serve(conn: Connection, theirs: list[Connection], config: GatewayConfig, make: Make) -> None:
    """A planner process: answer the gateway's messages until its end of the pipe closes (the
    gateway's ends of every planner's pipe, `theirs`, closed here, so that the gateway's exit,
    or its closing of this pipe, ends this process). `make` builds its `Gateway`."""
    for end in theirs:
        end.close()

    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C stops the gateway, which stops us
    try:
        gateway = make(config)
    except BadInputError as exc:  # the --state file the gateway opened is locked now: memory
        log.warning("%s; this planner keeps its conversations in memory only", exc)
        gateway = make(dataclasses.replace(config, state=None))
    held = _Locks()
    sending = threading.Lock()
    pool = ThreadPoolExecutor(
        max_workers=config.workers, thread_name_prefix="compactkit-plan", initializer=_lower
    )
    held.pool = pool
    asked: dict[int, tuple[threading.Event, list[bool]]] = {}
    asking = itertools.count()

    def answer(ident: int, work: Callable[..., Any], *args: Any) -> None:
        try:
            result: Any = work(*args)
        except Exception:  # the gateway's process then sends the request as it came
            result = None
        with sending:
            conn.send(("answer", ident, result))

    def owns(session: str, owner: str) -> bool:
        """The gateway's process says (it sees every credential; this planner only some)."""
        if gateway.policy.served is None:
            return False  # no serve state to reset
        ident, told = next(asking), threading.Event()
        asked[ident] = (told, [])
        with sending:
            conn.send(("owns", ident, session, owner))
        told.wait(PLAN_TIMEOUT)
        _, said = asked.pop(ident)
        return bool(said and said[0])

    gateway.policy.owns = owns
    with sending:
        conn.send(("ready", 0, None))

    while True:
        try:
            message = conn.recv()
        except (EOFError, OSError):
            break
        kind, ident, *args = message
        if kind == "plan" and gateway.small(args[1]):
            # a body too small to compact is read and planned here, at the gateway's priority,
            # unless its conversation is busy in a worker thread
            api, raw, header, owner = args
            read = gateway._read(api, raw, header, owner)
            if read.plan is None and held.busy(read.key):
                pool.submit(answer, ident, _planned, gateway, held, api, raw, read)
            else:
                answer(ident, _planned, gateway, held, api, raw, read)
        elif kind == "plan":
            pool.submit(answer, ident, _plan, gateway, held, *args)
        elif kind == "owned":
            waiting = asked.get(ident)
            if waiting is not None:
                waiting[1].append(args[0])
                waiting[0].set()
        elif kind == "figures":
            answer(ident, gateway.own_figures, *args)
        elif kind == "usage":
            gateway.told(*args)
        elif kind == "summary":
            key, *answered = args
            plan = held.prepared.pop(key, None)
            if plan is not None:
                gateway.summary_answered(plan, *answered)
    pool.shutdown(wait=False, cancel_futures=True)
    gateway.policy.conversations.close()


def _lower() -> None:
    """Lower the calling worker thread's priority by `NICE` (Linux: the thread's alone; other
    systems: the process's)."""
    with contextlib.suppress(OSError):
        os.nice(NICE)


class _Planner:
    """One planner process and its pipe, seen from the gateway's process."""

    def __init__(
        self,
        config: GatewayConfig,
        make: Make,
        others: list[Connection],
        owns: Callable[[str, str], bool],
    ) -> None:
        """A planner forked now (`make`: its `Gateway` from a config; `others`: the gateway's
        ends of the other planners' pipes; `owns`: who may reset a session's serve state,
        asked by the planner)."""
        self.owns = owns
        context = multiprocessing.get_context("fork")  # the registry's plugins come along
        self.conn, child = context.Pipe()
        self.process = context.Process(
            target=_serve,
            args=(child, [self.conn, *others], config, make),
            daemon=True,
            name="compactkit-planner",
        )
        self.process.start()
        child.close()
        self.waiting: dict[int, asyncio.Future[Any]] = {}
        self.ended = False
        self.loop = asyncio.get_running_loop()
        self.ready: asyncio.Future[None] = self.loop.create_future()
        """Done when the planner can plan (or ended)."""
        self.outbox: queue.SimpleQueue[tuple[Any, ...] | None] = queue.SimpleQueue()
        """What to send, written by a thread of its own: a body of megabytes waits for the
        planner to read it, never the event loop."""
        self.reader = threading.Thread(target=self._read, daemon=True, name="compactkit-planned")
        self.reader.start()
        self.writer = threading.Thread(target=self._write, daemon=True, name="compactkit-plan")
        self.writer.start()

    def _read(self) -> None:
        """Hand each answer to the request waiting for it (a thread: `recv` blocks)."""
        while True:
            try:
                kind, ident, *rest = self.conn.recv()
            except (EOFError, OSError):
                break
            if kind == "owns":
                self.send(("owned", ident, self.owns(*rest)))
            elif kind == "ready":
                self._call(self._started)
            else:
                self._call(self._settle, ident, rest[0])
        self._call(self._ended)

    def _call(self, fn: Callable[..., None], *args: Any) -> None:
        """`fn(*args)` on the event loop (nothing once the loop is closed: the gateway ended)."""
        with contextlib.suppress(RuntimeError):
            self.loop.call_soon_threadsafe(fn, *args)

    def _settle(self, ident: int, result: Any) -> None:
        future = self.waiting.pop(ident, None)
        if future is not None and not future.done():
            future.set_result(result)

    def _write(self) -> None:
        while (message := self.outbox.get()) is not None:
            try:
                self.conn.send(message)
            except (OSError, ValueError):
                break  # the planner ended: its reader says so

    def _started(self) -> None:
        if not self.ready.done():
            self.ready.set_result(None)

    def _ended(self) -> None:
        self._started()
        self.ended = True
        for future in self.waiting.values():
            if not future.done():
                future.set_result(None)
        self.waiting.clear()

    def send(self, message: tuple[Any, ...]) -> None:
        self.outbox.put(message)

    def stop(self) -> None:
        self.outbox.put(None)
        self.writer.join(1.0)
        self.conn.close()
        self.process.join(1.0)
        if self.process.is_alive():
            self.process.kill()
            self.process.join(1.0)


class Planners:
    """The planner processes of a gateway (forked by `start`, on its event loop)."""

    def __init__(self, config: GatewayConfig, make: Make, owns: Callable[[str, str], bool]) -> None:
        """`make`: a planner's `Gateway` from a config (in the forked process, with the
        registry and plugins of this one); `owns`: whether a credential may reset a session's
        serve state (the gateway's process decides for every planner)."""
        self.owns = owns
        self.count = config.processes
        self.config = dataclasses.replace(
            config, processes=0, max_memory=max(config.max_memory // config.processes, 1)
        )
        self.make = make
        self._planners: list[_Planner | None] = [None] * self.count
        self._owners: OrderedDict[str, int] = OrderedDict()
        """Which planner holds each credential's conversations (least recently used first)."""
        self._next = itertools.count()
        self._ids = itertools.count()

    async def start(self) -> None:
        """Fork the planners and wait until each can plan (`START_TIMEOUT` at most)."""
        started = [self._planner(n).ready for n in range(self.count)]
        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(asyncio.gather(*started), START_TIMEOUT)

    def close(self) -> None:
        for planner in self._planners:
            if planner is not None:
                planner.stop()
        self._planners = [None] * self.count

    def _planner(self, n: int) -> _Planner:
        planner = self._planners[n]
        if planner is None or planner.ended:
            if planner is not None:
                planner.stop()
            others = [p.conn for p in self._planners if p is not None and p is not planner]
            planner = _Planner(self.config, self.make, others, self.owns)
            self._planners[n] = planner
        return planner

    def of(self, owner: str) -> int:
        """The planner of credential `owner`: a new one goes to the next in turn."""
        n = self._owners.pop(owner, None)
        if n is None:
            n = next(self._next) % self.count
        self._owners[owner] = n
        while len(self._owners) > self.config.max_conversations:
            self._owners.popitem(last=False)
        return n

    async def _ask(self, n: int, message: tuple[Any, ...], timeout: float) -> Any:
        """Planner `n`'s answer to `message` (None: it ended, or did not answer in time)."""
        planner = self._planner(n)
        ident = next(self._ids)
        future: asyncio.Future[Any] = planner.loop.create_future()
        if planner.ended:  # on this loop: else its end settles the future
            return None
        planner.waiting[ident] = future
        planner.send((message[0], ident, *message[1:]))
        try:
            return await asyncio.wait_for(future, timeout)
        except asyncio.TimeoutError:
            planner.waiting.pop(ident, None)
            return None

    async def plan(
        self, api: Any, raw: bytes, header: str | None, owner: str
    ) -> tuple[int, Planned | None]:
        """Request `raw` of credential `owner` planned by its planner (None: it failed)."""
        n = self.of(owner)
        return n, await self._ask(n, ("plan", api, raw, header, owner), PLAN_TIMEOUT)

    async def figures(self, owner: str | None) -> list[dict[str, Any]]:
        """Each planner's figures of `owner`'s conversations (None: everyone's)."""
        asked = [self._ask(n, ("figures", owner), PLAN_TIMEOUT) for n in range(self.count)]
        return [part for part in await asyncio.gather(*asked) if part is not None]

    def tell(self, home: Home, kind: str, *args: Any) -> None:
        """Tell conversation `home` something (its usage, its summary's answer); no answer."""
        planner = self._planners[home.planner]
        if planner is not None and not planner.ended:
            planner.send((kind, 0, home.key, *args))


__all__ = ["PLAN_TIMEOUT", "Home", "Planned", "Planners"]
