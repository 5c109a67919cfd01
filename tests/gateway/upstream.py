"""A scripted fake model API on loopback (Anthropic Messages, Chat Completions, Responses) that
records every request it receives, and a helper that serves an ASGI app on a free port."""

from __future__ import annotations

import asyncio
import contextlib
import json
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from compactkit.gateway.app import listening_socket

SUMMARY_ASK = "Stop here and do not call any tool."
"""How the gateway's summary instruction starts (`compactkit.gateway.summary.INSTRUCTION`)."""


@contextlib.contextmanager
def serving(app: Any, http: Any = "auto") -> Iterator[str]:
    """Serve `app` on 127.0.0.1 at a free port (`http`: uvicorn's protocol); yields its base
    URL; stops within 10 s."""
    sock = listening_socket("127.0.0.1", 0)
    port = sock.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="on", http=http))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not server.started and time.monotonic() < deadline and thread.is_alive():
        time.sleep(0.01)
    assert server.started, "server did not start"
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(10)
        sock.close()


@dataclass
class Received:
    method: str
    path: str
    headers: dict[str, str]
    body: bytes

    def json(self) -> Any:
        try:
            return json.loads(self.body)
        except ValueError:
            return None


def _count_results(api: str, body: dict[str, Any]) -> int:
    """The number of the next call: one past the newest result's (compaction may have removed
    the older ones, so they cannot be counted)."""
    ids: list[str] = []
    if api == "anthropic":
        ids = [
            b["tool_use_id"]
            for m in body["messages"]
            if isinstance(m.get("content"), list)
            for b in m["content"]
            if b.get("type") == "tool_result"
        ]
    elif api == "openai-chat":
        ids = [m["tool_call_id"] for m in body["messages"] if m.get("role") == "tool"]
    else:
        ids = [i["call_id"] for i in body["input"] if i.get("type") == "function_call_output"]
    if not ids:
        return 0
    tail = ids[-1].rsplit("_", 1)[-1]
    return int(tail) + 1 if tail.isdigit() else 1 << 30  # not one of its own calls


def _well_formed(body: Any) -> bool:
    items = body.get("messages", body.get("input")) if isinstance(body, dict) else None
    return isinstance(items, list) and all(isinstance(i, dict) for i in items)


def is_summary_request(body: Any) -> bool:
    return isinstance(body, dict) and _asks_summary(body)


def _asks_summary(body: dict[str, Any]) -> bool:
    items = body.get("messages", body.get("input")) or [{}]
    content = items[-1].get("content")
    return isinstance(content, str) and content.startswith(SUMMARY_ASK)


def _parts(body: dict[str, Any]) -> list[str]:
    """A prompt as a cache sees it: system, tools, then each message, as text."""
    items = body.get("messages", body.get("input")) or []
    head = [body.get("system"), body.get("instructions"), body.get("tools")]
    return [json.dumps(p, sort_keys=True) for p in (*head, *items)]


def _tokens(parts: list[str]) -> int:
    return sum(len(p) // 4 for p in parts)


def _common(parts: list[str], seen: list[str]) -> int:
    """Tokens of the prefix `parts` shares with a prompt seen before (whole parts)."""
    n = 0
    while n < min(len(parts), len(seen)) and parts[n] == seen[n]:
        n += 1
    return _tokens(parts[:n])


def _summary_answer(path: str, text: str, parts: list[str], cached: int) -> Response:
    """The summary, its usage reporting the prompt's cached prefix as cache reads."""
    fresh = _tokens(parts) - cached
    if path == "/v1/messages":
        usage = {"input_tokens": fresh, "cache_read_input_tokens": cached, "output_tokens": 50}
        content = [{"type": "text", "text": text}]
        return JSONResponse({"id": "msg_sum", "type": "message", "role": "assistant",
                             "content": content, "stop_reason": "end_turn", "usage": usage})  # fmt: skip
    details = {"cached_tokens": cached}
    if path == "/v1/chat/completions":
        usage = {"prompt_tokens": fresh + cached, "completion_tokens": 50,
                 "prompt_tokens_details": details}  # fmt: skip
        message = {"role": "assistant", "content": text}
        choice = {"index": 0, "message": message, "finish_reason": "stop"}
        return JSONResponse({"id": "chatcmpl-sum", "object": "chat.completion",
                             "choices": [choice], "usage": usage})  # fmt: skip
    usage = {"input_tokens": fresh + cached, "output_tokens": 50, "input_tokens_details": details}
    out = [{"type": "message", "role": "assistant", "status": "completed",
            "content": [{"type": "output_text", "text": text, "annotations": []}]}]  # fmt: skip
    return JSONResponse({"id": "resp_sum", "object": "response", "status": "completed",
                         "output": out, "usage": usage})  # fmt: skip


def _sse(event: str | None, data: Any) -> bytes:
    head = f"event: {event}\n" if event else ""
    return (head + "data: " + json.dumps(data) + "\n\n").encode()


@dataclass
class FakeModel:
    """Calls `read_file` (with the number of results so far) until `turns` results are in the
    conversation, then answers `final`. `hook(received)` may return a Response to send instead
    (errors, a dying stream)."""

    turns: int = 8
    final: str = "All done."
    received: list[Received] = field(default_factory=list)
    hook: Callable[[Received], Response | None] | None = None
    script: Callable[[str, dict[str, Any]], tuple[str, str, dict[str, Any]] | str | None] | None = (
        None
    )
    """Decides a turn before the default behaviour: a call, the answer's text, or None."""
    lock: threading.Lock = field(default_factory=threading.Lock)
    summary: str = "## Task\n- the task\n## Files read\n- chunk0\n## Open items\n- none"
    """What it answers the gateway's summary request (`compactkit.gateway.summary`)."""
    summary_delay: float = 0.0
    """Seconds it takes to answer a summary request."""
    prompts: list[list[str]] = field(default_factory=list)
    """The last prompts received, as their parts (system, tools, each message): its cache."""

    def app(self) -> Starlette:
        return Starlette(
            routes=[
                Route("/v1/messages", self.messages, methods=["POST"]),
                Route("/v1/chat/completions", self.chat, methods=["POST"]),
                Route("/v1/responses", self.responses, methods=["POST"]),
                Route("/{path:path}", self.other, methods=["GET", "POST", "DELETE"]),
            ]
        )

    async def _receive(self, request: Request) -> Received:
        got = Received(
            request.method, request.url.path, dict(request.headers), await request.body()
        )
        with self.lock:
            self.received.append(got)
        return got

    def _next(self, api: str, body: dict[str, Any]) -> tuple[str, str, dict[str, Any]] | str:
        """(call id, tool, arguments) of the next call, or the final answer's text."""
        if self.script is not None and (step := self.script(api, body)) is not None:
            return step
        n = _count_results(api, body)
        if n >= self.turns:
            return self.final
        return f"call_{n}", "read_file", {"path": f"chunk{n}"}

    async def _start(self, request: Request) -> tuple[Received, Any, Response | None]:
        """The request recorded; the hook's answer, or a 400 for a body no API takes, or the
        answer to a summary request."""
        got = await self._receive(request)
        if self.hook and (answer := self.hook(got)):
            return got, None, answer
        body = got.json()
        if not _well_formed(body):
            return got, body, JSONResponse({"error": "invalid request"}, status_code=400)
        parts = _parts(body)
        with self.lock:
            seen = list(self.prompts)
            self.prompts = [*seen[-7:], parts]
        if _asks_summary(body):
            cached = max((_common(parts, prompt) for prompt in seen), default=0)
            await asyncio.sleep(self.summary_delay)
            return got, body, _summary_answer(got.path, self.summary, parts, cached)
        return got, body, None

    async def other(self, request: Request) -> Response:
        got = await self._receive(request)
        if self.hook and (answer := self.hook(got)):
            return answer
        if got.path == "/v1/messages/count_tokens":
            return JSONResponse({"input_tokens": len(got.body) // 4}, headers={"x-fake": "1"})
        if got.path == "/v1/models":
            return JSONResponse({"data": [{"id": "fake-model"}]}, headers={"x-fake": "1"})
        return JSONResponse({"error": "no such route"}, status_code=404)

    async def messages(self, request: Request) -> Response:
        got, body, early = await self._start(request)
        if early is not None:
            return early
        step = self._next("anthropic", body)
        usage = {
            "input_tokens": len(got.body) // 4,
            "output_tokens": 7,
            "cache_read_input_tokens": 3,
            "cache_creation_input_tokens": 2,
        }
        if isinstance(step, str):
            content = [{"type": "text", "text": step}]
            stop = "end_turn"
        else:
            cid, tool, args = step
            content = [
                {"type": "text", "text": "Reading."},
                {"type": "tool_use", "id": f"toolu_{cid}", "name": tool, "input": args},
            ]
            stop = "tool_use"
        message = {
            "id": "msg_fake",
            "type": "message",
            "role": "assistant",
            "model": body.get("model", "fake"),
            "content": content,
            "stop_reason": stop,
            "stop_sequence": None,
            "usage": usage,
        }
        if not body.get("stream"):
            return JSONResponse(message)

        def events() -> Iterator[bytes]:
            start = {**message, "content": [], "stop_reason": None}
            yield _sse("message_start", {"type": "message_start", "message": start})
            for i, block in enumerate(content):
                if block["type"] == "text":
                    yield _sse(
                        "content_block_start",
                        {
                            "type": "content_block_start",
                            "index": i,
                            "content_block": {"type": "text", "text": ""},
                        },
                    )
                    delta = {"type": "text_delta", "text": block["text"]}
                else:
                    yield _sse(
                        "content_block_start",
                        {
                            "type": "content_block_start",
                            "index": i,
                            "content_block": {**block, "input": {}},
                        },
                    )
                    delta = {"type": "input_json_delta", "partial_json": json.dumps(block["input"])}
                yield _sse(
                    "content_block_delta",
                    {"type": "content_block_delta", "index": i, "delta": delta},
                )
                yield _sse("content_block_stop", {"type": "content_block_stop", "index": i})
            yield _sse(
                "message_delta",
                {
                    "type": "message_delta",
                    "delta": {"stop_reason": stop, "stop_sequence": None},
                    "usage": {"output_tokens": 7},
                },
            )
            yield _sse("message_stop", {"type": "message_stop"})

        return StreamingResponse(events(), media_type="text/event-stream")

    async def chat(self, request: Request) -> Response:
        got, body, early = await self._start(request)
        if early is not None:
            return early
        step = self._next("openai-chat", body)
        usage = {
            "prompt_tokens": len(got.body) // 4,
            "completion_tokens": 7,
            "total_tokens": len(got.body) // 4 + 7,
            "prompt_tokens_details": {"cached_tokens": 3},
        }
        if isinstance(step, str):
            message: dict[str, Any] = {"role": "assistant", "content": step}
            finish = "stop"
        else:
            cid, tool, args = step
            call = {
                "id": cid,
                "type": "function",
                "function": {"name": tool, "arguments": json.dumps(args)},
            }
            message = {"role": "assistant", "content": "Reading.", "tool_calls": [call]}
            finish = "tool_calls"
        base = {"id": "chatcmpl-fake", "created": 0, "model": body.get("model", "fake")}
        if not body.get("stream"):
            return JSONResponse(
                {
                    **base,
                    "object": "chat.completion",
                    "choices": [{"index": 0, "message": message, "finish_reason": finish}],
                    "usage": usage,
                }
            )

        def chunks() -> Iterator[bytes]:
            chunk = {**base, "object": "chat.completion.chunk"}
            delta: dict[str, Any] = {"role": "assistant", "content": message["content"]}
            yield _sse(None, {**chunk, "choices": [{"index": 0, "delta": delta}]})
            for i, call in enumerate(message.get("tool_calls", [])):
                delta = {"tool_calls": [{"index": i, **call}]}
                yield _sse(None, {**chunk, "choices": [{"index": 0, "delta": delta}]})
            yield _sse(
                None, {**chunk, "choices": [{"index": 0, "delta": {}, "finish_reason": finish}]}
            )
            if (body.get("stream_options") or {}).get("include_usage"):
                yield _sse(None, {**chunk, "choices": [], "usage": usage})
            yield b"data: [DONE]\n\n"

        return StreamingResponse(chunks(), media_type="text/event-stream")

    async def responses(self, request: Request) -> Response:
        got, body, early = await self._start(request)
        if early is not None:
            return early
        step = self._next("openai-responses", body)
        usage = {
            "input_tokens": len(got.body) // 4,
            "output_tokens": 7,
            "total_tokens": len(got.body) // 4 + 7,
            "input_tokens_details": {"cached_tokens": 3},
            "output_tokens_details": {"reasoning_tokens": 0},
        }
        if isinstance(step, str):
            output: list[dict[str, Any]] = [
                {
                    "type": "message",
                    "id": "msg_1",
                    "role": "assistant",
                    "status": "completed",
                    "content": [{"type": "output_text", "text": step, "annotations": []}],
                }
            ]
        else:
            cid, tool, args = step
            output = [
                {
                    "type": "function_call",
                    "id": f"fc_{cid}",
                    "call_id": cid,
                    "name": tool,
                    "arguments": json.dumps(args),
                    "status": "completed",
                }
            ]
        response = {
            "id": "resp_fake",
            "object": "response",
            "created_at": 0,
            "status": "completed",
            "model": body.get("model", "fake"),
            "output": output,
            "parallel_tool_calls": True,
            "tool_choice": "auto",
            "tools": [],
            "usage": usage,
        }
        if not body.get("stream"):
            return JSONResponse(response)

        def events() -> Iterator[bytes]:
            seq = 0
            created = {**response, "status": "in_progress", "output": [], "usage": None}
            yield _sse(
                "response.created",
                {"type": "response.created", "sequence_number": seq, "response": created},
            )
            for i, item in enumerate(output):
                seq += 1
                yield _sse(
                    "response.output_item.added",
                    {
                        "type": "response.output_item.added",
                        "sequence_number": seq,
                        "output_index": i,
                        "item": item,
                    },
                )
                seq += 1
                yield _sse(
                    "response.output_item.done",
                    {
                        "type": "response.output_item.done",
                        "sequence_number": seq,
                        "output_index": i,
                        "item": item,
                    },
                )
            seq += 1
            yield _sse(
                "response.completed",
                {"type": "response.completed", "sequence_number": seq, "response": response},
            )

        return StreamingResponse(events(), media_type="text/event-stream")
