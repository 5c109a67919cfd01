"""A plugin strategy in the gateway's pipeline runs under a time limit, in its worker process:
one that never returns fails that compaction alone (the request goes upstream as the client sent
it) instead of holding every request of every conversation."""

from __future__ import annotations

import json
import os
import signal
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

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


class EndsItsProcess(Strategy):
    name = "ends-its-process"
    description = "kills the process it runs in (a crash, the kernel's OOM killer)"

    def compact(self, ctx: AgentContext) -> AgentContext:
        os.kill(os.getpid(), signal.SIGKILL)
        raise AssertionError("killed")


class Plugin:
    @hookimpl
    def register_strategies(self, register: Callable[[type[Strategy]], None]) -> None:
        register(NeverReturns)
        register(EndsItsProcess)


def _big_then_small(model: FakeModel, gateway: str) -> None:
    """A request past the trigger, then a small one: each reaches the upstream as sent."""
    big = {"model": "m", "max_tokens": 9, "messages": [{"role": "user", "content": "a " * 900}]}
    small = {"model": "m", "max_tokens": 9, "messages": [{"role": "user", "content": "hi"}]}
    for body in (big, small):
        answer = httpx.post(gateway + "/v1/messages", json=body, timeout=60)
        assert answer.status_code == 200
        assert json.loads(model.received[-1].body) == body  # as the client sent it


@contextmanager
def _gateway(model: FakeModel, pipeline: str, **options: Any) -> Iterator[tuple[Any, str]]:
    """A gateway (its app, its URL) whose pipeline is one of the plugin's strategies, compacting
    past 200 tokens, the fake model upstream."""
    registry = make_registry(entry_points=False, plugins=[Plugin()])
    with serving(model.app()) as upstream:
        config = GatewayConfig(
            upstream_anthropic=upstream, pipeline=pipeline, trigger=200, target=100, **options
        )
        app = create_app(config, registry)
        with serving(app) as gateway:
            yield app, gateway


def test_a_plugin_that_never_returns_fails_its_compaction_alone(model: FakeModel) -> None:
    with _gateway(model, "never-returns", strategy_timeout=2) as (_, gateway):
        _big_then_small(model, gateway)
        stats = httpx.get(gateway + "/compactkit/stats").json()
    assert stats["counters"]["failed"] == 1 and stats["counters"]["requests"] == 2


def test_a_planner_process_that_ends_costs_its_request_only_its_compaction(
    model: FakeModel,
) -> None:
    """A strategy run in-process (`strategy_timeout=0`) ends the planner process planning the
    request: the request goes upstream as the client sent it, counted as failed; the next
    request is planned by a fresh planner."""
    with _gateway(model, "ends-its-process", strategy_timeout=0, processes=1) as (app, gateway):
        planners = app.state.gateway.planners
        first = planners._planner(0).process
        _big_then_small(model, gateway)
        assert first.exitcode == -signal.SIGKILL and planners._planner(0).process is not first
        stats = httpx.get(gateway + "/compactkit/stats").json()
    assert stats["counters"]["failed"] == 1 and stats["counters"]["requests"] == 2
    assert stats["counters"]["passed_through"] == 1  # the small one, by the fresh planner
