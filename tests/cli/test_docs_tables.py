"""docs/cli.md documents every option of every command, in tables that render as tables."""

from __future__ import annotations

import re
from pathlib import Path

import click
import pytest

from compactkit.cli import COMMANDS
from compactkit.cli._docs import main, render

from ..conftest import ROOT

PAGE = ROOT / "docs" / "cli.md"
REGENERATE = "docs/cli.md is out of date with the commands' options: run `make docs` and commit it"


def _cells(row: str) -> int:
    """Cells of a markdown table row (pipes escaped as `\\|` are inside a cell)."""
    return len(re.split(r"(?<!\\)\|", row.strip())) - 2


def broken_tables(text: str) -> list[str]:
    """Where a table of `text` does not render as one: a row after a paragraph line (it renders
    as text), or a row whose cells differ in number from its header's."""
    problems: list[str] = []
    lines = text.splitlines()
    header = 0
    fenced = False
    for n, line in enumerate(lines, 1):
        if line.startswith("```"):
            fenced = not fenced
        if fenced or not line.startswith("|"):
            continue
        before = lines[n - 2] if n >= 2 else ""
        if not before.startswith("|"):
            if before.strip() and not before.startswith("<!--"):
                problems.append(f"line {n}: a table row right after a paragraph: {line[:60]}")
            elif not re.fullmatch(r"\|( ?:?-+:? ?\|)+", lines[n].strip() if n < len(lines) else ""):
                problems.append(f"line {n}: a table without a header row: {line[:60]}")
            header = _cells(line)
        elif _cells(line) != header:
            problems.append(f"line {n}: {_cells(line)} cells, the header has {header}")
    return problems


def documented(text: str, command: str) -> set[str]:
    """The options the page's table for `command` names (`-o, --output PATH` names two)."""
    section = text.partition(f"### `compactkit {command}`")[2].partition("\n#")[0]
    terms = re.findall(r"^\| `([^`]+)` \|", section, re.M)
    return {word.rstrip(",") for term in terms for word in term.split() if word.startswith("-")}


def test_every_option_of_every_command_is_in_the_page() -> None:
    text = PAGE.read_text(encoding="utf-8")
    missing = [
        f"{cmd.name} {opt}"
        for cmd in COMMANDS
        for param in cmd.params
        if isinstance(param, click.Option) and "--debug" not in param.opts
        for opt in param.opts
        if opt not in documented(text, str(cmd.name))
    ]
    assert not missing, f"undocumented options: {', '.join(missing)}; {REGENERATE}"
    assert documented(text, "gateway") >= {"--timeout", "--max-conversations"}
    assert documented(text, "mcp-proxy") >= {"--url", "--http"}


def test_the_page_is_what_make_docs_writes() -> None:
    text = PAGE.read_text(encoding="utf-8")
    assert render(text) == text, REGENERATE


@pytest.mark.parametrize(
    "page",
    [*sorted((ROOT / "docs").rglob("*.md")), ROOT / "README.md"],
    ids=lambda p: str(p.relative_to(ROOT)),
)
def test_every_table_of_every_page_renders(page: Path) -> None:
    assert broken_tables(page.read_text(encoding="utf-8")) == []


def test_a_split_table_and_a_broken_row_are_found() -> None:
    split = "| a | b |\n| --- | --- |\n| 1 | x |\nA paragraph.\n| 130 | y |\n"
    assert broken_tables(split) == ["line 5: a table row right after a paragraph: | 130 | y |"]
    assert broken_tables("| a | b |\n| --- | --- |\n| 1 | x | y |\n") == [
        "line 3: 3 cells, the header has 2"
    ]
    assert broken_tables("| a | b |\n| --- | --- |\n| `keep\\|drop` | x |\n") == []


def test_an_option_added_to_a_command_makes_the_page_stale(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    text = PAGE.read_text(encoding="utf-8")
    diff = next(c for c in COMMANDS if c.name == "diff")
    monkeypatch.setattr(
        diff, "params", [*diff.params, click.Option(["--new-one"], is_flag=True, help="New.")]
    )
    new = render(text)
    assert "| `--new-one` | New. |" in new
    assert "`diff BEFORE AFTER [--json]" in text
    assert "[--new-one]" in new.partition("| `diff ")[2].partition("\n")[0]


def test_check_mode_says_to_run_make_docs(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    page = tmp_path / "cli.md"
    page.write_text(PAGE.read_text(encoding="utf-8").replace("| `--top N` |", "| `--top` |"))
    assert main(["--check", str(page)]) == 1
    assert "make docs" in capsys.readouterr().err
    assert main([str(page)]) == 0
    assert page.read_text(encoding="utf-8") == PAGE.read_text(encoding="utf-8")
