"""What `compactkit gateway` logs on stderr goes through `compactkit.errors.redact`, its HTTP
client's lines included: a key in the request's query string (`?api_key=...`) or in the upstream
URL (`http://user:password@host`) never reaches the log."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import httpx

from .upstream import FakeModel, serving

ROOT = Path(__file__).resolve().parents[2]
SECRETS = ("QUERYSECRET4242", "hunter2password")


def test_keys_in_a_query_or_the_upstream_url_never_reach_the_log(model: FakeModel) -> None:
    with serving(model.app()) as upstream:
        with_password = upstream.replace("http://", "http://alice:hunter2password@")
        command = [sys.executable, "-m", "compactkit", "gateway", "--listen", "127.0.0.1:0"]
        command += ["--upstream-anthropic", with_password, "-v"]  # -v: a line per request
        env = {**os.environ, "PYTHONPATH": str(ROOT)}
        proc = subprocess.Popen(command, cwd=ROOT, env=env, stderr=subprocess.PIPE, text=True)
        assert proc.stderr is not None
        try:
            found = re.search(r"listening on (http://\S+)", proc.stderr.readline())
            assert found
            body = {"model": "m", "max_tokens": 9, "messages": [{"role": "user", "content": "hi"}]}
            url = found.group(1) + "/v1/messages?api_key=" + SECRETS[0]
            assert httpx.post(url, json=body, timeout=60).status_code == 200
        finally:
            proc.terminate()
            proc.wait(timeout=30)
        log = proc.stderr.read()
    assert model.received  # the request went upstream
    assert "api_key=***" in log  # the client's line is there, masked
    assert not [s for s in SECRETS if s in log], log
