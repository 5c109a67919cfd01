"""`compactkit inspect`: what sessions hold."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import click

from ..formats.loading import SessionAddress
from ..inspection import inspect_context
from ._app import State, command
from ._input import STDIN_NAME, load
from ._options import STDIO, format_option, json_flag, tokenizer_option
from ._output import emit


@command(
    exit_codes="0 ok; 2 a file cannot be read or is no known session format; 3 a plugin failed"
)
@click.argument("files", nargs=-1, required=True)
@json_flag
@click.option(
    "--top",
    default=5,
    show_default=True,
    type=click.IntRange(min=0),
    help="How many largest/repeated to list.",
)
@format_option
@tokenizer_option
@click.pass_obj
def inspect(
    state: State,
    files: Sequence[str],
    as_json: bool,
    top: int,
    format_: str | None,
    tokenizer: str,
) -> None:
    """Show what sessions hold: sizes in tokens, tools, largest blocks, repeats.

    FILES are session files; FILE#N selects conversation N (0-based); - reads stdin. With --json,
    one compactkit.inspect/1 object per conversation (JSON Lines).

    \b
    Example:
      compactkit inspect session.jsonl --top 3
      cat session.jsonl | compactkit inspect - --json
    """
    counter = state.counter(tokenizer)
    for address in files:
        fmt, contexts = load(state, address, format_)
        where = SessionAddress.parse(address)
        file, index = where.file, where.index
        file = STDIN_NAME if file == STDIO else file
        for n, ctx in enumerate(contexts):
            number = index if index is not None else n
            report = {"file": file, "conversation": number}
            report.update(inspect_context(ctx, counter, top=top, fmt=fmt))
            if as_json:
                emit(report, lines=True)
            else:
                label = f"{file}#{number}" if len(contexts) > 1 or index is not None else file
                emit(render_report(report, label))


def render_report(report: dict[str, Any], title: str) -> Any:
    """The human view of one `compactkit.inspect/1` report, as one rich renderable."""
    from rich.console import Group

    lines: list[Any] = [
        f"[bold]{title}[/]  format={report['format']}  messages={report['messages']}  "
        f"tokens={report['tokens']:,} ({report['tokenizer']})  tool calls={report['tool_calls']}  "
        f"results={report['tool_results']} (errors {report['tool_errors']})"
    ]
    if report["task"]:
        lines.append(f"task: {report['task']}")
    origins = "".join(f", {n} {o}" for o, n in report["user_role_messages_by_origin"].items())
    lines.append(f"user messages: {report['user_messages']} in the user's words{origins}")
    skipped = report["skipped_records"]
    if skipped:
        listed = ", ".join(f"{kind} {n}" for kind, n in skipped.items())
        lines.append(f"records skipped at load ({sum(skipped.values())}): {listed}")
    lines += [_sizes(report), _largest(report)]
    if report["repeated_payloads"]:
        lines.append(_repeats(report))
    lines.append("")
    return Group(*lines)


def _table(title: str, columns: Sequence[str], right: Sequence[str]) -> Any:
    from rich.table import Table

    table = Table(title=title, show_edge=False)
    for col in columns:
        table.add_column(col, justify="right" if col in right else "left")
    return table


def _sizes(report: dict[str, Any]) -> Any:
    columns = ("role", "tokens", "kind", "tokens")
    table = _table("tokens by role and block kind", columns, ("tokens",))
    roles = [(k, f"{v:,}") for k, v in report["tokens_by_role"].items()]
    kinds = [(k, f"{v:,}") for k, v in report["tokens_by_kind"].items()]
    for k in range(max(len(roles), len(kinds))):
        r = roles[k] if k < len(roles) else ("", "")
        b = kinds[k] if k < len(kinds) else ("", "")
        table.add_row(*r, *b)
    return table


def _largest(report: dict[str, Any]) -> Any:
    table = _table("largest blocks", ("msg", "role", "type", "tokens", "what"), ("msg", "tokens"))
    for b in report["largest_blocks"]:
        table.add_row(str(b["message"]), b["role"], b["type"], f"{b['tokens']:,}", b["preview"])
    return table


def _repeats(report: dict[str, Any]) -> Any:
    title = f"payloads that repeat ({report['redundant_tokens']:,} redundant tokens)"
    columns = ("what", "count", "tokens each", "redundant")
    table = _table(title, columns, columns[1:])
    for r in report["repeated_payloads"]:
        table.add_row(
            r["label"], str(r["count"]), f"{r['tokens_each']:,}", f"{r['redundant_tokens']:,}"
        )
    return table
