"""Replicas: two `compactkit gateway` processes sharing `--state redis://...` (a real
`redis-server` on loopback) serve one conversation whose requests alternate between them as one
gateway would: the same bodies upstream, compactions and figures carried from one to the other."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from .conftest import KEY, Start
from .test_gateway_summary import TASK, _turn
from .test_gateway_visible import _gateway, _stop
from .upstream import FakeModel

pytest.importorskip("redis", reason="the redis extra is not installed")

TRIGGER = 4000


def _redis_server() -> str:
    """Debian's redis-server, installed first when missing and this is root; skipped (with the
    reason) only where it cannot be installed and this is not CI."""
    found = shutil.which("redis-server")
    if found is None and hasattr(os, "geteuid") and os.geteuid() == 0 and shutil.which("apt-get"):
        subprocess.run(
            ["apt-get", "install", "-y", "redis-server"], capture_output=True, timeout=600
        )
        found = shutil.which("redis-server")
    if found is None:
        if os.environ.get("CI"):
            pytest.fail("no redis-server, and it could not be installed (apt-get install)")
        pytest.skip("no redis-server on PATH and it cannot be installed here (not root)")
    return found


@pytest.fixture
def redis_url(tmp_path: Any) -> Iterator[str]:
    """A fresh redis-server on a free loopback port, nothing saved to disk."""
    server = _redis_server()
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    proc = subprocess.Popen(
        [server, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
         "--dir", str(tmp_path)],
        stdout=subprocess.DEVNULL,
    )  # fmt: skip
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            break
        except OSError:
            time.sleep(0.05)
    try:
        yield f"redis://127.0.0.1:{port}/0"
    finally:
        proc.terminate()
        proc.wait(10)


def _converse(bases: list[str], turns: int) -> None:
    """One conversation, its n-th request sent to `bases[n % len(bases)]`."""
    messages: list[dict[str, Any]] = [{"role": "user", "content": TASK}]
    with httpx.Client(timeout=60) as client:
        for n in range(turns):
            body = {"model": "claude-test", "max_tokens": 256, "system": "Be careful.",
                    "messages": messages}  # fmt: skip
            got = client.post(
                bases[n % len(bases)] + "/v1/messages", json=body, headers={"x-api-key": KEY}
            )
            assert got.status_code == 200
            _turn(messages, n)


def test_two_gateways_on_one_redis_serve_a_conversation_as_one(
    model: FakeModel, upstream: str, start_gateway: Start, redis_url: str
) -> None:
    options = ("--trigger", str(TRIGGER), "--policy", "always", "--summarizer", "extractive")
    options = (*options, "--state", redis_url)
    one, base_one, _ = _gateway(upstream, *options)
    two, base_two, _ = _gateway(upstream, *options)
    try:
        _converse([base_one, base_two], 16)
        figures = [
            httpx.get(b + "/compactkit/stats", headers={"x-api-key": KEY}).json()
            for b in (base_one, base_two)
        ]
    finally:
        _stop(one)
        _stop(two)
    alternating = [r.body for r in model.received if r.path == "/v1/messages"]
    model.received.clear()
    _converse([start_gateway(trigger=TRIGGER)], 16)  # one gateway, in memory
    alone = [r.body for r in model.received if r.path == "/v1/messages"]
    assert len(alternating) == len(alone) == 16
    assert alternating == alone  # the compacted prefix carried from one replica to the other
    # each replica's figures are the conversation's, as the last write left them: the one that
    # served the last request (the second) counts all 16 and the compactions made on either
    (conv,) = figures[1]["conversations"].values()
    assert conv["requests"] == 16 and conv["compactions"] >= 2
    assert list(figures[0]["conversations"]) == list(figures[1]["conversations"])


def test_a_gateway_on_redis_resets_the_serve_state_an_mcp_proxy_reads(redis_url: str) -> None:
    """The client's own compaction through a gateway on Redis forgets, in the serve state of the
    same session in the same database (what `mcp-proxy --state redis://...` serves from), what
    the model no longer holds: the next read is sent in full."""
    from compactkit.gateway import GatewayConfig
    from compactkit.gateway.app import Policy
    from compactkit.serve.redis_store import RedisServeStore
    from tests.serve.test_reset import FILES, TARGET, TOOL, _plan, _store_read
    from tests.serve.test_reset import TRIGGER as RESET_TRIGGER
    from tests.serve.test_reset import Conversation as Client

    policy = Policy(GatewayConfig(state=redis_url, trigger=RESET_TRIGGER, target=TARGET))
    store = RedisServeStore(redis_url)
    text = FILES["conversations.py"].read_text(encoding="utf-8")
    assert _store_read(store, "s1", "conversations.py", text)  # type: ignore[arg-type]
    conv = Client("s1")
    call = {"type": "tool_use", "id": "t1", "name": TOOL, "input": {"path": "conversations.py"}}
    result = {"type": "tool_result", "tool_use_id": "t1", "content": text}
    conv.messages += [
        {"role": "assistant", "content": [call]},
        {"role": "user", "content": [result]},
    ]
    _plan(policy, "anthropic", conv.body())
    assert not _store_read(store, "s1", "conversations.py", text)  # type: ignore[arg-type]
    conv.messages = [{"role": "user", "content": "Summary of the review so far: nothing found."}]
    _plan(policy, "anthropic", conv.body())
    assert _store_read(store, "s1", "conversations.py", text)  # type: ignore[arg-type]
    policy.conversations.close()
