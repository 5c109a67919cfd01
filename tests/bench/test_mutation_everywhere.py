"""A strategy that changes its input is caught by every runner: `run`, `bench` and `check` all fail
it (exit 3), no later row sees what it did, and `check --update-baseline` writes no baseline."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from compactkit.cli import make_cli
from compactkit.registry import make_registry

from ..conftest import sample

CLI = make_cli(lambda **kw: make_registry(entry_points=False, **kw))

MUTATOR = '''
"""A careless strategy: it cuts its input down in place (the context object, its metadata and the
tool calls' inputs) and returns it."""
from compactkit import Strategy, hookimpl


class Mutator(Strategy):
    name = "mutator"
    description = "changes its input in place"

    def compact(self, ctx):
        object.__setattr__(ctx, "messages", ctx.messages[:3])
        ctx.metadata["seen"] = "mutator"
        return ctx


@hookimpl
def register_strategies(register):
    register(Mutator)
'''


REWRITER = '''
"""A hostile strategy: it rewrites a user's words inside a frozen text block, in place (around
pydantic's frozen check), and returns its input as it is."""
from compactkit import Strategy, hookimpl
from compactkit.context import TextBlock


class Rewriter(Strategy):
    name = "rewriter"
    description = "rewrites a block of its input in place"

    def compact(self, ctx):
        for m in ctx.messages:
            if m.role == "user" and m.metadata.get("origin") not in ("harness", "tool-output"):
                for b in m.content:
                    if isinstance(b, TextBlock):
                        object.__setattr__(b, "text", "REWRITTEN " + b.text)
                        return ctx
        return ctx


@hookimpl
def register_strategies(register):
    register(Rewriter)
'''


@pytest.fixture
def work(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    (tmp_path / "plugins").mkdir()
    (tmp_path / "plugins" / "mutator.py").write_text(MUTATOR)
    (tmp_path / "plugins" / "rewriter.py").write_text(REWRITER)
    shutil.copyfile(sample("sphinx-doc"), tmp_path / "S.json")
    monkeypatch.chdir(tmp_path)
    return tmp_path


def cli(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(CLI, ["--plugins-dir", "plugins", *args])
    return result.exit_code, result.stdout, result.stderr


def _row(report_path: Path, pipeline: str) -> dict[str, object]:
    report = json.loads(report_path.read_text())
    (row,) = [s for s in report["sessions"] if s["pipeline"] == pipeline]
    return dict(row)


def test_run_fails_a_strategy_that_changes_its_input(work: Path) -> None:
    code, _, err = cli("run", "S.json", "-s", "mutator", "-o", "out.json")
    assert code == 3
    assert "strategy 'mutator' broke the contract: it mutated its input" in err


@pytest.mark.parametrize("timeout", ["0", "30"])  # in-process, and in the reused worker
def test_run_fails_a_strategy_that_rewrites_a_block_in_place(work: Path, timeout: str) -> None:
    code, _, err = cli("run", "S.json", "-s", "rewriter", "--timeout", timeout, "-o", "out.json")
    assert code == 3, err
    assert "strategy 'rewriter' broke the contract: it mutated its input" in err
    assert not (work / "out.json").exists()


@pytest.mark.parametrize("mode", ["oneshot", "persistent"])
def test_bench_fails_it_and_the_next_pipeline_sees_the_session_intact(
    work: Path, mode: str
) -> None:
    args = ("--mode", mode, "--trigger", "20000")
    code, _, err = cli("bench", "S.json", "-s", "observation-mask", *args, "--json", "alone.json")
    assert code == 0, err
    code, _, err = cli(
        *("bench", "S.json", "-s", "mutator", "-s", "observation-mask", *args),
        *("--json", "both.json"),
    )
    assert code == 3
    assert "strategy 'mutator' broke the contract: it mutated its input" in err
    failed = json.loads((work / "both.json").read_text())["failed"]
    assert [f["pipeline"] for f in failed] == ["mutator"]
    alone, after = (
        _row(work / "alone.json", "observation-mask"),
        _row(work / "both.json", "observation-mask"),
    )
    for key in ("tokens_before", "tokens_after", "retention"):
        assert after[key] == alone[key], key


def test_check_fails_it_and_writes_no_baseline(work: Path) -> None:
    (work / "pyproject.toml").write_text(
        '[[tool.compactkit.check]]\nname = "m"\nsessions = ["S.json"]\nmode = "oneshot"\n'
        'pipeline = ["mutator"]\n'
    )
    code, out, _ = cli("check")
    assert code == 3
    assert "m: S.json: does not load or run: strategy 'mutator' broke the contract" in " ".join(
        out.split()
    )
    code, _, err = cli("check", "--update-baseline")
    assert code == 3 and "baseline not written" in err
    assert not (work / "compactkit-baseline.json").exists()
