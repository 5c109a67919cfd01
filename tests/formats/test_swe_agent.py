"""SWE-agent .traj: the corpus trajectories, the bundled sample, a 1.x function-calling run."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from compactkit import load
from compactkit.errors import BadInputError
from compactkit.formats.base import read_document
from compactkit.formats.loading import detect_format
from tests.conftest import corpus_files, sample
from tests.formats._checks import load_single, pairing_problems, raw_json

FILES = [p for p in corpus_files() if p.suffix == ".traj"]


@pytest.fixture(scope="module", params=FILES, ids=[p.name for p in FILES])
def loaded(request: pytest.FixtureRequest) -> tuple[dict[str, Any], Any]:
    path: Path = request.param
    return raw_json(path), load_single(path)


def test_corpus_has_the_files() -> None:
    assert FILES, "no SWE-agent trajectory found (corpus or bundled sample)"


def test_detected_and_paired(loaded: tuple[dict[str, Any], Any]) -> None:
    raw, ctx = loaded
    assert ctx.metadata["source_format"] == "swe-agent"
    assert ctx.metadata["exit_status"] == raw["info"]["exit_status"]
    assert ctx.metadata["trajectory_steps"] == len(raw["trajectory"])
    assert pairing_problems(ctx) == []
    assert "synthesized_results" not in ctx.metadata


def test_built_from_history_only(loaded: tuple[dict[str, Any], Any]) -> None:
    """One context message per history message after the system prompt: steps are not repeated."""
    raw, ctx = loaded
    history = raw["history"]
    assert ctx.system_instruction == history[0]["content"]
    assert len(ctx.messages) == len(history) - 1
    assert [m.role for m in ctx.messages] == [
        "tool" if h["role"] == "user" and history[i]["role"] == "assistant" else h["role"]
        for i, h in enumerate(history[1:])
    ]
    texts = [m.text or "\n".join(r.text for r in m.tool_results) for m in ctx.messages]
    assert texts == [h["content"] for h in history[1:]]


def test_task_and_demonstrations(loaded: tuple[dict[str, Any], Any]) -> None:
    raw, ctx = loaded
    demos = [h for h in raw["history"] if h.get("is_demo")]
    marked = [m for m in ctx.messages if m.metadata.get("is_demo")]
    assert [m.text for m in marked] == [h["content"] for h in demos]
    assert all(m.role == "user" and m.metadata["message_type"] == "demonstration" for m in marked)
    assert ctx.metadata["demonstration_messages"] == len(demos)
    task = next(h for h in raw["history"][1:] if h["role"] == "user" and not h.get("is_demo"))
    first_task = next(m for m in ctx.messages if m.role == "user" and not m.metadata)
    assert first_task.text == task["content"]


def test_calls_and_results_match_the_history(loaded: tuple[dict[str, Any], Any]) -> None:
    raw, ctx = loaded
    history = raw["history"]
    actions = [h["action"] for h in history if h["role"] == "assistant" and h.get("action")]
    observations = [
        h
        for i, h in enumerate(history)
        if h["role"] == "user" and history[i - 1]["role"] == "assistant"
    ]
    calls = [c for m in ctx.messages for c in m.tool_calls]
    results = [r for m in ctx.messages for r in m.tool_results]
    assert [c.input["command"] for c in calls] == actions
    assert len(results) == len(observations)
    assert [r.text for r in results] == [h["content"] for h in observations]
    assert not any(r.is_error for r in results)
    # 0.x runs record no observation for the final submit: that call stays pending at the end
    assert history[-1]["role"] == "assistant"
    assert ctx.messages[-1].tool_calls[-1].name == "submit"
    assert len(calls) == len(results) + 1
    # the thought is part of the text already: no thinking block repeats it
    assert not any(b.type == "thinking" for _, _, b in ctx.iter_blocks())


def test_bundled_sample() -> None:
    path = sample("test-repo-i1.traj")
    assert detect_format(read_document(path)).name == "swe-agent"
    ctx = load(path)[0]
    names = [c.name for m in ctx.messages for c in m.tool_calls]
    assert names == ["find_file", "open", "edit", "bash", "submit"]
    assert ctx.messages[2].tool_calls[0].input == {"command": 'find_file "missing_colon.py"\n'}
    assert ctx.messages[3].tool_results[0].text.startswith('Found 1 matches for "missing_colon.py"')
    assert ctx.messages[0].metadata == {
        "is_demo": True,
        "message_type": "demonstration",
        "origin": "demonstration",
    }
    assert ctx.metadata["model_stats"]["api_calls"] == 5
    assert ctx.metadata["cwd"] == "/klieret__swe-agent-test-repo"


def test_truncated_file_is_bad_input(tmp_path: Path) -> None:
    text = sample("test-repo-i1.traj").read_text(encoding="utf-8")
    broken = tmp_path / "cut.traj"
    broken.write_text(text[: len(text) // 3], encoding="utf-8")
    with pytest.raises(BadInputError):
        load(broken)
    other = tmp_path / "other.json"
    other.write_text(json.dumps({"history": [{"role": "user", "content": "x"}]}))
    with pytest.raises(BadInputError, match="not a SWE-agent trajectory"):
        load(other, format="swe-agent")


def _fc_run(answer: str) -> dict[str, Any]:
    """A SWE-agent 1.x function-calling attempt with demonstrations put into the history."""
    call = {
        "id": "toolu_1",
        "type": "function",
        "function": {"name": "bash", "arguments": '{"command": "ls"}'},
    }
    return {
        "environment": "main",
        "replay_config": json.dumps(
            {"agent": {"model": {"name": "claude-x"}}, "problem_statement": {"id": "repo-1"}}
        ),
        "info": {"exit_status": "submitted", "submission": "diff"},
        "trajectory": [
            {
                "action": "ls",
                "observation": answer,
                "state": {"working_dir": "/r"},
                "query": [{"role": "system", "content": "sys"}],
            }
        ],
        "history": [
            {"role": "system", "content": "sys", "agent": "main", "message_type": "system_prompt"},
            {
                "role": "user",
                "content": "demo task",
                "agent": "main",
                "is_demo": True,
                "message_type": "observation",
            },
            {
                "role": "assistant",
                "content": "demo step",
                "agent": "main",
                "is_demo": True,
                "message_type": "action",
                "action": "ls",
                "tool_calls": [call],
            },
            {
                "role": "tool",
                "content": "demo out",
                "agent": "main",
                "is_demo": True,
                "message_type": "observation",
                "tool_call_ids": ["toolu_1"],
            },
            {
                "role": "user",
                "content": [{"type": "text", "text": "real task"}],
                "agent": "main",
                "message_type": "observation",
            },
            {
                "role": "assistant",
                "content": "let me look",
                "agent": "main",
                "message_type": "action",
                "action": "ls",
                "tool_calls": [call],
                "thinking_blocks": [{"type": "thinking", "thinking": "hmm", "signature": "sig"}],
            },
            {
                "role": "tool",
                "content": [{"type": "text", "text": answer}],
                "agent": "main",
                "message_type": "observation",
                "tool_call_ids": ["toolu_1"],
            },
        ],
    }


def test_function_calling_retry_run(tmp_path: Path) -> None:
    first, second = _fc_run("a"), _fc_run("b")
    data = {
        **second,
        "attempts": [first, second],
        "info": {**second["info"], "best_attempt_idx": 1},
    }
    path = tmp_path / "retry.traj"
    path.write_text(json.dumps(data))
    contexts = load(path)
    assert [c.metadata["conversation"] for c in contexts] == [0, 1]
    assert contexts[1].metadata["best_attempt"] is True
    ctx = contexts[0]
    assert pairing_problems(ctx) == []
    assert ctx.metadata["model"] == "claude-x"
    assert ctx.metadata["instance_id"] == "repo-1"
    demo_call, real_call = (c for m in ctx.messages for c in m.tool_calls)
    assert demo_call.id == "toolu_1" and real_call.id == "toolu_1_2"  # recorded id reused
    assert real_call.input == {"command": "ls"}
    real_result = ctx.messages[-1].tool_results[0]
    assert (real_result.tool_call_id, real_result.text) == ("toolu_1_2", "a")
    assert ctx.messages[1].metadata == {"is_demo": True, "message_type": "action"}
    assistant = ctx.messages[4]
    assert [b.type for b in assistant.content] == ["thinking", "text", "tool_call"]
    assert len(ctx.messages) == 6


# --------------------------------------------------------------------------- user input, by schema


def test_corpus_task_is_the_one_human_message(loaded: tuple[dict[str, Any], Any]) -> None:
    raw, ctx = loaded
    history = (raw.get("attempts") or [raw])[0]["history"]
    task = next(m for m in history if m["role"] == "user" and not m.get("is_demo"))
    humans = [m for m in ctx.messages if m.is_human]
    assert len(humans) == 1 and humans[0].text == task["content"]
    assert all(
        m.origin == "demonstration"
        for m in ctx.messages
        if m.metadata.get("is_demo") and m.role == "user"
    )


def _traj(tmp_path: Path, history: list[dict[str, Any]]) -> Any:
    path = tmp_path / "run.traj"
    path.write_text(
        json.dumps({"environment": "swe_main", "trajectory": [], "history": history, "info": {}})
    )
    return load_single(path)


def test_v1_history_types(tmp_path: Path) -> None:
    """1.x `HistoryItem`s: message_type system_prompt / demonstration / observation / action;
    the instance template (an `observation` by type) is the task, with its image parts."""
    image = {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}}
    history = [
        {"role": "system", "content": "SYSTEM", "agent": "main", "message_type": "system_prompt"},
        {
            "role": "user",
            "content": "DEMO",
            "agent": "main",
            "is_demo": True,
            "message_type": "demonstration",
        },
        {
            "role": "user",
            "content": [{"type": "text", "text": "<issue>Plot is blank</issue>"}, image],
            "agent": "main",
            "message_type": "observation",
        },
        {
            "role": "assistant",
            "content": "I will wait.",
            "thought": "I will wait.",
            "action": "",
            "agent": "main",
            "message_type": "action",
        },
        {
            "role": "user",
            "content": "Your command ran successfully and did not produce any output.",
            "agent": "main",
            "message_type": "observation",
        },
        {
            "role": "assistant",
            "content": "ls",
            "thought": "",
            "action": "ls\n",
            "agent": "main",
            "message_type": "action",
        },
        {"role": "user", "content": "a.py", "agent": "main", "message_type": "observation"},
    ]
    ctx = _traj(tmp_path, history)
    humans = [m for m in ctx.messages if m.is_human]
    assert [m.text for m in humans] == ["<issue>Plot is blank</issue>"]
    assert [b.type for b in humans[0].content] == ["text", "image"]
    assert [(m.origin, m.text) for m in ctx.messages if m.role == "user" and not m.is_human] == [
        ("demonstration", "DEMO"),
        ("tool-output", "Your command ran successfully and did not produce any output."),
    ]
    assert ctx.messages[-1].tool_results[0].text == "a.py"
    assert ctx.task == "<issue>Plot is blank</issue>"


def test_v0_history_without_message_types(tmp_path: Path) -> None:
    """0.x history items: role / content / agent / is_demo only."""
    history = [
        {"role": "system", "content": "SETTING", "agent": "primary"},
        {"role": "user", "content": "Here is a demonstration", "agent": "primary", "is_demo": True},
        {"role": "user", "content": "ISSUE: crash", "agent": "primary"},
        {
            "role": "assistant",
            "content": "DISCUSSION\n```\nls\n```",
            "thought": "DISCUSSION",
            "action": "ls\n",
            "agent": "primary",
        },
        {"role": "user", "content": "a.py\n(Open file: n/a)", "agent": "primary"},
    ]
    ctx = _traj(tmp_path, history)
    assert [m.text for m in ctx.messages if m.is_human] == ["ISSUE: crash"]
    assert [m.origin for m in ctx.messages if m.role == "user"] == ["demonstration", None]
    assert "skipped_records" not in ctx.metadata
