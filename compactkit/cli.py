"""The `compactkit` command line: a thin layer over the Python API, built by a factory.

Exit codes: 0 ok; 1 budget exceeded or regression; 2 bad input, usage or configuration;
3 a plugin failed to load or a strategy broke its contract. Errors are one line on stderr;
`--debug` adds the traceback.
"""

from __future__ import annotations

import json
import sys
import traceback
from collections.abc import Callable, Sequence
from typing import Any, NoReturn

import click

from . import __version__
from .context import AgentContext
from .defaults import DEFAULT_TRIGGER, default_pipeline
from .errors import (
    EXIT_BAD_INPUT,
    EXIT_BUDGET,
    EXIT_PLUGIN,
    BadInputError,
    CompactkitError,
    ConfigError,
)
from .formats.base import read_document
from .formats.export import PENDING_CHOICES, Pending, ProviderWriter, WriterOptions
from .inspect import inspect_context
from .io import load_document, pick, render, single, split_address, write_atomic
from .registry import Registry, make_registry
from .tokens import DEFAULT_TOKENIZER, TokenCounter

JSON_SCHEMA_VERSION = 1


class State:
    """What every command shares: the registry (built lazily, once) and the debug flag."""

    def __init__(self, registry_factory: Callable[[], Registry]) -> None:
        self._factory = registry_factory
        self._registry: Registry | None = None
        self.debug = False

    @property
    def registry(self) -> Registry:
        if self._registry is None:
            self._registry = self._factory()
        return self._registry

    def counter(self, name: str) -> TokenCounter:
        return TokenCounter(self.registry.tokenizers.get(name))


def fail(exc: BaseException, debug: bool) -> NoReturn:
    """Print one line (plus the traceback under --debug) and exit with the error's code."""
    if debug:
        traceback.print_exception(exc)
    if isinstance(exc, CompactkitError):
        click.echo(f"compactkit: error: {exc}", err=True)
        sys.exit(exc.exit_code)
    text = str(exc).splitlines()[0] if str(exc) else ""
    click.echo(
        f"compactkit: unexpected error: {type(exc).__name__}: {text} "
        "(run with --debug for the traceback)",
        err=True,
    )
    sys.exit(EXIT_PLUGIN)


class _Group(click.Group):
    """Turns compactkit errors raised by any command into one-line messages and exit codes."""

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except (click.exceptions.Exit, click.ClickException, click.Abort, SystemExit):
            raise
        except Exception as exc:
            state = ctx.find_object(State)
            fail(exc, bool(state and state.debug))


def _load(state: State, address: str, format: str | None) -> tuple[str, list[AgentContext]]:
    file, index = split_address(address)
    fmt, contexts = load_document(read_document(file), format, state.registry)
    if index is not None:
        contexts = [pick(contexts, index, file)]
    return fmt.name, contexts


def _print_json(value: Any) -> None:
    click.echo(json.dumps(value, ensure_ascii=False, indent=2))


def _render_inspect(report: dict[str, Any], title: str) -> None:
    from rich.console import Console
    from rich.table import Table

    console = Console(highlight=False)
    console.print(
        f"[bold]{title}[/]  format={report['format']}  messages={report['messages']}  "
        f"tokens={report['tokens']:,} ({report['tokenizer']})  tool calls={report['tool_calls']}  "
        f"results={report['tool_results']} (errors {report['tool_errors']})"
    )
    if report["task"]:
        console.print(f"task: {report['task']}")
    origins = "".join(f", {n} {o}" for o, n in report["user_role_messages_by_origin"].items())
    console.print(f"user messages: {report['user_messages']} in the user's words{origins}")
    skipped = report["skipped_records"]
    if skipped:
        listed = ", ".join(f"{kind} {n}" for kind, n in skipped.items())
        console.print(f"records skipped at load ({sum(skipped.values())}): {listed}")
    sizes = Table(title="tokens by role and block kind", show_edge=False)
    sizes.add_column("role")
    sizes.add_column("tokens", justify="right")
    sizes.add_column("kind")
    sizes.add_column("tokens", justify="right")
    roles = list(report["tokens_by_role"].items())
    kinds = list(report["tokens_by_kind"].items())
    for k in range(max(len(roles), len(kinds))):
        r = roles[k] if k < len(roles) else ("", "")
        b = kinds[k] if k < len(kinds) else ("", "")
        sizes.add_row(
            r[0], f"{r[1]:,}" if r[1] != "" else "", b[0], f"{b[1]:,}" if b[1] != "" else ""
        )
    console.print(sizes)
    largest = Table(title="largest blocks", show_edge=False)
    for col in ("msg", "role", "type", "tokens", "what"):
        largest.add_column(col, justify="right" if col in ("msg", "tokens") else "left")
    for b in report["largest_blocks"]:
        largest.add_row(str(b["message"]), b["role"], b["type"], f"{b['tokens']:,}", b["preview"])
    console.print(largest)
    if report["repeated_payloads"]:
        rep = Table(
            title=f"payloads that repeat ({report['redundant_tokens']:,} redundant tokens)",
            show_edge=False,
        )
        for col in ("what", "count", "tokens each", "redundant"):
            rep.add_column(col, justify="left" if col == "what" else "right")
        for r in report["repeated_payloads"]:
            rep.add_row(
                r["label"], str(r["count"]), f"{r['tokens_each']:,}", f"{r['redundant_tokens']:,}"
            )
        console.print(rep)
    console.print()


def make_cli(registry_factory: Callable[[], Registry] | None = None) -> click.Group:
    """Build the CLI around a registry factory (tests pass their own; nothing is global)."""
    factory = registry_factory or make_registry

    @click.group(cls=_Group, context_settings={"help_option_names": ["-h", "--help"]})
    @click.version_option(__version__, prog_name="compactkit")
    @click.option("--debug", is_flag=True, help="Show tracebacks for errors.")
    @click.pass_context
    def cli(ctx: click.Context, debug: bool) -> None:
        """Pluggable context compaction for LLM agents."""
        state = ctx.obj if isinstance(ctx.obj, State) else State(factory)
        state.debug = debug
        ctx.obj = state

    format_option = click.option(
        "--format", "format_", default=None, metavar="NAME", help="Input format (default: detect)."
    )
    tokenizer_option = click.option(
        "--tokenizer", default=DEFAULT_TOKENIZER, show_default=True, help="Tokenizer for counts."
    )

    @cli.command()
    @click.argument("files", nargs=-1, required=True)
    @click.option("--json", "as_json", is_flag=True, help="One JSON object per conversation.")
    @click.option("--top", default=5, show_default=True, help="How many largest/repeated to list.")
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

        FILES are session files; FILE#N selects conversation N (0-based).
        """
        counter = state.counter(tokenizer)
        for address in files:
            fmt, contexts = _load(state, address, format_)
            file, index = split_address(address)
            for n, ctx in enumerate(contexts):
                report = inspect_context(ctx, counter, top=top, fmt=fmt)
                number = index if index is not None else n
                report = {"file": file, "conversation": number, **report}
                if as_json:
                    click.echo(json.dumps(report, ensure_ascii=False))
                else:
                    label = f"{file}#{number}" if len(contexts) > 1 or index is not None else file
                    _render_inspect(report, label)

    @cli.command()
    @click.argument("file")
    @click.option("--to", "to", required=True, metavar="FORMAT", help="Output format.")
    @click.option("-o", "--output", default=None, help="Output file (default: stdout).")
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
    @format_option
    @click.pass_obj
    def convert(
        state: State,
        file: str,
        to: str,
        output: str | None,
        request: bool,
        pending: Pending | None,
        format_: str | None,
    ) -> None:
        """Convert a session (FILE or FILE#N) to another format.

        What the target format cannot carry (thinking, images, ...) is listed in one warning line
        on stderr.
        """
        _, contexts = _load(state, file, format_)
        writer = state.registry.formats.get(to)
        if isinstance(writer, ProviderWriter):
            result = writer.export(contexts, WriterOptions(request=request, pending=pending))
            text = result.text
            warning = result.warning(writer.name)
            if warning:
                click.echo(f"warning: {warning}", err=True)
        elif request or pending is not None:
            raise ConfigError(f"--request and --pending apply to provider formats, not {to!r}")
        else:
            text = render(contexts, to, state.registry)
        if output:
            write_atomic(output, text)
        else:
            click.echo(text, nl=False)

    @cli.command()
    @click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
    @click.pass_obj
    def formats(state: State, as_json: bool) -> None:
        """List session formats (readers and writers)."""
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
            _print_json({"schema": "compactkit.formats/1", "formats": rows})
            return
        for row in rows:
            mode = "read/write" if row["write"] else "read"
            click.echo(f"{row['name']:<20} {mode:<10} {row['description']}")

    @cli.command()
    @click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
    @click.pass_obj
    def plugins(state: State, as_json: bool) -> None:
        """List loaded plugins, what each provides, and any load errors."""
        reg = state.registry
        if as_json:
            _print_json(
                {"schema": "compactkit.plugins/1", "plugins": [p.as_json() for p in reg.plugins]}
            )
            return
        for p in reg.plugins:
            status = "ok" if p.ok else "ERROR"
            version = f" {p.version}" if p.version else ""
            click.echo(f"{p.name}{version} [{p.source}] {status}")
            for kind, names in sorted(p.provides.items()):
                click.echo(f"    {kind}: {', '.join(sorted(names))}")
            for error in p.errors:
                click.echo(f"    error: {error}")

    @cli.command()
    @click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
    @click.pass_obj
    def strategies(state: State, as_json: bool) -> None:
        """List compaction strategies and their options."""
        reg = state.registry
        rows = []
        for name, strat in reg.strategies.items():
            options = getattr(strat, "Options", None)
            schema = options.model_json_schema() if options is not None else {}
            rows.append(
                {
                    "name": name,
                    "description": (getattr(strat, "description", "") or "").strip(),
                    "plugin": reg.strategies.owner(name),
                    "options": schema.get("properties", {}),
                }
            )
        if as_json:
            _print_json({"schema": "compactkit.strategies/1", "strategies": rows})
            return
        if not rows:
            click.echo("no strategies registered")
        for row in rows:
            click.echo(f"{row['name']:<20} {row['description']}")
            for key, spec in row["options"].items():
                default = f" (default {spec['default']!r})" if "default" in spec else ""
                click.echo(f"    {key}: {spec.get('description', '')}{default}")

    @cli.command()
    @click.argument("file")
    @click.option(
        "-s",
        "--strategy",
        "specs",
        multiple=True,
        metavar="NAME[:key=value,...]",
        help="A strategy and its options; repeat for a pipeline (order is pipeline order).",
    )
    @click.option(
        "--budget",
        type=click.IntRange(min=1),
        default=None,
        help="Token count the output must fit; fills each strategy's budget option.",
    )
    @click.option(
        "--to",
        "to",
        default="compactkit",
        show_default=True,
        metavar="FORMAT",
        help="Output format.",
    )
    @click.option("-o", "--output", default=None, help="Output file (default: stdout).")
    @click.option(
        "--stash",
        default=None,
        metavar="PATH",
        help="Write what was removed to this stash file instead of into the context.",
    )
    @click.option(
        "--explain", is_flag=True, help="Say which messages each strategy changed and why."
    )
    @click.option(
        "--report-json", default=None, metavar="FILE", help="Write the run report as JSON."
    )
    @format_option
    @tokenizer_option
    @click.pass_obj
    def run(
        state: State,
        file: str,
        specs: Sequence[str],
        budget: int | None,
        to: str,
        output: str | None,
        stash: str | None,
        explain: bool,
        report_json: str | None,
        format_: str | None,
        tokenizer: str,
    ) -> None:
        """Compact a session (FILE or FILE#N) with a pipeline of strategies.

        With no -s, the default pipeline runs: etag-collapse, and under --budget also llm-summary
        (extractive, offline) and sliding-window. Exit 1 when the output is still over --budget
        (the output is written all the same).
        """
        from .observers import ProgressDisplay, StatsRecorder
        from .pipeline import build_pipeline
        from .recovery import split_stash, stash_json

        _, contexts = _load(state, file, format_)
        ctx = single(contexts, file)
        writer = state.registry.formats.get(to)
        if not writer.can_write:
            raise ConfigError(f"format {to!r} cannot be written")
        pipeline = build_pipeline(
            list(specs) or default_pipeline(budget),
            budget=budget,
            registry=state.registry,
            tokenizer=tokenizer,
        )
        stats = StatsRecorder()
        pipeline.subscribe(stats)
        pipeline.subscribe(ProgressDisplay())
        result = pipeline.run(ctx, state.counter(tokenizer))
        out = result.context
        report_stream_err = output is None
        if stash:
            out, entries = split_stash(out)
            write_atomic(stash, stash_json(entries))
        elif out.recovery and to != "compactkit":
            click.echo(
                f"compactkit: warning: {to} cannot carry the recovery store "
                f"({len(out.recovery)} entries); pass --stash PATH to keep what was removed",
                err=True,
            )
        text = render(out, to, state.registry)
        if output:
            write_atomic(output, text)
        else:
            click.echo(text, nl=False)
        report = stats.report()
        report.update({"input": file, "budget": budget, "output": output, "format": to})
        over = budget is not None and result.tokens_after > budget
        report["over_budget"] = (result.tokens_after - budget) if over and budget else 0
        if report_json:
            write_atomic(report_json, json.dumps(report, ensure_ascii=False, indent=2) + "\n")
        _print_run(stats, result.tokens_before, result.tokens_after, explain, report_stream_err)
        if over and budget is not None:
            click.echo(
                f"compactkit: over budget: {result.tokens_after:,} tokens, "
                f"{result.tokens_after - budget:,} over the budget of {budget:,}",
                err=True,
            )
            sys.exit(EXIT_BUDGET)

    @cli.command()
    @click.argument("file")
    @click.option(
        "--stash", default=None, metavar="PATH", help="Stash file written by run --stash."
    )
    @click.option("--to", "to", default="compactkit", show_default=True, metavar="FORMAT")
    @click.option("-o", "--output", default=None, help="Output file (default: stdout).")
    @click.pass_obj
    def expand(state: State, file: str, stash: str | None, to: str, output: str | None) -> None:
        """Undo compaction: put back everything the markers stand for."""
        from pathlib import Path

        from .recovery import expand as expand_context
        from .recovery import read_stash, unrecoverable

        _, contexts = _load(state, file, None)
        ctx = single(contexts, file)
        entries: dict[str, str] = {}
        if stash:
            path = Path(stash)
            if not path.is_file():
                raise BadInputError("no such stash file", path=stash)
            entries = read_stash(path.read_text(encoding="utf-8"), stash)
        missing = unrecoverable(ctx, entries)
        if missing:
            raise BadInputError(
                f"{len(missing)} marker(s) cannot be restored (etag {missing[0]} ...)",
                path=file,
                hint="pass the --stash file written when it was compacted",
            )
        text = render(expand_context(ctx, entries), to, state.registry)
        if output:
            write_atomic(output, text)
        else:
            click.echo(text, nl=False)

    @cli.command(name="validate")
    @click.argument("files", nargs=-1, required=True)
    @click.option(
        "--against",
        default=None,
        metavar="ORIGINAL",
        help="The input it was compacted from (checks task, system and thinking kept).",
    )
    @click.option("--stash", default=None, metavar="PATH", help="Stash file for markers.")
    @format_option
    @click.pass_obj
    def validate_cmd(
        state: State,
        files: Sequence[str],
        against: str | None,
        stash: str | None,
        format_: str | None,
    ) -> None:
        """Check contexts against the compaction invariants; exit 3 on any violation."""
        from pathlib import Path

        from .recovery import read_stash
        from .validate import validate

        original = single(_load(state, against, None)[1], against) if against else None
        entries = read_stash(Path(stash).read_text(encoding="utf-8"), stash) if stash else None
        bad = 0
        for address in files:
            _, contexts = _load(state, address, format_)
            for n, ctx in enumerate(contexts):
                where = f"{address}#{n}" if len(contexts) > 1 else address
                problems = validate(ctx, original, stash=entries)
                bad += len(problems)
                for problem in problems:
                    click.echo(f"{where}: {problem}")
                if not problems:
                    click.echo(f"{where}: ok")
        if bad:
            click.echo(f"compactkit: {bad} violation(s)", err=True)
            sys.exit(EXIT_PLUGIN)

    @cli.command(name="diff")
    @click.argument("before")
    @click.argument("after")
    @click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
    @click.pass_obj
    def diff_cmd(state: State, before: str, after: str, as_json: bool) -> None:
        """Say which messages and blocks differ between two contexts."""
        from .context import diff

        a = single(_load(state, before, None)[1], before)
        b = single(_load(state, after, None)[1], after)
        d = diff(a, b)
        if as_json:
            _print_json({"schema": "compactkit.diff/1", **d.model_dump(mode="json")})
            return
        click.echo(d.summary())
        for m in d.messages:
            where = m.before_index if m.change == "removed" else m.after_index
            blocks = ", ".join(f"block {c.block} {c.change}" for c in m.blocks)
            click.echo(
                f"  {m.change:<8} message {where} ({m.role}){': ' + blocks if blocks else ''}"
            )

    @cli.command()
    @click.argument("paths", nargs=-1, required=True)
    @click.option(
        "-s",
        "--pipeline",
        "pipelines",
        multiple=True,
        metavar="PIPELINE",
        help="A pipeline to compare: strategy specs joined by '+' or spaces, 'default', or "
        "@FILE.json; repeat to compare several. 'none' is always included.",
    )
    @click.option(
        "--mode",
        type=click.Choice(["replay", "view", "persistent", "oneshot"]),
        default="replay",
        show_default=True,
        help="replay = persistent compaction; view = pipeline before every call.",
    )
    @click.option(
        "--pricing",
        "pricing",
        multiple=True,
        metavar="NAME",
        help="Pricing profile (anthropic, openai, nocache); repeatable.",
    )
    @click.option(
        "--trigger",
        type=click.IntRange(min=1),
        default=DEFAULT_TRIGGER,
        show_default=True,
        help="Persistent mode: compact when history exceeds this.",
    )
    @click.option("--json", "json_out", default=None, metavar="OUT", help="Write the JSON report.")
    @click.option("--markdown", "md_out", default=None, metavar="OUT", help="Write markdown.")
    @click.option("--html", "html_out", default=None, metavar="OUT", help="Write an HTML page.")
    @click.option(
        "--workers",
        type=click.IntRange(min=1),
        default=1,
        show_default=True,
        help="Parallel worker processes (results are identical to one worker).",
    )
    @tokenizer_option
    @click.pass_obj
    def bench(
        state: State,
        paths: Sequence[str],
        pipelines: Sequence[str],
        mode: str,
        pricing: Sequence[str],
        trigger: int,
        json_out: str | None,
        md_out: str | None,
        html_out: str | None,
        workers: int,
        tokenizer: str,
    ) -> None:
        """Measure pipelines on sessions: tokens, cache-adjusted cost, retention, speed.

        PATHS are session files, FILE#N, or folders (every session file under them; files that
        do not load are listed, not fatal).
        """
        from .bench.report import render_html, render_markdown, render_terminal
        from .bench.runner import parse_pipeline, read_pipeline_file, run_bench

        specs = []
        for text in pipelines or ("default",):
            if text.startswith("@"):
                specs.extend(read_pipeline_file(text[1:]))
            else:
                specs.append(parse_pipeline(text, default_pipeline(trigger)))
        replay_mode = "persistent" if mode == "replay" else mode
        progress = _BenchProgress(len(paths))
        report = run_bench(
            paths,
            specs,
            mode=replay_mode,  # type: ignore[arg-type]  # checked by click.Choice
            profiles=tuple(pricing) or ("anthropic", "openai"),
            trigger=trigger,
            tokenizer=tokenizer,
            workers=workers,
            registry=state.registry,
            progress=progress,
        )
        progress.close()
        if json_out:
            write_atomic(json_out, json.dumps(report, ensure_ascii=False) + "\n")
        if md_out:
            write_atomic(md_out, render_markdown(report))
        if html_out:
            write_atomic(html_out, render_html(report))
        render_terminal(report)

    return cli


class _BenchProgress:
    """A progress bar on stderr over session files; nothing when stderr is not a terminal."""

    def __init__(self, total: int) -> None:
        self.bar: Any = None
        if sys.stderr.isatty():
            from rich.console import Console
            from rich.progress import Progress

            self.bar = Progress(console=Console(file=sys.stderr), transient=True)
            self.bar.start()
            self.task = self.bar.add_task("benchmarking", total=None)

    def __call__(self, result: Any) -> None:
        if self.bar is not None:
            self.bar.update(self.task, advance=1, description=result.address[-50:])

    def close(self) -> None:
        if self.bar is not None:
            self.bar.stop()


def _print_run(stats: Any, before: int, after: int, explain: bool, to_stderr: bool) -> None:
    echo = (lambda line: click.echo(line, err=True)) if to_stderr else click.echo
    saved = before - after
    share = f" ({saved / before:.1%} saved)" if before else ""
    echo(f"tokens: {before:,} -> {after:,}{share}")
    for step in stats.applied:
        note = f"  [{step.note}]" if step.note else ""
        echo(
            f"  {step.strategy:<32} {step.tokens_before:>10,} -> {step.tokens_after:>10,}"
            f"  {len(step.changes):>4} change(s){note}"
        )
        if explain:
            for action, first, last, reason in _ranges(step.changes):
                where = f"message {first}" if first == last else f"messages {first}-{last}"
                echo(f"      {action:<8} {where}: {reason}")


def _ranges(changes: Sequence[Any]) -> list[tuple[str, int, int, str]]:
    """Consecutive changes with the same action and reason, folded into index ranges."""
    out: list[tuple[str, int, int, str]] = []
    for c in changes:
        if (
            out
            and out[-1][0] == c.action
            and out[-1][3] == c.reason
            and out[-1][2] == c.message - 1
        ):
            out[-1] = (c.action, out[-1][1], c.message, c.reason)
        else:
            out.append((c.action, c.message, c.message, c.reason))
    return out


def main(argv: Sequence[str] | None = None) -> None:
    """Console-script entry point."""
    cli = make_cli()
    try:
        cli.main(args=list(argv) if argv is not None else None, prog_name="compactkit")
    except CompactkitError as exc:  # raised outside a command (e.g. while building the group)
        fail(exc, "--debug" in (argv or sys.argv))
    except click.exceptions.Exit as exc:
        sys.exit(exc.exit_code)
    except BrokenPipeError:  # output piped into `head` and friends: not an error
        sys.stderr.close()
        sys.exit(0)


__all__ = ["EXIT_BAD_INPUT", "main", "make_cli"]
