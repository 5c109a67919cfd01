"""Requests on the wire <-> `AgentContext`, keeping what the gateway does not understand.

Each API's request holds a list of raw items (`messages`, or a Responses `input`). The provider
adapters turn the list into a context; here every context message also learns which raw items
made it (`metadata["gateway_span"] = [first, last]`), so a message that compaction left as it was
goes back upstream as the very items the client sent (unknown fields, `cache_control`, thinking
signatures and all), and only what compaction made (summaries, markers) is written by the
adapter's writer. Raw items that made no message (a leading system message, an item the reader
skips) travel with the next message's items.
"""

from __future__ import annotations

import functools
import hashlib
import itertools
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from ..context import AgentContext, Message, ThinkingBlock, ToolCallBlock, ToolResultBlock
from ..formats._chat import block_as_text, repair_chat_pairing, repaired_chat_context
from ..formats._pairing import Repaired, Turn, repair_pairing
from ..formats.anthropic_messages import AnthropicMessagesContextBuilder, to_anthropic_request
from ..formats.codex import CodexRolloutContextBuilder
from ..formats.openai_chat import OpenAIChatContextBuilder, to_openai_messages

Api = Literal["anthropic", "openai-chat", "openai-responses"]
SPAN_KEY = "gateway_span"


class Unreadable(Exception):
    """A request the gateway cannot read (forwarded unchanged and counted)."""


@dataclass(frozen=True)
class Unit:
    """Raw items `lo..hi` (inclusive) and the context messages they made, `start..stop`."""

    lo: int
    hi: int
    start: int
    stop: int


@dataclass(frozen=True)
class Request:
    """One request read: the body, its raw items, the context and how the two map."""

    api: Api
    body: dict[str, Any]
    items: list[Any]
    context: AgentContext
    units: list[Unit]
    leading: int
    """Raw items before the first unit that made no message (a system message): always sent."""

    def digest(self, upto: int) -> str:
        """A digest of raw items `[0, upto)`, blind to `cache_control` (clients move breakpoints)."""
        h = hashlib.sha256()
        for item in self.items[:upto]:
            h.update(canonical(strip_cache_control(item)).encode("utf-8"))
            h.update(b"\n")
        return h.hexdigest()

    def unit_at(self, lo: int) -> Unit | None:
        return self.by_lo.get(lo)

    @functools.cached_property
    def by_lo(self) -> dict[int, Unit]:
        return {unit.lo: unit for unit in self.units}

    def messages_from(self, raw_index: int) -> tuple[Message, ...] | None:
        """The context messages made by raw items from `raw_index` on; None when a message
        straddles that point (the client's history does not continue what was seen)."""
        for unit in self.units:
            if unit.lo >= raw_index:
                return self.context.messages[unit.start :]
            if unit.hi >= raw_index:
                return None
        return ()


def canonical(value: Any) -> str:
    return json.dumps(value, sort_keys=True, ensure_ascii=False, separators=(",", ":"))


def strip_cache_control(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: strip_cache_control(v) for k, v in value.items() if k != "cache_control"}
    if isinstance(value, list):
        return [strip_cache_control(v) for v in value]
    return value


# --------------------------------------------------------------------------- reading


def read(api: Api, body: Any) -> Request:
    """The request as a context; raises `Unreadable` for a body it cannot map."""
    return Reader(api).read(body)


def items_of(api: Api, body: Any) -> list[Any]:
    """The raw items of a request (`messages`, or a Responses `input`); raises `Unreadable`."""
    return _objects(api, _array(api, body))


def _array(api: Api, body: Any) -> list[Any]:
    """The request's items' array, not empty (its items not looked at); raises `Unreadable`."""
    if not isinstance(body, dict):
        raise Unreadable("the body is not a JSON object")
    items = body.get(_ITEMS[api == "openai-responses"])
    if not isinstance(items, list) or not items:
        raise Unreadable(f"no {_ITEMS[api == 'openai-responses']} array")
    return items


def _objects(api: Api, items: list[Any], known: int = 0) -> list[Any]:
    """`items`, each an object (the first `known` are); raises `Unreadable`."""
    if not all(map(isinstance, items[known:] if known else items, itertools.repeat(dict))):
        raise Unreadable(f"{_ITEMS[api == 'openai-responses']} holds a non-object item")
    return items


_ITEMS = ("messages", "input")
"""The items' key: `messages`, or `input` for the Responses API."""


def extends(before: list[Any], now: list[Any]) -> bool:
    """Whether `now` starts with `before`'s items (a moved `cache_control` aside)."""
    if len(now) < len(before):
        return False
    if before == now[: len(before)]:  # the same items: one pass, each compared as itself
        return True
    for a, b in zip(before, now, strict=False):
        if a is not b and a != b and strip_cache_control(a) != strip_cache_control(b):
            return False
    return True


class Reader:
    """Reads one conversation's requests. A request that extends the previous one (its items
    start with the previous items) is read incrementally: only the new items go through the
    adapter, and messages of turns that did not change are the same objects as before (so
    counting and comparing them is free). When the previous request's messages were left with
    no call open, only the new messages are repaired and grouped (`_Mark`); `incremental=False`
    repairs and groups every request whole (the reference the gateway's tests compare with)."""

    def __init__(self, api: Api, *, incremental: bool = True) -> None:
        self.api = api
        self.incremental = incremental
        self.items: list[Any] = []
        self.builder: Any = None
        self.frozen: list[tuple[Turn, int, Message]] = []
        self._messages: list[Message] = []
        """The messages of `frozen`, in a list of their own (taken in one slice)."""
        self.extended = False
        """Whether the last request read extended the one before it."""
        self._mark: _Mark | None = None

    def _builder(self, body: dict[str, Any]) -> Any:
        if self.api == "anthropic":
            return AnthropicMessagesContextBuilder(body)
        if self.api == "openai-chat":
            return OpenAIChatContextBuilder(body)
        return CodexRolloutContextBuilder()

    def read(self, body: Any) -> Request:
        items = _array(self.api, body)
        self.extended = self.builder is not None and extends(self.items, items)
        _objects(self.api, items, len(self.items) if self.extended else 0)  # those were
        mark, self._mark = self._mark, None
        if not self.extended:
            self.builder = self._builder(body)
            self.items, self.frozen, self._messages = [], [], []
        builder = self.builder
        builder.container = body
        turns: list[Turn] = builder.turns
        # builders only append turns or grow the last one: those before it are as frozen
        settled = max(0, min(len(turns), len(self.frozen)) - 1) if self.incremental else 0
        try:
            for index in range(len(self.items), len(items)):
                count = len(turns)
                grown = len(turns[-1].blocks) if turns else 0
                if self.api == "openai-responses":
                    builder.response_item(_typed(items[index]), None)
                else:
                    builder.add(items[index])
                _tag(turns, count, grown, index)
        except Exception:
            self.builder = None  # half-fed: start over next time
            raise
        self.items = list(items)
        messages = self._messages[:settled]
        kept_upto = len(turns)  # messages before it are the previous request's, as they were
        for pos in range(settled, len(turns)):
            turn = turns[pos]
            if pos < len(self.frozen):
                kept, blocks, message = self.frozen[pos]
                if kept is turn and blocks == len(turn.blocks):
                    messages.append(message)
                    continue
                del self.frozen[pos:], self._messages[pos:]
            kept_upto = min(kept_upto, pos)
            message = turn.freeze()
            self.frozen.append((turn, len(turn.blocks), message))
            self._messages.append(message)
            messages.append(message)
        if not self.extended or not self.incremental:
            mark = None
        repaired, fold, mark = _repaired(self.api, messages, mark, kept_upto)
        context = _context(self.api, builder, body, repaired)
        fold.add(context.messages, fold.seen)
        units, leading = fold.finish(len(items))
        if repaired.settled and not repaired.renamed_calls and self.incremental:
            self._mark = _Mark(len(messages), repaired, mark.ids if mark else _ids(messages), fold)
        return Request(self.api, body, items, context, units, leading)


def _typed(item: dict[str, Any]) -> dict[str, Any]:
    """A Responses input item with its `type`: the API takes a message in the short form
    `{"role": ..., "content": ...}` too (what the client sent stays as it is)."""
    if "type" not in item and "role" in item:
        return {**item, "type": "message"}
    return item


@dataclass
class _Mark:
    """The previous request's messages (`count`), repaired with no call left open and no call id
    renamed, with every tool call id they name and their units so far. Repairing those messages
    followed by new ones that name none of those ids gives their repair followed by the new
    messages' own (`Repaired.settled`); grouping them into units continues likewise."""

    count: int
    repaired: Repaired
    ids: set[str]
    fold: _Fold


def _ids(messages: Sequence[Message]) -> set[str]:
    """The ids of every tool call and tool result of `messages`."""
    ids: set[str] = set()
    for msg in messages:
        for block in msg.content:
            if isinstance(block, ToolCallBlock):
                ids.add(block.id)
            elif isinstance(block, ToolResultBlock):
                ids.add(block.tool_call_id)
    return ids


def _repair(api: Api, messages: Sequence[Message]) -> Repaired:
    if api == "openai-responses":
        return repair_pairing(
            messages,
            close="unless_answered",
            keep_pending="last_assistant",
            orphan_results="keep",
        )
    return repair_chat_pairing(messages)


def _repaired(
    api: Api, messages: list[Message], mark: _Mark | None, kept_upto: int
) -> tuple[Repaired, _Fold, _Mark | None]:
    """The repair of `messages` and the units fold to continue over its output: from `mark` (then
    returned, its ids grown by the new messages') when the new messages continue its messages
    and name none of their ids, else whole (and no mark)."""
    if mark is not None and mark.count <= kept_upto:
        new = messages[mark.count :]
        ids = _ids(new)
        if ids.isdisjoint(mark.ids):
            tail = _repair(api, new)
            if not tail.renamed_calls:
                before = mark.repaired
                repaired = Repaired(
                    synthesized_results=before.synthesized_results + tail.synthesized_results,
                    synthesized_calls=before.synthesized_calls + tail.synthesized_calls,
                    renamed_calls=0,
                    orphan_results=before.orphan_results + tail.orphan_results,
                    messages=[*before.messages, *tail.messages],
                    settled=tail.settled,
                )
                mark.ids |= ids
                return repaired, mark.fold.copy(), mark
    return _repair(api, messages), _Fold(), None


def _context(api: Api, builder: Any, body: dict[str, Any], repaired: Repaired) -> AgentContext:
    if api == "anthropic":
        return repaired_chat_context("anthropic-messages", builder.system, repaired, body, None)
    if api == "openai-chat":
        return repaired_chat_context("openai-chat", builder.system, repaired, body, None)
    instructions = body.get("instructions")
    return AgentContext(
        system_instruction=instructions if isinstance(instructions, str) else None,
        messages=tuple(repaired.messages),
        metadata={"source_format": "openai-responses"},
    )


def _tag(turns: list[Turn], count: int, grown: int, index: int) -> None:
    """Mark the turns raw item `index` made (after the first `count`) or grew (the last one of
    those, which had `grown` blocks): builders only ever append turns or extend the last one."""
    start = count - 1 if count and len(turns[count - 1].blocks) != grown else count
    for turn in turns[start:]:
        span = turn.metadata.get(SPAN_KEY)
        lo = span[0] if isinstance(span, list) and isinstance(span[0], int) else index
        turn.metadata[SPAN_KEY] = [lo, index]


def _span(msg: Message) -> tuple[int, int] | None:
    span = msg.metadata.get(SPAN_KEY)
    if isinstance(span, list) and len(span) == 2 and all(isinstance(x, int) for x in span):
        return int(span[0]), int(span[1])  # type: ignore[arg-type]  # checked just above
    return None


@dataclass
class _Fold:
    """Units of the messages seen so far, kept open for more: messages whose raw items overlap
    make one unit; raw items that made nothing join the next unit."""

    units: list[Unit] = field(default_factory=list)
    covered: int = 0  # raw items up to here belong to a unit (or lead)
    leading: int = 0
    seen: int = 0

    def copy(self) -> _Fold:
        return _Fold(list(self.units), self.covered, self.leading, self.seen)

    def add(self, messages: Sequence[Message], start: int) -> None:
        """Group messages `start:` of `messages` (those before were added already)."""
        units = self.units
        for pos in range(start, len(messages)):
            span = _span(messages[pos])
            if span is None:  # made by pairing repair: belongs with the messages around it
                if units:
                    u = units[-1]
                    units[-1] = Unit(u.lo, u.hi, u.start, pos + 1)
                else:
                    units.append(Unit(self.covered, self.covered - 1, pos, pos + 1))
                continue
            lo, hi = span
            if units and lo <= units[-1].hi:
                u = units[-1]
                units[-1] = Unit(u.lo, max(u.hi, hi), u.start, pos + 1)
            else:
                if not units:
                    self.leading = lo
                else:
                    lo = units[-1].hi + 1
                units.append(Unit(lo, hi, pos, pos + 1))
            self.covered = max(self.covered, units[-1].hi + 1)
        self.seen = max(self.seen, len(messages))

    def finish(self, n_items: int) -> tuple[list[Unit], int]:
        """The units, the last one taking trailing raw items that made nothing, and `leading`."""
        units = list(self.units)
        if units and units[-1].hi < n_items - 1:
            u = units[-1]
            units[-1] = Unit(u.lo, n_items - 1, u.start, u.stop)
        return units, self.leading


# --------------------------------------------------------------------------- writing


def write(request: Request, history: AgentContext) -> dict[str, Any]:
    """The request body for `history`: the client's own raw items wherever a unit of them is in
    `history` unchanged, the writer's items for the rest; every other body field as sent."""
    items: list[Any] = list(request.items[: request.leading])
    fresh: list[Message] = []
    moved_breakpoints: list[Any] = []
    emitted: set[int] = set()
    messages = history.messages
    j = 0
    while j < len(messages):
        msg = messages[j]
        span = _span(msg)
        unit = request.unit_at(span[0]) if span is not None else None
        if unit is not None and unit.lo not in emitted:
            mine = request.context.messages[unit.start : unit.stop]
            if tuple(messages[j : j + len(mine)]) == mine:
                items.extend(_fresh_items(request.api, fresh))
                fresh = []
                items.extend(request.items[unit.lo : unit.hi + 1])
                emitted.add(unit.lo)
                j += len(mine)
                continue
        fresh.append(msg)
        j += 1
    items.extend(_fresh_items(request.api, fresh))
    for unit in request.units:
        if unit.lo not in emitted:
            moved_breakpoints.extend(_breakpoints(request.items[unit.lo : unit.hi + 1]))
    body = dict(request.body)
    if request.api == "anthropic":
        items = _merge_roles(items)
        _place_breakpoints(items, moved_breakpoints, body)
    body["input" if request.api == "openai-responses" else "messages"] = items
    if history.system_instruction != request.context.system_instruction:
        _set_system(request.api, body, history.system_instruction)
    return body


def _fresh_items(api: Api, messages: Sequence[Message]) -> list[Any]:
    if not messages:
        return []
    ctx = AgentContext(system_instruction="", messages=tuple(messages))
    if api == "anthropic":
        out: list[Any] = to_anthropic_request(ctx)["messages"]
        return out
    if api == "openai-chat":
        return to_openai_messages(ctx.replace(system_instruction=None))
    return responses_items(messages)


def responses_items(messages: Sequence[Message]) -> list[dict[str, Any]]:
    """Messages as Responses API input items (what compaction wrote: text, calls, results)."""
    out: list[dict[str, Any]] = []
    for msg in messages:
        texts: list[str] = []
        for block in msg.content:
            if isinstance(block, ToolCallBlock):
                args = block.input if isinstance(block.input, str) else canonical(block.input)
                out.append(
                    {
                        "type": "function_call",
                        "call_id": block.id,
                        "name": block.name,
                        "arguments": args,
                    }
                )
            elif block.type == "tool_result":
                out.append(
                    {
                        "type": "function_call_output",
                        "call_id": block.tool_call_id,
                        "output": block_as_text(block),
                    }
                )
            elif isinstance(block, ThinkingBlock):
                continue  # reasoning a summary stands for; encrypted items cannot be rewritten
            else:
                text = block_as_text(block)
                if text:
                    texts.append(text)
        if texts:
            role = "assistant" if msg.role == "assistant" else "user"
            kind = "output_text" if role == "assistant" else "input_text"
            content = [{"type": kind, "text": t} for t in texts]
            out.insert(
                len(out) if msg.role != "assistant" else _first_call(out, msg),
                {"type": "message", "role": role, "content": content},
            )
    return out


def _first_call(out: list[dict[str, Any]], msg: Message) -> int:
    """Assistant text goes before the message's calls, as a model writes them."""
    calls = len(msg.tool_calls)
    return len(out) - calls


def _merge_roles(items: list[Any]) -> list[Any]:
    """Anthropic turns alternate: two user (or assistant) items meeting at a seam become one,
    tool results first."""
    merged: list[Any] = []
    for item in items:
        prev = merged[-1] if merged else None
        if (
            isinstance(prev, dict)
            and isinstance(item, dict)
            and prev.get("role") == item.get("role")
            and item.get("role") in ("user", "assistant")
        ):
            blocks = _blocks(prev) + _blocks(item)
            if item.get("role") == "user":
                blocks.sort(key=lambda b: b.get("type") != "tool_result")
            merged[-1] = {**prev, "content": blocks}
        else:
            merged.append(item)
    return merged


def _blocks(item: dict[str, Any]) -> list[dict[str, Any]]:
    content = item.get("content")
    if isinstance(content, str):
        return [{"type": "text", "text": content}] if content else []
    return [b for b in content if isinstance(b, dict)] if isinstance(content, list) else []


def _breakpoints(items: Sequence[Any]) -> list[Any]:
    found: list[Any] = []
    for item in items:
        if not isinstance(item, dict):
            continue
        if "cache_control" in item:
            found.append(item["cache_control"])
        content = item.get("content")
        for block in content if isinstance(content, list) else []:
            if isinstance(block, dict) and "cache_control" in block:
                found.append(block["cache_control"])
    return found


MAX_BREAKPOINTS = 4


def _place_breakpoints(items: list[Any], moved: list[Any], body: dict[str, Any]) -> None:
    """A breakpoint the client set on a message compaction removed moves to the last block of
    the compacted prefix (the last written item before the client's own last item), within the
    API's limit of four."""
    if not moved or not items:
        return
    present = len(_breakpoints(items)) + len(_breakpoints(_listed(body.get("system"))))
    present += len(_breakpoints(_listed(body.get("tools"))))
    if present >= MAX_BREAKPOINTS:
        return
    for index in range(len(items) - 1, -1, -1):
        item = items[index]
        blocks = _blocks(item) if isinstance(item, dict) else []
        if blocks and "cache_control" not in blocks[-1] and index < len(items) - 1:
            blocks[-1] = {**blocks[-1], "cache_control": moved[-1]}
            items[index] = {**item, "content": blocks}
            return


def _listed(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def _set_system(api: Api, body: dict[str, Any], system: str | None) -> None:
    if api == "anthropic":
        if system:
            body["system"] = system
        else:
            body.pop("system", None)
    elif api == "openai-responses":
        if system:
            body["instructions"] = system
        else:
            body.pop("instructions", None)
    # chat completions carry the system prompt as the leading raw message, sent as it was


# --------------------------------------------------------------------------- conversations


def tool_names(body: dict[str, Any]) -> list[str]:
    names: list[str] = []
    for tool in _listed(body.get("tools")):
        if isinstance(tool, dict):
            fn = tool.get("function")
            name = fn.get("name") if isinstance(fn, dict) else tool.get("name", tool.get("type"))
            names.append(str(name))
    return names


def client_session_id(api: Api, body: dict[str, Any]) -> str | None:
    """The client's own session id: Claude Code's `metadata.user_id` (a JSON string holding
    `session_id`, or `user_..._session_<id>` in older versions), Codex's `prompt_cache_key`."""
    if api == "anthropic":
        meta = body.get("metadata")
        user = meta.get("user_id") if isinstance(meta, dict) else None
        if isinstance(user, str) and user:
            try:
                parsed = json.loads(user)
            except ValueError:
                parsed = None
            if isinstance(parsed, dict) and isinstance(parsed.get("session_id"), str):
                return str(parsed["session_id"])
            if "_session_" in user:
                return user.rsplit("_session_", 1)[1]
        return None
    key = body.get("prompt_cache_key")
    return key if isinstance(key, str) and key else None


def session_name(api: Api, body: dict[str, Any], header: str | None) -> str | None:
    """The session a request belongs to: the `X-Compactkit-Session` header, else the client's own
    session id (`client_session_id`). A tool server's serve state under the same name forgets
    what the gateway's compactions take from the model."""
    return header or client_session_id(api, body)


def conversation_key(api: Api, body: Any, header: str | None) -> str:
    """Which conversation a request belongs to. The session id (the header, else the client's)
    is qualified by the system prompt and tool names, so a client's side requests under the
    same session (a title request: another system prompt, no tools) are conversations of their
    own and never disturb the main one; without an id, the first message joins them."""
    items = _array(api, body)
    sid = session_name(api, body, header)
    if sid is None or api == "openai-chat":  # items looked at below (the reader checks them all)
        _objects(api, items)
    system = body.get("instructions") if api == "openai-responses" else body.get("system")
    if api == "openai-chat" and items[0].get("role") in ("system", "developer"):
        system = items[0].get("content")
    shape = [strip_cache_control(system), tool_names(body)]
    if sid is None:
        first = next((i for i in items if i.get("role") == "user"), items[0])
        shape.append(strip_cache_control(first))
    digest = hashlib.sha256(canonical(shape).encode("utf-8")).hexdigest()[:16]
    who = hashlib.sha256(sid.encode("utf-8")).hexdigest()[:16] if sid else "anon"
    return f"{api}:{who}:{digest}"


Writer = Callable[[Request, AgentContext], dict[str, Any]]

__all__ = [
    "Api",
    "Reader",
    "Request",
    "Unreadable",
    "conversation_key",
    "extends",
    "items_of",
    "read",
    "session_name",
    "write",
]
