"""The claude-code format on real Claude Code session files (corpus + bundled sample)."""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path
from typing import Any

import pytest

import compactkit
from compactkit import AgentContext
from compactkit.context import ImageBlock
from compactkit.errors import BadInputError
from compactkit.formats.base import read_document
from compactkit.formats.claude_code import ClaudeCodeFormat
from compactkit.recovery import expand
from compactkit.validate import validate

from ..conftest import CORPUS, corpus_file, corpus_files, sample, sample_files
from ._checks import assert_sniffs_only_its_own, pairing_problems

FOLDER = "claude_code_jsonl"
SAMPLE = "claude-code-viewer_sample-project_1af7fc5e"


def _files() -> list[Path]:
    if CORPUS is None:
        return [p for p in sample_files() if p.name.startswith("claude-code-viewer")]
    return [p for p in corpus_files() if p.parent.name == FOLDER]


FILES = _files()


@cache
def _load(path: Path) -> tuple[AgentContext, ...]:
    return tuple(compactkit.load(path))


@cache
def _raw(path: Path) -> tuple[dict[str, Any], ...]:
    lines = path.read_text(encoding="utf-8").splitlines()
    return tuple(json.loads(line) for line in lines if line.strip())


def _blocks(record: dict[str, Any]) -> list[dict[str, Any]]:
    content = record.get("message", {}).get("content")
    return content if isinstance(content, list) else []


def _real(ctx: AgentContext) -> list[Any]:
    return [m for m in ctx.messages if not m.metadata.get("synthesized")]


# --------------------------------------------------------------------------- every file


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.name[:40])
def test_loads_by_detection_and_pairs(path: Path) -> None:
    contexts = _load(path)
    assert contexts
    for ctx in contexts:
        assert ctx.metadata["source_format"] == "claude-code"
        assert ctx.system_instruction is None  # Claude Code does not store its system prompt
        assert pairing_problems(ctx) == []
        assert validate(ctx) == []
        assert ctx.messages[0].role == "user"


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.name[:40])
def test_calls_and_results_match_raw_counts(path: Path) -> None:
    raw = _raw(path)
    raw_calls = {
        b["id"]
        for r in raw
        if r.get("type") == "assistant"
        for b in _blocks(r)
        if b.get("type") == "tool_use"
    }
    raw_results = [
        b["tool_use_id"]
        for r in raw
        if r.get("type") == "user"
        for b in _blocks(r)
        if b.get("type") == "tool_result"
    ]
    contexts = _load(path)
    calls = [c.id for ctx in contexts for m in _real(ctx) for c in m.tool_calls]
    results = [r.tool_call_id for ctx in contexts for m in _real(ctx) for r in m.tool_results]
    assert sorted(calls) == sorted(raw_calls)
    assert sorted(results) == sorted(raw_results)
    # the toolUseResult sidecar is not duplicated into the context
    assert all("toolUseResult" not in json.dumps(m.metadata) for c in contexts for m in c.messages)


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.name[:40])
def test_one_assistant_message_per_api_response(path: Path) -> None:
    raw = _raw(path)
    last_record: dict[str, dict[str, Any]] = {}
    for r in raw:
        if r.get("type") == "assistant":
            last_record[r["message"]["id"]] = r
    assistants = [m for ctx in _load(path) for m in _real(ctx) if m.role == "assistant"]
    assert sorted(m.metadata["id"] for m in assistants) == sorted(last_record)
    for m in assistants:
        final = last_record[str(m.metadata["id"])]["message"]
        assert m.metadata["usage"] == final["usage"]  # usage exactly as recorded, final record
        assert m.metadata["model"] == final["model"]


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.name[:40])
def test_thinking_kept_in_the_turn_with_its_calls(path: Path) -> None:
    raw = _raw(path)
    raw_thinking = [
        b["thinking"]
        for r in raw
        if r.get("type") == "assistant"
        for b in _blocks(r)
        if b.get("type") == "thinking"
    ]
    kept = [
        b.thinking
        for ctx in _load(path)
        for m in ctx.messages
        for b in m.content
        if b.type == "thinking"
    ]
    assert kept == raw_thinking
    for ctx in _load(path):
        for m in ctx.messages:
            kinds = [b.type for b in m.content]
            if "thinking" in kinds:
                assert m.role == "assistant"
                assert kinds.index("thinking") == 0  # thinking first, then text/calls


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.name[:40])
def test_first_user_message_is_the_raw_text(path: Path) -> None:
    raw = _raw(path)
    first = next(r for r in raw if r.get("type") == "user")
    content = first["message"]["content"]
    text = content if isinstance(content, str) else content[0]["text"]
    ctx = _load(path)[0]
    assert ctx.messages[0].text == text
    assert ctx.metadata["session_id"] == first["sessionId"]
    assert ctx.metadata["cwd"] == first["cwd"]


def test_only_claude_code_files_sniff() -> None:
    assert_sniffs_only_its_own(ClaudeCodeFormat(), FOLDER, "claude-code")


# --------------------------------------------------------------------------- particular files


def test_bundled_sample() -> None:
    ctx = compactkit.load_one(sample(SAMPLE))
    assert [m.role for m in ctx.messages[:3]] == ["user", "user", "assistant"]
    assert ctx.messages[0].text.startswith("<command-message>init is analyzing")
    assert ctx.messages[1].metadata["is_meta"] is True  # the expanded /init prompt, sent to model
    assert sum(m.role == "assistant" for m in ctx.messages) == 7
    # five parallel calls, one record each, merged into one response and answered in the
    # order the tools finished
    i, turn = next((i, m) for i, m in enumerate(ctx.messages) if len(m.tool_calls) == 5)
    assert [c.name for c in turn.tool_calls] == ["Bash", "Glob", "Glob", "Glob", "Glob"]
    answers = [r.tool_call_id for m in ctx.messages[i + 1 : i + 6] for r in m.tool_results]
    assert sorted(answers) == sorted(c.id for c in turn.tool_calls)
    assert answers[2] == turn.tool_calls[0].id  # the Bash call finished after two Globs
    write_result = next(
        r for m in ctx.messages for r in m.tool_results if "requested permissions" in r.text
    )
    assert write_result.is_error
    assert pairing_problems(ctx) == []


def test_sidechains_are_separate_conversations() -> None:
    path = corpus_file("fe5e1c67")
    contexts = _load(path)
    assert len(contexts) == 6
    main, subagents = contexts[0], contexts[1:]
    assert "sidechain" not in main.metadata
    task_calls = {c.id: c for m in main.messages for c in m.tool_calls if c.name == "Task"}
    assert len(task_calls) == 5
    for number, sub in enumerate(subagents, start=1):
        assert sub.metadata["sidechain"] is True
        assert sub.metadata["conversation"] == number
        call = task_calls[str(sub.metadata["parent_tool_call_id"])]
        assert isinstance(call.input, dict)
        assert sub.messages[0].text == call.input["prompt"]
    with pytest.raises(BadInputError, match="holds 6 conversations"):
        compactkit.load_one(path)
    assert compactkit.load_one(f"{path}#2") == subagents[1]


def test_parallel_results_parented_off_the_chain_are_kept() -> None:
    # Claude Code 2.1 parents each parallel tool result on the record of its own call, so the
    # parentUuid path from the last record passes through only one result per batch.
    path = corpus_file("agent-a485154")
    (ctx,) = _load(path)
    assert ctx.metadata["sidechain"] is True
    assert ctx.metadata["agent_id"] == "a485154"
    assert "off_path_records" not in ctx.metadata
    first_turn = ctx.messages[1]
    assert [c.name for c in first_turn.tool_calls] == ["Glob", "Glob", "Read", "Read"]
    assert [m.role for m in ctx.messages[2:6]] == ["tool"] * 4
    assert sum(len(m.tool_results) for m in ctx.messages) == 20


def test_queued_prompt_delivered_mid_turn_is_kept() -> None:
    path = corpus_file("session-3fe1b6bc")
    ctx = _load(path)[0]
    queued = [i for i, m in enumerate(ctx.messages) if m.metadata.get("queued_command")]
    assert len(queued) == 1
    i = queued[0]
    enqueued = [r["content"] for r in _raw(path) if r.get("operation") == "enqueue"]
    assert ctx.messages[i].text == enqueued[-1]
    assert ctx.messages[i - 1].role == "tool"
    reply = ctx.messages[i + 1]
    assert reply.role == "assistant"
    thinking = reply.content[0]
    assert thinking.type == "thinking"
    assert "check a specific session" in thinking.thinking  # the model did see the prompt


def test_command_caveat_is_a_user_message() -> None:
    ctx = _load(corpus_file("session-196820da"))[0]
    first = ctx.messages[0]
    assert first.role == "user"
    assert first.metadata["is_meta"] is True
    assert first.text.startswith("Caveat: The messages below were generated by the user")


def test_follows_the_last_branch(tmp_path: Path) -> None:
    # A real session, then the user rewinds the last turn and asks something else: the new
    # prompt's parentUuid points back to the tool result that ended the turn before it.
    lines = sample(SAMPLE).read_text(encoding="utf-8").splitlines()
    records = [json.loads(line) for line in lines]
    last_turn = next(
        r
        for r in records
        if r["type"] == "assistant" and _blocks(r)[0].get("text", "").startswith("The directory")
    )
    fork = next(i for i, r in enumerate(records) if r["uuid"] == last_turn["parentUuid"])
    rewound = dict(records[0])
    rewound.update(
        parentUuid=records[fork]["uuid"],
        uuid="00000000-0000-4000-8000-000000000001",
        message={"role": "user", "content": "Actually, just list the files."},
        timestamp="2025-09-03T01:00:00.000Z",
    )
    path = tmp_path / "branched.jsonl"
    path.write_text("\n".join([*lines, json.dumps(rewound)]) + "\n", encoding="utf-8")
    ctx = compactkit.load_one(path)
    assert ctx.messages[-1].text == "Actually, just list the files."
    assert ctx.messages[-2].role == "tool"
    assert ctx.messages[-2].metadata["uuid"] == records[fork]["uuid"]
    assert ctx.metadata["off_path_records"] == len(records) - fork - 1
    assert not any("The directory appears" in m.text for m in ctx.messages)
    assert pairing_problems(ctx) == []


def test_compact_boundary_keeps_history_and_marks_the_summary(tmp_path: Path) -> None:
    # After /compact Claude Code writes a boundary whose parentUuid is null (the chain goes on
    # through logicalParentUuid) and the summary as a user record with isCompactSummary.
    lines = sample(SAMPLE).read_text(encoding="utf-8").splitlines()
    records = [json.loads(line) for line in lines]
    base = {k: records[-1][k] for k in ("isSidechain", "userType", "cwd", "sessionId", "version")}
    summary = "This session is being continued from a previous conversation: CLAUDE.md created."
    extra = [
        {
            **base,
            "type": "system",
            "subtype": "compact_boundary",
            "parentUuid": None,
            "logicalParentUuid": records[-1]["uuid"],
            "uuid": "c0000000-0000-4000-8000-000000000001",
            "content": "Conversation compacted",
            "compactMetadata": {"trigger": "manual", "preTokens": 20000},
        },
        {
            **base,
            "type": "user",
            "parentUuid": "c0000000-0000-4000-8000-000000000001",
            "uuid": "c0000000-0000-4000-8000-000000000002",
            "isCompactSummary": True,
            "message": {"role": "user", "content": summary},
        },
        {
            **base,
            "type": "user",
            "parentUuid": "c0000000-0000-4000-8000-000000000002",
            "uuid": "c0000000-0000-4000-8000-000000000003",
            "message": {"role": "user", "content": "thanks"},
        },
    ]
    path = tmp_path / "compacted.jsonl"
    path.write_text("\n".join([*lines, *map(json.dumps, extra)]) + "\n", encoding="utf-8")
    before = compactkit.load_one(sample(SAMPLE))
    ctx = compactkit.load_one(path)
    assert ctx.messages[: len(before.messages)] == before.messages
    marker = ctx.messages[-2]
    assert marker.role == "user"
    assert marker.metadata["compact_summary"] is True
    assert marker.origin == "summary"
    assert not marker.is_human  # Claude Code wrote it, not the user
    (block,) = marker.content
    assert block.type == "text"  # exactly the text Claude Code sent its model
    assert block.text == summary
    assert ctx.messages[-1].text == "thanks"
    assert "off_path_records" not in ctx.metadata
    assert ctx.metadata["skipped_records"] == {"system/compact_boundary": 1}
    assert validate(ctx) == []
    # part of the original: nothing to restore, so expand leaves the session as it was loaded
    assert ctx.recovery == {}
    assert expand(ctx) == ctx
    assert ctx.task == before.task


def test_a_file_cut_in_half_loads_up_to_the_cut(tmp_path: Path) -> None:
    text = sample(SAMPLE).read_text(encoding="utf-8")
    broken = tmp_path / "truncated.jsonl"
    broken.write_text(text[: len(text) // 2], encoding="utf-8")
    ctx = compactkit.load(broken)[0]  # Claude Code skips the cut line (`parseJSONL`), so do we
    assert ctx.metadata["skipped_records"]["malformed line"] == 1  # type: ignore[index]
    assert ctx.task.strip()


def test_other_jsonl_is_not_claude_code(tmp_path: Path) -> None:
    other = tmp_path / "pi.jsonl"
    pi = next(p for p in sample_files() if p.name.startswith("pi-mono"))
    other.write_text(pi.read_text(encoding="utf-8"), encoding="utf-8")
    with pytest.raises(BadInputError, match="not a Claude Code session"):
        compactkit.load(other, format="claude-code")


# --------------------------------------------------------------------------- records after the schema
# Records shaped as Claude Code writes them (claude-code-viewer's zod schemas, Claude Code 2.1
# sessionStorage/messageQueueManager): 1.0.x (local commands as user records, no queue records),
# 2.0.x (queue-operation without attachments) and 2.1.x (queued_command attachments, system
# local_command records, remove with content and reason).

SESSION = "5e55e55e-0000-4000-8000-000000000000"
PNG = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg=="


class _Session:
    """Writes a chain of records the way Claude Code does (each parented on the one before)."""

    def __init__(self, version: str) -> None:
        self.version = version
        self.records: list[dict[str, Any]] = []
        self.last: str | None = None
        self.clock = 0

    def _stamp(self) -> str:
        self.clock += 1
        return f"2026-01-02T10:{self.clock // 60:02d}:{self.clock % 60:02d}.000Z"

    def node(self, kind: str, **fields: Any) -> dict[str, Any]:
        uuid = f"00000000-0000-4000-8000-{len(self.records):012d}"
        record = {
            "parentUuid": self.last,
            "isSidechain": False,
            "userType": "external",
            "cwd": "/home/dev/app",
            "sessionId": SESSION,
            "version": self.version,
            "gitBranch": "main",
            "type": kind,
            "uuid": uuid,
            "timestamp": self._stamp(),
            **fields,
        }
        self.records.append(record)
        self.last = uuid
        return record

    def user(self, content: Any, **fields: Any) -> dict[str, Any]:
        return self.node("user", message={"role": "user", "content": content}, **fields)

    def assistant(self, *blocks: dict[str, Any], stop: str = "end_turn") -> dict[str, Any]:
        message = {
            "id": f"msg_{len(self.records):04d}",
            "type": "message",
            "role": "assistant",
            "model": "claude-sonnet-4-5-20250929",
            "content": list(blocks),
            "stop_reason": stop,
            "usage": {"input_tokens": 10, "output_tokens": 5},
        }
        return self.node("assistant", message=message, requestId=f"req_{len(self.records)}")

    def call(self, call_id: str, command: str) -> None:
        self.assistant(
            {"type": "tool_use", "id": call_id, "name": "Bash", "input": {"command": command}},
            stop="tool_use",
        )
        self.user(
            [{"type": "tool_result", "tool_use_id": call_id, "content": "ok", "is_error": False}],
            toolUseResult={"stdout": "ok", "stderr": "", "interrupted": False},
        )

    def loose(self, kind: str, **fields: Any) -> None:
        """A record outside the uuid chain (queue records, snapshots, titles)."""
        self.records.append({"type": kind, **fields})

    def queue(self, operation: str, content: Any = None, **fields: Any) -> None:
        extra = {"content": content} if content is not None else {}
        self.loose(
            "queue-operation",
            operation=operation,
            timestamp=self._stamp(),
            sessionId=SESSION,
            **extra,
            **fields,
        )

    def load(self, tmp_path: Path) -> list[AgentContext]:
        path = tmp_path / f"{SESSION}.jsonl"
        path.write_text("".join(json.dumps(r) + "\n" for r in self.records), encoding="utf-8")
        return ClaudeCodeFormat().load(read_document(path))


def _text(s: str) -> dict[str, Any]:
    return {"type": "text", "text": s}


def _human(ctx: AgentContext) -> list[str]:
    return [m.text for m in ctx.messages if m.is_human]


def _by_origin(ctx: AgentContext, origin: str) -> list[str]:
    return [m.text for m in ctx.messages if m.role == "user" and m.origin == origin]


def test_v1_prompts_commands_and_images_once(tmp_path: Path) -> None:
    s = _Session("1.0.98")
    s.user(
        "Caveat: The messages below were generated by the user while running local commands. "
        "DO NOT respond to these messages or otherwise consider them in your response unless "
        "the user explicitly asks you to.",
        isMeta=True,
    )
    s.user(
        "<command-name>/model</command-name>\n<command-message>model</command-message>\n"
        "<command-args>opus</command-args>"
    )
    s.user("<local-command-stdout>Set model to opus</local-command-stdout>")
    s.user("fix the failing test in parser.py")
    s.call("toolu_01", "pytest -q")
    s.user([_text("[Request interrupted by user for tool use]")])
    s.user(
        [
            {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": PNG}},
            _text("this is the error I get [Image #1]"),
        ]
    )
    s.assistant(_text("The traceback shows a KeyError."))
    s.user("<bash-input>git status</bash-input>")
    s.user("<bash-stdout>nothing to commit</bash-stdout><bash-stderr></bash-stderr>")
    s.user(
        [
            _text("<ide_opened_file>The user opened parser.py in the IDE.</ide_opened_file>"),
            _text("now add a regression test"),
        ]
    )
    s.assistant(_text("Added."))
    s.loose("summary", summary="Fix parser test", leafUuid=s.last)
    (ctx,) = s.load(tmp_path)

    assert _human(ctx) == [
        "<command-name>/model</command-name>\n<command-message>model</command-message>\n"
        "<command-args>opus</command-args>",
        "fix the failing test in parser.py",
        "this is the error I get [Image #1]",
        "<bash-input>git status</bash-input>",
        "<ide_opened_file>The user opened parser.py in the IDE.</ide_opened_file>\n"
        "now add a regression test",
    ]
    assert [t[:30] for t in _by_origin(ctx, "harness")] == [
        "Caveat: The messages below wer",
        "<local-command-stdout>Set mode",
        "[Request interrupted by user f",
        "<bash-stdout>nothing to commit",
    ]
    pasted = next(m for m in ctx.messages if "[Image #1]" in m.text)
    assert [b.type for b in pasted.content] == ["image", "text"]
    image = pasted.content[0]
    assert isinstance(image, ImageBlock)
    assert (image.media_type, image.data) == ("image/png", PNG)
    assert ctx.task == _human(ctx)[0]  # the user's own command, not the caveat before it
    assert ctx.metadata["title"] == "Fix parser test"
    assert ctx.metadata["skipped_records"] == {"summary": 1}
    assert pairing_problems(ctx) == []
    assert expand(ctx) == ctx


def test_v2_0_queued_prompts_once(tmp_path: Path) -> None:
    # 2.0.x writes queue records only: a prompt typed while the model works is `enqueue`d; a
    # `dequeue` turns it into the next prompt record, a `remove` means the running turn took it
    # (no record of its own), `popAll` puts it back in the input box.
    s = _Session("2.0.76")
    s.loose("file-history-snapshot", messageId="m0", snapshot={"trackedFileBackups": {}})
    s.user("migrate the config loader to pydantic")
    s.assistant(
        _text("Looking."),
        {"type": "tool_use", "id": "toolu_01", "name": "Read", "input": {"file_path": "config.py"}},
        stop="tool_use",
    )
    s.queue("enqueue", "also keep the env overrides")
    s.user([{"type": "tool_result", "tool_use_id": "toolu_01", "content": "..."}])
    s.queue("remove")  # absorbed mid-turn: delivered with the tool result
    s.assistant(_text("Keeping env overrides too."))
    s.queue("enqueue", "and update the README")
    s.queue("dequeue")
    s.user("and update the README")  # the same prompt, delivered between turns
    s.assistant(_text("README updated."))
    s.queue("enqueue", "run teh tests")
    s.queue("popAll", "run teh tests")  # taken back to fix the typo
    s.queue("enqueue", "run the tests")
    s.queue("remove")
    s.call("toolu_02", "pytest")
    s.assistant(_text("All green."))
    s.queue("enqueue", "then push")  # the session ended with this still queued
    (ctx,) = s.load(tmp_path)

    assert _human(ctx) == [
        "migrate the config loader to pydantic",
        "also keep the env overrides",
        "and update the README",
        "run the tests",
    ]
    absorbed = [i for i, m in enumerate(ctx.messages) if m.metadata.get("queued_command")]
    assert len(absorbed) == 2 and ctx.metadata["queued_commands"] == 2
    first = absorbed[0]
    assert ctx.messages[first - 1].role == "tool"  # after the result the turn was waiting for
    assert ctx.messages[first + 1].text == "Keeping env overrides too."
    assert ctx.metadata["skipped_records"] == {
        "file-history-snapshot": 1,
        "queue-operation/enqueue": 2,  # "run teh tests" taken back, "then push" never sent
        "queue-operation/popAll": 1,
    }
    assert pairing_problems(ctx) == []


def test_v2_1_attachments_local_commands_and_skipped_kinds(tmp_path: Path) -> None:
    s = _Session("2.1.263")
    s.user("refactor the exporter")
    s.node(
        "attachment",
        attachment={
            "type": "deferred_tools_delta",
            "addedNames": ["WebFetch"],
            "addedLines": [],
            "removedNames": [],
        },
    )
    s.assistant(
        {"type": "tool_use", "id": "toolu_01", "name": "Read", "input": {"file_path": "export.py"}},
        stop="tool_use",
    )
    s.node("progress", data={"type": "hook_progress"}, toolUseID="toolu_01")
    s.queue("enqueue", "keep the old CLI flags")
    s.user([{"type": "tool_result", "tool_use_id": "toolu_01", "content": "..."}])
    s.queue("remove", "keep the old CLI flags", reason="absorbed_mid_turn")  # before the attachment
    s.node(
        "attachment",
        attachment={
            "type": "queued_command",
            "prompt": "keep the old CLI flags",
            "commandMode": "prompt",
            "origin": {"kind": "human"},
            "source_uuid": "q-1",
        },
    )
    s.queue(
        "enqueue",
        [
            _text("like this one"),
            {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": PNG}},
        ],
    )
    s.node(
        "attachment",
        attachment={
            "type": "queued_command",
            "commandMode": "prompt",
            "prompt": [
                _text("like this one"),
                {
                    "type": "image",
                    "source": {"type": "base64", "media_type": "image/png", "data": PNG},
                },
            ],
        },
    )
    s.queue("remove", [_text("like this one")], reason="absorbed_mid_turn")
    s.node(
        "attachment",
        attachment={
            "type": "queued_command",
            "commandMode": "task-notification",
            "prompt": "<task-notification><task-id>b1</task-id><status>completed</status>"
            "</task-notification>",
        },
    )
    s.node(
        "attachment",
        attachment={
            "type": "hook_additional_context",
            "content": ["ctx"],
            "hookName": "UserPromptSubmit",
        },
    )
    s.assistant(_text("Done; old flags kept."))
    s.node("system", subtype="turn_duration", durationMs=1200, isMeta=False)
    s.node(
        "system",
        subtype="local_command",
        level="info",
        isMeta=False,
        content="<command-name>/cost</command-name>\n<command-message>cost</command-message>\n"
        "<command-args></command-args>",
    )
    s.node(
        "system",
        subtype="local_command",
        level="info",
        isMeta=False,
        content="<local-command-stdout>Total cost: $0.12</local-command-stdout>",
    )
    s.node(
        "system",
        subtype="api_error",
        level="error",
        retryAttempt=1,
        maxRetries=10,
        retryInMs=500,
        error={"status": 529},
    )
    s.user("now the docs")
    s.user([_text("[resumed from an earlier session]")], isVisibleInTranscriptOnly=True)
    s.assistant(_text("Docs updated."))
    s.node("system", subtype="informational", level="info", content="Hook ran")
    s.loose("last-prompt", lastPrompt="now the docs", leafUuid=s.last, sessionId=SESSION)
    s.loose("custom-title", customTitle="exporter", sessionId=SESSION)
    s.loose("future-record-type", payload=1)
    (ctx,) = s.load(tmp_path)

    assert _human(ctx) == [
        "refactor the exporter",
        "keep the old CLI flags",  # once: the attachment, not again from the queue records
        "like this one",
        "<command-name>/cost</command-name>\n<command-message>cost</command-message>\n"
        "<command-args></command-args>",
        "now the docs",
    ]
    queued = [m for m in ctx.messages if m.metadata.get("queued_command")]
    assert [m.origin for m in queued] == [None, None, "harness"]  # the task notification
    assert [b.type for b in queued[1].content] == ["text", "image"]
    assert _by_origin(ctx, "harness")[1:] == [
        "<local-command-stdout>Total cost: $0.12</local-command-stdout>",
        "[resumed from an earlier session]",  # isVisibleInTranscriptOnly
    ]
    local = [m for m in ctx.messages if m.metadata.get("local_command")]
    assert [m.is_human for m in local] == [True, False]
    assert ctx.metadata["skipped_records"] == {
        "attachment/deferred_tools_delta": 1,
        "attachment/hook_additional_context": 1,
        "custom-title": 1,
        "future-record-type": 1,
        "last-prompt": 1,
        "progress": 1,
        "system/api_error": 1,
        "system/informational": 1,
        "system/turn_duration": 1,
    }
    assert pairing_problems(ctx) == []
    assert validate(ctx) == []
    assert expand(ctx) == ctx


def test_v2_1_absorbed_prompt_without_attachment_is_kept(tmp_path: Path) -> None:
    # either copy alone is enough: a remove whose attachment is missing still delivers the words,
    # and a remove whose enqueue is missing carries the text itself (2.1.246 on)
    s = _Session("2.1.250")
    s.user("bump the version")
    s.assistant(
        {"type": "tool_use", "id": "toolu_01", "name": "Edit", "input": {}}, stop="tool_use"
    )
    s.queue("enqueue", "to 3.0, not 2.5")
    s.user([{"type": "tool_result", "tool_use_id": "toolu_01", "content": "ok"}])
    s.queue("remove", "to 3.0, not 2.5", reason="absorbed_mid_turn")
    s.queue("remove", "and tag it", reason="absorbed_mid_turn")
    (ctx,) = s.load(tmp_path)
    assert _human(ctx) == ["bump the version", "to 3.0, not 2.5", "and tag it"]
    assert "skipped_records" not in ctx.metadata


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.name[:40])
def test_every_typed_prompt_loads_once(path: Path) -> None:
    raw = _raw(path)
    typed: list[str] = [
        r["message"]["content"]
        for r in raw
        if r.get("type") == "user"
        and not r.get("isMeta")
        and isinstance(r["message"]["content"], str)
        and not r["message"]["content"].lstrip().startswith(("<local-command", "Caveat:"))
    ]
    human = [m.text for ctx in _load(path) for m in ctx.messages if m.is_human]
    for text in typed:
        assert human.count(text) == typed.count(text), text[:60]
    enqueued = {r["content"] for r in raw if r.get("operation") == "enqueue"}
    withdrawn = {r["content"] for r in raw if r.get("operation") == "popAll"}
    for text in enqueued - withdrawn:
        assert human.count(text) == 1, text[:60]
    for ctx in _load(path):
        assert expand(ctx) == ctx
        assert not any(m.metadata.get("compact_summary") and m.is_human for m in ctx.messages)


def test_a_bare_local_command_is_the_users_but_the_task_is_the_request_after_it(
    tmp_path: Path,
) -> None:
    s = _Session("2.0.76")
    s.user("Caveat: The messages below were generated by the user ...", isMeta=True)
    s.user(
        "<command-name>/clear</command-name>\n<command-message>clear</command-message>\n"
        "<command-args></command-args>"
    )
    s.user("<local-command-stdout></local-command-stdout>")
    s.user("rename the config loader")
    s.assistant(_text("Done."))
    (ctx,) = s.load(tmp_path)
    assert _human(ctx)[0].startswith("<command-name>/clear")  # still the user's words
    assert ctx.task == "rename the config loader"

    prompt = _Session("2.0.76")  # /init makes the model work: it is the request
    prompt.user(
        "<command-message>init is analyzing your codebase…</command-message>\n"
        "<command-name>/init</command-name>"
    )
    prompt.assistant(_text("I'll analyze the codebase."))
    prompt.user("thanks")
    (ctx2,) = prompt.load(tmp_path)
    assert ctx2.task.startswith("<command-message>init is analyzing")


def test_a_second_result_for_one_call_is_dropped_and_counted(tmp_path: Path) -> None:
    """Repair counts are written the same way by every format: a dropped duplicate result counts
    in `orphan_results`, as in the chat formats."""
    s = _Session("2.1.0")
    s.user("list the files")
    s.call("toolu_1", "ls")
    s.user([{"type": "tool_result", "tool_use_id": "toolu_1", "content": "again"}])
    s.assistant(_text("done"))
    (ctx,) = s.load(tmp_path)
    results = [r.text for m in ctx.messages for r in m.tool_results]
    assert results == ["ok"]
    assert ctx.metadata["orphan_results"] == 1
    assert pairing_problems(ctx) == [] and validate(ctx) == []
