"""The gateway's ASGI app: the three model APIs compacted per conversation, every other route
relayed as it is, `GET /compactkit/stats`.

Request headers (keys included) go upstream and nowhere else: no log line, error or figure
holds a header or any content of a request.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import hmac
import json
import logging
import socket
import sys
import threading
from collections import OrderedDict
from collections.abc import AsyncIterator, Callable, Coroutine, Sequence
from dataclasses import dataclass, field
from typing import Any

import anyio
import httpx
from starlette.applications import Starlette
from starlette.requests import Request as HttpRequest
from starlette.responses import HTMLResponse, JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from ..arrival import folded_savings
from ..context import AgentContext, Message
from ..defaults import DEFAULT_TRIGGER
from ..errors import redact
from ..formats.session_log import appended
from ..pipeline import PLUGIN_TIMEOUT, Pipeline
from ..policy import CompactionPolicy, Ledger, prefix_tokens
from ..policy import floor as policy_floor
from ..pricing import get_profile
from ..registry import Registry
from ..serve.redis_store import RedisServeStore
from ..serve.reset import held_etags
from ..serve.store import SqliteServeStore
from ..session import CompactionSetup
from ..tokens import DEFAULT_TOKENIZER
from . import page, recall, redis_state, summary, wire
from .body import Bodies
from .body import dumps as _dumps
from .conversations import Arrived, Conversation, Conversations, Usage
from .planner import Home, Planners
from .record import Recorder
from .sse import usage_of_body, usage_of_events

log = logging.getLogger("compactkit.gateway")

SESSION_HEADER = "x-compactkit-session"
_HOP_BY_HOP = frozenset(
    {
        "connection",
        "keep-alive",
        "proxy-authenticate",
        "proxy-authorization",
        "te",
        "trailer",
        "trailers",
        "transfer-encoding",
        "upgrade",
        "host",
        "content-length",
    }
)
_BLANK_LINES = (b"\n\n", b"\r\n\r\n", b"\r\r")
"""What ends an event of an event stream."""
_ROUTES: dict[str, wire.Api] = {
    "/v1/messages": "anthropic",
    "/v1/chat/completions": "openai-chat",
    "/v1/responses": "openai-responses",
}


@dataclass(frozen=True)
class GatewayConfig:
    """How the gateway runs (the `compactkit gateway` options)."""

    upstream_anthropic: str | None = "https://api.anthropic.com"
    upstream_openai: str | None = "https://api.openai.com"
    pipeline: str | Sequence[str] = "default"
    trigger: int = DEFAULT_TRIGGER
    target: int | None = None
    tokenizer: str = DEFAULT_TOKENIZER
    state: str | None = None
    """A sqlite file that keeps conversations across restarts, or a Redis database
    (`redis://HOST:PORT/N`) that gateways behind one balancer share (`redis_state`). It holds
    serve states too: a `compactkit mcp-proxy --state` on the same file or database forgets what
    the gateway's compactions take from the model of the same session
    (`compactkit.serve.reset`)."""
    record: str | None = None
    """A folder where each conversation is written, uncompacted, as a session log."""
    recall: bool = False
    pins: tuple[str, ...] = ()
    """User pin rules (`tool=TodoWrite`, `path=**/CLAUDE.md`, ... see `compactkit.pins`): what
    they name is never compacted."""
    max_conversations: int = 1000
    ttl: float = 24 * 3600
    timeout: float = 600.0
    """Seconds to wait for the upstream to connect or send the next bytes."""
    strategy_timeout: float = PLUGIN_TIMEOUT
    """Seconds a plugin strategy may run (in its worker process) before its compaction fails and
    the request goes upstream as the client sent it; 0: no limit, in-process."""
    pricing: tuple[str, ...] = ("anthropic", "openai")
    """The pricing profiles a compaction must pay for itself under (`compactkit.policy`)."""
    policy: str = "pays"
    """`pays` (keep a compaction only when it pays for itself) or `always` (whenever over the
    trigger)."""
    max_memory: int = 1024 * 1024 * 1024
    """Bytes the conversations held in memory (3/4), the recent bodies (1/8) and the token
    counter's memo of strings (1/8) may take (estimated: a conversation three times its last
    request, a body twice); least recently used let go, the memo started over."""
    max_body: int = 32 * 1024 * 1024
    """The largest request body taken (bytes); a larger one is answered 413."""
    read_timeout: float = 60.0
    """Seconds a client has to send its request body; a slower one is answered 408 (its request
    line and headers too when served with `compactkit.gateway.protocol.timed_protocol`, as the
    CLI serves)."""
    admin_token: str | None = None
    """A credential that sees every conversation in `/compactkit/stats` (others see their own)."""
    summarizer: str = "extractive"
    """Who writes the summary of a compaction: 'extractive' (the pipeline's own, offline),
    'upstream' (the agent's own model, asked in the background with the client's credentials:
    `compactkit.gateway.summary`), 'auto' (upstream for requests that carry a credential)."""
    workers: int = 4
    """Worker threads that read and plan requests: a conversation's requests one at a time,
    up to this many conversations at once (in each planner process when `processes`)."""
    processes: int = 0
    """Planner processes that read, plan and compact requests, each credential's in one
    (`compactkit.gateway.planner`): a client's compaction never holds another client's request
    in the gateway's process; 0: planned in the gateway's process."""


@dataclass
class Counters:
    requests: int = 0
    compacted_requests: int = 0
    passed_through: int = 0
    relayed: int = 0
    unreadable: int = 0
    failed: int = 0
    upstream_errors: int = 0
    recalls: int = 0
    refused: int = 0
    """Requests answered 413 (body over --max-body) or 408 (body too slow)."""
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def add(self, name: str) -> None:
        """One more `name` (from any thread)."""
        with self._lock:
            setattr(self, name, getattr(self, name) + 1)

    def figures(self) -> dict[str, int]:
        with self._lock:
            return {k: v for k, v in self.__dict__.items() if not k.startswith("_")}


@dataclass
class _Read:
    """A request read: whether its answer is relayed as a stream, and its plan when it has no
    conversation (the body as it came), else what planning it needs."""

    stream: bool
    parsed: Any = None
    key: str = ""
    session: str | None = None
    owner: str = ""
    plan: Plan | None = None


@dataclass
class _Held:
    lock: anyio.Lock = field(default_factory=anyio.Lock)
    users: int = 0


@dataclass
class Plan:
    """What to send for one API request: the body, and the conversation it counts for."""

    body: bytes
    conversation: Conversation | None = None
    recall: dict[str, Any] | None = None
    """The body as JSON when it offers `compactkit_recall` (the gateway answers the tool)."""
    store: dict[str, str] | None = None
    """What the recall tool answers from: the conversation's own removed content."""
    prepare: summary.Prepared | None = None
    """A summary to prepare in the background from this request's prompt (`body`), and the
    compaction of it."""
    compact_only: bool = False
    """Only the compaction of this request's prompt (the summary is asked for already)."""
    prompt: AgentContext | None = None
    """The context `body` holds (what a summary prepared from it covers)."""
    home: Home | None = None
    """Where the conversation lives when a planner process planned it (`conversation`: None)."""


@dataclass
class _Counted:
    """The messages of the last context counted and their tokens (without the preamble)."""

    messages: tuple[Message, ...] = ()
    tokens: int = 0


@dataclass
class _Tally:
    """What a conversation counted last (memory only): the client's context, the history."""

    client: _Counted = field(default_factory=_Counted)
    history: _Counted = field(default_factory=_Counted)
    given: _Counted = field(default_factory=_Counted)
    """The history before the arrival stage (the base and the messages after it, as sent)."""
    sent: _Counted = field(default_factory=_Counted)
    """The messages of the last prompt sent and their tokens."""


SWITCH_INTERVAL = 0.0005
"""Seconds between the interpreter's thread switches while the gateway serves."""
INLINE_BYTES = 16 * 1024
"""Bodies up to this size (and the trigger) are planned on the event loop, not in a worker."""
MAX_BRANCHES = 8
"""Conversations held of one shape with no session id (runs of one prompt under one key)."""


class Policy:
    """The persistent policy over conversations (thread-safe per conversation: the app holds a
    lock per conversation while it plans)."""

    def __init__(
        self, config: GatewayConfig, registry: Registry | None = None, *, incremental: bool = True
    ) -> None:
        """`incremental=False` reads, counts and writes every request whole: the reference the
        gateway's tests hold the incremental work to (the same bytes upstream, the same figures)."""
        setup = CompactionSetup.of(
            "gateway", config.pipeline, config.trigger, config.target, config.tokenizer, registry
        )
        self.config = config
        self.incremental = incremental
        self.trigger = config.trigger
        self.target = setup.target
        self.rules = CompactionPolicy.of(
            config.trigger,
            target=setup.target,
            pricing=config.pricing,
            mode="always" if config.policy == "always" else "pays",
        )
        """When a compaction is kept (`compactkit.policy`): the bench's persistent policy."""
        built = setup.pipeline
        self.pipeline = Pipeline(  # a plugin that never returns must not hold every request
            built.strategies,
            tokenizer=built.tokenizer,
            check=built.check,
            registry=built.registry,
            name=built.title,
            timeout=config.strategy_timeout or None,
            pins=(*built.pins, *config.pins),
            arrival=built.arrival,
        )
        self.counter = setup.counter
        # the strings the counter remembers: each distinct request's text, bounded in bytes too
        self.counter.max_bytes = config.max_memory // 8
        backends = {getattr(getattr(s, "options", None), "backend", None) for s in built.strategies}
        self.summarizer = "+".join(sorted(b for b in backends if isinstance(b, str))) or "none"
        if config.summarizer != "extractive" and self.summarizer != "none":
            self.summarizer = f"{config.summarizer} (fallback {self.summarizer})"
        """The summarizer backends of the pipeline's strategies ('none': no summary written)."""
        self.recorder = Recorder(config.record) if config.record else None
        shared = redis_state.is_redis(config.state)
        limits: dict[str, Any] = {
            "limit": config.max_conversations,
            "ttl": config.ttl,
            "dropped": self._dropped,
            "max_bytes": config.max_memory - 2 * (config.max_memory // 8),
        }
        self.conversations = (
            redis_state.RedisConversations(str(config.state), **limits)
            if shared
            else Conversations(path=config.state, **limits)
        )
        self._branches: dict[str, list[str]] = {}
        """The conversations of each shape (`conversation_id`) with no session id, by key."""
        self._made: dict[str, int] = {}
        """How many conversations were started of each of those shapes."""
        self._branches_lock = threading.Lock()
        self.served: SqliteServeStore | RedisServeStore | None = None
        if config.state:
            self.served = (
                RedisServeStore(config.state)
                if shared
                else SqliteServeStore(config.state, timeout=1.0)
            )
        """The serve states of tool servers sharing `--state`, by session name."""
        self._sessions: OrderedDict[str, str] = OrderedDict()
        """Which credential (its tag) owns each session name (least recently used first)."""
        self._sessions_lock = threading.Lock()
        self.owns: Callable[[str, str], bool] = self._owns
        """Whether a credential may reset a session's serve state (a planner process asks the
        gateway's, which sees every credential)."""
        self.bodies = Bodies(max_bytes=config.max_memory // 8)
        """The last request bodies parsed (`parse`), whose text the next ones mostly repeat."""

    def plan(
        self,
        api: wire.Api,
        parsed: Any,
        key: str,
        raw: bytes,
        session: str | None = None,
        owner: str = "",
    ) -> Plan:
        """The body to send for the request `parsed` (`raw` as it came): `raw` itself below
        the trigger, else the compacted base plus what is new. Raises `wire.Unreadable`.
        `session` names the serve state that forgets what the model no longer holds (the
        first credential to name a session, `owner`, is the only one whose requests reset it)."""
        if not session:  # no session id tells runs apart: the history does
            key = self._branch(key, api, parsed)
        conv = self.conversations.get(key)
        conv.owner = owner
        if conv.reader is None or conv.reader.api != api:
            conv.reader = wire.Reader(api, incremental=self.incremental)
            conv.tally = _Tally()
        arrived, conv.arrived = conv.arrived, None  # set again once this request is planned
        request = conv.reader.read(parsed)
        conv.requests += 1
        if self.recorder is not None:
            self.recorder.record(key, request.context)
        counter = self.counter
        client = request.context
        tally: _Tally = conv.tally
        client_tokens = self._tokens(client, tally.client)
        conv.tokens_client += client_tokens
        history, new = self._on_base(conv, request)
        unfolded = 0  # what arrival took off the history: it puts no compaction off
        if self.pipeline.arrival:
            sent = history
            history = self._arrival(conv, request, history, new, arrived)
            if new is not None and conv.base is not None:  # what the base kept of the folds
                unfolded = folded_savings(conv.base, self.counter)
            if history is not sent:
                sizes = client_tokens if sent is client else self._tokens(sent, tally.given)
                unfolded += max(0, sizes - self._tokens(history, tally.history))
        tokens = client_tokens if history is client else self._tokens(history, tally.history)
        uncompacted = history
        ledger = self._ledger(conv, client)
        upstream = self._upstream_summary(owner)
        history = self._compact(conv, request, history, tokens, client_tokens, upstream, unfolded)
        compacted = history is not uncompacted
        if compacted:
            tokens = self._tokens(history, tally.history)
            unfolded = folded_savings(history, self.counter) if self.pipeline.arrival else 0
        background = self._preparation(conv, history, tokens + unfolded, upstream, compacted)
        if session and self.owns(session, owner):
            self._forget(session, conv.last_prompt, uncompacted, history)
        cached = self._prefix(conv.last_prompt, history, tally)
        tally.sent = _Counted(history.messages, tokens - counter.preamble(history))
        ledger.record(tokens, cached, raw=client_tokens, compacted=compacted)
        conv.tokens_sent += tokens
        conv.cached_tokens += cached
        conv.last_prompt = history
        # what it holds: the client's items (read), the base and the last prompt, about 3x
        self.conversations.sized(conv, 3 * len(raw))
        if self.pipeline.arrival:
            conv.arrived = Arrived(history, len(request.items), conv.base)
        if history is client:
            conv.passed_through += 1
            self.conversations.save(conv)
            return Plan(raw, conv, **background)
        body = wire.write(request, history)
        self.conversations.save(conv)
        etags = recall.offered_etags(history) if self.config.recall else []
        etags = [(etag, label) for etag, label in etags if etag in history.recovery]
        if not etags:
            return Plan(self._dumps(body, request.body), conv, **background)
        given = body.get("tools")
        tools: list[Any] = given if isinstance(given, list) else []
        body["tools"] = [*tools, recall.tool_definition(request.api, etags)]
        store = dict(history.recovery)
        return Plan(self._dumps(body, request.body), conv, recall=body, store=store)

    @staticmethod
    def _on_base(
        conv: Conversation, request: wire.Request
    ) -> tuple[AgentContext, tuple[Message, ...] | None]:
        """The history of `request`: the compacted base plus the messages after it (returned
        too) while the client's history still extends what the base stands for, else the
        client's own context (the base dropped)."""
        stands = conv.base is not None and conv.base_items <= len(request.items)
        if stands and (
            (conv.reader.extended and conv.base_read)
            or request.digest(conv.base_items) == conv.base_digest
        ):
            new = request.messages_from(conv.base_items)
            if new is not None and conv.base is not None:
                conv.base_read = True
                return appended(conv.base, new), new
        conv.base = None  # first request, or the client rewrote what the base stands for
        conv.base_read = False
        return request.context, None

    def _arrival(
        self,
        conv: Conversation,
        request: wire.Request,
        history: AgentContext,
        new: tuple[Message, ...] | None,
        arrived: Arrived | None,
    ) -> AgentContext:
        """`history` with each message the client added since the last request passed through
        the arrival stage once (`Pipeline.arrive`): appended to what the last request was sent
        as when this request extends it, else to the compacted base (`new`: what came after
        it), else from the first message. Arrival is a pure function of a message and what came
        before it, so what it folded is folded the same way again (the prompt stays byte-stable)
        when the conversation is read anew, after a restart or on another replica. The client's
        own `history` while arrival has folded nothing of the conversation (sent as it came)."""
        client = request.context
        start: AgentContext | None = None
        if (
            arrived is not None
            and arrived.base is conv.base
            and conv.reader.extended
            and arrived.items <= len(request.items)
        ):
            since = request.messages_from(arrived.items)
            if since is not None:
                start, new = arrived.context, since
        if start is None or new is None:
            if history is client or new is None or conv.base is None:
                start, new = client.replace(messages=()), client.messages
            else:
                start = conv.base
        out = self.pipeline.arrive(start, new)
        grown = out.messages[len(start.messages) :]
        conv.folded = conv.folded or any(a is not b for a, b in zip(grown, new, strict=True))
        return out if conv.folded or history is not client else client

    def _compact(
        self,
        conv: Conversation,
        request: wire.Request,
        history: AgentContext,
        tokens: int,
        client_tokens: int,
        upstream: bool,
        unfolded: int = 0,
    ) -> AgentContext:
        """`history` compacted when the policy says a compaction is due and keeps it (with the
        agent's own model's summary swapped in when `upstream`), else `history` itself.
        `unfolded`: what arrival took off the messages since the base, which does not put a
        compaction off (`compactkit.policy`)."""
        ledger: Ledger = conv.ledger
        if not ledger.due(tokens + unfolded):
            return history
        spliced = self._prepared(conv, history) if upstream else None
        fits = spliced is not None and self.counter.context(spliced) <= self.target
        if not fits and upstream and self._deferred(conv, history, tokens + unfolded):
            return history  # compacted by a later request, off this one's path
        if spliced is not None and not fits:  # the pipeline on less than the whole history
            after = self.pipeline.run(spliced, self.counter).context
        elif spliced is not None:
            after = spliced
        else:
            result = self.pipeline.run(history, self.counter)
            if result.context is history:
                ledger.unchanged(tokens)
                return history
            after = result.context
        by, why = self.summarizer, ""
        if upstream:
            after, why = summary.swap(
                history,
                after,
                conv.prepared,
                self.counter,
                target=self.target,
                pins=self.pipeline.pins,
            )
        if not self._pays(ledger, conv, history, after, tokens, client_tokens):
            return history
        if upstream:
            by = self._summary_used(conv, why)
        self._compacted(conv, request, history, after, tokens, by)
        return after

    def _preparation(
        self,
        conv: Conversation,
        history: AgentContext,
        tokens: int,
        upstream: bool,
        compacted: bool,
    ) -> dict[str, Any]:
        """What the plan of a request sending `history` starts in the background
        (`Gateway._prepare`): a preparation (the summary and the compaction of `history`) when
        the conversation passes `summary.SHARE` of the trigger with none, before it is needed;
        the compaction alone when `_deferred` asked for one; else nothing."""
        prepare, compact_only = None, False
        ready_soon = tokens >= summary.SHARE * self.trigger
        if upstream and ready_soon and not compacted and conv.prepared is None:
            prepare = conv.prepared = summary.Prepared(history.messages, over=history.messages)
        elif conv.prepared is not None and conv.prepared.wanted:
            prepare, compact_only = conv.prepared, True
            prepare.wanted = False
        return {"prepare": prepare, "compact_only": compact_only, "prompt": history}

    def _prepared(self, conv: Conversation, history: AgentContext) -> AgentContext | None:
        """The compaction made in the background (`Gateway._prepare`) of the prompt `history`
        begins with, followed by the messages since, as they are; None when there is none."""
        prepared: summary.Prepared | None = conv.prepared
        compacted = prepared.compacted if prepared is not None else None
        if (
            prepared is None
            or compacted is None
            or compacted.system_instruction != history.system_instruction
            or compacted.activated_skills != history.activated_skills
            or not summary.begins(history.messages, prepared.over)
        ):
            return None
        return appended(compacted, history.messages[len(prepared.over) :])

    def _deferred(self, conv: Conversation, history: AgentContext, tokens: int) -> bool:
        """Whether a compaction due now is left to a later request, made meanwhile in the
        background: one being made, or about to be (a preparation starts with this request
        when none has, and when the one made no longer fits, one of `history` is asked for)."""
        prepared: summary.Prepared | None = conv.prepared
        if tokens > summary.DEFERRAL * self.trigger:
            return False
        if prepared is not None and prepared.settled:
            prepared.over, prepared.compacted = history.messages, None
            prepared.settled, prepared.wanted = False, True
        return True

    def _ledger(self, conv: Conversation, client: AgentContext) -> Ledger:
        """The conversation's ledger, told the model's answer to the last request (the
        assistant messages the client added since: its output)."""
        ledger: Ledger | None = conv.ledger
        if ledger is None:
            ledger = conv.ledger = self.rules.ledger()
        elif ledger.calls and len(client.messages) >= conv.answered:
            answers = [m for m in client.messages[conv.answered :] if m.role == "assistant"]
            ledger.output(sum(self.counter.messages(answers)) if answers else 0)
        conv.answered = len(client.messages)
        return ledger

    def _pays(
        self,
        ledger: Ledger,
        conv: Conversation,
        before: AgentContext,
        after: AgentContext,
        tokens: int,
        client_tokens: int,
    ) -> bool:
        """Whether the policy keeps the compaction of `before` (`tokens`) into `after`."""
        counter = self.counter
        held = ledger.judge(
            tokens,
            prefix_tokens(conv.last_prompt, before, counter),
            counter.context(after),
            prefix_tokens(conv.last_prompt, after, counter),
            raw=client_tokens,
            floor=policy_floor(after, counter),
        )
        return held is None

    def _upstream_summary(self, owner: str) -> bool:
        """Whether the agent's own model writes the summaries of a request of `owner`."""
        mode = self.config.summarizer
        return mode == "upstream" or (mode == "auto" and bool(owner))

    @staticmethod
    def _summary_used(conv: Conversation, why: str) -> str:
        """Count the summary a compaction of `conv` used (`why` not the model's; '': its), and
        name it with its cost for the log line."""
        prepared, conv.prepared = conv.prepared, None  # the next compaction gets its own
        if why:
            conv.summary_fallbacks += 1
            log.info("upstream summary not used (%s): the extractive one instead", why)
            return "extractive (fallback)"
        conv.summaries_used += 1
        usage = prepared.usage
        prompt, output = page.paid(usage, page.profile_of(conv.key))
        verbatim, summarized = prepared.spliced
        later = (
            f", then {verbatim} later messages verbatim"
            if verbatim
            else f", then {summarized} later messages summarized extractively"
            if summarized
            else ""
        )
        return (
            f"upstream ({prompt + output:.4f} USD: {usage.cache_read_tokens} of "
            f"{usage.input_tokens + usage.cache_read_tokens + usage.cache_write_tokens} prompt "
            f"tokens read from cache{later})"
        )

    def conversation_id(self, api: wire.Api, parsed: Any, header: str | None, owner: str) -> str:
        """The conversation a request of the credential tagged `owner` belongs to: its shape
        (`wire.conversation_key`) under that credential, as a salted hash. Raises
        `wire.Unreadable`."""
        shape = wire.conversation_key(api, parsed, header)
        return f"{api}:{self.conversations.tag(owner + chr(10) + shape)}"

    def credential(self, headers: Any) -> str:
        """The salted tag of a request's credential (its API key, however sent); the key itself
        stays in the request."""
        key = api_key(headers)
        return self.conversations.tag("credential\n" + key) if key else ""

    def parse(self, raw: bytes) -> Any | None:
        """`json.loads(raw)`, reusing what recent bodies held as the same text; None when `raw`
        is left to `json.loads` (call it then: it parses or raises as always)."""
        return self.bodies.loads(raw) if self.incremental else None

    def _dumps(self, body: dict[str, Any], source: dict[str, Any]) -> bytes:
        return self.bodies.dumps(body, source) if self.incremental else _dumps(body)

    def _tokens(self, ctx: AgentContext, last: _Counted) -> int:
        """`counter.context(ctx)`, counting only the messages after those `last` counted when
        `ctx` continues them (then `last` holds `ctx`'s)."""
        if not self.incremental:
            return self.counter.context(ctx)
        messages, known = ctx.messages, last.messages
        if known and len(known) <= len(messages) and known == messages[: len(known)]:
            tokens = last.tokens + sum(self.counter.messages(messages[len(known) :]))
        else:
            tokens = sum(self.counter.messages(messages))
        last.messages, last.tokens = messages, tokens
        return self.counter.preamble(ctx) + tokens

    def _prefix(self, last: AgentContext | None, ctx: AgentContext, tally: _Tally) -> int:
        """`prefix_tokens(last, ctx)`, with no message counted again when `ctx` begins with the
        very messages of `last` (the prompt `tally.sent` counted)."""
        sent = tally.sent.messages
        if (
            self.incremental
            and last is not None
            and last.messages is sent
            and len(sent) <= len(ctx.messages)
            and last.system_instruction == ctx.system_instruction
            and last.activated_skills == ctx.activated_skills
            and sent == ctx.messages[: len(sent)]
        ):
            return self.counter.preamble(ctx) + tally.sent.tokens
        return prefix_tokens(last, ctx, self.counter)

    def _branch(self, shape: str, api: wire.Api, parsed: Any) -> str:
        """Which conversation of `shape` a request joins: the one whose history (the client's
        raw items of its last request) it extends, the longest if several; none, a new one (the
        first is `shape` itself, so a state file resumes it). Two runs of one prompt under one
        key are then two conversations, and a request never joins one it diverges from."""
        items = wire.items_of(api, parsed)
        with self._branches_lock:
            keys = list(self._branches.setdefault(shape, [shape]))
        best, seen, length = None, False, -1
        for key in keys:
            conv = self.conversations.held(key)
            reader = conv.reader if conv is not None else None
            if reader is None or reader.api != api or not reader.items:
                continue
            seen = seen or key == shape
            if len(reader.items) > length and wire.extends(reader.items, items):
                best, length = key, len(reader.items)
        if best is not None:
            return best
        if not seen:
            return shape
        with self._branches_lock:
            branches = self._branches.setdefault(shape, [shape])
            made = self._made[shape] = self._made.get(shape, 0) + 1
            key = f"{shape}~{made}"
            branches.append(key)
            while len(branches) > MAX_BRANCHES:
                branches.pop(1)  # the oldest run after the first
        return key

    def _dropped(self, key: str) -> None:
        """Conversation `key` let go of: what else holds something of it lets go too."""
        if self.recorder is not None:
            self.recorder.forget(key)
        shape = key.split("~", 1)[0]
        with self._branches_lock:
            branches = self._branches.get(shape)
            if branches is not None and key in branches:
                branches.remove(key)
                if not branches:
                    del self._branches[shape]
                    self._made.pop(shape, None)

    def _owns(self, session: str, owner: str) -> bool:
        """Whether the credential tagged `owner` may reset serve state `session`: the first to
        name it (in this gateway's memory, as many as it holds conversations) owns it."""
        with self._sessions_lock:
            known = self._sessions.pop(session, owner)
            self._sessions[session] = known
            while len(self._sessions) > self.config.max_conversations:
                self._sessions.popitem(last=False)
        return known == owner

    def _forget(
        self,
        session: str | None,
        last: AgentContext | None,
        uncompacted: AgentContext,
        sent: AgentContext,
    ) -> None:
        """Reset, in the serve state of `session`, what the model no longer holds: what the
        last prompt sent or this request brought showed and the prompt sent now does not (a
        compaction here, the client's own, a rewind). A state that cannot be written raises:
        the request is then forwarded as the client sent it, which shows everything."""
        if self.served is None or not session:
            return
        shown = held_etags(uncompacted) | (held_etags(last) if last is not None else frozenset())
        lost = shown - held_etags(sent)
        if lost:
            self.served.reset(session, lost)

    def _compacted(
        self,
        conv: Conversation,
        request: wire.Request,
        before: AgentContext,
        after: AgentContext,
        tokens_before: int,
        by: str,
    ) -> None:
        conv.base = after
        conv.base_read = True
        conv.base_items = len(request.items)
        conv.base_digest = request.digest(len(request.items))
        conv.compactions += 1
        tokens_after = self.counter.context(after)
        profile = get_profile("anthropic" if request.api == "anthropic" else "openai")
        cached = prefix_tokens(conv.last_prompt, before, self.counter)
        saving = profile.cost(tokens_before, cached, 0) - profile.cost(tokens_after, 0, 0)
        kept = {id(m) for m in after.messages}  # a compaction keeps a message as the same object
        rewritten = sum(1 for m in before.messages if id(m) not in kept)
        log.info(
            "compacted conversation %s: %d -> %d tokens, %d of %d messages replaced, summary by "
            "%s (this call %+.4f USD under %s pricing, later calls save on %d tokens each)",
            conv.key[:24],
            tokens_before,
            tokens_after,
            rewritten,
            len(before.messages),
            by,
            -saving,
            profile.name,
            tokens_before - tokens_after,
        )


class Gateway:
    """The app's state: the policy, the upstream client, counters, per-conversation locks."""

    def __init__(self, config: GatewayConfig, registry: Registry | None = None) -> None:
        self.config = config
        self.policy = Policy(config, registry)
        self.counters = Counters()
        self._held: dict[str, _Held] = {}
        """The conversations being planned (or waiting to be): a lock each."""
        self._limiter = anyio.CapacityLimiter(config.workers)
        self._inline = not (config.state or config.record)
        self._client: httpx.AsyncClient | None = None
        self._tasks: set[asyncio.Task[None]] = set()
        """Summaries being prepared in the background."""
        make = functools.partial(type(self), registry=registry)
        self.planners = Planners(config, make, self.policy.owns) if config.processes else None
        """The planner processes (started with the app), when `processes`."""

    @property
    def client(self) -> httpx.AsyncClient:
        if self._client is None:
            timeout = httpx.Timeout(self.config.timeout, connect=min(self.config.timeout, 30.0))
            self._client = httpx.AsyncClient(timeout=timeout, follow_redirects=False)
        return self._client

    async def close(self) -> None:
        for task in list(self._tasks):
            task.cancel()
        if self.planners is not None:
            self.planners.close()
        if self._client is not None:
            await self._client.aclose()
            self._client = None
        self.policy.conversations.close()
        if self.policy.served is not None:
            self.policy.served.close()

    # ------------------------------------------------------------------ upstreams

    @staticmethod
    def provider(api: wire.Api | None, request: HttpRequest) -> wire.Api:
        """The API a request is for: its route's, else (a relayed route) Anthropic's when its
        path or headers are Anthropic's, else OpenAI's."""
        if api is not None:
            return api
        path = request.url.path
        wants_anthropic = path.startswith("/v1/messages") or (
            "anthropic-version" in request.headers or "x-api-key" in request.headers
        )
        return "anthropic" if wants_anthropic else "openai-chat"

    def upstream(self, api: wire.Api) -> str | None:
        """The upstream of `api`'s provider; None ('none'): nowhere, never the other one."""
        if api == "anthropic":
            return self.config.upstream_anthropic
        return self.config.upstream_openai

    def url(self, base: str, request: HttpRequest) -> str:
        base = base.rstrip("/")
        path = request.url.path
        if base.endswith("/v1") and path.startswith("/v1/"):
            path = path[3:]
        query = request.url.query
        return base + path + (f"?{query}" if query else "")

    # ------------------------------------------------------------------ handlers

    async def stats(self, request: HttpRequest) -> Response:
        """The figures of the caller's own conversations (those its credential sent), or of
        all with the `--admin-token` as its credential."""
        return JSONResponse(await self.figures(request))

    async def dashboard(self, request: HttpRequest) -> Response:
        """`stats` as a self-contained HTML page (`page.render`)."""
        return HTMLResponse(page.render(await self.figures(request)))

    async def figures(self, request: HttpRequest) -> dict[str, Any]:
        admin = self.config.admin_token
        given = api_key(request.headers)
        owner = None
        if not (admin and given and hmac.compare_digest(given.encode(), admin.encode())):
            owner = self.policy.credential(request.headers)
        parts = [self.own_figures(owner)]
        if self.planners is not None:
            parts += await self.planners.figures(owner)
        shown: dict[str, Any] = {}
        total, counters = Usage(), dict.fromkeys(parts[0]["counters"], 0)
        for part in parts:
            shown.update(part["conversations"])
            total.add(part["usage"])
            for name, value in part["counters"].items():
                counters[name] += value
        totals = {
            name: sum(c[name] for c in shown.values())
            for name in ("requests", "compactions", "failures", "tokens_saved")
        }
        for name in ("dollars_paid", "dollars_saved"):
            totals[name] = round(sum(c[name] for c in shown.values()), 6)
        return {
            "schema": "compactkit.gateway.stats/1",
            "trigger": self.policy.trigger,
            "target": self.policy.target,
            "pipeline": self.policy.pipeline.title,
            "summarizer": self.policy.summarizer,
            "counters": counters,
            "usage": total.__dict__,
            "tokens_client": sum(p["tokens_client"] for p in parts),
            "tokens_sent": sum(p["tokens_sent"] for p in parts),
            "totals": totals,
            "conversations": shown,
        }

    def own_figures(self, owner: str | None) -> dict[str, Any]:
        """The figures this process holds of the conversations of credential `owner` (None:
        everyone's), and its counters."""
        convs = self.policy.conversations.all()
        if owner is not None:
            convs = [c for c in convs if c.owner == owner]
        total = Usage()
        for conv in convs:
            total.add(conv.usage)
        return {
            "counters": self.counters.figures(),
            "usage": total,
            "tokens_client": sum(c.tokens_client for c in convs),
            "tokens_sent": sum(c.tokens_sent for c in convs),
            "conversations": {c.key: {**c.figures(), **page.savings(c)} for c in convs},
        }

    async def api(self, request: HttpRequest) -> Response:
        api = _ROUTES[request.url.path]
        raw = await self._body(request, api)
        if isinstance(raw, Response):
            return raw
        self.counters.add("requests")
        header = request.headers.get(SESSION_HEADER)
        owner = self.policy.credential(request.headers)
        if self.planners is not None:
            return await self._planned_apart(request, api, raw, header, owner)
        # reading and planning run in the worker pool, off the event loop; a conversation's
        # requests are planned one at a time, other conversations' beside them
        # a body too small to pass the trigger (a token is a byte at least) is read and planned
        # on the event loop when that touches no file: a trip to a worker thread costs more, and
        # more while a compaction holds the interpreter
        small = self.small(raw)
        if small:
            read = self._read(api, raw, header, owner)
        else:
            read = await anyio.to_thread.run_sync(
                self._read, api, raw, header, owner, limiter=self._limiter
            )
        plan = read.plan
        if plan is None:
            async with self._conversation(read.key):
                if small:
                    plan = self._planned(api, read, raw)
                else:
                    plan = await anyio.to_thread.run_sync(
                        self._planned, api, read, raw, limiter=self._limiter
                    )
        if plan.prepare is not None:
            self._background(self._prepare(request, api, plan))
        return await self.forward(request, api, plan, read.stream)

    def small(self, raw: bytes) -> bool:
        """Whether `raw` is too small to pass the trigger (a token is a byte at least) and its
        planning touches no file: it is read and planned where it arrives, not in a worker."""
        return self._inline and len(raw) <= min(self.policy.trigger, INLINE_BYTES)

    async def _planned_apart(
        self, request: HttpRequest, api: wire.Api, raw: bytes, header: str | None, owner: str
    ) -> Response:
        """`api` with the request read and planned in its credential's planner process; a
        planner that fails sends the request as it came."""
        assert self.planners is not None
        n, planned = await self.planners.plan(api, raw, header, owner)
        if planned is None:
            self._failed(TimeoutError("the planner process did not answer"))
            return await self.forward(request, api, Plan(raw), stream=True)
        home = Home(n, planned.key) if planned.key else None
        body = raw if planned.body is None else planned.body
        plan = Plan(body, recall=planned.recall, store=planned.store, home=home)
        if planned.summary is not None and home is not None:
            self._background(self._ask_for(request, api, home, planned.summary))
        return await self.forward(request, api, plan, planned.stream)

    def _background(self, work: Coroutine[Any, Any, None]) -> None:
        task = asyncio.get_running_loop().create_task(work)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _prepare(self, request: HttpRequest, api: wire.Api, plan: Plan) -> None:
        """Ask the upstream for the summary of `plan`'s prompt and compact the prompt (in the
        background, side by side); what comes of it, or why not, lands in `plan.prepare` for
        the compaction to come."""
        prepared, conv, prompt = plan.prepare, plan.conversation, plan.prompt
        assert prepared is not None and conv is not None and prompt is not None
        asked = None
        if not plan.compact_only:
            asked = asyncio.ensure_future(self._ask(request, api, plan))
        await anyio.to_thread.run_sync(self._compaction, prepared, prompt, limiter=self._limiter)
        if asked is not None:
            await asked

    def _compaction(self, prepared: summary.Prepared, prompt: AgentContext) -> None:
        """The pipeline's compaction of `prompt` into `prepared` (in a worker thread); a failure
        leaves none (the pipeline then runs in the request that needs it)."""
        made: AgentContext | None = None
        try:
            result = self.policy.pipeline.run(prompt, self.policy.counter)
            made = result.context if result.context is not prompt else None
        except Exception:  # reported when it runs in the request instead
            made = None
        if prepared.over is prompt.messages:  # not asked for over a later prompt meanwhile
            prepared.compacted, prepared.settled = made, True

    async def _ask(self, request: HttpRequest, api: wire.Api, plan: Plan) -> None:
        """Ask the upstream for the summary of `plan`'s prompt; its answer, or why none, lands
        in `plan.prepare`."""
        # built off the event loop: a prompt may be megabytes
        body = await anyio.to_thread.run_sync(
            self.summary_request, api, plan, limiter=self._limiter
        )
        if body is not None:
            self.summary_answered(plan, api, *await self._ask_summary(request, api, body))

    async def _ask_summary(
        self, request: HttpRequest, api: wire.Api, body: bytes
    ) -> tuple[int, bytes, str]:
        """The upstream's answer to the summary request `body`: its status and content, and
        why there is none ('': there is)."""
        base = self.upstream(api)
        try:
            if base is None:
                raise ValueError("no upstream")
            response = await self.client.post(
                self.url(base, request), headers=self._headers(request, api), content=body
            )
        except Exception as exc:  # unreachable, late: the extractive summary then
            return 0, b"", type(exc).__name__
        return response.status_code, response.content, ""

    async def _ask_for(self, request: HttpRequest, api: wire.Api, home: Home, body: bytes) -> None:
        """`_prepare` of a conversation a planner process holds: it built `body`, and is told
        the answer."""
        answer = await self._ask_summary(request, api, body)
        if self.planners is not None:
            self.planners.tell(home, "summary", api, *answer)

    def summary_request(self, api: wire.Api, plan: Plan) -> bytes | None:
        """The summary request for `plan`'s prompt, counted in its conversation; None: there is
        none to send (the upstream is 'none', the body unreadable), its failure counted."""
        prepared, conv = plan.prepare, plan.conversation
        assert prepared is not None and conv is not None and plan.prompt is not None
        conv.summary_calls += 1
        try:
            if self.upstream(api) is None:
                raise ValueError("no upstream")
            return _dumps(summary.summary_body(api, json.loads(plan.body)))
        except Exception as exc:
            self.summary_answered(plan, api, 0, b"", type(exc).__name__)
            return None

    def summary_answered(
        self, plan: Plan, api: wire.Api, status: int, content: bytes, failed: str
    ) -> None:
        """What the upstream answered to `plan`'s summary request (`failed`: why nothing)
        lands in `plan.prepare` for the compaction to come."""
        prepared, conv = plan.prepare, plan.conversation
        assert prepared is not None and conv is not None
        if failed:
            prepared.failed = failed
        else:
            try:
                summary.read_answer(api, status, content, prepared)
            except Exception as exc:  # unreadable: the extractive summary then
                prepared.failed = type(exc).__name__
        conv.summary_usage.add(prepared.usage)
        if prepared.failed:
            log.info("upstream summary failed (%s)", prepared.failed)

    def _upstream_error(self, plan: Plan) -> None:
        self.counters.add("upstream_errors")
        if plan.conversation is not None:
            plan.conversation.failures += 1
        elif plan.home is not None and self.planners is not None:
            self.planners.tell(plan.home, "usage", None, True)

    def _used(self, plan: Plan, usage: Usage | None) -> None:
        """Count what the provider reported for `plan`'s request in its conversation."""
        if usage is None:
            return
        if plan.conversation is not None:
            plan.conversation.usage.add(usage)
        elif plan.home is not None and self.planners is not None:
            self.planners.tell(plan.home, "usage", usage, False)

    def told(self, key: str, usage: Usage | None, failed: bool) -> None:
        """In a planner process: what the gateway's process saw of conversation `key`'s
        response (`_used`, `_upstream_error`)."""
        conv = self.policy.conversations.held(key)
        if conv is None:
            return
        if usage is not None:
            conv.usage.add(usage)
        if failed:
            conv.failures += 1

    def _failed(self, exc: BaseException) -> None:
        self.counters.add("failed")
        log.warning(
            "compaction failed (%s: %s); forwarded unchanged",
            type(exc).__name__,
            redact(str(exc))[:200],
        )

    def _read(self, api: wire.Api, raw: bytes, header: str | None, owner: str) -> _Read:
        """The request read (in a worker thread): whether to relay its answer as a stream and
        which conversation it is, or the plan already (the body as it came). A body the gateway
        cannot read (not JSON, nested past Python's parser) goes on as it came, its answer
        relayed as the bytes come."""
        try:
            parsed = self.policy.parse(raw)
            if parsed is None:
                parsed = json.loads(raw)
        except (ValueError, RecursionError):
            self.counters.add("unreadable")
            return _Read(True, plan=Plan(raw))
        stream = isinstance(parsed, dict) and parsed.get("stream") is True
        if (
            isinstance(parsed, dict)
            and api == "openai-responses"
            and parsed.get("previous_response_id")
        ):
            self.counters.add("passed_through")  # the server holds that history
            return _Read(stream, plan=Plan(raw))
        try:
            key = self.policy.conversation_id(api, parsed, header, owner)
            session = wire.session_name(api, parsed, header)
        except wire.Unreadable:
            self.counters.add("unreadable")
            return _Read(stream, plan=Plan(raw))
        except Exception as exc:  # RecursionError of a deep body, ...: sent as it came
            self._failed(exc)
            return _Read(stream, plan=Plan(raw))
        return _Read(stream, parsed, key, session, owner)

    def _planned(self, api: wire.Api, read: _Read, raw: bytes) -> Plan:
        """What to send (in a worker thread, the conversation's lock held); a failed compaction
        sends the request as it came."""
        try:
            plan = self.policy.plan(api, read.parsed, read.key, raw, read.session, read.owner)
        except wire.Unreadable:
            self.counters.add("unreadable")
            return Plan(raw)
        except Exception as exc:  # RecursionError of a deep body, a strategy's failure, ...
            self._failed(exc)
            conv = self.policy.conversations.held(read.key)
            if conv is not None:
                conv.failures += 1
            return Plan(raw, conv)
        self.counters.add("passed_through" if plan.body is raw else "compacted_requests")
        return plan

    @contextlib.asynccontextmanager
    async def _conversation(self, key: str) -> AsyncIterator[None]:
        """Hold conversation `key` (on the event loop): its requests are planned in turn."""
        held = self._held.get(key)
        if held is None:
            held = self._held[key] = _Held()
        held.users += 1
        try:
            async with held.lock:
                yield
        finally:
            held.users -= 1
            if not held.users:
                del self._held[key]

    async def relay(self, request: HttpRequest) -> Response:
        self.counters.add("relayed")
        raw = await self._body(request, None)
        if isinstance(raw, Response):
            return raw
        return await self.forward(request, None, Plan(raw), stream=True)

    async def _body(self, request: HttpRequest, api: wire.Api | None) -> bytes | Response:
        """The request's body; over `--max-body` a 413, not sent in `--read-timeout` seconds a
        408 (in the API's error shape, the connection closed)."""
        limit = self.config.max_body
        provider = self.provider(api, request)
        declared = request.headers.get("content-length", "")
        if declared.isdigit() and int(declared) > limit:
            self.counters.add("refused")
            return _error(
                provider, 413, f"request body over {limit} bytes (--max-body)", close=True
            )
        chunks, size = [], 0
        with anyio.move_on_after(self.config.read_timeout) as scope:
            async for chunk in request.stream():
                size += len(chunk)
                if size > limit:
                    self.counters.add("refused")
                    message = f"request body over {limit} bytes (--max-body)"
                    return _error(provider, 413, message, close=True)
                chunks.append(chunk)
        if scope.cancelled_caught:
            self.counters.add("refused")
            message = f"request body not received within {self.config.read_timeout:g} s"
            return _error(provider, 408, message, close=True)
        return b"".join(chunks)

    async def forward(
        self, request: HttpRequest, api: wire.Api | None, plan: Plan, stream: bool
    ) -> Response:
        provider = self.provider(api, request)
        base = self.upstream(provider)
        if base is None:
            option = "--upstream-anthropic" if provider == "anthropic" else "--upstream-openai"
            return _error(provider, 502, f"no upstream for this API ({option} none)")
        headers = self._headers(request, api)
        if plan.recall is not None and api is not None:
            return await self._recalling(request, api, base, headers, plan, stream)
        upstream_request = self.client.build_request(
            request.method, self.url(base, request), headers=headers, content=plan.body
        )
        try:
            response = await self.client.send(upstream_request, stream=True)
        except httpx.HTTPError as exc:
            self.counters.add("upstream_errors")
            return _error(api, 502, f"upstream unreachable ({type(exc).__name__})")
        out_headers = [(k, v) for k, v in response.headers.items() if k.lower() not in _HOP_BY_HOP]
        if response.status_code >= 400:
            self._upstream_error(plan)
        if stream:
            return StreamingResponse(
                self._stream(response, api, plan),
                status_code=response.status_code,
                headers=dict(out_headers),
            )
        try:
            body = await response.aread()
        except httpx.HTTPError as exc:
            self.counters.add("upstream_errors")
            return _error(api, 502, f"upstream failed mid-response ({type(exc).__name__})")
        finally:
            await response.aclose()
        if api is not None and response.status_code < 400:
            self._used(plan, usage_of_body(api, body))
        return Response(body, status_code=response.status_code, headers=dict(out_headers))

    @staticmethod
    def _headers(request: HttpRequest, api: wire.Api | None) -> list[tuple[str, str]]:
        """The client's headers as they go upstream (its credentials among them)."""
        headers = [
            (k, v)
            for k, v in request.headers.items()
            if k.lower() not in _HOP_BY_HOP and k.lower() != SESSION_HEADER
        ]
        if api is not None:  # read usage from the response: ask for it unencoded
            headers = [(k, v) for k, v in headers if k.lower() != "accept-encoding"]
            headers.append(("accept-encoding", "identity"))
        return headers

    async def _recalling(
        self,
        request: HttpRequest,
        api: wire.Api,
        base: str,
        headers: list[tuple[str, str]],
        plan: Plan,
        stream: bool,
    ) -> Response:
        """Send, and while the model calls `compactkit_recall`, answer it and send again; the
        client gets the first response that does not call it (streamed responses are read to
        their end first)."""
        body = plan.recall or {}
        store = plan.store or {}
        for round_ in range(recall.MAX_ROUNDS + 1):
            upstream_request = self.client.build_request(
                request.method, self.url(base, request), headers=headers, content=_dumps(body)
            )
            try:
                response = await self.client.send(upstream_request, stream=True)
            except httpx.HTTPError as exc:
                self.counters.add("upstream_errors")
                return _error(api, 502, f"upstream unreachable ({type(exc).__name__})")
            try:
                data = await response.aread()
            except httpx.HTTPError as exc:
                self.counters.add("upstream_errors")
                return _error(api, 502, f"upstream failed mid-response ({type(exc).__name__})")
            finally:
                await response.aclose()
            out_headers = {
                k: v for k, v in response.headers.items() if k.lower() not in _HOP_BY_HOP
            }
            if response.status_code >= 400:
                self.counters.add("upstream_errors")
                return Response(data, status_code=response.status_code, headers=out_headers)
            self._used(plan, usage_of_events(api, data) if stream else usage_of_body(api, data))
            turn = recall.read_response(api, data, stream)
            if turn is None or not turn.recalls() or round_ == recall.MAX_ROUNDS:
                return Response(data, status_code=response.status_code, headers=out_headers)
            self.counters.add("recalls")
            body = recall.continued(api, body, turn, store)
        raise AssertionError("unreachable")  # the loop returns on its last round

    async def _stream(
        self, response: httpx.Response, api: wire.Api | None, plan: Plan
    ) -> AsyncIterator[bytes]:
        seen = bytearray()
        events = api is not None and response.headers.get("content-type", "").startswith(
            "text/event-stream"
        )
        held = b""  # an event stream goes on event by event: a cut one is never half sent
        try:
            async for chunk in response.aiter_raw():
                if api is not None:
                    seen += chunk
                if events:
                    held += chunk
                    end = _events_end(held)
                    chunk, held = held[:end], held[end:]
                if chunk:
                    yield chunk
            if held:
                yield held
        except httpx.HTTPError as exc:
            self.counters.add("upstream_errors")
            yield _stream_error(api, f"upstream failed mid-stream ({type(exc).__name__})")
        finally:
            await response.aclose()
        if api is not None and response.status_code < 400:
            self._used(plan, usage_of_events(api, bytes(seen)))


def api_key(headers: Any) -> str:
    """A request's API key, however its SDK sends it (`x-api-key`, `api-key`, a bearer token)."""
    key = headers.get("x-api-key") or headers.get("api-key") or ""
    if not key:
        scheme, _, token = (headers.get("authorization") or "").partition(" ")
        key = token.strip() if scheme.lower() == "bearer" else scheme
    return str(key)


def _events_end(data: bytes) -> int:
    """Where the last whole event of `data` ends (after its blank line); 0: none yet."""
    ends = [at + len(blank) for blank in _BLANK_LINES if (at := data.rfind(blank)) >= 0]
    return max(ends, default=0)


_ERROR_TYPES = {
    408: ("timeout_error", "timeout"),
    413: ("request_too_large", "invalid_request_error"),
}
"""The error type each API gives a status (Anthropic's, OpenAI's); others: a server error."""


def _error(api: wire.Api | None, status: int, message: str, *, close: bool = False) -> Response:
    """An error in the API's own shape; `close`: the connection is closed after it."""
    anthropic_type, openai_type = _ERROR_TYPES.get(status, ("api_error", "server_error"))
    text = f"compactkit gateway: {message}"
    if api == "anthropic" or api is None:
        body: dict[str, Any] = {"type": "error", "error": {"type": anthropic_type, "message": text}}
    else:
        body = {"error": {"type": openai_type, "message": text}}
    headers = {"connection": "close"} if close else None
    return JSONResponse(body, status_code=status, headers=headers)


def _stream_error(api: wire.Api | None, message: str) -> bytes:
    text = f"compactkit gateway: {message}"
    if api == "anthropic":
        data = {"type": "error", "error": {"type": "api_error", "message": text}}
        return b"event: error\ndata: " + _dumps(data) + b"\n\n"
    if api == "openai-responses":
        data = {"type": "error", "code": "server_error", "message": text}
        return b"event: error\ndata: " + _dumps(data) + b"\n\n"
    return b"data: " + _dumps({"error": {"type": "server_error", "message": text}}) + b"\n\n"


def listening_socket(host: str, port: int) -> socket.socket:
    """A TCP socket listening on `host:port` whose connections send small writes at once.

    `socket.create_server` makes a socket of protocol 0, and asyncio turns Nagle's algorithm off
    only on connections of protocol TCP: a response's body then waited for the client's delayed
    ACK of its headers, 40 ms on Linux. Connections inherit TCP_NODELAY from this socket."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.create_server((host, port), family=family)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return sock


def create_app(config: GatewayConfig, registry: Registry | None = None) -> Starlette:
    """The gateway as an ASGI app (run it with uvicorn, or `compactkit gateway`)."""
    gateway = Gateway(config, registry)
    methods = ["GET", "POST", "PUT", "PATCH", "DELETE", "HEAD", "OPTIONS"]
    routes = [
        Route("/compactkit/stats", gateway.stats, methods=["GET"]),
        Route("/compactkit/", gateway.dashboard, methods=["GET"]),
        *(Route(path, gateway.api, methods=["POST"]) for path in _ROUTES),
        Route("/{path:path}", gateway.relay, methods=methods),
    ]

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        # load the tokenizer now, not during the first request
        await anyio.to_thread.run_sync(gateway.policy.counter.text, "compactkit")
        if gateway.planners is not None:  # forked now: the tokenizer loaded comes along
            await gateway.planners.start()
        # a compaction running in a worker thread holds the interpreter lock for up to this long
        # each time the event loop wants it: at Python's 5 ms a small request waited ~20 ms
        switch = sys.getswitchinterval()
        sys.setswitchinterval(SWITCH_INTERVAL)
        try:
            yield
        finally:
            sys.setswitchinterval(switch)
            await gateway.close()

    app = Starlette(routes=routes, lifespan=lifespan)
    app.state.gateway = gateway
    return app


__all__ = ["Gateway", "GatewayConfig", "create_app"]
