"""The openhands-events adapter on real OpenHands event streams and eval outputs."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

import compactkit
from compactkit.context import TextBlock
from compactkit.errors import BadInputError
from compactkit.recovery import expand
from tests.conftest import corpus_file, corpus_files, sample
from tests.formats._checks import pairing_problems

NOT_CALLS = {"message", "system", "recall", "change_agent_state", "null"}


def event_files() -> list[Path]:
    files = [p for p in corpus_files() if p.parent.name == "openhands_events"]
    return files or [sample("runtime_trajs_basic"), sample("resolver_mock_output")]


def raw_runs(path: Path) -> list[dict[str, Any]]:
    """Each conversation's raw record: {"history": [...]} plus the run's keys."""
    text = path.read_text(encoding="utf-8")
    if path.suffix == ".json":
        return [{"history": json.loads(text)}]
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def expected_counts(history: list[dict[str, Any]]) -> tuple[int, int, int]:
    """(tool calls, tool results, observations shown as user text), counted from the raw events."""
    legacy = not any("id" in e for e in history)
    actions = [e for e in history if "action" in e]
    observations = [e for e in history if "observation" in e]
    calls = [
        e
        for e in actions
        if e["action"] not in NOT_CALLS
        and (e.get("tool_call_metadata") or e["action"] not in ("think", "finish"))
    ]
    if legacy:
        return len(calls), len(observations), 0
    call_ids = {e["id"] for e in calls}
    answering = [
        o
        for o in observations
        if o.get("cause") in call_ids or (o.get("tool_call_metadata") or {}).get("tool_call_id")
    ]
    unpaired = [
        o for o in observations if o not in answering and o["observation"] not in ("recall",)
    ]
    return len(calls), len(answering), len(unpaired)


@pytest.mark.corpus
@pytest.mark.parametrize("path", event_files(), ids=lambda p: p.name)
def test_events_load_with_paired_calls(path: Path) -> None:
    contexts = compactkit.load(path)
    runs = raw_runs(path)
    assert len(contexts) == len(runs)
    for number, (ctx, run) in enumerate(zip(contexts, runs, strict=True)):
        assert ctx.metadata["source_format"] == "openhands-events"
        if path.suffix == ".jsonl":
            assert ctx.metadata["conversation"] == number
        assert pairing_problems(ctx) == []
        calls = [c for m in ctx.messages for c in m.tool_calls]
        results = [r for m in ctx.messages for r in m.tool_results]
        n_calls, n_results, n_unpaired = expected_counts(run["history"])
        assert len(calls) == n_calls
        assert len(results) == n_results
        assert ctx.metadata.get("unpaired_observations", 0) == n_unpaired
        assert "synthesized_results" not in ctx.metadata
        # the ids the format records are kept
        recorded = [
            e["tool_call_metadata"]["tool_call_id"]
            for e in run["history"]
            if "action" in e and e.get("tool_call_metadata")
        ]
        assert [c.id for c in calls if c.id in set(recorded)] == recorded


@pytest.mark.corpus
@pytest.mark.parametrize("path", event_files(), ids=lambda p: p.name)
def test_events_system_prompt_and_task(path: Path) -> None:
    for ctx, run in zip(compactkit.load(path), raw_runs(path), strict=True):
        history = run["history"]
        system = [e for e in history if e.get("action") == "system"]
        if system:
            assert ctx.system_instruction == system[0]["args"]["content"]
            assert all(m.role != "system" for m in ctx.messages)
        first_message = next(e for e in history if e.get("action") == "message")
        content = first_message.get("args", first_message)["content"]
        assert ctx.task == content
        if "instruction" in run:
            assert ctx.task == run["instruction"]
        if "instance_id" in run:
            assert ctx.metadata["instance_id"] == run["instance_id"]


def test_eval_output_rebuilds_model_responses() -> None:
    path = corpus_file("multi_swe_bench_example_output")
    contexts = compactkit.load(path)
    runs = raw_runs(path)
    ctx, run = contexts[2], runs[2]
    assert ctx.metadata["model"] == run["metadata"]["llm_config"]["model"]
    assert ctx.metadata["error"] == run["error"]
    first = next(e for e in run["history"] if e.get("tool_call_metadata"))
    response = first["tool_call_metadata"]["model_response"]
    message = response["choices"][0]["message"]
    msg = next(m for m in ctx.messages if m.tool_calls)
    assert msg.text == message["content"]
    assert msg.metadata["usage"] == response["usage"]
    call = msg.tool_calls[0]
    assert call.id == message["tool_calls"][0]["id"]
    assert call.name == message["tool_calls"][0]["function"]["name"]
    assert call.input == json.loads(message["tool_calls"][0]["function"]["arguments"])
    # a command result shows what the agent saw: the output and the exit-code suffix
    result = ctx.messages[ctx.messages.index(msg) + 1].tool_results[0]
    obs = next(e for e in run["history"] if e.get("cause") == first["id"])
    assert result.text == obs["content"] + obs["extras"]["metadata"]["suffix"]
    # `think` calls stay tool calls paired with their "thought logged" observation
    think = [c for m in ctx.messages for c in m.tool_calls if c.name == "think"]
    assert think and all(isinstance(c.input, dict) and c.input["thought"] for c in think)
    # an error observation that answers no call is what the agent was shown as user text
    errors = [m for m in ctx.messages if m.metadata.get("observation") == "error"]
    assert errors and errors[0].role == "user" and "Parameter 'command'" in errors[0].text
    recall = next(m for m in ctx.messages if m.metadata.get("observation") == "recall")
    assert recall.role == "user" and "Added workspace context" in recall.text


def test_bundled_event_list() -> None:
    path = sample("runtime_trajs_basic")
    events = json.loads(path.read_text(encoding="utf-8"))
    ctx = compactkit.load_one(path)
    assert pairing_problems(ctx) == []
    assert [m.role for m in ctx.messages] == ["user", "assistant", "tool", "assistant"]
    assert ctx.task == events[0]["args"]["content"]
    edit = ctx.messages[1].tool_calls[0]
    assert (edit.id, edit.name) == ("toolu_017nBp7UfiGqyrA7j77HgtFP", "str_replace_editor")
    assert isinstance(edit.input, dict) and edit.input["command"] == "create"
    assert ctx.messages[2].tool_results[0].text == events[2]["content"]
    # the run ends on the finish call, left pending
    assert ctx.messages[3].tool_calls[0].name == "finish"
    assert ctx.messages[3].text == events[3]["args"]["thought"]
    assert ctx.metadata["model"] == "claude-3-5-sonnet-20241022"


def test_bundled_legacy_output_pairs_in_order() -> None:
    path = sample("resolver_mock_output")
    rows = raw_runs(path)
    contexts = compactkit.load(path)
    assert [c.metadata["title"] for c in contexts] == [r["issue"]["title"] for r in rows]
    ctx, history = contexts[0], rows[0]["history"]
    assert pairing_problems(ctx) == []
    assert ctx.metadata["issue"] == "neubig/pr-viewer#5"
    first = ctx.messages[1]
    assert first.text == history[1]["thought"]
    assert first.tool_calls[0].name == "run"
    assert first.tool_calls[0].input == {"command": "touch LICENSE"}
    assert ctx.messages[2].tool_results[0].text == history[2]["content"]
    assert ctx.messages[-1].role == "assistant"
    assert ctx.messages[-1].text == history[-1]["thought"]


def test_truncated_output_is_bad_input(tmp_path: Path) -> None:
    text = sample("resolver_mock_output").read_text(encoding="utf-8")
    broken = tmp_path / "output.jsonl"
    broken.write_text(text[: len(text) // 2], encoding="utf-8")
    with pytest.raises(BadInputError):
        compactkit.load(broken)


def test_chat_messages_are_not_events(tmp_path: Path) -> None:
    other = tmp_path / "chat.json"
    other.write_text(json.dumps([{"role": "user", "content": "hi", "action": "x"}]))
    with pytest.raises(BadInputError):
        compactkit.load(other, format="openhands-events")


def test_parallel_calls_share_one_message_and_errors_stay_errors(tmp_path: Path) -> None:
    """Two actions of one model response, answered in turn; a call answered by an error."""
    import copy

    events = json.loads(sample("runtime_trajs_basic").read_text(encoding="utf-8"))
    user, edit, edited, finish = events
    second, second_obs = copy.deepcopy(edit), copy.deepcopy(edited)
    response = edit["tool_call_metadata"]["model_response"]
    extra_call = copy.deepcopy(response["choices"][0]["message"]["tool_calls"][0])
    extra_call["id"] = "toolu_second"
    extra_call["function"]["arguments"] = json.dumps({"command": "view", "path": "/workspace"})
    for event in (edit, edited, second, second_obs):
        message = event["tool_call_metadata"]["model_response"]["choices"][0]["message"]
        message["tool_calls"] = [message["tool_calls"][0], extra_call]
        event["tool_call_metadata"]["total_calls_in_response"] = 2
    second["id"], second_obs["id"], second_obs["cause"] = 10, 11, 10
    second["tool_call_metadata"]["tool_call_id"] = "toolu_second"
    second_obs["tool_call_metadata"]["tool_call_id"] = "toolu_second"
    second_obs["observation"], second_obs["content"] = "error", "Invalid path"
    run = {"id": 12, "source": "agent", "action": "run", "args": {"command": "ls", "thought": "t"}}
    failed = {"id": 13, "source": "agent", "observation": "error", "cause": 12, "content": "boom"}
    path = tmp_path / "events.json"
    path.write_text(json.dumps([user, edit, edited, second, second_obs, run, failed, finish]))

    ctx = compactkit.load_one(path)
    assert pairing_problems(ctx) == []
    assert [m.role for m in ctx.messages] == [
        "user",
        "assistant",
        "tool",
        "assistant",
        "tool",
        "assistant",
    ]
    assert [c.id for c in ctx.messages[1].tool_calls] == [
        "toolu_017nBp7UfiGqyrA7j77HgtFP",
        "toolu_second",
    ]
    assert ctx.messages[1].tool_calls[1].input == {"command": "view", "path": "/workspace"}
    results = ctx.messages[2].tool_results
    assert [(r.tool_call_id, r.is_error) for r in results] == [
        ("toolu_017nBp7UfiGqyrA7j77HgtFP", False),
        ("toolu_second", True),
    ]
    # an action without tool metadata: call_{event id}, its thought as text, paired by cause
    plain = ctx.messages[3]
    assert plain.text == "t"
    assert (plain.tool_calls[0].id, plain.tool_calls[0].name) == ("call_12", "run")
    assert plain.tool_calls[0].input == {"command": "ls"}
    assert ctx.messages[4].tool_results[0].is_error
    assert ctx.messages[4].tool_results[0].text == "boom"


# --------------------------------------------------------------------------- user input, by schema


def _v0(event_id: int, source: str, **fields: Any) -> dict[str, Any]:
    """A V0 event as `event_to_dict` writes it (openhands/events/serialization/event.py)."""
    return {"id": event_id, "timestamp": "2025-05-01T10:00:00", "source": source, **fields}


def _load_events(tmp_path: Path, events: Any, name: str = "events.json") -> compactkit.AgentContext:
    path = tmp_path / name
    path.write_text(json.dumps(events), encoding="utf-8")
    return compactkit.load_one(path)


def _human_texts(ctx: compactkit.AgentContext) -> list[str]:
    return [m.text for m in ctx.messages if m.is_human]


def test_v0_user_input_each_once_and_harness_turns_marked(tmp_path: Path) -> None:
    tcm = {"tool_call_id": "toolu_1", "function_name": "execute_bash", "model_response": {}}
    events = [
        _v0(0, "agent", action="system", args={"content": "You are OpenHands.", "tools": []}),
        _v0(
            1,
            "user",
            action="message",
            args={
                "content": "Fix the login bug",
                "image_urls": ["data:image/png;base64,iVBORw0KGgo=", "https://x.test/a.png"],
                "file_urls": ["/workspace/uploads/log.txt"],
                "wait_for_response": False,
            },
        ),
        _v0(2, "user", action="recall", args={"recall_type": "workspace_context", "query": "Fix"}),
        _v0(
            3,
            "environment",
            observation="recall",
            cause=2,
            content="Added workspace context",
            extras={"recall_type": "workspace_context", "repo_name": "acme/app"},
        ),
        _v0(
            4, "agent", action="run", args={"command": "ls", "thought": ""}, tool_call_metadata=tcm
        ),
        _v0(5, "agent", observation="run", cause=4, content="app.py", tool_call_metadata=tcm),
        _v0(
            6,
            "environment",
            action="change_agent_state",
            args={"agent_state": "awaiting_user_input"},
        ),
        _v0(7, "environment", observation="agent_state_changed", content="", extras={}),
        _v0(8, "user", action="run", args={"command": "git status"}),
        _v0(9, "user", observation="run", cause=8, content="nothing to commit"),
        _v0(10, "user", action="message", args={"content": "Also add a test, please"}),
        _v0(
            11,
            "agent",
            action="condensation",
            args={"forgotten_events_start_id": 4, "forgotten_events_end_id": 5, "summary": "S1"},
        ),
        _v0(12, "environment", observation="condense", content="S1"),
        _v0(13, "agent", action="condensation", args={"forgotten_event_ids": [6, 7]}),
        _v0(
            14,
            "user",
            action="message",
            args={
                "content": "Please continue working on the task on whatever approach you think is suitable.\n"
            },
        ),
        _v0(15, "agent", action="null", args={}),
        _v0(16, "agent", observation="null", content=""),
    ]
    ctx = _load_events(tmp_path, events)
    assert _human_texts(ctx) == [
        "Fix the login bug",
        "User executed the command:\ngit status",
        "Also add a test, please",
    ]
    task = next(m for m in ctx.messages if m.is_human)
    images = [b for b in task.content if b.type == "image"]
    assert [(i.media_type, i.data, i.url) for i in images] == [
        ("image/png", "iVBORw0KGgo=", None),
        (None, None, "https://x.test/a.png"),
    ]
    assert task.metadata["file_urls"] == ["/workspace/uploads/log.txt"]
    origins = [(m.origin, m.text) for m in ctx.messages if m.role == "user" and not m.is_human]
    assert origins == [
        ("harness", "Added workspace context\nrepo_name: acme/app"),
        ("tool-output", "nothing to commit"),
        ("summary", "S1"),  # the condensation action and its observation: one summary
        (
            "harness",
            "Please continue working on the task on whatever approach you think is suitable.\n",
        ),
    ]
    summary = next(m for m in ctx.messages if m.origin == "summary")
    assert summary.content == (TextBlock(text="S1"),)
    assert summary.metadata["openhands_condensation"]["forgotten_events_start_id"] == 4
    assert ctx.metadata["skipped_records"] == {
        "action/change_agent_state": 1,
        "action/condensation": 1,
        "action/null": 1,
        "action/recall": 1,
        "observation/agent_state_changed": 1,
        "observation/null": 1,
    }
    assert pairing_problems(ctx) == []
    assert ctx.task == "Fix the login bug"


def test_v0_instruction_of_an_eval_row_when_the_history_has_no_user_message(
    tmp_path: Path,
) -> None:
    history = [
        _v0(1, "environment", observation="recall", content="Added workspace context", extras={}),
        _v0(2, "agent", action="finish", args={"final_thought": "done", "outputs": {}}),
    ]
    path = tmp_path / "output.jsonl"
    path.write_text(json.dumps({"instance_id": "x-1", "instruction": "Do X", "history": history}))
    (ctx,) = compactkit.load(path)
    assert _human_texts(ctx) == ["Do X"]
    assert [m.origin for m in ctx.messages if m.role == "user"] == [None, "harness"]


def _sdk(kind: str, source: str, event_id: str, **fields: Any) -> dict[str, Any]:
    """A software-agent-sdk event as pydantic dumps it (openhands-sdk/openhands/sdk/event/)."""
    return {
        "kind": kind,
        "id": event_id,
        "timestamp": "2025-10-01T09:00:00",
        "source": source,
        **fields,
    }


def _call(call_id: str, command: str) -> dict[str, Any]:
    return {
        "id": call_id,
        "name": "terminal",
        "arguments": json.dumps({"command": command}),
        "origin": "completion",
    }


SDK_EVENTS = [
    _sdk(
        "SystemPromptEvent",
        "agent",
        "e0",
        system_prompt={"type": "text", "text": "You are OpenHands agent."},
        tools=[{"kind": "TerminalTool", "name": "terminal", "description": "run"}],
        dynamic_context={"type": "text", "text": "Working dir: /ws"},
    ),
    _sdk(
        "MessageEvent",
        "user",
        "e1",
        llm_message={
            "role": "user",
            "content": [
                {"type": "text", "text": "Make the build green", "cache_prompt": False},
                {"type": "image", "image_urls": ["https://x.test/ci.png"]},
            ],
        },
        activated_skills=["github"],
        extended_content=[{"type": "text", "text": "<EXTRA_INFO>use gh</EXTRA_INFO>"}],
    ),
    _sdk(
        "ConversationStateUpdateEvent", "environment", "e2", key="execution_status", value="running"
    ),
    _sdk(
        "ActionEvent",
        "agent",
        "e3",
        thought=[{"type": "text", "text": "Run the tests."}],
        reasoning_content="think",
        tool_name="terminal",
        tool_call_id="call_a",
        tool_call=_call("call_a", "pytest"),
        llm_response_id="resp_1",
        action={"kind": "TerminalAction", "command": "pytest"},
    ),
    _sdk(
        "ActionEvent",
        "agent",
        "e4",
        thought=[],
        tool_name="terminal",
        tool_call_id="call_b",
        tool_call=_call("call_b", "ruff check"),
        llm_response_id="resp_1",
    ),
    _sdk(
        "ObservationEvent",
        "environment",
        "e5",
        tool_name="terminal",
        tool_call_id="call_a",
        action_id="e3",
        observation={
            "kind": "TerminalObservation",
            "content": [{"type": "text", "text": "1 failed"}],
            "is_error": True,
        },
    ),
    _sdk(
        "UserRejectObservation",
        "user",
        "e6",
        tool_name="terminal",
        tool_call_id="call_b",
        action_id="e4",
        rejection_reason="not now",
    ),
    _sdk("PauseEvent", "user", "e7"),
    _sdk(
        "MessageEvent",
        "user",
        "e8",
        llm_message={
            "role": "user",
            "content": [{"type": "text", "text": "Skip ruff, fix the test"}],
        },
    ),
    _sdk("CondensationRequest", "environment", "e9"),
    _sdk(
        "Condensation",
        "environment",
        "e10",
        forgotten_event_ids=["e3", "e4", "e5", "e6"],
        summary="USER_CONTEXT: make build green",
        summary_offset=1,
        llm_response_id="resp_c",
    ),
    _sdk(
        "AgentErrorEvent",
        "agent",
        "e11",
        tool_name="terminal",
        tool_call_id="call_x",
        error="unknown tool",
    ),
    _sdk(
        "MessageEvent",
        "agent",
        "e12",
        llm_message={"role": "assistant", "content": [{"type": "text", "text": "Fixed."}]},
        llm_response_id="resp_2",
    ),
    _sdk("TokenEvent", "agent", "e13", prompt_token_ids=[1], response_token_ids=[2]),
]


@pytest.mark.parametrize("layout", ["list", "jsonl", "search_page", "eval_row"])
def test_sdk_events_user_input_each_once(tmp_path: Path, layout: str) -> None:
    if layout == "jsonl":
        path = tmp_path / "events.jsonl"
        path.write_text("".join(json.dumps(e) + "\n" for e in SDK_EVENTS), encoding="utf-8")
        ctx = compactkit.load_one(path)
    elif layout == "search_page":
        ctx = _load_events(tmp_path, {"items": SDK_EVENTS, "next_page_id": None})
    elif layout == "eval_row":
        path = tmp_path / "output.jsonl"
        path.write_text(json.dumps({"instance_id": "i-1", "history": SDK_EVENTS}) + "\n")
        (ctx,) = compactkit.load(path)
    else:
        ctx = _load_events(tmp_path, SDK_EVENTS)
    assert ctx.metadata["source_format"] == "openhands-events"
    assert ctx.system_instruction == "You are OpenHands agent.\n\nWorking dir: /ws"
    assert ctx.metadata["tools"] == ["terminal"]
    assert _human_texts(ctx) == ["Make the build green", "Skip ruff, fix the test"]
    first = next(m for m in ctx.messages if m.is_human)
    assert [b.url for b in first.content if b.type == "image"] == ["https://x.test/ci.png"]
    skill = ctx.messages[ctx.messages.index(first) + 1]
    assert (skill.role, skill.origin, skill.text) == (
        "user",
        "harness",
        "<EXTRA_INFO>use gh</EXTRA_INFO>",
    )
    assert skill.metadata["activated_skills"] == ["github"]
    # the parallel calls of one response share one assistant message, thinking first
    calls = next(m for m in ctx.messages if m.tool_calls)
    assert [b.type for b in calls.content] == ["thinking", "text", "tool_call", "tool_call"]
    assert [c.input for c in calls.tool_calls] == [{"command": "pytest"}, {"command": "ruff check"}]
    results = [r for m in ctx.messages for r in m.tool_results]
    assert [(r.tool_call_id, r.is_error, r.text) for r in results] == [
        ("call_a", True, "1 failed"),
        ("call_b", True, "Action rejected: not now"),
    ]
    summary = next(m for m in ctx.messages if m.origin == "summary")
    assert summary.text == "USER_CONTEXT: make build green"
    assert summary.metadata["openhands_condensation"] == {
        "kind": "Condensation",
        "forgotten_events": 4,
        "summary_offset": 1,
    }
    # an error result whose call was never recorded is what the agent saw, as tool output
    orphan = next(m for m in ctx.messages if m.metadata.get("orphan_tool_result") == "call_x")
    assert (orphan.origin, orphan.text) == ("tool-output", "unknown tool")
    assert ctx.metadata["skipped_records"] == {
        "CondensationRequest": 1,
        "ConversationStateUpdateEvent": 1,
        "PauseEvent": 1,
        "TokenEvent": 1,
    }
    assert ctx.messages[-1].text == "Fixed."
    assert pairing_problems(ctx) == []
    assert expand(ctx) == ctx
