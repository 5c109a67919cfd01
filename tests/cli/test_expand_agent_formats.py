"""`expand` of a session written in an agent's format: the agent's format keeps no marker (each is
written as the text a model is shown), so the store `run` wrote beside it cannot put anything
back; `expand` says so (exit 2, one line naming the store) instead of exiting 0 with the
compacted session as if it were the original."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

import compactkit
from compactkit.cli import make_cli
from compactkit.registry import make_registry

from ..conftest import sample

CLI = make_cli(lambda: make_registry(entry_points=False))


@pytest.mark.parametrize(
    ("to", "name"),
    [("claude-code", "s.jsonl"), ("pi-session", "s.jsonl"), ("codex-rollout", "rollout.jsonl")],
)
def test_expand_of_an_agent_format_output_is_exit_2_not_a_silent_nothing(
    tmp_path: Path, to: str, name: str
) -> None:
    out = tmp_path / name
    result = CliRunner().invoke(
        CLI, ["run", str(sample("sphinx-doc")), "--budget", "8000", "--to", to, "-o", str(out)]
    )
    assert result.exit_code in (0, 1), result.output
    store = Path(f"{out}.recovery.jsonl")
    assert store.is_file()  # what was removed is there...
    back = tmp_path / "back.json"
    result = CliRunner().invoke(CLI, ["expand", str(out), "-o", str(back)])
    assert result.exit_code == 2, result.output  # ...but nothing in the file points at it
    assert result.stderr.count("\n") == 1
    assert f"{store} holds" in result.stderr and "holds no marker" in result.stderr
    assert not back.exists()


def test_expand_of_the_compactkit_output_still_puts_everything_back(tmp_path: Path) -> None:
    out, back = tmp_path / "small.json", tmp_path / "back.json"
    CliRunner().invoke(CLI, ["run", str(sample("sphinx-doc")), "--budget", "8000", "-o", str(out)])
    assert len(compactkit.load(str(out))[0].messages) < len(original := _messages())
    result = CliRunner().invoke(CLI, ["expand", str(out), "-o", str(back)])
    assert result.exit_code == 0, result.output
    assert len(compactkit.load(str(back))[0].messages) == len(original)


def _messages() -> tuple[object, ...]:
    return compactkit.load(str(sample("sphinx-doc")))[0].messages
