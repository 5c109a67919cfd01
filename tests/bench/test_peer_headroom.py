"""peer-headroom: headroom-ai set up in an environment of its own (from PyPI, on first use), run
offline as a subprocess, really compressing; and compactkit's own environment (its `mcp`, its
`mcp-proxy`) untouched by the setup."""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
from importlib.metadata import version
from pathlib import Path

import pytest

import compactkit
from compactkit import AgentContext, ElidedBlock, Message, TextBlock, ToolCallBlock, message
from compactkit.bench.pricing import PROFILES
from compactkit.bench.replay import run_session
from compactkit.recovery import expand
from compactkit.registry import get_counter
from compactkit.strategies.peers.headroom_env import ENCODINGS, VERSION, driver, home, python, setup
from compactkit.tokens import vocabulary_bytes

pytestmark = pytest.mark.peer

LOG = "\n".join(f"INFO step {n} of the build ok" for n in range(400)) + "\nFATAL: disk full"


@pytest.fixture(scope="module")
def peer() -> Path:
    setup()  # idempotent: a no-op install when it is there already
    return home()


def _turn(cid: str, text: str) -> list[Message]:
    call = ToolCallBlock(id=cid, name="bash", input={"command": "make"})
    result = compactkit.ToolResultBlock(tool_call_id=cid, content=(TextBlock(text=text),))
    return [Message(role="assistant", content=(call,)), Message(role="tool", content=(result,))]


def test_the_peer_has_its_own_environment_and_an_offline_vocabulary(peer: Path) -> None:
    assert python(peer).exists()
    assert not str(python(peer)).startswith(str(Path(compactkit.__file__).parents[1] / ".venv"))
    for name in ENCODINGS:
        url = f"https://openaipublic.blob.core.windows.net/encodings/{name}.tiktoken"
        seeded = peer / "tiktoken" / hashlib.sha1(url.encode()).hexdigest()
        assert seeded.read_bytes() == vocabulary_bytes(name)  # checked against tiktoken's hash
    assert VERSION == "0.42.0"


def test_headroom_really_compresses_a_log_and_keeps_the_fatal_line(peer: Path) -> None:
    messages = [{"role": "user", "content": "what failed?"}]
    messages += [
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {"id": "c1", "type": "function", "function": {"name": "bash", "arguments": "{}"}}
            ],
        },
        {"role": "tool", "tool_call_id": "c1", "content": LOG},
    ]
    answer = driver().compress(messages, "gpt-4o")
    assert answer["tokens_after"] < answer["tokens_before"] / 2
    assert "FATAL: disk full" in json.dumps(answer["messages"])


def test_the_bench_runs_headroom_as_a_peer_policy(peer: Path) -> None:
    ctx = AgentContext(messages=(message("user", "fix the build"),)).append(
        *_turn("c1", LOG), message("assistant", "retrying"), *_turn("c2", LOG + "\nretry")
    )
    ctx = ctx.append(message("assistant", "done"))
    pipeline = compactkit.build_pipeline(["peer-headroom"])
    counter = get_counter("o200k_base")
    result = run_session(
        "s", ctx, pipeline, "persistent", counter, [PROFILES["anthropic"]], trigger=1_000_000
    )
    none = run_session(
        "s",
        ctx,
        compactkit.build_pipeline(["none"]),
        "persistent",
        counter,
        [PROFILES["anthropic"]],
        trigger=1_000_000,
    )
    assert result.error is None and result.prompt_tokens < none.prompt_tokens
    folded = pipeline.compact(ctx)
    shown = [p for m in folded.messages for b in m.tool_results for p in b.content]
    assert any(isinstance(p, ElidedBlock) and p.ref == "headroom" for p in shown)
    assert expand(folded).messages == ctx.messages


def test_compactkit_bench_runs_the_peer_as_users_run_it(peer: Path, tmp_path: Path) -> None:
    """`compactkit bench -s peer-headroom` with the default `--timeout`: the peer's calls keep
    their headroom process (a plugin's worker used to end it after the first call, and every
    later session failed with 'the headroom driver is not running')."""
    ctx = AgentContext(messages=(message("user", "fix the build"),))
    for n in range(3):  # three sessions, several calls each
        ctx = ctx.append(*_turn(f"c{n}", LOG + f"\nretry {n}"), message("assistant", f"try {n}"))
    for n in range(3):
        compactkit.dump(ctx, tmp_path / f"s{n}.json")
    out = tmp_path / "bench.json"
    command = [sys.executable, "-m", "compactkit", "bench", str(tmp_path), "-s", "peer-headroom"]
    done = subprocess.run(
        [*command, "--json", str(out)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    report = json.loads(out.read_text())
    rows = [r for r in report["sessions"] if r["pipeline"] == "peer-headroom"]
    assert len(rows) == 3 and all(r["error"] is None for r in rows)
    nones = {r["session"]: r for r in report["sessions"] if r["pipeline"] == "none"}
    assert all(r["prompt_tokens"] < nones[r["session"]]["prompt_tokens"] for r in rows)


def test_compactkit_mcp_proxy_still_works_after_the_setup(peer: Path) -> None:
    major, minor = (int(x) for x in version("mcp").split(".")[:2])
    assert (major, minor) >= (2, 3)  # headroom's mcp<2 never reached compactkit's environment
    from ..serve.test_mcp_proxy import FAKE, connect, proxied

    with connect(proxied(FAKE)) as client:
        assert client.tools()
