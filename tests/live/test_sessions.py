"""The sessions saved in tests/live/sessions/ (written by the real CLIs, pinned versions): each
loads as one conversation with the user's words and every tool pair, errors marked as errors."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.live.clis import CLAUDE_CODE, CODEX
from tests.live.make_sessions import RECIPES, SESSIONS, Recipe
from tests.live.sessioncheck import load_checked, tool_calls, tool_results

REGENERATE = "regenerate them: python -m tests.live.make_sessions (tests/live/README.md)"


def writer_version(path: Path) -> set[str]:
    """The CLI version every record names (Claude Code: `version`; Codex: session_meta's)."""
    records = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    if path.name.startswith("codex"):
        return {r["payload"]["cli_version"] for r in records if r.get("type") == "session_meta"}
    return {
        r["version"] for r in records if "version" in r and r.get("type") in ("user", "assistant")
    }


@pytest.mark.parametrize("recipe", RECIPES, ids=[r.file for r in RECIPES])
def test_saved_session_loads_with_every_task_and_tool_pair(recipe: Recipe) -> None:
    path = SESSIONS / recipe.file
    assert path.is_file(), f"{path} is missing: {REGENERATE}"
    assert writer_version(path) == {recipe.cli.version}, (
        f"{path.name} is not from the pinned CLI: {REGENERATE}"
    )
    ctx = load_checked(path, list(recipe.tasks))
    assert ctx.metadata["session_id"] in path.read_text()
    assert path.stat().st_size < 100_000  # stays small: the repository stays lean


def test_saved_claude_session_marks_the_failed_and_the_denied_tool() -> None:
    ctx = load_checked(SESSIONS / "claude-code.jsonl", [])
    by_id = {c.id: c for c in tool_calls(ctx)}
    errors = [(by_id[r.tool_call_id].name, r.text) for r in tool_results(ctx) if r.is_error]
    assert [name for name, _ in errors] == ["Bash", "Edit"]
    assert "No such file or directory" in errors[0][1] and "permission" in errors[1][1]
    assert {c.name for c in tool_calls(ctx)} == {"Bash", "Read", "Edit"}
    assert ctx.metadata["source_format"] == "claude-code"
    assert ctx.metadata["version"] == CLAUDE_CODE.version


def test_saved_codex_session_keeps_the_free_text_patch_and_parallel_calls() -> None:
    ctx = load_checked(SESSIONS / "codex-rollout.jsonl", [])
    calls = tool_calls(ctx)
    assert calls[0].name == "apply_patch" and isinstance(calls[0].input, str)
    assert calls[0].input.startswith("*** Begin Patch\n*** Add File: notes.txt")
    parallel = [m for m in ctx.messages if sum(b.type == "tool_call" for b in m.content) == 2]
    assert len(parallel) == 1
    missing = next(c.id for c in calls if c.input == {"cmd": "cat missing.txt"})
    result = next(r for r in tool_results(ctx) if r.tool_call_id == missing)
    assert "cat: missing.txt: No such file or directory" in result.text
    assert ctx.metadata["source_format"] == "codex-rollout"
    assert ctx.metadata["cli_version"] == CODEX.version
