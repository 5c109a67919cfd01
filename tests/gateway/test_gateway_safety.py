"""The audit of a shared gateway, case by case: an upstream set to 'none' is nowhere, the user's
words in every form the API takes survive compaction, a body the gateway cannot plan passes
through unchanged, a cut stream ends in an error event the SDKs read, hostile sizes stay bounded."""

from __future__ import annotations

import contextlib
import gc
import http.client
import json
import logging
import re
import socket
import sqlite3
import threading
import time
import tracemalloc
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import anthropic
import httpx
import openai
import pytest
from starlette.responses import Response, StreamingResponse

from compactkit import AgentContext, Strategy, hookimpl
from compactkit.gateway import GatewayConfig, create_app, wire
from compactkit.gateway.app import Policy
from compactkit.registry import make_registry

from .agents import anthropic_agent, chat_agent, responses_agent
from .conftest import KEY, chunk
from .upstream import FakeModel, Received, serving

TASK = "Find why pydicom fails on the negative pixel value and fix it; keep the public API."
TRIGGER = 6000


def _bodies(model: FakeModel, path: str) -> list[bytes]:
    return [r.body for r in model.received if r.path == path]


# --------------------------------------------------------------------------- 'none' is nowhere


def test_upstream_anthropic_none_never_sends_anthropic_requests(
    model: FakeModel, upstream: str
) -> None:
    """`--upstream-anthropic none` beside an OpenAI upstream: an Anthropic request gets an
    Anthropic error and goes nowhere (its key never leaves); OpenAI requests still go."""
    config = GatewayConfig(upstream_anthropic=None, upstream_openai=upstream)
    with serving(create_app(config)) as base:
        with pytest.raises(anthropic.APIStatusError) as caught:
            anthropic_agent(base, TASK)
        count = httpx.post(
            base + "/v1/messages/count_tokens", content=b"{}", headers={"x-api-key": KEY}
        )
        assert model.received == [], "an Anthropic request went to the OpenAI upstream"
        run = chat_agent(base, TASK)
    assert caught.value.status_code == 502
    assert caught.value.body["error"]["type"] == "api_error"  # type: ignore[index]
    assert "--upstream-anthropic" in caught.value.message
    assert count.status_code == 502 and count.json()["type"] == "error"
    assert run.answer == model.final
    assert {r.path for r in model.received} == {"/v1/chat/completions"}


def test_upstream_openai_none_never_sends_openai_requests(model: FakeModel, upstream: str) -> None:
    config = GatewayConfig(upstream_anthropic=upstream, upstream_openai=None)
    with serving(create_app(config)) as base:
        with pytest.raises(openai.APIStatusError) as chat:
            chat_agent(base, TASK)
        with pytest.raises(openai.APIStatusError) as responses:
            responses_agent(base, TASK)
        models = httpx.get(base + "/v1/models", headers={"authorization": f"Bearer {KEY}"})
        assert model.received == [], "an OpenAI request went to the Anthropic upstream"
        run = anthropic_agent(base, TASK)
    for caught in (chat, responses):
        assert caught.value.status_code == 502
        assert "--upstream-openai" in caught.value.message
    assert models.status_code == 502 and "error" in models.json()
    assert run.answer == model.final
    assert {r.path for r in model.received} == {"/v1/messages"}


# --------------------------------------------------------------------------- the user's words


def _steps(api: str, body: dict[str, Any]) -> tuple[str, str, dict[str, Any]] | str:
    """Four reads after each user message (`Step N: ...`), then an answer."""
    items = body["input"]
    at, step = 0, 0
    for n, item in enumerate(items):  # the newest user words the model got
        if item.get("role") == "user" and (found := re.search(r"Step (\d+):", json.dumps(item))):
            at, step = n, int(found.group(1))
    done = sum(1 for item in items[at:] if item.get("type") == "function_call_output")
    if done >= 4:
        return f"Step {step} done."
    return f"call_{step}_{done}", "read_file", {"path": f"chunk{(step * 4 + done) % 20}"}


def test_responses_short_form_user_items_survive_compaction(
    model: FakeModel, start_gateway
) -> None:
    """A Responses user item `{"role": "user", "content": "..."}` (no `type`), the short form the
    API takes, is the user's message: past compactions every request still brings the model the
    newest user words, and the last one every word the user wrote."""
    model.script = _steps
    base = start_gateway(trigger=TRIGGER, target=3000)
    items: list[dict[str, Any]] = []
    client = openai.OpenAI(base_url=base + "/v1", api_key=KEY, max_retries=0)
    for step in range(6):
        words = f"Step {step}: now look at case number {step * 7919} of the pixel bug."
        items.append({"role": "user", "content": words})
        while True:
            output = client.responses.create(model="gpt-test", input=items, store=False).output  # type: ignore[arg-type]
            items.extend(o.model_dump(exclude_none=True) for o in output)
            got = _bodies(model, "/v1/responses")[-1].decode()
            assert words in got, f"a request of step {step} lost the user's newest words"
            calls = [o for o in output if o.type == "function_call"]
            if not calls:
                break
            for c in calls:
                path = json.loads(c.arguments)["path"]
                items.append(
                    {"type": "function_call_output", "call_id": c.call_id, "output": chunk(path)}
                )
    stats = httpx.get(base + "/compactkit/stats").json()
    assert stats["counters"]["compacted_requests"] > 0
    for step in range(6):  # the summary holds the earlier words, or they follow it verbatim
        assert f"case number {step * 7919} of the pixel bug" in got


# --------------------------------------------------------------------------- never a 500


@pytest.mark.parametrize("path", ["/v1/messages", "/v1/chat/completions", "/v1/responses"])
def test_a_body_nested_too_deep_to_parse_passes_through_unchanged(
    model: FakeModel, start_gateway, path: str
) -> None:
    """100,000 levels of nesting: Python's parser gives up (RecursionError); the gateway sends
    the body on as it came and the client gets the upstream's answer, never a 500 of its own."""
    deep = b"[" * 100_000 + b"]" * 100_000
    key = b"input" if path == "/v1/responses" else b"messages"
    raw = b'{"model":"x","stream":true,"' + key + b'":[{"role":"user","content":' + deep + b"}]}"
    model.hook = lambda got: Response(b'{"upstream":"read it"}', status_code=400)
    base = start_gateway(trigger=10)
    with httpx.Client(timeout=60) as client:
        answer = client.post(base + path, content=raw, headers={"x-api-key": KEY})
        stats = client.get(base + "/compactkit/stats").json()
    assert answer.status_code == 400 and answer.json() == {"upstream": "read it"}
    assert _bodies(model, path) == [raw]
    assert stats["counters"]["unreadable"] == 1


# --------------------------------------------------------------------------- a cut stream


def _dying(*events: bytes) -> Callable[[Received], Response]:
    """An upstream whose stream sends `events` (the last one cut mid-line) and then breaks."""

    def hook(got: Received) -> Response:
        async def body() -> AsyncIterator[bytes]:
            for event in events:
                yield event
            raise RuntimeError("upstream process died")

        return StreamingResponse(body(), media_type="text/event-stream")

    return hook


def test_an_anthropic_stream_cut_mid_event_raises_an_api_error(
    model: FakeModel, start_gateway
) -> None:
    start = {"id": "m", "type": "message", "role": "assistant", "content": [], "model": "x"}
    start["usage"] = {"input_tokens": 1, "output_tokens": 0}
    model.hook = _dying(
        b"event: message_start\ndata: "
        + json.dumps({"type": "message_start", "message": start}).encode()
        + b"\n\n",
        b'event: content_block_start\ndata: {"type": "content_block_start", "ind',
    )
    base = start_gateway(trigger=TRIGGER)
    client = anthropic.Anthropic(base_url=base, api_key=KEY, max_retries=0)
    with (
        pytest.raises(anthropic.APIError) as caught,
        client.messages.stream(
            model="claude-test", max_tokens=10, messages=[{"role": "user", "content": TASK}]
        ) as events,
    ):
        events.get_final_message()
    assert "upstream failed mid-stream" in caught.value.message


def test_a_chat_stream_cut_mid_event_raises_an_api_error(model: FakeModel, start_gateway) -> None:
    chunk_ = {"id": "c", "object": "chat.completion.chunk", "created": 0, "model": "x"}
    delta = {"index": 0, "delta": {"role": "assistant", "content": "Hel"}}
    model.hook = _dying(
        b"data: " + json.dumps({**chunk_, "choices": [delta]}).encode() + b"\n\n",
        b'data: {"id": "c", "object": "chat.comp',
    )
    base = start_gateway(trigger=TRIGGER)
    client = openai.OpenAI(base_url=base + "/v1", api_key=KEY, max_retries=0)
    stream = client.chat.completions.create(
        model="gpt-test", messages=[{"role": "user", "content": TASK}], stream=True
    )
    with pytest.raises(openai.APIError) as caught:
        for _ in stream:
            pass
    assert "upstream failed mid-stream" in caught.value.message


def test_a_responses_stream_cut_mid_event_ends_in_an_error_event(
    model: FakeModel, start_gateway
) -> None:
    created = {"id": "r", "object": "response", "created_at": 0, "status": "in_progress"}
    created |= {"model": "x", "output": [], "tools": [], "parallel_tool_calls": True}
    created |= {"tool_choice": "auto"}
    model.hook = _dying(
        b"event: response.created\ndata: "
        + json.dumps(
            {"type": "response.created", "sequence_number": 0, "response": created}
        ).encode()
        + b"\n\n",
        b'event: response.output_item.added\ndata: {"type": "response.outp',
    )
    base = start_gateway(trigger=TRIGGER)
    client = openai.OpenAI(base_url=base + "/v1", api_key=KEY, max_retries=0)
    stream = client.responses.create(model="gpt-test", input=TASK, stream=True)
    kinds = [event.type for event in stream]
    assert kinds == ["response.created", "error"]


# --------------------------------------------------------------------------- no global queue


class _Held(Strategy):
    """A compaction that lasts until the test lets it go."""

    name = "held"
    description = "waits for the test"
    entered = threading.Event()
    release = threading.Event()

    def compact(self, ctx: AgentContext) -> AgentContext:
        type(self).entered.set()
        type(self).release.wait(60)
        return ctx


class _HeldPlugin:
    @hookimpl
    def register_strategies(self, register: Callable[[type[Strategy]], None]) -> None:
        register(_Held)


def test_a_long_compaction_holds_only_its_own_conversation(model: FakeModel, upstream: str) -> None:
    """While one conversation's compaction runs, another client's requests are answered; the
    next request of the held conversation waits for it (one plan at a time per conversation)."""
    registry = make_registry(entry_points=False, plugins=[_HeldPlugin()])
    config = GatewayConfig(
        upstream_anthropic=upstream, pipeline="held", trigger=200, strategy_timeout=0
    )
    big = {"model": "m", "max_tokens": 9, "messages": [{"role": "user", "content": "a " * 900}]}
    answers: dict[str, int] = {}

    def send(name: str, base: str) -> None:
        answers[name] = httpx.post(base + "/v1/messages", json=big, timeout=90).status_code

    _Held.entered.clear()
    _Held.release.clear()
    with serving(create_app(config, registry)) as base:
        first = threading.Thread(target=send, args=("first", base), daemon=True)
        first.start()
        try:
            assert _Held.entered.wait(30), "the compaction never started"
            again = threading.Thread(target=send, args=("again", base), daemon=True)
            again.start()
            with httpx.Client(timeout=20) as probe:
                for n in range(5):
                    body = {"model": "m", "max_tokens": 9, "messages": [{"role": "user"}]}
                    body["messages"][0]["content"] = f"probe {n}"
                    assert probe.post(base + "/v1/messages", json=body).status_code == 200
            assert "again" not in answers, "the held conversation's next request went first"
        finally:
            _Held.release.set()
        first.join(60)
        again.join(60)
    assert answers == {"first": 200, "again": 200}


# --------------------------------------------------------------------------- bounded


def _conversation(n: int) -> dict[str, Any]:
    """Conversation `n`: a task and eight files read, past a trigger of 2,000 tokens."""
    messages: list[dict[str, Any]] = [{"role": "user", "content": f"Task {n}: fix bug {n * 7919}."}]
    for k in range(8):
        call = {"type": "tool_use", "id": f"t{n}_{k}", "name": "read_file", "input": {"path": k}}
        text = f"conversation {n}: " + chunk(f"chunk{k}")
        result = {"type": "tool_result", "tool_use_id": f"t{n}_{k}", "content": text}
        messages += [
            {"role": "assistant", "content": [call]},
            {"role": "user", "content": [result]},
        ]
    return {"model": "m", "max_tokens": 9, "system": "Be brief.", "messages": messages}


def test_what_a_conversation_holds_goes_with_it(tmp_path: Path) -> None:
    """Past --max-conversations, what compactions removed and what --record remembers of a
    conversation are let go with it: ten more compacted conversations keep less memory than a
    few requests' bodies (684 KB more before: 30 bodies). A conversation seen again is recorded whole in a
    new log; its first log stays as it was."""
    config = GatewayConfig(trigger=2000, target=1000, max_conversations=2, record=str(tmp_path))
    policy = Policy(config, incremental=False)

    def converse(n: int, more: int = 0) -> int:
        body = _conversation(n)
        body["messages"] += [{"role": "assistant", "content": "Done."}] * more
        raw = json.dumps(body).encode()
        key = wire.conversation_key("anthropic", body, None)
        assert policy.plan("anthropic", body, key, raw).body != raw  # compacted
        return len(raw)

    tracemalloc.start()
    try:
        for n in range(3):
            size = converse(n)
        policy.counter._cache.clear()  # the token counter's memo (bounded on its own) aside
        gc.collect()
        held = tracemalloc.get_traced_memory()[0]
        for n in range(3, 13):
            converse(n)
        policy.counter._cache.clear()
        gc.collect()
        grown = tracemalloc.get_traced_memory()[0] - held
    finally:
        tracemalloc.stop()
    # ten conversations held whole would be some 30 bodies; caches bounded elsewhere aside
    assert grown < 4 * size, f"{grown} bytes more for conversations let go"
    logs = sorted(tmp_path.glob("*.jsonl"))
    first = next(p for p in logs if "Task 0: fix bug 0." in p.read_text())
    before = first.read_bytes()
    converse(0, more=1)  # conversation 0 again, one message on
    assert first.read_bytes() == before
    again = [p for p in tmp_path.glob("*.jsonl") if p not in logs]
    assert len(again) == 1 and "Task 0: fix bug 0." in again[0].read_text()


# --------------------------------------------------------------------------- kept apart


OTHER_KEY = "sk-other-team-9876543210fedcbaSECRET"
ADMIN = "ck-admin-token-for-the-test"


def _stats(base: str, key: str | None) -> dict[str, Any]:
    headers = {"authorization": f"Bearer {key}"} if key else {}
    answer = httpx.get(base + "/compactkit/stats", headers=headers, timeout=30)
    data: dict[str, Any] = answer.json()
    return data


@pytest.mark.parametrize("processes", [0, 2])
def test_two_keys_never_share_a_conversation(
    model: FakeModel, start_gateway, processes: int
) -> None:
    """Two clients (the Anthropic and the OpenAI SDK) with different keys, the same system
    prompt and first message, the same forged session id, running at once: each has its own
    conversation, compacted as if it were alone; each sees only its own in the stats, named by
    salted hashes; the admin token sees both. So with planner processes, each client's in its
    own (`--processes 2`)."""
    model.turns = 10
    solo = start_gateway(trigger=TRIGGER, target=3000, admin_token=ADMIN)
    alone = {
        "anthropic": anthropic_agent(solo, TASK),
        "openai": chat_agent(solo, TASK),
    }
    counts = {
        c["requests"]: c["compactions"] for c in _stats(solo, ADMIN)["conversations"].values()
    }
    base = start_gateway(trigger=TRIGGER, target=3000, admin_token=ADMIN, processes=processes)
    forged = {"x-compactkit-session": "team-a-session"}
    runs: dict[str, Any] = {}

    def client(name: str) -> None:
        if name == "anthropic":
            runs[name] = anthropic_agent(base, TASK, key=KEY, headers=forged)
        else:
            runs[name] = chat_agent(base, TASK, key=OTHER_KEY, headers=forged)

    threads = [threading.Thread(target=client, args=(n,), daemon=True) for n in alone]
    for t in threads:
        t.start()
    for t in threads:
        t.join(300)
    assert set(runs) == set(alone)
    mine, theirs = _stats(base, KEY), _stats(base, OTHER_KEY)
    (a,) = mine["conversations"].values()
    (b,) = theirs["conversations"].values()
    for conv, run in ((a, runs["anthropic"]), (b, runs["openai"])):
        assert conv["requests"] == len(run.sent)
        assert conv["compactions"] == counts[len(run.sent)] > 0  # as when alone
    assert set(mine["conversations"]).isdisjoint(theirs["conversations"])
    assert _stats(base, None)["conversations"] == {}
    assert len(_stats(base, ADMIN)["conversations"]) == 2
    # the names are salted: another gateway names the same conversations otherwise
    assert set(_stats(solo, ADMIN)["conversations"]).isdisjoint(
        _stats(base, ADMIN)["conversations"]
    )
    shape = wire.conversation_key("anthropic", json.loads(runs["anthropic"].sent[0]), None)
    text = json.dumps(_stats(base, ADMIN))
    assert all(part not in text for part in shape.split(":")[1:])
    assert KEY not in text and OTHER_KEY not in text


def test_another_key_naming_a_session_does_not_reset_it(tmp_path: Path) -> None:
    """A serve state is reset only by requests of the credential that first named its session:
    another key's request under the same session id (forged or not) leaves it as it was."""
    from compactkit.serve.store import SqliteServeStore
    from tests.serve.test_reset import FILES, TARGET, Conversation, _store_read

    db = tmp_path / "state.db"
    policy = Policy(GatewayConfig(state=str(db), trigger=6000, target=TARGET))
    store = SqliteServeStore(db)
    text = FILES["conversations.py"].read_text(encoding="utf-8")
    assert _store_read(store, "s1", "conversations.py", text)
    conv = Conversation("s1")
    call = {"type": "tool_use", "id": "t1", "name": "read", "input": {"path": "conversations.py"}}
    conv.messages += [
        {"role": "assistant", "content": [call]},
        {
            "role": "user",
            "content": [{"type": "tool_result", "tool_use_id": "t1", "content": text}],
        },
    ]
    mine, theirs = policy.credential({"x-api-key": KEY}), policy.credential({"x-api-key": "sk-2"})

    def plan(owner: str) -> None:
        body = conv.body()
        key = policy.conversation_id("anthropic", body, None, owner)
        raw = json.dumps(body).encode()
        policy.plan("anthropic", body, key, raw, wire.session_name("anthropic", body, None), owner)

    plan(mine)
    assert not _store_read(store, "s1", "conversations.py", text)  # held: a marker
    conv.messages = [{"role": "user", "content": "Summary of the review so far: nothing found."}]
    plan(theirs)
    assert not _store_read(store, "s1", "conversations.py", text)  # still held
    plan(mine)
    assert _store_read(store, "s1", "conversations.py", text)  # the owner's rewind: full again


def test_two_runs_of_one_prompt_under_one_key_are_two_conversations(
    model: FakeModel, start_gateway
) -> None:
    """No session id: two runs with the same system prompt and first message, their requests
    interleaved, are two conversations (a request joins the one whose history it extends),
    each compacted as when alone; the client sees each run's requests as when alone."""
    model.turns = 10
    solo = start_gateway(trigger=TRIGGER, target=3000)
    run = chat_agent(solo, TASK)
    upstream_alone = _bodies(model, "/v1/chat/completions")
    (alone,) = _stats(solo, KEY)["conversations"].values()
    assert alone["compactions"] > 0
    model.received.clear()
    base = start_gateway(trigger=TRIGGER, target=3000)
    headers = {"authorization": f"Bearer {KEY}", "content-type": "application/json"}
    n = len(run.sent)  # the second run one request behind the first
    order = [("first", 0)] + [(who, i) for i in range(1, n) for who in ("first", "second")]
    order = [(who, i - 1 if who == "second" else i) for who, i in order] + [("second", n - 1)]
    with httpx.Client(timeout=60) as client:
        for _, i in order:
            client.post(base + "/v1/chat/completions", content=run.sent[i], headers=headers)
    convs = _stats(base, KEY)["conversations"].values()
    assert [c["compactions"] for c in convs] == [alone["compactions"]] * 2
    got = _bodies(model, "/v1/chat/completions")
    for who in ("first", "second"):
        assert [body for body, (w, _) in zip(got, order, strict=True) if w == who] == upstream_alone


# --------------------------------------------------------------------------- bounded by bytes


def test_a_body_over_max_body_is_a_413_in_the_apis_shape(model: FakeModel, start_gateway) -> None:
    """Declared or streamed (chunked, no length), a body over --max-body is refused with a 413
    each SDK reads as its API's error; nothing goes upstream."""
    base = start_gateway(max_body=20_000)
    big = "x" * 30_000
    anthropic_client = anthropic.Anthropic(base_url=base, api_key=KEY, max_retries=0)
    with pytest.raises(anthropic.APIStatusError) as a:
        anthropic_client.messages.create(
            model="m", max_tokens=9, messages=[{"role": "user", "content": big}]
        )
    openai_client = openai.OpenAI(base_url=base + "/v1", api_key=KEY, max_retries=0)
    with pytest.raises(openai.APIStatusError) as o:
        openai_client.chat.completions.create(
            model="m", messages=[{"role": "user", "content": big}]
        )
    chunked = httpx.post(
        base + "/v1/files", content=iter([b"y" * 15_000, b"y" * 15_000]), headers={"x-api-key": KEY}
    )
    assert a.value.status_code == o.value.status_code == chunked.status_code == 413
    assert a.value.body["error"]["type"] == "request_too_large"  # type: ignore[index]
    assert o.value.body["type"] == "invalid_request_error"  # type: ignore[index]
    assert "--max-body" in chunked.json()["error"]["message"]
    assert model.received == []
    small = anthropic_client.messages.create(
        model="m", max_tokens=9, messages=[{"role": "user", "content": "hi"}]
    )
    assert small.content


def test_a_client_too_slow_to_send_its_body_gets_a_408_and_is_closed(start_gateway) -> None:
    base = start_gateway(read_timeout=0.5)
    host, port = base.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port)), timeout=30) as conn:
        head = b"POST /v1/messages HTTP/1.1\r\nhost: x\r\ncontent-length: 100\r\n\r\n"
        conn.sendall(head + b'{"model":')  # and nothing more
        answer = b""
        while chunk := conn.recv(65536):  # until the gateway closes the connection
            answer += chunk
    status, _, rest = answer.partition(b"\r\n")
    assert status == b"HTTP/1.1 408 Request Timeout"
    assert json.loads(rest.split(b"\r\n\r\n", 1)[1])["error"]["type"] == "timeout_error"


def _answer_to(base: str, *parts: bytes) -> bytes:
    """What the gateway at `base` answers a raw connection sending `parts`, a second apart,
    until it closes the connection."""
    host, port = base.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port)), timeout=30) as conn:
        for n, part in enumerate(parts):
            if n:
                time.sleep(1.0)
            with contextlib.suppress(OSError):  # closed already
                conn.sendall(part)
        answer = b""
        while chunk := conn.recv(65536):
            answer += chunk
    return answer


def test_a_client_too_slow_to_send_its_headers_gets_a_408_and_is_closed(start_gateway) -> None:
    """Slowloris: a request line and headers sent a piece a second (or nothing sent at all) get
    a 408 in the API's error shape after --read-timeout, and the connection closed; a client
    on time, on the same kept-alive connection, is served."""
    base = start_gateway(read_timeout=1.5)
    pieces = [b"POST /v1/messages HTTP/1.1\r\n", b"host: x\r\n", b"x-api-key: k\r\n"] * 3
    for parts in (pieces, [b""]):
        status, _, rest = _answer_to(base, *parts).partition(b"\r\n")
        assert status == b"HTTP/1.1 408 Request Timeout"
        assert json.loads(rest.split(b"\r\n\r\n", 1)[1])["error"]["type"] == "timeout_error"
    body = b'{"model": "m", "max_tokens": 9, "messages": [{"role": "user", "content": "hi"}]}'
    host, port = base.removeprefix("http://").split(":")
    conn = http.client.HTTPConnection(host, int(port), timeout=30)
    try:
        for n in range(3):  # each within the timeout, the connection kept between them
            time.sleep(1.0)
            conn.request("POST", "/v1/messages", body, {"x-api-key": "k"})
            if n == 0:
                sock = conn.sock
            answer = conn.getresponse()
            assert (answer.status, conn.sock) == (200, sock) and answer.read()
    finally:
        conn.close()


def test_memory_is_bounded_in_bytes_not_counts(tmp_path: Path) -> None:
    """--max-memory bounds the conversations held, the recent bodies and the token counter's
    memo of strings by their bytes: past it the least recently used go, whatever
    --max-conversations allows; twenty more conversations then keep no more than the bound."""
    bound = 400_000
    policy = Policy(GatewayConfig(trigger=2000, target=1000, max_memory=bound))

    def converse(n: int) -> None:
        body = _conversation(n)
        raw = json.dumps(body).encode()
        parsed = policy.parse(raw)
        key = policy.conversation_id("anthropic", parsed, None, "")
        assert policy.plan("anthropic", parsed, key, raw).body != raw  # compacted

    tracemalloc.start()
    try:
        for n in range(5):
            converse(n)
        gc.collect()
        held = tracemalloc.get_traced_memory()[0]
        for n in range(5, 25):
            converse(n)
            assert policy.bodies.held <= bound // 8
        gc.collect()
        grown = tracemalloc.get_traced_memory()[0] - held
    finally:
        tracemalloc.stop()
    kept = policy.conversations.all()
    assert 1 < len(kept) < 25 and sum(c.size for c in kept) <= bound
    assert grown < bound, f"{grown} bytes more"


# --------------------------------------------------------------------------- a locked state file


def test_a_locked_state_database_costs_one_request_a_warning(
    model: FakeModel, start_gateway, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Another process holds the --state file locked: the first request that cannot write it
    waits a short while and warns; it and the requests after it are answered as usual (kept in
    memory), none waits its turn behind the lock."""
    db = tmp_path / "state.db"
    base = start_gateway(state=str(db))
    other = sqlite3.connect(db, isolation_level=None)
    other.execute("BEGIN IMMEDIATE")  # holds the write lock
    try:
        with (
            caplog.at_level(logging.WARNING, logger="compactkit.gateway"),
            httpx.Client(timeout=60) as client,
        ):
            for n in range(5):
                body = {"model": "m", "max_tokens": 9, "messages": [{"role": "user"}]}
                body["messages"][0]["content"] = f"conversation {n}"
                assert client.post(base + "/v1/messages", json=body).status_code == 200
            stats = client.get(base + "/compactkit/stats").json()
    finally:
        other.execute("ROLLBACK")
        other.close()
    warnings = [r for r in caplog.records if "state database" in r.getMessage()]
    assert len(warnings) == 1 and "memory only" in warnings[0].getMessage()
    assert stats["counters"]["failed"] == 0 and len(stats["conversations"]) == 5
