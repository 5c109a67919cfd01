"""What the gateway never breaks: routes it does not compact, upstream errors, a stream that
dies, requests it cannot read, parallel clients, keys, restarts, side requests, recording."""

from __future__ import annotations

import json
import logging
import socket
import threading
from pathlib import Path

import anthropic
import httpx
import pytest
from starlette.responses import JSONResponse, Response, StreamingResponse

from compactkit import load_one
from compactkit.formats import session_log
from compactkit.gateway.app import listening_socket

from .agents import anthropic_agent, chat_agent
from .checks import check_conversation
from .conftest import KEY
from .upstream import FakeModel, Received

TASK = "Find why sphinx drops the alias docstring and fix it; keep the public API."
TRIGGER = 6000


def _bodies(model: FakeModel, path: str) -> list[bytes]:
    return [r.body for r in model.received if r.path == path]


def test_its_connections_send_a_response_without_waiting_for_acks() -> None:
    """`compactkit gateway` listens so that its connections have Nagle's algorithm off: a response's
    body is not held back until the client acknowledged its headers (40 ms a request on Linux)."""
    with (
        listening_socket("127.0.0.1", 0) as server,
        socket.create_connection(server.getsockname()[:2]),
    ):
        conn, _ = server.accept()
        with conn:
            assert conn.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY) != 0


def test_other_routes_pass_through_untouched(model: FakeModel, start_gateway) -> None:
    base = start_gateway(trigger=TRIGGER)
    raw = b'{"model":"claude-test","messages":[{"role":"user","content":"hi"}]}'
    with httpx.Client(timeout=30) as client:
        counted = client.post(
            base + "/v1/messages/count_tokens",
            content=raw,
            headers={"x-api-key": KEY, "content-type": "application/json", "x-extra": "kept"},
        )
        models = client.get(base + "/v1/models?limit=2", headers={"authorization": f"Bearer {KEY}"})
        missing = client.delete(base + "/v1/files/abc")
    assert counted.status_code == 200 and counted.json() == {"input_tokens": len(raw) // 4}
    assert counted.headers["x-fake"] == "1"
    assert models.json() == {"data": [{"id": "fake-model"}]}
    assert missing.status_code == 404 and missing.json() == {"error": "no such route"}
    sent = {r.path: r for r in model.received}
    assert sent["/v1/messages/count_tokens"].body == raw
    assert sent["/v1/messages/count_tokens"].headers["x-api-key"] == KEY
    assert sent["/v1/messages/count_tokens"].headers["x-extra"] == "kept"
    assert sent["/v1/models"].headers["authorization"] == f"Bearer {KEY}"
    assert [r.method for r in model.received] == ["POST", "GET", "DELETE"]


def test_an_upstream_error_reaches_the_client_as_sent(model: FakeModel, start_gateway) -> None:
    error = {"type": "error", "error": {"type": "rate_limit_error", "message": "slow down"}}
    model.hook = lambda got: JSONResponse(error, status_code=429, headers={"retry-after": "7"})
    base = start_gateway(trigger=TRIGGER)
    with pytest.raises(anthropic.RateLimitError) as caught:
        anthropic_agent(base, TASK)
    assert caught.value.status_code == 429
    assert caught.value.body == error["error"] or caught.value.body == error
    assert caught.value.response.headers["retry-after"] == "7"


def test_an_upstream_dying_mid_stream_ends_the_clients_stream(
    model: FakeModel, start_gateway
) -> None:
    def dying(got: Received) -> Response:
        async def events():  # one event, then the connection breaks
            yield b'event: message_start\ndata: {"type": "message_start", "message": '
            yield b'{"id": "m", "type": "message", "role": "assistant", "content": [], '
            yield b'"model": "x", "usage": {"input_tokens": 1, "output_tokens": 0}}}\n\n'
            raise RuntimeError("upstream process died")

        return StreamingResponse(events(), media_type="text/event-stream")

    model.hook = dying
    base = start_gateway(trigger=TRIGGER)
    done = threading.Event()
    failure: list[BaseException] = []

    def client() -> None:
        try:
            anthropic_agent(base, TASK, stream=True)
        except BaseException as exc:
            failure.append(exc)
        done.set()

    threading.Thread(target=client, daemon=True).start()
    assert done.wait(60), "the client's stream hung after the upstream died"
    assert failure and isinstance(failure[0], anthropic.APIError)


def test_a_request_it_cannot_read_is_forwarded_unchanged_and_counted(
    model: FakeModel, start_gateway
) -> None:
    base = start_gateway(trigger=10)
    odd = [
        b"not json at all",
        b'{"model": "x", "messages": "a string"}',
        b'{"model": "x", "messages": [1, 2]}',
    ]
    with httpx.Client(timeout=30) as client:
        for body in odd:
            answer = client.post(base + "/v1/messages", content=body)
            assert answer.status_code == 400  # the upstream's own answer
        stats = client.get(base + "/compactkit/stats").json()
    assert _bodies(model, "/v1/messages") == odd
    assert stats["counters"]["unreadable"] == 3


def test_twenty_clients_in_parallel_never_see_each_others_content(
    model: FakeModel, start_gateway
) -> None:
    model.turns = 6
    base = start_gateway(trigger=2500, target=1200)
    runs: dict[int, object] = {}

    def client(n: int) -> None:
        runs[n] = chat_agent(base, f"Task {n:02d}: fix issue number {n * 7919}.")

    threads = [threading.Thread(target=client, args=(n,), daemon=True) for n in range(20)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(300)
    assert sorted(runs) == list(range(20)), "a client did not finish"
    for got in _bodies(model, "/v1/chat/completions"):
        text = got.decode()
        owners = [n for n in range(20) if f"fix issue number {n * 7919}." in text]
        assert len(owners) == 1, f"a request holds the words of clients {owners}"
    stats = httpx.get(base + "/compactkit/stats", headers={"x-api-key": KEY}).json()
    assert stats["counters"]["compacted_requests"] > 0
    assert len(stats["conversations"]) == 20


def test_keys_never_reach_logs_or_stats(
    model: FakeModel, start_gateway, caplog: pytest.LogCaptureFixture
) -> None:
    model.turns = 10
    base = start_gateway(trigger=TRIGGER, target=3000)
    with caplog.at_level(logging.INFO, logger="compactkit.gateway"):
        anthropic_agent(base, TASK)
        stats = httpx.get(base + "/compactkit/stats", headers={"x-api-key": KEY}).text
    assert "compacted conversation" in caplog.text  # one line per compaction
    assert KEY not in caplog.text and KEY not in stats
    # the key went upstream with every request (this SDK sends it as a bearer token)
    keys = [r.headers.get("x-api-key") or r.headers.get("authorization") for r in model.received]
    assert all(KEY in k for k in keys) and keys


def test_usage_the_provider_reports_is_recorded_per_conversation(
    model: FakeModel, start_gateway
) -> None:
    model.turns = 4
    base = start_gateway(trigger=TRIGGER)
    anthropic_agent(base, TASK, stream=True)
    stats = httpx.get(base + "/compactkit/stats", headers={"authorization": f"Bearer {KEY}"}).json()
    (conv,) = stats["conversations"].values()
    assert conv["usage"]["responses"] == 5
    assert conv["usage"]["output_tokens"] == 5 * 7
    assert conv["usage"]["cache_read_tokens"] == 5 * 3
    assert conv["usage"]["cache_write_tokens"] == 5 * 2
    received = _bodies(model, "/v1/messages")
    assert conv["usage"]["input_tokens"] == sum(len(b) // 4 for b in received)
    assert conv["tokens_sent"] > 0 and conv["requests"] == 5


def test_state_survives_a_restart(model: FakeModel, start_gateway, tmp_path: Path) -> None:
    """A conversation compacted before a restart goes on from the same compacted prefix."""
    db = str(tmp_path / "state.db")
    model.turns = 12
    first = start_gateway(trigger=TRIGGER, target=3000, state=db)
    run = anthropic_agent(first, TASK)
    before = json.loads(_bodies(model, "/v1/messages")[-1])
    assert len(before["messages"]) < len(json.loads(run.sent[-1])["messages"])
    # a new gateway on the same state file: the client's last request again, one turn on
    second = start_gateway(trigger=TRIGGER, target=3000, state=db)
    httpx.post(
        second + "/v1/messages", content=run.sent[-1], headers={"x-api-key": KEY}, timeout=30
    )
    after = json.loads(_bodies(model, "/v1/messages")[-1])
    assert after == before


def test_a_side_request_does_not_disturb_the_conversation(model: FakeModel, start_gateway) -> None:
    """Claude Code asks for a title under the same session id, with another system prompt and
    no tools; the main conversation's compacted prefix stays as it was."""
    meta = {"user_id": json.dumps({"session_id": "5f1c", "device_id": "d"})}
    model.turns = 12
    base = start_gateway(trigger=TRIGGER, target=3000)
    run = anthropic_agent(base, TASK)
    main_before = json.loads(_bodies(model, "/v1/messages")[-1])
    title = {
        "model": "claude-haiku",
        "max_tokens": 50,
        "system": "Summarize this coding conversation in under 50 characters.",
        "messages": [{"role": "user", "content": TASK}],
        "metadata": meta,
    }
    raw = json.dumps(title).encode()
    httpx.post(base + "/v1/messages", content=raw, headers={"x-api-key": KEY}, timeout=30)
    assert _bodies(model, "/v1/messages")[-1] == raw
    httpx.post(base + "/v1/messages", content=run.sent[-1], headers={"x-api-key": KEY}, timeout=30)
    assert json.loads(_bodies(model, "/v1/messages")[-1]) == main_before


def test_record_writes_the_uncompacted_conversation_as_a_session_log(
    model: FakeModel, start_gateway, tmp_path: Path
) -> None:
    model.turns = 12
    base = start_gateway(trigger=TRIGGER, target=3000, record=str(tmp_path / "rec"))
    run = anthropic_agent(base, TASK)
    (log,) = (tmp_path / "rec").glob("*.jsonl")
    assert json.loads(log.read_text().splitlines()[0])["format"] == session_log.LOG_FORMAT_TAG
    ctx = load_one(log)
    last = json.loads(run.sent[-1])
    # every message the client sent, uncompacted (a user turn of results is one tool message)
    assert sum(1 for m in ctx.messages if m.role == "assistant") == sum(
        1 for m in last["messages"] if m["role"] == "assistant"
    )
    assert TASK in ctx.messages[0].text
    assert not any("gateway_span" in m.metadata for m in ctx.messages)
    # bench replays the recorded traffic, a model call per assistant turn
    from click.testing import CliRunner

    from compactkit.cli import make_cli

    result = CliRunner().invoke(
        make_cli(), ["bench", str(tmp_path / "rec"), "--mode", "persistent", "--json", "-"]
    )
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    (row,) = [r for r in report["sessions"] if r["pipeline"] != "none"]
    assert row["model_calls"] == sum(1 for m in ctx.messages[1:] if m.role == "assistant")


def test_an_unreachable_upstream_is_a_502_not_a_500(start_gateway) -> None:
    from compactkit.gateway import GatewayConfig, create_app

    from .upstream import serving

    config = GatewayConfig(upstream_anthropic="http://127.0.0.1:9", upstream_openai=None)
    with serving(create_app(config)) as base:
        answer = httpx.post(base + "/v1/messages", content=b"{}", timeout=30)
    assert answer.status_code == 502
    assert answer.json()["error"]["message"].startswith("compactkit gateway: upstream unreachable")


def test_chat_passes_the_trigger_and_stays_under_it(model: FakeModel, start_gateway) -> None:
    model.turns = 14
    base = start_gateway(trigger=TRIGGER, target=3000)
    run = chat_agent(base, TASK, stream=True)
    assert check_conversation(
        "openai-chat", run.sent, _bodies(model, "/v1/chat/completions"), TRIGGER, TASK
    )


def test_a_pinned_tool_is_never_compacted(model: FakeModel, start_gateway) -> None:
    """`--pin tool=read_file`: every file the agent read reaches the model verbatim, however far
    past the trigger; without the pin, compaction removes the oldest."""
    from .conftest import chunk

    model.turns = 10
    base = start_gateway(trigger=TRIGGER, target=3000, pins=("tool=read_file",))
    anthropic_agent(base, TASK)
    pinned_last = _bodies(model, "/v1/messages")[-1].decode()
    model.received.clear()
    plain = start_gateway(trigger=TRIGGER, target=3000)
    anthropic_agent(plain, TASK)
    plain_last = _bodies(model, "/v1/messages")[-1].decode()
    reads = [json.dumps(chunk(f"chunk{n}"))[1:-1] for n in range(10)]
    assert all(text in pinned_last for text in reads)
    assert not all(text in plain_last for text in reads)
    assert httpx.get(base + "/compactkit/stats").json()["counters"]["compacted_requests"] > 0
