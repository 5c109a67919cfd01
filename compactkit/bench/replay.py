"""Measuring a pipeline on one session: one-shot, or replayed model call by model call.

Replay walks the session as the agent did: every assistant message is one model call whose prompt is
built from the messages before it.

* ``view``: the pipeline runs on the full history before every call (what observation masking in
  SWE-agent-style harnesses does); the history itself is never changed.
* ``persistent``: the history is the compacted context; new messages append to it, and when it grows past
  the trigger the pipeline runs on it and its output replaces the history (what Claude Code and pi do).

Per call: prompt tokens, the cached prefix (tokens of the longest prefix equal to the previous call's
prompt), output tokens (as the session recorded them, else counted), and the cost under each pricing
profile. Per compaction whose summary a model would write: one summarizer call (`charge_summaries`,
from each strategy's `summary_call`), its cost added to the session's.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from ..arrival import folded_savings
from ..context import AgentContext, Message, SummaryBlock
from ..pipeline import Pipeline, builtin_strategies, copy_pipeline
from ..policy import CompactionPolicy, Ledger, PolicyName, floor, prefix_tokens, unfolded_tokens
from ..pricing import PricingProfile, get_profile
from ..recovery import markers
from ..tokens import TokenCounter
from ..validate import validate
from .retention import FactRetention

Mode = Literal["oneshot", "view", "persistent"]


@dataclass
class CallRecord:
    message: int
    prompt_tokens: int
    cached_tokens: int
    output_tokens: int
    compacted: bool = False


NO_MODEL_CALL = "extractive: no model call"
"""The report's note on a session whose summaries no model wrote."""


@dataclass
class SummarizerUse:
    """The summarizer calls a replay charged (`Strategy.summary_call`): what a model writing the
    summaries would have been sent and written, and what it cost per pricing profile."""

    calls: int = 0
    input_tokens: int = 0
    cached_tokens: int = 0
    output_tokens: int = 0
    free: int = 0
    """Summaries written with no model call (the extractive summarizer)."""
    cost: dict[str, float] = field(default_factory=dict)
    charged: set[str] = field(default_factory=set)
    """Etags of the summaries already counted (one summary, shown on several calls, is one call)."""

    def as_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            "calls": self.calls,
            "input_tokens": self.input_tokens,
            "cached_tokens": self.cached_tokens,
            "output_tokens": self.output_tokens,
            "cost": {k: round(v, 6) for k, v in sorted(self.cost.items())},
        }
        if not self.calls and self.free:
            data["note"] = NO_MODEL_CALL
        return data


@dataclass
class SessionResult:
    """One pipeline on one session."""

    session: str
    pipeline: str
    mode: str
    tokens_before: int
    tokens_after: int
    prompt_tokens: int = 0
    cached_tokens: int = 0
    output_tokens: int = 0
    calls: list[CallRecord] = field(default_factory=list)
    cost: dict[str, float] = field(default_factory=dict)
    retention: dict[str, Any] = field(default_factory=dict)
    recoverability: dict[str, Any] = field(default_factory=dict)
    violations: int = 0
    violation_samples: list[str] = field(default_factory=list)
    scores: dict[str, Any] = field(default_factory=dict)
    compactions: int = 0
    policy: dict[str, Any] = field(default_factory=dict)
    """What the compaction policy decided (`Ledger.as_json`): empty for self-triggered peers."""
    seconds: float = 0.0
    error: str | None = None
    summarizer: SummarizerUse = field(default_factory=SummarizerUse)

    def as_json(self, with_calls: bool = True) -> dict[str, Any]:
        data = {
            "session": self.session,
            "pipeline": self.pipeline,
            "mode": self.mode,
            "tokens_before": self.tokens_before,
            "tokens_after": self.tokens_after,
            "prompt_tokens": self.prompt_tokens,
            "cached_tokens": self.cached_tokens,
            "output_tokens": self.output_tokens,
            "model_calls": len(self.calls),
            "compactions": self.compactions,
            "policy": self.policy,
            "cost": {k: round(v, 6) for k, v in sorted(self.cost.items())},
            "summarizer": self.summarizer.as_json(),
            "retention": self.retention,
            "recoverability": self.recoverability,
            "violations": self.violations,
            "violation_samples": self.violation_samples,
            "scores": self.scores,
            "seconds": round(self.seconds, 4),
            "error": self.error,
        }
        if with_calls:
            data["calls"] = [
                [c.message, c.prompt_tokens, c.cached_tokens, c.output_tokens, int(c.compacted)]
                for c in self.calls
            ]
        return data


def output_tokens(msg: Message, counter: TokenCounter) -> int:
    """Output tokens of a model call as the session recorded them, else counted."""
    usage = msg.metadata.get("usage")
    if isinstance(usage, dict):
        for key in ("output_tokens", "completion_tokens", "candidates_token_count", "output"):
            value = usage.get(key)
            if isinstance(value, int) and value >= 0:
                return value
    return counter.message(msg)


def call_points(ctx: AgentContext) -> list[int]:
    """Indexes of assistant messages that had a prompt before them (model calls)."""
    return [i for i, m in enumerate(ctx.messages) if m.role == "assistant" and i > 0]


class _Checker:
    """Validates each compaction the bench triggers, counting violations instead of raising."""

    def __init__(self, pins: bool = True) -> None:
        self.count = 0
        self.samples: list[str] = []
        self.pins = pins

    def check(self, out: AgentContext, inp: AgentContext) -> None:
        problems = validate(out, inp, pins=self.pins)
        self.count += len(problems)
        for p in problems[: max(0, 3 - len(self.samples))]:
            self.samples.append(str(p))


def _compact(
    pipeline: Pipeline, ctx: AgentContext, counter: TokenCounter, checker: _Checker
) -> AgentContext:
    out = pipeline.run(ctx, counter).context
    if out is not ctx:
        checker.check(out, ctx)
    return out


def run_session(
    name: str,
    ctx: AgentContext,
    pipeline: Pipeline,
    mode: Mode,
    counter: TokenCounter,
    profiles: Sequence[PricingProfile],
    *,
    trigger: int = 60_000,
    scorers: Sequence[Any] = (),
    policy: PolicyName = "pays",
) -> SessionResult:
    """Measure `pipeline` on `ctx` (see the module docs for the modes).

    `policy`: when a persistent replay keeps a compaction (`compactkit.policy`): `pays` (only
    one that pays for itself under `profiles`), `always` (whenever over the trigger).

    `scorers` are retention scorers besides the built-in `facts` one (`register_scorers`); each
    one's figures land in `scores[name]`, and one that raises is reported there, never fatal.
    """
    # the reference policies of other tools are measured as shipped: their losses of the user's
    # words count in retention, not as violations (see Strategy.keeps_pins)
    checker = _Checker(
        pins=all(s.keeps_pins or type(s) not in builtin_strategies() for s in pipeline.strategies)
    )
    start = time.perf_counter()
    before = counter.context(ctx)
    result = SessionResult(name, pipeline.title, mode, before, before)
    unchecked = copy_pipeline(pipeline, check=False)
    if mode == "oneshot":
        final = _compact(unchecked, ctx, counter, checker)
        result.tokens_after = counter.context(final)
    else:
        result.summarizer.cost = {p.name: 0.0 for p in profiles}
        rules = CompactionPolicy(trigger, profiles=tuple(profiles), mode=policy)
        final = _replay(ctx, unchecked, mode, counter, rules, result, checker)
        for name, dollars in result.summarizer.cost.items():  # summaries are paid for
            result.cost[name] = result.cost.get(name, 0.0) + dollars
    retained, recovered = FactRetention().score(ctx, final)
    result.retention = retained.as_json()
    result.recoverability = recovered.as_json()
    for scorer in scorers:
        if scorer.name == FactRetention.name:
            continue
        try:
            kept, back = scorer.score(ctx, final)
            result.scores[scorer.name] = {
                "retention": kept.as_json(),
                "recoverability": back.as_json(),
            }
        except Exception as exc:  # a broken scorer plugin never breaks a benchmark
            result.scores[scorer.name] = {"error": f"{type(exc).__name__}: {exc}"}
    result.violations = checker.count
    result.violation_samples = checker.samples
    result.seconds = time.perf_counter() - start
    return result


def _summaries(ctx: AgentContext) -> dict[str, SummaryBlock]:
    return {b.etag: b for _, b in markers(ctx) if isinstance(b, SummaryBlock)}


def charge_summaries(
    pipeline: Pipeline,
    before: AgentContext,
    after: AgentContext,
    counter: TokenCounter,
    cached_prefix: int,
    profiles: Sequence[PricingProfile],
    use: SummarizerUse,
) -> None:
    """Count the summarizer call of each summary `after` holds that `before` did not (and that
    was not counted already): the first of the pipeline's strategies whose `summary_call` gives
    one pays it; `cached_prefix` is what such a call, when it sends the conversation first, reads
    from the cache (the tokens `before` shares with the previous model call's prompt)."""
    old = _summaries(before)
    for etag, block in _summaries(after).items():
        if etag in old or etag in use.charged:
            continue
        use.charged.add(etag)
        call = next(
            (
                c
                for s in pipeline.strategies
                if (c := s.summary_call(block, before, after, counter)) is not None
            ),
            None,
        )
        if call is None:
            use.free += 1
            continue
        cached = min(cached_prefix, call.input_tokens) if call.shares_prefix else 0
        use.calls += 1
        use.input_tokens += call.input_tokens
        use.cached_tokens += cached
        use.output_tokens += call.output_tokens
        for p in profiles:
            use.cost[p.name] = use.cost.get(p.name, 0.0) + p.summary_cost(
                call.input_tokens, cached, call.output_tokens
            )


def _extend(
    history: AgentContext,
    new: Sequence[Message],
    source: AgentContext,
    pipeline: Pipeline,
    counter: TokenCounter,
) -> tuple[AgentContext, int]:
    """Append session messages to the replayed history, each through the pipeline's arrival
    stage once (`Pipeline.arrive`), with the session's own recovery entries (markers the session
    format recorded) so that they never dangle; and the tokens arrival took off them
    (`unfolded_tokens`)."""
    grown = pipeline.arrive(history, new)
    if source.recovery and any(k not in grown.recovery for k in source.recovery):
        grown = grown.replace(recovery={**source.recovery, **grown.recovery})
    return grown, unfolded_tokens(new, grown.messages[len(history.messages) :], counter)


def _maybe_compact(
    pipeline: Pipeline,
    history: AgentContext,
    previous: AgentContext | None,
    weighed: tuple[int, int],
    ledger: Ledger,
    counter: TokenCounter,
    checker: _Checker,
    use: SummarizerUse,
) -> tuple[AgentContext, bool, dict[str, float]]:
    """The history to send for this call under the ledger's policy, whether it compacted, and
    what the summaries it wrote cost (a model writing them is paid for, and weighed).
    `weighed`: the session's tokens as sent so far with nothing compacted, and those arrival
    took off the messages since the last compaction, which do not put the compaction off
    (`compactkit.policy`)."""
    raw, unfolded = weighed
    tokens = counter.context(history)
    if not ledger.due(tokens + unfolded):
        return history, False, {}
    out = _compact(pipeline, history, counter, checker)
    if out is history:
        ledger.unchanged(tokens)
        return history, False, {}
    shared = prefix_tokens(previous, history, counter)
    profiles = ledger.policy.profiles
    probe = SummarizerUse(charged=set(use.charged))
    charge_summaries(pipeline, history, out, counter, shared, profiles, probe)
    held = ledger.judge(
        tokens,
        shared,
        counter.context(out),
        prefix_tokens(previous, out, counter),
        summarizer=probe.cost,
        raw=raw,
        floor=floor(out, counter),
    )
    if held:
        return history, False, {}
    charge_summaries(pipeline, history, out, counter, shared, profiles, use)
    return out, True, probe.cost


def _compact_charged(
    pipeline: Pipeline,
    ctx: AgentContext,
    previous: AgentContext | None,
    counter: TokenCounter,
    checker: _Checker,
    result: SessionResult,
) -> AgentContext:
    """The pipeline's output on `ctx`, the summaries a model would have written for it paid."""
    out = _compact(pipeline, ctx, counter, checker)
    if out is not ctx:
        shared = prefix_tokens(previous, ctx, counter)
        profiles = [get_profile(name) for name in result.summarizer.cost]
        charge_summaries(pipeline, ctx, out, counter, shared, profiles, result.summarizer)
    return out


def _ledger(pipeline: Pipeline, policy: CompactionPolicy, mode: Mode) -> Ledger | None:
    """The policy's ledger for a persistent replay of a pipeline that compacts at the trigger;
    None for the policies that decide themselves when to compact (the peers: they see the
    history before every call)."""
    self_triggered = bool(pipeline.strategies) and all(
        getattr(s, "self_triggered", False) for s in pipeline.strategies
    )
    compacts = bool(pipeline.strategies) and not self_triggered
    return policy.ledger() if compacts and mode == "persistent" else None


def _replay(
    ctx: AgentContext,
    pipeline: Pipeline,
    mode: Mode,
    counter: TokenCounter,
    policy: CompactionPolicy,
    result: SessionResult,
    checker: _Checker,
) -> AgentContext:
    messages = ctx.messages
    profiles = policy.profiles
    history = ctx.replace(messages=())
    consumed = 0
    previous: AgentContext | None = None
    cost = {p.name: 0.0 for p in profiles}
    ledger = _ledger(pipeline, policy, mode)
    sizes = counter.messages(messages)
    unfolded = 0  # what arrival took off the messages since the last compaction
    raw = counter.preamble(ctx)
    raw_at = 0
    for index in call_points(ctx):
        raw += sum(sizes[raw_at:index])
        raw_at = index
        compacted = False
        summary: dict[str, float] = {}
        if mode == "view":
            seen = ctx.replace(messages=messages[:index])
            prompt = _compact_charged(pipeline, seen, previous, counter, checker, result)
            compacted = prompt.messages != messages[:index]
        else:
            history, took = _extend(history, messages[consumed:index], ctx, pipeline, counter)
            unfolded += took
            consumed = index
            if ledger is None:
                out = _compact_charged(pipeline, history, previous, counter, checker, result)
                compacted = out is not history
                history = out
            else:
                weighed = (raw, unfolded)
                history, compacted, summary = _maybe_compact(
                    pipeline,
                    history,
                    previous,
                    weighed,
                    ledger,
                    counter,
                    checker,
                    result.summarizer,
                )
            # what a compaction kept of the folds counts too: what it kept is weighed unfolded
            unfolded = folded_savings(history, counter) if compacted else unfolded
            result.compactions += compacted
            prompt = history
        tokens = counter.context(prompt)
        cached = prefix_tokens(previous, prompt, counter)
        out_tokens = output_tokens(messages[index], counter)
        for p in profiles:
            cost[p.name] += p.cost(tokens, cached, out_tokens)
        if ledger is not None:  # the answer as it stands in the history: what a gateway sees
            ledger.record(tokens, cached, raw=raw, compacted=compacted, summarizer=summary)
            ledger.output(counter.message(messages[index]))
        result.calls.append(CallRecord(index, tokens, cached, out_tokens, compacted))
        result.prompt_tokens += tokens
        result.cached_tokens += cached
        result.output_tokens += out_tokens
        previous = prompt
        if mode == "persistent":
            history, took = _extend(history, messages[index : index + 1], ctx, pipeline, counter)
            unfolded += took
            consumed = index + 1
    if ledger is not None:
        result.policy = ledger.as_json()
    result.cost = cost
    # what the next call would be shown: the whole session under the same regime
    if mode == "persistent":
        final = _extend(history, messages[consumed:], ctx, pipeline, counter)[0]
    else:
        final = _compact(pipeline, ctx, counter, checker)
    result.tokens_after = counter.context(final)
    return final
