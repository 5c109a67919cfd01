"""MCP tool results through a serve state, on the wire (JSON-RPC params and results as dicts): what
`compactkit mcp-proxy` does between a client and a server, and what `serve_tools(server)` does
inside a Python MCP server built on the official SDK (`MCPServer`, formerly FastMCP, or the
low-level `Server`).

A `tools/list` answer gets an optional `refresh` boolean argument on each tool (a tool that already
takes `refresh` keeps its own). A `tools/call` loses `refresh` and the `compactkit/known` and
`compactkit/skip` `_meta` keys before the tool sees it; its answer, when it is one text part and
not an error, is served: full the first time, a marker while unchanged, the changed fields of a JSON
object. A tool with an `outputSchema` keeps it: in its result's `structuredContent`, the fields
that held the text hold the marker instead (`{"content": TEXT}` -> `{"content": MARKER}`), or a
structured content the text is the JSON of becomes the marker object, where that conforms to the
schema; the result goes in full otherwise.
"""

from __future__ import annotations

import json
import sys
import uuid
import weakref
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, replace
from typing import Any

from ..context import CollapsedBlock, marker_text
from ..errors import CompactkitError
from .state import serve_key
from .store import MemoryServeStore, ServeStore

REFRESH = "refresh"
REFRESH_SCHEMA: dict[str, Any] = {
    "type": "boolean",
    "default": False,
    "description": "Send the full result even if it is unchanged since an earlier call. Use it "
    "when a result says unchanged but you no longer have that earlier result.",
}
AGAIN = "call again with refresh=true for the full content"
META_KNOWN = "compactkit/known"
META_SKIP = "compactkit/skip"
META_SERVE = "compactkit/serve"
COMPACTED = "notifications/compactkit/compacted"


class BadMeta(ValueError):
    """A compactkit `_meta` key, or the `refresh` argument, whose value is not what it must be
    (invalid params)."""


_REFRESH_WORDS = {"true": True, "1": True, "false": False, "0": False}


def _refresh(value: Any) -> bool:
    """The `refresh` argument as a boolean: true or false (also as the strings "true", "false",
    "1", "0", any case, or the numbers 1 and 0, as models write them; null is false). Anything
    else raises `BadMeta` rather than guess: `"false"` taken as true would resend in full."""
    if value is None or isinstance(value, bool):
        return bool(value)
    if isinstance(value, int | float) and value in (0, 1):
        return bool(value)
    if isinstance(value, str) and value.strip().lower() in _REFRESH_WORDS:
        return _REFRESH_WORDS[value.strip().lower()]
    raise BadMeta(f"argument {REFRESH!r} must be true or false, not {json.dumps(value)[:80]}")


@dataclass
class ToolCall:
    """What the answer to a tools/call needs to be served."""

    tool: str
    session: str
    key: str
    path: str | None
    refresh: bool
    known: list[str]
    skip: bool | list[str]
    superseded: bool = False
    """A later call of the same key came before this one's answer: the client gave up waiting
    (a timeout without a cancellation), so this answer is sent but not recorded as held."""


def _meta_list(meta: dict[str, Any], name: str) -> list[str] | None:
    value = meta.pop(name, None)
    if value is None:
        return None
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise BadMeta(f"_meta[{name!r}] must be a list of strings, not {json.dumps(value)[:80]}")
    return value


def _log(line: str) -> None:
    print(f"compactkit serve: {line}", file=sys.stderr)


class ToolServing:
    """The serve state's side of MCP tool calls, on wire dicts, for one store."""

    def __init__(self, store: ServeStore) -> None:
        self.store = store
        self.own_refresh: set[str] = set()  # tools that already take a `refresh`
        self.output_schemas: dict[str, Any] = {}  # tool -> compiled validator of its schema

    def call(
        self, params: Mapping[str, Any], session: str
    ) -> tuple[dict[str, Any], ToolCall] | None:
        """A tools/call's params with `refresh` and compactkit's `_meta` keys taken out, and what
        its answer needs; None for a malformed call (the tool answers it as it sees fit).
        Raises `BadMeta` for a compactkit `_meta` value of the wrong shape, or a `refresh` that
        is neither true nor false."""
        params = dict(params)
        name = params.get("name")
        arguments = params.get("arguments")
        if not isinstance(name, str) or not isinstance(arguments, dict | None):
            return None
        arguments = dict(arguments or {})
        refresh = False
        if name not in self.own_refresh and REFRESH in arguments:
            refresh = _refresh(arguments.pop(REFRESH))
            params["arguments"] = arguments
        meta = params.get("_meta")
        known: list[str] | None = None
        skip: bool | list[str] | None = None
        if isinstance(meta, dict) and (META_KNOWN in meta or META_SKIP in meta):
            meta = dict(meta)
            known = _meta_list(meta, META_KNOWN)
            skip = meta.get(META_SKIP)
            if not isinstance(skip, bool):
                skip = _meta_list(meta, META_SKIP)
            meta.pop(META_SKIP, None)
            if meta:
                params["_meta"] = meta
            else:
                del params["_meta"]
        key, path = serve_key(name, arguments)
        return params, ToolCall(name, session, key, path, refresh, known or [], skip or False)

    def tools(self, result: Mapping[str, Any]) -> dict[str, Any]:
        """A tools/list answer with `refresh` on every tool (output schemas kept and noted)."""
        tools = []
        for tool in result["tools"]:
            schema = dict(tool.get("inputSchema") or {})
            props = dict(schema.get("properties") or {})
            if REFRESH in props:
                self.own_refresh.add(tool["name"])
            else:
                props[REFRESH] = REFRESH_SCHEMA
            schema["properties"] = props
            output = tool.get("outputSchema")
            if isinstance(output, dict):
                self.output_schemas[tool["name"]] = _validator(output)
            tools.append({**tool, "inputSchema": schema})
        return {**result, "tools": tools}

    def compacted(self, params: Mapping[str, Any] | None, session: str) -> None:
        """A `notifications/compactkit/compacted`: forget its etags (none given: everything)."""
        etags = (params or {}).get("etags")
        gone = [str(e) for e in etags] if isinstance(etags, list) else None
        self.guarded(lambda: self.store.reset(session, gone))

    def guarded(self, operation: Callable[[], Any]) -> Any:
        """A serve-state operation; a state that cannot be read or written (a damaged state
        file) is reported on stderr and the call is served in full."""
        try:
            return operation()
        except CompactkitError as exc:
            _log(str(exc))
            return None

    def answer(
        self, result: Mapping[str, Any], call: ToolCall, *, now: bool = False
    ) -> tuple[dict[str, Any], Callable[[], Any] | None]:
        """A tools/call answer passed through the serve state (as it came when it is an error or
        not one text part), and what records it as served once it is sent (`now`: recorded
        already, by the one serve that computes it)."""
        content = result.get("content")
        if (
            result.get("isError")
            or not isinstance(content, list)
            or len(content) != 1
            or not isinstance(content[0], dict)
            or content[0].get("type") != "text"
            or not isinstance(content[0].get("text"), str)
        ):
            return dict(result), None
        store, text = self.store, content[0]["text"]
        options: dict[str, Any] = {
            "path": call.path,
            "refresh": call.refresh,
            "known": call.known,
            "skip": call.skip,
            "again": AGAIN,
        }
        recorded = now and not call.superseded
        first = store.serve if recorded else store.peek
        served = self.guarded(lambda: first(call.session, call.key, text, **options))
        if served is None:
            return dict(result), None
        structured: Any = None
        if "structuredContent" in result and not served.full:
            structured = self._structured(call.tool, result["structuredContent"], text, served)
            if structured is None:  # no marker the tool's schema allows: the result in full
                options["refresh"] = True
                again = store.serve if recorded else store.peek
                served = self.guarded(lambda: again(call.session, call.key, text, **options))
                if served is None:
                    return dict(result), None
        record = None
        if not (call.superseded or recorded):
            peeked = served

            def record() -> None:  # the peeked serve, unless another came in between
                if not store.keep(call.session, call.key, peeked):
                    store.serve(call.session, call.key, text, **options)

        note: dict[str, Any] = {"etag": served.etag, "full": served.full, "call": served.call}
        if served.fields:
            note["fields"] = dict(served.fields)
        meta = {**(result.get("_meta") or {}), META_SERVE: note}
        if served.full:
            return {**result, "_meta": meta}, record
        parts = [{**content[0], "text": served.text}] if served.parts else []
        # what else the result holds stays (a 2026-07-28 result's `resultType`: a client of that
        # protocol refuses a result without it)
        out: dict[str, Any] = {k: v for k, v in result.items() if k != "structuredContent"}
        out |= {"content": parts, "isError": False, "_meta": meta}
        if structured is not None:
            out["structuredContent"] = structured
        return out, record

    def _structured(self, tool: str, structured: Any, text: str, served: Any) -> Any:
        """The structured content that goes with a served (not full) text: the fields that held
        the text hold what is sent instead (`{"content": TEXT}` -> `{"content": MARKER}`), or,
        for a text that is the JSON of the structured content, the marker object; None when that
        does not conform to the tool's output schema (or the schema is unknown and the shape
        would change)."""
        check = self.output_schemas.get(tool)
        if isinstance(structured, dict):
            held = [k for k, v in structured.items() if v == text]
            if held:
                out = {**structured, **dict.fromkeys(held, served.text)}
                return out if check is None or check(out) else None
        marker = served.parts[0] if len(served.parts) == 1 else None
        if check is None or not isinstance(marker, CollapsedBlock):
            return None
        out = json.loads(marker_text(marker))
        return out if check(out) else None


def _validator(schema: dict[str, Any]) -> Callable[[Any], bool]:
    """Whether a value conforms to a JSON schema (a schema that cannot be read allows nothing)."""
    try:
        from jsonschema.validators import validator_for  # type: ignore[import-untyped]

        checker = validator_for(schema)(schema)
    except Exception:  # an unreadable schema: never a marker for that tool
        return lambda value: False
    return lambda value: bool(checker.is_valid(value))


# --------------------------------------------------------------------------- inside a server

Handler = Callable[[Any], Awaitable[Any]]


class ServeMiddleware:
    """`Server.middleware` of the official SDK that serves tool results through a store.

    `session` names the serve-state session; by default each client connection is one."""

    def __init__(self, store: ServeStore | None = None, session: str | None = None) -> None:
        self.serving = ToolServing(store if store is not None else MemoryServeStore())
        self.session = session
        self._sessions: weakref.WeakKeyDictionary[Any, str] = weakref.WeakKeyDictionary()
        self._pending: dict[tuple[str, str], ToolCall] = {}  # (session, key) -> call in flight

    def _session(self, ctx: Any) -> str:
        """The configured session, else one per client connection (its MCP session id over
        streamable HTTP)."""
        if self.session is not None:
            return self.session
        # the SDK makes a ServerSession per request, over the one Connection of its client
        connection = getattr(ctx.session, "_connection", None) or ctx.session
        name = self._sessions.get(connection)
        if name is None:
            name = getattr(connection, "session_id", None) or uuid.uuid4().hex
            self._sessions[connection] = name
        return name

    async def __call__(self, ctx: Any, call_next: Handler) -> Any:
        method = ctx.method
        if method == COMPACTED:
            self.serving.compacted(ctx.params, self._session(ctx))
            return None
        if method == "tools/list":
            result = await call_next(ctx)
            return self.serving.tools(result) if isinstance(result, Mapping) else result
        if method != "tools/call" or ctx.params is None:
            return await call_next(ctx)
        try:
            taken = self.serving.call(ctx.params, self._session(ctx))
        except BadMeta as exc:
            from mcp.shared.exceptions import MCPError
            from mcp.types import INVALID_PARAMS

            raise MCPError(code=INVALID_PARAMS, message=f"tools/call: {exc}") from None
        if taken is None:
            return await call_next(ctx)
        params, call = taken
        # a later call of the same key in the same session supersedes this one; another
        # session's call of it is no concern of this session's state
        pending = (call.session, call.key)
        earlier = self._pending.get(pending)
        if earlier is not None:
            earlier.superseded = True
        self._pending[pending] = call
        try:  # the context is rebuilt only when compactkit's own keys were taken out
            result = await call_next(ctx if params == ctx.params else replace(ctx, params=params))
        finally:
            if self._pending.get(pending) is call:
                del self._pending[pending]
        if not isinstance(result, Mapping):
            return result
        # recorded as it is computed: the answer leaves this process with the SDK's writer
        served, _ = self.serving.answer(result, call, now=True)
        return served


def serve_tools(server: Any, store: ServeStore | None = None, session: str | None = None) -> Any:
    """Serve the tool results of an MCP server on the official SDK (`MCPServer`, formerly
    FastMCP, or the low-level `Server`) through a serve state: one line after building it.

        server = serve_tools(MCPServer("files"))

    `store` keeps the states (default: in memory); `session` names one shared session (default:
    one per client connection). Returns the server."""
    lowlevel = getattr(server, "_lowlevel_server", server)
    middleware = getattr(lowlevel, "middleware", None)
    if not isinstance(middleware, list):
        raise TypeError(f"serve_tools needs an MCPServer or a low-level Server, not {server!r}")
    middleware.append(ServeMiddleware(store, session))
    return server
