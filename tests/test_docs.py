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


PUBLIC_MODULES = {
    "compactkit",
    "compactkit.testing",
    "compactkit.integrations.langchain",
    "compactkit.integrations.pydantic_ai",
    "compactkit.integrations.openai_agents",
    "compactkit.integrations.adk",
    "compactkit.gateway",
}


def _private_uses(code: str) -> list[str]:
    """Imports of compactkit's private modules, and attribute paths into them, in `code`."""
    import ast

    import compactkit

    found = []
    for node in ast.walk(ast.parse(code)):
        if isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "compactkit":
            if node.module not in PUBLIC_MODULES:
                found.append(f"from {node.module} import ...")
        elif isinstance(node, ast.Import):
            found += [
                f"import {a.name}"
                for a in node.names
                if a.name.startswith("compactkit.") and a.name not in PUBLIC_MODULES
            ]
        elif (
            isinstance(node, ast.Attribute)
            and isinstance(node.value, ast.Name)
            and node.value.id == "compactkit"
            and node.attr not in compactkit.__all__
            and node.attr != "testing"
        ):
            found.append(f"compactkit.{node.attr}")
    return found


def _public_api_sources() -> list[tuple[str, str]]:
    sources = [(f"{page}[{n}]", code) for page, n, code in _examples()]
    for path in sorted((ROOT / "plugins").rglob("*.py")):
        sources.append((str(path.relative_to(ROOT)), path.read_text(encoding="utf-8")))
    return sources


def test_docs_and_plugins_use_only_the_public_api() -> None:
    """What the docs teach and the example plugin does is what `compactkit.__all__` promises."""
    private = {
        where: uses for where, code in _public_api_sources() if (uses := _private_uses(code))
    }
    assert private == {}


def test_every_public_name_resolves() -> None:
    import compactkit

    missing = [name for name in compactkit.__all__ if not hasattr(compactkit, name)]
    assert missing == []
