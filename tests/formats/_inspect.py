"""`compactkit inspect` on a file, as a user runs it (the built-in formats only)."""

from __future__ import annotations

from pathlib import Path

from click.testing import CliRunner

from compactkit.cli import make_cli
from compactkit.registry import make_registry


def inspect_output(path: Path) -> str:
    """What `compactkit inspect PATH` prints; fails the test when it does not exit 0."""
    cli = make_cli(lambda: make_registry(entry_points=False))
    result = CliRunner().invoke(cli, ["inspect", str(path)])
    assert result.exit_code == 0, result.output + result.stderr
    return result.output
