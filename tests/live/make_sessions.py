"""Regenerate tests/live/sessions/: sessions written by the real CLIs (pinned in clis.py) against
the scripted fake model, each checked with compactkit before it is saved.

    python -m tests.live.make_sessions          # from the repository root
    python -m tests.live.make_sessions codex-interactive.jsonl      # only the sessions named

A headless recipe runs a task with `claude -p` / `codex exec`, then resumes the session with each
follow-up; the interactive one types its tasks into Claude Code's terminal UI (tests/live/terminal.py),
where only a user can reject a call with feedback, interrupt a turn with Esc and type `/compact`.
Each runs in a fresh sandbox at a fixed path (so regenerated files differ only where the CLI writes
ids and times). Run it after bumping a pinned CLI version; tests/live/test_sessions.py fails until
the saved files match the pins, and its live test runs every recipe again with the pinned CLIs.
"""

from __future__ import annotations

import shutil
import sys
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from tests.live.clis import (
    CLAUDE_CODE,
    CODEX,
    NpmCli,
    Sandbox,
    offers_exec_command,
    run_claude,
    run_codex,
    start_claude_tui,
    start_codex_tui,
)
from tests.live.sessioncheck import load_all_checked
from tests.live.terminal import Terminal, TerminalError
from tests.live.upstream import (
    FakeUpstream,
    RecordedRequest,
    Script,
    ToolCall,
    Turn,
    answer,
    call,
    last_tool_result,
)

SESSIONS = Path(__file__).resolve().parent / "sessions"
WORKDIR = Path(tempfile.gettempdir()) / "compactkit-live-sessions"

Scripts = Callable[[Sandbox], Sequence[Script | Sequence[Turn]]]
Interactive = Callable[[Sandbox, FakeUpstream, Path | None], Path]


@dataclass(frozen=True)
class Recipe:
    file: str  # the name under sessions/ (its subagents' files: <stem>/subagents/)
    cli: NpmCli
    tasks: tuple[str, ...]  # what the user typed, in order
    scripts: Scripts | None = None  # headless: the model's turns for the task and each follow-up
    interactive: Interactive | None = None  # or: types the tasks into the UI, returns the file
    extra_args: Sequence[str] = ()
    allowed_tools: Sequence[str] = ("Bash", "Read")
    feedback: tuple[str, ...] = ()  # what the user typed when rejecting a call
    subagents: int = 0  # subagent transcripts the session brings

    @property
    def path(self) -> Path:
        return SESSIONS / self.file

    @property
    def subagent_folder(self) -> Path:
        return SESSIONS / Path(self.file).stem / "subagents"


def _last_line(prefix: str) -> Callable[[RecordedRequest], str]:
    """A final answer quoting the last line of the last tool result the model saw."""
    return lambda request: (
        f"{prefix} {(last_tool_result(request).strip().splitlines() or [''])[-1]}"
    )


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
        answer(_last_line("Done:")),
    ]
    follow_up = [
        call("Bash", command="wc -w notes.txt", description="Count words"),
        answer(_last_line("Done:")),
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
        answer(_last_line("Done:")),
    ]
    follow_up = [call("exec_command", cmd="wc -w notes.txt"), answer(_last_line("Done:"))]
    return task, follow_up


SUBAGENT_PROMPT = "Count the words of notes.txt with wc -w and report the number."


def subagent_scripts(sandbox: Sandbox) -> tuple[Script, list[Turn]]:
    task = Script(
        [
            call("Bash", command="printf 'alpha beta\\ngamma\\n' > notes.txt", description="Write"),
            call(
                "Agent",
                description="Count words",
                prompt=SUBAGENT_PROMPT,
                subagent_type="general-purpose",
                run_in_background=False,  # the default runs it in the background, out of order
            ),
            answer(_last_line("The subagent reports:")),
        ],
        threads={
            SUBAGENT_PROMPT: [
                call("Bash", command="wc -w notes.txt", description="Count words"),
                answer(_last_line("Words:")),
            ]
        },
    )
    follow_up = [
        call("Bash", command="tail -n 1 notes.txt", description="Show the last line"),
        answer(_last_line("The last line is")),
    ]
    return task, follow_up


# --- the interactive session -----------------------------------------------------------------

FEEDBACK = "No, keep beta and add gamma as a third line instead."
SLOW_COMMAND = "touch build.started && sleep 60 && ls"  # the file says the tool is running
COMPACT_PROMPT = "CRITICAL: Respond with TEXT ONLY. Do NOT call any tools."  # /compact's request
SUMMARY = (
    "<analysis>The user wrote notes.txt, rejected an edit and interrupted a build.</analysis>\n"
    "<summary>1. notes.txt holds alpha, beta and gamma (the user asked to keep beta).\n"
    "2. notes.bak does not exist.\n3. The user interrupted the slow build.</summary>"
)
INTERACTIVE_TASKS = (
    "Put alpha and beta on two lines in notes.txt, then change beta to gamma.",
    "Run the slow build and list the files.",
    "/compact",
    "Now show the last line of notes.txt.",
)
"""What the user types in the interactive session, in order; when rejecting the edit the user
also types `FEEDBACK`."""


def interactive_script(sandbox: Sandbox) -> Script:
    notes = str(sandbox.workspace / "notes.txt")
    main = [
        call("Bash", command="printf 'alpha\\nbeta\\n' > notes.txt", description="Write notes.txt"),
        call("Edit", file_path=notes, old_string="beta", new_string="gamma"),  # rejected
        Turn(
            text="Keeping beta; appending gamma and checking the backup at once.",
            tool_calls=(
                ToolCall(
                    "Bash", {"command": "echo gamma >> notes.txt", "description": "Add gamma"}
                ),
                ToolCall("Bash", {"command": "cat notes.bak", "description": "Read notes.bak"}),
            ),
        ),
        answer("notes.txt now holds alpha, beta and gamma; there is no notes.bak."),
        call("Bash", command=SLOW_COMMAND, description="Run the slow build"),  # interrupted
        call("Bash", command="tail -n 1 notes.txt", description="Show the last line"),
        answer(_last_line("The last line is")),
    ]
    # /compact asks the model for a summary (a request of its own, tools offered); it may ask twice
    return Script(main, threads={COMPACT_PROMPT: [answer(SUMMARY)] * 2})


def run_interactive(
    sandbox: Sandbox, upstream: FakeUpstream, executable: Path | None = None
) -> Path:
    """`INTERACTIVE_TASKS` typed into Claude Code's terminal UI (`--bare`): the edit rejected
    with `FEEDBACK`, a turn interrupted with Esc while its tool runs, `/compact`, a follow-up.
    Returns the session file."""
    first, slow, compact, follow_up = INTERACTIVE_TASKS
    idle = "? for shortcuts"  # the prompt line when no turn runs
    with start_claude_tui(
        sandbox,
        upstream=upstream,
        script=interactive_script(sandbox),
        extra_args=("--bare",),
        executable=executable,
    ) as term:
        term.wait_for(idle)
        mark = term.mark()
        term.submit(first)
        term.wait_for("Do you want to make this edit", since=mark)
        term.press("down", "down", "tab")  # "No", then Tab to tell Claude what to do instead
        term.type(FEEDBACK)
        term.press("enter")
        term.wait_for(idle, since=term.wait_for("there is no notes.bak", since=mark))

        mark = term.mark()
        term.submit(slow)
        started = sandbox.workspace / "build.started"
        term.wait_until(started.exists, "the slow build to start")
        term.press("esc")
        term.wait_for("Interrupted", since=mark)

        mark = term.mark()
        term.submit(compact)
        term.wait_for(idle, since=term.wait_for("Compacted", since=mark))

        mark = term.mark()
        term.submit(follow_up)
        term.wait_for(idle, since=term.wait_for("The last line is gamma", since=mark))
    assert upstream.problems == [], upstream.problems
    found = sorted((sandbox.home / ".claude" / "projects").glob("*/*.jsonl"))
    assert len(found) == 1, found
    return found[0]


CODEX_TASKS = (
    "Create f.txt with hi in it.",
    "No, don't create files. Count the lines of notes.txt instead.",
    "Run the slow build.",
    "/compact",
    "Now list the files.",
)
"""What the user types into Codex's UI: a task whose command the user rejects (Esc: "No, and tell
Codex what to do differently"), what the user says instead, a task interrupted with Esc while its
approved command runs, `/compact` (Codex records no message for it), a follow-up."""
CODEX_SUMMARY = "The user declined f.txt; notes.txt is missing; the slow build was interrupted."


def codex_interactive_script(sandbox: Sandbox) -> Script:
    def escalated(command: str, why: str) -> Turn:
        arguments = {
            "cmd": command,
            "sandbox_permissions": "require_escalated",
            "justification": why,
        }
        return Turn(tool_calls=(ToolCall("exec_command", arguments),))

    main = [
        escalated("echo hi > f.txt", "Write f.txt"),  # rejected
        call("exec_command", cmd="wc -l notes.txt"),
        answer(_last_line("wc says:")),
        escalated(SLOW_COMMAND, "Run the slow build"),  # approved, then interrupted
        call("exec_command", cmd="ls"),
        answer("The files are listed above."),
    ]
    # the title and the /compact summary are side requests (no shell tool offered)
    return Script(main, is_turn=offers_exec_command, side_text=CODEX_SUMMARY)


def choose_existing_model(term: Terminal) -> None:
    """Move Codex's model announcement to "Use existing model". A key pressed before the menu
    takes keys is lost (a loaded machine: Enter then took "Try new model", whose tools the script
    does not offer), so press until the screen shows the choice selected."""
    for _ in range(10):
        mark = term.mark()
        term.press("down")
        try:
            term.wait_for(
                "\u203a 2. Use existing model", since=mark, timeout=5
            )  # the selection mark
            return
        except TerminalError:
            continue
    raise TerminalError(f"'Use existing model' never showed selected\nscreen tail:\n{term.tail()}")


def run_codex_interactive(
    sandbox: Sandbox, upstream: FakeUpstream, executable: Path | None = None
) -> Path:
    """`CODEX_TASKS` typed into Codex's terminal UI; returns the rollout file."""
    rejected, instead, slow, compact, follow_up = CODEX_TASKS
    idle = "? for shortcuts"
    with start_codex_tui(
        sandbox, upstream=upstream, script=codex_interactive_script(sandbox), executable=executable
    ) as term:
        # a model announcement comes first for the pinned model: keep the configured one
        term.wait_for("Use existing model")
        choose_existing_model(term)
        mark = term.mark()
        term.press("enter")
        term.wait_for(idle, since=mark)

        mark = term.mark()
        term.submit(rejected)
        term.wait_for("Would you like to run the following command", since=mark)
        term.press("esc")  # "No, and tell Codex what to do differently"
        term.wait_for("Conversation interrupted", since=mark)

        mark = term.mark()
        term.submit(instead)
        term.wait_for("wc says:", since=mark)

        mark = term.mark()
        term.submit(slow)
        term.wait_for("Would you like to run the following command", since=mark)
        term.press("enter")  # "Yes, proceed"
        term.wait_until((sandbox.workspace / "build.started").exists, "the slow build to start")
        term.press("esc")
        term.wait_for("Conversation interrupted", since=mark)

        mark = term.mark()
        term.submit(compact)
        term.wait_for("Context compacted", since=mark)

        mark = term.mark()
        term.submit(follow_up)
        term.wait_for("The files are listed above.", since=mark)
        term.pump(1)  # let it write the end of the turn
    assert upstream.problems == [], upstream.problems
    found = sorted((sandbox.codex_home / "sessions").rglob("rollout-*.jsonl"))
    assert len(found) == 1, found
    return found[0]


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
        # minimal mode: the same records without the ~100 KB of listings per file
        extra_args=("--bare",),
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
    Recipe(
        "claude-code-subagent.jsonl",
        CLAUDE_CODE,
        ("Use a subagent to count the words in notes.txt.", "Now show the last line of notes.txt."),
        subagent_scripts,
        # --bare has no Agent tool; two tools and a one-line system prompt, not recorded, keep
        # the files small
        extra_args=(
            "--tools",
            "Bash,Agent",
            "--system-prompt-snapshot",
            "off",
            "--system-prompt",
            "You are a coding agent. Use the tools to do what the user asks.",
        ),
        allowed_tools=("Bash", "Agent"),
        subagents=1,
    ),
    Recipe(
        "claude-code-interactive.jsonl",
        CLAUDE_CODE,
        INTERACTIVE_TASKS,
        interactive=run_interactive,
        feedback=(FEEDBACK,),
    ),
    Recipe(
        "codex-interactive.jsonl",
        CODEX,
        tuple(
            task for task in CODEX_TASKS if task != "/compact"
        ),  # the rollout has no record of it
        interactive=run_codex_interactive,
    ),
]


def run_headless(
    recipe: Recipe, sandbox: Sandbox, upstream: FakeUpstream, executable: Path | None = None
) -> Path:
    """The task, then each follow-up resuming it; the session file (it holds them all)."""
    assert recipe.scripts is not None
    resume: str | None = None
    scripts = recipe.scripts(sandbox)
    for task, script in zip(recipe.tasks, scripts, strict=True):
        if recipe.cli is CLAUDE_CODE:
            done = run_claude(
                task,
                sandbox,
                upstream=upstream,
                script=script,
                resume=resume,
                allowed_tools=recipe.allowed_tools,
                extra_args=recipe.extra_args,
                executable=executable,
            )
        else:
            done = run_codex(
                task,
                sandbox,
                upstream=upstream,
                script=script,
                resume=resume,
                extra_args=recipe.extra_args,
                executable=executable,
            )
        assert done.returncode == 0 and done.session_id and done.session_file, done.describe()
        resume = done.session_id
    assert upstream.problems == [], upstream.problems
    assert done.session_file is not None
    return done.session_file


def generate(recipe: Recipe, workdir: Path, executable: Path | None = None) -> Path:
    """Run `recipe` in a fresh sandbox under `workdir` against a fresh fake model; the session
    file the CLI wrote (a Claude Code subagent's beside it, in `<session id>/subagents/`)."""
    shutil.rmtree(workdir, ignore_errors=True)
    sandbox = Sandbox.create(workdir)
    with FakeUpstream() as upstream:
        if recipe.interactive is not None:
            return recipe.interactive(sandbox, upstream, executable)
        return run_headless(recipe, sandbox, upstream, executable)


def save(recipe: Recipe, session_file: Path) -> None:
    """Copy the session file, and its subagents' files, unchanged to `recipe.path`."""
    shutil.copyfile(session_file, recipe.path)
    shutil.rmtree(recipe.subagent_folder.parent, ignore_errors=True)
    written = session_file.with_suffix("") / "subagents"
    if written.is_dir():
        recipe.subagent_folder.mkdir(parents=True)
        for transcript in sorted(written.glob("agent-*.jsonl")):
            shutil.copyfile(transcript, recipe.subagent_folder / transcript.name)


def main(names: Sequence[str] = ()) -> None:
    """Regenerate the sessions named (all when none is)."""
    unknown = set(names) - {r.file for r in RECIPES}
    assert not unknown, f"no recipe for {sorted(unknown)}: {[r.file for r in RECIPES]}"
    SESSIONS.mkdir(exist_ok=True)
    for recipe in RECIPES:
        if names and recipe.file not in names:
            continue
        session_file = generate(recipe, WORKDIR)
        contexts = load_all_checked(session_file)
        assert len(contexts) == 1 + recipe.subagents, (
            f"{recipe.file}: {len(contexts)} conversations"
        )
        save(recipe, session_file)
        files = [recipe.path, *sorted(recipe.subagent_folder.glob("*.jsonl"))]
        sizes = " + ".join(f"{f.stat().st_size:,}" for f in files)
        print(f"{recipe.file}: {recipe.cli.package}@{recipe.cli.version}, {sizes} bytes")
    shutil.rmtree(WORKDIR, ignore_errors=True)


if __name__ == "__main__":
    main(sys.argv[1:])
