"""The gateway's --state file when it is not what the gateway wrote: a file that is not a database
is one line and exit 2 at start; a conversation row edited or damaged in it starts that
conversation afresh instead of failing every request of it."""

from __future__ import annotations

from pathlib import Path

from click.testing import CliRunner

from compactkit import make_cli

TASK = "Find why sphinx drops the alias docstring and fix it; keep the public API."


def test_a_state_file_that_is_not_a_database_is_one_line_and_exit_2(tmp_path: Path) -> None:
    bad = tmp_path / "gateway.db"
    bad.write_bytes(b"notes I keep next to the gateway, not SQLite\n" * 100)
    result = CliRunner().invoke(
        make_cli(), ["gateway", "--listen", "127.0.0.1:0", "--state", str(bad)]
    )
    assert result.exit_code == 2, result.output
    assert str(bad) in result.output and "not a usable gateway state database" in result.output
    assert len(result.output.strip().splitlines()) == 1
    assert bad.read_bytes().startswith(b"notes I keep")  # left as it was
