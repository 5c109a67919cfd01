"""Pipelines: strategies run in order, each output validated and reported as events."""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from difflib import SequenceMatcher
from typing import Any

from ._exitguard import no_process_exit, stdout_to_stderr
from ._isolate import (
    CAN_ISOLATE,
    InterruptWatch,
    Returned,
    private_copy,
    run_isolated,
    watch_interrupts,
)
from .arrival import grown
from .context import AgentContext, Message, ToolResultBlock
from .errors import (
    EXIT_PLUGIN,
    BadInputError,
    CompactkitError,
    ContractViolation,
    RecoveryError,
    StrategyError,
    StrategyTimeout,
)
from .events import (
    Change,
    CompactionFailed,
    CompactionFinished,
    CompactionStarted,
    EventBus,
    Observer,
    StrategyApplied,
)
from .pins import parse_rule, with_rules
from .recovery import is_marker, message_marker, verify
from .registry import Registry, current_registry, get_counter, use_registry
from .spec import PipelineSpec, one_pipeline
from .strategies import ARRIVAL_BUILTIN, BUILTIN
from .strategies.peers import PEERS
from .strategies.peers.headroom import PeerHeadroom
from .strategy import ARRIVAL, Strategy, StrategyOptions
from .tokens import DEFAULT_TOKENIZER, TokenCounter
from .validate import validate, validate_arrival


def _new_markers(before: Message | None, after: Message) -> list[Any]:
    """Markers in `after` that `before` did not have."""

    def collect(msg: Message | None) -> list[Any]:
        if msg is None:
            return []
        found: list[Any] = []
        for block in msg.content:
            if is_marker(block):
                found.append(block)
            elif isinstance(block, ToolResultBlock):
                found.extend(p for p in block.content if is_marker(p))
        return found

    old = {m.etag for m in collect(before)}
    return [m for m in collect(after) if m.etag not in old]


def _reason(markers: list[Any], fallback: str) -> str:
    if not markers:
        return fallback
    return "; ".join(dict.fromkeys(_describe_marker(m) for m in markers))


def _describe_marker(marker: Any) -> str:
    """What a marker stands for, as `--explain` says it: its label when the label names the
    marker's kind ("4042 characters elided"), else the kind and the label ("omitted: dropped to
    fit 30,000 tokens"), so that no word is said twice."""
    kind = str(marker.type)
    label = str(getattr(marker, "label", "") or getattr(marker, "path", "") or "").strip()
    if not label:
        return kind
    if re.search(rf"\b{re.escape(kind)}\b", label, re.IGNORECASE):
        return label
    return f"{kind}: {label}"


def changes(before: AgentContext, after: AgentContext) -> tuple[list[Change], list[str]]:
    """What a strategy did, message by message, and the etags of markers it added.

    Unchanged messages are the same objects in both contexts (strategies reuse them), so this aligns
    by identity and costs nothing on the messages a strategy left alone.
    """
    a = [id(m) for m in before.messages]
    b = [id(m) for m in after.messages]
    # the untouched head and tail are aligned directly; only the middle needs a matcher
    head = 0
    while head < min(len(a), len(b)) and a[head] == b[head]:
        head += 1
    tail = 0
    while tail < min(len(a), len(b)) - head and a[-1 - tail] == b[-1 - tail]:
        tail += 1
    out: list[Change] = []
    etags: list[str] = []
    mid_a, mid_b = a[head : len(a) - tail], b[head : len(b) - tail]
    opcodes: Sequence[tuple[str, int, int, int, int]]
    if len(mid_a) == len(mid_b):  # messages changed in place: pair them by position
        opcodes = [
            ("replace", k, k + 1, k, k + 1) for k in range(len(mid_a)) if mid_a[k] != mid_b[k]
        ]
    else:
        opcodes = SequenceMatcher(a=mid_a, b=mid_b, autojunk=False).get_opcodes()
    for op, a0, a1, b0, b1 in opcodes:
        if op == "equal":
            continue
        a0, a1, b0, b1 = a0 + head, a1 + head, b0 + head, b1 + head
        removed = list(range(a0, a1))
        added = list(range(b0, b1))
        absorbed: str | None = None
        for j in added:
            new = after.messages[j]
            marker = message_marker(new)
            if marker is not None:
                absorbed = _reason([marker], "replaced")
        paired = min(len(removed), len(added))
        for k in range(paired):
            old, new = before.messages[removed[k]], after.messages[added[k]]
            fresh = _new_markers(old, new)
            etags.extend(m.etag for m in fresh)
            if message_marker(new) is not None:
                out.append(Change("added", added[k], _reason(fresh, "marker")))
                out.append(Change("removed", removed[k], absorbed or "dropped"))
            else:
                gone = _new_markers(new, old)  # markers the strategy expanded back
                fallback = _reason(gone, "content changed")
                if gone:
                    fallback = "expanded back: " + fallback
                out.append(Change("changed", added[k], _reason(fresh, fallback)))
        for j in added[paired:]:
            fresh = _new_markers(None, after.messages[j])
            etags.extend(m.etag for m in fresh)
            out.append(Change("added", j, _reason(fresh, "added")))
        for i in removed[paired:]:
            out.append(Change("removed", i, absorbed or "dropped"))
    return out, etags


@dataclass
class StepReport:
    """One strategy's effect, as reported by `Pipeline.run`."""

    strategy: str
    tokens_before: int
    tokens_after: int
    seconds: float
    changes: list[Change] = field(default_factory=list)
    note: str = ""


@dataclass
class RunResult:
    context: AgentContext
    tokens_before: int
    tokens_after: int
    steps: list[StepReport]
    seconds: float


PLUGIN_TIMEOUT = 60.0
"""The command line's default `--timeout`: seconds a plugin strategy may run before it is stopped."""

_BUILTIN_CLASSES = frozenset((*BUILTIN, *ARRIVAL_BUILTIN, *PEERS, PeerHeadroom))
"""peer-headroom is compactkit's own code too (it drives headroom-ai in a process of its own,
under `headroom_env.ANSWER_SECONDS`): run in a worker, the worker's reaping ended that
process after every call."""


def builtin_strategies() -> frozenset[type]:
    """The strategy classes compactkit's own built-in plugins register (by identity): the same
    tuples `compactkit.builtins.strategies` and `compactkit.builtins.peers` register."""
    return _BUILTIN_CLASSES


def _trusted(strat: Strategy) -> bool:
    """Built-in strategies (and pipelines of them) are checked by the conformance tests. Trust
    goes by the class itself, never by its name or module: a subclass or a look-alike is not."""
    if type(strat) is Pipeline:
        return all(_trusted(s) for s in strat.strategies)
    return type(strat) in builtin_strategies()


def _ours(exc: CompactkitError) -> bool:
    """An error compactkit raised about a plugin strategy (its contract checks, its timeout, its
    worker process), whose exit code is the plugin-failure one."""
    return type(exc) in (ContractViolation, StrategyError, StrategyTimeout) and (
        exc.exit_code == EXIT_PLUGIN
    )


def _raised(strat: Strategy, exc: BaseException) -> StrategyError:
    what = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
    return StrategyError(f"strategy {strat.name!r} failed: {what}".splitlines()[0])


def _reuse_originals(
    out: AgentContext, given: AgentContext, original: AgentContext
) -> AgentContext:
    """`out` with every message of the private copy it kept (or rebuilt equal to the message at the
    same place) replaced by the caller's original object, so that unchanged messages keep their
    identity: change reports stay exact and per-message caches (token counts) stay warm."""
    copies = {id(m): k for k, m in enumerate(given.messages)}
    messages = list(out.messages)
    swapped = False
    for i, msg in enumerate(messages):
        k = copies.get(id(msg))
        if k is None and i < len(original.messages) and msg == original.messages[i]:
            k = i
        if k is not None and messages[i] is not original.messages[k]:
            messages[i] = original.messages[k]
            swapped = True
    return out.with_messages(messages) if swapped else out


def _arrival_of(strat: Strategy) -> list[Strategy]:
    """The arrival strategies `strat` brings: itself, or a nested pipeline's."""
    if isinstance(strat, Pipeline):
        return list(strat.arrival)
    return [strat] if strat.stage == ARRIVAL else []


def _as_strategy(item: Strategy | Callable[[AgentContext], AgentContext]) -> Strategy:
    if isinstance(item, Strategy):
        return item
    if isinstance(item, type) and issubclass(item, Strategy):
        return item()
    if callable(item) and not isinstance(item, type):
        fn: Callable[[AgentContext], AgentContext] = item

        class _Fn(Strategy):
            name = getattr(fn, "__name__", "function")
            description = (getattr(fn, "__doc__", "") or "").strip()

            def compact(self, ctx: AgentContext) -> AgentContext:
                return fn(ctx)

        return _Fn()
    raise TypeError(f"not a strategy: {item!r}")


class Pipeline(Strategy):
    """Strategies applied in order; itself a strategy.

    Every output is checked by `compactkit.validate` against that strategy's input; a violation
    raises `ContractViolation` naming the strategy, message and rule, and leaves the caller's context
    untouched (contexts never change). `check=False` skips that validation only: a strategy that
    is not one of compactkit's built-ins always gets a private copy of its input, and mutating it
    is always a `ContractViolation`, in every runner (run, bench, check, Session, the gateway).
    Events go to `subscribe`d observers and to plugins' `compaction_event` hook.

    `pins`: user pin rules (`tool=NAME`, `path=GLOB`, `re=REGEX`, `origin=NAME`, see
    `compactkit.pins`) added to every context it runs on; what they name is never touched.

    With `timeout` (seconds), each strategy that is not one of compactkit's built-ins runs in a
    worker process and is stopped when it runs longer (`StrategyTimeout`, exit 3); built-ins always
    run in-process. A strategy that raises `SystemExit` or `KeyboardInterrupt` fails like any
    other (`StrategyError`); a real Ctrl-C still raises `KeyboardInterrupt`.

    Two moments: `strategies` run at the trigger (`run`, `compact`), on the whole history;
    `arrival` strategies (those whose `stage` is `"arrival"`, wherever they are given) run in
    `arrive`, on each new message as it is appended. A plugin's arrival step is held to
    `compactkit.validate.validate_arrival` (only the new message changed, idempotent).
    """

    name = "pipeline"
    description = "Strategies applied in order."

    def __init__(
        self,
        strategies: Sequence[Strategy | Callable[[AgentContext], AgentContext]],
        *,
        tokenizer: str = DEFAULT_TOKENIZER,
        check: bool = True,
        registry: Registry | None = None,
        name: str | None = None,
        timeout: float | None = None,
        pins: Sequence[str] = (),
        arrival: Sequence[Strategy | Callable[[AgentContext], AgentContext]] = (),
    ) -> None:
        super().__init__()
        given = [_as_strategy(s) for s in (*arrival, *strategies)]
        self.arrival: list[Strategy] = [a for s in given for a in _arrival_of(s)]
        """The arrival stage: run by `arrive` on each new message, in order."""
        self.strategies = [s for s in given if s.stage != ARRIVAL]
        self.pins = tuple(str(parse_rule(rule)) for rule in pins)
        self.timeout = timeout or None
        self.tokenizer = tokenizer
        self.check = check
        self.registry = registry
        self.title = name or " | ".join(s.label for s in (*self.arrival, *self.strategies))
        self.title = self.title or "empty"
        self._bus = EventBus()

    @property
    def label(self) -> str:
        return self.title

    @property
    def builtin(self) -> bool:
        """Whether every strategy is one of compactkit's own (checked by its conformance tests)."""
        return _trusted(self)

    def subscribe(self, observer: Observer) -> Callable[[], None]:
        """Receive every event of every run; returns the function that unsubscribes."""
        return self._bus.subscribe(observer)

    def _emit(self, event: Any) -> None:
        self._bus.emit(event)
        if self.registry is not None and self.registry.has_event_hooks:
            for problem in self.registry.emit(event):
                import sys

                print(f"compactkit: {problem}", file=sys.stderr)

    def compact(self, ctx: AgentContext) -> AgentContext:
        return self.run(ctx).context

    def arrive(self, history: AgentContext, messages: Sequence[Message]) -> AgentContext:
        """`history` with `messages` appended, each passed through the arrival strategies once,
        as it arrives (the context before it unchanged). Without arrival strategies, the plain
        append. A strategy that fails or breaks the arrival contract raises as in `run`."""
        if not self.arrival:
            return history.append(*messages) if messages else history
        ctx = with_rules(history, self.pins)
        with use_registry(self.registry):
            for msg in messages:
                ctx = grown(ctx, msg)
                for strat in self.arrival:
                    ctx = self._arrive_step(strat, ctx)
        return ctx

    def _arrive_step(self, strat: Strategy, ctx: AgentContext) -> AgentContext:
        """One arrival strategy on the context ending on the new message: a built-in is called
        directly (and its output checked unless `check=False`); a plugin goes through the same
        guards as at the trigger (`_ARRIVAL_STEPS`)."""
        if _trusted(strat) and not _isolated(self, strat):
            out = strat.compact(ctx)
            if self.check and out is not ctx:
                step = _Step(0, strat, ctx, 0, InterruptWatch(), 0.0, out=out)
                try:
                    _check_arrival(self, step)
                except CompactkitError as exc:
                    self._fail(strat, exc)
                    raise
            return out
        with watch_interrupts() as watch:
            step = _Step(0, strat, ctx, 0, watch, time.perf_counter())
            try:
                for check in _ARRIVAL_STEPS:
                    check(self, step)
            except CompactkitError as exc:
                self._fail(strat, exc)
                raise
        arrived: AgentContext = step.out
        return arrived

    def run(self, ctx: AgentContext, counter: TokenCounter | None = None) -> RunResult:
        """Compact `ctx`, returning the result with per-strategy figures. The pipeline's pin rules
        are added to the context first (`compactkit.pins.with_rules`), so they travel with it."""
        ctx = with_rules(ctx, self.pins)
        # strategies, counters and summarizer lookups inside see this pipeline's registry
        with use_registry(self.registry), watch_interrupts() as watch:
            return self._run(ctx, counter or get_counter(self.tokenizer), watch)

    def _run(
        self, ctx: AgentContext, counter: TokenCounter, interrupts: InterruptWatch
    ) -> RunResult:
        start = time.perf_counter()
        tokens_before = counter.context(ctx)
        labels = tuple(s.label for s in self.strategies)
        self._emit(CompactionStarted(self.title, labels, tokens_before, len(ctx.messages)))
        current, tokens = ctx, tokens_before
        steps: list[StepReport] = []
        for index, strat in enumerate(self.strategies):
            step = _Step(index, strat, current, tokens, interrupts, time.perf_counter())
            try:
                for check in _STEPS:
                    check(self, step)
            except CompactkitError as exc:  # the one failure path: reported, then raised
                self._fail(strat, exc)
                raise
            steps.append(self._report(step, counter))
            current, tokens = step.out, steps[-1].tokens_after
        total = time.perf_counter() - start
        self._emit(CompactionFinished(self.title, tokens_before, tokens, total))
        return RunResult(current, tokens_before, tokens, steps, total)

    def _report(self, step: _Step, counter: TokenCounter) -> StepReport:
        """Count the step's output, say what changed and emit `StrategyApplied`."""
        strat, current, out = step.strat, step.current, step.out
        seconds = time.perf_counter() - step.started
        after = counter.context(out)
        found, etags = changes(current, out) if out is not current else ([], [])
        note = _over_budget(strat, after)
        self._emit(
            StrategyApplied(
                pipeline=self.title,
                strategy=strat.label,
                index=step.index,
                tokens_before=step.tokens,
                tokens_after=after,
                messages_before=len(current.messages),
                messages_after=len(out.messages),
                seconds=seconds,
                changes=tuple(found),
                elided=tuple(etags),
                note=note,
            )
        )
        return StepReport(strat.label, step.tokens, after, seconds, found, note)

    def _fail(self, strat: Strategy, exc: CompactkitError) -> None:
        self._emit(CompactionFailed(self.title, strat.label, str(exc), exc.exit_code))


@dataclass
class _Step:
    """One strategy's turn in `Pipeline.run`: its input, and its output once it has one."""

    index: int
    strat: Strategy
    current: AgentContext
    tokens: int
    interrupts: InterruptWatch
    started: float
    guarded: bool = False
    """Whether the strategy got a private copy (`given`) of `current`."""
    given: AgentContext | None = None
    out: Any = None


def _isolated(pipeline: Pipeline, strat: Strategy) -> bool:
    """A plugin strategy under a timeout runs in a worker process (`compactkit._isolate`)."""
    return (
        bool(pipeline.timeout and CAN_ISOLATE)
        and type(strat) is not Pipeline
        and not _trusted(strat)
    )


def _call_strategy(pipeline: Pipeline, step: _Step) -> None:
    """Run the strategy: code from outside compactkit gets a private copy (whatever it does to its
    input, the caller's context stays intact), in a worker process under a timeout; anything it
    raises (SystemExit and KeyboardInterrupt included) is its failure, unless the user pressed
    Ctrl-C or the program was sent SIGTERM."""
    strat, current = step.strat, step.current
    isolated = _isolated(pipeline, strat)
    # always, `check=False` (the bench validates outputs itself) included; an isolated strategy
    # gets its copy in its worker process, where the caller's context never is
    guarded = step.guarded = not _trusted(strat)
    step.given = private_copy(current) if guarded and not isolated else current
    try:
        if isolated:
            step.out, mutated = run_isolated(
                strat,
                current,
                timeout=pipeline.timeout or 0,
                registry=pipeline.registry,
                siblings=pipeline.strategies,
            )
        elif _trusted(strat):
            step.out = strat.compact(step.given)
            mutated = False
        else:
            # os._exit in plugin code is a failure, not a way out; its prints go to stderr
            with no_process_exit(), stdout_to_stderr():
                step.out = strat.compact(step.given)
            mutated = guarded and step.given != current
    except CompactkitError as exc:
        if not _trusted(strat) and not _ours(exc):
            # a plugin's failure is exit 3 whatever it raised (never the code it picked)
            raise _raised(strat, exc) from exc
        raise
    except BaseException as exc:
        if step.interrupts.signalled:
            raise  # Ctrl-C, or SIGTERM turned into an exception by the program
        raise _raised(strat, exc) from exc
    if mutated:
        raise ContractViolation(f"strategy {strat.name!r} broke the contract: it mutated its input")


def _check_returned(pipeline: Pipeline, step: _Step) -> None:
    """The output is an `AgentContext` (an isolated strategy's is a `Returned` placeholder)."""
    out = step.out
    if not isinstance(out, AgentContext):
        kind = out.type_name if isinstance(out, Returned) else type(out).__name__
        raise ContractViolation(
            f"strategy {step.strat.name!r} returned {kind}, not an AgentContext"
        )


def _take_back_originals(pipeline: Pipeline, step: _Step) -> None:
    """A guarded strategy's output shares the caller's objects again where it kept them."""
    if step.guarded and step.given is not None:
        out, current = step.out, step.current
        unchanged = out is step.given or out == current
        step.out = current if unchanged else _reuse_originals(out, step.given, current)


def _check_recovery(pipeline: Pipeline, step: _Step) -> None:
    """Every recovery entry the strategy added or changed holds what its etag says."""
    if not pipeline.check:
        return
    out, current = step.out, step.current
    try:
        verify({k: v for k, v in out.recovery.items() if current.recovery.get(k) != v}, out)
    except RecoveryError as exc:
        raise ContractViolation(f"strategy {step.strat.name!r} broke the contract: {exc}") from None


def _check_valid(pipeline: Pipeline, step: _Step) -> None:
    """The output keeps every invariant against the strategy's input (`compactkit.validate`)."""
    if not pipeline.check:
        return
    # only compactkit's own reference policies of other tools are exempt from pins
    pins = step.strat.keeps_pins or not _trusted(step.strat)
    problems = validate(step.out, step.current, verify=False, pins=pins)
    if problems:
        given = validate(step.current, verify=False)  # judged only when the output is not valid
        if given:  # the strategy was given a context that breaks them already: bad input
            more = f" (+{len(given) - 1} more)" if len(given) > 1 else ""
            raise BadInputError(
                f"the context to compact is not valid at {given[0]}{more}, so no strategy can "
                "be judged on it",
                hint="run compactkit validate on the input",
            )
        more = f" (+{len(problems) - 1} more)" if len(problems) > 1 else ""
        raise ContractViolation(
            f"strategy {step.strat.name!r} broke the contract at {problems[0]}{more}"
        )


_STEPS: tuple[Callable[[Pipeline, _Step], None], ...] = (
    _call_strategy,
    _check_returned,
    _take_back_originals,
    _check_recovery,
    _check_valid,
)
"""What `Pipeline.run` does with each strategy, in order; any `CompactkitError` one raises fails
the run (one `CompactionFailed` event, the caller's context untouched)."""


def _check_arrival(pipeline: Pipeline, step: _Step) -> None:
    """An arrival step changed only the new message (`validate_arrival`); a plugin's is run again
    on its output, which must not change (built-ins are held to that by their tests)."""
    if not pipeline.check or step.out is step.current:
        return
    again = None
    if not _trusted(step.strat):
        again = step.strat.compact(private_copy(step.out))
    problems = validate_arrival(step.out, step.current, again)
    if problems:
        more = f" (+{len(problems) - 1} more)" if len(problems) > 1 else ""
        raise ContractViolation(
            f"arrival strategy {step.strat.name!r} broke the contract at {problems[0]}{more}"
        )


_ARRIVAL_STEPS: tuple[Callable[[Pipeline, _Step], None], ...] = (
    _call_strategy,
    _check_returned,
    _take_back_originals,
    _check_arrival,  # verifies the recovery entries the step added
)
"""What `Pipeline.arrive` does with each arrival strategy on each new message."""


def _over_budget(strat: Strategy, tokens: int) -> str:
    """The step's note on its budget: over it, or (for a strategy that needs one) none given."""
    option = strat.budget_option
    budget = getattr(strat.options, option, None) if option else None
    if isinstance(budget, int) and tokens > budget:
        return f"over its budget of {budget:,} tokens by {tokens - budget:,}"
    if budget is None and option and strat.budget_required:
        return f"no budget, so nothing to do: give --budget N or {strat.name}:{option}=N"
    return ""


def get_strategy(name: str, registry: Registry | None = None, /, **options: Any) -> Strategy:
    """An instance of the registered strategy `name` with `options` (validated)."""
    reg = registry or current_registry()
    cls = reg.strategies.get(name)
    instance: Strategy = cls(**options)
    return instance


def build_pipeline(
    specs: Sequence[str] | PipelineSpec,
    *,
    budget: int | None = None,
    registry: Registry | None = None,
    tokenizer: str = DEFAULT_TOKENIZER,
    timeout: float | None = None,
    pins: Sequence[str] = (),
) -> Pipeline:
    """A pipeline from a `PipelineSpec` or from specs in the spec language (`compactkit.spec`:
    `NAME[:key=value,...]`, `a+b`, `default`, `none`); `budget` fills each strategy's budget
    option where the spec did not set it, and `default` stands for the default pipeline at
    `budget`. `timeout`: seconds each plugin strategy may run (see `Pipeline`); None or 0, no
    limit. `pins`: user pin rules (see `Pipeline`), added to the spec's own. A `PipelineSpec`
    carries its own budget (`budget` is then ignored)."""
    spec = (
        specs
        if isinstance(specs, PipelineSpec)
        else one_pipeline(list(specs), budget=budget, trigger=None)
    )
    strategies = []
    for cls, options in spec.steps(registry):
        if "tokenizer" in cls.Options.model_fields and "tokenizer" not in options:
            options["tokenizer"] = tokenizer
        strategies.append(cls(**options))
    rules = tuple(dict.fromkeys((*spec.pins, *pins)))
    return Pipeline(strategies, tokenizer=tokenizer, registry=registry, timeout=timeout, pins=rules)


def copy_pipeline(pipeline: Pipeline, **changes: Any) -> Pipeline:
    """The same strategies of both stages, with an event bus of its own and `changes` (`check`,
    `timeout`, `pins`, `name`) applied."""
    options: dict[str, Any] = {
        "tokenizer": pipeline.tokenizer,
        "check": pipeline.check,
        "registry": pipeline.registry,
        "name": pipeline.title,
        "timeout": pipeline.timeout,
        "pins": pipeline.pins,
        "arrival": pipeline.arrival,
    }
    return Pipeline(pipeline.strategies, **{**options, **changes})


__all__ = [
    "PLUGIN_TIMEOUT",
    "Pipeline",
    "RunResult",
    "StepReport",
    "Strategy",
    "StrategyOptions",
    "build_pipeline",
    "changes",
    "copy_pipeline",
    "get_strategy",
]
