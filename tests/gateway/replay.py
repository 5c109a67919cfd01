"""Replay a saved session through the gateway as its agent would have sent it (one request per
assistant turn, the whole history each time) into a recording fake upstream, and price what the
upstream received the way `compactkit bench --mode persistent` prices its replay."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from compactkit import AgentContext
from compactkit.bench.pricing import get_profile
from compactkit.bench.replay import call_points, output_tokens, prefix_tokens
from compactkit.formats.anthropic_messages import to_anthropic_request
from compactkit.formats.export import WriterOptions
from compactkit.formats.openai_chat import to_openai_request
from compactkit.gateway import wire
from compactkit.gateway.record import _clean
from compactkit.registry import get_counter

PROFILES = ("anthropic", "openai")


def as_sent(ctx: AgentContext, api: wire.Api) -> tuple[dict[str, Any], AgentContext]:
    """The session as its agent's request body, and the context the provider reads from it (what
    both the bench and the gateway see)."""
    options = WriterOptions(request=True)
    write = to_anthropic_request if api == "anthropic" else to_openai_request
    body = write(ctx, options)
    body = {"model": "replay", "max_tokens": 1024, **body}
    return body, wire.read(api, body).context


def requests_of(body: dict[str, Any], ctx: AgentContext) -> list[tuple[int, dict[str, Any]]]:
    """(call point in ctx, request body) for every model call: the raw items up to the one
    that made that assistant message."""
    out = []
    for index in call_points(ctx):
        span = ctx.messages[index].metadata[wire.SPAN_KEY]
        first = span[0] if isinstance(span, list) else 0
        out.append((index, {**body, "messages": body["messages"][:first]}))
    return out


@dataclass
class Priced:
    prompt_tokens: int = 0
    cached_tokens: int = 0
    output_tokens: int = 0
    calls: int = 0
    merged_seams: int = 0
    """Requests where a written message joined the client's turn of the same role."""
    cost: dict[str, float] = field(default_factory=dict)


def price(
    api: wire.Api, received: Sequence[bytes], ctx: AgentContext, points: Sequence[int]
) -> Priced:
    """Tokens, cached prefix and cost of what the upstream received (bench's arithmetic)."""
    counter = get_counter()
    profiles = [get_profile(p) for p in PROFILES]
    result = Priced(cost={p.name: 0.0 for p in profiles})
    previous: AgentContext | None = None
    for body, index in zip(received, points, strict=True):
        read = wire.read(api, json.loads(body)).context
        result.merged_seams += _merged(read)
        prompt = read.replace(messages=tuple(_clean(m) for m in read.messages))
        tokens = counter.context(prompt)
        cached = prefix_tokens(previous, prompt, counter)
        out = output_tokens(ctx.messages[index], counter)
        for p in profiles:
            result.cost[p.name] += p.cost(tokens, cached, out)
        result.prompt_tokens += tokens
        result.cached_tokens += cached
        result.output_tokens += out
        result.calls += 1
        previous = prompt
    return result


def _merged(ctx: AgentContext) -> int:
    """1 when a message holds blocks of several raw items' messages (a merged seam)."""
    return int(any(isinstance(m.content, tuple) and _mixed(m) for m in ctx.messages))


def _mixed(msg: Any) -> bool:
    texts = [b for b in msg.content if b.type == "text"]
    return any(t.text.startswith("[summary of ") for t in texts) and len(msg.content) > 1


def replay(
    base: str, api: wire.Api, body: dict[str, Any], ctx: AgentContext, session: str
) -> list[int]:
    """Send every call's request through the gateway at `base`; returns the call points."""
    path = "/v1/messages" if api == "anthropic" else "/v1/chat/completions"
    points = []
    with httpx.Client(timeout=120) as client:
        for index, request in requests_of(body, ctx):
            answer = client.post(
                base + path,
                content=json.dumps(request).encode(),
                headers={"x-compactkit-session": session, "content-type": "application/json"},
            )
            assert answer.status_code == 200, answer.text[:200]
            points.append(index)
    return points


def api_for(path: Path) -> wire.Api:
    """The API a session's agent speaks: Claude Code sessions go to Anthropic, the rest to chat."""
    return (
        "anthropic" if "claude_code" in str(path) or "claude-code" in path.name else "openai-chat"
    )
