"""A plugin strategy in the gateway's pipeline runs under a time limit, in its worker process:
one that never returns fails that compaction alone (the request goes upstream as the client sent
it) instead of holding every request of every conversation."""

from __future__ import annotations

import json
import time
from collections.abc import Callable

import httpx

from compactkit import AgentContext, Strategy, hookimpl
from compactkit.gateway import GatewayConfig, create_app
from compactkit.registry import make_registry

from .upstream import FakeModel, serving


class NeverReturns(Strategy):
    name = "never-returns"
    description = "loops forever"

    def compact(self, ctx: AgentContext) -> AgentContext:
        while True:
            time.sleep(0.1)


class Plugin:
    @hookimpl
    def register_strategies(self, register: Callable[[type[Strategy]], None]) -> None:
        register(NeverReturns)


def test_a_plugin_that_never_returns_fails_its_compaction_alone(model: FakeModel) -> None:
    registry = make_registry(entry_points=False, plugins=[Plugin()])
    with serving(model.app()) as upstream:
        config = GatewayConfig(
            upstream_anthropic=upstream,
            pipeline="never-returns",
            trigger=200,
            target=100,
            strategy_timeout=2,
        )
        with serving(create_app(config, registry)) as gateway:
            big = {
                "model": "m",
                "max_tokens": 9,
                "messages": [{"role": "user", "content": "a " * 900}],
            }
            small = {"model": "m", "max_tokens": 9, "messages": [{"role": "user", "content": "hi"}]}
            for body in (big, small):
                answer = httpx.post(gateway + "/v1/messages", json=body, timeout=30)
                assert answer.status_code == 200
                assert json.loads(model.received[-1].body) == body  # as the client sent it
            stats = httpx.get(gateway + "/compactkit/stats").json()
    assert stats["counters"]["failed"] == 1 and stats["counters"]["requests"] == 2
