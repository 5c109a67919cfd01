"""The GitHub Action, run locally: its shell step on a sample repository layout, the job summary
written, one PR comment posted then updated in place (a local stand-in for the GitHub API: no
network), the job failing exactly when the gate does."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path
from typing import Any

import pytest
import yaml  # PyYAML comes with copier, in the test extra

from compactkit import __version__

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


def _action() -> dict[str, Any]:
    action: dict[str, Any] = yaml.safe_load(ACTION.read_text(encoding="utf-8"))
    assert action["runs"]["using"] == "composite"
    return action


def _check_step() -> dict[str, Any]:
    steps = _action()["runs"]["steps"]
    return next(s for s in steps if "compactkit.check.action" in s.get("run", ""))


def _install_step() -> dict[str, Any]:
    return next(s for s in _action()["runs"]["steps"] if "pip install" in s.get("run", ""))


def _run_install(env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess[str]:
    """The action's install step as GitHub runs it: bash, with the step's variables set."""
    step = _install_step()
    assert set(step["env"]) == {"PACKAGE", "EXTRAS", "ACTION_PATH"}
    assert set(step["env"]) <= set(env)
    return subprocess.run(
        ["bash", "-e", "-c", step["run"]],
        cwd=cwd,
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        check=False,
        timeout=300,
    )


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


def test_the_install_step_takes_the_action_checkout_unless_told_otherwise(tmp_path: Path) -> None:
    """No release on a package index is needed: by default the action installs the checkout that
    `uses: OWNER/compactkit@vX.Y.Z` fetched (github.action_path), with `extras`; `package` wins."""
    action = _action()
    assert action["inputs"]["package"]["default"] == ""
    assert action["inputs"]["extras"]["default"] == ""
    step_env = _install_step()["env"]
    assert step_env["ACTION_PATH"] == "${{ github.action_path }}"
    assert step_env["PACKAGE"] == "${{ inputs.package }}"
    assert step_env["EXTRAS"] == "${{ inputs.extras }}"
    # a `python` that prints what pip was asked to install
    fake = tmp_path / "bin"
    fake.mkdir()
    (fake / "python").write_text('#!/bin/sh\nprintf "%s\\n" "$@"\n')
    (fake / "python").chmod(0o755)
    path = f"{fake}{os.pathsep}{os.environ['PATH']}"
    checkout = "/home/runner/work/_actions/OWNER/compactkit/v1"
    cases = {
        ("", ""): checkout,
        ("", "ray,mcp"): f"{checkout}[ray,mcp]",
        ("compactkit @ git+https://example.test/compactkit@v1", "ray"): (
            "compactkit @ git+https://example.test/compactkit@v1"
        ),
        ('"; echo pwned; "', ""): '"; echo pwned; "',  # an input is data, never script
    }
    for (package, extras), wanted in cases.items():
        env = {"PATH": path, "PACKAGE": package, "EXTRAS": extras, "ACTION_PATH": checkout}
        done = _run_install(env, tmp_path)
        assert done.returncode == 0, done.stderr
        assert done.stdout.splitlines() == ["-m", "pip", "install", "--quiet", wanted]


def test_the_install_step_installs_a_working_compactkit_from_the_checkout(tmp_path: Path) -> None:
    """The step for real: pip installs a copy of this checkout (its tracked files, as `uses:`
    fetches them) into a folder, and that compactkit runs with the checkout's version."""
    checkout = tmp_path / "compactkit"
    tracked = subprocess.run(
        ["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True
    ).stdout.decode()
    for name in filter(None, tracked.split("\0")):
        if (ROOT / name).is_file():  # a tracked file deleted in the working tree is gone
            (checkout / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / name, checkout / name)
    site = tmp_path / "site"
    env = {
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",
        "PACKAGE": "",
        "EXTRAS": "",
        "ACTION_PATH": str(checkout),
        # into a folder, the dependencies from this environment: the package index serves only
        # the build backend (setuptools, in pip's isolated build environment)
        "PIP_TARGET": str(site),
        "PIP_NO_DEPS": "1",
    }
    done = _run_install(env, tmp_path)
    assert done.returncode == 0, done.stderr
    assert (site / f"compactkit-{__version__}.dist-info").is_dir()
    shown = subprocess.run(
        [sys.executable, "-m", "compactkit", "--version"],
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(site)},
        capture_output=True,
        text=True,
        check=True,
    )
    assert shown.stdout.strip() == f"compactkit, version {__version__}"
    probe = [sys.executable, "-c", "import compactkit.check.action as a; print(a.__file__)"]
    where = subprocess.run(
        probe,
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(site)},
        capture_output=True,
        text=True,
        check=True,
    )
    assert Path(where.stdout.strip()).is_relative_to(site)
