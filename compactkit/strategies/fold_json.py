"""fold-json (arrival): a JSON tool output written compactly, each array of same-shaped records
as its keys once and then one row of values per record.

What it folds: API and tool-server outputs (search results, records from a database, a list of
issues or flights) are arrays of objects that all have the same keys, often pretty-printed, so
every record repeats every key name and the indentation. Such an array becomes
`{"[keys]": ["id", "name", ...], "[rows]": [[1, "a", ...], [2, "b", ...]]}`; the rest of the
value is written as compact JSON. Lossless: each record is its row zipped with the keys (the
note says so), and the original text is recoverable by its etag. Text around the JSON (the
`<returncode>`/`<output>` wrapper some agents add) stays as it is.
"""

from __future__ import annotations

import json
from typing import Any

from pydantic import Field

from ..context import AgentContext
from ..strategy import ARRIVAL, Strategy
from .fold_common import Fold, FoldOptions, Output, fold_new_results

KEYS, ROWS = "[keys]", "[rows]"


class FoldJsonOptions(FoldOptions):
    min_rows: int = Field(
        default=3, ge=2, description="Fewest records an array needs to be written as rows."
    )


def tabulate(value: Any, min_rows: int) -> tuple[Any, int]:
    """`value` with every array of at least `min_rows` objects sharing the same keys (in the
    same order) written as `{"[keys]": [...], "[rows]": [[...], ...]}`; and how many arrays."""
    if isinstance(value, dict):
        out: dict[str, Any] = {}
        count = 0
        for key, item in value.items():
            out[key], n = tabulate(item, min_rows)
            count += n
        return out, count
    if not isinstance(value, list):
        return value, 0
    items = [tabulate(item, min_rows) for item in value]
    count = sum(n for _, n in items)
    values = [v for v, _ in items]
    first = values[0] if values else None
    if (
        len(values) >= min_rows
        and isinstance(first, dict)
        and len(first) >= 2
        and KEYS not in first
        and all(isinstance(v, dict) and list(v) == list(first) for v in values)
    ):
        keys = list(first)
        return {KEYS: keys, ROWS: [[v[k] for k in keys] for v in values]}, count + 1
    return values, count


def _json_span(lines: list[str]) -> tuple[int, int] | None:
    """The lines from the first that opens a JSON value to the last that closes one."""
    start = next((i for i, x in enumerate(lines) if x.lstrip()[:1] in ("[", "{")), None)
    if start is None:
        return None
    end = next(
        (i for i in range(len(lines) - 1, start - 1, -1) if lines[i].rstrip()[-1:] in ("]", "}")),
        None,
    )
    return None if end is None else (start, end + 1)


def fold_json(output: Output, opts: FoldJsonOptions) -> Fold | None:
    lines = output.text.split("\n")
    span = _json_span(lines)
    if span is None:
        return None
    start, end = span
    try:
        value = json.loads("\n".join(lines[start:end]))
    except (ValueError, RecursionError):
        return None
    if not isinstance(value, (dict, list)):
        return None
    folded, tables = tabulate(value, opts.min_rows)
    text = json.dumps(folded, ensure_ascii=False, separators=(",", ":"))
    what = "JSON written compactly"
    if tables:
        what += f"; {tables} array(s) of same-keyed records as {KEYS} once, then {ROWS}"
    return Fold("\n".join([*lines[:start], text, *lines[end:]]), what)


class FoldJson(Strategy):
    """Arrival: a JSON tool output written compactly, arrays of same-shaped records as their
    keys once and one row of values per record."""

    name = "fold-json"
    description = "Arrival: JSON outputs compact, arrays of same-keyed records as keys + rows."
    Options = FoldJsonOptions
    options: FoldJsonOptions
    stage = ARRIVAL

    def compact(self, ctx: AgentContext) -> AgentContext:
        opts = self.options
        return fold_new_results(ctx, opts, self.name, lambda out: fold_json(out, opts))
