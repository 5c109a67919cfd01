"""Cline native tool calls (`tool_use` blocks) whose results come back as text blocks.

Shaped after cline/cline `src/core/task/tools/utils/ToolResultUtils.ts` (`pushToolResult` writes a
`"[<tool> for '<arg>'] Result:"` text block and then the result's text, whatever the call's form) and
`src/core/task/index.ts` (the environment details, their own text block at the end of each user
message): the assistant message holds Anthropic `tool_use` blocks, the next user message their results
as text.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import compactkit
from tests.formats._checks import pairing_problems

ENV = "<environment_details>\n# VSCode Visible Files\nsrc/app.ts\n</environment_details>"


def text(value: str) -> dict[str, str]:
    return {"type": "text", "text": value}


def tool_use(call_id: str, name: str, **params: str) -> dict[str, Any]:
    return {"type": "tool_use", "id": call_id, "name": name, "input": params}


TASK = [
    {"role": "user", "content": [text("<task>\nfix the failing build\n</task>"), text(ENV)]},
    {
        "role": "assistant",
        "content": [
            text("I'll read the file and run the build."),
            tool_use("toolu_01", "read_file", path="src/app.ts"),
            tool_use("toolu_02", "execute_command", command="npm run build"),
        ],
        "modelInfo": {"modelId": "claude-sonnet-4-5", "providerId": "anthropic"},
    },
    {
        "role": "user",
        "content": [
            text("[read_file for 'src/app.ts'] Result:"),
            text("export const x: number = 'a'"),
            text("[execute_command for 'npm run build'] Result:"),
            text(
                "Command executed.\nOutput:\nerror TS2322\n\nThe user provided the following "
                "feedback:\n<feedback>\nonly touch src/app.ts\n</feedback>"
            ),
            text(ENV),
        ],
    },
    {"role": "assistant", "content": [tool_use("toolu_03", "attempt_completion", result="Fixed.")]},
]


def test_native_calls_pair_with_their_text_results(tmp_path: Path) -> None:
    folder = tmp_path / "1735000000000"
    folder.mkdir()
    path = folder / "api_conversation_history.json"
    path.write_text(json.dumps(TASK), encoding="utf-8")
    (ctx,) = compactkit.load(path)
    assert "synthesized_results" not in ctx.metadata  # was 2: "[no result recorded]" for each
    assert pairing_problems(ctx) == [] and compactkit.validate(ctx) == []
    results = {r.tool_call_id: r.text for m in ctx.messages for r in m.tool_results}
    assert results == {
        "toolu_01": "export const x: number = 'a'",
        "toolu_02": "Command executed.\nOutput:\nerror TS2322\n\nThe user provided the following "
        "feedback:",
    }
    human = [b.text for m in ctx.messages if m.is_human for b in m.content if b.type == "text"]
    assert "<task>\nfix the failing build\n</task>" in human
    assert "<feedback>\nonly touch src/app.ts\n</feedback>" in human
    assert ctx.messages[-1].tool_calls[0].id == "toolu_03"  # the last call stays pending


def test_a_text_result_pairs_with_the_call_its_header_names(tmp_path: Path) -> None:
    """Two calls of one tool: each `[read_file for '<path>'] Result:` block is the result of the
    call reading that path (`toolDescription` names it), whatever order the results come in."""
    task = [
        {"role": "user", "content": [text("<task>\ncompare a.py and b.py\n</task>"), text(ENV)]},
        {
            "role": "assistant",
            "content": [
                tool_use("toolu_a", "read_file", path="a.py"),
                tool_use("toolu_b", "read_file", path="b.py"),
            ],
        },
        {
            "role": "user",
            "content": [
                text("[read_file for 'b.py'] Result:"),
                text("B = 2"),
                text("[read_file for 'a.py'] Result:"),
                text("A = 1"),
                text(ENV),
            ],
        },
        {"role": "assistant", "content": [text("They differ.")]},
    ]
    folder = tmp_path / "1735000000001"
    folder.mkdir()
    path = folder / "api_conversation_history.json"
    path.write_text(json.dumps(task), encoding="utf-8")
    ctx = compactkit.load_one(path)
    results = {r.tool_call_id: r.text for m in ctx.messages for r in m.tool_results}
    assert results == {"toolu_a": "A = 1", "toolu_b": "B = 2"}
    assert pairing_problems(ctx) == [] and compactkit.validate(ctx) == []
