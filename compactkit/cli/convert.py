"""`compactkit convert` and `compactkit expand`: write a context in a format, as it is or restored."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from functools import partial
from typing import TextIO

import click

from ..context import AgentContext
from ..errors import BadInputError, ConfigError
from ..formats.export import (
    PENDING_CHOICES,
    Pending,
    ProviderWriter,
    WriterOptions,
    recorded_max_tokens,
    recorded_model,
)
from ..formats.loading import SessionAddress
from ..formats.native import write_native
from ._app import State, command
from ._input import check_one_stdin, load, load_single, read_entries, sidecar_of
from ._options import STDIO, format_option, output_option, stash_option, to_option
from ._output import Outputs, written


@command(exit_codes="0 ok; 2 bad input or a format that cannot be written; 3 a plugin failed")
@click.argument("file")
@to_option(default=None)
@output_option
@click.option(
    "--request",
    is_flag=True,
    help="anthropic-messages / openai-chat: write a request the API accepts (same-role turns "
    "merged, a first user turn, valid call ids, pending calls answered) instead of a saved "
    "session that reads back unchanged.",
)
@click.option(
    "--pending",
    type=click.Choice(PENDING_CHOICES),
    default=None,
    help="A last tool call with no result: keep it (default for a saved session), drop it, "
    "or answer it with an error result saying it was not run (default with --request).",
)
@click.option(
    "--model",
    default=None,
    metavar="NAME",
    help="--request: the model the request names (default: the one the session records).",
)
@click.option(
    "--max-tokens",
    type=click.IntRange(min=1),
    default=None,
    metavar="N",
    help="--request: the request's output limit (anthropic-messages: max_tokens, required; "
    "openai-chat: max_completion_tokens); default: the one the session records.",
)
@format_option
@click.pass_obj
def convert(
    state: State,
    file: str,
    to: str,
    output: str | None,
    request: bool,
    pending: Pending | None,
    model: str | None,
    max_tokens: int | None,
    format_: str | None,
) -> None:
    """Convert a session (FILE, FILE#N, or - for stdin) to another format.

    What the target format cannot carry (thinking, images, ...) is listed in one warning line
    on stderr.

    \b
    Example:
      compactkit convert session.jsonl --to openai-chat --request -o request.json
    """
    if not request and (model is not None or max_tokens is not None):
        raise ConfigError("--model and --max-tokens name what a request sends: add --request")
    with Outputs([file], output=output) as outputs:
        _, contexts = load(state, file, format_)
        writer = state.registry.formats.get(to)
        if not isinstance(writer, ProviderWriter):
            if request or pending is not None:
                raise ConfigError(f"--request and --pending apply to provider formats, not {to!r}")
            if to == "compactkit" and len(contexts) == 1 and output not in (None, STDIO):
                outputs.stream(output, partial(write_native, contexts[0]))  # a message at a time
                return
            outputs.emit(written(contexts, to, state.registry), output, verbatim=True)
            return
        options = WriterOptions(request=request, pending=pending)
        if request:
            options = _request_options(writer, contexts, options, model, max_tokens)
        outputs.emit(written(contexts, to, state.registry, options), output, verbatim=True)


def _request_options(
    writer: ProviderWriter,
    contexts: list[AgentContext],
    options: WriterOptions,
    model: str | None,
    max_tokens: int | None,
) -> WriterOptions:
    """`options` with the request's model and output limit: as given, else as the session
    records them (one for every conversation); exit 2 naming what a request of `writer` needs
    and neither gives."""
    recorded = {m for m in map(recorded_model, contexts) if m is not None}
    models = {m for m in recorded if writer.serves(m)}
    limits = {n for n in map(recorded_max_tokens, contexts) if n is not None}
    model = model or (next(iter(models)) if len(models) == 1 else None)
    max_tokens = max_tokens or (next(iter(limits)) if len(limits) == 1 else None)
    missing = [
        (what, flag)
        for need, value, what, flag in (
            ("model", model, "a model", "--model"),
            ("max_tokens", max_tokens, "max_tokens", "--max-tokens"),
        )
        if need in writer.request_needs and value is None
    ]
    if missing:
        foreign = sorted(recorded - models) if model is None else []
        served = f", which {writer.name} does not serve" if foreign else ""
        records = f" (it records {', '.join(foreign)}{served})" if foreign else ""
        raise ConfigError(
            f"{writer.name} --request needs {' and '.join(w for w, _ in missing)}, which the "
            f"session does not give{records}: pass {' and '.join(f for _, f in missing)}"
        )
    return replace(options, model=model, max_tokens=max_tokens)


@command(exit_codes="0 ok; 2 bad input, or markers that cannot be restored without the stash")
@click.argument("file")
@stash_option(
    help="Stash file written by run --stash, or a recovery store ('-': stdin); "
    "default: FILE.recovery.jsonl when it exists."
)
@to_option()
@output_option
@click.pass_obj
def expand(state: State, file: str, stash: str | None, to: str, output: str | None) -> None:
    """Undo compaction: put back everything the markers in FILE stand for.

    What they stand for is read from the context itself, from --stash, or from the store `run`
    wrote beside FILE (FILE.recovery.jsonl); every entry used is checked against its etag.

    \b
    Example:
      compactkit run s.jsonl --budget 30000 -o small.json
      compactkit expand small.json -o back.json
      compactkit run s.jsonl --budget 30000 -o small.json --stash small.stash
      compactkit expand small.json --stash small.stash -o back.json
    """
    from ..recovery import Expansion

    check_one_stdin(file, stash)
    outputs = Outputs([file, stash or sidecar_of(file) or STDIO], output=output)
    ctx = load_single(state, file)
    entries = read_entries(stash, file, lazy=True)  # an entry read when restored
    _markers_kept(ctx, entries, stash or sidecar_of(file), file)
    expansion = Expansion(ctx, entries)
    if to == "compactkit" and output not in (None, STDIO):
        # written a message at a time as restored; the file is renamed into place only when
        # every marker was restored (the check below raises inside the write, before the rename)
        def write(handle: TextIO) -> None:
            def after() -> AgentContext:
                return ctx.replace(messages=(), recovery=expansion.recovery())

            write_native(ctx, handle, expansion.messages(), after)
            _all_restored(expansion.left_over, file)

        with outputs:
            outputs.stream(output, write)
        return
    expanded = ctx.replace(messages=tuple(expansion.messages()), recovery=expansion.recovery())
    _all_restored(expansion.left_over, file)  # nested markers too: all resolved, or no output
    with outputs:
        outputs.emit(written(expanded, to, state.registry), output, verbatim=True)


def _markers_kept(
    ctx: AgentContext, entries: Mapping[str, str], store: str | None, file: str
) -> None:
    """Exit 2 when a store holds what was removed but FILE holds no marker to put it back by: an
    agent's format (`run --to claude-code`, `pi-session`, ...) keeps markers as the text a model
    is shown, so `expand` of it would say ok and restore nothing."""
    from ..recovery import markers

    if entries and not markers(ctx):
        raise BadInputError(
            f"holds no marker, but {store} holds {len(entries)} removed entr"
            f"{'y' if len(entries) == 1 else 'ies'}: its markers were written as plain text (an "
            "agent's format keeps no marker), so nothing can be put back from it",
            path=file,
            hint="expand the compactkit output of run (run -o OUT.json) instead",
        )


def _all_restored(missing: list[str], file: str) -> None:
    """Exit 2 naming the markers `expand` could not restore, when there are any."""
    from ..recovery import sidecar_path

    if missing:
        raise BadInputError(
            f"{len(missing)} marker(s) cannot be restored (etag {', '.join(missing[:3])}"
            f"{' ...' if len(missing) > 3 else ''})",
            path=file,
            hint=f"keep {sidecar_path(SessionAddress.parse(file).file)} beside it, or pass --stash "
            "with the store or stash written when it was compacted",
        )
