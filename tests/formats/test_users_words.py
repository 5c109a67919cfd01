"""The user's words that agents store outside plain user messages (inside tool results, or in a
user turn the agent wrote itself) are pinned by each adapter, and every strategy keeps them.

Records follow each upstream's writer (cited per section). For each format: (a) the words are cut
out as text blocks of their own, pinned (`compactkit.pins.resolve`), and the tool result renders
exactly as recorded; (b) on a long session the default pipeline and every built-in strategy keep
each pinned text verbatim while compacting the rest; (c) on the corpus, every such pin survives
`default` at 30,000 tokens and at a tight budget (the counts found are printed with `-s`).
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest

import compactkit
from compactkit import AgentContext
from compactkit.context import TextBlock
from compactkit.context import etag_of as etag
from compactkit.defaults import default_pipeline
from compactkit.pins import resolve
from compactkit.pipeline import build_pipeline
from compactkit.registry import count_tokens

from ..conftest import CORPUS, corpus_files
from . import test_claude_code as cc
from . import test_cline as cline
from . import test_codex as codex
from . import test_gemini_cli as gemini
from . import test_opencode as opencode
from . import test_openhands as openhands
from . import test_pi as pi
from .shapes import crush_schema

ADAPTER_REASONS = ("user-feedback", "user-answer", "user-command")
OUTPUT = "\n".join(f"{i:04d} " + "build log line, nothing the user said " * 3 for i in range(150))
"""A tool output big enough (about 3,000 tokens) that a few of them overflow every budget."""

TIGHT = 2_000
STRATEGIES: dict[str, list[str]] = {
    "default": default_pipeline(TIGHT),
    "sliding-window": [f"sliding-window:max_tokens={TIGHT}"],
    "observation-mask": ["observation-mask:keep_last=1"],
    "llm-summary": [f"llm-summary:max_tokens={TIGHT}"],
    "static-elision": ["static-elision"],
    "etag-collapse": ["etag-collapse"],
}


def texts(ctx: AgentContext) -> list[str]:
    """Every text block of `ctx`, tool-result parts included."""
    out: list[str] = []
    for msg in ctx.messages:
        for block in msg.content:
            if isinstance(block, TextBlock):
                out.append(block.text)
            elif block.type == "tool_result":
                out.extend(p.text for p in block.content if isinstance(p, TextBlock))
    return out


def marked(ctx: AgentContext) -> list[tuple[str, str]]:
    """(reason, text) of every text the adapter pinned, in order."""
    stored = {(p.chars, p.etag): p.reason for p in ctx.pins}
    found = [(stored[(len(t), etag(t))], t) for t in texts(ctx) if (len(t), etag(t)) in stored]
    resolved = {(p.chars, p.etag) for p in resolve(ctx) if p.reason in ADAPTER_REASONS}
    assert {(len(t), etag(t)) for _, t in found} == resolved  # resolve finds exactly those
    return found


def assert_every_strategy_keeps(ctx: AgentContext, words: list[str]) -> None:
    """Each strategy compacts `ctx` (those with a budget bring it under) and keeps `words`, each
    a whole text block, verbatim."""
    before = count_tokens(ctx)
    assert before > 4 * TIGHT, "the session must be long enough for the strategies to act"
    for name, specs in STRATEGIES.items():
        result = build_pipeline(specs, budget=TIGHT).run(ctx)
        assert result.tokens_after < before, f"{name} did nothing"
        have = texts(result.context)
        for text in words:
            assert text in have, f"{name} lost the user's words {text[:40]!r}"


def result_texts(ctx: AgentContext) -> dict[str, str]:
    """Each tool result's text (its parts joined by newlines), by call id."""
    return {r.tool_call_id: r.text for m in ctx.messages for r in m.tool_results}


# --------------------------------------------------------------------------- Claude Code
# src/utils/messages.ts (REJECT_MESSAGE_WITH_REASON_PREFIX, MEMORY_CORRECTION_HINT),
# src/hooks/toolPermission/PermissionContext.ts (`cancelAndAbort`: prefix + the user's feedback),
# src/services/tools/toolExecution.ts (`addToolResult`: an approval's `acceptFeedback` is a text
# block after the tool_result), src/tools/AskUserQuestionTool (mapToolResultToToolResultBlockParam)

CC_REJECT = (
    "The user doesn't want to proceed with this tool use. The tool use was rejected (eg. if it "
    "was a file edit, the new_string was NOT written to the file). To tell you how to proceed, "
    "the user said:\n"
)
CC_HINT = (
    "\n\nNote: The user's next message may contain a correction or preference. Pay close "
    "attention — if they explain what went wrong or how they'd prefer you to work, consider "
    "saving that to memory for future sessions."
)
CC_FEEDBACK = "use pnpm, not npm\nand never touch the lockfile"
CC_ANSWER = (
    'User has answered your questions: "Which database?"="Postgres" user notes: the staging '
    "one, not prod. You can now continue with the user's answers in mind."
)
CC_APPROVAL = "yes, but only in src/"


def claude_code_session(tmp_path: Path, filler: int) -> AgentContext:
    s = cc._Session("2.1.88")
    s.user("make the build pass")

    def tool(call_id: str, name: str, args: Any, output: str, *after: Any, **result: Any) -> None:
        s.assistant(
            {"type": "tool_use", "id": call_id, "name": name, "input": args}, stop="tool_use"
        )
        block = {"type": "tool_result", "tool_use_id": call_id, "content": output, **result}
        s.user([block, *after])

    def bash(call_id: str, command: str, output: str) -> None:
        tool(call_id, "Bash", {"command": command}, output)

    for n in range(filler):
        bash(f"toolu_a{n}", f"npm run build -- --step {n}", OUTPUT)
    tool("toolu_r", "Bash", {"command": "npm i"}, CC_REJECT + CC_FEEDBACK + CC_HINT, is_error=True)
    s.user([cc._text("[Request interrupted by user for tool use]")])
    for n in range(filler):
        bash(f"toolu_b{n}", f"pnpm build --step {n}", OUTPUT)
    question = {"questions": [{"question": "Which database?", "header": "DB"}]}
    tool("toolu_q", "AskUserQuestion", question, CC_ANSWER)
    edited = "The file a.ts was updated."
    tool("toolu_e", "Edit", {"file_path": "a.ts"}, edited, cc._text(CC_APPROVAL))
    for n in range(filler):
        bash(f"toolu_c{n}", f"pnpm test --shard {n}", OUTPUT)
    s.assistant(cc._text("Done."))
    (ctx,) = s.load(tmp_path)
    return ctx


def test_claude_code_rejection_feedback_and_answers_are_pinned(tmp_path: Path) -> None:
    ctx = claude_code_session(tmp_path, filler=0)
    assert marked(ctx) == [("user-feedback", CC_FEEDBACK), ("user-answer", CC_ANSWER)]
    results = result_texts(ctx)
    assert results["toolu_r"] == CC_REJECT + CC_FEEDBACK + CC_HINT  # renders as recorded
    assert results["toolu_q"] == CC_ANSWER
    # an approval's text is a user message of its own: the human's words, pinned as such
    approval = next(m for m in ctx.messages if m.text == CC_APPROVAL)
    assert approval.is_human
    assert any(p.reason == "last-request" and p.preview == CC_APPROVAL for p in resolve(ctx))


EDITED_PLAN = "1. Add the retry\n2. Keep the old API (do not remove it)"


def test_claude_code_plan_edited_by_the_user_is_pinned(tmp_path: Path) -> None:
    """src/tools/ExitPlanModeTool/ExitPlanModeV2Tool.ts (mapToolResultToToolResultBlockParam):
    the plan as the user edited it follows "## Approved Plan (edited by user):"."""
    approved = (
        "User has approved your plan. You can now start coding. Start with updating your todo "
        "list if applicable\n\nYour plan has been saved to: /home/dev/.claude/plans/p.md\nYou "
        "can refer back to it if needed during implementation.\n\n## Approved Plan"
    )
    s = cc._Session("2.1.88")
    s.user("plan the retry")
    for n, label in enumerate((" (edited by user):", ":")):
        s.assistant(
            {"type": "tool_use", "id": f"toolu_p{n}", "name": "ExitPlanMode", "input": {}},
            stop="tool_use",
        )
        result = approved + f"{label}\n" + EDITED_PLAN
        s.user([{"type": "tool_result", "tool_use_id": f"toolu_p{n}", "content": result}])
    s.assistant(cc._text("Starting."))
    (ctx,) = s.load(tmp_path)
    assert marked(ctx) == [("user-feedback", EDITED_PLAN)]  # only the plan the user edited
    assert result_texts(ctx)["toolu_p0"] == approved + " (edited by user):\n" + EDITED_PLAN


def test_claude_code_bash_input_in_a_harness_turn_is_pinned(tmp_path: Path) -> None:
    """A `!` command in a record Claude Code marks as its own (isMeta): the command is pinned,
    not its output."""
    s = cc._Session("2.1.88")
    s.user("look around")
    s.user(
        "<bash-input>git log --oneline -3</bash-input>\n<bash-stdout>abc fix\n</bash-stdout>",
        isMeta=True,
    )
    s.assistant(cc._text("ok"))
    (ctx,) = s.load(tmp_path)
    assert marked(ctx) == [("user-command", "<bash-input>git log --oneline -3</bash-input>")]
    harness = next(m for m in ctx.messages if m.origin == "harness")
    assert harness.text == (
        "<bash-input>git log --oneline -3</bash-input>\n<bash-stdout>abc fix\n</bash-stdout>"
    )


def test_claude_code_writer_puts_the_words_back_where_they_were(tmp_path: Path) -> None:
    """`--to claude-code` writes each cut text block whole again, as Claude Code recorded it, and
    the session reads back with the same words pinned (a fixed point)."""
    from compactkit.formats.base import parse_text
    from compactkit.registry import make_registry

    writer = make_registry(entry_points=False).formats.get("claude-code")
    ctx = claude_code_session(tmp_path, filler=1)
    text = writer.dump([ctx])
    records = [json.loads(line) for line in text.splitlines()]
    contents = [
        b["content"]
        for r in records
        for b in (r["message"]["content"] if isinstance(r["message"]["content"], list) else [])
        if isinstance(b, dict) and b.get("type") == "tool_result"
    ]
    assert [{"type": "text", "text": CC_REJECT + CC_FEEDBACK + CC_HINT}] in contents
    (back,) = writer.load(parse_text(text, "back.jsonl"))
    assert marked(back) == marked(ctx)
    assert writer.dump([back]) == text


def test_claude_code_every_strategy_keeps_the_users_words(tmp_path: Path) -> None:
    ctx = claude_code_session(tmp_path, filler=4)
    assert_every_strategy_keeps(ctx, [CC_FEEDBACK, CC_ANSWER, CC_APPROVAL])


# --------------------------------------------------------------------------- Cline / Roo Code
# cline/cline src/core/prompts/responses.ts (`taskResumption`, `fileEditWithUserChanges`),
# src/core/task/index.ts (`resumeTaskFromHistory` before 3.x: one text block);
# RooCodeInc/Roo-Code src/core/prompts/responses.ts (`toolDeniedWithFeedback`,
# `toolApprovedWithFeedback`: JSON with the user's `feedback`)

ROO_DENIED = json.dumps({"status": "denied", "feedback": "not in main, use a branch"})
ROO_APPROVED = json.dumps({"status": "approved", "feedback": "ok, and add a test"})
USER_EDITS = "@@ -1,2 +1,2 @@\n-export const port = 80\n+export const port = 8080"
CLINE_EDIT_RESULT = (
    f"The user made the following updates to your content:\n\n{USER_EDITS}\n\n"
    "The updated content, which includes both your original modifications and the additional "
    "edits, has been successfully saved to src/app.ts. Here is the full, updated content of the "
    'file that was saved:\n\n<final_file_content path="src/app.ts">\nexport const port = 8080\n'
    "</final_file_content>"
)
RESUMPTION = (
    "[TASK RESUMPTION] This task was interrupted 5 minutes ago. It may or may not be complete, "
    "so please reassess the task context.\n\nNew instructions for task continuation:\n"
    "<user_message>\nnow also bump the version\n</user_message>"
)


def cline_task(filler: int) -> list[dict[str, Any]]:
    def call(n: int, name: str, params: dict[str, Any], output: str) -> list[dict[str, Any]]:
        tool = {"type": "tool_use", "id": f"toolu_{n}", "name": name, "input": params}
        result = {"type": "tool_result", "tool_use_id": f"toolu_{n}", "content": output}
        return [cline.assistant(tool, ts=2 * n), cline.user(result, ts=2 * n + 1)]

    records = [cline.user(cline.text("<task>\nfix the port\n</task>"), ts=0)]
    n = 1
    for _ in range(filler):
        records += call(n, "execute_command", {"command": f"npm test {n}"}, OUTPUT)
        n += 1
    records += call(n, "execute_command", {"command": "git push origin main"}, ROO_DENIED)
    records += call(n + 1, "write_to_file", {"path": "src/app.ts"}, CLINE_EDIT_RESULT)
    n += 2
    for _ in range(filler):
        records += call(n, "read_file", {"path": f"src/f{n}.ts"}, OUTPUT)
        n += 1
    records += call(n, "execute_command", {"command": "git push -u origin fix"}, ROO_APPROVED)
    records.append(cline.user(cline.text(RESUMPTION), cline.text(cline.ENV), ts=1000))
    records.append(cline.assistant(cline.text("Bumping the version."), ts=1001))
    return records


def test_cline_feedback_edits_and_resumption_words(tmp_path: Path) -> None:
    ctx = cline.load(cline.write(tmp_path, cline_task(filler=0)))
    assert marked(ctx) == [
        ("user-feedback", ROO_DENIED),
        ("user-feedback", USER_EDITS),
        ("user-feedback", ROO_APPROVED),
    ]
    assert CLINE_EDIT_RESULT in result_texts(ctx).values()  # renders as recorded
    # the user's message inside the resumption text is split off as the human's words
    resumed = [m for m in ctx.messages if m.is_human][-1]
    assert "<user_message>\nnow also bump the version\n</user_message>" in [
        b.text for b in resumed.content if isinstance(b, TextBlock)
    ]


NEW_TASK = (
    '<explicit_instructions type="new_task">\nThe user has explicitly asked you to help them '
    "create a new task with preloaded context.\n</explicit_instructions>\n"
)


def test_cline_slash_command_keeps_the_task_the_users(tmp_path: Path) -> None:
    """src/core/slash-commands/index.ts (`parseSlashCommands`): the command's explicit
    instructions are put before the `<task>` the user typed it in, in one text block."""
    task = "<task>\n carry on with the parser rewrite\n</task>"
    records = [
        cline.user(cline.text(NEW_TASK + task), cline.text(cline.ENV_FIRST), ts=0),
        cline.assistant(cline.text("Creating the task."), ts=1),
    ]
    ctx = cline.load(cline.write(tmp_path, records))
    first = ctx.messages[0]
    assert first.is_human and task in ctx.task  # was harness text: no task at all
    assert [b.text for b in first.content][:2] == [NEW_TASK.removesuffix("\n"), task]


def test_cline_every_strategy_keeps_the_users_words(tmp_path: Path) -> None:
    ctx = cline.load(cline.write(tmp_path, cline_task(filler=4)))
    words = "<user_message>\nnow also bump the version\n</user_message>"
    assert_every_strategy_keeps(ctx, [ROO_DENIED, USER_EDITS, ROO_APPROVED, words])


# --------------------------------------------------------------------------- Codex
# codex-rs/core/src/user_shell_command.rs (`UserShellCommandRecord::render_text`),
# codex-rs/core/src/tools/handlers/request_user_input.rs (the response as JSON)

SHELL = (
    "<user_shell_command>\n<command>\ncargo test -p core\n</command>\n<result>\nExit code: 0\n"
    "Duration: 1.2000 seconds\nOutput:\ntest result: ok\n</result>\n</user_shell_command>"
)
ANSWERS = json.dumps({"answers": {"scope": {"answers": ["only the parser, not the lexer"]}}})


def codex_rollout(filler: int) -> list[dict[str, Any]]:
    def call(call_id: str, name: str, arguments: dict[str, Any], output: str) -> list[Any]:
        return [
            codex.line(
                "response_item",
                {
                    "type": "function_call",
                    "name": name,
                    "arguments": json.dumps(arguments),
                    "call_id": call_id,
                },
            ),
            codex.line(
                "response_item",
                {"type": "function_call_output", "call_id": call_id, "output": output},
            ),
        ]

    records = [codex.meta_line(), codex.turn(), codex.user_item(codex.text("speed up the parser"))]
    for n in range(filler):
        records += call(f"call_a{n}", "shell", {"command": ["cargo", "bench", str(n)]}, OUTPUT)
    records.append(codex.user_item(codex.text(SHELL)))
    records += call("call_q", "request_user_input", {"questions": [{"id": "scope"}]}, ANSWERS)
    for n in range(filler):
        records += call(f"call_b{n}", "shell", {"command": ["cargo", "test", str(n)]}, OUTPUT)
    records += codex.answer("Done.")
    return records


def test_codex_shell_command_and_answers_are_pinned(tmp_path: Path) -> None:
    ctx = codex.load_records(tmp_path, codex_rollout(filler=0))
    assert marked(ctx) == [("user-command", "cargo test -p core"), ("user-answer", ANSWERS)]
    shell = next(m for m in ctx.messages if m.origin == "harness")
    assert shell.text == SHELL  # the harness turn renders as recorded


def test_codex_writer_puts_the_command_back_where_it_was(tmp_path: Path) -> None:
    """`--to codex-rollout` writes the cut `<user_shell_command>` text as one `input_text` again:
    the rollout reads back with the same pins, and is a fixed point."""
    from compactkit.formats.base import parse_text
    from compactkit.registry import make_registry

    writer = make_registry(entry_points=False).formats.get("codex-rollout")
    ctx = codex.load_records(tmp_path, codex_rollout(filler=1))
    text = writer.dump([ctx])
    assert json.dumps(SHELL)[1:-1] in text  # written whole
    (back,) = writer.load(parse_text(text, "back.jsonl"))
    assert marked(back) == marked(ctx)
    assert writer.dump([back]) == text


def test_codex_every_strategy_keeps_the_users_words(tmp_path: Path) -> None:
    ctx = codex.load_records(tmp_path, codex_rollout(filler=4))
    assert_every_strategy_keeps(ctx, ["cargo test -p core", ANSWERS])


# --------------------------------------------------------------------------- Gemini CLI
# packages/core/src/tools/ask-user.ts (`AskUserInvocation.execute`), edit.ts (`modified_by_user`)

GEMINI_ANSWERS = json.dumps({"answers": {"0": "TypeScript, strict mode"}})
GEMINI_EDIT = (
    "Successfully modified file: /repo/a.ts (1 replacements). User modified the `new_string` "
    "content to be: const retries = 5;\nconst delay = 100."
)


def gemini_session(filler: int) -> dict[str, Any]:
    def call(call_id: str, name: str, output: str) -> dict[str, Any]:
        response = {"id": call_id, "name": name, "response": {"output": output}}
        return {
            "id": call_id,
            "name": name,
            "args": {},
            "status": "success",
            "result": [{"functionResponse": response}],
        }

    messages = [gemini._message("u1", "user", [{"text": "add retries"}])]
    for n in range(filler):
        messages.append(gemini._gemini(f"g{n}", "", call(f"c{n}", "run_shell_command", OUTPUT)))
    messages.append(gemini._gemini("ga", "Asking.", call("ask", "ask_user", GEMINI_ANSWERS)))
    messages.append(gemini._gemini("ge", "Editing.", call("edit", "replace", GEMINI_EDIT)))
    for n in range(filler):
        messages.append(gemini._gemini(f"h{n}", "", call(f"d{n}", "read_file", OUTPUT)))
    messages.append(gemini._gemini("end", "Done."))
    return {**gemini.HEADER, "messages": messages}


def test_gemini_answers_and_user_edits_are_pinned(tmp_path: Path) -> None:
    path = tmp_path / "session-1.json"
    path.write_text(json.dumps(gemini_session(filler=0)), encoding="utf-8")
    ctx = compactkit.load_one(path)
    edited = "const retries = 5;\nconst delay = 100."
    assert marked(ctx) == [
        ("user-answer", GEMINI_ANSWERS),
        ("user-feedback", GEMINI_EDIT.removesuffix(edited) + edited),
    ]
    assert result_texts(ctx)["edit"] == GEMINI_EDIT


def test_gemini_shell_mode_command_is_pinned_not_its_output(tmp_path: Path) -> None:
    """packages/cli/src/ui/hooks/shellCommandProcessor.ts (`addShellCommandToGeminiHistory`)."""
    shell = (
        "I ran the following shell command:\n```sh\nnpm ls --depth 0\n```\n\n"
        "This produced the following result:\n```\napp@1.0.0\n└── express@4.19.2\n```"
    )
    messages = [
        gemini._message("u0", "user", [{"text": shell}]),
        gemini._message("u1", "user", [{"text": "upgrade express"}]),
        gemini._gemini("g1", "Upgrading."),
    ]
    path = tmp_path / "session-1.json"
    path.write_text(json.dumps({**gemini.HEADER, "messages": messages}), encoding="utf-8")
    ctx = compactkit.load_one(path)
    assert marked(ctx) == [("user-command", "npm ls --depth 0")]
    assert ctx.messages[0].origin == "harness" and ctx.messages[0].text == shell
    assert ctx.task == "upgrade express"  # the command's output is not the task


def test_gemini_every_strategy_keeps_the_users_words(tmp_path: Path) -> None:
    path = tmp_path / "session-1.json"
    path.write_text(json.dumps(gemini_session(filler=4)), encoding="utf-8")
    ctx = compactkit.load_one(path)
    assert_every_strategy_keeps(ctx, [GEMINI_ANSWERS, GEMINI_EDIT])


# --------------------------------------------------------------------------- pi
# packages/coding-agent/src/core/messages.ts (`bashExecutionToText`)


def pi_session(filler: int) -> list[dict[str, Any]]:
    header = {"type": "session", "version": 3, "id": "s1", "timestamp": "t", "cwd": "/repo"}
    records: list[dict[str, Any]] = [header, pi._msg("u1", None, "user", content="tidy the repo")]
    parent = "u1"
    for n in range(filler):
        call = {"type": "toolCall", "id": f"c{n}", "name": "bash", "arguments": {"command": "ls"}}
        records.append(pi._assistant(f"a{n}", parent, "Listing.", calls=[call]))
        records.append(
            pi._msg(
                f"t{n}", f"a{n}", "toolResult", toolCallId=f"c{n}", toolName="bash", content=OUTPUT
            )
        )
        parent = f"t{n}"
    records.append(
        pi._msg(
            "b1",
            parent,
            "bashExecution",
            command="git clean -n\ngit status",
            output=OUTPUT,
            exitCode=0,
        )
    )
    records.append(pi._assistant("r1", "b1", "I see the untracked files."))
    return records


def test_pi_bash_execution_command_is_pinned(tmp_path: Path) -> None:
    ctx = pi._write(tmp_path, pi_session(filler=0))
    assert marked(ctx) == [("user-command", "Ran `git clean -n\ngit status`")]
    ran = next(m for m in ctx.messages if m.origin == "harness")
    assert ran.text.startswith("Ran `git clean -n\ngit status`\n```\n0000 build log")


def test_pi_every_strategy_keeps_the_users_words(tmp_path: Path) -> None:
    ctx = pi._write(tmp_path, pi_session(filler=4))
    assert_every_strategy_keeps(ctx, ["Ran `git clean -n\ngit status`"])


# --------------------------------------------------------------------------- OpenHands
# openhands-sdk/openhands/sdk/event/llm_convertible/observation.py (`UserRejectObservation`:
# "Action rejected: {rejection_reason}", `rejection_source` "user" or "hook")


def openhands_events(filler: int, reason: str, source: str = "user") -> list[dict[str, Any]]:
    events = [
        openhands._sdk(
            "MessageEvent",
            "user",
            "e0",
            llm_message={"role": "user", "content": [{"type": "text", "text": "fix CI"}]},
        )
    ]

    def action(n: int, command: str) -> dict[str, Any]:
        return openhands._sdk(
            "ActionEvent",
            "agent",
            f"a{n}",
            thought=[],
            tool_name="terminal",
            tool_call_id=f"call_{n}",
            tool_call=openhands._call(f"call_{n}", command),
            llm_response_id=f"resp_{n}",
        )

    def observation(n: int) -> dict[str, Any]:
        return openhands._sdk(
            "ObservationEvent",
            "environment",
            f"o{n}",
            tool_name="terminal",
            tool_call_id=f"call_{n}",
            action_id=f"a{n}",
            observation={
                "kind": "TerminalObservation",
                "content": [{"type": "text", "text": OUTPUT}],
            },
        )

    for n in range(filler):
        events += [action(n, f"pytest -k {n}"), observation(n)]
    events.append(action(99, "git push --force"))
    events.append(
        openhands._sdk(
            "UserRejectObservation",
            source,
            "r99",
            tool_name="terminal",
            tool_call_id="call_99",
            action_id="a99",
            rejection_reason=reason,
            rejection_source=source,
        )
    )
    for n in range(100, 100 + filler):
        events += [action(n, f"pytest -x {n}"), observation(n)]
    return events


def test_openhands_rejection_reason_is_pinned(tmp_path: Path) -> None:
    ctx = openhands._load_events(tmp_path, openhands_events(0, "never force-push, open a PR"))
    assert marked(ctx) == [("user-feedback", "Action rejected: never force-push, open a PR")]
    for reason, source in (("User rejected the action", "user"), ("blocked by policy", "hook")):
        other = openhands._load_events(tmp_path, openhands_events(0, reason, source))
        assert marked(other) == []  # no words of the user there


def test_openhands_every_strategy_keeps_the_users_words(tmp_path: Path) -> None:
    ctx = openhands._load_events(tmp_path, openhands_events(4, "never force-push, open a PR"))
    assert_every_strategy_keeps(ctx, ["Action rejected: never force-push, open a PR"])


# --------------------------------------------------------------------------- OpenCode
# packages/opencode/src/permission/ (`CorrectedError`), src/tool/question.ts (the answers)

OC_FEEDBACK = "keep the old endpoint until v3\nand tell me before deleting files"
OC_REJECTED = (
    "The user rejected permission to use this specific tool call with the following feedback: "
    + OC_FEEDBACK
)  # the words start on the notice's line: the whole text is the pinned block
OC_ANSWERS = (
    'User has answered your questions: "Which store?"="SQLite". You can now continue with the '
    "user's answers in mind."
)


def opencode_storage(folder: Path, filler: int) -> Path:
    def tool(m: int, n: int, name: str, **state: Any) -> dict[str, Any]:
        return opencode.part(m, n, "tool", callID=f"call_{m}_{n}", tool=name, state=state)

    done = {"status": "completed", "input": {"command": "ls"}, "output": OUTPUT}
    calls = [tool(2, n, "bash", **done) for n in range(filler)]
    rejected = {
        "status": "error",
        "input": {"filePath": "api.ts"},
        "error": OC_REJECTED,
    }
    calls.append(tool(2, 50, "edit", **rejected))
    asked = {"status": "completed", "input": {"questions": []}, "output": OC_ANSWERS}
    calls.append(tool(2, 51, "question", **asked))
    calls += [tool(2, 60 + n, "bash", **done) for n in range(filler)]
    messages = [
        (opencode.msg(1, "user"), [opencode.part(1, 1, "text", text="drop the v1 API")]),
        (opencode.msg(2, "assistant", **opencode.ASSISTANT), calls),
        (
            opencode.msg(3, "assistant", finish="stop", **opencode.ASSISTANT),
            [opencode.part(3, 1, "text", text="Done.")],
        ),
    ]
    return opencode.storage(folder, messages)


def test_opencode_rejection_feedback_and_answers_are_pinned(tmp_path: Path) -> None:
    ctx = compactkit.load_one(opencode_storage(tmp_path, filler=0))
    assert marked(ctx) == [("user-feedback", OC_REJECTED), ("user-answer", OC_ANSWERS)]


def test_opencode_every_strategy_keeps_the_users_words(tmp_path: Path) -> None:
    ctx = compactkit.load_one(opencode_storage(tmp_path, filler=4))
    assert_every_strategy_keeps(ctx, [OC_REJECTED, OC_ANSWERS])


# --------------------------------------------------------------------------- the corpus

FORMATS = (
    "claude-code",
    "cline",
    "codex-rollout",
    "gemini-cli",
    "pi-session",
    "openhands-events",
    "opencode",
)


RAW_MARKERS = {
    "claude-code": ("the user said:\\n", "User has answered your questions: ", "<bash-input>"),
    "cline": ('\\"feedback\\"', "The user made the following updates", "<user_message>"),
    "codex-rollout": ("<user_shell_command>", '"name":"request_user_input"'),
    "gemini-cli": ("User modified the `", '"ask_user"'),
    "pi-session": ('"role":"bashExecution"',),
    "openhands-events": ('"UserRejectObservation"',),
    "opencode": ("with the following feedback: ", "User has answered your questions: "),
}
"""What each upstream writes where the user's words sit outside a user message, as it appears in
the raw file: a session the adapter marks words in must hold one of them."""


def _corpus() -> list[tuple[str, str, AgentContext]]:
    out = []
    for path in corpus_files():
        raw = path.read_text(encoding="utf-8")
        for n, ctx in enumerate(compactkit.load(path)):
            if ctx.metadata.get("source_format") in FORMATS:
                out.append((f"{path.parent.name}/{path.name}#{n}", raw, ctx))
    return out


@pytest.mark.skipif(CORPUS is None, reason="the full corpus is not present")
@pytest.mark.parametrize("budget", [30_000, TIGHT])
def test_corpus_pins_of_the_users_words_survive_default(budget: int) -> None:
    counts: dict[str, int] = {}
    for name, raw, ctx in _corpus():
        words = [t for _, t in marked(ctx)]
        fmt = str(ctx.metadata["source_format"])
        counts[fmt] = counts.get(fmt, 0) + len(words)
        if words:
            assert any(m in raw for m in RAW_MARKERS[fmt]), f"{name}: words marked from nothing"
        out = build_pipeline(["default"], budget=budget).run(ctx).context
        have = texts(out)
        for text in words:
            assert text in have, f"{name}: default at {budget} lost {text[:40]!r}"
    print(f"\nadapter-marked user words on the corpus (budget {budget}): {counts}")
    assert set(counts) >= {"claude-code", "codex-rollout", "gemini-cli", "pi-session"}


# --------------------------------------------------------------------------- Crush
# charmbracelet/crush internal/agent/tools/question.go (`formatAnswers`), internal/message/
# content.go (`ToAIMessage`: a bang-mode `ShellCommand` as "$ <command>\n<output>\n(exit code N)")


def crush_database(folder: Path, filler: int) -> Path:
    from . import test_crush as crush

    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "crush.db"
    calls = [crush.call(f"c{n}", "bash", command=f"make step{n}") for n in range(filler)]
    results = [crush.result(f"c{n}", "bash", OUTPUT) for n in range(filler)]
    rows = [
        ("user", [crush.part("text", text="drop the v1 API"), crush.finish()]),
        ("user", [crush.part("shell_command", command="git stash", output="Saved", exit_code=0)]),
        ("assistant", [crush.call("q1", "question", questions=[]), *calls, crush.finish()]),
        ("tool", [crush.result("q1", "question", crush.QUESTION_RESULT), *results]),
        ("assistant", [crush.part("text", text="Done."), crush.finish("end_turn")]),
    ]
    with sqlite3.connect(path) as db:
        db.executescript(crush_schema())
        db.execute(
            "INSERT INTO sessions (id, title, created_at, updated_at) VALUES ('s', 't', 1, 1)"
        )
        for n, (role, parts) in enumerate(rows):
            db.execute(
                "INSERT INTO messages (id, session_id, role, parts, created_at, updated_at)"
                " VALUES (?, 's', ?, ?, ?, ?)",
                (f"m{n}", role, json.dumps(parts), n, n),
            )
    db.close()
    return path


def test_crush_answers_and_bang_commands_are_pinned(tmp_path: Path) -> None:
    from .test_crush import ANSWER

    ctx = compactkit.load_one(crush_database(tmp_path, filler=0))
    assert marked(ctx) == [("user-command", "$ git stash"), ("user-answer", ANSWER)]


def test_crush_every_strategy_keeps_the_users_words(tmp_path: Path) -> None:
    from .test_crush import ANSWER

    ctx = compactkit.load_one(crush_database(tmp_path, filler=4))
    assert_every_strategy_keeps(ctx, ["$ git stash", ANSWER])
