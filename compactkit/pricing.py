"""Provider pricing profiles: what a prompt costs once prompt caching is counted.

Prices are US dollars per million tokens. The profiles model how each provider bills a prompt whose
prefix equals the previous call's prompt:

* ``anthropic`` (Claude Sonnet 4 list prices): input 3.00, output 15.00; the cached prefix is read at
  0.1x input, every other prompt token is written to the cache at 1.25x input (each call is assumed to
  set a cache breakpoint at its end, as agent harnesses do).
* ``openai`` (GPT-4.1 list prices): input 2.00, output 8.00; cached input at 0.25x, only when the
  common prefix is at least 1,024 tokens, counted in 128-token steps (cached = 1024 + 128k).
* ``nocache``: input 3.00, output 15.00 and no caching: the cost of tokens alone.
"""

from __future__ import annotations

from dataclasses import dataclass

from .errors import ConfigError


@dataclass(frozen=True)
class PricingProfile:
    name: str
    input: float
    output: float
    cache_read: float
    """Multiplier of `input` for cached prefix tokens."""
    cache_write: float
    """Multiplier of `input` for prompt tokens not read from the cache."""
    min_cached: int = 0
    step: int = 1
    description: str = ""

    def billable_cached(self, prefix_tokens: int) -> int:
        """How many of the common-prefix tokens the provider actually bills as cached."""
        if prefix_tokens < max(self.min_cached, 1):
            return 0
        if self.step <= 1:
            return prefix_tokens
        return self.min_cached + (prefix_tokens - self.min_cached) // self.step * self.step

    def summary_cost(self, input_tokens: int, cached_tokens: int, output_tokens: int) -> float:
        """Dollars for one summarizer call: the part of its input read from the conversation's
        cached prefix at the cache-read rate, the rest at the input price (a one-off call writes
        no cache), the summary at the output price."""
        cached = min(self.billable_cached(cached_tokens), input_tokens)
        dollars = (
            cached * self.input * self.cache_read
            + (input_tokens - cached) * self.input
            + output_tokens * self.output
        )
        return dollars / 1_000_000

    def cost(self, prompt_tokens: int, prefix_tokens: int, output_tokens: int) -> float:
        """Dollars for one call."""
        cached = min(self.billable_cached(prefix_tokens), prompt_tokens)
        fresh = prompt_tokens - cached
        dollars = (
            cached * self.input * self.cache_read
            + fresh * self.input * self.cache_write
            + output_tokens * self.output
        )
        return dollars / 1_000_000


PROFILES: dict[str, PricingProfile] = {
    "anthropic": PricingProfile(
        "anthropic",
        input=3.0,
        output=15.0,
        cache_read=0.1,
        cache_write=1.25,
        description="Claude Sonnet 4: cache read 0.1x, cache write 1.25x",
    ),
    "openai": PricingProfile(
        "openai",
        input=2.0,
        output=8.0,
        cache_read=0.25,
        cache_write=1.0,
        min_cached=1024,
        step=128,
        description="GPT-4.1: cached input 0.25x from 1,024 tokens in 128-token steps",
    ),
    "nocache": PricingProfile(
        "nocache",
        input=3.0,
        output=15.0,
        cache_read=1.0,
        cache_write=1.0,
        description="no prompt caching",
    ),
}


def get_profile(name: str) -> PricingProfile:
    try:
        return PROFILES[name]
    except KeyError:
        raise ConfigError(
            f"unknown pricing profile {name!r} (known: {', '.join(sorted(PROFILES))})"
        ) from None
