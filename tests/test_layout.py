"""The package's layout holds: no module imports one that imports it back (directly or around a
circle), and no function is longer than a screen and a half."""

from __future__ import annotations

import ast
from pathlib import Path

from .conftest import ROOT

PACKAGE = ROOT / "compactkit"
LONGEST_FUNCTION = 80


def _modules() -> dict[str, Path]:
    out = {}
    for path in PACKAGE.rglob("*.py"):
        parts = path.relative_to(ROOT).with_suffix("").parts
        out[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return out


def _imported(name: str, path: Path, modules: dict[str, Path]) -> set[str]:
    """Modules of the package that `name` imports at run time (`if TYPE_CHECKING:` left out)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    typing_only = {
        id(node)
        for branch in ast.walk(tree)
        if isinstance(branch, ast.If) and "TYPE_CHECKING" in ast.unparse(branch.test)
        for stmt in branch.body
        for node in ast.walk(stmt)
    }
    here = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
    found: set[str] = set()
    for node in ast.walk(tree):
        if id(node) in typing_only:
            continue
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = here[: len(here) - node.level + 1] if node.level else []
            module = ".".join([*base, *([node.module] if node.module else [])])
            for alias in node.names:
                full = f"{module}.{alias.name}"
                found.add(full if full in modules else module)
    return {m for m in found if m in modules and m not in (name, "compactkit")}


def test_no_module_imports_itself_around_a_circle() -> None:
    modules = _modules()
    graph = {name: _imported(name, path, modules) for name, path in modules.items()}
    circles = []
    for start in graph:  # a path back to `start` from what it imports
        seen: set[str] = set()
        todo = [(m, [start, m]) for m in graph[start]]
        while todo:
            module, route = todo.pop()
            if module == start:
                circles.append(" -> ".join(route))
                break
            if module not in seen:
                seen.add(module)
                todo.extend((m, [*route, m]) for m in graph[module])
    assert circles == []


def test_no_function_is_longer_than_80_lines() -> None:
    long = [
        f"{path.relative_to(ROOT)}:{node.lineno} {node.name} ({length} lines)"
        for path in sorted(PACKAGE.rglob("*.py"))
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
        and (length := (node.end_lineno or node.lineno) - node.lineno + 1) > LONGEST_FUNCTION
    ]
    assert long == []
