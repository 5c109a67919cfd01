"""Every input the fuzzers ever found failing (`fuzz/regressions/<target>/*.bin`), replayed: each
must now be read with a result or a one-line compactkit error, within a time limit."""

from __future__ import annotations

import signal
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from click.testing import CliRunner

from compactkit.cli import make_cli
from compactkit.registry import make_registry
from fuzz.targets import REGRESSIONS, STASH_CONTEXT, TARGETS, directory

CLI = make_cli(lambda: make_registry(entry_points=False))

SECONDS = 30
"""Per input; a hang shows as a failure instead of a stuck run."""


@contextmanager
def time_limit(seconds: int) -> Iterator[None]:
    def stop(_signum: int, _frame: object) -> None:
        raise TimeoutError(f"still running after {seconds} s")

    previous = signal.signal(signal.SIGALRM, stop)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


def _inputs(folder: Path) -> list[tuple[str, Path]]:
    by_dir = {directory(name): name for name in TARGETS}
    return [
        (by_dir[path.parent.name], path)
        for path in sorted(folder.glob("*/*"))
        if path.parent.name in by_dir and path.suffix in (".bin", ".seed")
    ]


REPLAYED = _inputs(REGRESSIONS)


def test_every_regression_folder_names_a_target() -> None:
    known = {directory(name) for name in TARGETS}
    assert {p.name for p in REGRESSIONS.iterdir() if p.is_dir()} <= known
    assert REPLAYED  # the fuzzers' findings are kept


@pytest.mark.parametrize(("target", "path"), REPLAYED, ids=[f"{t}/{p.name}" for t, p in REPLAYED])
def test_regression_input_is_read_or_refused_in_one_line(target: str, path: Path) -> None:
    with time_limit(SECONDS):
        TARGETS[target](path.read_bytes())


def _cli_args(target: str, path: Path, tmp_path: Path) -> list[str] | None:
    """The command a user would run on the input (none for `-s` values: running the pipeline
    one names could call a summarizer's API; the spec target replays them above)."""
    if target == "session":
        return ["inspect", str(path)]
    if target.startswith("format:"):
        return ["inspect", "--format", target.split(":", 1)[1], str(path)]
    if target == "stash":
        out = str(tmp_path / "expanded.json")
        return ["expand", str(STASH_CONTEXT), "--stash", str(path), "-o", out]
    return None


ON_CLI = [(t, p) for t, p in REPLAYED if t != "spec"]


@pytest.mark.parametrize(("target", "path"), ON_CLI, ids=[f"{t}/{p.name}" for t, p in ON_CLI])
def test_regression_input_on_the_command_line_is_exit_0_or_one_line_exit_2(
    target: str, path: Path, tmp_path: Path
) -> None:
    args = _cli_args(target, path, tmp_path)
    assert args is not None
    with time_limit(SECONDS):
        result = CliRunner().invoke(CLI, args)
    assert result.exit_code in (0, 2), result.stderr
    if result.exit_code == 2:
        assert result.stderr.startswith("compactkit: error: ")
        assert result.stderr.count("\n") == 1
