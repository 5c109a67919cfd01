"""A folder of sessions as the agents keep them (`bench FOLDER`, `check` sessions patterns): each
session is found once, by the path that reads it whole. Layouts after the agents' own stores:
Claude Code `<session>.jsonl` + `<session>/subagents/agent-<id>.jsonl`; OpenCode's data folder
(`opencode.db`, the `storage/` it migrated from); a software-agent-sdk conversation folder
(`base_state.json`, `events/`); Goose's `sessions/` (`sessions.db`, the legacy `.jsonl` files its
`SessionStorage::import_legacy` copied in); aider's `.aider.chat.history.md`."""

from __future__ import annotations

import shutil
from pathlib import Path

from click.testing import CliRunner

from compactkit.cli import make_cli
from compactkit.paths import session_files
from compactkit.registry import make_registry

from . import test_aider, test_goose, test_opencode
from .test_claude_code_layouts import SESSION, main_session, subagent, write_jsonl
from .test_openhands_layout import conversation_dir, uuid_events


def home(root: Path) -> dict[str, Path]:
    """The stores of five agents under one folder; the path each session is read by."""
    project = root / "claude" / "projects" / "-repo"
    claude = write_jsonl(project / f"{SESSION}.jsonl", main_session())
    write_jsonl(project / SESSION / "subagents" / "agent-a485154.jsonl", subagent("a485154", "x"))
    opencode = root / "opencode"
    db, storage = test_opencode.samples(root / "opencode-parts")
    shutil.copytree(storage, opencode / "storage")  # OpenCode migrated it into the database
    shutil.copy(db, opencode / "opencode.db")
    old_opencode = root / "old-opencode"
    shutil.copytree(storage, old_opencode / "storage")  # a release before the database
    openhands = conversation_dir(root / "openhands" / "conversations", uuid_events())
    goose_db, legacy = test_goose.samples(root / "goose-parts")
    goose = root / "goose" / "sessions"
    goose.mkdir(parents=True)
    shutil.copy(goose_db, goose / "sessions.db")
    shutil.copy(legacy, goose / legacy.name)  # imported into sessions.db when it was made
    (aider,) = test_aider.samples(root / "repo")
    return {
        "claude": claude,
        "opencode": opencode / "opencode.db",
        "old-opencode": old_opencode / "storage",
        "openhands": openhands,
        "goose": goose / "sessions.db",
        "aider": aider,
    }


def test_a_folder_lists_each_session_once_by_the_path_that_reads_it(tmp_path: Path) -> None:
    stores = home(tmp_path / "home")
    for part in ("opencode-parts", "goose-parts"):
        shutil.rmtree(tmp_path / "home" / part)
    assert sorted(session_files(tmp_path / "home")) == sorted(str(p) for p in stores.values())


def test_bench_over_a_folder_of_agent_stores_loads_every_session(tmp_path: Path) -> None:
    home(tmp_path / "home")
    cli = make_cli(lambda: make_registry(entry_points=False))
    result = CliRunner().invoke(cli, ["bench", str(tmp_path / "home")])
    assert result.exit_code == 0, result.stderr
    assert "not loaded" not in result.output + result.stderr
