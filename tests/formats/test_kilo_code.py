"""Kilo Code task histories: Roo Code's files (Kilo-Org/kilocode keeps Roo Code's
`src/core/task-persistence/`, commit 74d6e4839d20b7b8af79c013e09fe9b1ede35539) under Kilo Code's
storage folder, written from the Roo Code and native-tool histories of test_cline (shaped after
Roo Code's writer)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import compactkit
from compactkit.errors import BadInputError
from tests.formats._checks import pairing_problems
from tests.formats._inspect import inspect_output
from tests.formats.test_cline import NATIVE_TASK, ROO_TASK

STORAGE = Path("Code") / "User" / "globalStorage" / "kilocode.kilo-code" / "tasks"


def samples(folder: Path) -> list[Path]:
    out = []
    for task_id, history in (("1750000000001", ROO_TASK), ("1750000000002", NATIVE_TASK)):
        path = folder / STORAGE / task_id / "api_conversation_history.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(history), encoding="utf-8")
        out.append(path)
    return out


def test_a_kilo_task_reads_as_roo_code_does_under_its_own_name(tmp_path: Path) -> None:
    for path in samples(tmp_path):
        ctx = compactkit.load_one(path)
        assert ctx.metadata["source_format"] == "kilo-code"
        assert ctx.metadata["session_id"] == path.parent.name
        copy = tmp_path / "elsewhere" / path.parent.name / path.name
        copy.parent.mkdir(parents=True)
        copy.write_bytes(path.read_bytes())
        as_cline = compactkit.load_one(copy)
        assert as_cline.metadata["source_format"] == "cline"
        assert as_cline.messages == ctx.messages and as_cline.pins == ctx.pins
        assert any(m.is_human for m in ctx.messages)
        assert pairing_problems(ctx) == [] and compactkit.validate(ctx) == []
        assert "format=kilo-code" in inspect_output(path)


def test_the_chat_panel_record_is_refused_naming_the_history(tmp_path: Path) -> None:
    path = tmp_path / STORAGE / "1750000000003" / "ui_messages.json"
    path.parent.mkdir(parents=True)
    path.write_text(
        json.dumps([{"ts": 1, "type": "say", "say": "text", "text": "hi"}]), encoding="utf-8"
    )
    with pytest.raises(
        BadInputError, match=r"kilo-code: this is Kilo Code's ui_messages.json \(the chat panel"
    ):
        compactkit.load(path)


def test_a_kilo_task_folder_loads_as_kilo_code(tmp_path: Path) -> None:
    """Given the task folder itself (the cline reader's layout), the history in it is read under
    Kilo Code's name, as the file is."""
    path = samples(tmp_path)[0]
    ctx = compactkit.load_one(path.parent)
    assert ctx.metadata["source_format"] == "kilo-code"
    assert ctx.messages == compactkit.load_one(path).messages
