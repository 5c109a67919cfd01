"""Claude Code's session layout on disk: `<project>/<session>.jsonl`, and since 2.x each subagent's
transcript in `<project>/<session>/subagents/agent-<id>.jsonl` (the compaction agent's in
`agent-acompact-<id>.jsonl`).

Shaped after Claude Code 2.1 `src/utils/sessionStorage.ts` (`recordSidechainTranscript` ->
`insertMessageChain(messages, isSidechain=true, agentId, startingParentUuid)`: a subagent's records
carry `isSidechain: true` and its `agentId`, and the first record of each batch it writes points to
the record it continues, which for a forked agent such as the compaction agent is a record of the
main session file).
"""

from __future__ import annotations

import json
import uuid
from pathlib import Path

from click.testing import CliRunner

import compactkit
from compactkit.cli import make_cli
from compactkit.registry import make_registry
from tests.conftest import sample


def as_subagent(
    records: list[dict[str, object]], agent: str, batch: int
) -> list[dict[str, object]]:
    """`records` rewritten as the transcript of subagent `agent`, written in batches of `batch`
    records whose first one continues a record of the main session (not in this file)."""
    out = []
    for number, record in enumerate(records):
        record = dict(record, isSidechain=True, agentId=agent)
        if number % batch == 0 and "uuid" in record:
            record["parentUuid"] = str(uuid.UUID(int=number + 1))  # a main-session record
        out.append(record)
    return out


def test_a_compaction_agent_transcript_loads_as_one_conversation(tmp_path: Path) -> None:
    source = sample("claude-code-viewer")
    records = [json.loads(line) for line in source.read_text(encoding="utf-8").splitlines()]
    main = compactkit.load_one(source)
    path = tmp_path / "agent-acompact-7c1f.jsonl"
    lines = as_subagent(records, "acompact-7c1f", batch=3)
    path.write_text("".join(json.dumps(r) + "\n" for r in lines), encoding="utf-8")
    contexts = compactkit.load(path)
    assert len(contexts) == 1  # was one conversation per batch
    ctx = contexts[0]
    assert ctx.metadata["agent_id"] == "acompact-7c1f" and ctx.metadata["sidechain"] is True
    assert [m.text for m in ctx.messages if m.is_human] == [
        m.text for m in main.messages if m.is_human
    ]
    assert len(ctx.messages) == len(main.messages)


# --------------------------------------------------------------------------- subagents/ beside the session

SESSION = "e9fb405b-169f-40eb-9396-7e75076f045d"
PROMPT = "Analyze the existing CLI command structure and write a specification."


def record(kind: str, uid: str, parent: str | None, content: object, **more: object) -> dict:
    """A record as Claude Code 2.1.7 wrote it (codemie-ai/codemie-code
    `tests/integration/session/fixtures/claude/incremental-subagents/turn-2.jsonl`)."""
    message = {"role": kind, "content": content}
    if kind == "assistant":
        message = {"model": "claude-sonnet-4-5-20250929", "id": f"msg_{uid}", **message}
    return {
        "parentUuid": parent,
        "isSidechain": False,
        "userType": "external",
        "cwd": "/repo",
        "sessionId": SESSION,
        "version": "2.1.7",
        "type": kind,
        "message": message,
        "uuid": uid,
        "timestamp": "2026-01-14T19:20:03.207Z",
        **more,
    }


def main_session() -> list[dict]:
    task = {
        "type": "tool_use",
        "id": "toolu_task",
        "name": "Task",
        "input": {"subagent_type": "solution-architect", "description": "Spec", "prompt": PROMPT},
    }
    result = {
        "type": "tool_result",
        "tool_use_id": "toolu_task",
        "content": [
            {"type": "text", "text": "Done: spec written."},
            {"type": "text", "text": "agentId: a485154 (for resuming)"},
        ],
    }
    return [
        {"type": "summary", "summary": "CLI spec", "leafUuid": "u4"},
        record("user", "u1", None, "@solution-architect analyze the CLI and spec new commands"),
        record("assistant", "u2", "u1", [task]),
        record(
            "user",
            "u3",
            "u2",
            [result],
            toolUseResult={"status": "completed", "prompt": PROMPT, "agentId": "a485154"},
        ),
        record("assistant", "u4", "u3", [{"type": "text", "text": "## Summary"}]),
    ]


def subagent(agent: str, prompt: str) -> list[dict]:
    first = dict(record("user", f"{agent}-1", None, prompt), isSidechain=True, agentId=agent)
    reply = record("assistant", f"{agent}-2", f"{agent}-1", [{"type": "text", "text": "Reading."}])
    return [first, dict(reply, isSidechain=True, agentId=agent)]


def write_jsonl(path: Path, records: list[dict]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    return path


def test_subagent_transcripts_attach_to_the_task_call_that_ran_them(tmp_path: Path) -> None:
    project = tmp_path / "-repo"
    main = write_jsonl(project / f"{SESSION}.jsonl", main_session())
    # the prompt a subagent got need not be the Task input's text: the agent id links them
    write_jsonl(
        project / SESSION / "subagents" / "agent-a485154.jsonl",
        subagent("a485154", "Analyze the CLI (as the agent was briefed)"),
    )
    write_jsonl(
        project / SESSION / "subagents" / "agent-acompact-9f2.jsonl",
        subagent("acompact-9f2", "Summarize the conversation so far."),
    )
    for path in (main, project / SESSION, project / SESSION / "subagents"):
        contexts = compactkit.load(path)
        assert [c.metadata.get("agent_id") for c in contexts] == [None, "a485154", "acompact-9f2"]
        assert contexts[1].metadata["parent_tool_call_id"] == "toolu_task"
        assert "parent_tool_call_id" not in contexts[2].metadata  # no Task call ran it
        assert [m.text for m in contexts[0].messages if m.is_human] == [
            "@solution-architect analyze the CLI and spec new commands"
        ]
    alone = tmp_path / "alone.jsonl"
    alone.write_text(main.read_text(encoding="utf-8"), encoding="utf-8")
    assert len(compactkit.load(alone)) == 1  # no subagents/ folder beside it


def test_a_malformed_line_in_a_subagent_file_is_named_by_that_file(tmp_path: Path) -> None:
    project = tmp_path / "-repo"
    main = write_jsonl(project / f"{SESSION}.jsonl", main_session())
    agent_file = write_jsonl(
        project / SESSION / "subagents" / "agent-a485154.jsonl", subagent("a485154", PROMPT)
    )
    agent_file.write_text(agent_file.read_text(encoding="utf-8") + "{cut\n", encoding="utf-8")
    cli = make_cli(lambda: make_registry(entry_points=False))
    result = CliRunner().invoke(cli, ["inspect", str(main)])
    assert result.exit_code == 0, result.stderr
    assert f"warning: {agent_file}:3: skipped a malformed line" in result.stderr
