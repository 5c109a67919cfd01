"""What the GitHub Action (`action.yml`) runs: `compactkit check`, its markdown in the job
summary and, on a pull request, one comment posted or updated in place.

`python -m compactkit.check.action [CHECK ARGS...]` reads the environment GitHub Actions sets
(`GITHUB_STEP_SUMMARY`, `GITHUB_EVENT_NAME`, `GITHUB_EVENT_PATH`, `GITHUB_REPOSITORY`,
`GITHUB_API_URL`) and `GITHUB_TOKEN`; without them it only runs the check. It exits with the
check's exit code, so the job fails exactly when the gate does. A comment that cannot be posted
(a fork's read-only token) is a warning, never the job's failure.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import urllib.error
import urllib.request
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from .report import COMMENT_MARKER


def run_check(args: Sequence[str], markdown: Path) -> int:
    """`compactkit check ARGS --markdown FILE` in a child process; its exit code."""
    command = [sys.executable, "-m", "compactkit", "check", *args, "--markdown", str(markdown)]
    return subprocess.run(command, check=False).returncode


def pull_request_number(env: Mapping[str, str]) -> int | None:
    """The pull request this run is for, from the event payload (None outside a PR)."""
    if env.get("GITHUB_EVENT_NAME") not in ("pull_request", "pull_request_target"):
        return None
    path = env.get("GITHUB_EVENT_PATH")
    if not path or not Path(path).is_file():
        return None
    event = json.loads(Path(path).read_text(encoding="utf-8"))
    number = event.get("pull_request", {}).get("number") or event.get("number")
    return int(number) if number else None


def _request(url: str, token: str, method: str = "GET", body: Any = None) -> Any:
    data = json.dumps(body).encode() if body is not None else None
    request = urllib.request.Request(url, data=data, method=method)
    request.add_header("Authorization", f"Bearer {token}")
    request.add_header("Accept", "application/vnd.github+json")
    request.add_header("Content-Type", "application/json")
    with urllib.request.urlopen(request, timeout=30) as response:
        text = response.read().decode() or "null"
    return json.loads(text)


def upsert_comment(env: Mapping[str, str], number: int, body: str) -> str:
    """Update this action's comment on PR `number` (found by its marker), or post one."""
    api = env.get("GITHUB_API_URL", "https://api.github.com").rstrip("/")
    repo, token = env["GITHUB_REPOSITORY"], env["GITHUB_TOKEN"]
    base = f"{api}/repos/{repo}/issues"
    page = 1
    while True:
        comments = _request(f"{base}/{number}/comments?per_page=100&page={page}", token)
        for comment in comments:
            if str(comment.get("body", "")).startswith(COMMENT_MARKER):
                _request(f"{base}/comments/{comment['id']}", token, "PATCH", {"body": body})
                return "updated"
        if len(comments) < 100:
            break
        page += 1
    _request(f"{base}/{number}/comments", token, "POST", {"body": body})
    return "posted"


def main(argv: Sequence[str] | None = None, env: Mapping[str, str] | None = None) -> int:
    env = os.environ if env is None else env
    args = list(sys.argv[1:] if argv is None else argv)
    with tempfile.TemporaryDirectory() as folder:
        markdown = Path(folder) / "check.md"
        code = run_check(args, markdown)
        if not markdown.is_file():  # the check never ran (bad configuration): nothing to show
            return code
        body = markdown.read_text(encoding="utf-8")
    summary = env.get("GITHUB_STEP_SUMMARY")
    if summary:
        with open(summary, "a", encoding="utf-8") as out:
            out.write(body + "\n")
    number = pull_request_number(env)
    if number is not None and env.get("GITHUB_TOKEN") and env.get("COMPACTKIT_COMMENT") != "false":
        try:
            what = upsert_comment(env, number, body)
            print(f"compactkit check: comment {what} on pull request #{number}", file=sys.stderr)
        except (urllib.error.URLError, OSError, KeyError, ValueError) as exc:
            print(f"::warning::compactkit check: could not comment on the PR: {exc}")
    return code


if __name__ == "__main__":
    sys.exit(main())
