"""The command line as a user meets it: output, files and exit codes."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest
from click.testing import CliRunner

import compactkit
from compactkit.cli import make_cli
from compactkit.registry import make_registry

from ..conftest import sample

CLI = make_cli(lambda: make_registry(entry_points=False))


def run(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(CLI, list(args))
    return result.exit_code, result.stdout, result.stderr


def _bad_inputs(tmp_path: Path) -> dict[str, tuple[Path | str, str]]:
    # an eval output.jsonl (read whole by OpenHands' tools) is refused at a cut line; agents that
    # skip such a line (Claude Code, pi, Codex) are read with a warning (test_malformed_lines.py)
    real = sample("resolver_mock").read_text(encoding="utf-8")
    lines = real.splitlines(keepends=True)
    truncated = tmp_path / "truncated.jsonl"
    truncated.write_text(lines[0] + lines[1][: len(lines[1]) // 2] + "\n" + lines[0])
    garbage = tmp_path / "garbage.json"
    garbage.write_bytes(bytes(range(256)) * 4)
    empty = tmp_path / "empty.json"
    empty.write_text("")
    notjson = tmp_path / "notes.json"
    notjson.write_text("this is not json\nat all\n")
    unknown = tmp_path / "unknown.json"
    unknown.write_text('{"hello": "world", "items": [1, 2, 3]}')
    return {
        "missing": (tmp_path / "nope.jsonl", "no such file"),
        "truncated": (truncated, ":2: invalid or truncated JSONL record"),
        "garbage": (garbage, "binary data"),
        "empty": (empty, "file is empty"),
        "not json": (notjson, "not JSON"),
        "unknown format": (unknown, "unknown session format"),
        "index out of range": (f"{sample('resolver_mock')}#7", "#7 out of range"),
    }


@pytest.mark.parametrize(
    "case",
    [
        "missing",
        "truncated",
        "garbage",
        "empty",
        "not json",
        "unknown format",
        "index out of range",
    ],
)
def test_bad_input_is_one_line_naming_the_file_with_exit_2(tmp_path: Path, case: str) -> None:
    path, expected = _bad_inputs(tmp_path)[case]
    code, out, err = run("inspect", str(path))
    assert code == 2
    assert out == ""
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert expected in lines[0]
    assert str(path).split("#")[0] in lines[0]
    assert "Traceback" not in err


def test_debug_adds_the_traceback(tmp_path: Path) -> None:
    path, _ = _bad_inputs(tmp_path)["unknown format"]
    code, _, err = run("--debug", "inspect", str(path))
    assert code == 2
    assert "Traceback" in err


def test_inspect_json_reports_each_conversation() -> None:
    path = sample("resolver_mock")
    code, out, _ = run("inspect", "--json", str(path))
    assert code == 0
    reports = [json.loads(line) for line in out.splitlines()]
    contexts = compactkit.load(path)
    assert len(reports) == len(contexts) == 2
    for n, (report, ctx) in enumerate(zip(reports, contexts, strict=False)):
        assert report["conversation"] == n
        assert report["format"] == "openhands-events"
        assert report["messages"] == len(ctx.messages)
        assert report["tokens"] == compactkit.count_tokens(ctx)
        calls = sum(len(m.tool_calls) for m in ctx.messages)
        assert report["tool_calls"] == calls > 0
        assert report["tool_results"] == sum(len(m.tool_results) for m in ctx.messages)
        assert sum(report["tokens_by_kind"].values()) == report["tokens"]
    code, out, _ = run("inspect", "--json", f"{path}#1")
    assert [json.loads(line)["conversation"] for line in out.splitlines()] == [1]


def test_inspect_human_output_shows_sizes_and_largest_blocks() -> None:
    code, out, _ = run("inspect", str(sample("test-repo-i1")))
    assert code == 0
    assert "format=swe-agent" in out
    assert "largest blocks" in out
    assert "tokens by role" in out


def test_convert_writes_atomically_and_never_touches_the_input(tmp_path: Path) -> None:
    src = sample("claude-code-viewer")
    digest = hashlib.sha256(src.read_bytes()).hexdigest()
    out = tmp_path / "ctx.json"
    code, _, err = run("convert", str(src), "--to", "compactkit", "-o", str(out))
    assert code == 0, err
    assert compactkit.load_one(out) == compactkit.load_one(src)
    code, _, err = run("convert", str(src), "--to", "openai-chat", "-o", str(tmp_path / "o.json"))
    assert code == 0, err
    assert json.loads((tmp_path / "o.json").read_text())
    assert hashlib.sha256(src.read_bytes()).hexdigest() == digest
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ctx.json", "o.json"]


def test_convert_to_a_format_without_writer_is_a_usage_error(tmp_path: Path) -> None:
    code, _, err = run("convert", str(sample("claude-code-viewer")), "--to", "gemini-cli")
    assert code == 2
    assert "cannot be written" in err
    code, _, err = run("convert", str(sample("claude-code-viewer")), "--to", "nope")
    assert code == 2
    assert "unknown format 'nope'" in err


def test_formats_plugins_strategies_and_version() -> None:
    code, out, _ = run("formats", "--json")
    names = {f["name"] for f in json.loads(out)["formats"]}
    assert {"claude-code", "codex-rollout", "pi-session", "openhands-events"} <= names
    code, out, _ = run("plugins", "--json")
    assert code == 0
    assert all(p["ok"] for p in json.loads(out)["plugins"])
    code, out, _ = run("strategies", "--json")
    assert code == 0 and json.loads(out)["schema"] == "compactkit.strategies/1"
    code, out, _ = run("--version")
    assert compactkit.__version__ in out
