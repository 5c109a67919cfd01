"""examples/openai_loop.py, the plain agent loop with the official openai SDK, against a loopback
server speaking the Chat Completions API: it compacts as it goes and resumes from its log."""

from __future__ import annotations

import importlib.util
import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

import compactkit

from ..conftest import ROOT

FILES = sorted((ROOT / "compactkit" / "formats").glob("*.py"))[:8]


class Model:
    """Scripted replies: one read_file call per file, then an answer; records every request."""

    def __init__(self) -> None:
        self.requests: list[dict[str, Any]] = []

    def reply(self, request: dict[str, Any]) -> dict[str, Any]:
        self.requests.append(request)
        n = len(self.requests) - 1
        if n < len(FILES):
            message: dict[str, Any] = {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": f"call_{n}",
                        "type": "function",
                        "function": {
                            "name": "read_file",
                            "arguments": json.dumps({"path": str(FILES[n])}),
                        },
                    }
                ],
            }
        else:
            message = {"role": "assistant", "content": "Every adapter has one _Builder."}
        return {
            "id": f"chatcmpl-{n}",
            "object": "chat.completion",
            "created": 0,
            "model": request["model"],
            "choices": [{"index": 0, "message": message, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
        }


@pytest.fixture
def model(monkeypatch: pytest.MonkeyPatch) -> Iterator[Model]:
    scripted = Model()

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            data = json.dumps(scripted.reply(body)).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    monkeypatch.setenv("OPENAI_BASE_URL", f"http://127.0.0.1:{server.server_port}/v1")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-loopback")
    yield scripted
    server.shutdown()


def _example() -> Any:
    spec = importlib.util.spec_from_file_location("openai_loop", ROOT / "examples/openai_loop.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_openai_loop_compacts_and_logs(model: Model, tmp_path: Path) -> None:
    example = _example()
    log = tmp_path / "agent.jsonl"
    total = sum(compactkit.count_tokens(p.read_text(encoding="utf-8")) for p in FILES)
    trigger = total // 3
    answer = example.run("What do the format adapters share?", log, trigger=trigger)
    assert answer == "Every adapter has one _Builder."
    assert len(model.requests) == len(FILES) + 1
    sizes = [len(json.dumps(r["messages"])) for r in model.requests]
    assert sizes[-1] < max(sizes)  # the prompt shrank when the session compacted
    for request in model.requests:
        assert request["messages"][0]["content"] == "What do the format adapters share?"
    # the log holds every message the agent appended, and the session as it is
    transcript = compactkit.load_one(log)
    assert len(transcript.messages) == 1 + 2 * len(FILES) + 1
    assert compactkit.Session.load(log).context.messages[-1].text == answer
