"""The reset test with the real Claude Code CLI (npm): Claude Code runs `compactkit mcp-proxy
--state DB` as its MCP server (no `--session`: the proxy takes the `$CLAUDE_CODE_SESSION_ID` Claude
Code gives it) and talks to the scripted fake model through `compactkit gateway --state DB` (which
names the conversation by the session id in `metadata.user_id`). The agent reads a file, reads it
again (a marker), reads two more; the gateway's compaction removes the first read; the agent's next
read of that file reaches the model in full. And the real Codex CLI: how one session is named on
both sides."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("mcp", reason="the mcp extra is not installed: pip install -e '.[test]'")
pytest.importorskip("uvicorn", reason="the gateway extra is not installed")

from compactkit.gateway import wire
from compactkit.gateway.app import SESSION_HEADER
from compactkit.serve import text_etag
from tests.live.clis import CODEX_PROVIDER, Sandbox, run_claude, run_codex
from tests.live.conftest import claude_cli, codex_cli, sandbox  # noqa: F401
from tests.live.upstream import FakeUpstream, RecordedRequest, answer, call

from .test_reset import FILES, ROOT, running_gateway

pytestmark = pytest.mark.live

SERVER = Path(__file__).with_name("sdk_server.py")
TOOL = "mcp__files__read_text_file"
READS = ["state.py", "state.py", "conversations.py", "store.py", "state.py"]


def _results(request: RecordedRequest) -> list[str]:
    """What every tool result of a request shows, in order: Claude Code shows a result's
    structured content (`{"result": TEXT}`), and so its text."""
    out = []
    for msg in request.body["messages"]:
        for block in msg["content"] if isinstance(msg["content"], list) else []:
            if block.get("type") == "tool_result":
                content = block.get("content")
                parts = content if isinstance(content, list) else [{"text": content}]
                text = "\n".join(str(p.get("text", "")) for p in parts)
                out.append(json.loads(text)["result"] if text.startswith('{"result":') else text)
    return out


def _mcp_config(db: Path, workspace: Path) -> str:
    proxy = [sys.executable, "-m", "compactkit", "mcp-proxy", "--state", str(db), "--"]
    server = {
        "command": proxy[0],
        "args": [*proxy[1:], sys.executable, str(SERVER), "plain", str(workspace)],
        "env": {"PYTHONPATH": str(ROOT)},
    }
    return json.dumps({"mcpServers": {"files": server}})


def test_claude_code_reads_in_full_what_the_gateway_compacted_away(
    claude_cli: Path,  # noqa: F811
    sandbox: Sandbox,  # noqa: F811
    tmp_path: Path,
) -> None:
    texts = {name: path.read_text(encoding="utf-8") for name, path in FILES.items()}
    for name, text in texts.items():
        (sandbox.workspace / name).write_text(text, encoding="utf-8")
    db = tmp_path / "state.db"
    script = [call(TOOL, path=name) for name in READS] + [answer("reviewed")]
    with FakeUpstream() as upstream:
        prompt = _baseline(claude_cli, sandbox, upstream)
        with running_gateway(upstream, db, prompt + 6000, prompt + 3500) as url:
            run = run_claude(
                "Review state.py, conversations.py and store.py.",
                sandbox,
                upstream=upstream,
                script=script,
                base_url=url,
                allowed_tools=[TOOL],
                extra_args=["--mcp-config", _mcp_config(db, sandbox.workspace)],
                executable=claude_cli,
            )
    assert run.returncode == 0, run.describe()
    assert upstream.problems == [] and run.output["result"] == "reviewed"
    turns = run.turn_requests()
    assert len(turns) == len(READS) + 1
    full, marker = texts["state.py"], text_etag(texts["state.py"])
    # the second read was a marker: the proxy and the gateway named the same session
    assert _results(turns[1]) == [full]
    assert json.loads(_results(turns[2])[1])["etag"] == marker
    # the compaction removed the first read (and its marker) from what the model was sent
    assert full not in _results(turns[4]) and texts["store.py"] in _results(turns[4])
    # and the read after it reached the model in full
    assert _results(turns[5])[-1] == full


def _baseline(executable: Path, box: Sandbox, upstream: FakeUpstream) -> int:
    """Tokens of Claude Code's first request (its system prompt and the task), by compactkit's
    count: the trigger is set above it."""
    from compactkit.registry import get_counter

    run = run_claude(
        "Say hello.",
        box,
        upstream=upstream,
        script=[answer("hello")],
        allowed_tools=[TOOL],
        executable=executable,
    )
    assert run.returncode == 0, run.describe()
    body: Any = run.turn_requests()[0].body
    return get_counter().context(wire.read("anthropic", body).context)


def test_codex_names_one_session_on_both_sides_from_one_variable(
    codex_cli: Path,  # noqa: F811
    sandbox: Sandbox,  # noqa: F811
    tmp_path: Path,
) -> None:
    """The Codex setup docs/serve.md gives: Codex hands its MCP servers no id of its own (only
    HOME, PATH and the like), so `COMPACTKIT_SESSION` reaches the proxy by `env_vars` and the
    gateway by `env_http_headers`: both name the same session."""
    seen = tmp_path / "server-env"
    server = ["-c", f"env > {seen}; sleep 5"]
    overrides = {
        "mcp_servers.files.command": '"sh"',
        "mcp_servers.files.args": json.dumps(server),
        "mcp_servers.files.env_vars": '["COMPACTKIT_SESSION"]',
        f"model_providers.{CODEX_PROVIDER}.env_http_headers": (
            '{"X-Compactkit-Session" = "COMPACTKIT_SESSION"}'
        ),
    }
    args = [a for key, value in overrides.items() for a in ("-c", f"{key}={value}")]
    with FakeUpstream() as upstream:
        run = run_codex(
            "Say hi.",
            sandbox,
            upstream=upstream,
            script=[call("exec_command", cmd="sleep 2"), answer("hi")],
            extra_args=args,
            env={"COMPACTKIT_SESSION": "build-7"},
            executable=codex_cli,
        )
    assert run.returncode == 0, run.describe()
    env = dict(line.split("=", 1) for line in seen.read_text().splitlines() if "=" in line)
    assert env["COMPACTKIT_SESSION"] == "build-7"
    assert run.session_id and not any(run.session_id in value for value in env.values())
    for request in run.turn_requests():
        header = request.headers.get(SESSION_HEADER)
        assert header == "build-7"
        assert wire.session_name("openai-responses", request.body, header) == "build-7"
        assert request.body["prompt_cache_key"] == run.session_id  # what names it without one
