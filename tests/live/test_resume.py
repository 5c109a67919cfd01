"""A compacted session goes back into Claude Code: `compactkit run SESSION -s ... --to claude-code`
writes a session the real CLI (npm, pinned in clis.py) resumes with `claude --resume ID`, and the
request it then sends the (fake) model holds exactly the compacted history, then the new prompt."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

import compactkit
from compactkit.cli import make_cli
from compactkit.context import Message
from compactkit.registry import make_registry
from tests.live.clis import Sandbox, run_claude
from tests.live.upstream import FakeUpstream, RecordedRequest, answer, call, last_tool_result

pytestmark = pytest.mark.live

CLI = make_cli(lambda: make_registry(entry_points=False))
MASK = "observation-mask:keep_last=0,min_tokens=0"

SCRIPT = [
    call("Bash", command="seq 1 3000 > f.txt", description="Write 3000 lines to f.txt"),
    call("Bash", command="cat f.txt", description="Read f.txt"),
    answer(lambda request: f"f.txt ends with {last_tool_result(request).split()[-1]}"),
]


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
    first = Sandbox.create(tmp_path / "first")
    run = run_claude(
        "Write the numbers 1 to 3000 to f.txt, then read it back.",
        first,
        upstream=fake_upstream,
        script=SCRIPT,
        executable=claude_cli,
    )
    assert run.returncode == 0 and run.session_file is not None, run.describe()

    # compact it and write it back in Claude Code's format, into a fresh HOME's project folder
    second = Sandbox.create(tmp_path / "second")
    # Claude Code names a project's folder after its cwd, every non-alphanumeric made "-"
    slug = re.sub(r"[^A-Za-z0-9]", "-", str(second.workspace))
    project = second.home / ".claude" / "projects" / slug
    project.mkdir(parents=True)
    target = project / f"{run.session_id}.jsonl"
    result = CliRunner().invoke(
        CLI, ["run", str(run.session_file), "-s", MASK, "--to", "claude-code", "-o", str(target)]
    )
    assert result.exit_code == 0, result.stderr
    compacted = compactkit.load_one(target)
    original = compactkit.load_one(run.session_file)
    outputs = [r.text for m in original.messages for r in m.tool_results]
    masked = [r.text for m in compacted.messages for r in m.tool_results]
    assert "2999" in outputs[1] and "2999" not in masked[1]  # the long output was masked

    resumed = run_claude(
        "How many lines does f.txt have?",
        second,
        upstream=fake_upstream,
        script=[answer("3000 lines.")],
        resume=run.session_id,
        executable=claude_cli,
    )
    assert resumed.returncode == 0, resumed.describe()
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
    assert ("text", "How many lines does f.txt have?") in new_turn[-1][1]
