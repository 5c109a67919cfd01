"""When to compact: the rules that make a compaction pay for itself, shared by everything that
runs a pipeline at a trigger (the bench's persistent replay, `Session`, the gateway).

A compaction is an investment. The call it happens on sends a new, shorter prompt that the
provider writes to its cache (Anthropic bills that write at 1.25x the input price) instead of
reading the old prompt from it (0.1x); every later call then reads fewer cached tokens. Whether
that pays depends on the pricing and on how many calls follow, and a compaction that leaves
almost as much as it found (the user's words alone are above the target) never pays: done on
every other call, it costs more than not compacting at all.

`CompactionPolicy` decides, per conversation (`Ledger`), with these rules, in this order:

* **floor**: what the last compaction (or attempt) had to keep (pins, the task, the newest turn)
  raises the effective trigger to that size plus the `headroom`, so a compaction is attempted only
  when there is at least `headroom` of history above what must stay;
* **consecutive**: never on the call right after a compaction;
* **cleared**: a compaction must clear at least `min_cleared` of the history;
* **payback**: its extra cost on this call (the cache write, minus the reads it replaces, plus a
  summarizer call a model makes) must be repaid by the cheaper cached reads of the calls until the
  next compaction would be due (estimated from the growth per call so far), under every pricing
  profile in use;
* **ledger**: after it, the conversation must not have cost more than ``1 + slack`` times what it
  would have cost with no compaction at all, under every pricing profile in use. The policy keeps
  both running totals: what was paid, and what sending the whole history every call would have
  cost. Between compactions every call costs at most what the uncompacted call would (a shorter
  cached prefix, the same new tokens), so the bound holds at every call of every conversation,
  however it ends, by construction.

`always` is the policy without these rules (a compaction whenever the history is over the
trigger): what a pipeline does as written, for measuring it alone.

**Arrival does not put a compaction off.** A pipeline's arrival stage makes each message smaller
as it comes, so the history reaches the trigger later; the calls meanwhile send a large prompt
read from the cache where a compacted one would be small, and on the sessions that reach the
trigger that costs more than the folds save (4 of the corpus's 10 cost more than without
arrival, up to 1.04x, each compaction 18 to 24 calls later). So whether a compaction is due is
asked of the history plus what arrival took off its messages: those appended since the last
compaction (`unfolded_tokens`), and the folds that compaction kept (`arrival.folded_savings`,
which a compaction keeping more messages, folded, would otherwise hide). The trigger falls where
it would without arrival (the first compaction on the same call, the later ones no later), and
arrival only makes each call cheaper. Whether the compaction pays is still weighed on the history
as it is.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal

from .context import AgentContext, Message, marker_meta
from .errors import ConfigError
from .pricing import PricingProfile, get_profile
from .tokens import TokenCounter

PolicyName = Literal["pays", "always"]
POLICIES: tuple[PolicyName, ...] = ("pays", "always")

SLACK = 0.05
"""How much more than no compaction a conversation may ever have cost (5%): the room one
investment takes before the calls after it repay it."""
MIN_CLEARED = 0.2
"""The least share of the history a compaction must clear."""
RULES = ("compacted", "floor", "consecutive", "cleared", "payback", "ledger")
"""What a `Ledger` counts in `fired`: compactions made, and each rule that held one back."""


@dataclass(frozen=True)
class CompactionPolicy:
    """The rules (see the module docs) for compacting at `trigger` tokens.

    :param trigger: history size (tokens) above which a compaction is considered.
    :param headroom: history a compaction must find above what it keeps (default half the
        trigger); also how far the effective trigger rises above a floor it cannot go below.
    :param profiles: pricing profiles the compaction must pay under (each of them).
    :param slack: the share a conversation may ever cost above no compaction (`SLACK`).
    :param min_cleared: the least share of the history a compaction clears (`MIN_CLEARED`).
    :param mode: ``"pays"`` (the rules) or ``"always"`` (a compaction whenever over `trigger`).
    """

    trigger: int
    headroom: int | None = None
    profiles: tuple[PricingProfile, ...] = ()
    slack: float = SLACK
    min_cleared: float = MIN_CLEARED
    mode: PolicyName = "pays"

    def __post_init__(self) -> None:
        if self.trigger < 1:
            raise ConfigError(f"trigger {self.trigger} must be at least 1")
        if self.mode not in POLICIES:
            raise ConfigError(f"unknown policy {self.mode!r} (known: {', '.join(POLICIES)})")
        if not 0 <= self.slack < 1 or not 0 <= self.min_cleared < 1:
            raise ConfigError("policy slack and min_cleared must be in [0, 1)")
        if not self.profiles:
            object.__setattr__(self, "profiles", (get_profile("anthropic"), get_profile("openai")))

    @classmethod
    def of(
        cls,
        trigger: int,
        *,
        target: int | None = None,
        pricing: Sequence[str] = ("anthropic", "openai"),
        mode: PolicyName = "pays",
    ) -> CompactionPolicy:
        """The policy at `trigger`, with the headroom `trigger - target` when a target below
        the trigger is given, priced under the named profiles."""
        headroom = trigger - target if target is not None and 0 < target < trigger else None
        return cls(trigger, headroom, tuple(get_profile(p) for p in pricing), mode=mode)

    @property
    def room(self) -> int:
        """The headroom in tokens."""
        return self.headroom if self.headroom is not None else max(self.trigger // 2, 1)

    def ledger(self) -> Ledger:
        """A new conversation's state."""
        return Ledger(self)


@dataclass
class Ledger:
    """One conversation under a `CompactionPolicy`: call `due` before a model call, `judge` a
    compaction the pipeline made, and `record` every call as it was sent."""

    policy: CompactionPolicy
    threshold: int = 0
    """The effective trigger: the policy's, or above a floor the last compaction found."""
    calls: int = 0
    paid: dict[str, float] = field(default_factory=dict)
    """What the calls so far cost, per profile (summarizer calls included)."""
    uncompacted: dict[str, float] = field(default_factory=dict)
    """What they would have cost with the whole history sent every time."""
    fired: Counter[str] = field(default_factory=Counter)
    """How often each of `RULES` decided."""
    _raw_first: int | None = None
    _raw_last: int = 0
    _compacted_last: bool = False
    _waiting: dict[str, float] | None = None

    def __post_init__(self) -> None:
        self.threshold = self.policy.trigger
        for p in self.policy.profiles:
            self.paid.setdefault(p.name, 0.0)
            self.uncompacted.setdefault(p.name, 0.0)

    # ----------------------------------------------------------------- deciding

    def due(self, tokens: int) -> bool:
        """Whether to run the pipeline on a history of `tokens` before this call."""
        policy = self.policy
        if tokens <= policy.trigger:
            return False
        if policy.mode == "always":
            return True
        if tokens <= self.threshold:
            self.fired["floor"] += 1
            return False
        if self._compacted_last:
            self.fired["consecutive"] += 1
            return False
        if self._waiting is not None and not self._affordable(self._waiting, {}):
            self.fired["ledger"] += 1  # the last attempt's investment is not covered yet
            return False
        return True

    def judge(
        self,
        before: int,
        before_cached: int,
        after: int,
        after_cached: int,
        summarizer: Mapping[str, float] | None = None,
        raw: int | None = None,
        floor: int | None = None,
    ) -> str | None:
        """None when the compaction from `before` to `after` tokens is to be kept, else the
        rule that holds it back. `*_cached`: tokens each prompt shares with the last one sent;
        `summarizer`: dollars a model's summary costs, per profile; `raw`: the uncompacted
        history's tokens (default `before`); `floor`: the part of `after` no later compaction
        can remove (`floor`; default all of `after`)."""
        policy = self.policy
        if policy.mode == "always":
            return None
        self.threshold = max(policy.trigger, (after if floor is None else floor) + policy.room)
        cleared = before - after
        if cleared < policy.min_cleared * before:
            return self._held("cleared", before)
        growth = self._growth()
        calls_after = max((self.threshold - after) / growth, 1.0) if growth > 0 else 1.0
        extra: dict[str, float] = {}
        for p in policy.profiles:
            cost = p.cost(after, after_cached, 0) + (summarizer or {}).get(p.name, 0.0)
            extra[p.name] = cost - p.cost(before, before_cached, 0)
            saving = cleared * p.input * p.cache_read / 1_000_000
            if extra[p.name] > saving * calls_after:
                return self._held("payback", before)
        if not self._affordable(extra, {}, raw if raw is not None else before):
            self._waiting = extra
            return self._held("ledger", before)
        self._waiting = None
        self.fired["compacted"] += 1
        return None

    def unchanged(self, tokens: int) -> str:
        """The pipeline found nothing to remove from a history of `tokens`: all of it is the
        floor, so the next attempt waits until `headroom` more has come (rule `cleared`)."""
        self.threshold = max(self.policy.trigger, tokens + self.policy.room)
        return self._held("cleared")

    def _held(self, rule: str, before: int = 0) -> str:
        """Count `rule` as holding a compaction of `before` tokens back; the next attempt then
        waits for a quarter of the headroom more (a pipeline is not run on every call in vain)."""
        self.fired[rule] += 1
        self.threshold = max(self.threshold, before + self.policy.room // 4)
        return rule

    def _growth(self) -> float:
        """Tokens the uncompacted history grew by per call so far (0 before two calls)."""
        if self._raw_first is None or self.calls < 2:
            return 0.0
        return (self._raw_last - self._raw_first) / (self.calls - 1)

    def _affordable(
        self, extra: Mapping[str, float], summary: Mapping[str, float], raw: int | None = None
    ) -> bool:
        """Whether paying `extra` more on the next call keeps the conversation within
        `1 + slack` times its uncompacted cost, under every profile."""
        raw_now = raw if raw is not None else self._raw_last
        for p in self.policy.profiles:
            # the next call: what no compaction pays (the whole history, the last one cached)
            # and, at most, what this conversation pays without compacting (never more)
            bare = p.cost(raw_now, self._raw_last, 0)
            spent = self.paid[p.name] + bare + extra.get(p.name, 0.0) + summary.get(p.name, 0.0)
            if spent > (1 + self.policy.slack) * (self.uncompacted[p.name] + bare):
                return False
        return True

    # ----------------------------------------------------------------- recording

    def record(
        self,
        prompt: int,
        cached: int,
        output: int = 0,
        *,
        raw: int | None = None,
        raw_cached: int | None = None,
        compacted: bool = False,
        summarizer: Mapping[str, float] | None = None,
    ) -> None:
        """One model call as sent (`prompt` tokens, `cached` of them shared with the last
        prompt, `output` tokens), and as it would have been sent uncompacted (`raw` tokens, of
        which `raw_cached` cached; default: the last uncompacted prompt, whole)."""
        raw = prompt if raw is None else raw
        raw_cached = (self._raw_last if self.calls else 0) if raw_cached is None else raw_cached
        for p in self.policy.profiles:
            self.paid[p.name] += p.cost(prompt, cached, output)
            self.paid[p.name] += (summarizer or {}).get(p.name, 0.0)
            self.uncompacted[p.name] += p.cost(raw, min(raw_cached, raw), output)
        if self._raw_first is None:
            self._raw_first = raw
        self._raw_last = raw
        self.calls += 1
        self._compacted_last = compacted

    def output(self, tokens: int) -> None:
        """Output tokens of the last call, learned after it (the answer appended to the
        history, or the provider's usage): paid the same with or without compaction."""
        for p in self.policy.profiles:
            dollars = tokens * p.output / 1_000_000
            self.paid[p.name] += dollars
            self.uncompacted[p.name] += dollars

    def as_json(self) -> dict[str, object]:
        """What the policy decided, for reports: rule -> count."""
        return {rule: self.fired.get(rule, 0) for rule in RULES}


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


def unfolded_tokens(
    given: Sequence[Message], arrived: Sequence[Message], counter: TokenCounter
) -> int:
    """The tokens the arrival stage took off messages (`given`, and what they `arrived` as):
    added to the history's size when asking whether a compaction is due (see the module docs)."""
    if len(given) == len(arrived) and all(a is b for a, b in zip(given, arrived, strict=True)):
        return 0
    return max(0, sum(counter.messages(given)) - sum(counter.messages(arrived)))


def floor(ctx: AgentContext, counter: TokenCounter) -> int:
    """Tokens of what a compaction of `ctx` keeps whatever comes after: the system instruction,
    the messages up to the task, and up to the newest summary or omitted marker (which holds the
    user's words it carries). The turns after that marker are summarized by the next compaction,
    so a large newest turn raises the floor only for the call it is the newest in."""
    last = max((i for i, m in enumerate(ctx.messages) if marker_meta(m)), default=-1)
    task = ctx.first_user_index
    end = max(last + 1, 0 if task is None else task + 1)
    return counter.preamble(ctx) + sum(counter.messages(ctx.messages[:end]))


__all__ = [
    "MIN_CLEARED",
    "POLICIES",
    "RULES",
    "SLACK",
    "CompactionPolicy",
    "Ledger",
    "PolicyName",
    "floor",
    "unfolded_tokens",
]
