"""Cursor agent transcripts (`~/.cursor/projects/<project>/agent-transcripts/<id>/<id>.jsonl`),
lines shaped as the public readers of the format document them: `{"role", "message": {"content":
[...]}}` with Anthropic-style `text` / `tool_use` / `tool_result` blocks (ids optional), the
user's text in `<user_query>` tags, and `turn_ended` marker lines."""

from __future__ import annotations

import json
from pathlib import Path

import compactkit
from tests.formats._checks import pairing_problems

LINES = [
    {
        "role": "user",
        "message": {
            "content": [
                {
                    "type": "text",
                    "text": "<user_query>\nrename getUser to fetchUser everywhere\n</user_query>",
                }
            ]
        },
    },
    {
        "role": "assistant",
        "message": {
            "content": [
                {"type": "text", "text": "I'll search for the uses first."},
                {"type": "tool_use", "name": "Grep", "input": {"pattern": "getUser"}},
            ]
        },
    },
    {
        "role": "user",
        "message": {
            "content": [
                {"type": "tool_result", "content": "src/api.ts:4: export function getUser()"}
            ]
        },
    },
    {
        "role": "assistant",
        "message": {
            "content": [
                {
                    "type": "tool_use",
                    "id": "tu_2",
                    "name": "Write",
                    "input": {"path": "src/api.ts", "contents": "..."},
                }
            ]
        },
    },
    {
        "role": "user",
        "message": {
            "content": [
                {
                    "type": "tool_result",
                    "tool_use_id": "tu_2",
                    "content": [{"type": "text", "text": "Wrote src/api.ts"}],
                }
            ]
        },
    },
    {"type": "turn_ended"},
    {
        "role": "user",
        "message": {
            "content": [
                {"type": "text", "text": "<attached_files>\nsrc/api.ts\n</attached_files>"},
                {"type": "text", "text": "<user_query>\nalso update the tests\n</user_query>"},
            ]
        },
    },
    {
        "role": "user",
        "message": {
            "content": [
                {"type": "text", "text": "<system_reminder>lint before finishing</system_reminder>"}
            ]
        },
    },
    {"role": "assistant", "message": {"content": [{"type": "text", "text": "Updated the tests."}]}},
]


def samples(folder: Path) -> list[Path]:
    path = folder / "agent-transcripts" / "e13fc9ba" / "e13fc9ba.jsonl"
    path.parent.mkdir(parents=True)
    path.write_text("".join(json.dumps(line) + "\n" for line in LINES), encoding="utf-8")
    return [path]


def test_a_cursor_transcript_pairs_calls_and_keeps_the_users_words(tmp_path: Path) -> None:
    (path,) = samples(tmp_path)
    ctx = compactkit.load_one(path)
    assert ctx.metadata["source_format"] == "cursor"
    human = [m.text for m in ctx.messages if m.is_human]
    assert human == [
        "<user_query>\nrename getUser to fetchUser everywhere\n</user_query>",
        "<attached_files>\nsrc/api.ts\n</attached_files>\n<user_query>\nalso update the tests\n</user_query>",
    ]
    assert [m.origin for m in ctx.messages if m.role == "user" and not m.is_human] == ["harness"]
    results = {r.tool_call_id: r.text for m in ctx.messages for r in m.tool_results}
    assert results == {
        "cursor-2-1": "src/api.ts:4: export function getUser()",
        "tu_2": "Wrote src/api.ts",
    }
    assert "synthesized_results" not in ctx.metadata
    assert pairing_problems(ctx) == [] and compactkit.validate(ctx) == []
    assert ctx.metadata["skipped_records"] == {"turn_ended": 1}


def test_user_text_without_a_user_query_is_harness_only_when_it_is_whole_tagged_sections(
    tmp_path: Path,
) -> None:
    """A user line with no `<user_query>` is the human's unless it is made only of the tagged
    sections Cursor adds: text the user typed that starts with `<` (a component name) or carries
    words after an `<attached_files>` section stays the human's words."""
    typed = "<Button> renders twice on the settings page, fix it"
    after_files = "<attached_files>\nsrc/Button.tsx\n</attached_files>\nand keep the old props"
    reminder = '<system_reminder id="r1">lint before finishing</system_reminder>\n'
    lines = [
        {"role": "user", "message": {"content": [{"type": "text", "text": typed}]}},
        {"role": "assistant", "message": {"content": [{"type": "text", "text": "Looking."}]}},
        {"role": "user", "message": {"content": [{"type": "text", "text": after_files}]}},
        {"role": "user", "message": {"content": [{"type": "text", "text": reminder}]}},
        {"role": "assistant", "message": {"content": [{"type": "text", "text": "Fixed."}]}},
    ]
    path = tmp_path / "agent-transcripts" / "b1" / "b1.jsonl"
    path.parent.mkdir(parents=True)
    path.write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")
    ctx = compactkit.load_one(path)
    assert [m.text for m in ctx.messages if m.is_human] == [typed, after_files]
    assert [m.text for m in ctx.messages if m.origin == "harness"] == [reminder]
