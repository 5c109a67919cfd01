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

import compactkit
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
