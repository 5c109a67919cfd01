"""What an agent's session has no field for, carried another way, resumes in the real CLI: a
system prompt written into a Claude Code or pi session reaches the model as the first user turn
(after the agent's own system prompt), and a Codex rollout whose failed result keeps its error flag
beside the output (`compactkit_is_error`) resumes with exactly that history. Each session comes
from a first real run, gets a system prompt and a failed result, and goes back through
`compactkit convert --to ...`."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

import compactkit
from compactkit import AgentContext
from compactkit.cli import make_cli
from compactkit.registry import make_registry
from tests.live.clis import (
    CliRun,
    Sandbox,
    first_session,
    resume,
    run_claude,
    run_codex,
    run_pi,
    session_target,
)
from tests.live.test_resume import (
    CODEX_SCRIPT,
    PI_SCRIPT,
    SCRIPT,
    shape_of_codex_message,
    shape_of_item,
    shape_of_message,
    shape_of_request,
    turn_request,
)
from tests.live.upstream import FakeUpstream

pytestmark = pytest.mark.live

CLI = make_cli(lambda: make_registry(entry_points=False))
PROMPT = "You answer in exactly three words and never use a tool twice."


def with_prompt_and_a_failure(session: Path) -> AgentContext:
    """The session with a system prompt and its first tool result marked failed."""
    ctx = compactkit.load_one(session)
    messages = list(ctx.messages)
    index = next(i for i, m in enumerate(messages) if m.role == "tool")
    result = messages[index].tool_results[0].model_copy(update={"is_error": True})
    messages[index] = messages[index].model_copy(update={"content": (result,)})
    return ctx.replace(system_instruction=PROMPT, messages=tuple(messages))


def convert_into(ctx: AgentContext, fmt: str, target: Path) -> str:
    """`compactkit convert` of `ctx` (saved as compactkit JSON beside) to `target`; its stderr."""
    source = target.parent.parent / "source.json"
    source.write_text(compactkit.render(ctx), encoding="utf-8")
    result = CliRunner().invoke(CLI, ["convert", str(source), "--to", fmt, "-o", str(target)])
    assert result.exit_code == 0, result.stderr
    back = compactkit.load_one(target)
    assert back.system_instruction == PROMPT  # read back as the system prompt
    assert next(r.is_error for m in back.messages for r in m.tool_results) is True
    return str(result.stderr)


@dataclass
class Carried:
    """A first real run's session, with a system prompt and a failed result, converted back to
    the agent's format and resumed."""

    ctx: AgentContext
    stderr: str
    """What `compactkit convert` said."""
    target: Path
    resumed: CliRun


def carried(
    run: Callable[..., CliRun],
    executable: Path,
    script: Any,
    fmt: str,
    upstream: FakeUpstream,
    folder: Path,
    reply: str = "3000 lines.",
) -> Carried:
    """The agent `run` run once on `script`, its session given a system prompt and a failure
    (`with_prompt_and_a_failure`), converted `--to fmt` where a fresh sandbox's agent finds it,
    and resumed there."""
    first = first_session(run, folder / "first", upstream, script, executable)
    ctx = with_prompt_and_a_failure(first.session_file)
    second = Sandbox.create(folder / "second")
    target = session_target(run, second, first.session_id)
    stderr = convert_into(ctx, fmt, target)
    resumed = resume(run, second, upstream, first.session_id, executable, reply)
    return Carried(ctx, stderr, target, resumed)


def first_user_text(message: dict[str, Any]) -> str:
    content = message["content"]
    if isinstance(content, str):
        return content
    return "\n".join(b.get("text", "") for b in content if b.get("type") == "text")


def test_claude_code_sends_the_system_prompt_written_into_its_session(
    claude_cli: Path, fake_upstream: FakeUpstream, tmp_path: Path
) -> None:
    done = carried(run_claude, claude_cli, SCRIPT, "claude-code", fake_upstream, tmp_path)
    assert "1 system prompt written as a user message" in done.stderr
    assert fake_upstream.problems == []
    ctx, resumed = done.ctx, done.resumed
    messages = turn_request(resumed.requests)["messages"]
    assert messages[0]["role"] == "user" and PROMPT in first_user_text(messages[0])
    sent = [shape_of_request(m) for m in messages if m["role"] in ("user", "assistant")]
    history = [shape_of_message(m) for m in ctx.messages][1:]  # the task shares the first turn
    assert sent[1 : 1 + len(history)] == history
    failed = [
        b
        for m in messages
        for b in (m["content"] if isinstance(m["content"], list) else [])
        if b.get("type") == "tool_result"
    ]
    assert failed[0].get("is_error") is True  # and the error flag reaches the model


def test_pi_sends_the_system_prompt_written_into_its_session(
    pi_cli: Path, fake_upstream: FakeUpstream, tmp_path: Path
) -> None:
    done = carried(run_pi, pi_cli, PI_SCRIPT, "pi-session", fake_upstream, tmp_path)
    assert "1 system prompt written as a user message" in done.stderr
    assert fake_upstream.problems == []
    ctx, resumed = done.ctx, done.resumed
    (request,) = resumed.turn_requests()
    sent = [shape_of_request(m) for m in request.body["messages"]]
    expected = [("user", [("text", PROMPT)])] + [shape_of_message(m) for m in ctx.messages]
    assert sent[: len(expected)] == expected  # the prompt first, then exactly the history
    failed = [b for m in request.body["messages"] for b in m["content"] if isinstance(b, dict)]
    assert next(b.get("is_error") for b in failed if b.get("type") == "tool_result") is True


def test_codex_resumes_a_rollout_that_keeps_an_error_flag(
    codex_cli: Path, fake_upstream: FakeUpstream, tmp_path: Path
) -> None:
    done = carried(
        run_codex, codex_cli, CODEX_SCRIPT, "codex-rollout", fake_upstream, tmp_path, "3000."
    )
    # all carried but the model (a rollout keeps it in turn_context records, not written)
    warning = "warning: codex-rollout export dropped 1 session model"
    assert done.stderr.splitlines() == [warning]
    assert '"compactkit_is_error": true' in done.target.read_text(encoding="utf-8")
    ctx = done.ctx
    body = done.resumed.turn_requests()[0].body
    sent = [shape_of_item(i) for i in body["input"]]
    expected = [shape for m in ctx.messages for shape in shape_of_codex_message(m)]
    start = sent.index(expected[0])
    assert sent[start : start + len(expected)] == expected  # the history, the failed output in it
    # base_instructions, Codex's system prompt: its first developer message
    assert sent[0] == ("message", "developer", PROMPT), sent[0]
