"""What `compactkit inspect` reports about a conversation: sizes, tools, largest blocks, repeats."""

from __future__ import annotations

import heapq
from collections import Counter
from typing import Any

from .context import AgentContext, Block, ToolCallBlock, ToolResultBlock, etag_of, render_block
from .tokens import MESSAGE_OVERHEAD, REPLY_PRIMING, TokenCounter
from .toolcall import command_arg, path_arg

INSPECT_SCHEMA = "compactkit.inspect/1"


def _preview(text: str, width: int = 80) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= width else flat[: width - 1] + "…"


def _tool_names(ctx: AgentContext) -> dict[str, str]:
    return {c.id: c.name for m in ctx.messages for c in m.tool_calls}


def _payload_label(block: Block, names: dict[str, str], calls: dict[str, ToolCallBlock]) -> str:
    if isinstance(block, ToolResultBlock):
        call = calls.get(block.tool_call_id)
        if call is not None:
            what = path_arg(call) or (command_arg(call) or ("", ""))[1]
            if what:
                return f"{call.name} {_preview(what, 60)}"
        return names.get(block.tool_call_id, "tool result")
    return block.type


def _skipped(ctx: AgentContext) -> dict[str, int]:
    """Records the loader read and left out, by type (see `formats._util.note_skipped`)."""
    raw = ctx.metadata.get("skipped_records")
    if not isinstance(raw, dict):
        return {}
    return {str(k): v for k, v in raw.items() if isinstance(v, int)}


def inspect_context(
    ctx: AgentContext, counter: TokenCounter, *, top: int = 5, fmt: str | None = None
) -> dict[str, Any]:
    """A JSON-ready report on one conversation."""
    per_message = counter.messages(ctx.messages)
    by_role: Counter[str] = Counter()
    by_kind: Counter[str] = Counter()
    preamble = counter.preamble(ctx)
    if ctx.system_instruction:
        by_role["system"] += MESSAGE_OVERHEAD + counter.text(ctx.system_instruction)
        by_kind["system_instruction"] += counter.text(ctx.system_instruction)
    for body in ctx.activated_skills.values():
        by_role["system"] += MESSAGE_OVERHEAD + counter.text(body)
        by_kind["skill"] += counter.text(body)
    by_kind["overhead"] = preamble - sum(by_kind.values()) + MESSAGE_OVERHEAD * len(ctx.messages)
    names = _tool_names(ctx)
    calls = {c.id: c for m in ctx.messages for c in m.tool_calls}
    # the `top` largest blocks so far, smallest first (by tokens, then latest first)
    largest_heap: list[tuple[int, int, int, Block]] = []
    # etag -> where the payload was seen: its first sighting (message, tokens, block) until it is
    # seen again, then every (message, tokens); one entry per large block of the session, so
    # nothing more is kept for a payload seen once (a label is made only for a repeat)
    repeats: dict[str, Any] = {}
    labels: dict[str, str] = {}
    tool_calls = tool_results = errors = 0
    for i, msg in enumerate(ctx.messages):
        by_role[msg.role] += per_message[i]
        for j, block in enumerate(msg.content):
            n = counter.block(block)
            by_kind[block.type] += n
            entry = (n, -i, -j, block)
            if len(largest_heap) < top:
                heapq.heappush(largest_heap, entry)
            elif top > 0 and entry[:3] > largest_heap[0][:3]:
                heapq.heapreplace(largest_heap, entry)
            if block.type == "tool_call":
                tool_calls += 1
            elif block.type == "tool_result":
                tool_results += 1
                errors += block.is_error
            if block.type in ("tool_result", "text") and n >= 32:
                key = etag_of("\x1f".join(render_block(block)))
                seen = repeats.get(key)
                if seen is None:
                    repeats[key] = (i, n, block)
                elif isinstance(seen, tuple):
                    labels[key] = _payload_label(seen[2], names, calls)
                    repeats[key] = [seen[:2], (i, n)]
                else:
                    seen.append((i, n))
    largest = _largest_blocks(ctx, largest_heap, names, calls)
    repeated = _repeated_payloads(repeats, labels)
    total = preamble + sum(per_message)
    return {
        "schema": INSPECT_SCHEMA,
        "format": fmt or ctx.metadata.get("source_format"),
        "conversation": ctx.metadata.get("conversation"),
        "tokenizer": counter.name,
        "messages": len(ctx.messages),
        "tokens": total,
        "tokens_by_role": dict(sorted(by_role.items())),
        "tokens_by_kind": dict(sorted(by_kind.items())),
        "reply_priming": REPLY_PRIMING,
        "tool_calls": tool_calls,
        "tool_results": tool_results,
        "tool_errors": errors,
        "has_system_instruction": ctx.system_instruction is not None,
        "task": _preview(ctx.task, 120),
        "user_messages": sum(1 for m in ctx.messages if m.is_human),
        "user_role_messages_by_origin": dict(
            sorted(Counter(m.origin for m in ctx.messages if m.role == "user" and m.origin).items())
        ),
        "skipped_records": dict(_skipped(ctx)),
        "largest_blocks": largest,
        "repeated_payloads": repeated[:top],
        "redundant_tokens": sum(int(r["redundant_tokens"]) for r in repeated),
        "metadata": {k: v for k, v in ctx.metadata.items() if isinstance(v, (str, int, float))},
    }


def _largest_blocks(
    ctx: AgentContext,
    heap: list[tuple[int, int, int, Block]],
    names: dict[str, str],
    calls: dict[str, ToolCallBlock],
) -> list[dict[str, Any]]:
    """The blocks of `heap` ((tokens, -message, -block, block)), largest first (the earlier
    first among equals)."""
    blocks = [(n, -i, -j, b) for n, i, j, b in sorted(heap, key=lambda e: e[:3], reverse=True)]
    return [
        {
            "message": i,
            "block": j,
            "role": ctx.messages[i].role,
            "type": block.type,
            "tokens": n,
            "label": _payload_label(block, names, calls),
            "preview": _preview(" ".join(render_block(block))),
        }
        for n, i, j, block in blocks
    ]


def _repeated_payloads(repeats: dict[str, Any], labels: dict[str, str]) -> list[dict[str, Any]]:
    """Payloads seen more than once, the most redundant tokens first."""
    return sorted(
        (
            {
                "etag": key,
                "label": labels[key],
                "count": len(hits),
                "tokens_each": hits[0][1],
                "redundant_tokens": hits[0][1] * (len(hits) - 1),
                "messages": [i for i, _ in hits],
            }
            for key, hits in repeats.items()
            if isinstance(hits, list)
        ),
        key=lambda r: (-int(r["redundant_tokens"]), str(r["etag"])),
    )
