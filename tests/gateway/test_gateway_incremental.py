"""The gateway reads, counts and writes each request incrementally (only what is new since the
conversation's previous request); what it sends upstream, byte for byte, and everything it counts
and records are what reading every request whole gives (`Policy(..., incremental=False)`). Every
session of the corpus (and of examples/sessions) is replayed through both, on the three APIs, as a
client would send it and as clients that rewind, rewrite their history, compact it themselves
(/compact) or send broken tool pairs would."""

from __future__ import annotations

import copy
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from compactkit import AgentContext, load
from compactkit.bench.jobs import collect_sessions
from compactkit.bench.replay import call_points
from compactkit.context import Message, TextBlock, ToolCallBlock, ToolResultBlock
from compactkit.gateway import GatewayConfig, wire
from compactkit.gateway.app import Policy
from compactkit.registry import get_counter

from .replay import as_sent

ROOT = Path(__file__).resolve().parents[2]
CORPUS = ROOT.parent / "shared" / "corpus"
FOLDERS = [ROOT / "examples" / "sessions"] + (
    sorted(p for p in CORPUS.iterdir() if p.is_dir()) if CORPUS.is_dir() else []
)
APIS: tuple[wire.Api, ...] = ("anthropic", "openai-chat", "openai-responses")


def _body(ctx: AgentContext, api: wire.Api) -> dict[str, Any]:
    if api != "openai-responses":
        return as_sent(ctx, api)[0]
    body: dict[str, Any] = {"model": "replay", "input": wire.responses_items(ctx.messages)}
    if ctx.system_instruction:
        body["instructions"] = ctx.system_instruction
    return body


def _key(api: wire.Api) -> str:
    return "input" if api == "openai-responses" else "messages"


def _calls(ctx: AgentContext, api: wire.Api) -> list[dict[str, Any]]:
    """A request body for every model call of `ctx`, as its agent sends them (growing)."""
    body = _body(ctx, api)
    key = _key(api)
    read = wire.read(api, body).context
    out = []
    for index in call_points(read):
        span = read.messages[index].metadata.get(wire.SPAN_KEY)
        first = span[0] if isinstance(span, list) and isinstance(span[0], int) else 0
        if first:
            out.append({**body, key: body[key][:first]})
    return out


def _breakpoint(body: dict[str, Any]) -> dict[str, Any]:
    """The body with a cache breakpoint on its last block, as Claude Code moves it each call."""
    items = list(body["messages"])
    last = copy.deepcopy(items[-1])
    content = last.get("content")
    if isinstance(content, str):
        last["content"] = [
            {"type": "text", "text": content, "cache_control": {"type": "ephemeral"}}
        ]
    elif isinstance(content, list) and content and isinstance(content[-1], dict):
        content[-1]["cache_control"] = {"type": "ephemeral"}
    items[-1] = last
    return {**body, "messages": items}


def _broken(ctx: AgentContext) -> AgentContext:
    """`ctx` with broken tool pairs: a result lost in the middle (its call unanswered), a later
    call reusing an earlier call's id, a result whose call is gone."""
    messages = list(ctx.messages)
    results = [i for i, m in enumerate(messages) if m.tool_results]
    if len(results) < 3:
        return ctx
    del messages[results[len(results) // 3]]
    calls = [(i, m) for i, m in enumerate(messages) if m.tool_calls]
    if len(calls) >= 3:
        first_id = calls[0][1].tool_calls[0].id
        i, m = calls[-2]
        old = m.tool_calls[0].id
        messages[i] = m.model_copy(update={"content": _renamed(m.content, old, first_id)})
        for j in range(i + 1, len(messages)):
            messages[j] = messages[j].model_copy(
                update={"content": _renamed(messages[j].content, old, first_id)}
            )
        i, m = calls[len(calls) // 2]
        kept = tuple(b for b in m.content if not isinstance(b, ToolCallBlock))
        messages[i] = m.model_copy(update={"content": kept or (m.content[0],)})
    return ctx.replace(messages=tuple(messages))


def _renamed(content: tuple[Any, ...], old: str, new: str) -> tuple[Any, ...]:
    out = []
    for block in content:
        if isinstance(block, ToolCallBlock) and block.id == old:
            block = block.model_copy(update={"id": new})
        elif isinstance(block, ToolResultBlock) and block.tool_call_id == old:
            block = block.model_copy(update={"tool_call_id": new})
        out.append(block)
    return tuple(out)


def _compacted_by_client(body: dict[str, Any], api: wire.Api) -> list[dict[str, Any]]:
    """What a client sends after its own /compact: a summary in place of the history, the last
    items kept, then the conversation going on."""
    key = _key(api)
    if api == "openai-responses":
        summary = {
            "type": "message",
            "role": "user",
            "content": [
                {
                    "type": "input_text",
                    "text": "Summary of the conversation so far: the task, the files touched.",
                }
            ],
        }
        more = [
            {
                "type": "message",
                "role": "assistant",
                "content": [{"type": "output_text", "text": "Continuing."}],
            },
            {
                "type": "message",
                "role": "user",
                "content": [{"type": "input_text", "text": "Go on."}],
            },
        ]
    else:
        summary = {
            "role": "user",
            "content": "Summary of the conversation so far: the task, the files touched.",
        }
        more = [
            {"role": "assistant", "content": "Continuing."},
            {"role": "user", "content": "Go on."},
        ]
    lead = [i for i in body[key][:1] if i.get("role") in ("system", "developer")]
    first = {**body, key: [*lead, summary, *body[key][-2:]]}
    return [first, {**first, key: [*first[key], *more]}]


def client_requests(ctx: AgentContext, api: wire.Api) -> list[dict[str, Any]]:
    """The requests of `ctx`'s calls as clients send them: growing (Anthropic breakpoints moving
    to the last block), a rewind to a third of the way, the history rewritten (the task edited),
    the calls of a copy with broken tool pairs, and the client's own compaction."""
    calls = _calls(ctx, api)
    if not calls:
        return []
    n = len(calls)
    if api == "anthropic":
        calls = [_breakpoint(b) for b in calls]
    out = calls[: 2 * n // 3 + 1] + calls[n // 3 :]
    edited = _edited(ctx)
    if edited is not None:
        out += _calls(edited, api)[n // 2 :]
    out += _calls(_broken(ctx), api)[n // 2 :]
    out += _compacted_by_client(calls[-1], api)
    return out


def _edited(ctx: AgentContext) -> AgentContext | None:
    """`ctx` with the task's first character changed (the same length: a body that differs from
    the one before only there)."""
    index = ctx.first_user_index
    if index is None:
        return None
    msg = ctx.messages[index]
    blocks = list(msg.content)
    for n, block in enumerate(blocks):
        if isinstance(block, TextBlock) and block.text:
            first = "Y" if block.text[0] == "X" else "X"
            blocks[n] = TextBlock(text=first + block.text[1:])
            edited = Message(role="user", content=tuple(blocks), metadata=msg.metadata)
            return ctx.replace(messages=(*ctx.messages[:index], edited, *ctx.messages[index + 1 :]))
    return None


@pytest.mark.parametrize("folder", FOLDERS, ids=lambda p: p.name)
def test_incremental_policy_sends_and_counts_what_reading_whole_does(
    folder: Path, tmp_path: Path
) -> None:
    replayed = compactions = 0
    for n, (name, ctx) in enumerate(_sessions_of(folder)):
        api = APIS[n % len(APIS)]
        requests = client_requests(ctx, api)
        if len(requests) < 3:
            continue
        tokens = get_counter().context(ctx)
        trigger = max(2000, tokens // 3)  # passed a few times in the session
        compactions += _replay_both(name, api, requests, trigger, tmp_path / str(n), n % 2 == 0)
        replayed += 1
    assert replayed and compactions  # the sessions passed their trigger


def _sessions_of(folder: Path) -> Iterator[tuple[str, AgentContext]]:
    for address in collect_sessions([str(folder)]):
        try:
            contexts = load(address)
        except Exception:  # a file no adapter reads holds no conversation
            continue
        for number, ctx in enumerate(contexts):
            yield f"{Path(address).name}#{number}", ctx


def _json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False)


def _replay_both(
    name: str,
    api: wire.Api,
    requests: list[dict[str, Any]],
    trigger: int,
    folder: Path,
    recall: bool,
) -> int:
    """Each request through a whole-reading and an incremental policy: the same body upstream,
    the same conversation state and figures after each, the same recordings and store. Returns
    the compactions."""
    target = trigger // 2
    specs = [
        "etag-collapse",
        f"llm-summary:max_tokens={target},summary_max_tokens={max(200, target // 4)}",
        f"sliding-window:max_tokens={target}",
    ]
    policies = [
        Policy(
            GatewayConfig(
                pipeline=specs,
                trigger=trigger,
                target=target,
                record=str(folder / side),
                recall=recall,
            ),
            incremental=side == "incremental",
        )
        for side in ("whole", "incremental")
    ]
    compactions = 0
    for number, request in enumerate(requests):
        raw = json.dumps(request, ensure_ascii=False).encode()
        seen = []
        for policy in policies:
            parsed = policy.parse(raw)  # as the app parses a body
            if parsed is None:
                parsed = json.loads(raw)
            elif number % 5 == 0:  # reusing recent bodies' objects parses what json does
                assert _json(parsed) == _json(json.loads(raw)), f"{name} request {number}"
            key = wire.conversation_key(api, parsed, name)
            try:
                plan = policy.plan(api, parsed, key, raw, session=name)
            except Exception as exc:  # the app forwards such a request as the client sent it
                conv = policy.conversations.get(key)
                seen.append((type(exc).__name__, str(exc), conv.figures(), conv.base_items))
                continue
            conv = plan.conversation
            assert conv is not None
            seen.append(
                (
                    plan.body if plan.body is not raw else "passed through",
                    plan.recall,
                    plan.store,
                    conv.figures(),
                    conv.base,
                    conv.base_items,
                    conv.base_digest,
                    conv.last_prompt,
                )
            )
            compactions = conv.compactions
        whole, incremental = seen
        assert incremental == whole, f"{name} ({api}) request {number}"
    for recorded in sorted((folder / "whole").rglob("*")):
        if recorded.is_file():
            twin = folder / "incremental" / recorded.relative_to(folder / "whole")
            assert twin.read_bytes() == recorded.read_bytes(), f"{name}: {recorded.name}"
    return compactions
