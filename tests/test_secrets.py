"""Secrets are never written: not in a committed baseline, a report, a Session log or an error line,
whoever echoes them (a server's 401 that repeats the `Basic` header httpx built from the URL)."""

from __future__ import annotations

import base64
import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

import compactkit
from compactkit.errors import ConfigError, redact

from .check.conftest import layout, run
from .conftest import sample

LEAKY = "http://user:PASSWORD@127.0.0.1:9/v1?api_key=SECRETKEY"
SPEC = f"llm-summary:backend=openai,base_url={LEAKY},fallback=extractive,keep_last=2"
MASKED = "base_url=http://***@127.0.0.1:9/v1?api_key=***"


def _assert_clean(*texts: str) -> None:
    for text in texts:
        assert "PASSWORD" not in text and "SECRETKEY" not in text, text


def test_check_writes_no_credential_to_the_baseline_or_any_report(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-not-a-real-key-0000")
    config = (
        '[[tool.compactkit.check]]\nname = "leak"\n'
        'sessions = ["examples/sessions/runtime_trajs_basic.json"]\nmode = "oneshot"\n'
        f'pipeline = ["{SPEC}"]\n'
    )
    path = layout(tmp_path, config, baseline=False)
    code, out, err = run("check", "--config", str(path), "--update-baseline")
    assert code == 0, err
    baseline = (tmp_path / "compactkit-baseline.json").read_text()
    _assert_clean(out, err, baseline)
    assert json.loads(baseline)["checks"]["leak"]["pipeline"] == [
        SPEC.replace(f"base_url={LEAKY}", MASKED)
    ]
    reports = [tmp_path / name for name in ("r.json", "r.md", "r.xml")]
    code, out, err = run(
        *("check", "--config", str(path), "--json", str(reports[0])),
        *("--markdown", str(reports[1]), "--junit", str(reports[2])),
    )
    assert code == 0, err
    texts = [p.read_text() for p in reports]
    _assert_clean(out, err, *texts)
    assert MASKED in texts[0]
    # the baseline's masked pipeline is the configured one: no "recorded with pipeline" note
    assert "recorded with pipeline" not in out
    code, out, err = run("check", "--config", str(path), "--json", "-")
    _assert_clean(out, err)
    assert json.loads(out)["checks"][0]["pipeline"] == [SPEC.replace(f"base_url={LEAKY}", MASKED)]


def test_a_session_log_holds_no_credential_and_asks_for_the_pipeline_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-not-a-real-key-0000")
    ctx = compactkit.load_one(sample("sphinx-doc"))
    log = tmp_path / "session.jsonl"
    with compactkit.Session(ctx, pipeline=[SPEC], trigger=20_000) as session:
        session.save(log)
        session.append(compactkit.message("user", "and keep the docstring"))
    text = log.read_text()
    _assert_clean(text)
    assert MASKED in text
    with pytest.raises(ConfigError, match="pipeline held credentials"):
        compactkit.Session.load(log)
    with compactkit.Session.load(log, pipeline=[SPEC]) as resumed:
        assert resumed.context.messages[-1].text == "and keep the docstring"


def test_plain_pipelines_are_kept_in_the_log(tmp_path: Path) -> None:
    log = tmp_path / "session.jsonl"
    with compactkit.Session(pipeline=["observation-mask:keep_last=3"]) as session:
        session.save(log)
    with compactkit.Session.load(log) as resumed:
        assert [s.label for s in resumed.pipeline.strategies] == ["observation-mask:keep_last=3"]


@pytest.fixture
def echo_server() -> Iterator[str]:
    """A loopback server answering 401 with the Authorization header it was sent, as some
    gateways and proxies do."""

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, format: str, *args: Any) -> None:
            pass

        def do_POST(self) -> None:
            self.rfile.read(int(self.headers.get("content-length") or 0))
            said = f"unauthorized; you sent authorization={self.headers.get('authorization')}"
            body = json.dumps({"error": {"message": said}}).encode()
            self.send_response(401)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    httpd.daemon_threads = True
    thread = threading.Thread(target=httpd.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    try:
        yield f"127.0.0.1:{httpd.server_address[1]}"
    finally:
        httpd.shutdown()
        httpd.server_close()
        thread.join(5)


def test_a_basic_authorization_header_echoed_by_a_server_is_masked(
    echo_server: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "plainkeyvalue")
    monkeypatch.setenv("NO_PROXY", "127.0.0.1,localhost")
    for proxy in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy"):
        monkeypatch.delenv(proxy, raising=False)
    spec = f"llm-summary:backend=openai,base_url=http://user:PASSWORD@{echo_server}/v1"
    spec += ",max_tokens=5000"
    code, out, err = run("run", str(sample("sphinx-doc")), "-s", spec, "-o", str(tmp_path / "o"))
    assert code == 3
    assert "authentication failed (HTTP 401)" in err
    assert "authorization=Basic ***" in err
    basic = base64.b64encode(b"user:PASSWORD").decode()
    assert basic not in err and "PASSWORD" not in err and "plainkeyvalue" not in out + err


@pytest.mark.parametrize(
    ("text", "masked"),
    [
        ("proxy said Authorization: Basic dXNlcjpQQVNTV09SRA== to us", "Basic ***"),
        ('{"authorization": "Bearer abc.def-ghi"}', '"Bearer ***"'),
        ("echo: Basic dXNlcjpQQVNTV09SRA==", "Basic ***"),
        ("echo: Bearer eyJhbGciOi.J9x1", "Bearer ***"),
        ("Basic configuration is enough", "Basic configuration"),  # words, not credentials
        ("Bearer tokens expire", "Bearer tokens"),
    ],
)
def test_authorization_credentials_are_masked_and_words_are_not(text: str, masked: str) -> None:
    assert masked in redact(text)
    assert "dXNlcjpQQVNTV09SRA" not in redact(text)
