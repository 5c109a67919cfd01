"""Installable where users are: `make run` installs the package alone and says what it wrote and
what to type next, `make test` adds the dev tools on top, and the version, the docs' pins and the
git tags agree."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from compactkit import __version__

from .conftest import ROOT

if sys.version_info >= (3, 11):
    import tomllib
else:  # compactkit depends on tomli there
    import tomli as tomllib

needs_make = pytest.mark.skipif(shutil.which("make") is None, reason="no make on PATH")
PINNED = re.compile(r"(?:OWNER/compactkit@v|compactkit==|rev: v)(\d+\.\d+\.\d+)")


def _make(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["make", "--no-print-directory", "-C", str(ROOT), *args],
        capture_output=True,
        text=True,
        check=False,
        timeout=600,
    )


def _installs(dry_run: str) -> list[str]:
    """What each `pip install` line of a `make -n` dry run installs."""
    return [
        line.split("pip install --quiet ", 1)[1]
        for line in dry_run.splitlines()
        if "pip install --quiet " in line and "--upgrade pip" not in line
    ]


@needs_make
def test_make_run_installs_the_package_alone_and_make_test_adds_the_dev_tools(
    tmp_path: Path,
) -> None:
    venv = tmp_path / "venv"
    run = _make("-n", "run", f"VENV={venv}")
    assert run.returncode == 0, run.stderr
    assert _installs(run.stdout) == ["-e ."]  # no test, lint or type-check tools for the demo
    fresh = _make("-n", "test", f"VENV={venv}")
    assert _installs(fresh.stdout) == ["-e .", '-e ".[dev]"', "-e plugins/compactkit-cap-output"]

    # after `make run`, `make test` keeps the venv and adds only the dev level
    venv.mkdir()
    (venv / ".installed-run").touch()
    after_run = _make("-n", "test", f"VENV={venv}")
    assert "-m venv" not in after_run.stdout
    assert _installs(after_run.stdout) == ['-e ".[dev]"', "-e plugins/compactkit-cap-output"]
    (venv / ".installed-dev").touch()
    assert _installs(_make("-n", "test", f"VENV={venv}").stdout) == []
    assert _installs(_make("-n", "run", f"VENV={venv}").stdout) == []


@needs_make
def test_make_run_names_the_files_it_wrote_and_what_to_type_next(tmp_path: Path) -> None:
    """The demo itself on the bundled real session, with this environment's compactkit in place
    of a fresh .venv (`-o` skips the install)."""
    out = tmp_path / "out"
    bin_dir = Path(sys.executable).parent
    demo = _make("-o", ".venv/.installed-run", "run", f"BIN={bin_dir}", f"OUT={out}")
    assert demo.returncode == 0, demo.stderr
    assert "offline extractive backend, no model called" in demo.stdout
    assert "no differences" in demo.stdout

    lines = demo.stdout.splitlines()
    named = [line.split()[0] for line in lines[lines.index("wrote:") + 1 :] if line[:2] == "  "]
    assert sorted(named) == sorted(str(p) for p in out.iterdir())  # every file, and only those
    assert all(Path(p).stat().st_size > 0 for p in named)
    assert lines[-1].startswith(f"next: {bin_dir}/compactkit --help")
    helped = subprocess.run(
        [str(bin_dir / "compactkit"), "--help"], capture_output=True, text=True, check=False
    )
    assert helped.returncode == 0 and "Usage: compactkit" in helped.stdout


def test_the_version_lives_in_one_place_and_every_pin_agrees() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    assert "version" not in project["project"] and "version" in project["project"]["dynamic"]
    source = project["tool"]["setuptools"]["dynamic"]["version"]["attr"]
    assert source == "compactkit._version.__version__"

    pages = [
        ROOT / "README.md",
        ROOT / "action.yml",
        *sorted((ROOT / "docs").rglob("*.md")),
        *sorted((ROOT / "compactkit" / "templates").rglob("*")),
        *sorted((ROOT / "plugins").rglob("*.md")),
    ]
    pins = {
        f"{page.relative_to(ROOT)}: {found}"
        for page in pages
        if page.is_file()
        for found in PINNED.findall(page.read_text(encoding="utf-8"))
    }
    assert pins  # the docs do pin a version (the action, pre-commit, git URLs)
    assert {pin for pin in pins if not pin.endswith(f": {__version__}")} == set()

    copier = (ROOT / "compactkit" / "templates" / "strategy" / "copier.yml").read_text()
    default = re.search(r'compactkit_version:\n(?:  .*\n)*?  default: "([^"]+)"', copier)
    assert default is not None and default.group(1) == __version__


def test_the_readme_names_every_extra_a_user_installs() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    install = (ROOT / "README.md").read_text(encoding="utf-8").split("## Install", 1)[1]
    install = install.split("\n## ", 1)[0]
    extras = set(project["project"]["optional-dependencies"]) - {"test", "dev"}
    assert sorted(e for e in extras if f"`{e}`" not in install) == []


def test_a_tag_on_this_commit_is_the_version() -> None:
    """`git tag -a vX.Y.Z` on a release commit names the version it sets, and no tag is ahead of
    the version (a tag cut before the bump, or a version moved back)."""
    if shutil.which("git") is None or not (ROOT / ".git").exists():
        pytest.skip("not a git checkout")

    def git(*args: str) -> list[str]:
        done = subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True, check=True)
        return done.stdout.split()

    version = tuple(int(n) for n in __version__.split("."))
    here = [t for t in git("tag", "--points-at", "HEAD") if re.fullmatch(r"v\d+\.\d+\.\d+", t)]
    assert here in ([], [f"v{__version__}"])
    tagged = [t for t in git("tag", "--list", "v*") if re.fullmatch(r"v\d+\.\d+\.\d+", t)]
    ahead = [t for t in tagged if tuple(int(n) for n in t[1:].split(".")) > version]
    assert ahead == []


def _pyprojects() -> dict[str, dict[str, Any]]:
    """Every pyproject.toml compactkit ships: its own, its plugins', the strategy template's
    (rendered with placeholder names)."""
    paths = [ROOT / "pyproject.toml", *sorted((ROOT / "plugins").glob("*/pyproject.toml"))]
    texts = {str(p.relative_to(ROOT)): p.read_text(encoding="utf-8") for p in paths}
    template = ROOT / "compactkit" / "templates" / "strategy" / "pyproject.toml.jinja"
    texts[str(template.relative_to(ROOT))] = re.sub(
        r"\{\{ *\w+ *\}\}", "x", template.read_text(encoding="utf-8")
    )
    return {name: tomllib.loads(text) for name, text in texts.items()}


def test_every_license_is_an_spdx_expression_setuptools_reads_without_a_warning() -> None:
    """`license = { text = "MIT" }` made every install print setuptools' deprecation box (once
    per package built); the SPDX string needs setuptools 77 or later to build."""
    from packaging.licenses import canonicalize_license_expression
    from packaging.requirements import Requirement

    for name, project in _pyprojects().items():
        license_ = project["project"].get("license")
        assert license_ is None or isinstance(license_, str), f"{name}: license {license_!r}"
        if license_ is not None:
            assert canonicalize_license_expression(license_) == license_, name
        requires = [Requirement(r) for r in project["build-system"]["requires"]]
        setuptools = next(r for r in requires if r.name == "setuptools")
        assert not setuptools.specifier.contains("76.9"), f"{name}: {setuptools}"
        assert setuptools.specifier.contains("77.0.0"), f"{name}: {setuptools}"
    assert _pyprojects()["pyproject.toml"]["project"]["license"] == "MIT"
