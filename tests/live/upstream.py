"""A scripted fake model API on loopback: Anthropic Messages, OpenAI Responses and Chat Completions.

`FakeUpstream(script)` serves on 127.0.0.1 at a free port. Each *turn request* (a request of the
conversation: by default one that offers tools) gets the script's next `Turn`: tool calls to make,
or a final answer. Everything else (Claude Code's title request, `count_tokens`, `GET /v1/models`,
HEAD probes) gets a short sensible reply and does not consume the script. Every request is recorded
with its headers and body, in arrival order, for assertions.

Replies are shaped as the real APIs send them, streamed (SSE, chunked) when the request asks for
`stream`, JSON otherwise. Usage is counted as the real APIs report it, with tokens estimated as
characters / 4 and the cached part as the prefix shared with the previous turn request.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

# A request that reaches the fake's socket but never finishes sending is dropped after this long.
SOCKET_TIMEOUT_S = 30.0


@dataclass(frozen=True)
class ToolCall:
    """A tool call the model makes: `name` and its `input`, the arguments object, or free text
    for a Responses API custom tool (Codex's `apply_patch`)."""

    name: str
    input: Mapping[str, Any] | str


@dataclass(frozen=True)
class RecordedRequest:
    """One request the fake received, as it arrived."""

    method: str
    path: str
    headers: Mapping[str, str]  # names lower-cased
    raw: bytes
    body: Any  # the parsed JSON body, None when there is none or it is not JSON
    api: str  # "anthropic", "responses", "chat" or "other"
    turn: int | None  # the script turn it was answered with; None for a side request
    thread: str = ""  # the Script.threads key it was played from; "" for the main conversation

    @property
    def is_turn(self) -> bool:
        return self.turn is not None


# A turn's text may depend on the request it answers (e.g. to repeat the tool result it got back).
Text = str | Callable[[RecordedRequest], str]


@dataclass(frozen=True)
class Turn:
    """What the model says in one turn: optional text, then tool calls (none: the final answer)."""

    text: Text = ""
    tool_calls: tuple[ToolCall, ...] = ()

    def render(self, request: RecordedRequest) -> str:
        return self.text(request) if callable(self.text) else self.text


def call(name: str, **arguments: Any) -> Turn:
    """A turn that makes one tool call."""
    return Turn(tool_calls=(ToolCall(name, arguments),))


def answer(text: Text) -> Turn:
    """A final turn: the model answers and makes no tool call."""
    return Turn(text=text)


def offers_tools(request: RecordedRequest) -> bool:
    """The default test for a turn request: the client offered tools (the agent loop does, side
    requests such as titles and summaries do not)."""
    return isinstance(request.body, dict) and bool(request.body.get("tools"))


@dataclass
class Script:
    """The turns the model plays, in order, and how to tell a turn request from a side request.

    `threads` scripts other conversations the client runs beside the main one (a subagent): a
    turn request whose user text contains a key plays that key's turns, counted apart, so the
    order in which the client interleaves the conversations does not matter."""

    turns: Sequence[Turn]
    is_turn: Callable[[RecordedRequest], bool] = offers_tools
    side_text: str = "Scripted session"  # what side requests (titles, summaries) are answered
    threads: Mapping[str, Sequence[Turn]] = field(default_factory=dict)
    served: dict[str, int] = field(default_factory=dict, init=False)  # turns played, per thread

    def thread_of(self, request: RecordedRequest) -> str:
        said = user_text(request)
        return next((key for key in self.threads if key in said), "")

    def turns_of(self, thread: str) -> Sequence[Turn]:
        return self.threads[thread] if thread else self.turns


# --- conversation content as each API sends it -------------------------------------------------


def tool_results(request: RecordedRequest) -> list[str]:
    """The text of every tool result in the request, oldest first (any of the three APIs)."""
    body = request.body if isinstance(request.body, dict) else {}
    out: list[str] = []
    if request.api == "anthropic":
        for message in body.get("messages") or []:
            content = message.get("content")
            for block in content if isinstance(content, list) else []:
                if isinstance(block, dict) and block.get("type") == "tool_result":
                    out.append(_text_of(block.get("content")))
    elif request.api == "responses":
        for item in body.get("input") or []:
            if isinstance(item, dict) and item.get("type") in (
                "function_call_output",
                "custom_tool_call_output",
            ):
                out.append(_text_of(item.get("output")))
    elif request.api == "chat":
        for message in body.get("messages") or []:
            if message.get("role") == "tool":
                out.append(_text_of(message.get("content")))
    return out


def user_text(request: RecordedRequest) -> str:
    """Every text the user role carries in the request (not tool results), joined."""
    body = request.body if isinstance(request.body, dict) else {}
    messages = body.get("input") if request.api == "responses" else body.get("messages")
    parts: list[str] = []
    for message in messages if isinstance(messages, list) else []:
        if not isinstance(message, dict) or message.get("role") != "user":
            continue
        content = message.get("content")
        blocks = content if isinstance(content, list) else [content]
        for block in blocks:
            if isinstance(block, str):
                parts.append(block)
            elif isinstance(block, dict) and block.get("type") in ("text", "input_text"):
                parts.append(str(block.get("text", "")))
    return "\n".join(parts)


def last_tool_result(request: RecordedRequest) -> str:
    results = tool_results(request)
    return results[-1] if results else ""


def _text_of(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(_text_of(part) for part in content)
    if isinstance(content, dict):
        for key in ("text", "output", "content"):
            if key in content:
                return _text_of(content[key])
    return ""


def _prompt_text(api: str, body: Mapping[str, Any]) -> str:
    """What the model would read, serialized in request order: the base of token counts and of the
    simulated prompt cache."""
    keys = {
        "anthropic": ("system", "tools", "messages"),
        "responses": ("instructions", "tools", "input"),
        "chat": ("tools", "messages"),
    }.get(api, ())
    return json.dumps([body.get(k) for k in keys], sort_keys=True, ensure_ascii=False)


def _output_schema(request: RecordedRequest) -> dict[str, Any] | None:
    """The JSON schema a request asks the answer to follow, wherever its API puts it."""
    body = request.body if isinstance(request.body, dict) else {}
    candidates = [
        (body.get("output_format") or {}).get("schema"),  # Anthropic structured outputs (beta)
        ((body.get("output_config") or {}).get("format") or {}).get("schema"),  # Anthropic
        ((body.get("text") or {}).get("format") or {}).get("schema"),  # Responses
        ((body.get("response_format") or {}).get("json_schema") or {}).get("schema"),  # Chat
    ]
    return next((c for c in candidates if isinstance(c, dict)), None)


def _instance_of(schema: Mapping[str, Any], text: str) -> Any:
    """A small value that satisfies `schema`: required properties filled, strings `text`."""
    kind = schema.get("type")
    if schema.get("enum"):
        return schema["enum"][0]
    if kind == "object" or "properties" in schema:
        properties = schema.get("properties") or {}
        return {k: _instance_of(properties.get(k) or {}, text) for k in schema.get("required", [])}
    return {"array": [], "integer": 0, "number": 0, "boolean": False, "null": None}.get(
        str(kind), text
    )


def _tokens(text: str) -> int:
    return max(1, len(text) // 4)


def _common_prefix(a: str, b: str) -> int:
    n = min(len(a), len(b))
    i = 0
    while i < n and a[i] == b[i]:
        i += 1
    return i


@dataclass(frozen=True)
class Usage:
    input: int  # every prompt token, cached or not
    cached: int
    output: int


# --- the three reply shapes ----------------------------------------------------------------------

Event = tuple[str | None, dict[str, Any]]  # (SSE event name, data)


def _anthropic_blocks(turn: Turn, text: str, n: int) -> list[dict[str, Any]]:
    blocks: list[dict[str, Any]] = []
    if text:
        blocks.append({"type": "text", "text": text})
    for i, tool in enumerate(turn.tool_calls):
        blocks.append(
            {
                "type": "tool_use",
                "id": f"toolu_fake{n:03d}{i}",
                "name": tool.name,
                "input": _arguments(tool),
            }
        )
    return blocks


def _anthropic_usage(usage: Usage) -> dict[str, Any]:
    return {
        "input_tokens": usage.input - usage.cached,
        "cache_creation_input_tokens": 0,
        "cache_read_input_tokens": usage.cached,
        "output_tokens": usage.output,
        "service_tier": "standard",
    }


def anthropic_message(model: str, turn: Turn, text: str, n: int, usage: Usage) -> dict[str, Any]:
    return {
        "id": f"msg_fake{n:04d}",
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": _anthropic_blocks(turn, text, n),
        "stop_reason": "tool_use" if turn.tool_calls else "end_turn",
        "stop_sequence": None,
        "usage": _anthropic_usage(usage),
    }


def anthropic_events(message: dict[str, Any]) -> Iterator[Event]:
    """The Messages API stream: message_start, one start/delta.../stop per block, message_delta
    with the stop reason and usage, message_stop."""
    start = dict(message, content=[], stop_reason=None)
    start["usage"] = dict(message["usage"], output_tokens=1)
    yield "message_start", {"type": "message_start", "message": start}
    yield "ping", {"type": "ping"}
    for index, block in enumerate(message["content"]):
        if block["type"] == "text":
            empty = {"type": "text", "text": ""}
            deltas = [{"type": "text_delta", "text": part} for part in _pieces(block["text"])]
        else:
            empty = dict(block, input={})
            raw = json.dumps(block["input"], ensure_ascii=False)
            deltas = [{"type": "input_json_delta", "partial_json": ""}]
            deltas += [{"type": "input_json_delta", "partial_json": part} for part in _pieces(raw)]
        yield (
            "content_block_start",
            {"type": "content_block_start", "index": index, "content_block": empty},
        )
        for delta in deltas:
            yield (
                "content_block_delta",
                {"type": "content_block_delta", "index": index, "delta": delta},
            )
        yield "content_block_stop", {"type": "content_block_stop", "index": index}
    yield (
        "message_delta",
        {
            "type": "message_delta",
            "delta": {"stop_reason": message["stop_reason"], "stop_sequence": None},
            "usage": message["usage"],
        },
    )
    yield "message_stop", {"type": "message_stop"}


def _responses_items(turn: Turn, text: str, n: int) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = []
    if text:
        items.append(
            {
                "id": f"msg_fake{n:04d}",
                "type": "message",
                "status": "completed",
                "role": "assistant",
                "content": [{"type": "output_text", "text": text, "annotations": []}],
            }
        )
    for i, tool in enumerate(turn.tool_calls):
        item = {
            "id": f"fc_fake{n:04d}{i}",
            "status": "completed",
            "call_id": f"call_fake{n:04d}{i}",
        }
        if isinstance(tool.input, str):
            item |= {"type": "custom_tool_call", "name": tool.name, "input": tool.input}
        else:
            arguments = json.dumps(dict(tool.input), ensure_ascii=False)
            item |= {"type": "function_call", "name": tool.name, "arguments": arguments}
        items.append(item)
    return items


def responses_object(
    body: Mapping[str, Any], turn: Turn, text: str, n: int, usage: Usage
) -> dict[str, Any]:
    return {
        "id": f"resp_fake{n:04d}",
        "object": "response",
        "created_at": 1_700_000_000 + n,
        "status": "completed",
        "model": body.get("model", "fake"),
        "output": _responses_items(turn, text, n),
        "parallel_tool_calls": body.get("parallel_tool_calls", True),
        "tool_choice": body.get("tool_choice", "auto"),
        "tools": body.get("tools", []),
        "usage": {
            "input_tokens": usage.input,
            "input_tokens_details": {"cached_tokens": usage.cached},
            "output_tokens": usage.output,
            "output_tokens_details": {"reasoning_tokens": 0},
            "total_tokens": usage.input + usage.output,
        },
    }


def responses_events(response: dict[str, Any]) -> Iterator[Event]:
    """The Responses stream: response.created/in_progress, per output item added, its deltas and
    done, then response.completed with usage; every event numbered by sequence_number."""
    seq = iter(range(1_000_000))
    pending = dict(response, status="in_progress", output=[], usage=None)

    def event(kind: str, **data: Any) -> Event:
        return kind, {"type": kind, "sequence_number": next(seq), **data}

    yield event("response.created", response=pending)
    yield event("response.in_progress", response=pending)
    for index, item in enumerate(response["output"]):
        if item["type"] == "message":
            text = item["content"][0]["text"]
            yield event(
                "response.output_item.added",
                output_index=index,
                item=dict(item, status="in_progress", content=[]),
            )
            part = {"type": "output_text", "text": "", "annotations": []}
            where = {"item_id": item["id"], "output_index": index, "content_index": 0}
            yield event("response.content_part.added", **where, part=part)
            for piece in _pieces(text):
                yield event("response.output_text.delta", **where, delta=piece, logprobs=[])
            yield event("response.output_text.done", **where, text=text, logprobs=[])
            yield event("response.content_part.done", **where, part=dict(part, text=text))
        else:
            field, stream = (
                ("arguments", "function_call_arguments")
                if item["type"] == "function_call"
                else ("input", "custom_tool_call_input")
            )
            yield event(
                "response.output_item.added",
                output_index=index,
                item=dict(item, status="in_progress", **{field: ""}),
            )
            where = {"item_id": item["id"], "output_index": index}
            for piece in _pieces(item[field]):
                yield event(f"response.{stream}.delta", **where, delta=piece)
            yield event(f"response.{stream}.done", **where, **{field: item[field]})
        yield event("response.output_item.done", output_index=index, item=item)
    yield event("response.completed", response=response)


def chat_completion(
    body: Mapping[str, Any], turn: Turn, text: str, n: int, usage: Usage
) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": text or None, "refusal": None}
    if turn.tool_calls:
        message["tool_calls"] = [
            {
                "id": f"call_fake{n:04d}{i}",
                "type": "function",
                "function": {"name": tool.name, "arguments": json.dumps(_arguments(tool))},
            }
            for i, tool in enumerate(turn.tool_calls)
        ]
    return {
        "id": f"chatcmpl-fake{n:04d}",
        "object": "chat.completion",
        "created": 1_700_000_000 + n,
        "model": body.get("model", "fake"),
        "choices": [
            {
                "index": 0,
                "message": message,
                "logprobs": None,
                "finish_reason": "tool_calls" if turn.tool_calls else "stop",
            }
        ],
        "usage": {
            "prompt_tokens": usage.input,
            "completion_tokens": usage.output,
            "total_tokens": usage.input + usage.output,
            "prompt_tokens_details": {"cached_tokens": usage.cached},
        },
    }


def chat_events(completion: dict[str, Any], include_usage: bool) -> Iterator[Event]:
    """Chat Completions chunks: role first, content deltas, tool-call deltas (id and name first,
    then argument pieces), the finish reason, an optional usage chunk; `[DONE]` follows."""
    base = {k: completion[k] for k in ("id", "created", "model")} | {
        "object": "chat.completion.chunk"
    }
    choice = completion["choices"][0]
    message = choice["message"]

    def chunk(delta: dict[str, Any], finish: str | None = None) -> Event:
        data = dict(
            base, choices=[{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}]
        )
        if include_usage:
            data["usage"] = None
        return None, data

    yield chunk({"role": "assistant", "content": "", "refusal": None})
    for piece in _pieces(message["content"] or ""):
        yield chunk({"content": piece})
    for index, tool in enumerate(message.get("tool_calls") or []):
        head = {
            "index": index,
            "id": tool["id"],
            "type": "function",
            "function": {"name": tool["function"]["name"], "arguments": ""},
        }
        yield chunk({"tool_calls": [head]})
        for piece in _pieces(tool["function"]["arguments"]):
            yield chunk({"tool_calls": [{"index": index, "function": {"arguments": piece}}]})
    yield chunk({}, choice["finish_reason"])
    if include_usage:
        yield None, dict(base, choices=[], usage=completion["usage"])


def _arguments(tool: ToolCall) -> dict[str, Any]:
    if isinstance(tool.input, str):
        raise ValueError(f"{tool.name}: free-text input is a Responses API custom tool call only")
    return dict(tool.input)


def _pieces(text: str, size: int = 24) -> list[str]:
    """Text cut the way a model streams it: several deltas, never an empty one."""
    return [text[i : i + size] for i in range(0, len(text), size)]


# --- the server ------------------------------------------------------------------------------------


class FakeUpstream:
    """The fake model API. Use as a context manager, or `start()` / `stop()`."""

    def __init__(self, script: Script | Sequence[Turn] = ()) -> None:
        self.script = script if isinstance(script, Script) else Script(list(script))
        self.requests: list[RecordedRequest] = []
        self.problems: list[str] = []  # requests the script could not answer
        self._lock = threading.Lock()
        self._previous_prompt: dict[str, str] = {}
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # lifecycle
    def start(self) -> FakeUpstream:
        server = ThreadingHTTPServer(("127.0.0.1", 0), _handler_for(self))
        server.daemon_threads = True
        self._server = server
        self._thread = threading.Thread(
            target=server.serve_forever, args=(0.05,), name="fake-upstream", daemon=True
        )  # polls for shutdown every 50 ms: stop() returns at once
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)
        self._server = self._thread = None

    def __enter__(self) -> FakeUpstream:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def port(self) -> int:
        assert self._server is not None, "FakeUpstream is not started"
        return int(self._server.server_address[1])

    @property
    def url(self) -> str:
        """The base URL without a path: what ANTHROPIC_BASE_URL takes."""
        return f"http://127.0.0.1:{self.port}"

    # what was seen
    def turn_requests(self) -> list[RecordedRequest]:
        with self._lock:
            return [r for r in self.requests if r.is_turn]

    def side_requests(self) -> list[RecordedRequest]:
        with self._lock:
            return [r for r in self.requests if not r.is_turn]

    def set_script(self, script: Script | Sequence[Turn]) -> None:
        """Play a new script from its first turn (e.g. before resuming a session)."""
        with self._lock:
            self.script = script if isinstance(script, Script) else Script(list(script))

    # answering
    def _record(
        self, method: str, path: str, headers: Mapping[str, str], raw: bytes
    ) -> RecordedRequest:
        body: Any = None
        if raw:
            try:
                body = json.loads(raw)
            except ValueError:
                body = None
        route = path.split("?", 1)[0].rstrip("/")
        api = "other"
        if method == "POST" and route.endswith("/messages"):
            api = "anthropic"
        elif method == "POST" and route.endswith("/responses"):
            api = "responses"
        elif method == "POST" and route.endswith("/chat/completions"):
            api = "chat"
        with self._lock:
            request = RecordedRequest(method, path, dict(headers), raw, body, api, None)
            if api != "other" and isinstance(body, dict) and self.script.is_turn(request):
                thread = self.script.thread_of(request)
                turn = self.script.served.get(thread, 0)
                self.script.served[thread] = turn + 1
                request = RecordedRequest(method, path, dict(headers), raw, body, api, turn, thread)
            self.requests.append(request)
            return request

    def _usage(self, request: RecordedRequest, output_text: str) -> Usage:
        prompt = _prompt_text(request.api, request.body)
        with self._lock:
            cached = 0
            if request.is_turn:
                previous = self._previous_prompt.get(request.api + request.thread, "")
                cached = _common_prefix(previous, prompt) // 4
                self._previous_prompt[request.api + request.thread] = prompt
        total = _tokens(prompt)
        return Usage(input=total, cached=min(cached, total), output=_tokens(output_text))

    def _turn_for(self, request: RecordedRequest) -> Turn | None:
        if request.turn is None:
            schema = _output_schema(request)
            if schema is not None:  # a side request that asks for JSON gets JSON of that shape
                return Turn(text=json.dumps(_instance_of(schema, self.script.side_text)))
            return Turn(text=self.script.side_text)
        turns = self.script.turns_of(request.thread)
        if request.turn < len(turns):
            return turns[request.turn]
        where = f" of thread {request.thread!r}" if request.thread else ""
        with self._lock:
            self.problems.append(
                f"turn request {request.turn + 1}{where} but the script has {len(turns)} turns"
            )
        return None

    def reply(
        self, request: RecordedRequest
    ) -> tuple[int, dict[str, Any] | None, Iterator[Event] | None]:
        """(status, JSON body, SSE events) for one request; exactly one of the last two is set."""
        body = request.body if isinstance(request.body, dict) else {}
        route = request.path.split("?", 1)[0].rstrip("/")
        if request.method in ("GET", "HEAD"):
            if route.endswith("/models"):
                return (
                    200,
                    {
                        "object": "list",
                        "data": [
                            {
                                "id": "fake-model",
                                "object": "model",
                                "type": "model",
                                "display_name": "Fake model",
                                "created_at": "2025-01-01T00:00:00Z",
                            }
                        ],
                        "has_more": False,
                        "models": [],
                    },
                    None,
                )
            return 200, {"ok": True}, None
        if route.endswith("/messages/count_tokens"):
            return 200, {"input_tokens": _tokens(_prompt_text("anthropic", body))}, None
        if request.api == "other" or not body:
            return (
                404,
                _error(
                    request.api,
                    "not_found_error",
                    f"the fake upstream has no route {request.method} {route}",
                ),
                None,
            )
        turn = self._turn_for(request)
        if turn is None:
            return (
                400,
                _error(
                    request.api,
                    "invalid_request_error",
                    "fake upstream: the script has no turn left",
                ),
                None,
            )
        n = len(self.requests)
        text = turn.render(request)
        usage = self._usage(request, text + json.dumps([t.input for t in turn.tool_calls]))
        stream = bool(body.get("stream"))
        if request.api == "anthropic":
            message = anthropic_message(body.get("model", "fake"), turn, text, n, usage)
            return (
                200,
                (None if stream else message),
                (anthropic_events(message) if stream else None),
            )
        if request.api == "responses":
            response = responses_object(body, turn, text, n, usage)
            return (
                200,
                (None if stream else response),
                (responses_events(response) if stream else None),
            )
        completion = chat_completion(body, turn, text, n, usage)
        include_usage = bool((body.get("stream_options") or {}).get("include_usage"))
        return (
            200,
            (None if stream else completion),
            (chat_events(completion, include_usage) if stream else None),
        )


def _error(api: str, kind: str, message: str) -> dict[str, Any]:
    if api == "anthropic":
        return {"type": "error", "error": {"type": kind, "message": message}}
    return {"error": {"message": message, "type": kind, "param": None, "code": None}}


def _handler_for(upstream: FakeUpstream) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        timeout = SOCKET_TIMEOUT_S

        def log_message(self, format: str, *args: Any) -> None:  # quiet: requests are recorded
            pass

        def _read_body(self) -> bytes:
            if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
                data = b""
                while True:
                    size = int(self.rfile.readline().split(b";")[0].strip() or b"0", 16)
                    if size == 0:
                        self.rfile.readline()
                        return data
                    data += self.rfile.read(size)
                    self.rfile.readline()
            length = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(length) if length else b""
            if self.headers.get("Content-Encoding", "").lower() == "zstd" and raw:
                import zstandard  # Codex compresses request bodies for some providers

                raw = zstandard.ZstdDecompressor().decompressobj().decompress(raw)
            return raw

        def _serve(self) -> None:
            raw = self._read_body()
            headers = {k.lower(): v for k, v in self.headers.items()}
            request = upstream._record(self.command, self.path, headers, raw)
            status, payload, events = upstream.reply(request)
            if events is None:
                data = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.send_header("request-id", f"req_fake{len(upstream.requests):04d}")
                self.end_headers()
                if self.command != "HEAD":
                    self.wfile.write(data)
                return
            self.send_response(status)
            self.send_header("Content-Type", "text/event-stream; charset=utf-8")
            self.send_header("Cache-Control", "no-cache")
            self.send_header("Transfer-Encoding", "chunked")
            self.send_header("request-id", f"req_fake{len(upstream.requests):04d}")
            self.end_headers()
            try:
                for name, data in events:
                    line = f"data: {json.dumps(data, ensure_ascii=False)}\n\n"
                    if name is not None:
                        line = f"event: {name}\n" + line
                    self._chunk(line.encode())
                if request.api == "chat":
                    self._chunk(b"data: [DONE]\n\n")
                self._chunk(b"")
            except (TimeoutError, BrokenPipeError, ConnectionResetError):
                self.close_connection = True

        def _chunk(self, data: bytes) -> None:
            self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
            self.wfile.flush()

        do_GET = do_POST = do_HEAD = do_PUT = do_DELETE = do_PATCH = _serve

    return Handler
