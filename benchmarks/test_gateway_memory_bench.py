"""What `compactkit gateway` keeps: its resident memory (the gateway's process and its planner
processes) after many distinct 1 MB conversations, against the fixed cost (the RSS after start-up
and a few requests) plus the `--max-memory` bound. A real gateway process on loopback in front
of a fake upstream, each conversation a new client's 1 MB first request, compacted.

    COMPACTKIT_RSS_CONVERSATIONS=1000 pytest benchmarks/test_gateway_memory_bench.py -s

Target: the RSS stays under the fixed cost plus the bound, at every hundredth conversation and at
the end."""

from __future__ import annotations

import functools
import json
import os
import random
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx

from .test_gateway_bench import _fake, _gateway, _start

MIB = 2**20
BOUND = 64 * MIB
"""The gateway's --max-memory."""
CONVERSATIONS = int(os.environ.get("COMPACTKIT_RSS_CONVERSATIONS", "1000"))
BODY = MIB
"""The size of each conversation's request."""
WARM = 5
"""Conversations sent before the fixed cost is measured."""
CLIENTS = 1
"""Clients sending at once: one, so that what a request takes while it is planned (some 35 times
its size, not held after it: outside --max-memory) is the same in the fixed cost and after."""
_WORDS = [f"{a}{b}" for a in ("ka", "lo", "mi", "nu", "pe", "ro", "si", "tu") for b in range(64)]


def body(n: int, size: int = BODY) -> bytes:
    """Conversation `n`'s first request: about `size` bytes of turns no other one repeats."""
    rng = random.Random(n)
    messages: list[dict[str, Any]] = []
    turn = 0
    while sum(len(m["content"]) for m in messages) < size:
        text = f"c{n} t{turn} " + " ".join(rng.choices(_WORDS, k=1500))
        messages.append({"role": "user" if turn % 2 == 0 else "assistant", "content": text})
        turn += 1
    if messages[-1]["role"] != "user":
        messages.append({"role": "user", "content": f"c{n}: and now?"})
    return json.dumps({"model": "m", "max_tokens": 9, "messages": messages}).encode()


def rss(pid: int) -> int:
    """The resident bytes of process `pid` and its descendants (Linux's /proc)."""
    return sum(rss_each(pid))


def rss_each(pid: int) -> list[int]:
    """The resident bytes of process `pid`, then of each of its descendants."""
    sizes, todo = [], [pid]
    while todo:
        p = todo.pop()
        try:
            status = Path(f"/proc/{p}/status").read_text()
            tasks = list(Path(f"/proc/{p}/task").iterdir())
        except OSError:
            continue
        line = next((x for x in status.splitlines() if x.startswith("VmRSS:")), "VmRSS: 0 kB")
        sizes.append(int(line.split()[1]) * 1024)
        for task in tasks:
            with_children = task / "children"
            if with_children.exists():
                todo += [int(c) for c in with_children.read_text().split()]
    return sizes


def rss_after(conversations: int, bound: int = BOUND, size: int = BODY) -> dict[str, Any]:
    """The gateway's RSS after `conversations` distinct conversations of `size` bytes each."""
    upstream, p1 = _start(_fake, None)
    # two planner processes, the CLI's default
    factory = functools.partial(_gateway, max_memory=bound, processes=2)
    gateway, p2 = _start(factory, upstream, daemon=False)
    samples: list[tuple[int, int]] = []

    def send(n: int) -> None:
        answer = client.post(
            gateway + "/v1/messages", content=body(n, size), headers={"x-api-key": f"client-{n}"}
        )
        assert answer.status_code == 200

    start = time.perf_counter()
    try:
        with httpx.Client(timeout=600) as client, ThreadPoolExecutor(CLIENTS) as pool:
            list(pool.map(send, range(WARM)))
            fixed = rss(p2.pid)
            fixed_each = rss_each(p2.pid)
            for at in range(WARM, WARM + conversations, 100):
                list(pool.map(send, range(at, min(at + 100, WARM + conversations))))
                samples.append((at + 100 - WARM, rss(p2.pid)))
            last_each = rss_each(p2.pid)
            stats = client.get(gateway + "/compactkit/stats").json()  # no key: no conversation
    finally:
        for p in (p1, p2):
            p.terminate()
    return {
        "conversations": conversations,
        "body_mib": round(size / MIB, 2),
        "bound_mib": round(bound / MIB, 1),
        "fixed_mib": round(fixed / MIB, 1),
        "rss_mib": [round(r / MIB, 1) for _, r in samples],
        "max_over_fixed_mib": round((max(r for _, r in samples) - fixed) / MIB, 1),
        "grown_each_mib": [
            round((b - a) / MIB, 1) for a, b in zip(fixed_each, last_each, strict=False)
        ],
        "compacted": stats["counters"]["compacted_requests"],
        "seconds": round(time.perf_counter() - start, 1),
        "_fixed": fixed,
        "_max": max(r for _, r in samples),
    }


def test_gateway_rss_after_many_distinct_conversations(benchmark: Any) -> None:
    figures = benchmark.pedantic(rss_after, args=(CONVERSATIONS,), rounds=1, iterations=1)
    fixed, top = figures.pop("_fixed"), figures.pop("_max")
    benchmark.extra_info.update(figures)
    print("\n" + json.dumps(figures))
    assert figures["compacted"] == CONVERSATIONS + WARM
    assert top <= fixed + BOUND, figures
