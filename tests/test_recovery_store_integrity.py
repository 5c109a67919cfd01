"""`expand` never says ok while a marker remains: every entry of a recovery store removed in turn
(its header count kept true, so only the marker can tell) makes `expand` exit 2 naming the etag and
`validate` report the dangling marker; a store whose header count is wrong is exit 2; `run` on a
compacted output whose store was tampered with copies nothing through, and `run` on one whose store
is missing or empty is exit 2 naming the store."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

import compactkit
from compactkit.cli import make_cli
from compactkit.recovery import context_copies
from compactkit.registry import make_registry

from .conftest import sample

CLI = make_cli(lambda **kw: make_registry(entry_points=False, **kw))
STORE = "small.json.recovery.jsonl"


def cli(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(CLI, list(args))
    return result.exit_code, result.stdout, result.stderr


@pytest.fixture(scope="module")
def compacted(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """small.json (the sphinx session compacted to 20,000 tokens) and the store beside it."""
    folder = tmp_path_factory.mktemp("compacted")
    shutil.copyfile(sample("sphinx-doc"), folder / "S.json")
    code, _, err = cli(
        "run", str(folder / "S.json"), "--budget", "20000", "-o", str(folder / "small.json")
    )
    assert code == 0, err
    return folder


@pytest.fixture
def work(compacted: Path, tmp_path: Path) -> Path:
    for name in ("small.json", STORE):
        shutil.copyfile(compacted / name, tmp_path / name)
    return tmp_path


def _entries(store: Path) -> tuple[dict[str, object], list[str]]:
    header, *lines = store.read_text().splitlines()
    return json.loads(header), lines


def _write(store: Path, header: dict[str, object], lines: list[str]) -> None:
    store.write_text("\n".join([json.dumps(header), *lines]) + "\n")


def test_the_untouched_store_expands_every_marker(work: Path) -> None:
    code, _, err = cli("expand", str(work / "small.json"), "-o", str(work / "back.json"))
    assert code == 0, err
    assert '"etag"' not in (work / "back.json").read_text()
    assert cli("validate", str(work / "small.json"))[0] == 0


def test_every_entry_removed_is_named_by_expand_and_validate(work: Path) -> None:
    """expand either restores every marker (a collapse whose payload the context still holds in
    full stands for that copy) or exits 2 naming what it cannot restore: never 0 with a marker."""
    header, lines = _entries(work / STORE)
    assert len(lines) >= 5
    held = context_copies(compactkit.load_one(work / "small.json", recovery=False))
    refused = 0
    for k, removed in enumerate(lines):
        etag = json.loads(removed)["etag"]
        _write(work / STORE, {**header, "entries": len(lines) - 1}, lines[:k] + lines[k + 1 :])
        back = work / "back.json"
        back.unlink(missing_ok=True)
        code, _, err = cli("expand", str(work / "small.json"), "-o", str(back))
        vcode, out, _ = cli("validate", str(work / "small.json"))
        if code == 0:
            assert '"etag"' not in back.read_text(), f"entry {k} ({etag}): a marker was left"
            assert vcode == 0, out
            # only a collapse whose payload the context still holds in full needs no entry
            assert etag in held, f"entry {k} ({etag}) was not needed, yet names no full copy"
            continue
        refused += 1
        assert code == 2 and "cannot be restored" in err and etag in err, err
        assert not back.exists()
        assert vcode == 3 and "dangling-marker" in out and etag in out, out
    assert refused >= 1 and refused >= len(lines) - len(held)


@pytest.mark.parametrize("change", ["removed", "duplicated"])
def test_a_header_count_that_does_not_match_is_exit_2(work: Path, change: str) -> None:
    header, lines = _entries(work / STORE)
    changed = lines[1:] if change == "removed" else [*lines, lines[0]]
    _write(work / STORE, header, changed)
    code, _, err = cli("expand", str(work / "small.json"), "-o", str(work / "back.json"))
    assert code == 2
    assert f"the store's header counts {header['entries']} entries" in err


def test_run_on_a_tampered_store_copies_nothing_through(work: Path) -> None:
    header, lines = _entries(work / STORE)
    record = json.loads(lines[2])
    record["payload"] = record["payload"].replace("e", "E", 1)
    _write(work / STORE, header, [*lines[:2], json.dumps(record), *lines[3:]])
    code, _, err = cli(
        "run", str(work / "small.json"), "--budget", "10000", "-o", str(work / "again.json")
    )
    assert code == 2
    assert f"recovery entry {record['etag']}: does not match its etag" in err
    assert not (work / "again.json").exists()
    assert not (work / "again.json.recovery.jsonl").exists()


@pytest.mark.parametrize("store", ["missing", "empty", "header only"])
@pytest.mark.parametrize("strategy", ["default", "sliding-window"])
def test_run_on_an_output_without_its_store_names_the_store(
    work: Path, store: str, strategy: str
) -> None:
    """Not the first strategy blamed for a broken contract (exit 3), nor a new output whose
    markers stand for nothing (exit 0): one line naming the store, exit 2, nothing written."""
    path = work / STORE
    etags = sorted(json.loads(line)["etag"] for line in _entries(path)[1])
    if store == "missing":
        path.unlink()
    else:
        path.write_text(
            "" if store == "empty" else '{"format": "compactkit.recovery/1", "entries": 0}\n'
        )
    again = work / "again.json"
    code, _, err = cli(
        "run", str(work / "small.json"), "-s", strategy, "--budget", "10000", "-o", str(again)
    )
    assert code == 2, err
    assert err.count("\n") == 1 and "cannot be restored" in err
    assert f"its recovery store {path} is {'missing' if store == 'missing' else 'empty'}" in err
    assert any(etag in err for etag in etags)
    assert not again.exists() and not Path(f"{again}.recovery.jsonl").exists()


def test_run_on_an_output_read_from_stdin_without_its_store_is_exit_2(work: Path) -> None:
    result = CliRunner().invoke(
        CLI, ["run", "-", "-o", str(work / "again.json")], input=(work / "small.json").read_text()
    )
    assert result.exit_code == 2
    assert "cannot be restored" in result.stderr and "recovery store lacks them" in result.stderr
