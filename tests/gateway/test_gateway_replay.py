"""The bench predicts production: sessions replayed through the gateway cost upstream exactly
what `compactkit bench --mode persistent` says for the same pipeline and trigger."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest

from compactkit import load_one
from compactkit.bench.pricing import get_profile
from compactkit.bench.replay import run_session
from compactkit.pipeline import build_pipeline
from compactkit.registry import get_counter

from .replay import PROFILES, api_for, as_sent, price, replay
from .upstream import FakeModel

ROOT = Path(__file__).resolve().parents[2]
SESSIONS = [
    ROOT
    / "examples/sessions/claude-code-viewer_sample-project_1af7fc5e-8455-4414-9ccd-011d40f70b2a.jsonl",
    ROOT / "examples/sessions/openhands-sdk_litellm-log_claude-sonnet-4_1757015046.json",
    ROOT / "examples/sessions/gemini3pro_sphinx-doc__sphinx-9229.traj.json",
]


def specs(target: int) -> list[str]:
    return [
        "etag-collapse",
        f"llm-summary:max_tokens={target},summary_max_tokens={target // 4}",
        f"sliding-window:max_tokens={target}",
    ]


@pytest.mark.parametrize(
    ("path", "processes"),
    [(p, 0) for p in SESSIONS] + [(SESSIONS[2], 2)],
    ids=lambda v: v.name[:40] if isinstance(v, Path) else f"processes={v}",
)
def test_gateway_replay_equals_the_persistent_bench(path: Path, processes: int) -> None:
    """So with the requests planned in planner processes (`processes=2`)."""
    model = FakeModel(turns=0)
    api = api_for(path)
    body, ctx = as_sent(load_one(path), api)
    trigger = get_counter().context(ctx) // 3  # passed a few times in the session
    target = trigger // 2
    from .upstream import serving

    with serving(model.app()) as upstream:
        from compactkit.gateway import GatewayConfig, create_app

        config = GatewayConfig(
            upstream_anthropic=upstream,
            upstream_openai=upstream,
            pipeline=specs(target),
            trigger=trigger,
            target=target,
            processes=processes,
        )
        with serving(create_app(config)) as base:
            points = replay(base, api, body, ctx, session=path.name)
            stats = httpx.get(base + "/compactkit/stats").json()
    got = price(api, [r.body for r in model.received], ctx, points)
    bench = run_session(
        path.name,
        ctx,
        build_pipeline(specs(target), budget=target),
        "persistent",
        get_counter(),
        [get_profile(p) for p in PROFILES],
        trigger=trigger,
    )
    assert bench.compactions > 0, "pick a trigger the session passes"
    (conv,) = stats["conversations"].values()
    # the gateway's own figures are the bench's, call for call
    assert (conv["requests"], conv["compactions"]) == (len(bench.calls), bench.compactions)
    assert (conv["tokens_sent"], conv["cached_tokens"]) == (
        bench.prompt_tokens,
        bench.cached_tokens,
    )
    assert got.calls == len(bench.calls)
    if not got.merged_seams:
        # and so is what the upstream received
        assert (got.prompt_tokens, got.cached_tokens, got.output_tokens) == (
            bench.prompt_tokens,
            bench.cached_tokens,
            bench.output_tokens,
        )
        assert got.cost == pytest.approx(bench.cost)
    else:
        # Anthropic turns alternate: a summary written next to the task is sent inside the
        # task's user turn, one message where the bench counts two (less overhead, and the
        # bench's whole-message prefix ends at that turn)
        assert got.prompt_tokens <= bench.prompt_tokens
