"""The codex-rollout adapter on real Codex CLI rollouts."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

import compactkit
from compactkit.context import TextBlock
from compactkit.errors import BadInputError
from compactkit.recovery import expand
from tests.conftest import corpus_files, sample
from tests.formats._checks import load_single as load
from tests.formats._checks import pairing_problems

CALL_TYPES = {"function_call", "custom_tool_call", "web_search_call", "local_shell_call"}
OUTPUT_TYPES = {"function_call_output", "custom_tool_call_output"}


def rollouts() -> list[Path]:
    files = [p for p in corpus_files() if p.parent.name == "codex_rollout_jsonl"]
    return files or [sample("codemie_rollout")]


def raw_records(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line]


def items(records: list[dict[str, Any]], *types: str) -> list[dict[str, Any]]:
    return [
        r["payload"]
        for r in records
        if r["type"] == "response_item" and r["payload"].get("type") in types
    ]


@pytest.mark.corpus
@pytest.mark.parametrize("path", rollouts(), ids=lambda p: p.name[:40])
def test_rollout_loads_with_paired_calls(path: Path) -> None:
    ctx = load(path)
    records = raw_records(path)
    assert ctx.metadata["source_format"] == "codex-rollout"
    assert ctx.metadata["session_id"] == records[0]["payload"]["id"]
    assert pairing_problems(ctx) == []

    raw_calls = items(records, *CALL_TYPES)
    raw_outputs = items(records, *OUTPUT_TYPES)
    calls = [c for m in ctx.messages for c in m.tool_calls]
    results = [r for m in ctx.messages for r in m.tool_results]
    real = [r for m in ctx.messages if not m.metadata.get("synthesized") for r in m.tool_results]
    assert len(calls) == len(raw_calls)
    assert len(real) == len(raw_outputs)
    assert [r.tool_call_id for r in real] == [o["call_id"] for o in raw_outputs]
    # web searches run server-side: their results never reach the rollout
    answered = {o["call_id"] for o in raw_outputs}
    unanswered = [c for c in raw_calls if c.get("call_id") not in answered]
    pending = len(calls) - len(results)
    assert len(results) - len(real) + pending == len(unanswered)
    assert ctx.metadata.get("synthesized_results", 0) == len(results) - len(real)
    for i, m in enumerate(ctx.messages):
        if m.metadata.get("synthesized"):
            assert all(r.is_error and r.text == "[no result recorded]" for r in m.tool_results)
            # placed with the other results of the response that made the calls
            j = i - 1
            while ctx.messages[j].role == "tool":
                j -= 1
            made = {c.id for c in ctx.messages[j].tool_calls}
            assert {r.tool_call_id for r in m.tool_results} <= made
            assert all(c.name == "web_search" for c in calls if c.id in made - answered)

    # calls keep their ids, names and parsed arguments
    by_id = {c.id: c for c in calls}
    for raw in items(records, "function_call"):
        call = by_id[raw["call_id"]]
        assert call.name == raw["name"]
        assert call.input == json.loads(raw["arguments"])
    for raw in items(records, "custom_tool_call"):
        assert by_id[raw["call_id"]].input == raw["input"]


@pytest.mark.corpus
@pytest.mark.parametrize("path", rollouts(), ids=lambda p: p.name[:40])
def test_rollout_instructions_text_and_reasoning(path: Path) -> None:
    ctx = load(path)
    records = raw_records(path)
    meta = records[0]["payload"]
    assert ctx.system_instruction == meta["base_instructions"]["text"]

    messages = items(records, "message")

    def text_of(item: dict[str, Any]) -> str:
        return "\n".join(part["text"] for part in item["content"] if part.get("text"))

    developer = [text_of(m) for m in messages if m["role"] == "developer"]
    assert [m.text for m in ctx.messages if m.role == "system"] == developer
    users = [text_of(m) for m in messages if m["role"] == "user"]
    assert [m.text for m in ctx.messages if m.role == "user"] == users
    # AGENTS.md and <environment_context> are user messages Codex wrote: not the task
    typed = [u for u in users if not u.startswith(("# AGENTS.md", "<environment_context>"))]
    assert [m.text for m in ctx.messages if m.is_human] == typed
    assert ctx.task == typed[0]
    assistant_text = [text_of(m) for m in messages if m["role"] == "assistant"]
    got = [
        b.text for m in ctx.messages if m.role == "assistant" for b in m.content if b.type == "text"
    ]
    assert got == assistant_text

    reasoning = items(records, "reasoning")
    thinking = [b for m in ctx.messages for b in m.content if b.type == "thinking"]
    assert len(thinking) == len(reasoning)
    for raw, block in zip(reasoning, thinking, strict=True):
        summary = "\n\n".join(s["text"] for s in raw.get("summary") or [])
        assert block.thinking == summary
        assert block.redacted == (not summary and bool(raw.get("encrypted_content")))
    # thinking sits in the assistant message holding that response's calls
    for m in ctx.messages:
        if any(b.type == "thinking" for b in m.content):
            assert m.role == "assistant"


@pytest.mark.corpus
@pytest.mark.parametrize("path", rollouts(), ids=lambda p: p.name[:40])
def test_rollout_usage_per_response(path: Path) -> None:
    ctx = load(path)
    records = raw_records(path)
    usages = [
        r["payload"]["info"]["last_token_usage"]
        for r in records
        if r["type"] == "event_msg"
        and r["payload"].get("type") == "token_count"
        and r["payload"].get("info")
    ]
    got = [m.metadata["usage"] for m in ctx.messages if "usage" in m.metadata]
    assert got == usages[: len(got)]
    assert len(got) >= len(usages) - 1  # a rollout cut mid-response has one count to spare
    assert all(m.metadata.get("model") for m in ctx.messages if m.role == "assistant")


def test_bundled_sample_rollout() -> None:
    path = sample("codemie_rollout")
    ctx = load(path)
    assert pairing_problems(ctx) == []
    assert ctx.metadata["model"] == "gpt-5.5"
    assert [m.role for m in ctx.messages[:4]] == ["system", "user", "user", "assistant"]
    assert ctx.messages[2].text == "show tools"
    first = ctx.messages[3]
    assert [b.type for b in first.content] == ["thinking", "tool_call"]
    assert first.content[1].type == "tool_call" and first.content[1].name == "exec_command"
    assert ctx.messages[4].role == "tool"
    assert ctx.messages[4].tool_results[0].tool_call_id == first.content[1].id
    assert "Process running with session ID" in ctx.messages[4].tool_results[0].text
    # parallel calls of one response share one assistant message and one tool message
    multi = [m for m in ctx.messages if len(m.tool_calls) == 3]
    assert multi
    after = ctx.messages[ctx.messages.index(multi[0]) + 1]
    assert [r.tool_call_id for r in after.tool_results] == [c.id for c in multi[0].tool_calls]


def test_a_rollout_cut_in_half_loads_up_to_the_cut(tmp_path: Path) -> None:
    text = sample("codemie_rollout").read_text(encoding="utf-8")
    broken = tmp_path / "rollout.jsonl"
    broken.write_text(text[: len(text) // 2], encoding="utf-8")
    ctx = compactkit.load_one(broken)  # Codex skips the cut line (`load_rollout_items`)
    assert ctx.metadata["skipped_records"]["malformed line"] == 1  # type: ignore[index]
    assert ctx.task.strip()


def test_other_jsonl_is_not_a_rollout(tmp_path: Path) -> None:
    other = tmp_path / "events.jsonl"
    other.write_text('{"type": "event_msg", "payload": {"type": "token_count"}}\n{"a": 1}\n')
    with pytest.raises(BadInputError):
        compactkit.load(other, format="codex-rollout")


def test_interrupted_call_gets_a_synthesized_result(tmp_path: Path) -> None:
    """A call whose output was never written (the user interrupted), then the user speaks."""
    records = raw_records(sample("codemie_rollout"))
    cut = next(
        i for i, r in enumerate(records) if r["payload"].get("type") == "function_call_output"
    )
    call_id = records[cut]["payload"]["call_id"]
    user = {
        "timestamp": records[cut]["timestamp"],
        "type": "response_item",
        "payload": {
            "type": "message",
            "role": "user",
            "content": [{"type": "input_text", "text": "stop"}],
        },
    }
    path = tmp_path / "rollout.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in [*records[:cut], user]))
    ctx = load(path)
    assert pairing_problems(ctx) == []
    assert ctx.metadata["synthesized_results"] == 1
    tool, last = ctx.messages[-2], ctx.messages[-1]
    assert tool.metadata == {"synthesized": True}
    assert tool.tool_results[0].tool_call_id == call_id and tool.tool_results[0].is_error
    assert (last.role, last.text) == ("user", "stop")


# --------------------------------------------------------------------------- records after the
# upstream schema (openai/codex codex-rs/protocol/src/protocol.rs: RolloutLine, RolloutItem,
# EventMsg::UserMessage, CompactedItem; models.rs: ResponseItem)

PNG = "data:image/png;base64,iVBORw0KGgo="
AGENTS = "# AGENTS.md instructions for /repo\n\n<INSTRUCTIONS>\nuse uv\n</INSTRUCTIONS>"
ENVIRONMENT = "<environment_context>\n  <cwd>/repo</cwd>\n</environment_context>"


def line(kind: str, payload: dict[str, Any]) -> dict[str, Any]:
    return {"timestamp": "2026-01-02T03:04:05.000Z", "type": kind, "payload": payload}


def meta_line(**extra: Any) -> dict[str, Any]:
    payload = {"id": "sess-1", "timestamp": "t", "cwd": "/repo", "originator": "codex_cli_rs"}
    return line("session_meta", {**payload, "cli_version": "0.80.0", **extra})


def turn(model: str = "gpt-5-codex") -> dict[str, Any]:
    return line("turn_context", {"cwd": "/repo", "approval_policy": "on-request", "model": model})


def user_item(*parts: dict[str, Any]) -> dict[str, Any]:
    return line("response_item", {"type": "message", "role": "user", "content": list(parts)})


def text(value: str) -> dict[str, Any]:
    return {"type": "input_text", "text": value}


def user_event(message: str, **extra: Any) -> dict[str, Any]:
    return line("event_msg", {"type": "user_message", "message": message, **extra})


def answer(value: str) -> list[dict[str, Any]]:
    return [
        line(
            "response_item",
            {
                "type": "message",
                "role": "assistant",
                "content": [{"type": "output_text", "text": value}],
            },
        ),
        line("event_msg", {"type": "agent_message", "message": value}),
        line("event_msg", {"type": "token_count", "info": None}),
    ]


def load_records(tmp_path: Path, records: list[dict[str, Any]]) -> Any:
    path = tmp_path / "rollout.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    return load(path)


def test_event_only_turns_are_the_users_messages(tmp_path: Path) -> None:
    """Codex Desktop (and some versions) record the request only as an event_msg user_message."""
    ctx = load_records(
        tmp_path,
        [
            meta_line(),
            turn(),
            user_event("why does the build fail?", images=[PNG], local_images=["/tmp/shot.png"]),
            *answer("Because of a missing import."),
            turn(),
            user_event("fix it", images=[], local_images=[], text_elements=[]),
            *answer("Done."),
        ],
    )
    humans = [m for m in ctx.messages if m.is_human]
    assert [m.text for m in humans] == ["why does the build fail?", "fix it"]
    assert ctx.task == "why does the build fail?"
    images = [b for b in humans[0].content if b.type == "image"]
    assert [(b.media_type, b.data, b.url) for b in images] == [
        ("image/png", "iVBORw0KGgo=", None),
        (None, None, "/tmp/shot.png"),
    ]
    assert [m.role for m in ctx.messages] == ["user", "assistant", "user", "assistant"]
    assert ctx.metadata["skipped_records"] == {"event_msg/agent_message": 2}


def test_response_item_and_event_of_a_turn_are_one_message(tmp_path: Path) -> None:
    """Current CLI: the input as the model got it, then the same input as an event."""
    ctx = load_records(
        tmp_path,
        [
            meta_line(),
            line(
                "response_item",
                {"type": "message", "role": "developer", "content": [text("<permissions>")]},
            ),
            user_item(text(AGENTS), text(ENVIRONMENT)),
            turn(),
            user_item(text("fix the bug"), {"type": "input_image", "image_url": PNG}),
            user_event("fix the bug", images=[PNG], local_images=[]),
            *answer("Fixed."),
            line("event_msg", {"type": "turn_aborted", "reason": "interrupted"}),
            user_item(
                text("<turn_aborted>\nThe user interrupted the previous turn.\n</turn_aborted>")
            ),
            user_item(
                text("<user_shell_command>\n<command>\nls\n</command>\n</user_shell_command>")
            ),
            turn(),
            user_item(text("and add a test")),
            user_event("and add a test"),
            *answer("Added."),
            line("response_item", {"type": "ghost_snapshot", "ghost_commit": {"id": "abc"}}),
            line("future_record", {"type": "x"}),
        ],
    )
    humans = [m for m in ctx.messages if m.is_human]
    assert [m.text for m in humans] == ["fix the bug", "and add a test"]
    assert [b.type for b in humans[0].content] == ["text", "image"]  # the image once
    harness = [m for m in ctx.messages if m.origin == "harness"]
    assert len(harness) == 3
    assert harness[0].text == f"{AGENTS}\n{ENVIRONMENT}"
    assert all(m.role == "user" and not m.is_human for m in harness)
    assert ctx.task == "fix the bug"
    assert ctx.metadata["skipped_records"] == {
        "event_msg/agent_message": 2,
        "event_msg/turn_aborted": 1,
        "future_record": 1,
        "response_item/ghost_snapshot": 1,
    }


def test_older_events_with_a_kind(tmp_path: Path) -> None:
    """Older versions sent harness text as events too, marked by `kind`, after the item."""
    ctx = load_records(
        tmp_path,
        [
            meta_line(),
            user_item(text("<user_instructions>\nbe brief\n</user_instructions>")),
            user_event(
                "<user_instructions>\nbe brief\n</user_instructions>", kind="user_instructions"
            ),
            user_item(text(ENVIRONMENT)),
            user_event(ENVIRONMENT, kind="environment_context"),
            turn(),
            user_item(text("rename foo to bar")),
            user_event("rename foo to bar", kind="plain"),
            *answer("Renamed."),
        ],
    )
    users = [m for m in ctx.messages if m.role == "user"]
    assert [m.origin for m in users] == ["harness", "harness", None]
    assert [m.text for m in ctx.messages if m.is_human] == ["rename foo to bar"]


def test_the_same_words_in_two_turns_stay_two_messages(tmp_path: Path) -> None:
    ctx = load_records(
        tmp_path,
        [
            meta_line(),
            turn(),
            user_item(text("continue")),
            user_event("continue"),
            *answer("One."),
            turn(),
            user_event("continue"),
            user_item(text("continue")),  # either order pairs within a turn
            *answer("Two."),
        ],
    )
    assert [m.text for m in ctx.messages if m.is_human] == ["continue", "continue"]


SUMMARY_PREFIX = "Another language model started to solve this problem and produced a summary"


def test_compactions_are_plain_summary_text_and_expand_leaves_them(tmp_path: Path) -> None:
    summary = f"{SUMMARY_PREFIX}:\nwe renamed foo"
    ctx = load_records(
        tmp_path,
        [
            meta_line(),
            turn(),
            user_item(text("rename foo")),
            user_event("rename foo"),
            *answer("Renamed."),
            line("compacted", {"message": summary}),  # local compaction, older versions
            line("event_msg", {"type": "context_compacted"}),
            turn(),
            user_item(text("now bar")),
            user_event("now bar"),
            *answer("Done."),
            line(
                "compacted",
                {
                    "message": "",
                    "replacement_history": [
                        user_item(text(ENVIRONMENT))["payload"],
                        user_item(text("rename foo"))["payload"],
                        user_item(text("now bar"))["payload"],
                        {"type": "compaction", "encrypted_content": "gAAAA"},
                    ],
                },
            ),
            line("compacted", {"message": "", "replacement_history": []}),
        ],
    )
    summaries = [m for m in ctx.messages if m.origin == "summary"]
    assert [m.text for m in summaries] == [summary, "rename foo", "now bar"]
    assert all(m.content == (TextBlock(text=m.text),) for m in summaries)
    assert [m.text for m in ctx.messages if m.is_human] == ["rename foo", "now bar"]
    assert ctx.recovery == {}
    assert expand(ctx) == ctx
    assert ctx.metadata["skipped_records"] == {
        "compacted": 1,
        "event_msg/agent_message": 2,
        "event_msg/context_compacted": 1,
    }


@pytest.mark.corpus
@pytest.mark.parametrize("path", rollouts(), ids=lambda p: p.name[:40])
def test_rollout_user_messages_once_and_skips_counted(path: Path) -> None:
    ctx = load(path)
    records = raw_records(path)
    events = [
        r["payload"]["message"]
        for r in records
        if r["type"] == "event_msg" and r["payload"]["type"] == "user_message"
    ]
    assert [m.text for m in ctx.messages if m.is_human] == events
    assert expand(ctx) == ctx
    skipped = ctx.metadata.get("skipped_records", {})
    kinds = {
        f"event_msg/{r['payload']['type']}"
        for r in records
        if r["type"] == "event_msg"
        and r["payload"]["type"] not in ("user_message", "token_count", "web_search_end")
    }
    assert set(skipped) == kinds


def test_a_rollout_from_before_the_envelope_loads(tmp_path: Path) -> None:
    """A rollout of the 2025 releases (codex-rs `rollout.rs` then: a `SessionMeta {id, timestamp,
    instructions}` first line with the git info, each `ResponseItem` written bare, a
    `{"record_type": "state"}` line after each turn), as the public readers of those files show
    it: it loads with the user's words and every call paired; it was "unknown session format"."""
    sid = "5973b6c0-94b8-487b-a530-2aeb6098ae0e"
    lines = [
        {
            "id": sid,
            "timestamp": "2025-05-01T10:00:00.000Z",
            "instructions": None,
            "git": {"commit_hash": "3f1c2a9", "branch": "main"},
        },
        {"record_type": "state"},
        {
            "type": "message",
            "id": None,
            "role": "user",
            "content": [{"type": "input_text", "text": "add a --verbose flag to the cli"}],
        },
        {
            "type": "reasoning",
            "id": "rs_1",
            "summary": [{"type": "summary_text", "text": "Look at cli.py first"}],
        },
        {
            "type": "function_call",
            "id": "fc_1",
            "name": "shell",
            "arguments": '{"command": ["cat", "cli.py"]}',
            "call_id": "call_1",
        },
        {
            "type": "function_call_output",
            "call_id": "call_1",
            "output": '{"output": "import argparse", "metadata": {"exit_code": 0}}',
        },
        {
            "type": "message",
            "id": "msg_1",
            "role": "assistant",
            "content": [{"type": "output_text", "text": "Added --verbose."}],
        },
        {"record_type": "state"},
        {
            "type": "message",
            "id": None,
            "role": "user",
            "content": [{"type": "input_text", "text": "now document it in the README"}],
        },
        {
            "type": "message",
            "id": "msg_2",
            "role": "assistant",
            "content": [{"type": "output_text", "text": "Documented."}],
        },
        {"record_type": "state"},
    ]
    path = tmp_path / f"rollout-2025-05-01T10-00-00-{sid}.jsonl"
    path.write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")
    ctx = load(path)
    assert ctx.metadata["source_format"] == "codex-rollout" and ctx.metadata["session_id"] == sid
    assert [m.text for m in ctx.messages if m.is_human] == [
        "add a --verbose flag to the cli",
        "now document it in the README",
    ]
    results = {r.tool_call_id: r.text for m in ctx.messages for r in m.tool_results}
    assert list(results) == ["call_1"] and "import argparse" in results["call_1"]
    assert pairing_problems(ctx) == [] and compactkit.validate(ctx) == []
    assert ctx.metadata["skipped_records"] == {"state": 3}
