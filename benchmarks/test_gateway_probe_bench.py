"""One slow request never stalls the rest: a probe client's latency through `compactkit gateway`
alone (before and after), and while another client sends the audit's hostile request (2 MB:
25,000 tiny user and assistant turns, whose compaction takes the gateway seconds), in one run.
Target: the probe's median while the hostile request is planned <= 1.5x its median alone, met by
the gateway's planner processes (`GatewayConfig.processes`): the hostile request is planned in
another process than the probe's, at a lower priority than the gateway's own."""

from __future__ import annotations

import functools
import json
import statistics
import threading
import time
from typing import Any

import httpx

from .test_gateway_bench import TARGET, TRIGGER, _fake, _gateway, _start

PROBES = 30
MAX_RATIO = 1.5
PROCESSES = 2


def hostile_body(turns: int = 25_000) -> bytes:
    messages: list[dict[str, Any]] = []
    for n in range(turns):
        messages.append({"role": "user", "content": f"u{n} ok go on"})
        messages.append({"role": "assistant", "content": f"a{n} fine"})
    messages.append({"role": "user", "content": "and now?"})
    return json.dumps({"model": "m", "max_tokens": 9, "messages": messages}).encode()


def _probe(client: httpx.Client, base: str, n: int) -> float:
    body = {"model": "m", "max_tokens": 9, "messages": [{"role": "user", "content": f"ping {n}"}]}
    start = time.perf_counter()
    answer = client.post(base + "/v1/messages", json=body, headers={"x-api-key": "probe"})
    assert answer.status_code == 200
    return time.perf_counter() - start


def probe_latency() -> dict[str, Any]:
    upstream, p1 = _start(_fake, None)
    # planning in the gateway's planner processes
    gateway, p2 = _start(functools.partial(_gateway, processes=PROCESSES), upstream, daemon=False)
    hostile = hostile_body()
    done: list[float] = []

    def send() -> None:
        start = time.perf_counter()
        with httpx.Client(timeout=900) as client:
            answer = client.post(
                gateway + "/v1/messages", content=hostile, headers={"x-api-key": "hostile"}
            )
        assert answer.status_code == 200
        done.append(time.perf_counter() - start)

    try:
        with httpx.Client(timeout=120) as client:
            for n in range(3):  # warm: connections, the tokenizer
                _probe(client, gateway, n)
            alone = [_probe(client, gateway, n) for n in range(PROBES)]
            sender = threading.Thread(target=send, daemon=True)
            sender.start()
            time.sleep(2.0)  # the body sent and parsed: its compaction under way
            during = [_probe(client, gateway, n) for n in range(PROBES)]
            overlapped = sender.is_alive()
            sender.join(900)
            alone += [_probe(client, gateway, n) for n in range(PROBES)]  # and after it
    finally:
        for p in (p1, p2):
            p.terminate()
    out = {
        "hostile_bytes": len(hostile),
        "hostile_s": round(done[0], 1) if done else None,
        "probes_within_hostile": overlapped,
        "alone_median_ms": round(statistics.median(alone) * 1000, 1),
        "during_median_ms": round(statistics.median(during) * 1000, 1),
        "during_max_ms": round(max(during) * 1000, 1),
    }
    out["median_ratio"] = round(out["during_median_ms"] / out["alone_median_ms"], 2)
    return out


def test_a_hostile_request_does_not_slow_another_client(benchmark: Any) -> None:
    figures = benchmark.pedantic(probe_latency, rounds=1, iterations=1)
    benchmark.extra_info.update(figures)
    benchmark.extra_info.update({"trigger": TRIGGER, "target": TARGET})
    print("\n" + json.dumps(figures))
    assert figures["probes_within_hostile"], "the hostile request ended before the probes did"
    assert figures["median_ratio"] <= MAX_RATIO, figures
