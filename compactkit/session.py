"""`Session`: an agent loop's context as a value that grows, compacts itself when it passes a
trigger, reports what it does to observers, and persists as an append-only log.

```python
import compactkit

session = compactkit.Session(trigger=30_000, target=15_000)
session.append(compactkit.message("user", "Fix the failing test in tests/test_io.py"))
session.compact_if_needed()      # nothing to do yet: costs a comparison
prompt = session.context         # the AgentContext to send to the model
```

Counting is incremental: each appended message is counted once (counts are cached per block), so a
call that does not compact costs only what was appended; one that compacts costs what the pipeline
costs. The log (`save`, `load`) has one line per append, compaction and restore, each written with
one `write` and fsync'd; see `compactkit.formats.session_log` for its records.
"""

from __future__ import annotations

import contextlib
import copy
import json
import os
import warnings
import weakref
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, TypeAlias

try:
    import fcntl
except ImportError:  # pragma: no cover - Windows has no flock
    fcntl = None  # type: ignore[assignment]

from .arrival import folded_savings
from .atomic import write_atomic
from .context import AgentContext, Message
from .defaults import DEFAULT_TRIGGER
from .errors import BadInputError, ConfigError, SessionLogBusy, redact_json
from .events import EventBus, MessagesAppended, Observer, SessionCompacted, SessionRestored
from .formats.session_log import (
    append_record,
    appended,
    chained,
    compact_record,
    digest,
    end_record,
    line,
    replay,
    restore_record,
    start_record,
)
from .pins import with_rules
from .pipeline import Pipeline, RunResult, build_pipeline, copy_pipeline
from .policy import CompactionPolicy, PolicyName, prefix_tokens, unfolded_tokens
from .policy import floor as policy_floor
from .registry import Registry, get_counter, use_registry
from .serve.reset import served_session
from .serve.store import ServeStore
from .spec import PipelineSpec, one_pipeline
from .strategy import Strategy
from .tokens import DEFAULT_TOKENIZER, TokenCounter

PipelineArg: TypeAlias = (
    "str | Sequence[str] | PipelineSpec | Strategy | Callable[[AgentContext], AgentContext]"
)
"""`"default"`, strategy specs in the spec language (`"sliding-window:max_tokens=8000"`,
`compactkit.spec`), a `PipelineSpec`, or a strategy or pipeline."""


class Session:
    """The context of a running agent: `append`, `compact_if_needed`, `context`.

    - `context`: the `AgentContext` to start from (default: empty).
    - `pipeline`: `"default"` (the cache-aware default pipeline: etag-collapse, then old turns
      summarized and a sliding window, both at `target`), strategy specs built with
      `build_pipeline(specs, budget=target)`, a `PipelineSpec` (its budget, else `target`), or
      any strategy or `Pipeline` (used as it is).
    - `trigger`: compact when the context is over this many tokens (default 30,000).
    - `target`: the budget a compaction aims for (default half the trigger), so the next
      compaction is far away and the prompt prefix stays cached between them.
    - `policy`: when `compact_if_needed` keeps a compaction (`compactkit.policy`): `"pays"` (the
      default: only one that pays for itself under `pricing`, never on two calls in a row, and
      never so that the session costs more than 1.05x what sending everything would have),
      `"always"` (whenever over the trigger), or a `CompactionPolicy`.
    - `pricing`: the pricing profiles a compaction must pay under (`"anthropic"`, `"openai"`).
    - `tokenizer`, `registry`: how tokens are counted and where strategies are looked up.
    - `pins`: user pin rules (`tool=TodoWrite`, `path=**/CLAUDE.md`, ... see `compactkit.pins`),
      added to the context so they travel with it (and with its log); the user's words, the task,
      the last request and a pending call are always pinned.
    - `serve_state`, `serve_session`: a serve-state store (or the SQLite file `compactkit
      mcp-proxy --state` names) and the session its tool server serves under: what a compaction
      or a `restore` takes from the context is forgotten there, so the next read of it is sent
      in full (`compactkit.serve.reset`). Give both or neither.

    Observers (`subscribe`) get `MessagesAppended`, the pipeline's events, `SessionCompacted` and
    `SessionRestored`. A session is not thread-safe: one agent loop drives it.
    """

    def __init__(
        self,
        context: AgentContext | None = None,
        *,
        pipeline: PipelineArg = "default",
        trigger: int = DEFAULT_TRIGGER,
        target: int | None = None,
        tokenizer: str = DEFAULT_TOKENIZER,
        registry: Registry | None = None,
        pins: Sequence[str] = (),
        serve_state: ServeStore | str | Path | None = None,
        serve_session: str | None = None,
        policy: PolicyName | CompactionPolicy = "pays",
        pricing: Sequence[str] = ("anthropic", "openai"),
    ) -> None:
        setup = CompactionSetup.of("session", pipeline, trigger, target, tokenizer, registry)
        if not isinstance(policy, CompactionPolicy):
            policy = CompactionPolicy.of(trigger, target=setup.target, pricing=pricing, mode=policy)
        self.policy = policy
        self._served = served_session(serve_state, serve_session)
        self.trigger, self.target = trigger, setup.target
        self.tokenizer = tokenizer
        self.registry = registry
        self._specs = setup.specs
        self.pipeline = setup.pipeline
        self._bus = EventBus()
        self.pipeline.subscribe(self._bus.emit)
        self._counter: TokenCounter = setup.counter
        self._context = with_rules(context if context is not None else AgentContext(), pins)
        self._tokens = self._counter.context(self._context)
        self._ledger = policy.ledger()
        self._raw = self._tokens
        """Tokens the context would have with nothing ever compacted (what the policy weighs)."""
        self._unfolded = folded_savings(self._context, self._counter)
        """Tokens arrival took off the messages of the context: they do not put a compaction off
        (`compactkit.policy`): what it took off the messages appended since the last compaction,
        and what the built-in folders took off those the compaction kept (`folded_savings`)."""
        self._sent: AgentContext | None = None
        self._sent_tokens = 0
        self._appended_only = False
        self._log: _Log | None = None

    # ----------------------------------------------------------------- the value

    @property
    def context(self) -> AgentContext:
        """The context as it is now: what the model is sent."""
        return self._context

    @property
    def tokens(self) -> int:
        """Tokens of `context` (kept up to date incrementally)."""
        return self._tokens

    def append(self, *messages: Message | dict[str, Any]) -> AgentContext:
        """Add messages at the end (each counted once); returns the new context. The pipeline's
        arrival strategies (`Pipeline.arrive`) run on each one first, once; the log keeps the
        messages as given and what arrival made of them."""
        new = [m if isinstance(m, Message) else Message.model_validate(m) for m in messages]
        if not new:
            return self._context
        before = self._context
        grown = self.pipeline.arrive(before, new) if self.pipeline.arrival else None
        arrived = list(grown.messages[len(before.messages) :]) if grown is not None else new
        added = sum(self._counter.messages(arrived))
        if self._log is not None:
            self._log.write(append_record(new, before, grown))
        self._context = appended(before, new) if grown is None else grown
        self._tokens += added
        self._raw += added if grown is None else sum(self._counter.messages(new))
        self._unfolded += 0 if grown is None else unfolded_tokens(new, arrived, self._counter)
        if self._sent is not None:  # the model's answers to the last call: its output
            answers = [m for m in new if m.role == "assistant"]
            self._ledger.output(sum(self._counter.messages(answers)) if answers else 0)
        self._bus.emit(MessagesAppended(len(new), added, self._tokens, len(self._context.messages)))
        return self._context

    def compact_if_needed(self) -> RunResult | None:
        """Call before each model call: run the pipeline when the context is over the trigger
        and the policy says a compaction is due, and keep its output when it pays for itself;
        None when nothing was compacted.

        Should a compaction end above the target still (the task and the user's words alone
        are that big), the next one waits until the context has grown by `trigger - target`
        above what it had to keep, so the pipeline never runs on every call."""
        ledger = self._ledger
        before_tokens = self._tokens
        cached = self._cached(self._context)
        result: RunResult | None = None
        if ledger.due(before_tokens + self._unfolded):
            candidate = self.pipeline.run(self._context, self._counter)
            if candidate.context is not self._context:
                after = candidate.context
                held = ledger.judge(
                    before_tokens,
                    cached,
                    candidate.tokens_after,
                    self._cached(after),
                    raw=self._raw,
                    floor=policy_floor(after, self._counter),
                )
                if held is None:
                    result = self._adopt(candidate)
            else:
                ledger.unchanged(before_tokens)
        sent = self._tokens
        ledger.record(sent, self._cached(self._context), raw=self._raw, compacted=bool(result))
        self._sent, self._sent_tokens, self._appended_only = self._context, sent, True
        return result

    def _cached(self, ctx: AgentContext) -> int:
        """Tokens of `ctx` the provider reads from its cache: the prefix it shares with the
        last prompt sent (all of it while the session only appended since)."""
        if self._sent is None:
            return 0
        if ctx is self._context and self._appended_only:
            return self._sent_tokens
        return prefix_tokens(self._sent, ctx, self._counter)

    def compact(self) -> RunResult:
        """Run the pipeline now, whatever the policy says. A failure raises and leaves the
        context as it was."""
        return self._adopt(self.pipeline.run(self._context, self._counter))

    def _adopt(self, result: RunResult) -> RunResult:
        """Make a compaction's output the context (logged, served state told, observed)."""
        before = self._context
        after = result.context
        if self._served is not None:
            self._served.forget(before, after)
        if self._log is not None and after is not before:
            self._log.write(
                compact_record(
                    before, after, tokens_before=result.tokens_before, tokens=result.tokens_after
                )
            )
        self._context = after
        self._tokens = result.tokens_after
        self._unfolded = folded_savings(after, self._counter)
        self._appended_only = False
        self._bus.emit(
            SessionCompacted(
                pipeline=self.pipeline.title,
                trigger=self.trigger,
                target=self.target,
                tokens_before=result.tokens_before,
                tokens_after=result.tokens_after,
                messages_before=len(before.messages),
                messages_after=len(after.messages),
                seconds=result.seconds,
            )
        )
        return result

    # ----------------------------------------------------------------- snapshots

    def snapshot(self) -> AgentContext:
        """The context now; free, since contexts never change. Give it to `restore` later."""
        return self._context

    def restore(self, snapshot: AgentContext) -> None:
        """Go back to a snapshot (logged, when the session is saved)."""
        if self._served is not None:
            self._served.forget(self._context, snapshot)
        if self._log is not None:
            self._log.write(restore_record(snapshot))
        self._context = snapshot
        self._tokens = self._counter.context(snapshot)
        self._raw = max(self._raw, self._tokens)
        self._unfolded = folded_savings(snapshot, self._counter)
        self._ledger = self.policy.ledger()
        self._sent, self._appended_only = None, False
        self._bus.emit(SessionRestored(self._tokens, len(snapshot.messages)))

    def fork(self) -> Session:
        """A new session from the context now, with the same options, no observers and no log."""
        twin = Session.__new__(Session)
        twin.__dict__.update(self.__dict__)
        twin._bus = EventBus()
        twin.pipeline = _copy_pipeline(self.pipeline)
        twin.pipeline.subscribe(twin._bus.emit)
        twin._ledger = copy.deepcopy(self._ledger)
        twin._log = None
        return twin

    # ----------------------------------------------------------------- observers

    def subscribe(self, observer: Observer) -> Callable[[], None]:
        """Receive every event of this session; returns the function that unsubscribes."""
        return self._bus.subscribe(observer)

    # ----------------------------------------------------------------- persistence

    def save(self, path: str | Path) -> None:
        """Write the session to `path` as a new log (atomically) and keep appending to it.

        The log never holds a secret: pipeline specs go through `redact`, and when that masked a
        credential (`base_url=http://user:pass@...`) the log says so, and `load` asks for the
        pipeline again."""
        specs = redact_json(self._specs)
        options = {
            "trigger": self.trigger,
            "target": self.target,
            "pipeline": specs,
            "tokenizer": self.tokenizer,
        }
        if specs != self._specs:
            options[_REDACTED] = True
        self.close()
        file = Path(path)
        if file.exists():  # never replace a log another Session is writing
            _Log.open(file).release()
        start = line(start_record(self._context, options))
        write_atomic(file, start)
        _sync_directory(file)
        log = _Log.open(file)
        log.resume(digest(start), 1)
        self._log = log

    @classmethod
    def load(
        cls,
        path: str | Path,
        *,
        pipeline: PipelineArg | None = None,
        trigger: int | None = None,
        target: int | None = None,
        tokenizer: str | None = None,
        registry: Registry | None = None,
        serve_state: ServeStore | str | Path | None = None,
        serve_session: str | None = None,
    ) -> Session:
        """Resume the session a log holds and keep appending to it. Options not given are the ones
        the log was saved with (a pipeline given as an object must be given again, else the default
        is used; `serve_state` and `serve_session` are never saved). A torn last line (a crash
        during a write) is dropped with a warning."""
        served = served_session(serve_state, serve_session)
        file = Path(path)
        log = _Log.open(file)  # locked first: no other writer can move the log under us
        try:
            session = cls._resume(log, pipeline, trigger, target, tokenizer, registry)
        except BaseException:
            log.release()
            raise
        session._log = log
        session._served = served
        return session

    @classmethod
    def _resume(
        cls,
        log: _Log,
        pipeline: PipelineArg | None,
        trigger: int | None,
        target: int | None,
        tokenizer: str | None,
        registry: Registry | None,
    ) -> Session:
        file = log.path
        records, good, torn = _read_log(log.fd, file)
        state = replay(records, str(file))
        if torn:
            warnings.warn(
                f"{file}: ignored a torn last line of {torn} bytes (a write interrupted by a "
                "crash); resuming from the line before it",
                RuntimeWarning,
                stacklevel=3,
            )
        if not state.chained:
            warnings.warn(
                f"{file}: written by an older compactkit without a hash chain: lines edited or "
                "removed in it cannot be detected (records appended from now on are chained; "
                "Session.save to a new path starts a fully chained log)",
                RuntimeWarning,
                stacklevel=3,
            )
        elif not state.ended:
            warnings.warn(
                f"{file}: the log was not closed (its writer was killed, or the file was cut "
                f"after line {len(records)}): every record up to there is intact, but whether "
                "records came after it cannot be checked",
                RuntimeWarning,
                stacklevel=3,
            )
        saved = state.options
        if saved.get(_REDACTED) and pipeline is None:
            raise ConfigError(
                f"{file}: the log's pipeline held credentials, which are never written to it; "
                "give the pipeline again: Session.load(path, pipeline=[...])"
            )
        session = cls(
            state.state,
            pipeline=pipeline if pipeline is not None else (saved.get("pipeline") or "default"),
            trigger=trigger
            if trigger is not None
            else (_saved_count(file, saved, "trigger", DEFAULT_TRIGGER) or DEFAULT_TRIGGER),
            target=target if target is not None else _saved_count(file, saved, "target", None),
            tokenizer=tokenizer or saved.get("tokenizer") or DEFAULT_TOKENIZER,
            registry=registry,
        )
        session._unfolded = folded_savings(state.settled, session._counter) + sum(
            unfolded_tokens(given, made, session._counter) for given, made in state.arrivals
        )  # what arrival took off: as the last compaction left it, and since
        # the next line must not be glued to a torn one, and the end record goes: it is
        # written again, with the new count, when this session closes
        end = good - len(line(records[-1]).encode("utf-8")) if state.ended else good
        if end != good or torn:
            os.truncate(log.fd, end)
            os.fsync(log.fd)
        records_before = len(records) - (1 if state.ended else 0)
        log.resume(state.head if not state.ended else _head_before_end(records), records_before)
        return session

    @property
    def path(self) -> Path | None:
        """The log this session appends to (None until `save` or `load`)."""
        return None if self._log is None else self._log.path

    def close(self) -> None:
        """Stop writing to the log (a session is closed when it is garbage-collected, too)."""
        if self._log is not None:
            self._log.close()
            self._log = None

    def __enter__(self) -> Session:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return (
            f"<Session {len(self._context.messages)} messages, {self._tokens:,} tokens, "
            f"trigger {self.trigger:,}, target {self.target:,}>"
        )


# --------------------------------------------------------------------------- the log

_REDACTED = "pipeline_redacted"
"""Set in a start record's options when `redact` masked a credential in the pipeline specs."""


class _Log:
    """An open log file, locked against a second writer (`flock`, exclusive, where the platform
    has it): each record is one line, chained to the one before, written with one `write` call
    and fsync'd; `close` writes the end record."""

    def __init__(self, path: Path, fd: int) -> None:
        self.path = path
        self.fd = fd
        self.state = _LogState(fd, os.getpid())
        self._finalizer = weakref.finalize(self, _finish, self.state)

    @classmethod
    def open(cls, path: Path) -> _Log:
        try:
            fd = os.open(path, os.O_RDWR | os.O_APPEND)
        except FileNotFoundError:
            raise BadInputError(
                "no such session log", path=str(path), hint="check the path"
            ) from None
        except OSError as exc:
            raise BadInputError(f"cannot open: {exc.strerror}", path=str(path)) from None
        try:
            _lock(fd, path)
        except BaseException:
            os.close(fd)
            raise
        return cls(path, fd)

    def resume(self, head: str, records: int) -> None:
        self.state.head, self.state.records = head, records

    def write(self, record: dict[str, Any]) -> None:
        self.state.write(record)

    def close(self) -> None:
        self._finalizer()

    def release(self) -> None:
        """Let the file go without writing an end record (a load that failed)."""
        self._finalizer.detach()
        os.close(self.fd)


@dataclass
class _LogState:
    """What writing a log needs, apart from the `_Log` (its finalizer holds this, not the log)."""

    fd: int
    pid: int
    head: str = ""
    records: int = 0

    def write(self, record: dict[str, Any]) -> None:
        text, head = chained(record, self.head)
        data = memoryview(text.encode("utf-8"))
        while data:
            written = os.write(self.fd, data)
            data = data[written:]
        os.fsync(self.fd)
        self.head = head
        self.records += 1


def _finish(state: _LogState) -> None:
    """Close a log: the end record (in the process that opened it only), then the file."""
    try:
        if os.getpid() == state.pid and state.records:
            with contextlib.suppress(OSError):
                state.write(end_record(state.head, state.records))
    finally:
        os.close(state.fd)


def _lock(fd: int, path: Path) -> None:
    if fcntl is None:  # no flock here: one writer is the caller's to ensure
        return
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        raise SessionLogBusy(
            f"{path}: another Session is writing this log (in this process or another); "
            "a second writer would lose records: close the other one first"
        ) from None
    except OSError as exc:  # a file system without locks
        raise BadInputError(f"cannot lock: {exc.strerror}", path=str(path)) from None


def _head_before_end(records: Sequence[Any]) -> str:
    """The chain's head once the end record is gone: the `prev` it carried."""
    head = records[-1].get("prev")
    return head if isinstance(head, str) else ""


def _read_log(fd: int, path: Path) -> tuple[list[Any], int, int]:
    """The records of a log, the length of its complete part and of a torn last line."""
    try:
        size = os.fstat(fd).st_size
        raw = os.pread(fd, size, 0) if size else b""
    except OSError as exc:
        raise BadInputError(f"cannot read: {exc.strerror}", path=str(path)) from None
    good = raw.rfind(b"\n") + 1
    lines = raw[:good].split(b"\n")[:-1]
    torn = len(raw) - good
    records: list[Any] = []
    for number, text in enumerate(lines, start=1):
        try:
            records.append(json.loads(text))
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
            if number == len(lines) and not torn:  # torn, though its newline made it to disk
                good -= len(text) + 1
                torn = len(text) + 1
                break
            raise BadInputError(
                f"corrupt session log line: {exc}".splitlines()[0],
                path=str(path),
                line=number,
                hint="only a torn last line is skipped; restore the log from a backup",
            ) from None
    if not records:
        raise BadInputError(
            "empty session log (no start line)", path=str(path), hint="save a session first"
        )
    return records, good, torn


def _saved_count(file: Path, saved: dict[str, Any], key: str, default: int | None) -> int | None:
    """A token count the log's start record holds (`trigger`, `target`), checked: a value that
    is not a positive whole number is bad input naming the log."""
    value = saved.get(key, default)
    if value is None or (type(value) is int and value > 0):
        return value
    raise BadInputError(
        f"the start record's {key} is {str(value)[:40]!r}, not a positive whole number of tokens",
        path=str(file),
        hint=f"give {key}= to Session.load, or fix the log",
    )


def _sync_directory(path: Path) -> None:
    """Make a new file's directory entry durable too (where the platform allows)."""
    with contextlib.suppress(OSError):
        fd = os.open(path.parent if str(path.parent) else Path("."), os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


# --------------------------------------------------------------------------- pipelines


@dataclass(frozen=True)
class CompactionSetup:
    """What compacting past a trigger down to a target needs (a `Session`, the LangChain
    middleware): the target checked, the pipeline built at that budget, its counter."""

    target: int
    specs: list[str] | None
    pipeline: Pipeline
    counter: TokenCounter

    @classmethod
    def of(
        cls,
        who: str,
        pipeline: PipelineArg,
        trigger: int,
        target: int | None,
        tokenizer: str,
        registry: Registry | None,
    ) -> CompactionSetup:
        target = trigger // 2 if target is None else target
        if not 0 < target < trigger:
            raise ConfigError(
                f"{who} target {target:,} must be above 0 and below the trigger {trigger:,}"
            )
        specs = pipeline_specs(pipeline)
        built = pipeline_for(pipeline, specs, target, tokenizer, registry)
        with use_registry(built.registry):
            counter = get_counter(built.tokenizer)
        return cls(target, specs, built, counter)


def pipeline_specs(pipeline: PipelineArg) -> list[str] | None:
    """The pipeline as spec-language text (what a session log records), None for an object."""
    if isinstance(pipeline, PipelineSpec):
        return list(pipeline.strategies)
    if isinstance(pipeline, str):
        return [pipeline]
    if isinstance(pipeline, Sequence) and all(isinstance(s, str) for s in pipeline):
        return list(pipeline)
    return None


def pipeline_for(
    pipeline: PipelineArg,
    specs: list[str] | None,
    target: int,
    tokenizer: str,
    registry: Registry | None,
) -> Pipeline:
    if isinstance(pipeline, PipelineSpec):  # its own budget, else the target
        spec = pipeline if pipeline.budget is not None else replace(pipeline, budget=target)
        return build_pipeline(spec, registry=registry, tokenizer=tokenizer)
    if specs is not None:
        spec = one_pipeline(specs, budget=target)
        return build_pipeline(spec, registry=registry, tokenizer=tokenizer)
    if isinstance(pipeline, Pipeline):
        return _copy_pipeline(pipeline)
    if isinstance(pipeline, Strategy) or callable(pipeline):
        return Pipeline([pipeline], tokenizer=tokenizer, registry=registry)
    raise ConfigError(f"not a pipeline: {pipeline!r}")


def _copy_pipeline(pipeline: Pipeline) -> Pipeline:
    """The same strategies with an event bus of its own (a session's observers see only its own
    compactions, even when the caller's pipeline is shared)."""
    return copy_pipeline(pipeline)


__all__ = ["PipelineArg", "Session", "SessionLogBusy"]
