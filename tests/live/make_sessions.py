"""Regenerate tests/live/sessions/: sessions written by the real CLIs (pinned in clis.py) against
the scripted fake model, each checked with compactkit before it is saved.

    python -m tests.live.make_sessions          # from the repository root

Each recipe runs a task, then resumes the session with a follow-up, in a fresh sandbox at a fixed
path (so regenerated files differ only where the CLI writes ids and times). Run it after bumping a
pinned CLI version; tests/live/test_sessions.py fails until the saved files match the pins.
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from tests.live.clis import CLAUDE_CODE, CODEX, CliRun, NpmCli, Sandbox, run_claude, run_codex
from tests.live.sessioncheck import load_checked
from tests.live.upstream import (
    FakeUpstream,
    RecordedRequest,
    ToolCall,
    Turn,
    answer,
    call,
    last_tool_result,
)

SESSIONS = Path(__file__).resolve().parent / "sessions"
WORKDIR = Path(tempfile.gettempdir()) / "compactkit-live-sessions"

Scripts = Callable[[Sandbox], tuple[list[Turn], list[Turn]]]


@dataclass(frozen=True)
class Recipe:
    file: str  # the name under sessions/
    cli: NpmCli
    tasks: tuple[str, str]  # what the user typed: the task, then the follow-up after resuming
    scripts: Scripts  # the model's turns for each, given the sandbox (for absolute paths)
    extra_args: Sequence[str] = ()


def _results_summary(request: RecordedRequest) -> str:
    """The final answer: the last line of the last tool result the model saw."""
    lines = last_tool_result(request).strip().splitlines() or [""]
    return f"Done: {lines[-1]}"


def claude_scripts(sandbox: Sandbox) -> tuple[list[Turn], list[Turn]]:
    notes = str(sandbox.workspace / "notes.txt")
    task = [
        call("Bash", command="printf 'alpha\\nbeta\\n' > notes.txt", description="Write notes.txt"),
        call("Read", file_path=notes),
        Turn(
            text="Counting lines and checking the other file at once.",
            tool_calls=(
                ToolCall("Bash", {"command": "wc -l notes.txt", "description": "Count lines"}),
                ToolCall("Bash", {"command": "cat missing.txt", "description": "Read missing.txt"}),
            ),
        ),
        # Edit is offered but not allowed (--allowedTools Bash,Read): -p mode denies it
        call("Edit", file_path=notes, old_string="beta", new_string="gamma"),
        answer(_results_summary),
    ]
    follow_up = [
        call("Bash", command="wc -w notes.txt", description="Count words"),
        answer(_results_summary),
    ]
    return task, follow_up


def codex_scripts(sandbox: Sandbox) -> tuple[list[Turn], list[Turn]]:
    patch = "*** Begin Patch\n*** Add File: notes.txt\n+alpha\n+beta\n*** End Patch\n"
    task = [
        Turn(tool_calls=(ToolCall("apply_patch", patch),)),  # a custom (free-text) tool
        Turn(
            text="Counting lines and checking the other file at once.",
            tool_calls=(
                ToolCall("exec_command", {"cmd": "wc -l notes.txt"}),
                ToolCall("exec_command", {"cmd": "cat missing.txt"}),
            ),
        ),
        answer(_results_summary),
    ]
    follow_up = [call("exec_command", cmd="wc -w notes.txt"), answer(_results_summary)]
    return task, follow_up


RECIPES = [
    Recipe(
        "claude-code.jsonl",
        CLAUDE_CODE,
        (
            "Put alpha and beta on two lines in notes.txt, read it back, count its lines, check "
            "missing.txt, and change beta to gamma.",
            "Now count the words in notes.txt.",
        ),
        claude_scripts,
        ("--bare",),  # minimal mode: the same records without the ~100 KB of listings per file
    ),
    Recipe(
        "codex-rollout.jsonl",
        CODEX,
        (
            "Create notes.txt with alpha and beta, count its lines and check missing.txt.",
            "Now count the words in notes.txt.",
        ),
        codex_scripts,
    ),
]


def run(recipe: Recipe, sandbox: Sandbox, upstream: FakeUpstream) -> CliRun:
    """The task, then the follow-up resuming it; the resumed run (its file holds both)."""
    runner = run_claude if recipe.cli is CLAUDE_CODE else run_codex
    resume: str | None = None
    for task, script in zip(recipe.tasks, recipe.scripts(sandbox), strict=True):
        done = runner(
            task,
            sandbox,
            upstream=upstream,
            script=script,
            resume=resume,
            extra_args=recipe.extra_args,
        )
        assert done.returncode == 0 and done.session_id and done.session_file, done.describe()
        resume = done.session_id
    assert upstream.problems == [], upstream.problems
    return done


def main() -> None:
    SESSIONS.mkdir(exist_ok=True)
    for recipe in RECIPES:
        shutil.rmtree(WORKDIR, ignore_errors=True)
        sandbox = Sandbox.create(WORKDIR)
        with FakeUpstream() as upstream:
            last = run(recipe, sandbox, upstream)
        assert last.session_file is not None
        load_checked(last.session_file, list(recipe.tasks))
        shutil.copyfile(last.session_file, SESSIONS / recipe.file)
        size = (SESSIONS / recipe.file).stat().st_size
        print(f"{recipe.file}: {recipe.cli.package}@{recipe.cli.version}, {size:,} bytes")
    shutil.rmtree(WORKDIR, ignore_errors=True)


if __name__ == "__main__":
    main()
