"""docs/cli.md's option tables, written from the click commands so that they cannot go stale.

`python -m compactkit.cli._docs docs/cli.md` (`make docs`) rewrites what lies between the
`<!-- options:... -->` markers: the synopsis of every command in the commands table (the text that
says what a command does is kept as written; a new command gets its short help) and one table of
every option per command. `--check` writes nothing and exits 1 when the file is out of date.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Sequence

import click

from ..atomic import write_atomic
from ..registry import make_registry
from . import COMMANDS, make_cli
from ._app import State

COMMANDS_BEGIN = "<!-- options:commands begin (make docs writes this table) -->"
TABLES_BEGIN = "<!-- options:tables begin (make docs writes these tables) -->"
END = "<!-- options:end -->"
_SKIPPED = {"--debug", "--help"}  # shared by every command, documented once


def _cell(text: str) -> str:
    """`text` as one markdown table cell: pipes escaped, on one line."""
    return " ".join(text.split()).replace("|", "\\|")


def _prose_cell(text: str) -> str:
    """`text` as a cell of prose: `*` escaped too (`path=**/CLAUDE.md` is no emphasis)."""
    return _cell(text).replace("*", "\\*")


def _context(cmd: click.Command) -> click.Context:
    """A context for `cmd` whose registry holds the built-in plugins only (what every install
    has), for the names an option completes."""
    root = click.Context(make_cli(), obj=State(lambda: make_registry(entry_points=False)))
    return click.Context(cmd, info_name=cmd.name, parent=root, obj=root.obj)


def _options(cmd: click.Command) -> list[click.Option]:
    return [
        p
        for p in cmd.params
        if isinstance(p, click.Option) and not p.hidden and not _SKIPPED & set(p.opts)
    ]


def _metavar(option: click.Option, ctx: click.Context) -> str:
    """The option's metavar, a number written `N` (click says `INTEGER RANGE`)."""
    metavar = option.make_metavar(ctx)
    return "N" if metavar in ("INTEGER", "INTEGER RANGE") else metavar


def _term(option: click.Option, ctx: click.Context) -> str:
    """How an option is written in a synopsis: `-s SPEC`, `--budget N`, `--explain`."""
    short = [o for o in option.opts if not o.startswith("--")]
    name = (short or option.opts)[0]
    if option.is_flag or option.count:
        return name
    return f"{name} {_metavar(option, ctx)}"


def synopsis(cmd: click.Command) -> str:
    """`name ARGS [OPTIONS]`: every argument and every option but the shared `--debug`."""
    ctx = _context(cmd)
    words = [str(cmd.name)]
    words += [p.make_metavar(ctx) for p in cmd.params if isinstance(p, click.Argument)]
    for option in _options(cmd):
        term = _term(option, ctx)
        term = term if option.required else f"[{term}]"
        words.append(term + "..." if option.multiple else term)
    return " ".join(words)


def _names(option: click.Option, ctx: click.Context) -> list[str]:
    """The names an option completes in the shell (formats, tokenizers, strategies), if any."""
    if isinstance(option.type, click.Choice):
        return []  # its metavar lists them
    items = option.shell_complete(ctx, "")
    return [str(item.value) for item in items if item.type == "plain" and item.value]


def options_table(cmd: click.Command) -> list[str]:
    """The markdown table of every option of `cmd`, as `--help` describes it."""
    ctx = _context(cmd)
    rows = ["| option | meaning |", "| --- | --- |"]
    for option in _options(cmd):
        record = option.get_help_record(ctx)
        term, help_ = record if record is not None else (", ".join(option.opts), "")
        term = term.replace(option.make_metavar(ctx), _metavar(option, ctx))
        names = _names(option, ctx)
        if names:
            help_ += f" Names: {', '.join(f'`{n}`' for n in names)}."
        rows.append(f"| `{_cell(term)}` | {_prose_cell(help_)} |")
    return rows


def _commands() -> list[click.Command]:
    return sorted(COMMANDS, key=lambda c: str(c.name))


def commands_table(kept: dict[str, str]) -> list[str]:
    """The commands table: each command's synopsis, and what it does (`kept`, by command name, as
    the page says it; a command the page does not describe yet gets its short help). Rows of
    `kept` that are not commands (`--version`) follow as they were."""
    rows = ["| command | what it does |", "| --- | --- |"]
    names = {str(cmd.name) for cmd in COMMANDS}
    for cmd in COMMANDS:
        does = kept.get(str(cmd.name)) or _cell(cmd.get_short_help_str(limit=200))
        rows.append(f"| `{_cell(synopsis(cmd))}` | {does} |")
    rows += [f"| `{name}` | {does} |" for name, does in kept.items() if name not in names]
    return rows


def tables() -> list[str]:
    lines: list[str] = []
    for cmd in _commands():
        lines += ["", f"### `compactkit {cmd.name}`", "", *options_table(cmd)]
    return [*lines, ""]


_ROW = re.compile(r"^\| `([^` ]+)[^`]*` \| (.*) \|$")


def _between(text: str, begin: str) -> tuple[str, str, str]:
    """(before, inside, after) of the part of `text` between `begin` and the next `END`."""
    head, found, rest = text.partition(begin)
    inside, found_end, tail = rest.partition(END)
    if not found or not found_end:
        raise ValueError(f"markers missing: {begin!r} ... {END!r}")
    return head, inside, tail


def render(text: str) -> str:
    """`text` (docs/cli.md) with the generated parts written anew from the commands."""
    head, inside, tail = _between(text, COMMANDS_BEGIN)
    kept = {m[1]: m[2] for m in map(_ROW.match, inside.splitlines()) if m}
    text = "\n".join([head + COMMANDS_BEGIN, *commands_table(kept), END]) + tail
    head, _, tail = _between(text, TABLES_BEGIN)
    return "\n".join([head + TABLES_BEGIN, *tables(), END]) + tail


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    check = "--check" in args
    paths = [a for a in args if a != "--check"] or ["docs/cli.md"]
    stale = []
    for path in paths:
        with open(path, encoding="utf-8") as f:
            text = f.read()
        new = render(text)
        if new == text:
            continue
        stale.append(path)
        if not check:
            write_atomic(path, new)
    if check and stale:
        print(f"out of date: {', '.join(stale)} (run `make docs`)", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
