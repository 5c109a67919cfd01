"""Replay the file reads of corpus conversations through `compactkit mcp-proxy` in front of the
reference filesystem server, and directly against the same server.

For each conversation: a workspace holds one file per path the session read (per path and line range
for ranged reads: each range is a view of its own, as it is to etag-collapse); before each read,
the file is rewritten when the content that read returned differs from what it holds; then
`read_text_file` is called in session order through the proxy and directly. Reported: tokens
served with and without the proxy (o200k_base), whether every marker names content the model was
sent in full earlier in the same conversation (and still holds: nothing is compacted here), the
tokens etag-collapse leaves of the same reads when applied to the saved session afterwards, and
the per-call latency of both paths.

    .venv/bin/python -m benchmarks.serve_replay            # every corpus conversation with reads
    .venv/bin/python -m benchmarks.serve_replay --json out/serve_replay.json
"""

from __future__ import annotations

import argparse
import itertools
import json
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, cast

import anyio
from mcp import ClientSession, StdioServerParameters, stdio_client, types

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from compactkit import AgentContext  # noqa: E402
from compactkit.context import (  # noqa: E402
    TextBlock,
    ToolCallBlock,
    ToolResultBlock,
    canonical_json,
    marker_text,
)
from compactkit.registry import get_counter  # noqa: E402
from compactkit.serve.mcp_proxy import COMPACTED, META_SERVE  # noqa: E402
from compactkit.serve.state import text_etag, view_arguments  # noqa: E402
from compactkit.strategies.etag_collapse import EtagCollapse  # noqa: E402
from compactkit.toolcall import payload_path, read_call  # noqa: E402
from tests.serve.servers import PROXY, filesystem_server  # noqa: E402

SDK_SERVER = str(ROOT / "tests" / "serve" / "sdk_server.py")

LINE_RELAY = str(Path(__file__).with_name("line_relay.py"))

_ORDERS = list(itertools.permutations(("direct", "proxy", "relay")))


@dataclass(frozen=True)
class Read:
    call_id: str
    path: str
    """The file, with the other arguments of the read (a line range is a view of its own)."""
    text: str


@dataclass
class SessionReplay:
    name: str
    reads: int = 0
    direct_tokens: int = 0
    proxy_tokens: int = 0
    collapse_tokens: int = 0
    markers: int = 0
    bad_markers: list[str] = field(default_factory=list)
    direct_seconds: list[float] = field(default_factory=list)
    proxy_seconds: list[float] = field(default_factory=list)
    relay_seconds: list[float] = field(default_factory=list)
    sdk_seconds: list[float] = field(default_factory=list)
    """The same read from an MCP server on the Python SDK (tests/serve/sdk_server.py)..."""
    in_server_seconds: list[float] = field(default_factory=list)
    """...and from the same server with `serve_tools`."""
    in_server_tokens: int = 0


def session_reads(ctx: AgentContext) -> list[Read]:
    """The file reads of a conversation, in order: calls that read one named file, whose result
    is text and not an error."""
    calls = {b.id: b for m in ctx.messages for b in m.content if isinstance(b, ToolCallBlock)}
    out: list[Read] = []
    for msg in ctx.messages:
        for block in msg.content:
            if not isinstance(block, ToolResultBlock) or block.is_error:
                continue
            call = calls.get(block.tool_call_id)
            path = payload_path(call)
            if call is None or not path or not read_call(call).read:
                continue
            if not all(isinstance(p, TextBlock) for p in block.content) or not block.text.strip():
                continue
            others = view_arguments(call)
            view = f"{path} {canonical_json(others)}" if others else path
            out.append(Read(block.tool_call_id, view, block.text))
    return out


def collapse_tokens(ctx: AgentContext, reads: Sequence[Read]) -> int:
    """Tokens of the same read results once etag-collapse has compacted the saved session."""
    counter = get_counter()
    ids = {r.call_id for r in reads}
    out = EtagCollapse().compact(ctx)
    total = 0
    for msg in out.messages:
        for block in msg.content:
            if isinstance(block, ToolResultBlock) and block.tool_call_id in ids:
                total += counter.text(
                    "\n".join(
                        p.text if isinstance(p, TextBlock) else marker_text(p)  # type: ignore[arg-type]
                        for p in block.content
                    )
                )
    return total


def _text(result: types.CallToolResult) -> str:
    return "\n".join(p.text for p in result.content if isinstance(p, types.TextContent))


async def replay(
    conversations: Sequence[tuple[str, AgentContext]], workdir: Path
) -> list[SessionReplay]:
    """Replay every conversation's reads through one proxy (its serve state reset between
    conversations by the `compacted` notification) and one direct server."""
    server = filesystem_server()
    direct = StdioServerParameters(command=server[0], args=[*server[1:], str(workdir)])
    relayed = StdioServerParameters(
        command=sys.executable, args=[LINE_RELAY, *server, str(workdir)]
    )
    proxied = StdioServerParameters(
        command=PROXY[0], args=[*PROXY[1:], "--timeout", "30", "--", *server, str(workdir)]
    )
    sdk_plain = StdioServerParameters(command=sys.executable, args=[SDK_SERVER, "plain", "/"])
    sdk_served = StdioServerParameters(command=sys.executable, args=[SDK_SERVER, "mcpserver", "/"])
    counter = get_counter()
    results: list[SessionReplay] = []
    async with (
        stdio_client(direct, errlog=tempfile.TemporaryFile("w")) as (dr, dw),
        ClientSession(dr, dw, read_timeout_seconds=60) as plain,
        stdio_client(proxied, errlog=tempfile.TemporaryFile("w")) as (pr, pw),
        ClientSession(pr, pw, read_timeout_seconds=60) as proxy,
        stdio_client(relayed, errlog=tempfile.TemporaryFile("w")) as (rr, rw),
        ClientSession(rr, rw, read_timeout_seconds=60) as relay,
        stdio_client(sdk_plain, errlog=tempfile.TemporaryFile("w")) as (sr, sw),
        ClientSession(sr, sw, read_timeout_seconds=60) as sdk,
        stdio_client(sdk_served, errlog=tempfile.TemporaryFile("w")) as (ir, iw),
        ClientSession(ir, iw, read_timeout_seconds=60) as in_server,
    ):
        for client in (plain, proxy, relay, sdk, in_server):
            await client.initialize()
            await client.list_tools()
        for n, (name, ctx) in enumerate(conversations):
            reads = session_reads(ctx)
            if not reads:
                continue
            note = types.Notification(method=COMPACTED, params=None)  # a new conversation
            for served_client in (proxy, in_server):
                await served_client.send_notification(cast(Any, note))
                await served_client.send_ping()
            row = SessionReplay(name, len(reads), collapse_tokens=collapse_tokens(ctx, reads))
            folder = workdir / f"s{n}"
            folder.mkdir()
            files: dict[str, Path] = {}
            sent: dict[str, set[str]] = {}  # path -> etags sent in full
            for read in reads:
                target = files.setdefault(read.path, folder / f"f{len(files)}.txt")
                if not target.exists() or target.read_text(encoding="utf-8") != read.text:
                    target.write_text(read.text, encoding="utf-8")
                args = {"path": str(target)}
                # direct, through the proxy and through the relay, in an order that turns with
                # each read (which goes first, or after which, must not decide a ratio)
                hops = {
                    "direct": (plain, row.direct_seconds),
                    "proxy": (proxy, row.proxy_seconds),
                    "relay": (relay, row.relay_seconds),
                }
                answers = {}
                for hop in _ORDERS[sum(len(r.direct_seconds) for r in (*results, row)) % 6]:
                    client, seconds = hops[hop]
                    start = time.perf_counter()
                    answers[hop] = await client.call_tool("read_text_file", args)
                    seconds.append(time.perf_counter() - start)
                plain_result, proxy_result = answers["direct"], answers["proxy"]
                # the SDK server without and with serve_tools, in turn first (the machine's load
                # drifts; which goes first must not decide the ratio)
                pair = [(sdk, row.sdk_seconds), (in_server, row.in_server_seconds)]
                for client, seconds in pair if len(row.sdk_seconds) % 2 else pair[::-1]:
                    start = time.perf_counter()
                    answer = await client.call_tool("read_text_file", args)
                    seconds.append(time.perf_counter() - start)
                    if client is in_server:
                        in_server_result = answer
                row.in_server_tokens += counter.text(_text(in_server_result))
                shown = _text(plain_result)
                row.direct_tokens += counter.text(shown)
                row.proxy_tokens += counter.text(_text(proxy_result))
                serve = (proxy_result.meta or {}).get(META_SERVE, {})
                if serve.get("full"):
                    sent.setdefault(read.path, set()).add(serve["etag"])
                    continue
                row.markers += 1
                etag = serve.get("etag")
                if etag != text_etag(shown) or etag not in sent.get(read.path, set()):
                    row.bad_markers.append(f"{read.call_id} {read.path}")
            results.append(row)
    return results


def run(conversations: Sequence[tuple[str, AgentContext]]) -> list[SessionReplay]:
    # one fixed folder, not a random one: the proxy's markers name the file they stand for, so a
    # random folder name would move the token counts from run to run (make figures records them)
    workdir = Path(tempfile.gettempdir()).resolve() / "compactkit-serve-replay"
    shutil.rmtree(workdir, ignore_errors=True)
    workdir.mkdir(parents=True)
    try:
        return anyio.run(replay, conversations, workdir)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


def percentile(values: Sequence[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def summary(rows: Sequence[SessionReplay]) -> dict[str, Any]:
    direct = [s for r in rows for s in r.direct_seconds]
    proxy = [s for r in rows for s in r.proxy_seconds]
    relay = [s for r in rows for s in r.relay_seconds]
    sdk = [s for r in rows for s in r.sdk_seconds]
    in_server = [s for r in rows for s in r.in_server_seconds]
    total = {
        "sessions": len(rows),
        "reads": sum(r.reads for r in rows),
        "direct_tokens": sum(r.direct_tokens for r in rows),
        "proxy_tokens": sum(r.proxy_tokens for r in rows),
        "collapse_tokens": sum(r.collapse_tokens for r in rows),
        "in_server_tokens": sum(r.in_server_tokens for r in rows),
        "markers": sum(r.markers for r in rows),
        "bad_markers": sum(len(r.bad_markers) for r in rows),
    }
    if direct:
        total["latency_ms"] = {
            "direct_median": statistics.median(direct) * 1000,
            "proxy_median": statistics.median(proxy) * 1000,
            "direct_p99": percentile(direct, 0.99) * 1000,
            "proxy_p99": percentile(proxy, 0.99) * 1000,
            "median_ratio": statistics.median(proxy) / statistics.median(direct),
            "p99_ratio": percentile(proxy, 0.99) / percentile(direct, 0.99),
            # a relay that only passes lines: what the second process hop costs by itself
            "line_relay_median": statistics.median(relay) * 1000,
            "line_relay_median_ratio": statistics.median(relay) / statistics.median(direct),
            "proxy_vs_line_relay_median": statistics.median(proxy) / statistics.median(relay),
            "proxy_vs_line_relay_paired_median": statistics.median(
                p / r for p, r in zip(proxy, relay, strict=True)
            ),
            "line_relay_p99": percentile(relay, 0.99) * 1000,
            "proxy_vs_line_relay_p99": percentile(proxy, 0.99) / percentile(relay, 0.99),
            # an MCP server on the Python SDK, without and with `serve_tools`
            "sdk_median": statistics.median(sdk) * 1000,
            "sdk_p99": percentile(sdk, 0.99) * 1000,
            "in_server_median": statistics.median(in_server) * 1000,
            "in_server_p99": percentile(in_server, 0.99) * 1000,
            "in_server_median_ratio": statistics.median(in_server) / statistics.median(sdk),
            # each read's two times side by side (taken in turn first): what drift cannot move
            "in_server_paired_median_ratio": statistics.median(
                i / d for i, d in zip(in_server, sdk, strict=True)
            ),
            "in_server_p99_ratio": percentile(in_server, 0.99) / percentile(sdk, 0.99),
        }
    return total


def markdown(rows: Sequence[SessionReplay]) -> str:
    lines = [
        "| session | reads | tokens direct | via proxy | saved | etag-collapse after | markers |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for r in rows:
        saved = 1 - r.proxy_tokens / r.direct_tokens if r.direct_tokens else 0.0
        lines.append(
            f"| {r.name} | {r.reads} | {r.direct_tokens:,} | {r.proxy_tokens:,} | {saved:.1%} "
            f"| {r.collapse_tokens:,} | {r.markers} |"
        )
    t = summary(rows)
    saved = 1 - t["proxy_tokens"] / t["direct_tokens"] if t["direct_tokens"] else 0.0
    lines.append(
        f"| **total** ({t['sessions']} sessions) | {t['reads']} | {t['direct_tokens']:,} "
        f"| {t['proxy_tokens']:,} | {saved:.1%} | {t['collapse_tokens']:,} | {t['markers']} |"
    )
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> None:
    from benchmarks.conftest import corpus_contexts

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--json", default=None, help="also write the figures to this file")
    options = parser.parse_args(argv)
    rows = run(corpus_contexts())
    print(markdown(rows))
    print(json.dumps(summary(rows), indent=2))
    if options.json:
        Path(options.json).write_text(
            json.dumps({"summary": summary(rows), "sessions": [asdict(r) for r in rows]}, indent=1)
        )


if __name__ == "__main__":
    main()
