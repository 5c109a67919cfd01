"""An OpenHands software-agent-sdk conversation directory loads as one session.

Layout as the SDK persists a `ConversationState` (OpenHands/software-agent-sdk
`openhands-sdk/openhands/sdk/conversation/persistence_const.py`: `base_state.json`, `events/`,
`event-{idx:05d}-{event_id}.json`; `event_store.py`: `EventLog` reads the files in index order up to
the first gap, skips an empty one, and ignores its `.eventlog.lock` / count-marker files).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from click.testing import CliRunner

import compactkit
from compactkit.cli import make_cli
from compactkit.registry import make_registry
from tests.formats.test_openhands import SDK_EVENTS

CLI = make_cli(lambda: make_registry(entry_points=False))

BASE_STATE = {
    "id": "3c4cf2db-a51a-47be-bd3e-d72dc910b816",
    "agent": {"kind": "Agent", "llm": {"model": "litellm_proxy/claude-sonnet-4-5"}, "tools": []},
    "workspace": {"kind": "LocalWorkspace", "working_dir": "/workspace/project"},
    "persistence_dir": ".conversations/3c4cf2dba51a47bebd3ed72dc910b816",
    "max_iterations": 500,
    "execution_status": "finished",
}


def conversation_dir(root: Path, events: list[dict[str, Any]], old_names: bool = False) -> Path:
    directory = root / "3c4cf2dba51a47bebd3ed72dc910b816"
    (directory / "events").mkdir(parents=True)
    (directory / "base_state.json").write_text(json.dumps(BASE_STATE), encoding="utf-8")
    for index, event in enumerate(events):
        name = f"event-{index:05d}.json" if old_names else f"event-{index:05d}-{event['id']}.json"
        (directory / "events" / name).write_text(json.dumps(event), encoding="utf-8")
    (directory / "events" / ".eventlog.lock").write_text("", encoding="utf-8")
    (directory / "events" / f".eventlog-count-{len(events)}.marker").write_text("")
    return directory


def uuid_events() -> list[dict[str, Any]]:
    """The SDK events of `test_openhands` with ids shaped as the SDK makes them (uuid4)."""
    return [dict(e, id=f"{n:08x}-0000-4000-8000-000000000000") for n, e in enumerate(SDK_EVENTS)]


def test_a_conversation_directory_loads_as_one_session(tmp_path: Path) -> None:
    events = uuid_events()
    directory = conversation_dir(tmp_path, events)
    as_list = tmp_path / "events.json"
    as_list.write_text(json.dumps(events), encoding="utf-8")
    expected = compactkit.load_one(as_list)
    for path in (directory, directory / "base_state.json"):
        result = CliRunner().invoke(CLI, ["inspect", str(path), "--json"])
        assert result.exit_code == 0, result.stderr
        ctx = compactkit.load_one(path)
        assert ctx.messages == expected.messages
        assert ctx.system_instruction == expected.system_instruction
        assert ctx.metadata["session_id"] == BASE_STATE["id"]
        assert ctx.metadata["cwd"] == "/workspace/project"
        assert [m.text for m in ctx.messages if m.is_human] == [
            "Make the build green",
            "Skip ruff, fix the test",
        ]


def test_older_event_names_and_the_first_gap(tmp_path: Path) -> None:
    events = uuid_events()
    directory = conversation_dir(tmp_path, events, old_names=True)
    (directory / "events" / "event-00012.json").unlink()  # EventLog stops at a gap
    ctx = compactkit.load_one(directory)
    assert [m.text for m in ctx.messages if m.is_human] == [
        "Make the build green",
        "Skip ruff, fix the test",
    ]
    assert "Fixed." not in [m.text for m in ctx.messages]  # event 12 and after are not read


def test_a_broken_event_file_is_one_line_naming_it(tmp_path: Path) -> None:
    directory = conversation_dir(tmp_path, uuid_events())
    broken = sorted((directory / "events").glob("event-00003-*.json"))[0]
    broken.write_text('{"kind": "ActionEvent", "id": ', encoding="utf-8")
    result = CliRunner().invoke(CLI, ["inspect", str(directory)])
    assert result.exit_code == 2 and str(broken) in result.stderr
    assert result.stderr.count("\n") == 1


def test_a_directory_that_is_no_conversation_is_still_refused(tmp_path: Path) -> None:
    result = CliRunner().invoke(CLI, ["inspect", str(tmp_path)])
    assert result.exit_code == 2 and "is a directory" in result.stderr
