"""`compactkit validate` and `compactkit diff`: check a context, compare two."""

from __future__ import annotations

import sys
from collections.abc import Sequence
from typing import Any

import click

from ..errors import EXIT_PLUGIN
from ._app import State, command
from ._input import STDIN_NAME, check_one_stdin, load, load_single, read_entries
from ._options import STDIO, format_option, json_flag, stash_option
from ._output import emit, say

VALIDATE_SCHEMA = "compactkit.validate/1"
DIFF_SCHEMA = "compactkit.diff/1"


@command(
    name="validate", exit_codes="0 every context keeps the invariants; 2 bad input; 3 a violation"
)
@click.argument("files", nargs=-1, required=True)
@click.option(
    "--against",
    default=None,
    metavar="ORIGINAL",
    help="The input it was compacted from (checks task, system and thinking kept).",
)
@stash_option(
    help="Stash file or recovery store for markers ('-': stdin); default: each FILE's "
    "FILE.recovery.jsonl when it exists."
)
@json_flag
@format_option
@click.pass_obj
def validate_cmd(
    state: State,
    files: Sequence[str],
    against: str | None,
    stash: str | None,
    as_json: bool,
    format_: str | None,
) -> None:
    """Check contexts against the compaction invariants; exit 3 on any violation.

    Each violation names the conversation, the message and the rule. With --json, one
    compactkit.validate/1 object lists every context and its violations.

    \b
    Example:
      compactkit validate small.json --against session.jsonl --stash small.stash
    """
    from ..validate import validate

    check_one_stdin(*files, against, stash)
    original = load_single(state, against) if against else None
    entries = read_entries(stash) if stash else None
    checked: list[dict[str, Any]] = []
    for address in files:
        _, contexts = load(state, address, format_)
        store = entries if stash else read_entries(None, address) or None  # FILE.recovery.jsonl
        for n, ctx in enumerate(contexts):
            where = address if address != STDIO else STDIN_NAME
            where = f"{where}#{n}" if len(contexts) > 1 else where
            problems = validate(ctx, original, stash=store)
            checked.append({"context": where, "ok": not problems, "violations": problems})
    bad = sum(len(c["violations"]) for c in checked)
    if as_json:
        emit(
            {
                "schema": VALIDATE_SCHEMA,
                "ok": not bad,
                "violations": bad,
                "contexts": [
                    {**c, "violations": [_violation(v) for v in c["violations"]]} for c in checked
                ],
            }
        )
    else:
        for c in checked:
            for problem in c["violations"]:
                say(f"{c['context']}: {problem}")
            if c["ok"]:
                say(f"{c['context']}: ok")
    if bad:
        say(f"compactkit: {bad} violation(s)", err=True)
        sys.exit(EXIT_PLUGIN)


def _violation(v: Any) -> dict[str, Any]:
    return {"rule": v.rule, "message": v.message, "detail": v.detail}


EXIT_DIFFERENT = 1
"""`diff --exit-code` when the contexts differ (what `git diff --exit-code` exits with)."""


@command(
    name="diff",
    exit_codes="0 ok (whether or not they differ, unless --exit-code); 1 they differ, with "
    "--exit-code; 2 bad input",
)
@click.argument("before")
@click.argument("after")
@json_flag
@click.option(
    "--exit-code",
    is_flag=True,
    help="Exit 1 when the contexts differ, 0 when they do not (as git diff --exit-code).",
)
@click.pass_obj
def diff_cmd(state: State, before: str, after: str, as_json: bool, exit_code: bool) -> None:
    """Say which messages and blocks differ between two contexts.

    \b
    Example:
      compactkit diff session.jsonl back.json
      compactkit diff --exit-code session.jsonl back.json || echo differ
    """
    from ..context import diff

    check_one_stdin(before, after)
    d = diff(load_single(state, before), load_single(state, after))
    if as_json:
        emit({"schema": DIFF_SCHEMA, **d.model_dump(mode="json")})
    else:
        say(d.summary())
        for m in d.messages:
            where = m.before_index if m.change == "removed" else m.after_index
            blocks = ", ".join(f"block {c.block} {c.change}" for c in m.blocks)
            say(f"  {m.change:<8} message {where} ({m.role}){': ' + blocks if blocks else ''}")
    if exit_code and not d.empty:
        sys.exit(EXIT_DIFFERENT)
