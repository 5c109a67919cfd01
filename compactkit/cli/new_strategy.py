"""`compactkit new-strategy`: render the strategy-plugin template into a new project folder.

The template (`compactkit/templates/strategy/`) is a copier template, and `copier copy` renders it
too. Its files use plain `{{ name }}` substitutions only, so this small renderer needs no Jinja
(copier and its 13 dependencies stay out of compactkit's install); a test renders it both ways and
compares the trees.
"""

from __future__ import annotations

import re
from pathlib import Path

import click

from .._version import __version__
from ..errors import ConfigError
from ._app import command
from ._output import say

TEMPLATE = Path(__file__).resolve().parent.parent / "templates" / "strategy"
TEMPLATE_SUFFIX = ".jinja"
EXCLUDED = {"copier.yml", "copier.yaml", "__pycache__", ".DS_Store"}  # copier's default _exclude
DEFAULT_DESCRIPTION = "Shorten tool outputs longer than max_chars characters, recoverably."

NAME = re.compile(r"^[a-z][a-z0-9]*(-[a-z0-9]+)*$")
_PLACEHOLDER = re.compile(r"\{\{\s*([A-Za-z_][A-Za-z0-9_]*)\s*\}\}")
_JINJA = re.compile(r"\{[{%#]")


def answers(
    strategy_name: str, description: str = DEFAULT_DESCRIPTION, compactkit_version: str = ""
) -> dict[str, str]:
    """Every template variable: the three asked in copier.yml and the names derived from them
    (the same expressions as copier.yml's `when: false` questions)."""
    if not NAME.match(strategy_name):
        raise ConfigError(
            f"strategy name {strategy_name!r}: use lowercase letters, digits and single dashes, "
            "starting with a letter (cap-output)"
        )
    if '"' in description or "\\" in description or not description.strip():
        raise ConfigError("--description: one non-empty line without double quotes or backslashes")
    snake = strategy_name.replace("-", "_")
    return {
        "strategy_name": strategy_name,
        "description": description,
        "compactkit_version": compactkit_version or __version__,
        "project_name": f"compactkit-{strategy_name}",
        "module_name": f"compactkit_{snake}",
        "entry_point_name": snake,
        "class_name": strategy_name.replace("-", " ").title().replace(" ", ""),
    }


def _substitute(text: str, values: dict[str, str], where: str) -> str:
    """`text` with every `{{ name }}` replaced; any other Jinja syntax is refused, since it would
    render differently here and in copier."""
    leftover = _JINJA.search(_PLACEHOLDER.sub("", text))
    if leftover:
        raise ConfigError(f"template {where}: unsupported Jinja syntax {leftover.group(0)!r}")

    def value(match: re.Match[str]) -> str:
        name = match.group(1)
        if name not in values:
            raise ConfigError(f"template {where}: unknown variable {name!r}")
        return values[name]

    return _PLACEHOLDER.sub(value, text)


def render_template(
    destination: Path, values: dict[str, str], template: Path = TEMPLATE
) -> list[Path]:
    """Render `template` into `destination` (which must not exist or be empty); return the files
    written, relative to it."""
    if destination.exists() and (not destination.is_dir() or any(destination.iterdir())):
        raise ConfigError(f"{destination} already exists and is not empty: pick another --dir")
    written: list[Path] = []
    for source in sorted(template.rglob("*")):
        relative = source.relative_to(template)
        if source.is_dir() or EXCLUDED & set(relative.parts) or source.suffix in (".pyc", ".pyo"):
            continue
        target = Path(_substitute(relative.as_posix(), values, relative.as_posix()))
        if target.suffix == TEMPLATE_SUFFIX:
            target = target.with_suffix("")
            data = _substitute(source.read_text(encoding="utf-8"), values, str(relative)).encode()
        else:
            data = source.read_bytes()
        (destination / target).parent.mkdir(parents=True, exist_ok=True)
        (destination / target).write_bytes(data)
        written.append(target)
    return written


@command(
    name="new-strategy",
    exit_codes="0 the project was written; 2 a bad name, or DIR exists and is not empty",
)
@click.argument("name")
@click.option(
    "--dir",
    "directory",
    default=None,
    metavar="DIR",
    help="Where to create the project (default: ./compactkit-NAME).",
)
@click.option(
    "--description",
    default=DEFAULT_DESCRIPTION,
    help="One line saying what the strategy does.",
)
def new_strategy(name: str, directory: str | None, description: str) -> None:
    """Create a strategy plugin package NAME, ready to install and test.

    The project holds a pyproject.toml with the compactkit entry point, the strategy module
    with its Options model, tests that run compactkit's conformance kit on a bundled real session
    and on generated ones, and a README. The same template renders with `copier copy`.

    \b
    Example:
      compactkit new-strategy keep-errors
      cd compactkit-keep-errors && pip install -e ".[test]" && pytest
    """
    values = answers(name, description)
    destination = Path(directory or values["project_name"])
    files = render_template(destination, values)
    say(f"created {destination} ({len(files)} files): strategy {name!r} in {values['module_name']}")
    say(f'next: cd {destination} && pip install -e ".[test]" && pytest')
