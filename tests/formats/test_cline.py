"""The cline adapter on task histories written after Cline's and Roo Code's source.

Records follow the writers (cline/cline `src/core/task/index.ts`, `src/core/prompts/responses.ts`,
`ToolResultUtils.ts`; RooCodeInc/Roo-Code `src/core/task-persistence/`): XML-style tool calls in
assistant text with `[tool for 'arg'] Result:` text results (Cline 2.x-3.x, Roo Code before native
tools), native `tool_use` / `tool_result` (newer Cline, with `modelInfo` and `metrics`), Roo Code's
legacy array (condense summaries, encrypted reasoning items) and its version 2 envelope.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

import compactkit
from compactkit import AgentContext
from compactkit.cli import make_cli
from compactkit.errors import BadInputError
from compactkit.formats.base import read_document
from compactkit.formats.cline import ClineFormat, split_tool_calls
from compactkit.registry import make_registry
from tests.formats._checks import assert_sniffs_only_its_own, pairing_problems

FMT = ClineFormat()
TASK_ID = "1745000000000"

ENV = (
    "<environment_details>\n# VSCode Visible Files\nsrc/app.ts\n\n# VSCode Open Tabs\nsrc/app.ts\n\n"
    "# Current Time\n4/18/2025, 10:00:00 AM (Europe/Paris, UTC+2:00)\n\n# Current Mode\nACT MODE\n"
    "</environment_details>"
)
ENV_FIRST = ENV.replace(
    "</environment_details>",
    "\n# Current Working Directory (/home/me/app) Files\npackage.json\nsrc/\nsrc/app.ts\n"
    "</environment_details>",
)


def text(value: str) -> dict[str, str]:
    return {"type": "text", "text": value}


def user(*blocks: dict[str, Any], ts: int) -> dict[str, Any]:
    return {"role": "user", "content": list(blocks), "ts": ts}


def assistant(*blocks: dict[str, Any], ts: int, **extra: Any) -> dict[str, Any]:
    return {"role": "assistant", "content": list(blocks), "ts": ts, **extra}


# Cline 3.x with XML-style tools: one tool per assistant message, its result as text.
XML_TASK = [
    user(text("<task>\nThe build fails on src/app.ts, fix it\n</task>"), text(ENV_FIRST), ts=1),
    assistant(
        text(
            "<thinking>\nI should read the file first.\n</thinking>\n\n"
            "<read_file>\n<path>src/app.ts</path>\n</read_file>"
        ),
        ts=2,
    ),
    user(
        text("[read_file for 'src/app.ts'] Result:"),
        text("export const port: number = '8080'\n"),
        text(ENV),
        ts=3,
    ),
    assistant(
        text(
            "The type is wrong.\n\n<replace_in_file>\n<path>src/app.ts</path>\n<diff>\n"
            "<<<<<<< SEARCH\nexport const port: number = '8080'\n=======\n"
            "export const port: number = 8080\n>>>>>>> REPLACE\n</diff>\n</replace_in_file>"
        ),
        ts=4,
    ),
    user(
        text("[replace_in_file for 'src/app.ts'] Result:"),
        text("The content was successfully saved to src/app.ts."),
        text(
            "The user provided the following feedback:\n<feedback>\n"
            "also keep it a string in .env\n</feedback>"
        ),
        text(ENV),
        ts=5,
    ),
    assistant(
        text(
            "<execute_command>\n<command>npm run build</command>\n"
            "<requires_approval>false</requires_approval>\n</execute_command>"
        ),
        ts=6,
    ),
    user(
        text("[execute_command for 'npm run build'] Result:"),
        text(
            "The user denied this operation and provided the following feedback:\n<feedback>\n"
            "use pnpm, not npm\n</feedback>"
        ),
        text(ENV),
        ts=7,
    ),
    assistant(text("I will use pnpm from now on."), ts=8),
    user(
        text(
            "[ERROR] You did not use a tool in your previous response! Please retry with a tool use."
        ),
        text(ENV),
        ts=9,
    ),
    assistant(
        text(
            "<ask_followup_question>\n<question>Build with pnpm or run the tests too?</question>\n"
            '<options>["build", "both"]</options>\n</ask_followup_question>'
        ),
        ts=10,
    ),
    user(
        text("[ask_followup_question for 'Build with pnpm or run the tests too?'] Result:"),
        text("<answer>\nboth please\n</answer>"),
        text(ENV),
        ts=11,
    ),
    assistant(
        text(
            "<execute_command>\n<command>pnpm build && pnpm test</command>\n"
            "<requires_approval>false</requires_approval>\n</execute_command>\n\n"
            "<attempt_completion>\n<result>Done</result>\n</attempt_completion>"
        ),
        ts=12,
    ),
    user(
        text("[execute_command for 'pnpm build && pnpm test'] Result:"),
        text("Command executed.\nOutput:\nbuild ok\n2 passed"),
        text(
            "Tool [attempt_completion] was not executed because a tool has already been used in "
            "this message. Only one tool may be used per message."
        ),
        text(ENV),
        ts=13,
    ),
    user(
        text(
            "[TASK RESUMPTION] This task was interrupted 2 hours ago. It may or may not be complete,"
            " so please reassess the task context."
        ),
        text(
            "New instructions for task continuation:\n<user_message>\nnow bump the version\n</user_message>"
        ),
        text(ENV),
        ts=14,
    ),
    assistant(
        text(
            "<attempt_completion>\n<result>\nFixed the port type and bumped the version.\n</result>\n"
            "</attempt_completion>"
        ),
        ts=15,
    ),
]

# Newer Cline with native tool calling: tool_use blocks, tool_result blocks, modelInfo and metrics.
NATIVE_TASK = [
    user(text("<task>\nlist the TODOs in src\n</task>"), text(ENV_FIRST), ts=1),
    assistant(
        {"type": "thinking", "thinking": "Search for TODO.", "signature": "EqQBsig"},
        text("Searching."),
        {
            "type": "tool_use",
            "id": "toolu_01",
            "name": "search_files",
            "input": {"path": "src", "regex": "TODO"},
        },
        ts=2,
        modelInfo={"modelId": "claude-sonnet-4-5", "providerId": "anthropic", "mode": "act"},
        metrics={"tokens": {"prompt": 1200, "completion": 40, "cached": 0}, "cost": 0.01},
        id="req_1",
    ),
    user(
        {
            "type": "tool_result",
            "tool_use_id": "toolu_01",
            "content": "Found 1 result.\n\nsrc/app.ts\n│// TODO: remove",
        },
        text(ENV),
        ts=3,
    ),
    assistant(
        {
            "type": "tool_use",
            "id": "toolu_02",
            "name": "ask_followup_question",
            "input": {"question": "Remove it?"},
        },
        ts=4,
        modelInfo={"modelId": "claude-sonnet-4-5", "providerId": "anthropic", "mode": "act"},
    ),
    user(
        {
            "type": "tool_result",
            "tool_use_id": "toolu_02",
            "content": [text("<answer>\nyes\n</answer>")],
        },
        text(ENV),
        ts=5,
    ),
    assistant(
        {
            "type": "tool_use",
            "id": "toolu_03",
            "name": "execute_command",
            "input": {"command": "rm -rf src"},
        },
        ts=6,
    ),
    user(
        {
            "type": "tool_result",
            "tool_use_id": "toolu_03",
            "content": "The user denied this operation.",
        },
        text(ENV),
        ts=7,
    ),
]

# Roo Code's legacy array: XML tools with Roo's names, a condense summary, encrypted reasoning.
ROO_TASK: list[dict[str, Any]] = [
    user(text("<task>\nrename getUser to fetchUser\n</task>"), text(ENV_FIRST), ts=1),
    assistant(
        text("<search_files>\n<path>.</path>\n<regex>getUser</regex>\n</search_files>"),
        ts=2,
        condenseParent="c1",
    ),
    user(
        text("[search_files for 'getUser'] Result:"),
        text("Found 2 results.\n\nsrc/user.ts\n│export function getUser() {}"),
        text(ENV),
        ts=3,
    ),
    {
        "role": "user",
        "content": "## Conversation Summary\nThe user wants getUser renamed; it is in src/user.ts.",
        "ts": 4,
        "isSummary": True,
        "condenseId": "c1",
    },
    {"type": "reasoning", "encrypted_content": "gAAAAB-sealed", "id": "rs_1", "ts": 5},
    assistant(
        text(
            "<apply_diff>\n<path>src/user.ts</path>\n<diff>\n<<<<<<< SEARCH\n:start_line:1\n"
            "-------\nexport function getUser() {}\n=======\nexport function fetchUser() {}\n"
            ">>>>>>> REPLACE\n</diff>\n</apply_diff>"
        ),
        {"type": "thoughtSignature", "thoughtSignature": "sig-g3"},
        ts=6,
    ),
    user(
        text("[apply_diff for 'src/user.ts'] Result:"),
        text(
            "The tool execution failed with the following error:\n<error>\nNo sufficiently similar "
            "match found\n</error>"
        ),
        text(ENV),
        ts=7,
    ),
    assistant(
        text(
            "<switch_mode>\n<mode_slug>debug</mode_slug>\n<reason>investigate</reason>\n</switch_mode>"
        ),
        ts=8,
    ),
]

# Roo Code's version 2 envelope (AI SDK messages).
ROO_V2 = {
    "version": 2,
    "messages": [
        {
            "role": "user",
            "content": [text("<task>\nadd a health endpoint\n</task>"), text(ENV_FIRST)],
            "ts": 1,
        },
        {
            "role": "assistant",
            "content": [
                {"type": "reasoning", "text": "Write the route."},
                {
                    "type": "tool-call",
                    "toolCallId": "call_1",
                    "toolName": "write_to_file",
                    "input": {"path": "src/health.ts", "content": "export {}"},
                },
            ],
            "ts": 2,
        },
        {
            "role": "tool",
            "content": [
                {
                    "type": "tool-result",
                    "toolCallId": "call_1",
                    "toolName": "write_to_file",
                    "output": {"type": "text", "value": "The content was successfully saved."},
                }
            ],
            "ts": 3,
        },
        {"role": "user", "content": [text(ENV)], "ts": 3},
        {"role": "assistant", "content": [text("Added src/health.ts.")], "ts": 4},
    ],
}


def write(tmp_path: Path, data: Any, name: str = "api_conversation_history.json") -> Path:
    folder = tmp_path / TASK_ID
    folder.mkdir(exist_ok=True)
    path = folder / name
    path.write_text(json.dumps(data), encoding="utf-8")
    return path


def load(path: Path) -> AgentContext:
    (ctx,) = compactkit.load(path)
    return ctx


def human_texts(ctx: AgentContext) -> list[str]:
    """The text blocks of human messages, without the harness text Cline adds beside them."""
    return [
        b.text
        for m in ctx.messages
        if m.is_human
        for b in m.content
        if b.type == "text"
        and not b.text.startswith(("<environment_details>", "[TASK RESUMPTION]"))
    ]


# --------------------------------------------------------------------------- XML-style tools


def test_xml_tool_calls_pair_with_their_text_results(tmp_path: Path) -> None:
    ctx = load(write(tmp_path, XML_TASK))
    assert ctx.metadata["source_format"] == "cline"
    assert ctx.metadata["session_id"] == TASK_ID
    assert pairing_problems(ctx) == []
    assert compactkit.validate(ctx) == []

    calls = [c for m in ctx.messages for c in m.tool_calls]
    assert [(c.name, c.input) for c in calls] == [
        ("read_file", {"path": "src/app.ts"}),
        (
            "replace_in_file",
            {
                "path": "src/app.ts",
                "diff": "<<<<<<< SEARCH\nexport const port: number = '8080'\n=======\n"
                "export const port: number = 8080\n>>>>>>> REPLACE",
            },
        ),
        ("execute_command", {"command": "npm run build", "requires_approval": "false"}),
        (
            "ask_followup_question",
            {"question": "Build with pnpm or run the tests too?", "options": '["build", "both"]'},
        ),
        ("execute_command", {"command": "pnpm build && pnpm test", "requires_approval": "false"}),
        ("attempt_completion", {"result": "Done"}),
        ("attempt_completion", {"result": "Fixed the port type and bumped the version."}),
    ]
    results = {r.tool_call_id: r for m in ctx.messages for r in m.tool_results}
    by_name = [(c.name, results[c.id]) for c in calls if c.id in results]
    assert [(name, r.text, r.is_error) for name, r in by_name] == [
        ("read_file", "export const port: number = '8080'\n", False),
        ("replace_in_file", "The content was successfully saved to src/app.ts.", False),
        (
            "execute_command",
            "The user denied this operation and provided the following feedback:",
            True,
        ),
        ("ask_followup_question", "", False),
        ("execute_command", "Command executed.\nOutput:\nbuild ok\n2 passed", False),
        (
            "attempt_completion",
            "Tool [attempt_completion] was not executed because a tool has already been used in "
            "this message. Only one tool may be used per message.",
            True,
        ),
    ]
    # the last call ends the task: pending, not answered by a made-up result
    assert calls[-1].id not in results and "synthesized_results" not in ctx.metadata
    # the assistant's prose stays, the XML is gone from it
    assert ctx.messages[1].content[0].type == "text"
    assert ctx.messages[1].text == "<thinking>\nI should read the file first.\n</thinking>"
    assert "<replace_in_file>" not in "".join(m.text for m in ctx.messages)


def test_the_users_words_stay_user_text_once(tmp_path: Path) -> None:
    ctx = load(write(tmp_path, XML_TASK))
    assert human_texts(ctx) == [
        "<task>\nThe build fails on src/app.ts, fix it\n</task>",
        "The user provided the following feedback:\n<feedback>\nalso keep it a string in .env\n</feedback>",
        "<feedback>\nuse pnpm, not npm\n</feedback>",
        "<answer>\nboth please\n</answer>",
        "New instructions for task continuation:\n<user_message>\nnow bump the version\n</user_message>",
    ]
    # the task is the first human message, and no user message has an origin the human did not give
    first = ctx.messages[ctx.first_user_index or 0]
    assert first is ctx.messages[0] and ctx.task.startswith("<task>\nThe build fails")
    for words in ("also keep it a string", "use pnpm, not npm", "both please", "bump the version"):
        holders = [
            m for m in ctx.messages if any(words in b.text for b in m.content if b.type == "text")
        ]
        assert len(holders) == 1 and holders[0].is_human, words
        assert not any(words in r.text for m in ctx.messages for r in m.tool_results)


def test_environment_details_are_their_own_repeated_block(tmp_path: Path) -> None:
    ctx = load(write(tmp_path, XML_TASK))
    env_blocks = [
        (i, b.text)
        for i, m in enumerate(ctx.messages)
        for b in m.content
        if b.type == "text" and b.text.startswith("<environment_details>")
    ]
    raw_env = [
        b["text"] for m in XML_TASK for b in m["content"] if "<environment_details>" in b["text"]
    ]
    assert [t for _, t in env_blocks] == raw_env  # verbatim, once each
    assert sum(t == ENV for _, t in env_blocks) == len(raw_env) - 1
    assert all(ctx.messages[i].role == "user" for i, _ in env_blocks)
    # a user message holding only harness text is marked so; one holding the human's words is not
    harness = [m for m in ctx.messages if m.origin == "harness"]
    assert harness and all(
        all(
            b.text.startswith(("<environment_details>", "[ERROR]", "[TASK RESUMPTION]"))
            for b in m.content
        )
        for m in harness
    )
    nag = next(m for m in ctx.messages if m.text.startswith("[ERROR] You did not use a tool"))
    assert nag.origin == "harness" and not nag.is_human
    resumed = next(m for m in ctx.messages if "[TASK RESUMPTION]" in m.text)
    assert resumed.is_human  # it carries the user's new instructions


def test_static_elision_sees_the_repeated_environment(tmp_path: Path) -> None:
    ctx = load(write(tmp_path, XML_TASK))
    result = compactkit.build_pipeline(["static-elision"]).run(ctx)
    elided = [b for m in result.context.messages for b in m.content if b.type == "elided"]
    assert elided
    assert compactkit.expand(result.context) == ctx


def test_split_tool_calls_handles_prose_unterminated_calls_and_tags_in_content() -> None:
    content = "<div><content>nested</content></div>"
    pieces = split_tool_calls(
        f"Writing.\n<write_to_file>\n<path>a.html</path>\n<content>\n{content}\n</content>\n"
        "</write_to_file>\nthen <list_files>\n<path>src</path>"
    )
    assert pieces == [
        "Writing.",
        ("write_to_file", {"path": "a.html", "content": content}),
        "then ",
        ("list_files", {"path": "src"}),
    ]
    assert split_tool_calls("I will use <read_file> next.") == ["I will use <read_file> next."]


def test_a_result_with_no_call_is_tool_output_not_the_human(tmp_path: Path) -> None:
    data = [
        user(text("<task>\nhi\n</task>"), text(ENV_FIRST), ts=1),
        assistant(text("Hello."), ts=2),
        user(text("[browser_action for 'launch'] Result:"), text("page loaded"), text(ENV), ts=3),
    ]
    ctx = load(write(tmp_path, data))
    last = ctx.messages[-1]
    assert last.origin == "tool-output" and not last.is_human
    assert last.text.startswith("[browser_action for 'launch'] Result:")
    assert human_texts(ctx) == ["<task>\nhi\n</task>"]


# --------------------------------------------------------------------------- native tools


def test_native_tool_use_passes_through_with_model_and_metrics(tmp_path: Path) -> None:
    ctx = load(write(tmp_path, NATIVE_TASK))
    assert ctx.metadata["model"] == "claude-sonnet-4-5"
    assert pairing_problems(ctx) == [] and compactkit.validate(ctx) == []
    calls = [c for m in ctx.messages for c in m.tool_calls]
    assert [(c.id, c.name) for c in calls] == [
        ("toolu_01", "search_files"),
        ("toolu_02", "ask_followup_question"),
        ("toolu_03", "execute_command"),
    ]
    first = ctx.messages[1]
    assert first.content[0].type == "thinking" and first.content[0].signature == "EqQBsig"
    assert first.metadata["model"] == "claude-sonnet-4-5"
    assert first.metadata["usage"] == NATIVE_TASK[1]["metrics"]
    results = [r for m in ctx.messages for r in m.tool_results]
    assert [(r.tool_call_id, r.text, r.is_error) for r in results] == [
        ("toolu_01", "Found 1 result.\n\nsrc/app.ts\n│// TODO: remove", False),
        ("toolu_02", "", False),
        ("toolu_03", "The user denied this operation.", True),
    ]
    assert human_texts(ctx) == [
        "<task>\nlist the TODOs in src\n</task>",
        "<answer>\nyes\n</answer>",
    ]
    assert [m.origin for m in ctx.messages if m.role == "user"] == [
        None,
        "harness",
        None,
        "harness",
    ]


# --------------------------------------------------------------------------- Roo Code


def test_roo_code_legacy_array(tmp_path: Path) -> None:
    ctx = load(write(tmp_path, ROO_TASK))
    assert ctx.metadata["source_format"] == "cline"
    assert ctx.metadata["skipped_records"] == {"thoughtSignature": 1}
    assert pairing_problems(ctx) == [] and compactkit.validate(ctx) == []
    calls = [c for m in ctx.messages for c in m.tool_calls]
    assert [c.name for c in calls] == ["search_files", "apply_diff", "switch_mode"]
    assert calls[2].input == {"mode_slug": "debug", "reason": "investigate"}
    results = [r for m in ctx.messages for r in m.tool_results]
    assert [(r.tool_call_id, r.is_error) for r in results] == [
        (calls[0].id, False),
        (calls[1].id, True),
    ]
    summary = next(m for m in ctx.messages if m.origin == "summary")
    assert summary.role == "user" and summary.text == ROO_TASK[3]["content"]
    assert summary.metadata["condenseId"] == "c1" and not summary.is_human
    assert ctx.messages[1].metadata["condenseParent"] == "c1"
    sealed = next(m for m in ctx.messages if m.role == "assistant" and calls[1] in m.tool_calls)
    assert sealed.content[0].type == "thinking" and sealed.content[0].signature == "gAAAAB-sealed"
    assert sealed.content[0].redacted
    assert human_texts(ctx) == ["<task>\nrename getUser to fetchUser\n</task>"]
    assert compactkit.expand(ctx) == ctx


def test_roo_code_version_2_envelope(tmp_path: Path) -> None:
    ctx = load(write(tmp_path, ROO_V2))
    assert ctx.metadata["source_format"] == "cline"
    assert [m.role for m in ctx.messages] == ["user", "assistant", "tool", "user", "assistant"]
    call = ctx.messages[1].tool_calls[0]
    assert (call.id, call.name) == ("call_1", "write_to_file")
    assert ctx.messages[1].content[0].type == "thinking"
    assert ctx.messages[2].tool_results[0].text == "The content was successfully saved."
    assert ctx.messages[3].origin == "harness"
    assert compactkit.validate(ctx) == []


# --------------------------------------------------------------------------- detection and errors


def test_detection_picks_cline_and_leaves_plain_anthropic_arrays(tmp_path: Path) -> None:
    for data in (XML_TASK, NATIVE_TASK, ROO_TASK, ROO_V2):
        assert FMT.sniff(read_document(write(tmp_path, data)))
    plain = [
        {"role": "user", "content": [text("<task>fix it</task>")], "ts": 1},
        {
            "role": "assistant",
            "content": [{"type": "tool_use", "id": "t", "name": "read_file", "input": {}}],
            "ts": 2,
        },
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t", "content": "x"}]},
    ]
    path = write(tmp_path, plain, "messages.json")
    assert not FMT.sniff(read_document(path))
    assert load(path).metadata["source_format"] == "anthropic-messages"
    assert_sniffs_only_its_own(FMT, "cline", "cline_")


def test_ui_messages_is_refused_naming_the_file_to_use(tmp_path: Path) -> None:
    ui = [
        {"ts": 1745000000001, "type": "say", "say": "text", "text": "fix it"},
        {"ts": 1745000000002, "type": "say", "say": "api_req_started", "text": "{}"},
        {"ts": 1745000000003, "type": "ask", "ask": "tool", "text": '{"tool":"readFile"}'},
    ]
    path = write(tmp_path, ui, "ui_messages.json")
    expected = str(path.with_name("api_conversation_history.json"))
    with pytest.raises(BadInputError, match=r"ui_messages\.json") as info:
        compactkit.load(path)
    assert expected in str(info.value)

    cli = make_cli(lambda: make_registry(entry_points=False))
    result = CliRunner().invoke(cli, ["inspect", str(path)])
    assert result.exit_code == 2
    assert len(result.stderr.strip().splitlines()) == 1 and expected in result.stderr

    meta = write(tmp_path, {"files_in_context": [], "model_usage": []}, "task_metadata.json")
    with pytest.raises(BadInputError, match=r"task_metadata\.json"):
        compactkit.load(meta)


def test_cli_lists_the_format_and_inspects_a_task(tmp_path: Path) -> None:
    cli = make_cli(lambda: make_registry(entry_points=False))
    listed = CliRunner().invoke(cli, ["formats"])
    assert listed.exit_code == 0 and "cline" in listed.stdout
    path = write(tmp_path, XML_TASK)
    shown = CliRunner().invoke(cli, ["inspect", "--json", str(path)])
    assert shown.exit_code == 0, shown.stderr
    report = json.loads(shown.stdout)
    text_out = json.dumps(report)
    assert "cline" in text_out and '"user_messages": 5' in text_out


# --------------------------------------------------------------------------- round trip and pipeline


def test_native_json_round_trip(tmp_path: Path) -> None:
    for data in (XML_TASK, NATIVE_TASK, ROO_TASK, ROO_V2):
        ctx = load(write(tmp_path, data))
        out = tmp_path / "native.json"
        compactkit.dump(ctx, out, format="compactkit")
        assert compactkit.load_one(out) == ctx
        assert AgentContext.from_native(json.loads(ctx.to_json())) == ctx


def big_task(turns: int) -> list[dict[str, Any]]:
    out = [user(text("<task>\nport the service to the new logger\n</task>"), text(ENV_FIRST), ts=0)]
    for n in range(turns):
        path = f"src/module_{n % 12}.ts"
        out.append(
            assistant(
                text(
                    f"Step {n}: reading {path}.\n\n<read_file>\n<path>{path}</path>\n</read_file>"
                ),
                ts=2 * n + 1,
            )
        )
        body = "\n".join(f"{k} | console.log('module {n % 12} line {k}')" for k in range(60))
        blocks = [text(f"[read_file for '{path}'] Result:"), text(body)]
        if n % 9 == 4:
            blocks.append(
                text(
                    f"The user provided the following feedback:\n<feedback>\nkeep step {n} small\n</feedback>"
                )
            )
        blocks.append(text(ENV))
        out.append(user(*blocks, ts=2 * n + 2))
    out.append(
        assistant(
            text("<attempt_completion>\n<result>Ported.</result>\n</attempt_completion>"), ts=10**6
        )
    )
    return out


def test_default_pipeline_runs_on_a_long_task(tmp_path: Path) -> None:
    ctx = load(write(tmp_path, big_task(120)))
    assert compactkit.validate(ctx) == []
    before = compactkit.count_tokens(ctx)
    budget = before // 4
    pipeline = compactkit.build_pipeline(compactkit.default_pipeline(budget), budget=budget)
    result = pipeline.run(ctx)
    assert result.tokens_after <= budget < before
    assert compactkit.validate(result.context, ctx) == []
    assert compactkit.expand(result.context) == ctx
    assert result.context.messages[result.context.first_user_index or 0] == ctx.messages[0]
