"""No silent loss in the Session log: a second writer is refused (an OS lock), a line edited,
removed, duplicated or moved is found on load (each record carries the hash of the one before),
and a log cut at a line end is reported (a closed log ends with an end record that counts the
records before it). The concurrent case runs two real writer processes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

import compactkit
from compactkit import AgentContext, BadInputError, Session, SessionLogBusy
from compactkit.cli import make_cli
from compactkit.recovery import expand
from compactkit.registry import make_registry

from .conftest import ROOT, sample

SESSION = sample("gemini3pro")  # 285 messages, 66k tokens


@pytest.fixture(scope="module")
def source() -> AgentContext:
    return compactkit.load_one(SESSION)


@pytest.fixture
def log(tmp_path: Path, source: AgentContext) -> Path:
    """A closed log of 60 appends and a few compactions."""
    path = tmp_path / "agent.jsonl"
    with Session(source.replace(messages=()), trigger=20_000) as session:
        session.save(path)
        for msg in source.messages[:60]:
            session.append(msg)
            session.compact_if_needed()
    return path


# --------------------------------------------------------------------------- one writer


WRITER = textwrap.dedent(
    """
    import sys, time
    import compactkit
    from compactkit import SessionLogBusy

    log, name, go = sys.argv[1], sys.argv[2], sys.argv[3]
    while not __import__("os").path.exists(go):
        time.sleep(0.005)
    refused = 0
    while True:
        try:
            session = compactkit.Session.load(log)
            break
        except SessionLogBusy:
            refused += 1
            time.sleep(0.02)
    filler = " ".join(["the quick brown fox jumps over the lazy dog"] * 12)
    for i in range(60):
        session.append(compactkit.message("user", f"{name}-{i}: {filler}"))
        session.append(compactkit.message("assistant", f"noted {name}-{i}"))
        session.compact_if_needed()
        print(f"ack {name}-{i}", flush=True)
    session.close()
    print(f"refused {refused}", flush=True)
    """
)


def test_two_processes_appending_to_one_log_lose_nothing(tmp_path: Path) -> None:
    log, go = tmp_path / "agent.jsonl", tmp_path / "go"
    with Session(trigger=3_000, target=1_500) as session:
        session.save(log)
        session.append(compactkit.message("user", "Keep a log of what the writers say."))
    script = tmp_path / "writer.py"
    script.write_text(WRITER)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    procs = [
        subprocess.Popen(
            [sys.executable, str(script), str(log), name, str(go)],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for name in ("A", "B")
    ]
    time.sleep(0.5)
    go.write_text("go")  # both load at once
    outputs = [p.communicate(timeout=300) for p in procs]
    for proc, (_, err) in zip(procs, outputs, strict=True):
        assert proc.returncode == 0, err
    acked = {line.split()[1] for out, _ in outputs for line in out.splitlines() if "ack" in line}
    assert len(acked) == 120
    resumed = Session.load(log)
    said = [m.text for m in expand(resumed.context).messages if m.role == "user"]
    resumed.close()
    kept = {text.split(":")[0] for text in said if text[:2] in ("A-", "B-")}
    assert kept == acked  # every acknowledged message is in the state the log resumes
    transcript = compactkit.load_one(log)
    assert sum(1 for m in transcript.messages if m.role == "user") == 121
    # one writer waited for the other: it was refused while the other held the log
    refused = [int(out.split("refused ")[1]) for out, _ in outputs]
    assert max(refused) > 0


def test_a_second_writer_in_the_same_process_is_refused(log: Path) -> None:
    first = Session.load(log)
    with pytest.raises(SessionLogBusy, match="another Session is writing this log") as caught:
        Session.load(log)
    assert caught.value.exit_code == 2
    with pytest.raises(SessionLogBusy):
        Session().save(log)  # nor is the log replaced under it
    first.close()
    Session.load(log).close()  # free again once closed


def test_a_writer_killed_outright_leaves_the_log_free(log: Path) -> None:
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys, time, compactkit; s = compactkit.Session.load(sys.argv[1]); "
            "print('held', flush=True); time.sleep(60)",
            str(log),
        ],
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        with pytest.raises(SessionLogBusy):
            Session.load(log)
    finally:
        holder.kill()
        holder.wait()
    with pytest.warns(RuntimeWarning, match="not closed"):
        Session.load(log).close()  # the kernel dropped the lock with the process


# --------------------------------------------------------------------------- tampering


def _lines(path: Path) -> list[str]:
    return path.read_text().splitlines(keepends=True)


def _edit(line: str) -> str:
    record = json.loads(line)
    record["messages"][0]["content"] = [{"type": "text", "text": "something else entirely"}]
    return json.dumps(record, ensure_ascii=False, separators=(",", ":")) + "\n"


@pytest.mark.parametrize("how", ["edited", "deleted", "duplicated", "swapped", "last edited"])
def test_a_valid_line_changed_in_a_log_is_found_on_load(log: Path, how: str) -> None:
    lines = _lines(log)
    appends = [k for k, text in enumerate(lines) if json.loads(text)["kind"] == "append"]
    k = appends[len(appends) // 2]
    if how == "edited":
        lines[k] = _edit(lines[k])
    elif how == "deleted":
        del lines[k]
    elif how == "duplicated":
        lines.insert(k, lines[k])
    elif how == "swapped":
        lines[k], lines[k + 1] = lines[k + 1], lines[k]
    else:  # the record just before the end record
        k = len(lines) - 2
        lines[k] = _edit(lines[k])
    log.write_text("".join(lines))
    # the first line (1-based) whose chain does not hold: the one after the change
    broken = k + 1 if how in ("deleted", "swapped") else k + 2
    with pytest.raises(BadInputError, match=f":{broken}: the log's hash chain breaks here"):
        Session.load(log)
    # the command line reads the log through the same replay
    result = CliRunner().invoke(
        make_cli(lambda: make_registry(entry_points=False)), ["inspect", str(log)]
    )
    assert result.exit_code == 2
    assert "hash chain breaks here" in result.stderr


@pytest.mark.parametrize("cut", [1, 2, 10])
def test_a_log_cut_at_a_line_end_is_reported(log: Path, cut: int) -> None:
    full = Session.load(log)
    full_context = full.context
    full.close()
    lines = _lines(log)
    log.write_text("".join(lines[:-cut]))
    with pytest.warns(RuntimeWarning, match=f"not closed .*cut after line {len(lines) - cut}"):
        resumed = Session.load(log)
    assert (resumed.context == full_context) == (cut == 1)  # only the end record was cut
    resumed.close()


def test_an_end_record_that_does_not_count_its_records_is_found(log: Path) -> None:
    lines = _lines(log)
    end = json.loads(lines[-1])
    end["records"] += 3
    lines[-1] = json.dumps(end) + "\n"
    log.write_text("".join(lines))
    with pytest.raises(BadInputError, match="end record counts"):
        Session.load(log)


def test_two_logs_joined_are_found(log: Path, tmp_path: Path) -> None:
    other = tmp_path / "other.jsonl"
    with Session() as session:
        session.save(other)
    log.write_text(log.read_text() + other.read_text())
    with pytest.raises(BadInputError, match="a record after the log's end"):
        Session.load(log)


def test_a_closed_log_resumes_without_warning_and_stays_chained(
    log: Path, source: AgentContext
) -> None:
    with Session.load(log) as resumed:  # no warning: pytest runs with warnings shown
        resumed.append(source.messages[60])
    kinds = [json.loads(text)["kind"] for text in _lines(log)]
    assert kinds.count("end") == 1 and kinds[-1] == "end"
    assert len(compactkit.load_one(log).messages) == 61


def test_a_log_of_an_older_version_loads_with_a_note_and_is_chained_from_then_on(
    log: Path, source: AgentContext
) -> None:
    old = []
    for text in _lines(log):
        record = json.loads(text)
        if record["kind"] == "end":
            continue
        record.pop("chain", None)
        record.pop("prev", None)
        old.append(json.dumps(record, ensure_ascii=False, separators=(",", ":")) + "\n")
    log.write_text("".join(old))
    with pytest.warns(RuntimeWarning, match="older compactkit without a hash chain"):
        resumed = Session.load(log)
    resumed.append(source.messages[60])
    resumed.append(source.messages[61])
    resumed.close()
    lines = _lines(log)
    lines[-2] = _edit(lines[-2])  # a chained record edited: found even in an old log
    log.write_text("".join(lines))
    with pytest.raises(BadInputError, match="hash chain breaks here"):
        Session.load(log)


def test_the_chain_is_checked_without_encoding_a_record_whole(log: Path) -> None:
    """Each record's chain digest is hashed a member at a time (a start record holding a whole
    session on one line was encoded as one string, four bytes a character once it held an emoji:
    a 20 MiB log took 300 MiB to load, 186 MiB now); it is the digest of the line as written,
    on every record of a real log and on records holding wide characters, numbers and nesting
    deeper than the levels hashed member by member."""
    from compactkit.formats.session_log import digest, line, record_digest

    records = [json.loads(text) for text in log.read_text(encoding="utf-8").splitlines()]
    assert len(records) > 60
    odd = {
        "kind": "append",
        "x": [1.5, -0.0, 1e300, None, True, {"é🙂": ["\u2028", {"a": {"b": {"c": [[[{}]]]}}}]}],
        "": {},
        "t": 'quote " backslash \\ tab \t',
    }
    for record in [*records, odd]:
        assert record_digest(record) == digest(line(record))
    assert record_digest(odd) != record_digest({**odd, "t": "other"})
