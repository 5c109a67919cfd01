"""Measuring a pipeline on one session: one-shot, or replayed model call by model call.

Replay walks the session as the agent did: every assistant message is one model call whose prompt is
built from the messages before it.

* ``view``: the pipeline runs on the full history before every call (what observation masking in
  SWE-agent-style harnesses does); the history itself is never changed.
* ``persistent``: the history is the compacted context; new messages append to it, and when it grows past
  the trigger the pipeline runs on it and its output replaces the history (what Claude Code and pi do).

Per call: prompt tokens, the cached prefix (tokens of the longest prefix equal to the previous call's
prompt), output tokens (as the session recorded them, else counted), and the cost under each pricing
profile.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from ..context import AgentContext, Message
from ..pipeline import Pipeline, builtin_strategies, copy_pipeline
from ..tokens import TokenCounter
from ..validate import validate
from .pricing import PricingProfile
from .retention import FactRetention

Mode = Literal["oneshot", "view", "persistent"]


@dataclass
class CallRecord:
    message: int
    prompt_tokens: int
    cached_tokens: int
    output_tokens: int
    compacted: bool = False


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
    seconds: float = 0.0
    error: str | None = None

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
            "cost": {k: round(v, 6) for k, v in sorted(self.cost.items())},
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


def prefix_tokens(prev: AgentContext | None, cur: AgentContext, counter: TokenCounter) -> int:
    """Tokens of the longest prefix `cur` shares with `prev` (whole messages)."""
    if prev is None:
        return 0
    if (
        prev.system_instruction != cur.system_instruction
        or prev.activated_skills != cur.activated_skills
    ):
        return 0
    total = counter.preamble(cur)
    for a, b in zip(prev.messages, cur.messages, strict=False):
        if a is not b and a != b:
            break
        total += counter.message(b)
    return total


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
) -> SessionResult:
    """Measure `pipeline` on `ctx` (see the module docs for the modes).

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
        final = _replay(ctx, unchecked, mode, counter, profiles, trigger, result, checker)
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


def _extend(
    history: AgentContext, new: Sequence[Message], source: AgentContext, pipeline: Pipeline
) -> AgentContext:
    """Append session messages to the replayed history, each through the pipeline's arrival
    stage once (`Pipeline.arrive`), with the session's own recovery entries (markers the session
    format recorded) so that they never dangle."""
    grown = pipeline.arrive(history, new)
    if source.recovery and any(k not in grown.recovery for k in source.recovery):
        grown = grown.replace(recovery={**source.recovery, **grown.recovery})
    return grown


def _replay(
    ctx: AgentContext,
    pipeline: Pipeline,
    mode: Mode,
    counter: TokenCounter,
    profiles: Sequence[PricingProfile],
    trigger: int,
    result: SessionResult,
    checker: _Checker,
) -> AgentContext:
    messages = ctx.messages
    empty = ctx.replace(messages=())
    history = empty
    consumed = 0
    previous: AgentContext | None = None
    cost = {p.name: 0.0 for p in profiles}
    # policies that decide themselves when to compact (the peers) see the history before every call
    self_triggered = bool(pipeline.strategies) and all(
        getattr(s, "self_triggered", False) for s in pipeline.strategies
    )
    for index in call_points(ctx):
        compacted = False
        if mode == "view":
            prompt = _compact(pipeline, ctx.replace(messages=messages[:index]), counter, checker)
            compacted = prompt.messages != messages[:index]
        else:
            history = _extend(history, messages[consumed:index], ctx, pipeline)
            consumed = index
            if self_triggered or counter.context(history) > trigger:
                out = _compact(pipeline, history, counter, checker)
                compacted = out is not history
                result.compactions += compacted
                history = out
            prompt = history
        tokens = counter.context(prompt)
        cached = prefix_tokens(previous, prompt, counter)
        out_tokens = output_tokens(messages[index], counter)
        for p in profiles:
            cost[p.name] += p.cost(tokens, cached, out_tokens)
        result.calls.append(CallRecord(index, tokens, cached, out_tokens, compacted))
        result.prompt_tokens += tokens
        result.cached_tokens += cached
        result.output_tokens += out_tokens
        previous = prompt
        if mode == "persistent":
            history = _extend(history, messages[index : index + 1], ctx, pipeline)
            consumed = index + 1
    result.cost = cost
    # what the next call would be shown: the whole session under the same regime
    if mode == "persistent":
        final = _extend(history, messages[consumed:], ctx, pipeline)
    else:
        final = _compact(pipeline, ctx, counter, checker)
    result.tokens_after = counter.context(final)
    return final
