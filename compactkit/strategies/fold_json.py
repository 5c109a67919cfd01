"""fold-json (arrival): a JSON tool output written compactly, each array of same-shaped records
as its keys once and then one row of values per record.

What it folds: API and tool-server outputs (search results, records from a database, a list of
issues or flights) are arrays of objects that all have the same keys, often pretty-printed, so
every record repeats every key name and the indentation. Such an array becomes
`{"[keys]": ["id", "name", ...], "[rows]": [[1, "a", ...], [2, "b", ...]]}` (an array of arrays
of such records keeps its grouping in the rows; a nested object all records have with the same
keys becomes columns named by their dotted path, `prices.economy`); the rest of the value is
written as compact JSON. Lossless: each record is its row zipped with the keys (the
note says so), and the original text is recoverable by its etag. Text around the JSON (the
`<returncode>`/`<output>` wrapper some agents add) stays as it is.
"""

from __future__ import annotations

import json
import re
from bisect import bisect_right
from typing import Any

from pydantic import Field

from ..context import AgentContext
from ..strategy import ARRIVAL, Strategy
from .fold_common import Fold, FoldOptions, Lines, Output, fold_new_results

KEYS, ROWS = "[keys]", "[rows]"


class FoldJsonOptions(FoldOptions):
    min_rows: int = Field(
        default=3, ge=2, description="Fewest records an array needs to be written as rows."
    )


def tabulate(value: Any, min_rows: int) -> tuple[Any, int]:
    """`value` with every array of at least `min_rows` objects of the same shape (or of arrays
    of such objects) written as `{"[keys]": [...], "[rows]": [[...], ...]}`, inner values first;
    and how many arrays were. Nested objects every record has with the same keys become columns
    named by their dotted path (`prices.economy`)."""
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
    values = [v for v, _ in items]
    count = sum(n for _, n in items)
    table = _table(values, min_rows)
    return (values, count) if table is None else (table, count + 1)


def _flat(record: dict[str, Any], prefix: str = "") -> dict[str, Any] | None:
    """The leaves of `record` by dotted key path (non-empty nested objects flattened, tables
    left whole); None when a key is empty or holds a dot (the path would be ambiguous)."""
    out: dict[str, Any] = {}
    for key, item in record.items():
        if not key or "." in key:
            return None
        if isinstance(item, dict) and item and KEYS not in item:
            inner = _flat(item, f"{prefix}{key}.")
            if inner is None:
                return None
            out.update(inner)
        else:
            out[f"{prefix}{key}"] = item
    return out


def _table(values: list[Any], min_rows: int) -> dict[str, Any] | None:
    """`values` as a table, when they are objects of one shape or arrays of such objects."""
    nested = bool(values) and all(isinstance(v, list) and v for v in values)
    records = [r for v in values for r in v] if nested else values
    if len(records) < min_rows or not all(isinstance(r, dict) for r in records):
        return None
    for shape in (_flat, lambda record: record):
        shaped = [shape(r) for r in records]
        first = shaped[0]
        if first is None or len(first) < 2 or KEYS in first:
            continue
        keys = list(first)
        if all(s is not None and list(s) == keys for s in shaped):
            rows = iter([[s[k] for k in keys] for s in shaped if s is not None])
            grouped = [[next(rows) for _ in v] for v in values] if nested else list(rows)
            return {KEYS: keys, ROWS: grouped}
    return None


_OPENS = re.compile(r"\n[^\S\n]*[\[{]")
"""A line whose first character past its indentation opens a JSON value, found in the whole text
after a newline put before it (a pattern beginning with a character is searched for it first)."""


def _json_span(view: Lines) -> tuple[int, int] | None:
    """The lines from the first that opens a JSON value to the last that closes one."""
    opens = _OPENS.search("\n" + view.text)
    if opens is None:
        return None
    start = bisect_right(view.starts, opens.start()) - 1
    lines = view.lines
    end = next(
        (i for i in range(len(lines) - 1, start - 1, -1) if lines[i].rstrip()[-1:] in ("]", "}")),
        None,
    )
    return None if end is None else (start, end + 1)


def fold_json(output: Output, opts: FoldJsonOptions) -> Fold | None:
    view = output.lines()
    span = _json_span(view)
    if span is None:
        return None
    start, end = span
    lines, starts = view.lines, view.starts
    try:
        value = json.loads(view.text[starts[start] : starts[end] - 1])
    except (ValueError, RecursionError):
        return None
    if not isinstance(value, (dict, list)):
        return None
    folded, tables = tabulate(value, opts.min_rows)
    text = json.dumps(folded, ensure_ascii=False, separators=(",", ":"))
    what = "JSON written compactly"
    if tables:
        what += (
            f"; {tables} array(s) of same-shaped records as {KEYS} once (a dotted key is a "
            f"field of a nested object), then {ROWS}"
        )
    return Fold("\n".join([*lines[:start], text, *lines[end:]]), what)


class FoldJson(Strategy):
    """Arrival: a JSON tool output written compactly, arrays of same-shaped records as their
    keys once and one row of values per record."""

    name = "fold-json"
    description = "JSON outputs compact, arrays of same-keyed records as keys + rows."
    Options = FoldJsonOptions
    options: FoldJsonOptions
    stage = ARRIVAL

    def compact(self, ctx: AgentContext) -> AgentContext:
        opts = self.options
        return fold_new_results(ctx, opts, self.name, lambda out: fold_json(out, opts))
