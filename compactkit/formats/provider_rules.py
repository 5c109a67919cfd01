"""What the Anthropic Messages API and the OpenAI chat-completions API refuse in a request.

Two kinds of checks, each returning a list of problems (empty = accepted), each problem one line
naming where it is (`messages[3]`, `messages[3].content[0]`):

- the documented ORDERING rules, which no type can express (`anthropic_rule_problems`,
  `openai_rule_problems`), pure Python;
- the SHAPE of every message and content block, validated against the official SDKs' request
  TypedDicts with pydantic (`anthropic_sdk_problems`, `openai_sdk_problems`; they need the
  `anthropic` / `openai` packages, installed by the `test` extra).

Anthropic rules (Messages API docs "Messages", "Handle tool calls", and the API's own 400 errors):
- roles are `user` / `assistant` only (the system prompt is the top-level `system`), the first
  message is a user message, and the roles alternate;
- every message has content, except an optional final assistant message; text blocks hold
  non-whitespace text; the content of a final assistant message does not end in whitespace;
- each `tool_use` of an assistant message is answered by a `tool_result` in the very next
  (user) message, and the results come first in that message; each `tool_result` answers a
  `tool_use` of the message right before it, once;
- `tool_use` ids are unique and match `^[a-zA-Z0-9_-]+$`;
- a request holding `tool_use` / `tool_result` blocks defines `tools`; tool names match
  `^[a-zA-Z0-9_-]{1,64}$`.

OpenAI rules (chat-completions API reference and its 400 errors):
- roles are `system`, `developer`, `user`, `assistant`, `tool`;
- the `tool` messages answering an assistant message with `tool_calls` follow it immediately,
  one per call id, and every call is answered; a `tool` message answers a call of that assistant
  message (nothing else may come between);
- an assistant message has content or tool calls; system, developer and user messages have
  non-empty content;
- call ids are unique and at most 40 characters; tool names match `^[a-zA-Z0-9_-]{1,64}$`.

`pending_ok=True` accepts calls of the LAST message left without results (a saved session whose
last tool call had not returned), which a request to send may not hold.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from functools import cache
from typing import Any

ANTHROPIC_ID = re.compile(r"^[a-zA-Z0-9_-]+$")
TOOL_NAME = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")
OPENAI_ID_MAX = 40
_OPENAI_ROLES = frozenset({"system", "developer", "user", "assistant", "tool"})


# --------------------------------------------------------------------------- ordering rules


def _blocks(message: Any) -> list[dict[str, Any]]:
    content = message.get("content") if isinstance(message, dict) else None
    if isinstance(content, list):
        return [b for b in content if isinstance(b, dict)]
    return []


def _empty(content: Any) -> bool:
    if content is None:
        return True
    if isinstance(content, str):
        return not content
    return isinstance(content, list) and not content


def _blank_text(block: dict[str, Any]) -> bool:
    text = block.get("text")
    return block.get("type") == "text" and not (isinstance(text, str) and text.strip())


def _tool_names(tools: Any, path: str) -> list[str]:
    problems = []
    for n, tool in enumerate(tools if isinstance(tools, list) else []):
        fn = tool.get("function") if isinstance(tool, dict) else None
        name = (fn if isinstance(fn, dict) else tool if isinstance(tool, dict) else {}).get("name")
        if isinstance(tool, dict) and tool.get("type") == "custom":
            custom = tool.get("custom")
            name = custom.get("name") if isinstance(custom, dict) else tool.get("name")
        if not isinstance(name, str) or not TOOL_NAME.match(name):
            problems.append(f"{path}[{n}]: tool name {name!r} does not match {TOOL_NAME.pattern}")
    return problems


def _anthropic_content(where: str, m: dict[str, Any], final_assistant: bool) -> list[str]:
    """Empty or whitespace-only content (a final assistant turn may be empty, not end in space)."""
    problems: list[str] = []
    content = m.get("content")
    if _empty(content) and not final_assistant:
        problems.append(f"{where}: empty content")
    if isinstance(content, str) and content and not content.strip():
        problems.append(f"{where}: content is only whitespace")
    blocks = _blocks(m)
    problems += [
        f"{where}.content[{k}]: text block without non-whitespace text"
        for k, b in enumerate(blocks)
        if _blank_text(b)
    ]
    if final_assistant:
        tail = content if isinstance(content, str) else None
        if blocks and blocks[-1].get("type") == "text":
            tail = blocks[-1].get("text")
        if isinstance(tail, str) and tail != tail.rstrip():
            problems.append(f"{where}: final assistant content ends with whitespace")
    return problems


def _anthropic_uses(
    where: str, uses: list[dict[str, Any]], following: Any, seen_ids: set[str], check_answer: bool
) -> list[str]:
    """tool_use ids valid and unique, each answered first thing in the next message."""
    problems: list[str] = []
    for b in uses:
        cid = b.get("id")
        if not isinstance(cid, str) or not ANTHROPIC_ID.match(cid):
            problems.append(f"{where}: tool_use id {cid!r} does not match {ANTHROPIC_ID.pattern}")
        elif cid in seen_ids:
            problems.append(f"{where}: tool_use id {cid} used twice")
        if isinstance(cid, str):
            seen_ids.add(cid)
    if uses and check_answer:
        leading = []
        for b in _blocks(following) if following is not None else []:
            if b.get("type") != "tool_result":
                break
            leading.append(b.get("tool_use_id"))
        missing = [b.get("id") for b in uses if b.get("id") not in leading]
        if missing:
            problems.append(
                f"{where}: tool_use {', '.join(map(str, missing))} without a tool_result "
                "at the start of the next message"
            )
    return problems


def _anthropic_results(
    where: str, role: str, blocks: list[dict[str, Any]], previous: Any
) -> list[str]:
    """tool_result blocks: in a user message, first in it, answering the message before, once."""
    problems: list[str] = []
    called = {b.get("id") for b in _blocks(previous) if b.get("type") == "tool_use"}
    answered: set[Any] = set()
    other_seen = False
    for k, b in enumerate(blocks):
        if b.get("type") != "tool_result":
            other_seen = True
            continue
        cid = b.get("tool_use_id")
        if role != "user":
            problems.append(f"{where}.content[{k}]: tool_result in an {role} message")
        elif other_seen:
            problems.append(f"{where}.content[{k}]: tool_result after other content")
        if cid not in called:
            problems.append(
                f"{where}.content[{k}]: tool_result {cid} answers no tool_use of the message before"
            )
        elif cid in answered:
            problems.append(f"{where}.content[{k}]: second tool_result for {cid}")
        answered.add(cid)
    return problems


def anthropic_rule_problems(body: dict[str, Any], *, pending_ok: bool = False) -> list[str]:
    """Where a Messages API request body breaks the documented ordering and content rules."""
    messages = body.get("messages")
    if not isinstance(messages, list):
        return ["messages: missing"]
    problems: list[str] = []
    last = len(messages) - 1
    seen_ids: set[str] = set()
    uses_tools = False
    for n, m in enumerate(messages):
        where = f"messages[{n}]"
        role = m.get("role") if isinstance(m, dict) else None
        if role not in ("user", "assistant"):
            problems.append(f"{where}: role {role!r} (only user and assistant; system is separate)")
            continue
        if n == 0 and role != "user":
            problems.append(f"{where}: the first message must be a user message")
        if n > 0 and isinstance(messages[n - 1], dict) and messages[n - 1].get("role") == role:
            problems.append(f"{where}: two {role} messages in a row (roles must alternate)")
        problems += _anthropic_content(where, m, final_assistant=n == last and role == "assistant")
        blocks = _blocks(m)
        uses = [b for b in blocks if b.get("type") == "tool_use"]
        following = messages[n + 1] if n < last else None
        check_answer = role == "assistant" and not (n == last and pending_ok)
        problems += _anthropic_uses(where, uses, following, seen_ids, check_answer)
        problems += _anthropic_results(where, role, blocks, messages[n - 1] if n > 0 else {})
        uses_tools = uses_tools or any(b.get("type") in ("tool_use", "tool_result") for b in blocks)
    tools = body.get("tools")
    if uses_tools and not tools:
        problems.append("tools: the request holds tool_use / tool_result blocks but no tools")
    problems += _tool_names(tools, "tools")
    return problems


def openai_rule_problems(
    messages: list[Any], tools: Any = None, *, pending_ok: bool = False
) -> list[str]:
    """Where a chat-completions `messages` array (and its `tools`) breaks the documented rules."""
    problems: list[str] = []
    seen_ids: set[str] = set()
    open_calls: list[str] = []  # calls of the current assistant message not answered yet
    open_at = -1
    answering = False  # true while the messages since that assistant message are tool messages

    def close(at: int) -> None:
        nonlocal open_calls
        if open_calls and not (pending_ok and at == len(messages)):
            problems.append(
                f"messages[{open_at}]: tool_calls {', '.join(open_calls)} not answered by the "
                "tool messages right after"
            )
        open_calls = []

    for n, m in enumerate(messages):
        where = f"messages[{n}]"
        role = m.get("role") if isinstance(m, dict) else None
        if role not in _OPENAI_ROLES:
            problems.append(f"{where}: role {role!r}")
            continue
        if role == "tool":
            cid = m.get("tool_call_id")
            if not answering:
                problems.append(f"{where}: tool message not right after an assistant's tool_calls")
            elif cid in open_calls:
                open_calls.remove(cid)
            else:
                problems.append(
                    f"{where}: tool message {cid} answers no open call of the assistant"
                )
            continue
        close(n)
        answering = False
        calls = m.get("tool_calls") if role == "assistant" else None
        if role == "assistant":
            if _empty(m.get("content")) and not calls:
                problems.append(f"{where}: assistant message with neither content nor tool_calls")
            for call in calls if isinstance(calls, list) else []:
                cid = call.get("id") if isinstance(call, dict) else None
                if not isinstance(cid, str) or not cid:
                    problems.append(f"{where}: tool call without an id")
                    continue
                if len(cid) > OPENAI_ID_MAX:
                    problems.append(f"{where}: tool call id {cid} longer than {OPENAI_ID_MAX}")
                if cid in seen_ids:
                    problems.append(f"{where}: tool call id {cid} used twice")
                seen_ids.add(cid)
                open_calls.append(cid)
            open_at, answering = n, bool(open_calls)
        elif _empty(m.get("content")):
            problems.append(f"{where}: empty {role} content")
    close(len(messages))
    problems += _tool_names(tools, "tools")
    return problems


# --------------------------------------------------------------------------- SDK types


def _materialize(value: Any, path: str, problems: list[str]) -> Any:
    """`value` with pydantic's lazy `ValidatorIterator`s (for `Iterable[...]` fields) run."""
    if isinstance(value, dict):
        return {k: _materialize(v, f"{path}.{k}", problems) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_materialize(v, f"{path}[{n}]", problems) for n, v in enumerate(value)]
    if type(value).__name__ == "ValidatorIterator":
        from pydantic import ValidationError

        items: list[Any] = []
        iterator: Iterator[Any] = iter(value)
        while True:
            try:
                item = next(iterator)
            except StopIteration:
                break
            except ValidationError as exc:
                problems += _errors(exc, path)
                return items
            items.append(_materialize(item, f"{path}[{len(items)}]", problems))
        return items
    return value


def _errors(exc: Any, path: str) -> list[str]:
    """A validation error as lines, without the union members whose `type`/`role` tag differs."""
    errors = exc.errors(include_url=False)
    untagged = {
        tuple(e["loc"][:-1])
        for e in errors
        if e["type"] == "literal_error" and e["loc"] and e["loc"][-1] in ("type", "role")
    }
    kept = [e for e in errors if not any(tuple(e["loc"][: len(u)]) == u for u in untagged)]
    lines = []
    for e in kept or errors[:1]:
        loc = "".join(f"[{x}]" if isinstance(x, int) else f".{x}" for x in e["loc"])
        lines.append(f"{path}{loc}: {e['msg']}")
    return sorted(set(lines))


def _unknown_keys(given: Any, validated: Any, path: str, extra_ok: frozenset[str]) -> list[str]:
    """Keys of `given` that validation dropped: unknown to the SDK type that matched."""
    if isinstance(given, dict) and isinstance(validated, dict):
        problems = [
            f"{path}: unknown key {k!r}" for k in given if k not in validated and k not in extra_ok
        ]
        for k, v in given.items():
            if k in validated:
                problems += _unknown_keys(v, validated[k], f"{path}.{k}", extra_ok)
        return problems
    if isinstance(given, list) and isinstance(validated, list):
        return [
            p
            for n, (g, v) in enumerate(zip(given, validated, strict=False))
            for p in _unknown_keys(g, v, f"{path}[{n}]", extra_ok)
        ]
    return []


@cache
def _adapter(module: str, name: str) -> Any:
    import importlib

    from pydantic import TypeAdapter

    return TypeAdapter(getattr(importlib.import_module(module), name))


def sdk_problems(
    value: Any, module: str, name: str, path: str = "$", extra_ok: Iterable[str] = ()
) -> list[str]:
    """Where `value` does not fit the SDK TypedDict `module.name`, validated by pydantic in
    strict mode (no coercion; response models are not accepted for request dicts) down to every
    content block, plus the keys the type does not know (other than the key names `extra_ok`)."""
    from pydantic import ValidationError

    problems: list[str] = []
    try:
        validated = _adapter(module, name).validate_python(value, strict=True)
    except ValidationError as exc:
        return _errors(exc, path)
    validated = _materialize(validated, path, problems)
    return problems + _unknown_keys(value, validated, path, frozenset(extra_ok))


def anthropic_sdk_problems(body: dict[str, Any]) -> list[str]:
    """`body` (with a model and max_tokens added) against `anthropic`'s
    `MessageCreateParamsNonStreaming`: every message a `MessageParam`, every block a
    `TextBlockParam` / `ToolUseBlockParam` / `ToolResultBlockParam` / ..., tools `ToolUnionParam`."""
    full = {"model": "claude-sonnet-4-5", "max_tokens": 1024, **body}
    return sdk_problems(
        full, "anthropic.types.message_create_params", "MessageCreateParamsNonStreaming"
    )


LITELLM_EXTRA_KEYS = ("reasoning_content", "thinking_blocks", "name")
"""Keys a saved openai-chat session may hold beyond the API's: litellm's thinking, and `name`
on tool messages as logs record it (a request to send holds none of them)."""


def openai_sdk_problems(
    messages: list[Any], tools: Any = None, *, extra_ok: Iterable[str] = ()
) -> list[str]:
    """`messages` (each a `ChatCompletionMessageParam`, content parts included) and `tools` (each
    a `ChatCompletionToolUnionParam`) against `openai`'s `CompletionCreateParamsNonStreaming`;
    `extra_ok` names keys tolerated anyway (`LITELLM_EXTRA_KEYS` for a saved session)."""
    full: dict[str, Any] = {"model": "gpt-4o", "messages": messages}
    if tools is not None:
        full["tools"] = tools
    return sdk_problems(
        full,
        "openai.types.chat.completion_create_params",
        "CompletionCreateParamsNonStreaming",
        extra_ok=extra_ok,
    )


__all__ = [
    "LITELLM_EXTRA_KEYS",
    "anthropic_rule_problems",
    "anthropic_sdk_problems",
    "openai_rule_problems",
    "openai_sdk_problems",
    "sdk_problems",
]
