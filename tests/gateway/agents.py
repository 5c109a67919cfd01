"""Minimal agent loops on the official SDKs: each sends its whole history every call, runs the
`read_file` tool the model asks for, and stops at the model's answer."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

import anthropic
import openai

try:  # the SDKs moved to httpx2 (same API); their http_client must come from it
    import httpx2 as httpx
except ImportError:  # pragma: no cover - older SDKs
    import httpx  # type: ignore[no-redef]

from .conftest import KEY, chunk

SYSTEM = "You are a careful coding agent. Read files with read_file before you answer."
TOOL = {
    "name": "read_file",
    "description": "Read a file of the repository.",
    "input_schema": {"type": "object", "properties": {"path": {"type": "string"}}},
}
CHAT_TOOL = {
    "type": "function",
    "function": {
        "name": "read_file",
        "description": TOOL["description"],
        "parameters": TOOL["input_schema"],
    },
}
RESPONSES_TOOL = {"type": "function", "name": "read_file", "parameters": TOOL["input_schema"]}
MAX_CALLS = 60


@dataclass
class Run:
    """What the client sent (request bodies, in order) and the model's final answer."""

    sent: list[bytes] = field(default_factory=list)
    answer: str = ""

    def hooks(self) -> httpx.Client:
        def record(request: httpx.Request) -> None:
            if request.method == "POST" and request.url.path.endswith(
                ("/messages", "/completions", "/responses")
            ):
                self.sent.append(request.read())

        return httpx.Client(event_hooks={"request": [record]})


def anthropic_agent(
    base: str,
    task: str,
    *,
    stream: bool = False,
    headers: dict[str, str] | None = None,
    key: str = KEY,
) -> Run:
    run = Run()
    client = anthropic.Anthropic(
        base_url=base,
        api_key=key,
        http_client=run.hooks(),
        max_retries=0,
        default_headers=headers or {},
    )
    messages: list[dict[str, Any]] = [{"role": "user", "content": task}]
    for _ in range(MAX_CALLS):
        params: dict[str, Any] = {
            "model": "claude-test",
            "max_tokens": 256,
            "system": SYSTEM,
            "tools": [TOOL],
            "messages": messages,
        }
        if stream:
            with client.messages.stream(**params) as events:
                msg = events.get_final_message()
        else:
            msg = client.messages.create(**params)
        messages.append(
            {"role": "assistant", "content": [b.model_dump(exclude_none=True) for b in msg.content]}
        )
        calls = [b for b in msg.content if b.type == "tool_use"]
        if not calls:
            run.answer = "".join(b.text for b in msg.content if b.type == "text")
            return run
        messages.append(
            {
                "role": "user",
                "content": [
                    {"type": "tool_result", "tool_use_id": c.id, "content": chunk(c.input["path"])}
                    for c in calls
                ],
            }
        )
    raise AssertionError("the agent did not finish")


def chat_agent(
    base: str,
    task: str,
    *,
    stream: bool = False,
    key: str = KEY,
    headers: dict[str, str] | None = None,
) -> Run:
    run = Run()
    client = openai.OpenAI(
        base_url=base + "/v1",
        api_key=key,
        http_client=run.hooks(),
        max_retries=0,
        default_headers=headers or {},
    )
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": SYSTEM},
        {"role": "user", "content": task},
    ]
    for _ in range(MAX_CALLS):
        params: dict[str, Any] = {"model": "gpt-test", "tools": [CHAT_TOOL], "messages": messages}
        if stream:
            text, calls = "", {}
            with client.chat.completions.create(
                **params, stream=True, stream_options={"include_usage": True}
            ) as chunks:
                for c in chunks:
                    for choice in c.choices:
                        text += choice.delta.content or ""
                        for tc in choice.delta.tool_calls or []:
                            calls[tc.index] = tc
            tool_calls = [
                {
                    "id": tc.id,
                    "type": "function",
                    "function": {"name": tc.function.name, "arguments": tc.function.arguments},
                }
                for _, tc in sorted(calls.items())
            ]
        else:
            msg = client.chat.completions.create(**params).choices[0].message
            text = msg.content or ""
            tool_calls = [tc.model_dump() for tc in msg.tool_calls or []]
        reply: dict[str, Any] = {"role": "assistant", "content": text}
        if tool_calls:
            reply["tool_calls"] = tool_calls
        messages.append(reply)
        if not tool_calls:
            run.answer = text
            return run
        for tc in tool_calls:
            path = json.loads(tc["function"]["arguments"])["path"]
            messages.append({"role": "tool", "tool_call_id": tc["id"], "content": chunk(path)})
    raise AssertionError("the agent did not finish")


def responses_agent(base: str, task: str, *, stream: bool = False, cache_key: str = "k1") -> Run:
    run = Run()
    client = openai.OpenAI(
        base_url=base + "/v1", api_key=KEY, http_client=run.hooks(), max_retries=0
    )
    items: list[dict[str, Any]] = [
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": task}]}
    ]
    for _ in range(MAX_CALLS):
        params: dict[str, Any] = {
            "model": "gpt-test",
            "instructions": SYSTEM,
            "tools": [RESPONSES_TOOL],
            "input": items,
            "prompt_cache_key": cache_key,
            "store": False,
        }
        if stream:
            output: list[Any] = []
            with client.responses.create(**params, stream=True) as events:
                for event in events:
                    if event.type == "response.output_item.done":
                        output.append(event.item)
        else:
            output = list(client.responses.create(**params).output)
        calls = [o for o in output if o.type == "function_call"]
        for o in output:
            items.append(o.model_dump(exclude_none=True))
        if not calls:
            run.answer = "".join(c.text for o in output if o.type == "message" for c in o.content)
            return run
        for c in calls:
            path = json.loads(c.arguments)["path"]
            items.append(
                {"type": "function_call_output", "call_id": c.call_id, "output": chunk(path)}
            )
    raise AssertionError("the agent did not finish")
