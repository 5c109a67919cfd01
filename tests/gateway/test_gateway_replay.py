"""The bench predicts production: sessions replayed through the gateway cost upstream exactly
what `compactkit bench --mode persistent` says for the same pipeline and trigger."""

from __future__ import annotations

import json
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


ARRIVAL = ["fold-json", "fold-listings", "fold-logs", "fold-repeats"]


def specs(target: int, arrival: bool = False) -> list[str]:
    return [
        *(ARRIVAL if arrival else ()),
        "etag-collapse",
        f"llm-summary:max_tokens={target},summary_max_tokens={target // 4}",
        f"sliding-window:max_tokens={target}",
    ]


@pytest.mark.parametrize(
    ("path", "processes", "arrival"),
    [(p, 0, a) for p in SESSIONS for a in (False, True)]
    + [(SESSIONS[2], 2, False), (SESSIONS[2], 2, True)],
    ids=lambda v: (
        v.name[:40]
        if isinstance(v, Path)
        else (("arrival" if v else "") if isinstance(v, bool) else f"processes={v}")
    ),
)
def test_gateway_replay_equals_the_persistent_bench(
    path: Path, processes: int, arrival: bool
) -> None:
    """So with the requests planned in planner processes (`processes=2`), and with an arrival
    stage: the gateway folds each new tool output once, as the bench's replay does for each
    appended message, and sends the same prompts."""
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
            pipeline=specs(target, arrival),
            trigger=trigger,
            target=target,
            processes=processes,
        )
        with serving(create_app(config)) as base:
            points = replay(base, api, body, ctx, session=path.name)
            stats = httpx.get(base + "/compactkit/stats").json()
    got = price(api, [r.body for r in model.received], ctx, points)
    folded = sum(b"[folded: " in r.body for r in model.received)
    assert folded == 0 if not arrival else folded > 0 or "sphinx" not in path.name
    bench = run_session(
        path.name,
        ctx,
        build_pipeline(specs(target, arrival), budget=target),
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


def test_arrival_prompts_are_the_same_after_a_restart(tmp_path: Path) -> None:
    """Arrival runs again on a conversation read anew (a restart keeps only the compacted base):
    the prompts a second gateway on the same state file sends are byte for byte those one
    gateway would have sent, so the provider's cache holds across the restart."""
    from compactkit.gateway import GatewayConfig, create_app

    from .replay import requests_of
    from .upstream import serving

    path = SESSIONS[2]  # a SWE-agent run whose re-read files fold-repeats folds
    api = api_for(path)
    body, ctx = as_sent(load_one(path), api)
    trigger = get_counter().context(ctx) // 3
    requests = [json.dumps(r).encode() for _, r in requests_of(body, ctx)]
    headers = {"x-compactkit-session": "s", "content-type": "application/json"}

    def sent(groups: list[list[bytes]], state: Path) -> list[bytes]:
        model = FakeModel(turns=0)
        with serving(model.app()) as upstream:
            config = GatewayConfig(
                upstream_anthropic=upstream,
                upstream_openai=upstream,
                pipeline=specs(trigger // 2, arrival=True),
                trigger=trigger,
                target=trigger // 2,
                state=str(state),
            )
            for group in groups:  # a gateway per group, one after another
                with serving(create_app(config)) as base, httpx.Client(timeout=120) as client:
                    for request in group:
                        answer = client.post(
                            base + "/v1/chat/completions", content=request, headers=headers
                        )
                        assert answer.status_code == 200, answer.text[:200]
        return [r.body for r in model.received]

    half = len(requests) * 2 // 3  # after the first compactions
    once = sent([requests], tmp_path / "one.sqlite")
    restarted = sent([requests[:half], requests[half:]], tmp_path / "two.sqlite")
    assert sum(b"[folded: " in b for b in once[half:]) > 0
    assert restarted == once
