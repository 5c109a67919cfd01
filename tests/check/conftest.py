"""Helpers for `compactkit check` tests: a CLI around a plugin-free registry, and repo layouts
in a temporary folder whose sessions are the bundled ones."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

from click.testing import CliRunner

from compactkit.cli import make_cli
from compactkit.registry import make_registry

from ..conftest import ROOT, SAMPLES

CLI = make_cli(lambda **kw: make_registry(entry_points=False, **kw))
PYPROJECT = ROOT / "pyproject.toml"
BASELINE = ROOT / "compactkit-baseline.json"


def run(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(CLI, list(args))
    return result.exit_code, result.stdout, result.stderr


def dogfood_section() -> str:
    """compactkit's own `[[tool.compactkit.check]]` section, as committed."""
    text = PYPROJECT.read_text(encoding="utf-8")
    match = re.search(r"^\[\[tool\.compactkit\.check\]\].*?(?=^\[tool\.)", text, re.S | re.M)
    assert match, "pyproject.toml has no [[tool.compactkit.check]]"
    return match.group(0)


def layout(tmp_path: Path, config: str, *, baseline: bool = True) -> Path:
    """A repository in `tmp_path`: pyproject.toml holding `config`, the bundled sessions under
    examples/sessions, and (optionally) compactkit's committed baseline."""
    (tmp_path / "examples").mkdir(exist_ok=True)
    if not (tmp_path / "examples" / "sessions").exists():
        (tmp_path / "examples" / "sessions").symlink_to(SAMPLES)
    (tmp_path / "pyproject.toml").write_text(config, encoding="utf-8")
    if baseline:
        shutil.copy(BASELINE, tmp_path / "compactkit-baseline.json")
    return tmp_path / "pyproject.toml"
