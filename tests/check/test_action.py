"""The GitHub Action, run locally: its shell step on a sample repository layout, the job summary
written, one PR comment posted then updated in place (a local stand-in for the GitHub API: no
network), the job failing exactly when the gate does."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path
from typing import Any

import pytest
import yaml  # PyYAML comes with copier, in the test extra

from ..conftest import ROOT
from .conftest import layout

ACTION = ROOT / "action.yml"
CONFIG = """[[tool.compactkit.check]]
name = "small"
sessions = "examples/sessions/openhands-sdk_*.json"
mode = "oneshot"
max_tokens = "{limit}"
"""


class FakeGitHub(BaseHTTPRequestHandler):
    """Issue comments of one repository, in memory."""

    comments: list[dict[str, Any]] = []
    calls: list[tuple[str, str]] = []

    def _send(self, status: int, body: Any) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _body(self) -> Any:
        return json.loads(self.rfile.read(int(self.headers["Content-Length"])))

    def do_GET(self) -> None:
        self.calls.append(("GET", self.path))
        self._send(200, self.comments)

    def do_POST(self) -> None:
        self.calls.append(("POST", self.path))
        assert self.headers["Authorization"] == "Bearer secret"
        comment = {"id": len(self.comments) + 1, "body": self._body()["body"]}
        self.comments.append(comment)
        self._send(201, comment)

    def do_PATCH(self) -> None:
        self.calls.append(("PATCH", self.path))
        comment_id = int(self.path.rsplit("/", 1)[1])
        for comment in self.comments:
            if comment["id"] == comment_id:
                comment["body"] = self._body()["body"]
        self._send(200, {})

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def github() -> Iterator[str]:
    FakeGitHub.comments = [{"id": 99, "body": "LGTM from a human"}]
    FakeGitHub.calls = []
    server = HTTPServer(("127.0.0.1", 0), FakeGitHub)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_port}"
    server.shutdown()


def _check_step() -> dict[str, Any]:
    action = yaml.safe_load(ACTION.read_text(encoding="utf-8"))
    assert action["runs"]["using"] == "composite"
    steps = action["runs"]["steps"]
    assert any("pip install" in s.get("run", "") for s in steps)  # it installs compactkit
    return next(s for s in steps if "compactkit.check.action" in s.get("run", ""))


def _run_step(repo: Path, api: str, summary: Path) -> subprocess.CompletedProcess[str]:
    """The action's check step as GitHub runs it: bash, the step's env, in the checkout."""
    step = _check_step()
    event = repo / "event.json"
    event.write_text(json.dumps({"number": 7, "pull_request": {"number": 7}}))
    env = {
        **os.environ,
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",
        "GITHUB_TOKEN": "secret",
        "COMPACTKIT_COMMENT": "true",
        "CHECK_ARGS": "--workers 1",
        "GITHUB_EVENT_NAME": "pull_request",
        "GITHUB_EVENT_PATH": str(event),
        "GITHUB_REPOSITORY": "octo/agent",
        "GITHUB_API_URL": api,
        "GITHUB_STEP_SUMMARY": str(summary),
    }
    assert set(step["env"]) <= set(env)
    return subprocess.run(
        ["bash", "-e", "-c", step["run"]],
        cwd=repo,
        env=env,
        capture_output=True,
        text=True,
        check=False,
        timeout=300,
    )


def test_the_action_summarizes_comments_once_and_fails_with_the_gate(
    tmp_path: Path, github: str
) -> None:
    summary = tmp_path / "summary.md"
    layout(tmp_path, CONFIG.format(limit="1k"), baseline=False)
    failed = _run_step(tmp_path, github, summary)
    assert failed.returncode == 1, failed.stderr
    assert "comment posted on pull request #7" in failed.stderr
    assert "## compactkit check failed" in summary.read_text()
    assert [m for m, _ in FakeGitHub.calls] == ["GET", "POST"]
    assert FakeGitHub.calls[1][1] == "/repos/octo/agent/issues/7/comments"

    layout(tmp_path, CONFIG.format(limit="8k"), baseline=False)
    passed = _run_step(tmp_path, github, summary)
    assert passed.returncode == 0, passed.stderr
    assert "comment updated on pull request #7" in passed.stderr
    assert [m for m, _ in FakeGitHub.calls] == ["GET", "POST", "GET", "PATCH"]
    ours = [c for c in FakeGitHub.comments if c["id"] != 99]
    assert len(ours) == 1 and "## compactkit check passed" in ours[0]["body"]
    assert FakeGitHub.comments[0]["body"] == "LGTM from a human"  # never touched
    assert summary.read_text().count("## compactkit check") == 2  # the summary is appended to


def test_the_action_outside_a_pull_request_only_writes_the_summary(tmp_path: Path) -> None:
    from compactkit.check.action import main

    layout(tmp_path, CONFIG.format(limit="8k"), baseline=False)
    summary = tmp_path / "summary.md"
    env = {"GITHUB_EVENT_NAME": "push", "GITHUB_STEP_SUMMARY": str(summary), "GITHUB_TOKEN": "x"}
    code = main(["--config", str(tmp_path / "pyproject.toml")], env)
    assert code == 0 and "compactkit check passed" in summary.read_text()
