"""The docs' examples run, and every hook is documented."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

from compactkit import hookspecs

from .conftest import ROOT

DOCS = [*sorted((ROOT / "docs").rglob("*.md")), ROOT / "README.md"]
FENCE = re.compile(r"```python\n(.*?)```", re.S)


def _examples() -> list[tuple[str, int, str]]:
    out = []
    for page in DOCS:
        for n, match in enumerate(FENCE.finditer(page.read_text(encoding="utf-8"))):
            out.append((page.name, n, match.group(1)))
    return out


@pytest.mark.parametrize(("page", "n", "code"), _examples(), ids=lambda v: str(v)[:30])
def test_python_examples_in_docs_run(
    page: str, n: int, code: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(ROOT)
    code = code.replace('"/tmp/', f'"{tmp_path}{os.sep}')
    exec(compile(code, f"{page}[{n}]", "exec"), {"__name__": f"docs_{n}"})


def test_every_hook_is_documented() -> None:
    text = (ROOT / "docs" / "plugins.md").read_text(encoding="utf-8")
    hooks = [name for name in dir(hookspecs) if name.startswith(("register_", "compaction_"))]
    assert hooks
    for name in hooks:
        assert f"### `{name}(" in text, f"hook {name} is missing from docs/plugins.md"
