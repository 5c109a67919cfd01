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


def _uid(tag: str) -> str:
    """An event id shaped as the SDK makes them (uuid4), `tag` telling them apart."""
    return f"{tag:0>8}-0000-4000-8000-000000000000"


def _tree_event(kind: str, source: str, event_id: str, parent: str | None, **fields: Any) -> Any:
    """An SDK event as `ConversationState.append_event` stamps it (`parent_id` = the HEAD)."""
    event = {
        "kind": kind,
        "id": event_id,
        "timestamp": "2026-03-01T10:00:00",
        "source": source,
        **fields,
    }
    if parent is not None:
        event["parent_id"] = parent
    return event


def _user(event_id: str, parent: str | None, text: str, source: str = "user") -> Any:
    message = {"role": "user", "content": [{"type": "text", "text": text}]}
    return _tree_event("MessageEvent", source, event_id, parent, llm_message=message)


def _action(event_id: str, parent: str, call_id: str, response_id: str) -> Any:
    call = {"id": call_id, "name": "file_editor", "arguments": '{"command": "view"}'}
    return _tree_event(
        "ActionEvent",
        "agent",
        event_id,
        parent,
        thought=[],
        tool_name="file_editor",
        tool_call_id=call_id,
        tool_call=call,
        llm_response_id=response_id,
    )


def _observation(event_id: str, parent: str, action_id: str, call_id: str, text: str) -> Any:
    observation = {"kind": "FileEditorObservation", "content": [{"type": "text", "text": text}]}
    return _tree_event(
        "ObservationEvent",
        "environment",
        event_id,
        parent,
        tool_name="file_editor",
        tool_call_id=call_id,
        action_id=action_id,
        observation=observation,
    )


def rolled_back_events() -> list[Any]:
    """A turn rolled back after the provider refused its screenshot (`turn_rollback.py`): the HEAD
    moves back to the event before the turn's first action, and the recovery message (and all
    that follows) hangs there; the refused turn stays in the log on a side branch."""
    system = {"type": "text", "text": "You are OpenHands agent."}
    return [
        _tree_event("SystemPromptEvent", "agent", _uid("a0"), None, system_prompt=system),
        _user(_uid("b1"), _uid("a0"), "Open the screenshot and fix the layout"),
        _action(_uid("c1"), _uid("b1"), "call_view", "resp-1"),
        _observation(_uid("d1"), _uid("c1"), _uid("c1"), "call_view", "<bad image>"),
        _tree_event(
            "ConversationStateUpdateEvent",
            "environment",
            _uid("e1"),
            _uid("d1"),
            key="execution_status",
            value="running",
        ),
        _user(
            _uid("f1"),
            _uid("b1"),
            "The model provider rejected the previous turn ... file_editor (succeeded)",
            source="environment",
        ),
        _action(_uid("c2"), _uid("f1"), "call_ls", "resp-2"),
        _observation(_uid("d2"), _uid("c2"), _uid("c2"), "call_ls", "layout.css"),
        _user(_uid("b2"), _uid("d2"), "Use flexbox"),
    ]


def tree_dir(root: Path, head: str) -> Path:
    """The events of `rolled_back_events` in a conversation directory whose HEAD is `head`."""
    directory = conversation_dir(root, rolled_back_events())
    state = dict(BASE_STATE, leaf_event_id=head)
    (directory / "base_state.json").write_text(json.dumps(state), encoding="utf-8")
    return directory


def _results(ctx: compactkit.AgentContext) -> list[str]:
    return [b.text for m in ctx.messages for b in m.content if b.type == "tool_result"]


def test_a_rolled_back_turn_is_not_loaded_as_sent(tmp_path: Path) -> None:
    directory = tree_dir(tmp_path, head=_uid("b2"))
    as_list = tmp_path / "events.json"  # no base state: the HEAD is the last real event
    as_list.write_text(json.dumps(rolled_back_events()), encoding="utf-8")
    for path in (directory, as_list):
        ctx = compactkit.load_one(path)
        assert _results(ctx) == ["layout.css"]
        calls = [b.id for m in ctx.messages for b in m.content if b.type == "tool_call"]
        assert calls == ["call_ls"]
        assert [m.text for m in ctx.messages if m.is_human] == [
            "Open the screenshot and fix the layout",
            "Use flexbox",
        ]
        assert ctx.metadata["skipped_records"]["off-branch/ActionEvent"] == 1
        assert ctx.metadata["skipped_records"]["off-branch/ObservationEvent"] == 1
        assert ctx.metadata["openhands_off_branch"] == [_uid("c1"), _uid("d1")]
    result = CliRunner().invoke(CLI, ["inspect", str(directory)])
    assert result.exit_code == 0, result.output


def test_the_head_in_base_state_picks_the_branch(tmp_path: Path) -> None:
    """`navigate_to` moved the HEAD back to an older branch: that branch is what is sent."""
    directory = tree_dir(tmp_path, head=_uid("d1"))
    ctx = compactkit.load_one(directory)
    assert [m.text for m in ctx.messages if m.is_human] == [
        "Open the screenshot and fix the layout"
    ]
    assert _results(ctx) == ["<bad image>"]
    assert ctx.metadata["skipped_records"]["off-branch/MessageEvent"] == 2


def test_a_broken_tree_loads_every_event(tmp_path: Path) -> None:
    """A HEAD that names no event on disk: nothing is dropped."""
    directory = tree_dir(tmp_path, head=_uid("dead"))
    ctx = compactkit.load_one(directory)
    assert _results(ctx) == ["<bad image>", "layout.css"]
    assert "openhands_off_branch" not in ctx.metadata
