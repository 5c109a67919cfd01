"""A JSONL line that is not JSON (cut by a crash, two writers interleaved) is skipped where the
agent that wrote the file skips it, with one warning naming file and line and a count in
`skipped_records`, and refused (exit 2, the line named) everywhere else.

Upstream loaders read for each rule: pi `session-manager.ts` (`loadEntriesFromFile` /
`parseSessionEntries`: `catch { // Skip malformed lines }`), Claude Code `src/utils/json.ts`
(`parseJSONL`: skips malformed lines), Codex `codex-rs/core/src/rollout/recorder.rs`
(`load_rollout_items`: `warn!("failed to parse line as JSON")`, `continue`), Gemini CLI
`chatRecordingService.ts` (`loadConversationRecord`: "ignore parse errors on individual lines"),
compactkit's own `Session.load` (a torn last line only).
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from click.testing import CliRunner

import compactkit
from compactkit.cli import make_cli
from compactkit.context import AgentContext, Message
from compactkit.registry import make_registry
from tests.conftest import sample

CLI = make_cli(lambda: make_registry(entry_points=False))


def run(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(CLI, list(args))
    return result.exit_code, result.stdout, result.stderr


def human_words(ctx: AgentContext) -> list[str]:
    return [m.text for m in ctx.messages if m.is_human]


def lines_of(path: Path) -> list[str]:
    return path.read_text(encoding="utf-8").splitlines(keepends=True)


def cut(line: str) -> str:
    """The line as a crash leaves it: its first half, then a newline."""
    return line[: len(line) // 2] + "\n"


def write(path: Path, lines: list[str]) -> Path:
    path.write_text("".join(lines), encoding="utf-8")
    return path


def first_index(lines: list[str], test: Any, start: int = 0) -> int:
    return next(i for i, line in enumerate(lines) if i >= start and test(json.loads(line)))


def assert_skipped_one(ctx: AgentContext) -> None:
    skipped = ctx.metadata["skipped_records"]
    assert isinstance(skipped, dict) and skipped["malformed line"] == 1
    assert list(ctx.metadata)[-1] == "skipped_records"


def assert_warned(err: str, path: Path, line: int) -> None:
    warnings = [w for w in err.splitlines() if "malformed" in w]
    expected = f"compactkit: warning: {path}:{line}: skipped a malformed line"
    assert len(warnings) == 1 and warnings[0].startswith(expected), err


# --------------------------------------------------------------------------- pi


def pi_v3(tmp_path: Path) -> tuple[list[str], Path]:
    """The corpus pi session (version 1) migrated as pi's `migrateV1ToV2` does: an `id` per
    entry, each entry's `parentId` the one before it."""
    records = [json.loads(line) for line in lines_of(sample("pi-mono_before-compaction"))]
    previous = None
    for number, record in enumerate(records):
        if record["type"] == "session":
            record["version"] = 3
            continue
        record["id"] = f"e{number:05d}"
        record["parentId"] = previous
        previous = record["id"]
    lines = [json.dumps(r) + "\n" for r in records]
    return lines, write(tmp_path / "v3.jsonl", lines)


def test_pi_skips_a_malformed_line_and_keeps_the_turns_before_it(tmp_path: Path) -> None:
    lines, clean = pi_v3(tmp_path)
    whole = compactkit.load_one(clean)
    middle = len(lines) // 2
    at = first_index(lines, lambda r: r.get("message", {}).get("role") == "assistant", middle)
    broken = write(tmp_path / "broken.jsonl", [*lines[:at], cut(lines[at]), *lines[at + 1 :]])
    code, _, err = run("inspect", str(broken))
    assert code == 0, err  # was: the whole file refused
    assert_warned(err, broken, at + 1)
    ctx = compactkit.load_one(broken)
    # pi's own path from the leaf would stop at the lost entry; every word typed before it stays
    assert human_words(ctx) == human_words(whole) and len(human_words(ctx)) >= 5
    assert_skipped_one(ctx)


def test_pi_refuses_a_file_whose_header_is_malformed(tmp_path: Path) -> None:
    lines, _ = pi_v3(tmp_path)
    broken = write(tmp_path / "broken.jsonl", [cut(lines[0]), *lines[1:]])
    code, _, err = run("inspect", str(broken), "--format", "pi-session")
    assert code == 2 and "not a pi session" in err  # pi opens no session without its header


# --------------------------------------------------------------------------- Claude Code


def test_claude_code_skips_a_malformed_line_and_keeps_the_turns_before_it(tmp_path: Path) -> None:
    source = sample("claude-code-viewer")
    lines = lines_of(source)
    whole = compactkit.load(source)
    at = first_index(lines, lambda r: r.get("type") == "assistant", len(lines) // 2)
    broken = write(tmp_path / "broken.jsonl", [*lines[:at], cut(lines[at]), *lines[at + 1 :]])
    code, _, err = run("inspect", str(broken))
    assert code == 0, err
    assert_warned(err, broken, at + 1)
    loaded = compactkit.load(broken)
    assert len(loaded) == len(whole)
    assert human_words(loaded[0]) == human_words(whole[0]) and human_words(loaded[0])
    assert_skipped_one(loaded[0])


def test_claude_code_reads_a_file_torn_in_its_last_line(tmp_path: Path) -> None:
    lines = lines_of(sample("claude-code-viewer"))
    torn = tmp_path / "torn.jsonl"
    torn.write_text("".join(lines[:-1]) + lines[-1][:40], encoding="utf-8")
    code, _, err = run("inspect", str(torn))
    assert code == 0, err
    assert_warned(err, torn, len(lines))
    # the reason reads as one sentence (json's own message ends in "at": no "at at column")
    assert re.search(r"\(Unterminated string starting at column \d+\)", err), err
    assert_skipped_one(compactkit.load_one(torn))


# --------------------------------------------------------------------------- Codex, Gemini CLI


def test_codex_skips_a_malformed_line(tmp_path: Path) -> None:
    source = sample("codemie_rollout")
    lines = lines_of(source)
    whole = compactkit.load_one(source)
    at = first_index(lines, lambda r: r.get("type") == "event_msg", 5)
    broken = write(tmp_path / "broken.jsonl", [*lines[:at], "{not json\n", *lines[at + 1 :]])
    code, _, err = run("inspect", str(broken))
    assert code == 0, err
    assert_warned(err, broken, at + 1)
    ctx = compactkit.load_one(broken)
    assert human_words(ctx) == human_words(whole)
    assert_skipped_one(ctx)


def gemini_jsonl(tmp_path: Path) -> list[str]:
    """The corpus Gemini CLI session (one JSON record) as newer versions write it: a metadata
    line, then one line per message (`chatRecordingService.ts`, `appendRecord`)."""
    record = json.loads(sample("gemini_session").read_text(encoding="utf-8"))
    messages = record.pop("messages")
    return [json.dumps(record) + "\n", *(json.dumps(m) + "\n" for m in messages)]


def test_gemini_cli_skips_a_malformed_line(tmp_path: Path) -> None:
    lines = gemini_jsonl(tmp_path)
    clean = write(tmp_path / "session.jsonl", lines)
    whole = compactkit.load_one(clean)
    at = first_index(lines, lambda r: r.get("type") == "gemini", 1)
    broken = write(tmp_path / "broken.jsonl", [*lines[:at], cut(lines[at]), *lines[at + 1 :]])
    code, _, err = run("inspect", str(broken))
    assert code == 0, err
    assert_warned(err, broken, at + 1)
    ctx = compactkit.load_one(broken)
    assert human_words(ctx) == human_words(whole) and human_words(ctx)
    assert_skipped_one(ctx)


# --------------------------------------------------------------------------- compactkit's own log


def session_log(tmp_path: Path) -> Path:
    ctx = compactkit.load_one(sample("claude-code-viewer"))
    path = tmp_path / "agent.session.jsonl"
    session = compactkit.Session(ctx)
    session.save(path)
    session.append(Message(role="user", content=({"type": "text", "text": "one more thing"},)))
    session.close()
    return path


def test_the_cli_reads_a_session_log_torn_in_its_last_line(tmp_path: Path) -> None:
    path = session_log(tmp_path)
    good = path.read_text(encoding="utf-8")
    path.write_text(good + '{"kind": "append", "messages": [{"ro', encoding="utf-8")
    code, _, err = run("inspect", str(path))
    assert code == 0, err
    assert_warned(err, path, good.count("\n") + 1)
    ctx = compactkit.load_one(path)
    assert ctx.messages[-1].text == "one more thing"
    assert_skipped_one(ctx)
    assert path.read_text(encoding="utf-8").endswith('"ro')  # the input is never modified


def test_a_session_log_corrupt_before_its_last_line_is_refused(tmp_path: Path) -> None:
    path = session_log(tmp_path)
    lines = lines_of(path)
    broken = write(path, [lines[0], "{not json\n", *lines[1:]])
    code, _, err = run("inspect", str(broken))
    assert code == 2 and f"{broken}:2: invalid or truncated JSONL record" in err


# --------------------------------------------------------------------------- formats that refuse


def test_a_format_whose_reader_refuses_malformed_lines_names_the_line(tmp_path: Path) -> None:
    lines = lines_of(sample("resolver_mock_output"))
    broken = write(tmp_path / "output.jsonl", [lines[0], "{not json\n", *lines[1:]])
    code, _, err = run("inspect", str(broken))
    assert code == 2 and err.count("\n") == 1
    assert f"{broken}:2: invalid or truncated JSONL record" in err


def test_one_json_value_broken_over_several_lines_is_still_not_json(tmp_path: Path) -> None:
    text = json.dumps(json.loads(sample("tau_bench").read_text(encoding="utf-8"))[:2], indent=2)
    broken = tmp_path / "broken.json"
    broken.write_text(text[: len(text) // 2], encoding="utf-8")
    code, _, err = run("inspect", str(broken))
    assert code == 2 and "not JSON" in err and "malformed" not in err


def test_a_json_file_cut_in_a_string_is_named_in_one_sentence(tmp_path: Path) -> None:
    cut_file = tmp_path / "session.json"
    cut_file.write_text('{"messages": [{"role": "user", "content": "fix the bu', encoding="utf-8")
    code, _, err = run("inspect", str(cut_file))
    assert code == 2 and err.count("\n") == 1
    assert "not JSON: Unterminated string starting at line 1 column 43" in err, err
