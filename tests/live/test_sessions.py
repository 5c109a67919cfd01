"""The sessions saved in tests/live/sessions/ (written by the real CLIs, pinned versions): each
loads as one conversation (plus one per subagent) with every word the user typed, the feedback
typed when rejecting a call pinned, and every tool call answered, errors and interruptions marked
as errors. The live test at the end writes every recipe again with the pinned CLIs and checks the
fresh files the same way, so a CLI that writes differently fails here first."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

import compactkit
from compactkit import AgentContext, TextBlock
from compactkit.context import etag_of
from tests.live.clis import CLAUDE_CODE, CODEX, NpmCli
from tests.live.make_sessions import (
    CODEX_SUMMARY,
    CODEX_TASKS,
    COMPACT_PROMPT,
    FEEDBACK,
    INTERACTIVE_TASKS,
    RECIPES,
    SLOW_COMMAND,
    SUBAGENT_PROMPT,
    Recipe,
    generate,
)
from tests.live.sessioncheck import (
    CLI,
    has_tasks,
    load_all_checked,
    load_checked,
    tool_calls,
    tool_results,
    user_texts,
)

REGENERATE = "regenerate them: python -m tests.live.make_sessions (tests/live/README.md)"
BY_NAME = {r.file: r for r in RECIPES}


def writer_version(path: Path, cli: NpmCli) -> set[str]:
    """The CLI version every record names (Claude Code: `version`; Codex: session_meta's)."""
    records = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    if cli is CODEX:
        return {r["payload"]["cli_version"] for r in records if r.get("type") == "session_meta"}
    return {
        r["version"] for r in records if "version" in r and r.get("type") in ("user", "assistant")
    }


def pinned_texts(ctx: AgentContext) -> dict[str, str]:
    """The text of each pin the loader marked, by reason: where the user's words sit in a tool
    result."""
    by_etag = {
        etag_of(part.text): part.text
        for message in ctx.messages
        for block in message.content
        for part in (getattr(block, "content", None) or (block,))
        if isinstance(part, TextBlock)
    }
    return {by_etag[pin.etag]: pin.reason for pin in ctx.pins}


def check_session(recipe: Recipe, path: Path) -> AgentContext:
    """What every session of `recipe` must show, saved or freshly written: one conversation plus
    one per subagent, validated, each tool call answered; every task the user typed a user
    message, in order; the feedback typed when rejecting a call pinned, verbatim."""
    contexts = load_all_checked(path)
    assert len(contexts) == 1 + recipe.subagents, f"{path.name}: {len(contexts)} conversations"
    main = contexts[0]
    assert has_tasks(main, list(recipe.tasks)), (recipe.tasks, user_texts(main))
    pinned = pinned_texts(main)
    assert {text: pinned.get(text) for text in recipe.feedback} == {
        text: "user-feedback" for text in recipe.feedback
    }, pinned
    assert main.metadata["source_format"] == (
        "claude-code" if recipe.cli is CLAUDE_CODE else "codex-rollout"
    )
    return main


def saved_files(recipe: Recipe) -> list[Path]:
    return [recipe.path, *sorted(recipe.subagent_folder.glob("agent-*.jsonl"))]


@pytest.mark.parametrize("recipe", RECIPES, ids=[r.file for r in RECIPES])
def test_saved_session_loads_with_every_word_the_user_typed(recipe: Recipe) -> None:
    assert recipe.path.is_file(), f"{recipe.path} is missing: {REGENERATE}"
    files = saved_files(recipe)
    assert len(files) == 1 + recipe.subagents, f"{files}: {REGENERATE}"
    for file in files:
        assert writer_version(file, recipe.cli) == {recipe.cli.version}, (
            f"{file.name} is not from the pinned CLI: {REGENERATE}"
        )
        assert file.stat().st_size < 100_000  # stays small: the repository stays lean
    main = check_session(recipe, recipe.path)
    assert main.metadata["session_id"] in recipe.path.read_text()


def test_saved_claude_session_marks_the_failed_and_the_denied_tool() -> None:
    ctx = load_checked(BY_NAME["claude-code.jsonl"].path, [])
    by_id = {c.id: c for c in tool_calls(ctx)}
    errors = [(by_id[r.tool_call_id].name, r.text) for r in tool_results(ctx) if r.is_error]
    assert [name for name, _ in errors] == ["Bash", "Edit"]
    assert "No such file or directory" in errors[0][1] and "permission" in errors[1][1]
    assert {c.name for c in tool_calls(ctx)} == {"Bash", "Read", "Edit"}
    assert ctx.metadata["version"] == CLAUDE_CODE.version


def test_saved_codex_session_keeps_the_free_text_patch_and_parallel_calls() -> None:
    ctx = load_checked(BY_NAME["codex-rollout.jsonl"].path, [])
    calls = tool_calls(ctx)
    assert calls[0].name == "apply_patch" and isinstance(calls[0].input, str)
    assert calls[0].input.startswith("*** Begin Patch\n*** Add File: notes.txt")
    parallel = [m for m in ctx.messages if sum(b.type == "tool_call" for b in m.content) == 2]
    assert len(parallel) == 1
    missing = next(c.id for c in calls if c.input == {"cmd": "cat missing.txt"})
    result = next(r for r in tool_results(ctx) if r.tool_call_id == missing)
    assert "cat: missing.txt: No such file or directory" in result.text
    assert ctx.metadata["cli_version"] == CODEX.version


def check_subagent(path: Path) -> None:
    """The Agent call of the main conversation and the subagent's transcript it ran, attached."""
    main, sub = load_all_checked(path)
    agent = next(c for c in tool_calls(main) if c.name == "Agent")
    assert agent.input["prompt"] == SUBAGENT_PROMPT
    assert sub.metadata["parent_tool_call_id"] == agent.id
    assert has_tasks(sub, [SUBAGENT_PROMPT])
    assert [c.input["command"] for c in tool_calls(sub)] == ["wc -w notes.txt"]
    assert sub.messages[-1].text == "Words: 3 notes.txt"
    # the subagent's report came back to the main conversation as the Agent call's result
    report = next(r for r in tool_results(main) if r.tool_call_id == agent.id)
    assert "Words: 3 notes.txt" in report.text and not report.is_error


def test_saved_subagent_session_attaches_the_transcript_to_its_agent_call() -> None:
    check_subagent(BY_NAME["claude-code-subagent.jsonl"].path)


def check_interactive(path: Path) -> AgentContext:
    """The rejected edit with the user's feedback, the turn interrupted with Esc while its tool
    ran, `/compact` and the follow-up, as Claude Code's terminal UI wrote them."""
    ctx = check_session(BY_NAME["claude-code-interactive.jsonl"], path)
    calls = {c.id: c for c in tool_calls(ctx)}
    results = {r.tool_call_id: r for r in tool_results(ctx)}
    # the rejected edit: an error result in which the feedback is its own, pinned, text block
    edit = next(c for c in calls.values() if c.name == "Edit")
    assert results[edit.id].is_error
    assert results[edit.id].text.endswith(f"the user said:\n{FEEDBACK}")
    assert [p.reason for p in ctx.pins] == ["user-feedback"]
    # the interrupted turn: its call answered with an error, then Claude Code's notice, not the
    # user's words
    slow = next(c for c in calls.values() if c.input.get("command") == SLOW_COMMAND)
    assert results[slow.id].is_error and "STOP what you are doing" in results[slow.id].text
    notice = next(m for m in ctx.messages if m.text.startswith("[Request interrupted by user"))
    assert notice.role == "user" and notice.origin == "harness" and not notice.is_human
    # /compact: one conversation across the boundary; the summary recognised as such
    summaries = [m for m in ctx.messages if m.metadata.get("compact_summary")]
    assert len(summaries) == 1 and summaries[0].origin == "summary"
    assert "notes.txt holds alpha, beta and gamma" in summaries[0].text
    skipped = ctx.metadata["skipped_records"]
    assert isinstance(skipped, dict) and skipped["system/compact_boundary"] == 1
    compact = next(m for m in ctx.messages if "<command-name>/compact</command-name>" in m.text)
    assert compact.is_human
    before, after = INTERACTIVE_TASKS[0], INTERACTIVE_TASKS[-1]
    order = [i for i, m in enumerate(ctx.messages) if m.text in (before, after)]
    assert ctx.messages.index(summaries[0]) in range(order[0], order[-1])
    assert COMPACT_PROMPT not in json.dumps(ctx.model_dump(mode="json"))  # the side request
    assert ctx.messages[-1].text == "The last line is gamma"
    return ctx


def test_saved_interactive_session_has_the_rejection_interruption_and_compact() -> None:
    check_interactive(BY_NAME["claude-code-interactive.jsonl"].path)


def test_rejection_feedback_survives_compaction_to_a_small_budget(tmp_path: Path) -> None:
    source = BY_NAME["claude-code-interactive.jsonl"].path
    before = source.read_bytes()
    out = tmp_path / "small.json"
    result = CliRunner().invoke(CLI, ["run", str(source), "--budget", "300", "-o", str(out)])
    assert result.exit_code in (0, 1), result.output  # 1: over budget, written all the same
    assert source.read_bytes() == before  # the input is never modified
    (small,) = compactkit.load(out)
    original = load_checked(source, [])
    assert compactkit.count_tokens(small) < compactkit.count_tokens(original)  # it compacted
    assert FEEDBACK in pinned_texts(small)
    texts = [m.text for m in small.messages]
    for task in INTERACTIVE_TASKS:  # every word the user typed is still there
        assert any(task in text for text in texts), task


def check_codex_interactive(path: Path) -> AgentContext:
    """A command the user rejected and one the user interrupted, each answered "aborted by user"
    and followed by Codex's `<turn_aborted>` notice; what the user said instead is a user message;
    after `/compact` the replacement history, then the follow-up."""
    recipe = BY_NAME["codex-interactive.jsonl"]
    ctx = check_session(recipe, path)
    results = {r.tool_call_id: r for r in tool_results(ctx)}
    stopped = [c for c in tool_calls(ctx) if "aborted by user" in results[c.id].text]
    assert [c.input["cmd"] for c in stopped] == ["echo hi > f.txt", SLOW_COMMAND]
    for call in stopped:
        at = next(i for i, m in enumerate(ctx.messages) if call in m.content)
        notice = ctx.messages[at + 2]  # the call, its result, then the notice
        assert notice.text.startswith("<turn_aborted>") and notice.origin == "harness"
    rejected, instead = CODEX_TASKS[:2]
    texts = [m.text for m in ctx.messages if m.is_human]
    assert texts.index(instead) == texts.index(rejected) + 1
    summary = [m for m in ctx.messages if m.origin == "summary" and CODEX_SUMMARY in m.text]
    assert len(summary) == 1
    follow_up = next(i for i, m in enumerate(ctx.messages) if m.text == CODEX_TASKS[-1])
    assert ctx.messages.index(summary[0]) < follow_up
    assert ctx.messages[-1].text == "The files are listed above."
    return ctx


def test_saved_codex_interactive_session_has_the_rejection_interruption_and_compact() -> None:
    check_codex_interactive(BY_NAME["codex-interactive.jsonl"].path)


# --- the live check: the recipes run again with the pinned CLIs ------------------------------------


@pytest.mark.live
@pytest.mark.parametrize("recipe", RECIPES, ids=[r.file for r in RECIPES])
def test_generator_writes_each_session_again_with_the_pinned_cli(
    recipe: Recipe, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    executable = request.getfixturevalue("claude_cli" if recipe.cli is CLAUDE_CODE else "codex_cli")
    session_file = generate(recipe, tmp_path, executable)
    assert writer_version(session_file, recipe.cli) == {recipe.cli.version}
    check_session(recipe, session_file)
    if recipe.subagents:
        check_subagent(session_file)
    if recipe.file == "claude-code-interactive.jsonl":
        check_interactive(session_file)
    if recipe.file == "codex-interactive.jsonl":
        check_codex_interactive(session_file)
