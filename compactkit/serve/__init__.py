"""Stateful compact serving: a tool server remembers what it served in a session and answers a
repeat with a `{path, etag, unchanged}` marker (`ServeState`), kept in memory or SQLite; the MCP
proxy (`compactkit mcp-proxy`, `compactkit.serve.mcp_proxy`, needs `compactkit[mcp]`) puts it in
front of any MCP server, and `serve_tools(server)` puts it inside a Python MCP server on the
official SDK; `compactkit.serve.reset` makes a compaction elsewhere (the gateway, a `Session`, the
LangChain middleware) forget what it took from the model."""

from __future__ import annotations

from .mcp_tools import ServeMiddleware, serve_tools
from .reset import ServedSession, held_etags, lost_etags, served_session
from .state import (
    SERVE_STATE_TAG,
    Served,
    ServedField,
    ServedPayload,
    ServeState,
    serve_key,
    text_etag,
)
from .store import MemoryServeStore, ServeStore, SqliteServeStore, observer

__all__ = [
    "SERVE_STATE_TAG",
    "MemoryServeStore",
    "ServeMiddleware",
    "ServeState",
    "ServeStore",
    "Served",
    "ServedField",
    "ServedPayload",
    "ServedSession",
    "SqliteServeStore",
    "held_etags",
    "lost_etags",
    "observer",
    "serve_key",
    "serve_tools",
    "served_session",
    "text_etag",
]
