"""compactkit.Session in an agent loop: growing a real session call by call, compacting past the
trigger down to the target, observers, snapshots, and the append-only log surviving a crash."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import pytest
from click.testing import CliRunner

import compactkit
from compactkit import AgentContext, Message, Session, StatsRecorder
from compactkit.cli import make_cli
from compactkit.events import Event
from compactkit.registry import make_registry

from .conftest import ROOT, RecordingTokenizer, sample

SESSION = sample("gemini3pro")  # 285 messages, 66k tokens


@pytest.fixture(scope="module")
def source() -> AgentContext:
    return compactkit.load_one(SESSION)


def grow(
    session: Session, messages: Sequence[Message], states: list[AgentContext] | None = None
) -> None:
    """The agent loop: append what happened, compact before the next model call."""
    for msg in messages:
        session.append(msg)
        if states is not None:
            states.append(session.context)
        if session.compact_if_needed() is not None and states is not None:
            states.append(session.context)


def test_a_growing_session_compacts_past_the_trigger_down_to_the_target(
    source: AgentContext,
) -> None:
    session = Session(source.replace(messages=()), trigger=20_000, target=10_000)
    compactions: list[tuple[int, int]] = []
    for msg in source.messages:
        session.append(msg)
        assert session.tokens == compactkit.count_tokens(session.context)  # incremental == cold
        result = session.compact_if_needed()
        if result is not None:
            compactions.append((result.tokens_before, result.tokens_after))
        assert session.tokens <= 20_000 + compactkit.count_tokens(msg)
    assert len(compactions) >= 3
    assert all(before > 20_000 and after <= 10_000 for before, after in compactions)
    assert compactkit.validate(session.context) == []
    assert session.context.task == source.task
    # nothing lost: what compaction removed is recoverable from the value
    assert compactkit.expand(session.context).messages == source.messages


def test_a_call_that_does_not_compact_costs_only_the_appended_message(
    source: AgentContext,
) -> None:
    tokenizer = RecordingTokenizer()

    class Plugin:
        @compactkit.hookimpl
        def register_tokenizers(self, register: Callable[[object], None]) -> None:
            register(tokenizer)

    registry = make_registry(entry_points=False, plugins=[Plugin()])
    session = Session(
        source.replace(messages=source.messages[:100]),
        trigger=10_000_000,
        tokenizer="recording",
        registry=registry,
    )
    new = Message(role="user", content=(compactkit.TextBlock(text="a brand new instruction"),))
    tokenizer.seen.clear()
    session.append(new)
    assert session.compact_if_needed() is None
    assert tokenizer.seen == ["a brand new instruction"]


def test_observers_see_appends_and_each_compaction(source: AgentContext) -> None:
    session = Session(source.replace(messages=()), trigger=20_000)
    seen: list[Event] = []
    stats = StatsRecorder()
    stop = session.subscribe(seen.append)
    session.subscribe(stats)
    grow(session, source.messages[:120])
    kinds = [e.kind for e in seen]
    assert kinds.count("appended") == 120
    first = kinds.index("started")
    assert kinds[first:].index("compacted") > kinds[first:].index("finished")
    compacted = [e for e in seen if e.kind == "compacted"]
    assert compacted and all(e.tokens_after <= e.target < e.trigger for e in compacted)  # type: ignore[union-attr]
    assert stats.report()["tokens_after"] == compacted[-1].tokens_after  # type: ignore[union-attr]
    stop()
    session.append(compactkit.message("user", "one more"))
    assert len(seen) == len(kinds)


def test_snapshot_restore_and_fork(source: AgentContext) -> None:
    session = Session(source.replace(messages=source.messages[:10]), trigger=20_000)
    before = session.snapshot()
    fork = session.fork()
    session.append(*source.messages[10:20])
    assert before.messages == source.messages[:10]
    assert fork.context is before and fork.tokens == compactkit.count_tokens(before)
    fork.append(compactkit.message("user", "another road"))
    assert session.context.messages == source.messages[:20]
    session.restore(before)
    assert session.context is before
    assert session.tokens == compactkit.count_tokens(before)


def test_a_failing_pipeline_leaves_the_context_intact(tmp_path: Path, source: AgentContext) -> None:
    def broken(ctx: AgentContext) -> AgentContext:
        raise RuntimeError("summarizer unavailable")

    session = Session(source.replace(messages=source.messages[:60]), pipeline=broken, trigger=1_000)
    session.save(tmp_path / "s.jsonl")
    before = session.context
    failed: list[Event] = []
    session.subscribe(failed.append)
    with pytest.raises(compactkit.StrategyError, match="summarizer unavailable"):
        session.compact_if_needed()
    assert session.context is before
    assert [e.kind for e in failed] == ["started", "failed"]
    assert len((tmp_path / "s.jsonl").read_text().splitlines()) == 1


def test_a_compaction_that_cannot_reach_the_trigger_does_not_rerun_every_call(
    source: AgentContext,
) -> None:
    runs: list[int] = []

    def stubborn(ctx: AgentContext) -> AgentContext:
        runs.append(len(ctx.messages))
        return ctx

    session = Session(source.replace(messages=()), pipeline=stubborn, trigger=5_000, target=4_000)
    grow(session, source.messages[:60])
    assert session.tokens > 10_000
    # once past 5,000, then again each time the context grew by trigger - target (1,000)
    assert 1 < len(runs) <= (session.tokens - 5_000) // 1_000 + 1


def test_trigger_and_target_are_checked() -> None:
    with pytest.raises(compactkit.ConfigError, match="below the trigger"):
        Session(trigger=1_000, target=2_000)


# --------------------------------------------------------------------------- persistence


def test_a_saved_session_resumes_exactly(tmp_path: Path, source: AgentContext) -> None:
    path = tmp_path / "agent.jsonl"
    session = Session(source.replace(messages=()), trigger=20_000, target=8_000)
    session.save(path)
    grow(session, source.messages)
    session.close()
    lines = path.read_bytes().split(b"\n")
    assert lines[-1] == b""  # every record ends its line
    kinds = [json.loads(text)["kind"] for text in lines[:-1]]
    assert kinds[0] == "start" and kinds.count("append") == len(source.messages)
    assert kinds.count("compact") >= 3

    resumed = Session.load(path)
    assert resumed.context == session.context
    assert resumed.tokens == session.tokens
    assert (resumed.trigger, resumed.target) == (20_000, 8_000)
    assert resumed.path == path
    resumed.append(compactkit.message("user", "and now the docs"))
    resumed.close()
    assert Session.load(path).context.messages[-1].text == "and now the docs"


def test_the_cli_reads_a_session_log_as_the_session_grew(
    tmp_path: Path, source: AgentContext
) -> None:
    path = tmp_path / "agent.jsonl"
    grown = source.replace(messages=source.messages[:150])
    with Session(source.replace(messages=()), trigger=10_000) as session:
        session.save(path)
        grow(session, grown.messages)
    assert compactkit.load_one(path) == grown  # the transcript: every message appended
    cli = make_cli(lambda: make_registry(entry_points=False))
    result = CliRunner().invoke(cli, ["inspect", str(path)])
    assert result.exit_code == 0, result.output
    assert "format=compactkit-session" in result.stdout
    assert "messages=150" in result.stdout
    out = tmp_path / "out.json"
    result = CliRunner().invoke(cli, ["run", str(path), "--budget", "10000", "-o", str(out)])
    assert result.exit_code == 0, result.output
    assert compactkit.count_tokens(compactkit.load_one(out)) <= 10_000


def test_a_torn_last_line_is_ignored_with_a_warning(tmp_path: Path, source: AgentContext) -> None:
    path = tmp_path / "agent.jsonl"
    with Session(source.replace(messages=()), trigger=20_000) as session:
        session.save(path)
        grow(session, source.messages[:30])
    good = path.read_bytes()
    record = json.dumps({"kind": "append", "messages": [{"role": "user", "content": []}]})
    path.write_bytes(good + record[:25].encode())
    with pytest.warns(RuntimeWarning, match="torn last line of 25 bytes"):
        resumed = Session.load(path)
    assert resumed.context == session.context
    # cut away, so the next line starts on its own; the end record goes too until the next close
    assert path.read_bytes() == good[: good.rstrip(b"\n").rfind(b"\n") + 1]
    resumed.append(compactkit.message("user", "continue"))
    resumed.close()
    assert Session.load(path).context.messages[-1].text == "continue"


def test_a_corrupt_line_before_the_end_is_bad_input(tmp_path: Path, source: AgentContext) -> None:
    path = tmp_path / "agent.jsonl"
    with Session(source.replace(messages=()), trigger=20_000) as session:
        session.save(path)
        grow(session, source.messages[:5])
    lines = path.read_text().splitlines(keepends=True)
    lines[2] = lines[2][:10] + "\n"
    path.write_text("".join(lines))
    with pytest.raises(compactkit.BadInputError, match=":3: corrupt session log line"):
        Session.load(path)


WRITER = textwrap.dedent(
    """
    import os, sys, time
    from pathlib import Path
    import compactkit

    log, ready, tear_at = Path(sys.argv[1]), Path(sys.argv[2]), int(sys.argv[3])
    source = compactkit.load_one(sys.argv[4])
    real_write, writes = os.write, [0]

    def write(fd, data):
        writes[0] += 1
        if writes[0] != tear_at:
            return real_write(fd, data)
        # the crash lands in the middle of this record: half of it reaches the disk
        real_write(fd, bytes(data[: len(data) // 2]))
        os.fsync(fd)
        ready.write_text("torn")
        time.sleep(60)

    if tear_at:
        os.write = write
    session = compactkit.Session(source.replace(messages=()), trigger=20_000)
    session.save(log)
    for msg in source.messages:
        session.append(msg)
        session.compact_if_needed()
        if not tear_at and len(session.context.messages) > 40:
            ready.write_text("running")
    """
)


def _writer(tmp_path: Path, tear_at: int) -> tuple[subprocess.Popen[bytes], Path, Path]:
    log, ready = tmp_path / "agent.jsonl", tmp_path / "ready"
    script = tmp_path / "writer.py"
    script.write_text(WRITER)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen(
        [sys.executable, str(script), str(log), str(ready), str(tear_at), str(SESSION)], env=env
    )
    deadline = time.monotonic() + 60
    while not ready.exists():
        assert proc.poll() is None, "the writer exited before the crash"
        assert time.monotonic() < deadline, "the writer never got there"
        time.sleep(0.01)
    return proc, log, ready


def _reference(source: AgentContext) -> tuple[list[AgentContext], AgentContext]:
    states: list[AgentContext] = []
    session = Session(source.replace(messages=()), trigger=20_000)
    grow(session, source.messages, states)
    return states, session.context


@pytest.mark.parametrize("tear_at", [0, 150])
def test_an_agent_killed_during_a_write_resumes_where_it_was(
    tmp_path: Path, source: AgentContext, tear_at: int
) -> None:
    """SIGKILL the writing process (inside a record's write, or wherever it is), resume, finish
    the run, and compare with a run that never crashed."""
    proc, log, _ = _writer(tmp_path, tear_at)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    states, final = _reference(source)
    torn = not log.read_bytes().endswith(b"\n")
    assert torn or not tear_at
    with pytest.warns(RuntimeWarning) as caught:
        resumed = Session.load(log)
    said = [str(w.message) for w in caught]
    assert any("not closed" in text for text in said)  # killed: no end record
    assert any("torn last line" in text for text in said) == torn
    assert any(resumed.context == s for s in states)  # a state the agent really was in
    done = len(compactkit.load_one(log).messages)  # what the agent had appended
    assert done >= (40 if not tear_at else 70)
    # the loop goes on: compact before the next call, then append what comes next
    resumed.compact_if_needed()
    grow(resumed, source.messages[done:])
    resumed.close()
    assert resumed.context == final
    assert Session.load(log).context == final
    assert compactkit.load_one(log) == source
