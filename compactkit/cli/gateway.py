"""`compactkit gateway`: the persistent policy live, between an agent and its model API (needs
`compactkit[gateway]`)."""

from __future__ import annotations

import logging
from typing import Any

import click

from ..defaults import DEFAULT_TRIGGER
from ..errors import ConfigError, redact
from ._app import State, command
from ._options import (
    WAIT_SECONDS,
    nonempty_path,
    pin_option,
    policy_option,
    pricing_option,
    strategy_timeout_option,
    tokenizer_option,
)


def _listen(value: str) -> tuple[str, int]:
    host, sep, port = value.rpartition(":")
    if not sep or not port.isdigit() or not 0 <= int(port) < 65536:
        raise ConfigError(f"--listen takes HOST:PORT, not {value!r}")
    return host.strip("[]") or "127.0.0.1", int(port)


def _upstream(value: str | None, option: str) -> str | None:
    if value is None or value in ("", "none"):
        return None
    if not value.startswith(("http://", "https://")):
        raise ConfigError(f"{option} takes an http(s) URL")
    return value


def pipeline_specs(text: str) -> list[str]:
    """One `-s` value in the spec language (`compactkit.spec`), built at the target: `default`,
    alone or inside a `+` combination, is the default pipeline at the target."""
    from ..spec import parse_pipeline

    parse_pipeline(text)  # an empty spec is a usage error here, before anything starts
    return [text.strip()]


@command(
    exit_codes="0 stopped (Ctrl-C); 2 a bad option, the `gateway` extra missing, the "
    "address in use, or a --state file that is not a gateway state database"
)
@click.option(
    "--listen",
    default="127.0.0.1:8787",
    show_default=True,
    metavar="HOST:PORT",
    help="Where to listen (port 0: any free port, printed at start).",
)
@click.option(
    "--upstream-anthropic",
    default="https://api.anthropic.com",
    show_default=True,
    metavar="URL",
    help="Where /v1/messages goes ('none': nowhere).",
)
@click.option(
    "--upstream-openai",
    default="https://api.openai.com",
    show_default=True,
    metavar="URL",
    help="Where /v1/chat/completions and /v1/responses go ('none': nowhere).",
)
@click.option(
    "-s",
    "--pipeline",
    "spec",
    default="default",
    show_default=True,
    metavar="SPEC",
    help="The pipeline a compaction runs: NAME[:key=value,...] joined by '+', or 'default'.",
)
@click.option(
    "--trigger",
    type=click.IntRange(min=2),
    default=DEFAULT_TRIGGER,
    show_default=True,
    help="Compact a conversation when its prompt is over this many tokens.",
)
@click.option(
    "--target",
    type=click.IntRange(min=1),
    default=None,
    help="Compact down to this many tokens [default: half the trigger].",
)
@policy_option(
    help="Keep a compaction only when it pays for itself under --pricing (pays), or whenever "
    "over the trigger (always)."
)
@pricing_option(
    help="Pricing profile a compaction must pay under (anthropic, openai, nocache); repeatable "
    "[default: anthropic and openai]."
)
@click.option(
    "--state",
    "state_db",
    default=None,
    metavar="DB",
    type=click.Path(dir_okay=False),
    callback=nonempty_path,
    help="Keep conversations in this SQLite file, so a restart resumes them, or in a Redis "
    "database (redis://HOST:PORT/N) that several gateways behind a balancer share.",
)
@click.option(
    "--record",
    default=None,
    metavar="DIR",
    type=click.Path(file_okay=False),
    help="Write each conversation, uncompacted, as a compactkit-session log in DIR.",
)
@click.option(
    "--recall",
    is_flag=True,
    help="Offer the model a compactkit_recall tool (by etag) that the gateway answers itself.",
)
@click.option(
    "--max-conversations",
    type=click.IntRange(min=1),
    default=1000,
    show_default=True,
    help="Conversations held in memory (least recently used dropped first).",
)
@click.option(
    "--timeout",
    type=WAIT_SECONDS,
    default=600.0,
    show_default=True,
    help="Seconds to wait for the upstream to connect or send its next bytes.",
)
@click.option(
    "--summarizer",
    type=click.Choice(["auto", "upstream", "extractive"]),
    default="auto",
    show_default=True,
    help="Who writes a compaction's summary: the agent's own model through the upstream, with "
    "the request's credentials ('upstream'; 'auto': when the request carries one), or the "
    "offline extractive summary.",
)
@click.option(
    "--print-env",
    type=click.Choice(["claude", "codex", "sdk"]),
    default=None,
    help="Print the lines that point Claude Code, Codex or an SDK at this gateway, and exit.",
)
@click.option(
    "-v", "--verbose", is_flag=True, help="Log one line per request too (not only compactions)."
)
@click.option(
    "--max-body",
    type=click.IntRange(min=1),
    default=32 * 1024 * 1024,
    show_default=True,
    metavar="BYTES",
    help="The largest request body taken; a larger one is answered 413 and never sent.",
)
@click.option(
    "--max-memory",
    type=click.IntRange(min=1),
    default=1024 * 1024 * 1024,
    show_default=True,
    metavar="BYTES",
    help="Bytes the conversations held, the recent bodies and the token counter's memo may "
    "take (estimated); least recently used conversations let go first.",
)
@click.option(
    "--read-timeout",
    type=WAIT_SECONDS,
    default=60.0,
    show_default=True,
    help="Seconds a client has to send its request line and headers, and as long for its "
    "body; a slower one is answered 408.",
)
@click.option(
    "--admin-token",
    default=None,
    metavar="TOKEN",
    envvar="COMPACTKIT_GATEWAY_ADMIN_TOKEN",
    help="A credential that sees every conversation in /compactkit/stats (others see their "
    "own). Also read from $COMPACTKIT_GATEWAY_ADMIN_TOKEN.",
)
@click.option(
    "--workers",
    type=click.IntRange(min=1),
    default=4,
    show_default=True,
    help="Threads that read and plan requests: up to this many conversations at once (in "
    "each planner process).",
)
@click.option(
    "--processes",
    type=click.IntRange(min=0),
    default=2,
    show_default=True,
    help="Planner processes that read, plan and compact requests, each client's (API key's) "
    "in one, so that one client's compaction never slows another's requests; 0: planned in the "
    "gateway's process.",
)
@strategy_timeout_option
@pin_option
@tokenizer_option
@click.pass_obj
def gateway(
    state: State,
    listen: str,
    upstream_anthropic: str | None,
    upstream_openai: str | None,
    spec: str,
    trigger: int,
    target: int | None,
    policy: str,
    pricing: tuple[str, ...],
    state_db: str | None,
    record: str | None,
    recall: bool,
    max_conversations: int,
    timeout: float,
    summarizer: str,
    print_env: str | None,
    verbose: bool,
    max_body: int,
    max_memory: int,
    read_timeout: float,
    admin_token: str | None,
    workers: int,
    processes: int,
    strategy_timeout: float,
    pins: tuple[str, ...],
    tokenizer: str,
) -> None:
    """Serve the model APIs at a base URL and compact each conversation as `bench --mode
    persistent` replays it: below --trigger a request passes byte-identical; past it, one
    compaction down to --target, then the compacted prefix (byte-stable, so the provider's
    prompt cache holds) plus what is new. Every other route passes through.

    \b
    Example:
      compactkit gateway --listen 127.0.0.1:8787 --trigger 60000 --state ~/.cache/ck-gw.db
      ANTHROPIC_BASE_URL=http://127.0.0.1:8787 claude
      OPENAI_BASE_URL=http://127.0.0.1:8787/v1 codex
    """
    host, port = _listen(listen)
    if print_env is not None:
        click.echo(agent_env(print_env, _base(host, port)))
        return
    try:
        import uvicorn  # noqa: F401  (the gateway extra is checked here, before anything starts)

        from ..gateway import GatewayConfig, create_app
    except ImportError as exc:
        raise ConfigError(
            f"gateway needs starlette, uvicorn and httpx ({exc.name} is missing): "
            "pip install 'compactkit[gateway]'"
        ) from exc
    config = GatewayConfig(
        upstream_anthropic=_upstream(upstream_anthropic, "--upstream-anthropic"),
        upstream_openai=_upstream(upstream_openai, "--upstream-openai"),
        pipeline=pipeline_specs(spec),
        trigger=trigger,
        target=target,
        policy=policy,
        pricing=pricing or ("anthropic", "openai"),
        tokenizer=tokenizer,
        state=state_db,
        record=record,
        recall=recall,
        pins=pins,
        max_conversations=max_conversations,
        timeout=timeout,
        strategy_timeout=strategy_timeout,
        summarizer=summarizer,
        max_body=max_body,
        max_memory=max_memory,
        read_timeout=read_timeout,
        admin_token=admin_token or None,
        workers=workers,
        processes=processes,
    )
    _serve(create_app(config, state.registry), config, host, port, verbose)


def _base(host: str, port: int) -> str:
    return f"http://{f'[{host}]' if ':' in host else host}:{port}"


def agent_env(agent: str, base: str) -> str:
    """The lines that point `agent` (claude, codex, sdk) at the gateway at `base`."""
    if agent == "claude":
        return f"export ANTHROPIC_BASE_URL={base}"
    if agent == "codex":
        return "\n".join(
            [
                "# in ~/.codex/config.toml (Codex sends OPENAI_API_KEY through the gateway):",
                'model_provider = "compactkit"',
                "",
                "[model_providers.compactkit]",
                'name = "compactkit gateway"',
                f'base_url = "{base}/v1"',
                'wire_api = "responses"',
                'env_key = "OPENAI_API_KEY"',
            ]
        )
    return f"export OPENAI_BASE_URL={base}/v1\nexport ANTHROPIC_BASE_URL={base}"


class _Redacting(logging.Formatter):
    """Every log line through `redact`: the HTTP client logs each request's URL, whose query or
    user info may hold a key."""

    def format(self, record: logging.LogRecord) -> str:
        return redact(super().format(record), one_line=False)


def _serve(app: Any, config: Any, host: str, port: int, verbose: bool) -> None:
    """Log as the gateway logs, listen, say so in one line that names what runs, and serve."""
    import uvicorn

    from ..gateway.app import listening_socket
    from ..gateway.protocol import timed_protocol

    handler = logging.StreamHandler()
    handler.setFormatter(_Redacting("compactkit gateway: %(message)s"))
    logging.basicConfig(level=logging.INFO, handlers=[handler])
    if not verbose:  # the HTTP client's line per request
        logging.getLogger("httpx").setLevel(logging.WARNING)
    try:
        sock = listening_socket(host, port)
    except OSError as exc:
        raise ConfigError(f"cannot listen on {host}:{port}: {exc.strerror}") from None
    base = _base(host, sock.getsockname()[1])
    planner = app.state.gateway.policy
    line = (
        f"compactkit gateway: listening on {base} (anthropic -> "
        f"{config.upstream_anthropic or 'none'}, openai -> {config.upstream_openai or 'none'}; "
        f"pipeline {planner.pipeline.title}; summarizer {planner.summarizer}; "
        f"trigger {planner.trigger:,}; target {planner.target:,}; "
        f"compaction: {'when it pays' if config.policy == 'pays' else 'always'})"
    )
    click.echo(redact(line), err=True)  # an upstream URL may hold a password
    # a client's request line and headers, as its body, must arrive within --read-timeout
    http = timed_protocol(config.read_timeout)
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", access_log=False, http=http))
    server.run(sockets=[sock])
