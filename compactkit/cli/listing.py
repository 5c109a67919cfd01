"""`compactkit formats`, `plugins` and `strategies`: what the registry holds."""

from __future__ import annotations

import sys
from typing import Any

import click

from ..errors import EXIT_PLUGIN
from ._app import State, command
from ._options import json_flag
from ._output import emit, say


@command(exit_codes="0 ok; 3 the registry cannot be built")
@json_flag
@click.pass_obj
def formats(state: State, as_json: bool) -> None:
    """List session formats (readers and writers).

    \b
    Example:
      compactkit formats --json
    """
    reg = state.registry
    rows = [
        {
            "name": name,
            "description": fmt.description,
            "write": bool(fmt.can_write),
            "plugin": reg.formats.owner(name),
        }
        for name, fmt in reg.formats.items()
    ]
    if as_json:
        emit({"schema": "compactkit.formats/1", "formats": rows})
        return
    width = max([20, *(len(row["name"]) for row in rows)])
    for row in rows:
        mode = "read/write" if row["write"] else "read"
        say(f"{row['name']:<{width}} {mode:<10} {row['description']}")


@command(
    exit_codes="0 every plugin loaded; 3 a plugin failed to load (it is listed with its error)"
)
@json_flag
@click.pass_obj
def plugins(state: State, as_json: bool) -> None:
    """List loaded plugins, what each provides, and any load errors.

    \b
    Example:
      compactkit plugins --json
      compactkit --plugins-dir ./my-plugins plugins
    """
    reg = state.registry
    if as_json:
        emit({"schema": "compactkit.plugins/1", "plugins": [p.as_json() for p in reg.plugins]})
    else:
        for p in reg.plugins:
            status = "ok" if p.ok else "ERROR"
            version = f" {p.version}" if p.version else ""
            say(f"{p.name}{version} [{p.source}] {status}")
            for kind, names in sorted(p.provides.items()):
                say(f"    {kind}: {', '.join(sorted(names))}")
            for error in p.errors:
                say(f"    error: {error}")
    failed = [p.name for p in reg.plugins if not p.ok]
    if failed:
        say(f"compactkit: plugin(s) with errors: {', '.join(failed)}", err=True)
        sys.exit(EXIT_PLUGIN)


@command(exit_codes="0 ok; 3 the registry cannot be built")
@json_flag
@click.pass_obj
def strategies(state: State, as_json: bool) -> None:
    """List compaction strategies and their options.

    \b
    Example:
      compactkit strategies
    """
    reg = state.registry
    rows = [_strategy_row(reg, name, strat) for name, strat in reg.strategies.items()]
    if as_json:
        emit({"schema": "compactkit.strategies/1", "strategies": rows})
        return
    if not rows:
        say("no strategies registered")
    for row in rows:
        stage = " [on arrival]" if row["stage"] == "arrival" else ""
        say(f"{row['name']:<20} {row['description']}{stage}")
        for key, spec in row["options"].items():
            default = f" (default {spec['default']!r})" if "default" in spec else ""
            say(f"    {key}: {spec.get('description', '')}{default}")


def _strategy_row(reg: Any, name: str, strat: Any) -> dict[str, Any]:
    options = getattr(strat, "Options", None)
    schema = options.model_json_schema() if options is not None else {}
    return {
        "name": name,
        "description": (getattr(strat, "description", "") or "").strip(),
        "plugin": reg.strategies.owner(name),
        "stage": getattr(strat, "stage", "trigger"),
        "options": schema.get("properties", {}),
    }
