"""A compacted session goes back into the agent it came from: `compactkit run SESSION -s ... --to
claude-code` (`--to codex-rollout`, `--to pi-session`) writes a session the real CLI (npm, pinned in
clis.py) resumes (`claude --resume ID`, `codex exec resume ID`, `pi --session ID`), and the request
it then sends the (fake) model holds exactly the compacted history, in order, then the new prompt."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

import compactkit
from compactkit.cli import make_cli
from compactkit.context import Message
from compactkit.registry import make_registry
from tests.live.clis import (
    QUESTION,
    Sandbox,
    first_session,
    resume,
    run_claude,
    run_codex,
    run_pi,
    session_target,
)
from tests.live.upstream import FakeUpstream, RecordedRequest, answer, call, last_tool_result

pytestmark = pytest.mark.live

CLI = make_cli(lambda: make_registry(entry_points=False))
MASK = "observation-mask:keep_last=0,min_tokens=0"

SCRIPT = [
    call("Bash", command="seq 1 3000 > f.txt", description="Write 3000 lines to f.txt"),
    call("Bash", command="cat f.txt", description="Read f.txt"),
    answer(lambda request: f"f.txt ends with {last_tool_result(request).split()[-1]}"),
]


def compact_into(session: Path, fmt: str, target: Path) -> compactkit.AgentContext:
    """`compactkit run SESSION -s MASK --to FMT -o TARGET`, read back: the long output (3000 lines)
    the session holds is masked in it."""
    result = CliRunner().invoke(
        CLI, ["run", str(session), "-s", MASK, "--to", fmt, "-o", str(target)]
    )
    assert result.exit_code == 0, result.stderr
    compacted = compactkit.load_one(target)
    outputs = [r.text for m in compactkit.load_one(session).messages for r in m.tool_results]
    masked = [r.text for m in compacted.messages for r in m.tool_results]
    assert any("2999" in text for text in outputs) and not any("2999" in t for t in masked)
    return compacted


def shape_of_block(block: dict[str, Any]) -> tuple[str, ...]:
    kind = block.get("type")
    if kind == "tool_use":
        return ("tool_use", block["id"], block["name"], json.dumps(block["input"], sort_keys=True))
    if kind == "tool_result":
        content = block.get("content")
        text = (
            content
            if isinstance(content, str)
            else "".join(c.get("text", "") for c in content or [] if isinstance(c, dict))
        )
        return ("tool_result", block["tool_use_id"], text)
    if kind == "text":
        return ("text", block["text"])
    return (str(kind),)


def shape_of_request(message: dict[str, Any]) -> tuple[str, list[tuple[str, ...]]]:
    content = message["content"]
    blocks = [{"type": "text", "text": content}] if isinstance(content, str) else content
    return message["role"], [shape_of_block(b) for b in blocks if b.get("type") != "thinking"]


def shape_of_message(message: Message) -> tuple[str, list[tuple[str, ...]]]:
    role = "user" if message.role == "tool" else message.role
    blocks: list[tuple[str, ...]] = []
    for block in message.content:
        if block.type == "tool_call":
            blocks.append(
                ("tool_use", block.id, block.name, json.dumps(block.input, sort_keys=True))
            )
        elif block.type == "tool_result":
            blocks.append(("tool_result", block.tool_call_id, block.text))
        elif block.type == "text":
            blocks.append(("text", block.text))
    return role, blocks


def turn_request(requests: list[RecordedRequest]) -> dict[str, Any]:
    turns = [r.body for r in requests if isinstance(r.body, dict) and r.body.get("tools")]
    assert turns, "Claude Code sent no turn request"
    return turns[-1]


def test_claude_code_resumes_a_compacted_session_with_exactly_that_history(
    claude_cli: Path, fake_upstream: FakeUpstream, tmp_path: Path
) -> None:
    run = first_session(run_claude, tmp_path / "first", fake_upstream, SCRIPT, claude_cli)

    # compact it and write it back in Claude Code's format, into a fresh HOME's project folder
    second = Sandbox.create(tmp_path / "second")
    target = session_target(run_claude, second, run.session_id)
    compacted = compact_into(run.session_file, "claude-code", target)

    resumed = resume(run_claude, second, fake_upstream, run.session_id, claude_cli)
    assert fake_upstream.problems == []
    sent = [
        shape_of_request(m)
        for m in turn_request(resumed.requests)["messages"]
        if m["role"] in ("user", "assistant")
    ]
    expected = [shape_of_message(m) for m in compacted.messages]
    assert sent[: len(expected)] == expected  # exactly the compacted history, in order
    new_turn = sent[len(expected) :]
    assert new_turn and new_turn[-1][0] == "user"
    assert ("text", QUESTION) in new_turn[-1][1]


# --------------------------------------------------------------------------- Codex

CODEX_SCRIPT = [
    call("exec_command", cmd="seq 1 3000 > f.txt"),
    call("exec_command", cmd="cat f.txt"),
    answer("f.txt holds the numbers 1 to 3000."),
]


def shape_of_item(item: dict[str, Any]) -> tuple[str, ...]:
    kind = item.get("type")
    if kind == "message":
        texts = [c.get("text", "") for c in item.get("content") or [] if isinstance(c, dict)]
        return ("message", item["role"], "\n".join(texts))
    if kind in ("function_call", "custom_tool_call"):
        return ("call", item["call_id"], item["name"])
    if kind in ("function_call_output", "custom_tool_call_output"):
        output = item.get("output")
        return (
            "output",
            item["call_id"],
            output if isinstance(output, str) else json.dumps(output),
        )
    return (str(kind),)


def shape_of_codex_message(message: Message) -> list[tuple[str, ...]]:
    if message.role == "tool":
        return [("output", r.tool_call_id, r.text) for r in message.tool_results]
    if message.role == "assistant":
        out: list[tuple[str, ...]] = []
        if message.text:
            out.append(("message", "assistant", message.text))
        out += [("call", c.id, c.name) for c in message.tool_calls]
        return out
    role = "developer" if message.role == "system" else "user"
    return [("message", role, message.text)]


def test_codex_resumes_a_compacted_rollout_with_exactly_that_history(
    codex_cli: Path, fake_upstream: FakeUpstream, tmp_path: Path
) -> None:
    run = first_session(run_codex, tmp_path / "first", fake_upstream, CODEX_SCRIPT, codex_cli)

    second = Sandbox.create(tmp_path / "second")
    target = session_target(run_codex, second, run.session_id)
    compacted = compact_into(run.session_file, "codex-rollout", target)

    resumed = resume(run_codex, second, fake_upstream, run.session_id, codex_cli, "3000.")
    sent = [shape_of_item(i) for i in resumed.turn_requests()[0].body["input"]]
    expected = [shape for m in compacted.messages for shape in shape_of_codex_message(m)]
    start = sent.index(expected[0])
    # Codex puts its own instructions first (developer messages), then the rollout's history
    assert all(item[:2] == ("message", "developer") for item in sent[:start]), sent[:start]
    assert sent[start : start + len(expected)] == expected  # exactly the compacted history
    assert ("message", "user", QUESTION) in sent[start + len(expected) :]


# --------------------------------------------------------------------------- pi

PI_SCRIPT = [
    call("bash", command="seq 1 3000 > f.txt"),
    call("bash", command="cat f.txt"),
    answer("f.txt holds the numbers 1 to 3000."),
]


def test_pi_resumes_a_compacted_session_with_exactly_that_history(
    pi_cli: Path, fake_upstream: FakeUpstream, tmp_path: Path
) -> None:
    run = first_session(run_pi, tmp_path / "first", fake_upstream, PI_SCRIPT, pi_cli)
    assert run.session_id is not None

    # compact it and write it back as a pi session among a fresh HOME's sessions of the workspace
    second = Sandbox.create(tmp_path / "second")
    target = session_target(run_pi, second, run.session_id)
    compacted = compact_into(run.session_file, "pi-session", target)
    assert compacted.metadata["session_id"] == run.session_id  # pi finds it by this id

    resumed = resume(run_pi, second, fake_upstream, run.session_id, pi_cli)
    assert fake_upstream.problems == []
    assert resumed.output.strip() == "3000 lines."
    requests = resumed.turn_requests()
    assert len(requests) == 1, resumed.describe()
    sent = [shape_of_request(m) for m in requests[0].body["messages"]]
    expected = [shape_of_message(m) for m in compacted.messages]
    assert sent[: len(expected)] == expected  # exactly the compacted history, in order
    assert sent[len(expected) :] == [("user", [("text", QUESTION)])]
    # pi went on in the converted file: the new turn is appended to the compacted history
    assert resumed.session_file == target
    after = compactkit.load_one(target)
    assert [m.text for m in after.messages[: len(compacted.messages)]] == [
        m.text for m in compacted.messages
    ]
    assert after.messages[-1].text == "3000 lines."
