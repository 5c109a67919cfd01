"""llm-summary's network backends against a real HTTP server on loopback, through the real SDKs.

The server (a `ThreadingHTTPServer` on 127.0.0.1, ephemeral port) serves the OpenAI
`/v1/chat/completions` and Anthropic `/v1/messages` shapes and plays one scenario per test: a canned
summary, HTTP 429, HTTP 500, malformed JSON, an empty reply, or a reply slower than the `timeout`
option. It serves only this module's requests and stops in the fixture teardown.
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

import compactkit
from compactkit import AgentContext, ConfigError, StrategyError, SummaryBlock
from compactkit.recovery import expand
from compactkit.registry import DEFAULT_PLUGINS, count_tokens, make_registry, set_registry
from compactkit.strategies.llm_summary import LlmSummary
from compactkit.summarize import CACHE, Summarizer
from compactkit.testing import check_strategy
from compactkit.validate import validate

from ..conftest import sample

FAKE_KEY = "sk-test-Zq7XvLw93KfP2mN8rT5yBcD4"
CANNED = "## Task\n- fix the marshmallow TimeDelta rounding\n## Open items\n- run the tests"
SUMMARY_PLUGINS = tuple(dict.fromkeys((*DEFAULT_PLUGINS, "compactkit.builtins.summarizers")))


@dataclass
class Recorder:
    """What the server should do next, and what it was sent."""

    scenario: str = "ok"
    requests: list[dict[str, Any]] = field(default_factory=list)
    release: threading.Event = field(default_factory=threading.Event)


def _reply(path: str, scenario: str) -> tuple[int, bytes]:
    if scenario == "429":
        body = {"error": {"type": "rate_limit_error", "message": "slow down"}}
        return 429, json.dumps(body).encode()
    if scenario == "500":
        return 500, json.dumps({"error": {"type": "api_error", "message": "boom"}}).encode()
    if scenario == "malformed":
        return 200, b'{"choices": [{"message": {"content": "half'
    openai = path.endswith("/chat/completions")
    text = "" if scenario == "empty" else CANNED
    if openai:
        body: dict[str, Any] = {
            "id": "chatcmpl-1",
            "object": "chat.completion",
            "created": 0,
            "model": "test-model",
            "choices": (
                []
                if scenario == "no-choices"
                else [
                    {
                        "index": 0,
                        "finish_reason": "stop",
                        "message": {"role": "assistant", "content": text},
                    }
                ]
            ),
        }
    else:
        body = {
            "id": "msg_1",
            "type": "message",
            "role": "assistant",
            "model": "test-model",
            "stop_reason": "end_turn",
            "stop_sequence": None,
            "content": [] if scenario == "no-choices" else [{"type": "text", "text": text}],
            "usage": {"input_tokens": 1, "output_tokens": 1},
        }
    return 200, json.dumps(body).encode()


def _handler(recorder: Recorder) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, format: str, *args: Any) -> None:  # keep test output quiet
            pass

        def do_POST(self) -> None:
            length = int(self.headers.get("content-length") or 0)
            raw = self.rfile.read(length)
            recorder.requests.append(
                {"path": self.path, "headers": dict(self.headers), "body": json.loads(raw)}
            )
            if recorder.scenario == "slow":
                recorder.release.wait(5)  # longer than the client's timeout; teardown ends it
            status, body = _reply(self.path, recorder.scenario)
            try:
                self.send_response(status)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)
            except OSError:
                pass  # the client gave up (timeout scenario)

    return Handler


@pytest.fixture
def server() -> Iterator[tuple[str, Recorder]]:
    recorder = Recorder()
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _handler(recorder))
    httpd.daemon_threads = True
    thread = threading.Thread(target=httpd.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}", recorder
    finally:
        recorder.release.set()
        httpd.shutdown()
        httpd.server_close()
        thread.join(5)


@pytest.fixture(autouse=True)
def keys(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", FAKE_KEY)
    monkeypatch.setenv("ANTHROPIC_API_KEY", FAKE_KEY)
    for proxy in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy"):
        monkeypatch.delenv(proxy, raising=False)
    monkeypatch.setenv("NO_PROXY", "127.0.0.1,localhost")


@pytest.fixture(autouse=True)
def summarizer_registry() -> Iterator[None]:
    set_registry(make_registry(entry_points=False, defaults=SUMMARY_PLUGINS))
    CACHE.clear()
    yield
    CACHE.clear()
    set_registry(None)


@pytest.fixture(scope="module")
def ctx() -> AgentContext:
    return compactkit.load_one(sample("sphinx-doc"))


def _base_url(url: str, backend: str) -> str:
    return f"{url}/v1" if backend == "openai" else url


def _strategy(url: str, backend: str, **options: Any) -> LlmSummary:
    return LlmSummary(
        backend=backend,
        base_url=_base_url(url, backend),
        model="test-model",
        keep_last=2,
        **options,
    )


BACKENDS = ("openai", "anthropic")
ENDPOINT = {"openai": "/v1/chat/completions", "anthropic": "/v1/messages"}


def _summary(out: AgentContext) -> SummaryBlock:
    found = [b for m in out.messages for b in m.content if isinstance(b, SummaryBlock)]
    assert len(found) == 1
    return found[0]


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_canned_summary_replaces_the_window(
    backend: str, server: tuple[str, Recorder], ctx: AgentContext
) -> None:
    url, recorder = server
    strat = _strategy(url, backend, max_input_tokens=2_000)
    out = strat.compact(ctx)
    block = _summary(out)
    assert block.text == CANNED
    assert block.backend == backend
    assert expand(out) == expand(ctx)
    assert validate(out, ctx) == []
    assert len(recorder.requests) == 1
    request = recorder.requests[0]
    assert request["path"] == ENDPOINT[backend]
    body = request["body"]
    assert body["temperature"] == 0
    assert body["model"] == "test-model"
    if backend == "openai":
        system, user = body["messages"]
        assert system["role"] == "system" and "Files changed" in system["content"]
        transcript = user["content"]
    else:
        assert "Files changed" in body["system"]
        assert body["max_tokens"] == 1500
        transcript = body["messages"][0]["content"]
    # the transcript is bounded by max_input_tokens, and the window was larger than that
    assert count_tokens(transcript) <= 2_000
    assert "tokens trimmed" in transcript
    span = strat.window(ctx)
    assert span is not None
    assert sum(count_tokens(m) for m in ctx.messages[span[0] : span[1]]) > 2_000
    # the key went only where it belongs
    headers = {k.lower(): v for k, v in request["headers"].items()}
    auth = headers.get("authorization") or headers.get("x-api-key")
    assert auth is not None and FAKE_KEY in auth


@pytest.mark.parametrize("backend", BACKENDS)
def test_the_backends_are_asked_for_every_user_message_verbatim(
    backend: str, server: tuple[str, Recorder]
) -> None:
    url, recorder = server
    ctx = compactkit.load_one(sample("pi-mono"))
    strat = _strategy(url, backend, max_input_tokens=8_000, user_message_chars=300)
    strat.compact(ctx)
    body = recorder.requests[0]["body"]
    if backend == "openai":
        system, transcript = body["messages"][0]["content"], body["messages"][1]["content"]
    else:
        system, transcript = body["system"], body["messages"][0]["content"]
    assert "## User messages - EVERY message the user wrote" in system
    # the user's words follow the summary verbatim (pinned): the model is told not to repeat them
    assert "kept verbatim right after your summary" in system
    assert "keep every file read or changed and every error first" in system
    # the transcript is bounded and tool outputs lose their middle, but every message in the
    # user's words is there from its start, up to the cap, and marked as the user's own
    assert count_tokens(transcript) <= 8_000
    assert "tokens trimmed" in transcript
    span = strat.window(ctx)
    assert span is not None
    said = [m.text for m in ctx.messages[span[0] : span[1]] if m.is_human]
    assert len(said) >= 8
    for text in said:
        assert text[:300] in transcript
        if len(text) > 300:
            assert f"{text[:300]} [… {len(text) - 300:,} more characters]" in transcript
    assert transcript.count("user (own words):") == len(said)


@pytest.mark.parametrize("backend", BACKENDS)
def test_the_same_window_is_never_summarized_twice(
    backend: str, server: tuple[str, Recorder], ctx: AgentContext
) -> None:
    url, recorder = server
    first = _strategy(url, backend).compact(ctx)
    second = _strategy(url, backend).compact(AgentContext.from_native(ctx.to_native()))
    assert first == second
    assert len(recorder.requests) == 1  # the second compact was a cache hit
    # and the whole contract holds with a network backend (deterministic through the cache)
    assert check_strategy(_strategy(url, backend), ctx) == []
    assert len(recorder.requests) == 1


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize(
    ("scenario", "expected"),
    [
        ("429", "HTTP 429"),
        ("500", "HTTP 500"),
        ("malformed", "malformed reply"),
        ("empty", "empty summary text"),
        ("no-choices", "malformed reply"),
        ("slow", "timed out after 0.5 s"),
    ],
)
def test_failures_are_one_clear_line_without_the_key(
    backend: str,
    scenario: str,
    expected: str,
    server: tuple[str, Recorder],
    ctx: AgentContext,
    caplog: pytest.LogCaptureFixture,
) -> None:
    url, recorder = server
    recorder.scenario = scenario
    before = ctx.to_json()
    caplog.set_level(logging.DEBUG)
    with pytest.raises(StrategyError) as info:
        _strategy(url, backend, timeout=0.5).compact(ctx)
    message = str(info.value)
    assert expected in message
    assert backend in message
    assert "\n" not in message
    assert FAKE_KEY not in message and FAKE_KEY not in repr(info.value)
    assert FAKE_KEY not in caplog.text
    assert ctx.to_json() == before  # the input is never changed
    assert len(recorder.requests) == 1  # no retries


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("scenario", ["429", "500", "malformed", "slow"])
def test_fallback_uses_the_extractive_summary(
    backend: str,
    scenario: str,
    server: tuple[str, Recorder],
    ctx: AgentContext,
    caplog: pytest.LogCaptureFixture,
) -> None:
    url, recorder = server
    recorder.scenario = scenario
    caplog.set_level(logging.DEBUG)
    strat = _strategy(url, backend, timeout=0.5, fallback="extractive")
    out = strat.compact(ctx)
    block = _summary(out)
    assert block.backend == "extractive"
    assert block.text.startswith("## Task")
    assert expand(out) == expand(ctx)
    assert validate(out, ctx) == []
    assert FAKE_KEY not in block.text and FAKE_KEY not in out.to_json()
    assert FAKE_KEY not in caplog.text
    assert "used the extractive summary" in caplog.text
    assert FAKE_KEY not in repr(strat) and FAKE_KEY not in strat.label


@pytest.mark.parametrize(
    ("backend", "env"), [("openai", "OPENAI_API_KEY"), ("anthropic", "ANTHROPIC_API_KEY")]
)
def test_a_missing_key_is_a_config_error_naming_the_variable(
    backend: str,
    env: str,
    server: tuple[str, Recorder],
    ctx: AgentContext,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    url, recorder = server
    monkeypatch.delenv(env)
    with pytest.raises(ConfigError, match=env):
        _strategy(url, backend, fallback="extractive").compact(ctx)
    assert recorder.requests == []


@pytest.mark.parametrize(("backend", "module"), [("openai", "openai"), ("anthropic", "anthropic")])
def test_a_missing_sdk_names_the_extra_to_install(
    backend: str, module: str, ctx: AgentContext, monkeypatch: pytest.MonkeyPatch
) -> None:
    import sys

    monkeypatch.setitem(sys.modules, module, None)  # makes `import module` fail
    with pytest.raises(ConfigError, match=rf"compactkit\[{module}\]"):
        LlmSummary(backend=backend, keep_last=2).compact(ctx)


def test_a_refused_connection_is_reported(ctx: AgentContext) -> None:
    import socket

    with socket.socket() as sock:  # a port that nothing listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    with pytest.raises(StrategyError, match="could not connect") as info:
        LlmSummary(
            backend="openai", base_url=f"http://127.0.0.1:{port}/v1", keep_last=2, timeout=2
        ).compact(ctx)
    assert FAKE_KEY not in str(info.value)


def test_a_long_reply_is_truncated_to_the_summary_limit(
    server: tuple[str, Recorder], ctx: AgentContext, monkeypatch: pytest.MonkeyPatch
) -> None:
    url, _ = server
    long_text = "\n".join(f"- item {n} " + "word " * 20 for n in range(400))
    monkeypatch.setitem(globals(), "CANNED", long_text)
    out = _strategy(url, "openai", summary_max_tokens=200).compact(ctx)
    block = _summary(out)
    assert count_tokens(block.text) <= 200
    assert block.text.startswith("- item 0 ")
    assert block.text.endswith("[summary truncated]")


def test_unknown_backend_is_a_config_error_listing_the_known_ones(ctx: AgentContext) -> None:
    with pytest.raises(ConfigError, match=r"unknown backend 'nope'.*extractive"):
        LlmSummary(backend="nope", keep_last=2).compact(ctx)


def test_the_builtin_plugin_registers_the_three_backends() -> None:
    registry = make_registry(entry_points=False, defaults=SUMMARY_PLUGINS)
    assert {"extractive", "openai", "anthropic"} <= set(registry.summarizers.names())
    for name in ("extractive", "openai", "anthropic"):
        assert issubclass(registry.summarizers.get(name), Summarizer)


def test_a_plugin_backend_is_used_by_name(ctx: AgentContext) -> None:
    calls: list[int] = []

    class Echo(Summarizer):
        name = "echo"

        def summarize(self, request: Any) -> str:
            calls.append(len(request.messages))
            return f"{len(request.messages)} messages; task: {request.task[:20]}"

    class Plugin:
        @compactkit.hookimpl
        def register_summarizers(self, register: Any) -> None:
            register(Echo)

    set_registry(make_registry(entry_points=False, defaults=SUMMARY_PLUGINS, plugins=[Plugin()]))
    out = LlmSummary(backend="echo", keep_last=2).compact(ctx)
    block = _summary(out)
    assert block.backend == "echo"
    assert block.text.startswith(f"{calls[0]} messages; task:")
    assert calls[0] == block.summarized_messages


def test_the_transcript_is_bounded_deterministic_and_keeps_both_ends() -> None:
    from compactkit.summarize.base import SummaryRequest, render_transcript

    ctx = compactkit.load_one(sample("pi-mono"))
    window = ctx.messages[1:-6]
    counter = compactkit.get_registry().tokenizers.get("o200k_base")
    for limit in (200, 3_000, 30_000):
        text = render_transcript(window, 1, limit, counter.count)
        assert counter.count(text) <= limit
        assert text == render_transcript(window, 1, limit, counter.count)
        assert text.startswith("[1] ")
    text = SummaryRequest(messages=window, first_index=1, max_input_tokens=30_000).transcript
    assert f"[{len(window)}] " in text  # the last message is still there
    assert "tokens trimmed" in text


def test_the_transcript_never_trims_the_users_words() -> None:
    from compactkit import Message, TextBlock, ToolCallBlock, ToolResultBlock
    from compactkit.summarize.base import render_transcript

    counter = compactkit.get_registry().tokenizers.get("o200k_base")
    asked = " ".join(
        f"step {i}: rename column_{i} to field_{i};" for i in range(60)
    )  # ~1,900 chars
    window = []
    for i in range(12):
        call = ToolCallBlock(id=f"c{i}", name="bash", input={"command": f"cat big_{i}.log"})
        output = "\n".join(f"log line {k} of file {i}" for k in range(400))
        window += [
            Message(role="user", content=(TextBlock(text=f"{asked} (round {i})"),)),
            Message(role="assistant", content=(call,)),
            Message(
                role="tool",
                content=(ToolResultBlock(tool_call_id=f"c{i}", content=(TextBlock(text=output),)),),
            ),
        ]
    for limit in (10_000, 16_000):
        text = render_transcript(window, 1, limit, counter.count, user_chars=1_000)
        assert counter.count(text) <= limit
        assert "tokens trimmed" in text  # the logs lose their middle ...
        for i in range(12):  # ... the user's words only what is past the cap, and say so
            cut = f"{asked} (round {i})"
            assert f"{cut[:1_000]} [… {len(cut) - 1_000:,} more characters]" in text


def test_clip_and_trim_respect_their_limits() -> None:
    from compactkit.summarize.base import clip_tokens, trim_middle

    count = compactkit.get_registry().tokenizers.get("o200k_base").count
    text = "\n".join(f"line {n}: " + "word " * 30 for n in range(200))
    clipped = clip_tokens(text, 300, count)
    assert count(clipped) <= 300 and clipped.startswith("line 0:")
    assert clipped.endswith("[summary truncated]")
    trimmed = trim_middle(text, 300, count)
    assert count(trimmed) <= 300
    assert trimmed.startswith("line 0:") and trimmed.rstrip().endswith("word")
    assert "tokens trimmed" in trimmed
    assert clip_tokens("short", 300, count) == "short"


def test_the_summary_cache_is_bounded() -> None:
    from compactkit.summarize import SummaryCache

    cache = SummaryCache(max_entries=3)
    for n in range(5):
        cache.put(str(n), f"summary {n}")
    assert len(cache) == 3
    assert cache.get("0") is None and cache.get("4") == "summary 4"
