"""Fixtures for the gateway tests: a scripted fake upstream and a gateway in front of it, both
on loopback at free ports."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("uvicorn", reason="the gateway extra is not installed")

from compactkit.gateway import GatewayConfig, create_app
from compactkit.gateway.protocol import timed_protocol
from tests.live.conftest import claude_cli, codex_cli, fake_upstream, sandbox  # noqa: F401

from .upstream import FakeModel, serving

SOURCE = (
    Path(__file__).resolve().parents[2]
    / "examples"
    / "sessions"
    / "gemini3pro_sphinx-doc__sphinx-9229.traj.json"
)
KEY = "sk-ant-test-0123456789abcdefSECRET"


def chunk(path: str) -> str:
    """The file the fake model asks to read: 2,500 characters of a real agent trajectory."""
    n = int(path.removeprefix("chunk"))
    text = SOURCE.read_text(encoding="utf-8")
    return text[n * 2500 : (n + 1) * 2500]


@pytest.fixture
def model() -> FakeModel:
    return FakeModel()


@pytest.fixture
def upstream(model: FakeModel) -> Iterator[str]:
    with serving(model.app()) as url:
        yield url


Start = Callable[..., Any]


@pytest.fixture
def start_gateway(upstream: str) -> Iterator[Start]:
    """Start a gateway (options as GatewayConfig's) in front of the fake upstream."""
    stack: list[Any] = []

    def start(**options: Any) -> str:
        # these tests drive short conversations through the gateway's mechanics, where a
        # compaction never pays for itself; the policy is the replay test's (equal to the bench)
        options.setdefault("policy", "always")
        config = GatewayConfig(upstream_anthropic=upstream, upstream_openai=upstream, **options)
        cm = serving(create_app(config), timed_protocol(config.read_timeout))  # as the CLI serves
        url = cm.__enter__()
        stack.append(cm)
        return url

    yield start
    for cm in reversed(stack):
        cm.__exit__(None, None, None)
