"""`run -o OUT` keeps the parts of a huge removed window (the recovery store's bulk) in an unnamed
temporary file beside the store while it runs, not in memory, and writes the same output and
store as a run that held them."""

from __future__ import annotations

import tracemalloc
from pathlib import Path

import pytest
from click.testing import CliRunner

import compactkit
import compactkit.recovery as recovery
from compactkit.cli import make_cli
from compactkit.pipeline import build_pipeline
from compactkit.registry import make_registry

from .conftest import corpus_file

CLI = make_cli(lambda: make_registry(entry_points=False))
RUN = ("-s", "sliding-window", "--budget", "30000")


@pytest.fixture(autouse=True)
def small_parts(monkeypatch: pytest.MonkeyPatch) -> None:
    """Windows stored in parts from 20,000 characters on (8 MiB in use), so that a corpus
    session is a huge one."""
    monkeypatch.setattr(recovery, "_CHUNK_ABOVE", 20_000)
    monkeypatch.setattr(recovery, "_CHUNK", 3_000)


@pytest.fixture
def session() -> Path:
    return corpus_file("pi-mono_before-compaction")


def cli(*args: str | Path) -> tuple[int, str]:
    result = CliRunner().invoke(CLI, [str(a) for a in args])
    return result.exit_code, result.stderr


def traced_peak(*args: str | Path) -> float:
    """The peak of Python memory (MiB) while the command runs, over what was in use before."""
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        code, stderr = cli(*args)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert code in (0, 1), stderr  # 1: over budget, written all the same
    return (peak - before) / 2**20


def test_run_holds_no_copy_of_what_it_removed(tmp_path: Path, session: Path) -> None:
    traced_peak("inspect", session)  # the tokenizer, loaded once per process
    loading = traced_peak("inspect", session)  # read, load and count the session
    out = tmp_path / "small.json"
    running = traced_peak("run", session, *RUN, "-o", out)
    store = recovery.read_sidecar(f"{out}.recovery.jsonl")
    removed = sum(map(len, store.values())) / 2**20  # one byte a character: all narrow
    assert removed > 1.5 and len(store) > 100  # a window of many parts
    # held, the store's text took as much again as it is long (1.7 MiB over inspect's 6.9)
    assert running - loading < removed / 2, (running, loading, removed)


def test_run_writes_the_store_the_pipeline_gives(tmp_path: Path, session: Path) -> None:
    ctx = compactkit.load_one(session)
    result = build_pipeline(["sliding-window"], budget=30000).run(ctx)
    assert len(result.context.recovery) > 100
    out = tmp_path / "small.json"
    code, stderr = cli("run", session, *RUN, "-o", out)
    assert code in (0, 1), stderr
    assert recovery.read_sidecar(f"{out}.recovery.jsonl") == result.context.recovery
    assert out.read_text(encoding="utf-8") == compactkit.render(result.context.replace(recovery={}))
    stash = tmp_path / "small.stash"
    code, stderr = cli("run", session, *RUN, "-o", tmp_path / "other.json", "--stash", stash)
    assert code in (0, 1), stderr
    assert recovery.read_store(str(stash)) == result.context.recovery
    # the temporary file is gone: the folder holds what was written and nothing else
    names = {"small.json", "small.json.recovery.jsonl", "other.json", "small.stash"}
    assert {p.name for p in tmp_path.iterdir()} == names
    back = tmp_path / "back.json"
    code, stderr = cli("expand", out, "-o", back)
    assert code == 0, stderr
    assert compactkit.load_one(back).messages == ctx.messages


def test_compacting_again_keeps_the_parts_of_the_first_run(tmp_path: Path, session: Path) -> None:
    first, second = tmp_path / "first.json", tmp_path / "second.json"
    assert cli("run", session, "-s", "sliding-window", "--budget", "60000", "-o", first)[0] in (
        0,
        1,
    )
    code, stderr = cli("run", first, *RUN, "-o", second)
    assert code in (0, 1), stderr
    back = tmp_path / "back.json"
    code, stderr = cli("expand", second, "-o", back)
    assert code == 0, stderr
    assert compactkit.load_one(back).messages == compactkit.load_one(session).messages
