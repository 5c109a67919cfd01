"""The author's kit: `compactkit new-strategy` renders a plugin package whose own tests pass, the
same files as `copier copy`; `compactkit[testing]` stays light."""

from __future__ import annotations

import filecmp
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from compactkit.cli import make_cli
from compactkit.cli.new_strategy import TEMPLATE, answers
from compactkit.registry import make_registry

from ..conftest import ROOT

CLI = make_cli(lambda: make_registry(entry_points=False))

tomllib = pytest.importorskip("tomllib")  # Python 3.11+: reads the rendered pyproject.toml


def new_strategy(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(CLI, ["new-strategy", *args])
    return result.exit_code, result.stdout, result.stderr


def _install_metadata(project: Path, site: Path) -> None:
    """What `pip install` leaves for importlib.metadata: a dist-info folder whose
    entry_points.txt comes from the rendered pyproject.toml (so the entry point is the one the
    template declares), beside a path to the project's source."""
    meta = tomllib.loads((project / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    info = site / f"{meta['name'].replace('-', '_')}-{meta['version']}.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(
        f"Metadata-Version: 2.1\nName: {meta['name']}\nVersion: {meta['version']}\n"
    )
    lines = ["[compactkit]"] + [f"{k} = {v}" for k, v in meta["entry-points"]["compactkit"].items()]
    (info / "entry_points.txt").write_text("\n".join(lines) + "\n")


def test_the_rendered_project_passes_its_own_tests(tmp_path: Path) -> None:
    started = time.perf_counter()
    project = tmp_path / "compactkit-keep-errors"
    code, out, err = new_strategy("keep-errors", "--dir", str(project))
    assert code == 0, err
    assert "created" in out and 'pip install -e ".[test]"' in out
    assert sorted(p.relative_to(project).as_posix() for p in project.rglob("*") if p.is_file()) == [
        "README.md",
        "compactkit_keep_errors/__init__.py",
        "pyproject.toml",
        "tests/sessions/NOTICE",
        "tests/sessions/testdata_gpt4_test-repo-i1.traj",
        "tests/test_compactkit_keep_errors.py",
    ]
    site = tmp_path / "site"
    _install_metadata(project, site)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(site), str(project)])}
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            "-p",
            "no:langsmith_plugin",
        ],
        cwd=project,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    elapsed = time.perf_counter() - started
    assert done.returncode == 0, done.stdout + done.stderr
    summary = done.stdout.strip().splitlines()[-1]
    assert summary.startswith("5 passed"), summary  # none skipped: the entry point was found too
    print(f"new-strategy to a passing conformance test: {elapsed:.1f} s ({summary})")


def test_the_rendered_plugin_loads_from_a_plugins_dir(tmp_path: Path) -> None:
    project = tmp_path / "p"
    assert new_strategy("drop-noise", "--dir", str(project))[0] == 0
    folder = tmp_path / "plugins"
    folder.mkdir()
    (folder / "drop_noise.py").write_text(
        (project / "compactkit_drop_noise" / "__init__.py").read_text()
    )
    registry = make_registry(entry_points=False, plugins_dir=folder)
    assert registry.errors == []
    assert registry.strategies.owner("drop-noise") == "drop_noise"


def test_copier_renders_the_same_files(tmp_path: Path) -> None:
    copier = pytest.importorskip("copier")
    ours, theirs = tmp_path / "ours", tmp_path / "theirs"
    assert new_strategy("keep-errors", "--dir", str(ours))[0] == 0
    copier.run_copy(
        str(TEMPLATE),
        str(theirs),
        data={
            "strategy_name": "keep-errors",
            "compactkit_version": answers("x")["compactkit_version"],
        },
        defaults=True,
        quiet=True,
    )
    files = sorted(p.relative_to(ours) for p in ours.rglob("*") if p.is_file())
    assert files == sorted(p.relative_to(theirs) for p in theirs.rglob("*") if p.is_file())
    same, mismatch, errors = filecmp.cmpfiles(ours, theirs, files, shallow=False)
    assert (mismatch, errors) == ([], [])
    assert len(same) == len(files) == 6


@pytest.mark.parametrize(
    ("name", "module", "cls"),
    [
        ("keep-errors", "compactkit_keep_errors", "KeepErrors"),
        ("gpt4-cap", "compactkit_gpt4_cap", "Gpt4Cap"),
    ],
)
def test_derived_names(name: str, module: str, cls: str) -> None:
    values = answers(name)
    assert (values["module_name"], values["class_name"]) == (module, cls)
    assert values["project_name"] == f"compactkit-{name}"


def test_bad_names_and_occupied_folders_are_usage_errors(tmp_path: Path) -> None:
    for bad in ("Keep_Errors", "9lives", "a--b", "trailing-"):
        code, _, err = new_strategy(bad, "--dir", str(tmp_path / "x"))
        assert code == 2, bad
        assert "lowercase letters, digits and single dashes" in err
    code, _, err = new_strategy("ok", "--description", 'say "hi"', "--dir", str(tmp_path / "y"))
    assert code == 2 and "double quotes" in err
    occupied = tmp_path / "occupied"
    occupied.mkdir()
    (occupied / "keep.txt").write_text("mine")
    code, _, err = new_strategy("ok", "--dir", str(occupied))
    assert code == 2 and "not empty" in err
    assert [p.name for p in occupied.iterdir()] == ["keep.txt"]


def test_the_template_ships_with_the_package_and_uses_only_plain_substitutions() -> None:
    assert TEMPLATE.is_relative_to(ROOT / "compactkit")
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    assert (
        "templates/strategy/**/*" in pyproject["tool"]["setuptools"]["package-data"]["compactkit"]
    )
    copier_yml = (TEMPLATE / "copier.yml").read_text(encoding="utf-8")
    for name in answers("x"):
        assert f"\n{name}:" in copier_yml, f"{name} is not a question of copier.yml"


def test_the_testing_extra_is_light() -> None:
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    testing = pyproject["project"]["optional-dependencies"]["testing"]
    names = sorted(req.split(">")[0].split("=")[0].split("[")[0].strip() for req in testing)
    assert names == ["hypothesis", "pytest"]
