"""`compactkit mcp-proxy`: put a serve state in front of an MCP server (needs `compactkit[mcp]`)."""

from __future__ import annotations

import os
import uuid

import click

from ..errors import ConfigError
from ._app import State, command
from ._options import WAIT_SECONDS, nonempty_path


@command(
    "mcp-proxy",
    exit_codes="0 the client closed the connection; 2 no command or URL, the `mcp` extra missing, "
    "an upstream that cannot be started or reached, an --http address in use, or a --state file "
    "that is not a serve-state database",
    context_settings={"help_option_names": ["-h", "--help"], "ignore_unknown_options": True},
)
@click.option(
    "--state",
    "state_db",
    default=None,
    metavar="DB",
    type=click.Path(dir_okay=False),
    callback=nonempty_path,
    help="Keep serve state in this SQLite file, or a Redis database (redis://HOST:PORT/N), shared "
    "by proxies that name the same --session and by gateways on the same --state; default: in "
    "memory.",
)
@click.option(
    "--session",
    default=None,
    metavar="ID",
    help="Serve-state session id (default: $COMPACTKIT_SESSION, else the $CLAUDE_CODE_SESSION_ID "
    "Claude Code gives the servers it starts, else a new one per proxy process, so a new "
    "conversation never inherits what an old one was sent).",
)
@click.option(
    "--timeout",
    default=60.0,
    show_default=True,
    type=WAIT_SECONDS,
    help="Seconds to wait for the upstream's answer to one request; then the call fails.",
)
@click.option(
    "--url",
    default=None,
    metavar="URL",
    help="Front the remote MCP server at this streamable HTTP endpoint instead of a command.",
)
@click.option(
    "--http",
    "listen",
    default=None,
    metavar="HOST:PORT",
    help="Serve MCP over streamable HTTP at http://HOST:PORT/mcp instead of stdio (each client "
    "session its own upstream connection and, without --session, its own serve state).",
)
@click.argument("upstream", nargs=-1, type=click.UNPROCESSED)
@click.pass_obj
def mcp_proxy(
    state: State,
    state_db: str | None,
    session: str | None,
    timeout: float,
    url: str | None,
    listen: str | None,
    upstream: tuple[str, ...],
) -> None:
    """Serve MCP on stdio in front of the MCP server COMMAND ARGS...: tools are listed as it lists
    them (plus an optional `refresh` argument), and a result the model already has, unchanged, is
    sent as a one-line {path, etag, unchanged} marker instead of in full.

    \b
    Example:
      compactkit mcp-proxy -- npx -y @modelcontextprotocol/server-filesystem ~/src
      compactkit mcp-proxy --state ~/.cache/ck.db --session s1 -- uvx mcp-server-git
      compactkit mcp-proxy --url https://mcp.example.com/mcp
      compactkit mcp-proxy --http 127.0.0.1:8931 -- uvx mcp-server-git
    """
    try:
        import anyio

        from ..serve.mcp_proxy import ProxyConfig, run_proxy
    except ImportError as exc:
        raise ConfigError(
            f"mcp-proxy needs the MCP SDK ({exc.name} is missing): pip install 'compactkit[mcp]'"
        ) from exc
    from ..serve.store import MemoryServeStore, ServeStore, SqliteServeStore

    command_line = list(upstream[1:] if upstream[:1] == ("--",) else upstream)
    if bool(command_line) == bool(url):
        raise ConfigError(
            "mcp-proxy needs the upstream server's command after --, or --url (one of them)"
        )
    if url is not None and not url.startswith(("http://", "https://")):
        raise ConfigError(f"--url {url!r}: not an http:// or https:// URL")
    host, port = _listen(listen) if listen else ("", 0)
    from ..serve.redis_store import RedisServeStore, is_redis

    store: ServeStore = MemoryServeStore()
    if is_redis(state_db):
        store = RedisServeStore(str(state_db))
    elif state_db:
        store = SqliteServeStore(state_db)
    # Claude Code (2.1.154+) gives a stdio MCP server its session id: the id the gateway names a
    # conversation by (`metadata.user_id`), so a shared --state follows the same conversation
    named = (
        session or os.environ.get("COMPACTKIT_SESSION") or os.environ.get("CLAUDE_CODE_SESSION_ID")
    )
    config = ProxyConfig(
        command=command_line[0] if command_line else "",
        args=command_line[1:],
        store=store,
        session=named or uuid.uuid4().hex,
        timeout=timeout,
        url=url,
    )
    if listen:
        from ..serve.mcp_http import serve_http

        anyio.run(lambda: serve_http(config, host, port, shared_session=named))
        return
    anyio.run(run_proxy, config)


def _listen(value: str) -> tuple[str, int]:
    host, _, port = value.rpartition(":")
    if not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise ConfigError(f"--http {value!r}: expected HOST:PORT, e.g. 127.0.0.1:8931")
    return host.strip("[]"), int(port)
