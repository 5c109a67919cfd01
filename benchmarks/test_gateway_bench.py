"""`compactkit gateway`'s added latency per request against a do-nothing HTTP relay on the same
stack (starlette + uvicorn + httpx), each in its own process, measured alternately in one run over
a real session's requests (median and p99, and their ratio; target <= 1.2x the relay's median);
and the memory one conversation holds."""

from __future__ import annotations

import json
import multiprocessing
import socket
import statistics
import time
import tracemalloc
from pathlib import Path
from typing import Any

import httpx
import pytest
import uvicorn

from compactkit import load_one
from compactkit.gateway import GatewayConfig, create_app, wire
from compactkit.gateway.app import Policy, listening_socket
from compactkit.serve import SqliteServeStore, serve_key
from tests.gateway.replay import as_sent, requests_of
from tests.gateway.upstream import FakeModel

from .gateway_replay import build_specs, relay_app

ROOT = Path(__file__).resolve().parents[1]
SESSIONS = {
    # (file, API): a Claude Code session to 100k tokens, a chat-shaped agent to 80k
    "claude-code": (
        ROOT.parent / "shared/corpus/claude_code_jsonl/codemie_session-3fe1b6bc.jsonl",
        "anthropic",
    ),
    "swe-agent": (
        ROOT / "examples/sessions/gemini3pro_sphinx-doc__sphinx-9229.traj.json",
        "openai-chat",
    ),
}
TRIGGER, TARGET = 30_000, 15_000


def _serve(sock: socket.socket, factory: Any, arg: Any) -> None:
    uvicorn.Server(uvicorn.Config(factory(arg), log_level="warning")).run(sockets=[sock])


def _start(factory: Any, arg: Any, *, daemon: bool = True) -> tuple[str, Any]:
    """`factory(arg)` served in a forked process (`daemon=False`: one that may start its own,
    the gateway's planner processes)."""
    sock = listening_socket("127.0.0.1", 0)  # as `compactkit gateway` listens, for all three
    url = f"http://127.0.0.1:{sock.getsockname()[1]}"
    process = multiprocessing.get_context("fork").Process(
        target=_serve, args=(sock, factory, arg), daemon=daemon
    )
    process.start()
    for _ in range(400):  # bounded: 20 s
        try:
            httpx.get(url + "/ready", timeout=1)
            break
        except httpx.HTTPError:
            time.sleep(0.05)
    return url, process


def _fake(_: Any) -> Any:
    return FakeModel(turns=0).app()


def _gateway(upstream: str, **options: Any) -> Any:
    """The benchmarks' gateway (`options`: more `GatewayConfig` fields)."""
    config = GatewayConfig(
        upstream_anthropic=upstream,
        upstream_openai=upstream,
        pipeline=build_specs(TARGET),
        trigger=TRIGGER,
        target=TARGET,
        policy="always",  # what a compaction adds to a request is measured, on every crossing
        **options,
    )
    return create_app(config)


def _requests(name: str) -> tuple[str, list[bytes]]:
    path, api = SESSIONS[name]
    if not path.exists():
        pytest.skip(f"{path.name} is not present")
    body, ctx = as_sent(load_one(path), api)  # type: ignore[arg-type]
    route = "/v1/messages" if api == "anthropic" else "/v1/chat/completions"
    return route, [json.dumps(r).encode() for _, r in requests_of(body, ctx)]


def alternate(
    route: str,
    requests: list[bytes],
    relay: str,
    gateway: str,
    headers: dict[str, str],
    think: float = 0.0,
) -> tuple[dict[str, list[float]], dict[str, Any]]:
    """Each request through the relay, then through the gateway (`think` seconds before the
    next): the seconds each took on each side, and the gateway's stats after."""
    latency: dict[str, list[float]] = {"relay": [], "gateway": []}
    with httpx.Client(timeout=120) as client:
        for raw in requests:
            for side, base in (("relay", relay), ("gateway", gateway)):
                start = time.perf_counter()
                answer = client.post(base + route, content=raw, headers=headers)
                latency[side].append(time.perf_counter() - start)
                assert answer.status_code == 200
            time.sleep(think)
        stats: dict[str, Any] = client.get(gateway + "/compactkit/stats", headers=headers).json()
    return latency, stats


def replay_latency(name: str) -> dict[str, Any]:
    route, requests = _requests(name)
    upstream, p1 = _start(_fake, None)
    relay, p2 = _start(relay_app, upstream)
    gateway, p3 = _start(_gateway, upstream)
    try:
        headers = {"x-compactkit-session": name}
        latency, stats = alternate(route, requests, relay, gateway, headers)
    finally:
        for p in (p1, p2, p3):
            p.terminate()
    out: dict[str, Any] = {
        "requests": len(requests),
        "compacted": stats["counters"]["compacted_requests"],
    }
    for side, values in latency.items():
        ordered = sorted(values)
        out[f"{side}_median_ms"] = round(statistics.median(ordered) * 1000, 1)
        out[f"{side}_p99_ms"] = round(
            ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))] * 1000, 1
        )
    out["median_ratio"] = round(out["gateway_median_ms"] / out["relay_median_ms"], 2)
    out["p99_ratio"] = round(out["gateway_p99_ms"] / out["relay_p99_ms"], 2)
    return out


@pytest.mark.parametrize("name", list(SESSIONS))
def test_gateway_latency_against_a_do_nothing_relay(benchmark: Any, name: str) -> None:
    figures = benchmark.pedantic(replay_latency, args=(name,), rounds=1, iterations=1)
    benchmark.extra_info.update(figures)
    print("\n" + json.dumps({name: figures}))
    assert figures["compacted"] > 0


@pytest.mark.parametrize("name", list(SESSIONS))
def test_memory_one_conversation_holds(benchmark: Any, name: str) -> None:
    """Bytes allocated and still held after a session's requests went through the policy (parsed
    as the app parses them: the last bodies' text is kept)."""
    _, requests = _requests(name)
    api = SESSIONS[name][1]

    def run() -> dict[str, Any]:
        policy = Policy(
            GatewayConfig(
                pipeline=build_specs(TARGET), trigger=TRIGGER, target=TARGET, policy="always"
            )
        )
        policy.counter.text("warm")
        tracemalloc.start()
        for raw in requests:
            parsed = policy.parse(raw)  # as the app parses (recent bodies kept)
            if parsed is None:
                parsed = json.loads(raw)
            policy.plan(api, parsed, wire.conversation_key(api, parsed, name), raw)  # type: ignore[arg-type]
        held, _ = tracemalloc.get_traced_memory()
        tracemalloc.stop()
        return {
            "held_mib": round(held / 2**20, 1),
            "last_request_mib": round(len(requests[-1]) / 2**20, 2),
        }

    figures = benchmark.pedantic(run, rounds=1, iterations=1)
    benchmark.extra_info.update(figures)
    print("\n" + json.dumps({name: figures}))


def _plan_seconds(name: str, db: Path, session: str | None) -> tuple[float, int, int]:
    """Seconds a session's requests take through a policy with `--state db`, the etags it reset
    in the serve state `session` names (None: it names none), and the entries that state kept."""
    _, requests = _requests(name)
    api = SESSIONS[name][1]
    policy = Policy(
        GatewayConfig(
            pipeline=build_specs(TARGET),
            trigger=TRIGGER,
            target=TARGET,
            state=str(db),
            policy="always",
        )
    )
    policy.counter.text("warm")
    store = SqliteServeStore(db)
    for i in range(200):  # the tool server served 200 other files in this session
        key, path = serve_key("read_text_file", {"path": f"src/f{i}.py"})
        store.serve(name, key, f"print({i})\n" * 50, path=path)
    served, reset = policy.served, []
    assert served is not None
    forget = served.reset
    served.reset = lambda s, etags=None: (reset.extend(etags or ()), forget(s, etags))[1]  # type: ignore[method-assign]
    start = time.perf_counter()
    for raw in requests:
        parsed = json.loads(raw)
        policy.plan(api, parsed, wire.conversation_key(api, parsed, name), raw, session)  # type: ignore[arg-type]
    seconds = time.perf_counter() - start
    return seconds, len(reset), len(store.load(name).served)


@pytest.mark.parametrize("name", list(SESSIONS))
def test_serve_reset_costs_the_policy_little(benchmark: Any, name: str, tmp_path: Path) -> None:
    """The gateway with `--state` resetting the serve state of the session its requests name,
    against the same gateway naming none, alternating, in one run."""

    def run() -> dict[str, Any]:
        named, unnamed = [], []
        for n in range(2):
            unnamed.append(_plan_seconds(name, tmp_path / f"u{n}.db", None))
            named.append(_plan_seconds(name, tmp_path / f"n{n}.db", name))
        fastest = min(s for s, _, _ in named), min(s for s, _, _ in unnamed)
        return {
            "named_s": round(fastest[0], 2),
            "unnamed_s": round(fastest[1], 2),
            "ratio": round(fastest[0] / fastest[1], 2),
            "etags_reset": named[0][1],
            "entries_kept": named[0][2],
        }

    figures = benchmark.pedantic(run, rounds=1, iterations=1)
    benchmark.extra_info.update(figures)
    print("\n" + json.dumps({name: figures}))
    assert figures["etags_reset"] > 0  # the compactions removed tool results
    assert figures["entries_kept"] == 200  # and never what the session's contexts did not show
