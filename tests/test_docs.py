"""The docs' examples run, and every hook is documented."""

from __future__ import annotations

import inspect
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


def _hooks() -> dict[str, inspect.Signature]:
    return {
        name: inspect.signature(getattr(hookspecs, name))
        for name in dir(hookspecs)
        if name.startswith(("register_", "compaction_"))
    }


def test_every_hook_is_documented_with_its_full_signature() -> None:
    """As datasette does: each hook has a heading `name(arg, ...)` naming every argument in order,
    no heading names a hook that does not exist, and every argument has its `:param:` line."""
    text = (ROOT / "docs" / "plugins.md").read_text(encoding="utf-8")
    documented = dict(re.findall(r"^### `(\w+)\(([^)]*)\)`", text, re.M))
    hooks = _hooks()
    assert hooks
    for name, signature in hooks.items():
        args = ", ".join(signature.parameters)
        assert documented.get(name) == args, f"docs/plugins.md lacks ### `{name}({args})`"
        doc = getattr(hookspecs, name).__doc__ or ""
        for arg in signature.parameters:
            assert f":param {arg}:" in doc, f"hook {name} does not describe {arg}"
    hook_like = {n for n in documented if n.startswith(("register_", "compaction_"))}
    assert hook_like <= set(hooks), f"documented hooks that do not exist: {hook_like - set(hooks)}"


def test_what_the_hooks_name_is_public() -> None:
    """Every `compactkit.NAME` a hook's docs point plugin authors to is in `compactkit.__all__`."""
    import compactkit

    named = {
        found
        for name in _hooks()
        for found in re.findall(r"`compactkit\.(\w+)`", getattr(hookspecs, name).__doc__ or "")
    }
    assert named
    assert sorted(named - set(compactkit.__all__)) == []


PUBLIC_MODULES = {
    "compactkit",
    "compactkit.testing",
    "compactkit.recovery",
    "compactkit.serve",
    "compactkit.spec",
    "compactkit.toolcall",
    "compactkit.integrations.langchain",
    "compactkit.integrations.pydantic_ai",
    "compactkit.integrations.openai_agents",
    "compactkit.integrations.adk",
    "compactkit.gateway",
}
"""The root's `__all__` and the modules its docstring names for plugin and tool authors."""


def _private_uses(code: str) -> list[str]:
    """Imports of compactkit's private modules (and of names a public module's `__all__` does
    not list), and attribute paths into them, in `code`."""
    import ast
    import importlib

    import compactkit

    found = []
    for node in ast.walk(ast.parse(code)):
        if isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "compactkit":
            if node.module not in PUBLIC_MODULES:
                found.append(f"from {node.module} import ...")
                continue
            promised = getattr(importlib.import_module(node.module or ""), "__all__", None)
            found += [
                f"from {node.module} import {a.name}"
                for a in node.names
                if promised is not None and a.name not in promised
            ]
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


def test_helpers_that_left_the_root_still_import_with_a_warning() -> None:
    import compactkit
    from compactkit.recovery import put
    from compactkit.toolcall import read_call

    for name in ("put_recovery", "read_call", "error_line", "serve_key", "payload_path"):
        assert name not in compactkit.__all__
    with pytest.warns(DeprecationWarning, match="compactkit.recovery.put"):
        assert compactkit.put_recovery is put
    with pytest.warns(DeprecationWarning, match="compactkit.toolcall.read_call"):
        assert compactkit.read_call is read_call
    with pytest.raises(AttributeError):
        _ = compactkit.no_such_name
