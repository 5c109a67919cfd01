"""mini-swe-agent .traj.json: every corpus trajectory, the bundled sample, a v2 tool-call file."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from compactkit import load
from compactkit.errors import BadInputError
from compactkit.formats.base import read_document
from compactkit.formats.loading import detect_format
from tests.conftest import corpus_files, sample
from tests.formats._checks import load_single, pairing_problems, raw_json

FILES = [p for p in corpus_files() if p.name.endswith(".traj.json")]
BASH = re.compile(r"```bash\s*\n(.*?)\n```", re.DOTALL)


@pytest.fixture(scope="module", params=FILES, ids=[p.name for p in FILES])
def loaded(request: pytest.FixtureRequest) -> tuple[dict[str, Any], Any]:
    path: Path = request.param
    return raw_json(path), load_single(path)


def test_corpus_has_the_files() -> None:
    assert FILES, "no mini-swe-agent trajectory found (corpus or bundled sample)"


def test_detected_and_paired(loaded: tuple[dict[str, Any], Any]) -> None:
    raw, ctx = loaded
    assert ctx.metadata["source_format"] == "mini-swe-agent"
    assert ctx.metadata["instance_id"] == raw["instance_id"]
    assert ctx.metadata["exit_status"] == raw["info"]["exit_status"]
    assert pairing_problems(ctx) == []
    assert "synthesized_results" not in ctx.metadata


def test_prompt_and_task_kept(loaded: tuple[dict[str, Any], Any]) -> None:
    raw, ctx = loaded
    assert ctx.system_instruction == raw["messages"][0]["content"]
    assert ctx.messages[0].role == "user"
    assert ctx.task == raw["messages"][1]["content"]


def test_one_call_and_one_result_per_model_step(loaded: tuple[dict[str, Any], Any]) -> None:
    raw, ctx = loaded
    replies = [m for m in raw["messages"] if m["role"] == "assistant"]
    answers = [m for m in raw["messages"][2:] if m["role"] == "user"]
    calls = [c for m in ctx.messages for c in m.tool_calls]
    results = [r for m in ctx.messages for r in m.tool_results]
    assert len(calls) == len(replies) == raw["info"]["model_stats"]["api_calls"]
    assert len(results) == len(answers)
    # the commands are the single bash blocks of the replies; the others were rejected
    valid = [BASH.findall(m["content"]) for m in replies]
    assert [c.input.get("command") for c in calls] == [
        b[0].strip() if len(b) == 1 else None for b in valid
    ]
    rejected = [c.input["rejected_actions"] for c in calls if "rejected_actions" in c.input]
    assert rejected == [[x.strip() for x in b] for b in valid if len(b) != 1]
    # every observation is kept verbatim, in order
    assert [r.text for r in results] == [m["content"] for m in answers]


def test_errors_follow_return_codes_and_format_errors(loaded: tuple[dict[str, Any], Any]) -> None:
    raw, ctx = loaded
    expected = []
    for m in raw["messages"][2:]:
        if m["role"] != "user":
            continue
        code = re.match(r"<returncode>(-?\d+)</returncode>", m["content"])
        expected.append(
            int(code.group(1)) != 0 if code else m["content"].startswith("Please always provide")
        )
    results = [r for m in ctx.messages for r in m.tool_results]
    assert [r.is_error for r in results] == expected
    assert any(expected) and not all(expected)
    assert ctx.messages[-1].metadata.get("exit_status") == "Submitted"
    assert ctx.messages[-1].tool_results[0].text == raw["info"]["submission"]


def test_reasoning_and_usage_kept(loaded: tuple[dict[str, Any], Any]) -> None:
    raw, ctx = loaded
    replies = [m for m in raw["messages"] if m["role"] == "assistant"]
    assistants = [m for m in ctx.messages if m.role == "assistant"]
    assert len(assistants) == len(replies)
    with_reasoning = 0
    for got, rec in zip(assistants, replies, strict=True):
        api = rec["extra"]["response"]["choices"][0]["message"]
        thinking = [b for b in got.content if b.type == "thinking"]
        if api.get("reasoning"):
            with_reasoning += 1
            assert [b.thinking for b in thinking] == [api["reasoning"]]
            assert got.content[0].type == "thinking"  # before the text and the call
            assert thinking[0].signature  # the encrypted reasoning is kept, not shown
        else:
            assert thinking == []
        assert got.text == rec["content"]
        assert got.content[-1].type == "tool_call"
        assert got.metadata["usage"] == rec["extra"]["response"]["usage"]
        assert got.metadata["id"] == rec["extra"]["response"]["id"]
        assert got.metadata["model"] == rec["extra"]["response"]["model"]
    assert with_reasoning >= 1


def test_bundled_sample() -> None:
    path = sample("sphinx-doc__sphinx-9229.traj.json")
    assert detect_format(read_document(path)).name == "mini-swe-agent"
    ctx = load(path)[0]
    assert pairing_problems(ctx) == []
    first = ctx.messages[1]
    assert first.tool_calls[0].input == {"command": "ls -la"}
    assert ctx.messages[2].tool_results[0].text.startswith("<returncode>0</returncode>")
    format_errors = [m for m in ctx.messages if m.metadata.get("format_error")]
    assert len(format_errors) == 10
    assert all(m.tool_results[0].is_error for m in format_errors)
    assert ctx.metadata["model"] == "google/gemini-3-pro-preview"
    assert ctx.metadata["model_stats"] == {"instance_cost": 2.0561628, "api_calls": 142}
    assert ctx.messages[1].metadata["timestamp"].endswith("Z")


def test_truncated_file_is_bad_input(tmp_path: Path) -> None:
    text = sample("sphinx-doc__sphinx-9229.traj.json").read_text(encoding="utf-8")
    broken = tmp_path / "cut.traj.json"
    broken.write_text(text[: len(text) // 2], encoding="utf-8")
    with pytest.raises(BadInputError):
        load(broken)


def test_other_json_is_refused(tmp_path: Path) -> None:
    other = tmp_path / "other.json"
    other.write_text(json.dumps({"messages": [{"role": "user", "content": "hi"}]}))
    with pytest.raises(BadInputError, match="not a mini-swe-agent trajectory"):
        load(other, format="mini-swe-agent")
    odd = tmp_path / "odd.traj.json"
    odd.write_text(json.dumps({"trajectory_format": "mini-swe-agent-1", "messages": [1]}))
    with pytest.raises(BadInputError, match="message 0"):
        load(odd)


def test_v2_tool_calls_and_unanswered_call(tmp_path: Path) -> None:
    """mini-swe-agent 2 files (tool calling): recorded ids, tool results, the exit message."""
    data = {
        "trajectory_format": "mini-swe-agent-1.1",
        "info": {"exit_status": "Submitted", "mini_version": "2.0.0"},
        "messages": [
            {"role": "system", "content": "sys"},
            {"role": "user", "content": "task"},
            {
                "role": "assistant",
                "content": "look",
                "tool_calls": [
                    {
                        "id": "t1",
                        "type": "function",
                        "function": {"name": "bash", "arguments": '{"command": "ls"}'},
                    },
                    {
                        "id": "t2",
                        "type": "function",
                        "function": {"name": "bash", "arguments": '{"command": "pwd"}'},
                    },
                ],
                "extra": {"timestamp": 1700000000.5},
            },
            {"role": "tool", "tool_call_id": "t1", "content": "a b", "extra": {"returncode": 0}},
            {
                "role": "assistant",
                "content": "done",
                "tool_calls": [{"id": "t3", "function": {"name": "bash", "arguments": "{}"}}],
            },
            {"role": "exit", "content": "patch", "extra": {"exit_status": "Submitted"}},
        ],
    }
    path = tmp_path / "v2.traj.json"
    path.write_text(json.dumps(data))
    ctx = load(path)[0]
    assert pairing_problems(ctx) == []
    assert [c.id for m in ctx.messages for c in m.tool_calls] == ["t1", "t2", "t3"]
    synthesized = [m for m in ctx.messages if m.metadata.get("synthesized")]
    assert [r.tool_call_id for m in synthesized for r in m.tool_results] == ["t2"]
    assert ctx.metadata["synthesized_results"] == 1
    last = ctx.messages[-1]
    assert last.tool_results[0].tool_call_id == "t3"
    assert last.tool_results[0].text == "patch"
    assert last.metadata["exit_status"] == "Submitted"
    assert ctx.messages[1].metadata["timestamp"].startswith("2023-11-14T22:13:20")


# --------------------------------------------------------------------------- user input, by schema


def _write(tmp_path: Path, data: dict[str, Any]) -> Any:
    path = tmp_path / "run.traj.json"
    path.write_text(json.dumps(data), encoding="utf-8")
    return load_single(path)


def test_corpus_task_is_the_one_human_message(loaded: tuple[dict[str, Any], Any]) -> None:
    raw, ctx = loaded
    humans = [m for m in ctx.messages if m.is_human]
    assert [m.text for m in humans] == [raw["messages"][1]["content"]]
    assert ctx.first_user_index == ctx.messages.index(humans[0])


def test_v1_interactive_user_words_are_user_messages(tmp_path: Path) -> None:
    """v1 (`mini-swe-agent-1`): the interactive agent adds what the user typed as user text."""
    messages = [
        {"role": "system", "content": "You are a helpful assistant."},
        {"role": "user", "content": "<pr_description>Fix it</pr_description>"},
        {"role": "assistant", "content": "THOUGHT: look\n\n```bash\nls\n```"},
        {"role": "user", "content": "<returncode>0</returncode>\n<output>\na.py\n</output>"},
        {"role": "assistant", "content": "THOUGHT: delete\n\n```bash\nrm -rf /\n```"},
        {
            "role": "user",
            "content": "Command not executed. The user rejected your command with the following "
            "message: never delete anything",
        },
        {"role": "user", "content": "User command: \n```bash\ngit diff\n```"},
        {"role": "user", "content": "<returncode>0</returncode>\n<output>\n</output>"},
        {"role": "assistant", "content": "THOUGHT: done\n\n```bash\necho COMPLETE_TASK\n```"},
        {"role": "user", "content": "Interrupted by user: also update the README"},
        {
            "role": "user",
            "content": "<conversation_summary>\nS\n</conversation_summary>\nContinue.",
        },
        {"role": "user", "content": "The user added a new task: write docs"},
        {"role": "user", "content": ""},
    ]
    ctx = _write(
        tmp_path,
        {
            "trajectory_format": "mini-swe-agent-1",
            "info": {"exit_status": "Submitted"},
            "messages": messages,
        },
    )
    assert [m.text for m in ctx.messages if m.is_human] == [
        "<pr_description>Fix it</pr_description>",
        messages[5]["content"],
        "User command: \n```bash\ngit diff\n```",
        "Interrupted by user: also update the README",
        "The user added a new task: write docs",
    ]
    non_human = [(m.origin, m.text) for m in ctx.messages if m.role == "user" and not m.is_human]
    assert non_human == [
        ("tool-output", "<returncode>0</returncode>\n<output>\n</output>"),
        ("summary", messages[10]["content"]),
    ]
    # the rejected and the interrupted calls never ran: closed as unanswered, not answered by
    # the user's words
    assert ctx.metadata["synthesized_results"] == 2
    assert ctx.metadata["skipped_records"] == {"user/empty": 1}
    assert pairing_problems(ctx) == []


def test_v2_interrupts_format_errors_and_exit(tmp_path: Path) -> None:
    """v2 (`mini-swe-agent-1.1`): `extra.interrupt_type` marks interruptions; format errors
    answer the step; `exit` ends the run."""
    messages = [
        {"role": "system", "content": "sys"},
        {"role": "user", "content": "Solve the issue"},
        {"role": "assistant", "content": "no action here", "extra": {"actions": []}},
        {
            "role": "user",
            "content": "Format error: expected exactly 1 action, found 0.",
            "extra": {"interrupt_type": "FormatError", "n_actions": 0},
        },
        {
            "role": "assistant",
            "content": "```mswea_bash_command\nmake\n```",
            "extra": {"actions": [{"command": "make"}]},
        },
        {
            "role": "user",
            "content": "Commands not executed. The user rejected your commands with the "
            "following message: run the tests instead",
            "extra": {"interrupt_type": "UserRejection"},
        },
        {
            "role": "user",
            "content": "Commands not executed. Switching to human mode",
            "extra": {"interrupt_type": "UserRejection"},
        },
        {"role": "exit", "content": "", "extra": {"exit_status": "Submitted", "submission": ""}},
    ]
    ctx = _write(
        tmp_path, {"trajectory_format": "mini-swe-agent-1.1", "info": {}, "messages": messages}
    )
    assert [m.text for m in ctx.messages if m.is_human] == [
        "Solve the issue",
        messages[5]["content"],
    ]
    format_error = next(m for m in ctx.messages if m.metadata.get("format_error"))
    assert format_error.role == "tool" and format_error.tool_results[0].is_error
    assert [(m.origin, m.text) for m in ctx.messages if m.origin] == [
        ("harness", "Commands not executed. Switching to human mode")
    ]
    assert ctx.metadata["skipped_records"] == {"exit": 1}
    assert pairing_problems(ctx) == []
