"""Options shared by several commands, each with one meaning and one help text everywhere.

Each is a decorator (simonw/llm's `schema_option` style): `@format_option` on a command that reads
sessions, `@pipeline_option(...)` on one that compacts, and so on. Names of strategies, formats and
tokenizers complete in the shell from the invocation's registry.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import click
from click.shell_completion import CompletionItem

from ..errors import ConfigError
from ..formats.loading import SessionAddress
from ..tokens import DEFAULT_TOKENIZER
from ._app import State

F = TypeVar("F", bound=Callable[..., Any])

STDIO = "-"
"""The path that means stdin where a file is read and stdout where one is written."""


class SessionArgument(click.ParamType[SessionAddress]):
    """A session argument (`FILE`, `FILE#N`, `-`), parsed once into the `SessionAddress` that the
    command passes down; a bad `#N` is the library's one-line error (exit 2)."""

    name = "session"

    def convert(
        self, value: Any, param: click.Parameter | None, ctx: click.Context | None
    ) -> SessionAddress:
        return SessionAddress.parse(value)

    def shell_complete(
        self, ctx: click.Context, param: click.Parameter, incomplete: str
    ) -> list[CompletionItem]:
        return [CompletionItem(incomplete, type="file")]


SESSION = SessionArgument()


# ----------------------------------------------------------------------------- shell completion


def _names(ctx: click.Context, kind: str, writable: bool = False) -> list[tuple[str, str]]:
    """(name, description) of what the invocation's registry holds of `kind`; nothing when the
    registry cannot be built (completion must never fail)."""
    state = ctx.find_object(State)
    if state is None:
        return []
    try:
        table = state.registry.tables[kind]
        return [
            (name, (getattr(item, "description", "") or "").strip().split("\n")[0])
            for name, item in table.items()
            if not writable or getattr(item, "can_write", False)
        ]
    except Exception:
        return []


def _complete(kind: str, writable: bool = False) -> Callable[..., list[CompletionItem]]:
    def complete(ctx: click.Context, _param: click.Parameter, incomplete: str) -> list[Any]:
        return [
            CompletionItem(name, help=help)
            for name, help in _names(ctx, kind, writable)
            if name.startswith(incomplete)
        ]

    return complete


def complete_pipeline(ctx: click.Context, _param: click.Parameter, incomplete: str) -> list[Any]:
    """Strategy names for the last step of a `a+b+c` pipeline spec (options are not completed)."""
    head, plus, last = incomplete.rpartition("+")
    if ":" in last:
        return []
    prefix = head + plus
    names = [(n, h) for n, h in _names(ctx, "strategy")]
    if not head:
        names += [("default", "the default pipeline"), ("none", "no compaction")]
    return [
        CompletionItem(prefix + name, help=help) for name, help in names if name.startswith(last)
    ]


# ----------------------------------------------------------------------------- options


def format_option(fn: F) -> F:
    """`--format NAME`: the input format, when detection is not wanted."""
    return click.option(
        "--format",
        "format_",
        default=None,
        metavar="NAME",
        shell_complete=_complete("format"),
        help="Input format (default: detect it).",
    )(fn)


def to_option(*, default: str | None = "compactkit") -> Callable[[F], F]:
    """`--to FORMAT`: the output format (required when there is no default)."""
    extra: dict[str, Any] = (
        {"default": default, "show_default": True} if default else {"required": True}
    )
    return click.option(
        "--to",
        "to",
        metavar="FORMAT",
        shell_complete=_complete("format", writable=True),
        help="Output format.",
        **extra,
    )


def tokenizer_option(fn: F) -> F:
    """`--tokenizer NAME`: the tokenizer every count uses."""
    return click.option(
        "--tokenizer",
        default=DEFAULT_TOKENIZER,
        show_default=True,
        metavar="NAME",
        shell_complete=_complete("tokenizer"),
        help="Tokenizer for counts.",
    )(fn)


def workers_option(fn: F) -> F:
    """`--workers N`: sessions run in N processes (results identical to one worker)."""
    return click.option(
        "--workers",
        type=click.IntRange(min=1),
        default=1,
        show_default=True,
        help="Parallel worker processes (results are identical to one worker).",
    )(fn)


class _Seconds(click.ParamType[float]):
    """A finite number of seconds, `minimum` or more (nan and inf are refused)."""

    name = "seconds"

    def __init__(self, minimum: float = 0) -> None:
        self.minimum = minimum

    def convert(
        self, value: Any, param: click.Parameter | None, ctx: click.Context | None
    ) -> float:
        import math

        try:
            seconds = float(value)
        except (TypeError, ValueError):
            self.fail(f"{value!r} is not a number of seconds", param, ctx)
        if not math.isfinite(seconds) or seconds < self.minimum:
            least = f"{self.minimum:g}"
            self.fail(f"{value!r} is not a finite number of seconds, {least} or more", param, ctx)
        return seconds


def nonempty_path(ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
    """A path option's callback: an empty value (an unset variable, `--state "$STATE"`) is a
    usage error, not a silent default."""
    if value == "":
        raise click.BadParameter("an empty path (is the variable it came from unset?)", ctx, param)
    return value


SECONDS = _Seconds()
"""A plugin time limit: finite, 0 (no limit) or more."""
WAIT_SECONDS = _Seconds(minimum=0.1)
"""How long to wait for a server (`gateway`, `mcp-proxy`): finite, at least 0.1 s."""


def _plugin_timeout(flag: str, help: str) -> Callable[[F], F]:
    """An option for how long each plugin strategy may run before it is stopped."""

    def decorate(fn: F) -> F:
        from ..pipeline import PLUGIN_TIMEOUT

        return click.option(
            flag,
            type=SECONDS,
            default=PLUGIN_TIMEOUT,
            show_default=True,
            metavar="SECONDS",
            help=help,
        )(fn)

    return decorate


timeout_option = _plugin_timeout(
    "--timeout",
    "Stop a plugin strategy that runs longer than this, as a plugin failure (exit 3); "
    "0: no limit. Built-in strategies run in-process without a limit.",
)
"""`--timeout SECONDS` of run, bench and check."""
strategy_timeout_option = _plugin_timeout(
    "--strategy-timeout",
    "Stop a plugin strategy in -s that runs longer than this: that compaction fails and the "
    "request goes upstream as the client sent it; 0: no limit (the plugin runs in-process).",
)
"""`--strategy-timeout SECONDS` of the gateway (its `--timeout` is the upstream's)."""


def executor_option(fn: F) -> F:
    """`--executor local|ray` and `--ray-address ADDRESS`: where sessions run (the results are
    identical; `compactkit.bench.executors`)."""
    fn = click.option(
        "--ray-address",
        default=None,
        metavar="ADDRESS",
        help="With --executor ray: the Ray cluster to join (HOST:PORT or ray://HOST:10001); "
        "default RAY_ADDRESS, else a local Ray of --workers CPUs.",
    )(fn)
    return click.option(
        "--executor",
        type=click.Choice(["local", "ray"]),
        default="local",
        show_default=True,
        help="local: --workers processes here; ray: Ray tasks (pip install 'compactkit[ray]').",
    )(fn)


def output_option(fn: F) -> F:
    """`-o/--output PATH`: where the result goes (default and `-`: stdout), written atomically."""
    return click.option(
        "-o",
        "--output",
        default=None,
        metavar="PATH",
        help="Output file, written atomically (default or '-': stdout).",
    )(fn)


def json_flag(fn: F) -> F:
    """`--json`: machine output on stdout, versioned JSON (a `schema` field names its shape)."""
    return click.option(
        "--json",
        "as_json",
        is_flag=True,
        help="Machine output: versioned JSON on stdout.",
    )(fn)


def json_file_option(*aliases: str, help: str) -> Callable[[F], F]:
    """`--json FILE|-`: for commands whose main output is a file, the versioned JSON report goes
    to FILE (`-`: stdout)."""
    return click.option("--json", *aliases, "json_out", default=None, metavar="FILE|-", help=help)


def pipeline_option(*, help: str) -> Callable[[F], F]:
    """`-s/--pipeline SPEC`, repeatable: one meaning in every command (`compactkit.spec`)."""
    return click.option(
        "-s",
        "--pipeline",
        "--strategy",
        "specs",
        multiple=True,
        metavar="SPEC",
        shell_complete=complete_pipeline,
        help=help,
    )


SPEC_HELP = (
    "SPEC is NAME[:key=value,...], several joined by '+' "
    "(observation-mask:keep_last=5+sliding-window), 'default', 'none' or @FILE.json."
)


PIN_HELP = (
    "Pin what no strategy may touch, repeatable: tool=NAME (a tool's calls and results), "
    "path=GLOB (results showing a matching file, e.g. path=**/CLAUDE.md), re=REGEX (text blocks "
    "it matches), origin=NAME (user turns of that origin). The user's words, the task, the last "
    "request and a pending call are always pinned."
)


def pin_option(fn: F) -> F:
    """`--pin RULE`, repeatable: user pin rules (`compactkit.pins`), checked when parsed."""

    def check(
        _ctx: click.Context, _param: click.Parameter, values: tuple[str, ...]
    ) -> tuple[str, ...]:
        from ..pins import parse_rule

        return tuple(str(parse_rule(v)) for v in values)

    return click.option(
        "--pin", "pins", multiple=True, metavar="RULE", callback=check, help=PIN_HELP
    )(fn)


def stash_option(*, help: str) -> Callable[[F], F]:
    """`--stash PATH`: a stash file (what compaction removed, kept outside the context)."""
    return click.option("--stash", default=None, metavar="PATH", help=help)


def check_one_stdout(**paths: str | None) -> None:
    """Refuse two results on stdout at once (`--output -` and `--json -`, say)."""
    on_stdout = [name for name, path in paths.items() if path == STDIO]
    if len(on_stdout) > 1:
        names = " and ".join(f"--{n.replace('_', '-')}" for n in on_stdout)
        raise ConfigError(f"{names} would both go to stdout: give one of them a file")


def policy_option(*, help: str) -> Callable[[F], F]:
    """`--policy pays|always`: when a compaction past the trigger is kept (`compactkit.policy`)."""
    return click.option(
        "--policy",
        type=click.Choice(["pays", "always"]),
        default="pays",
        show_default=True,
        help=help,
    )


def pricing_option(*, help: str) -> Callable[[F], F]:
    """`--pricing NAME`, repeatable: the pricing profiles (anthropic, openai, nocache)."""
    return click.option("--pricing", "pricing", multiple=True, metavar="NAME", help=help)
