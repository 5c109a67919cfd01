"""Every corpus conversation replayed through `compactkit gateway` into a recording fake upstream,
beside `bench --mode persistent` on the same pipeline and trigger; and the gateway's added latency
per request against a do-nothing HTTP relay on the same stack, measured in the same run.

    python benchmarks/gateway_replay.py [CORPUS_DIR] [--trigger N] [--target M] [--limit S]
                                        [--json FILE]

Prints a markdown table; `--json` also writes each conversation's figures (`make figures` writes
docs/gateway.md's table from them)."""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

import httpx
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from compactkit import load  # noqa: E402
from compactkit.bench.jobs import collect_sessions  # noqa: E402
from compactkit.bench.pricing import get_profile  # noqa: E402
from compactkit.bench.replay import run_session  # noqa: E402
from compactkit.gateway import GatewayConfig, create_app  # noqa: E402
from compactkit.pipeline import build_pipeline  # noqa: E402
from compactkit.registry import get_counter  # noqa: E402
from tests.gateway.replay import PROFILES, api_for, as_sent, price, replay, requests_of  # noqa: E402
from tests.gateway.upstream import FakeModel, serving  # noqa: E402


def relay_app(upstream: str) -> Starlette:
    """A do-nothing HTTP relay on the gateway's stack: body in, body out."""
    client = httpx.AsyncClient(timeout=120)

    async def relay(request: Request) -> Response:
        got = await client.post(
            upstream + request.url.path,
            content=await request.body(),
            headers={"content-type": "application/json"},
        )
        return Response(got.content, status_code=got.status_code, media_type="application/json")

    return Starlette(routes=[Route("/{path:path}", relay, methods=["POST"])])


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("corpus", nargs="?", default=str(ROOT.parent / "shared" / "corpus"))
    parser.add_argument("--trigger", type=int, default=30_000)
    parser.add_argument("--target", type=int, default=15_000)
    parser.add_argument("--limit", type=int, default=0, help="at most this many conversations")
    parser.add_argument(
        "--latency", action="store_true", help="also time each session's last request"
    )
    parser.add_argument("--json", type=Path, help="also write each conversation's figures here")
    args = parser.parse_args()
    counter = get_counter()
    pipeline_specs = build_specs(args.target)
    rows = []
    lat = {"relay": [], "gateway": []}
    print(f"trigger {args.trigger:,}, target {args.target:,}\n")
    print(HEADER, flush=True)
    model = FakeModel(turns=0)
    with serving(model.app()) as upstream, serving(relay_app(upstream)) as relay:
        config = GatewayConfig(
            upstream_anthropic=upstream,
            upstream_openai=upstream,
            pipeline=pipeline_specs,
            trigger=args.trigger,
            target=args.target,
        )
        with serving(create_app(config)) as gateway:
            n = 0
            for address in collect_sessions([args.corpus]):
                try:
                    contexts = load(address)
                except Exception as exc:
                    print(f"skip {address}: {type(exc).__name__}", file=sys.stderr)
                    continue
                for number, original in enumerate(contexts):
                    if args.limit and n >= args.limit:
                        break
                    n += 1
                    path = Path(address)
                    api = api_for(path)
                    try:
                        body, ctx = as_sent(original, api)
                    except Exception as exc:
                        print(f"skip {address}#{number}: {type(exc).__name__}", file=sys.stderr)
                        continue
                    if not requests_of(body, ctx):
                        continue
                    start = len(model.received)
                    points = replay(gateway, api, body, ctx, session=f"{address}#{number}")
                    got = price(api, [r.body for r in model.received[start:]], ctx, points)
                    bench = run_session(
                        path.name,
                        ctx,
                        build_pipeline(pipeline_specs, budget=args.target),
                        "persistent",
                        counter,
                        [get_profile(p) for p in PROFILES],
                        trigger=args.trigger,
                    )
                    if args.latency:
                        timing(relay, gateway, api, body, ctx, lat)
                    rows.append((path.parent.name, f"{path.name[:40]}#{number}", got, bench))
                    print_row(*rows[-1])
    print_table(rows, lat, args)
    if args.json:
        args.json.write_text(json.dumps(as_json(rows, args), indent=1) + "\n", encoding="utf-8")


def as_json(rows, args) -> dict:
    """Each conversation: what the bench says and what the upstream received."""
    return {
        "trigger": args.trigger,
        "target": args.target,
        "conversations": [
            {
                "folder": fmt,
                "session": name,
                "calls": got.calls,
                "compactions": bench.compactions,
                "bench_prompt_tokens": bench.prompt_tokens,
                "upstream_prompt_tokens": got.prompt_tokens,
                "bench_cached_tokens": bench.cached_tokens,
                "upstream_cached_tokens": got.cached_tokens,
                "bench_cost_anthropic": round(bench.cost["anthropic"], 6),
                "upstream_cost_anthropic": round(got.cost["anthropic"], 6),
            }
            for fmt, name, got, bench in rows
        ],
    }


def build_specs(target: int) -> list[str]:
    return [
        "etag-collapse",
        f"llm-summary:max_tokens={target},summary_max_tokens={min(4000, target // 4)}",
        f"sliding-window:max_tokens={target}",
    ]


def timing(relay: str, gateway: str, api: str, body: dict, ctx, lat: dict) -> None:
    """The session's last request, through the relay and the gateway, alternately (3 each)."""
    path = "/v1/messages" if api == "anthropic" else "/v1/chat/completions"
    _, last = requests_of(body, ctx)[-1]
    raw = json.dumps(last).encode()
    with httpx.Client(timeout=120) as client:
        for _ in range(3):
            for name, base in (("relay", relay), ("gateway", gateway)):
                t = time.perf_counter()
                client.post(base + path, content=raw, headers={"x-compactkit-session": "timing"})
                lat[name].append(time.perf_counter() - t)


HEADER = (
    "| format | session | calls | compactions | bench prompt tok | upstream prompt tok "
    "| bench cached | upstream cached | bench cost (anthropic) | upstream cost (anthropic) |\n"
    "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"
)


def print_row(fmt, name, got, bench) -> None:
    print(
        f"| {fmt} | {name} | {got.calls} | {bench.compactions} | {bench.prompt_tokens:,} | "
        f"{got.prompt_tokens:,} | {bench.cached_tokens:,} | {got.cached_tokens:,} | "
        f"{bench.cost['anthropic']:.4f} | {got.cost['anthropic']:.4f} |",
        flush=True,
    )


def print_table(rows, lat, args) -> None:
    totals = [0, 0, 0, 0, 0.0, 0.0]
    for _, _, got, bench in rows:
        for i, v in enumerate(
            (
                bench.prompt_tokens,
                got.prompt_tokens,
                bench.cached_tokens,
                got.cached_tokens,
                bench.cost["anthropic"],
                got.cost["anthropic"],
            )
        ):
            totals[i] += v
    print(
        f"| **all** | {len(rows)} conversations | | | {totals[0]:,} | {totals[1]:,} | {totals[2]:,} | "
        f"{totals[3]:,} | {totals[4]:.4f} | {totals[5]:.4f} |"
    )
    equal = sum(
        1
        for *_, got, bench in rows
        if (got.prompt_tokens, got.cached_tokens) == (bench.prompt_tokens, bench.cached_tokens)
    )
    print(f"\nidentical (prompt and cached tokens): {equal} of {len(rows)} conversations")
    for name in ("relay", "gateway"):
        xs = sorted(lat[name])
        if xs:
            p99 = xs[min(len(xs) - 1, int(len(xs) * 0.99))]
            median = statistics.median(xs) * 1000
            print(f"{name}: median {median:.1f} ms, p99 {p99 * 1000:.1f} ms ({len(xs)} requests)")
    if lat["relay"] and lat["gateway"]:
        ratio = statistics.median(lat["gateway"]) / statistics.median(lat["relay"])
        print(f"gateway / relay median: {ratio:.2f}x")


if __name__ == "__main__":
    main()
