"""What an llm-summary backend is: a `Summarizer` turning a `SummaryRequest` into summary text.

Backends are plugins (hook `register_summarizers`, called with the backend class). The strategy
renders the window of turns it replaces as a bounded transcript, asks the backend for a summary and
truncates the answer to the token limit it serves, so a backend may return more than asked.

This module also holds what backends share: the system prompt of the remote backends, the in-process
summary cache, and the one-line error helpers that keep API keys out of every message.
"""

from __future__ import annotations

import os
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from functools import cached_property
from typing import Any, ClassVar

from ..context import Message, canonical_json, etag_of
from ..errors import ConfigError, StrategyError, redact
from ..prompts import SYSTEM_PROMPT
from ..registry import get_counter, require_subclass

SUMMARY_SECTIONS = (
    "Task",
    "User messages",
    "Files read",
    "Files changed",
    "Commands and outcomes",
    "Errors",
    "Open items",
)
"""The sections every summary is asked for, in order (the extractive backend writes these)."""

LEGACY_SECTIONS = {"User constraints": "User messages"}
"""Section titles earlier versions wrote, and the section they are read as."""

USER_MESSAGE_CHARS = 2_000
"""Default cap, in characters, on each user message a summary keeps verbatim."""


@dataclass(frozen=True)
class SummaryRequest:
    """What a backend gets: the structured window of messages and, rendered from it on first use,
    a transcript bounded to `max_input_tokens`.

    `summary_max_tokens` is the limit the strategy truncates the answer to (already reduced to what
    fits the token budget), so a backend may ask its model for that many tokens.
    """

    messages: tuple[Message, ...]
    task: str = ""
    """The context's task (its first user message), which stays in the context above the window."""
    model: str | None = None
    base_url: str | None = None
    timeout: float = 60.0
    max_input_tokens: int = 30_000
    summary_max_tokens: int = 1_500
    tokenizer: str = "o200k_base"
    first_index: int = 0
    """Index in the context of `messages[0]` (the transcript numbers messages from it)."""
    user_message_chars: int = USER_MESSAGE_CHARS
    """Characters of each message in the user's own words kept verbatim (the rest is recoverable)."""
    recovery_etag: str = ""
    """Etag under which the strategy stores the window (a cut user message names it)."""
    pinned: tuple[str, ...] = ()
    """Texts of the window kept verbatim right after the summary (the user's words and whatever
    else is pinned, see `compactkit.pins`): the summary need not repeat them."""

    @cached_property
    def transcript(self) -> str:
        """The window as plain text within `max_input_tokens` (long outputs lose their middle)."""
        counter = get_counter(self.tokenizer)
        return render_transcript(
            self.messages,
            self.first_index,
            self.max_input_tokens,
            counter.text,
            self.user_message_chars,
        )


class Summarizer:
    """Base of llm-summary backends. Subclasses set `name` and `description` and implement
    `summarize`; they are registered as classes and instantiated with no arguments.

    Raise `ConfigError` for a mistake the user must fix (missing SDK, missing API key) and
    `StrategyError` (one clear line) when a call fails; the strategy may then fall back to the
    extractive summary when its `fallback` option says so.
    """

    name: ClassVar[str] = ""
    description: ClassVar[str] = ""
    prompt: ClassVar[str] = SYSTEM_PROMPT
    """The system prompt sent with the transcript (part of the cache key)."""
    cacheable: ClassVar[bool] = True
    """Whether results are remembered in-process (keyed by `cache_key`)."""

    def summarize(self, request: SummaryRequest) -> str:
        raise NotImplementedError

    def system_prompt(self, request: SummaryRequest) -> str:
        """The system prompt for `request`: `prompt` plus the length it must stay within."""
        if request.pinned:
            users = (
                f"The user's messages and their other words in this transcript ({len(request.pinned)} "
                "texts) are kept verbatim right after your summary: under '## User messages' write "
                "'- kept verbatim after this summary' instead of repeating them. "
            )
        else:
            users = (
                f"Keep each user message verbatim up to {request.user_message_chars:,} characters. "
            )
        return (
            f"{self.prompt}\nKeep the whole summary under {request.summary_max_tokens} tokens. "
            f"{users}When space is short, keep every file read or changed and every error first, "
            "then the most recent items of the other sections."
        )

    def cache_key(self, request: SummaryRequest) -> str | None:
        """The key a summary of `request` is cached under (None: never cached)."""
        if not self.cacheable:
            return None
        return etag_of(
            canonical_json(
                {
                    "backend": self.name,
                    "model": request.model,
                    "base_url": request.base_url,
                    "prompt": self.system_prompt(request),
                    "transcript": request.transcript,
                    "summary_max_tokens": request.summary_max_tokens,
                }
            )
        )

    def __repr__(self) -> str:
        return f"<Summarizer {self.name}>"


require_subclass("summarizer", Summarizer)  # registered backends subclass it


# --------------------------------------------------------------------------- the summary cache


class SummaryCache:
    """A bounded, thread-safe, in-process map from cache key to summary text (oldest out first)."""

    def __init__(self, max_entries: int = 256) -> None:
        self.max_entries = max_entries
        self._items: OrderedDict[str, str] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: str) -> str | None:
        with self._lock:
            value = self._items.get(key)
            if value is not None:
                self._items.move_to_end(key)
            return value

    def put(self, key: str, value: str) -> None:
        with self._lock:
            self._items[key] = value
            self._items.move_to_end(key)
            while len(self._items) > self.max_entries:
                self._items.popitem(last=False)

    def clear(self) -> None:
        with self._lock:
            self._items.clear()

    def __len__(self) -> int:
        return len(self._items)

    def __contains__(self, key: object) -> bool:
        return key in self._items


CACHE = SummaryCache()
"""Summaries of every backend in this process, so the same window is never summarized twice."""


# --------------------------------------------------------------------------- shared helpers


def api_key(env_var: str, backend: str) -> str:
    """The API key from the environment, or a `ConfigError` naming the variable."""
    value = os.environ.get(env_var, "").strip()
    if not value:
        raise ConfigError(
            f"llm-summary backend {backend!r} needs an API key: set the {env_var} environment "
            "variable (or use backend=extractive, which needs no network)"
        )
    return value


def import_sdk(module: str, extra: str, backend: str) -> Any:
    """Import an optional SDK, or raise a `ConfigError` saying which extra to install."""
    import importlib

    try:
        return importlib.import_module(module)
    except ImportError:
        raise ConfigError(
            f"llm-summary backend {backend!r} needs the {module!r} package: "
            f"pip install 'compactkit[{extra}]'"
        ) from None


def failure(backend: str, what: str, hint: str, secret: str = "") -> StrategyError:
    """A one-line `StrategyError`: what failed, for which backend, what to do."""
    return StrategyError(redact(f"llm-summary backend {backend!r}: {what}; {hint}", secret))


RETRY_HINT = "retry later, raise timeout=, or set fallback=extractive"


def status_failure(backend: str, status: int, detail: str, secret: str) -> StrategyError:
    """The error for an HTTP error status from a provider."""
    if status == 429:
        what, hint = "rate limited (HTTP 429)", "retry later or set fallback=extractive"
    elif status in (401, 403):
        what, hint = f"authentication failed (HTTP {status})", "check the API key"
    elif status >= 500:
        what, hint = f"server error (HTTP {status})", "retry later or set fallback=extractive"
    else:
        what, hint = f"request rejected (HTTP {status})", "check model= and base_url="
    if detail:
        what = f"{what}: {detail[:160]}"
    return failure(backend, what, hint, secret)


def error_detail(body: object) -> str:
    """A short description from a provider's JSON error body (type/code/message), or ''."""
    if isinstance(body, dict):
        inner = body.get("error", body)
        if isinstance(inner, dict):
            parts = [
                str(inner[k]) for k in ("type", "code", "message") if isinstance(inner.get(k), str)
            ]
            return " ".join(dict.fromkeys(parts))
        if isinstance(inner, str):
            return inner
    return ""


# --------------------------------------------------------------------------- bounding text

Count = Callable[[str], int]


def clip_tokens(text: str, max_tokens: int, count: Count) -> str:
    """`text` cut to at most `max_tokens` tokens, at a line end where possible, with a note.

    Deterministic: the same text and limit always give the same cut.
    """
    if count(text) <= max_tokens:
        return text
    note = "\n[summary truncated]"
    room = max_tokens - count(note)
    if room <= 0:
        return _prefix_within(text, max_tokens, count)
    lines = text.split("\n")
    # binary search on the number of whole lines that fit
    lo, hi = 0, len(lines)
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if count("\n".join(lines[:mid])) <= room:
            lo = mid
        else:
            hi = mid - 1
    kept = "\n".join(lines[:lo])
    if lo < len(lines):
        # fill what is left with the start of the next line
        rest = room - (count(kept + "\n") if kept else 0)
        if rest > 8:
            kept = (kept + "\n" if kept else "") + _prefix_within(lines[lo], rest, count)
    out = (kept + note) if kept else note.lstrip("\n")
    while count(out) > max_tokens and kept:  # token merges at the seams: shave a little more
        kept = kept[: max(0, len(kept) - max(1, len(kept) // 50))]
        out = (kept + note) if kept else note.lstrip("\n")
    return out if count(out) <= max_tokens else ""


def _prefix_within(text: str, max_tokens: int, count: Count) -> str:
    """The longest prefix of `text` (in characters) that has at most `max_tokens` tokens."""
    if max_tokens <= 0:
        return ""
    lo, hi = 0, len(text)
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if count(text[:mid]) <= max_tokens:
            lo = mid
        else:
            hi = mid - 1
    return text[:lo]


def trim_middle(text: str, max_tokens: int, count: Count, tokens: int | None = None) -> str:
    """`text` within `max_tokens`, keeping its start and end and saying how much was cut."""
    total = count(text) if tokens is None else tokens
    if total <= max_tokens:
        return text
    if max_tokens < 24:
        return f"[... {total:,} tokens trimmed ...]"
    ratio = len(text) / max(total, 1)
    keep = int((max_tokens - 16) * ratio)
    out = text
    for _ in range(6):
        head = keep // 2
        tail = keep - head
        cut = total - max_tokens + 16
        out = f"{text[:head]}\n[... {cut:,} tokens trimmed ...]\n{text[len(text) - tail :]}"
        size = count(out)
        if size <= max_tokens:
            return out
        keep = int(keep * max_tokens / size * 0.95)
    return _prefix_within(out, max_tokens, count)


_Piece = tuple[str, str, bool]
"""(label, body, protected): a protected body is the user's own words, never trimmed or dropped."""


def _block_pieces(msg: Message, index: int) -> list[_Piece]:
    """(label, body, protected) pieces of a message for the transcript."""
    from ..context import (
        ImageBlock,
        TextBlock,
        ThinkingBlock,
        ToolCallBlock,
        ToolResultBlock,
        render_block,
    )

    pieces: list[_Piece] = []
    header = f"[{index}] {msg.role}"
    if msg.name:
        header += f" ({msg.name})"
    own_words = msg.is_human
    if own_words:
        header += " (own words)"
    elif msg.role == "user" and msg.origin:
        header += f" ({msg.origin})"
    for block in msg.content:
        if isinstance(block, TextBlock):
            pieces.append(("", block.text, own_words))
        elif isinstance(block, ThinkingBlock):
            if not block.redacted and block.thinking.strip():
                pieces.append(("(thinking) ", block.thinking, False))
        elif isinstance(block, ToolCallBlock):
            pieces.append((f"-> call {block.name} [{block.id}]: ", render_block(block)[1], False))
        elif isinstance(block, ToolResultBlock):
            flag = " (error)" if block.is_error else ""
            body = "\n".join(render_block(block))
            pieces.append((f"<- result [{block.tool_call_id}]{flag}:\n", body, False))
        elif isinstance(block, ImageBlock):
            pieces.append(("[image]", "", False))
        else:
            pieces.append(("", "\n".join(render_block(block)), False))
    if not pieces:
        pieces.append(("", "", False))
    label, body, protected = pieces[0]
    pieces[0] = (f"{header}:\n{label}", body, protected)
    return pieces


def _cut_words(text: str, chars: int) -> str:
    """A user message cut to `chars` characters, saying how much follows (as a summary says it)."""
    if len(text) <= chars:
        return text
    rest = len(text) - chars
    return f"{text[:chars]} [… {rest:,} more characters]"


def render_transcript(
    messages: Sequence[Message],
    first_index: int,
    max_tokens: int,
    count: Count,
    user_chars: int = USER_MESSAGE_CHARS,
) -> str:
    """The window as a plain transcript within `max_tokens`.

    Messages in the user's own words are kept verbatim up to `user_chars` characters each (then
    cut at their end, saying how much follows). Other long texts and tool outputs lose their middle
    first (every piece is cut to the same cap, the largest cap that fits); when even the labels do
    not fit, whole blocks from the middle of the window go, never the user's words (which are cut
    shorter only when they alone would fill half the room). Deterministic for the same messages and
    limit.
    """
    pieces: list[_Piece] = []
    for offset, msg in enumerate(messages):
        for label, body, protected in _block_pieces(msg, first_index + offset):
            pieces.append((label, _cut_words(body, user_chars) if protected else body, protected))
    labels = [count(label) + 1 for label, _, _ in pieces]
    bodies = [count(body) if body else 0 for _, body, _ in pieces]
    if sum(labels) + sum(bodies) <= max_tokens:
        text = "\n".join(label + body for label, body, _ in pieces)
        if count(text) <= max_tokens:
            return text
    half = max_tokens // 2
    words = [k for k, (_, _, protected) in enumerate(pieces) if protected]
    fixed = sum(labels[k] + bodies[k] for k in words)
    if fixed > half:  # the user's words alone over half the room: each cut to the same size
        _cut_user_words(pieces, labels, bodies, words, half, count)
        fixed = sum(labels[k] + bodies[k] for k in words)
    if sum(labels) + fixed - sum(labels[k] for k in words) > half and len(pieces) > 2:
        pieces, labels, bodies = _keep_ends(pieces, labels, bodies, words, half, count)
    return _trim_free(pieces, bodies, max_tokens - sum(labels), max_tokens, count)


def _cut_user_words(
    pieces: list[_Piece],
    labels: list[int],
    bodies: list[int],
    words: list[int],
    half: int,
    count: Count,
) -> None:
    """Cut each of the user's words (the pieces at `words`) to the same size, so that they and
    their labels fit `half` (in place)."""
    cap = _water_level([bodies[k] for k in words], max(half - sum(labels[k] for k in words), 0))
    for k in words:
        if bodies[k] > cap:
            label, body, _ = pieces[k]
            pieces[k] = (label, _prefix_within(body, cap, count) + " [… cut]", True)
            bodies[k] = count(pieces[k][1])


def _keep_ends(
    pieces: list[_Piece],
    labels: list[int],
    bodies: list[int],
    words: list[int],
    half: int,
    count: Count,
) -> tuple[list[_Piece], list[int], list[int]]:
    """When the labels alone are over half the room: the first and last blocks, the user's words
    and as many blocks from both ends as fit `half`; every run of dropped blocks becomes a note."""
    n = len(pieces)
    keep: set[int] = set()
    used = 0

    def take(k: int) -> bool:
        nonlocal used
        size = labels[k] + (bodies[k] if pieces[k][2] else 0)
        if used + size > half:
            return False
        keep.add(k)
        used += size
        return True

    take(0)
    take(n - 1)
    for k in words:
        take(k)
    order = [k for pair in zip(range(n), reversed(range(n)), strict=True) for k in pair]
    for k in dict.fromkeys(order):
        if k not in keep and not take(k):
            break
    kept: list[int] = []
    last = -1
    for k in sorted(keep):
        if k > last + 1:
            kept.append(-(k - last - 1))  # a gap of that many blocks
        kept.append(k)
        last = k
    if last < n - 1:
        kept.append(-(n - 1 - last))
    notes = {g: (f"[... {-g} blocks omitted ...]", "", False) for g in kept if g < 0}
    return (
        [notes[k] if k < 0 else pieces[k] for k in kept],
        [count(notes[k][0]) + 1 if k < 0 else labels[k] for k in kept],
        [0 if k < 0 else bodies[k] for k in kept],
    )


def _trim_free(
    pieces: list[_Piece], bodies: list[int], room: int, max_tokens: int, count: Count
) -> str:
    """The transcript with every piece that is not the user's words cut in its middle to one
    cap, the largest that fits `room` (tokens after the labels), tightened until the whole text
    fits `max_tokens`, else clipped."""
    free = [k for k, (_, _, protected) in enumerate(pieces) if not protected]
    words_size = sum(b for b, (_, _, p) in zip(bodies, pieces, strict=True) if p)
    room = room - words_size - 8
    text = ""
    for _ in range(6):
        cap = _water_level([bodies[k] for k in free], max(room, 0))
        parts = [
            label + (trim_middle(body, cap, count, size) if size > cap and not protected else body)
            for (label, body, protected), size in zip(pieces, bodies, strict=True)
        ]
        text = "\n".join(parts)
        size = count(text)
        if size <= max_tokens:
            return text
        room -= size - max_tokens + max(8, room // 20)
    return _prefix_within(text, max_tokens, count)


def _water_level(sizes: Sequence[int], room: int) -> int:
    """The largest cap c with sum(min(s, c)) <= room."""
    if sum(sizes) <= room:
        return max(sizes, default=0)
    ordered = sorted(sizes)
    remaining = room
    for k, size in enumerate(ordered):
        share = remaining // (len(ordered) - k)
        if size > share:
            return share
        remaining -= size
    return ordered[-1]


@contextmanager
def sdk_errors(
    sdk: Any,
    base_error: type[BaseException],
    backend: str,
    request: SummaryRequest,
    key: str,
    service: str,
    api: str,
) -> Iterator[None]:
    """Turn what an official provider SDK raises into one-line `StrategyError`s without the key.

    :param sdk: the imported SDK module (its `APITimeoutError`, `APIStatusError`, ...).
    :param base_error: the SDK's root exception (`openai.OpenAIError`, `anthropic.AnthropicError`).
    :param service: how the default endpoint is named in messages ("the OpenAI API").
    :param api: which API base_url= must serve ("the chat completions API").
    """
    try:
        yield
    except sdk.APITimeoutError:
        raise failure(backend, f"timed out after {request.timeout:g} s", RETRY_HINT, key) from None
    except sdk.APIStatusError as exc:
        raise status_failure(backend, exc.status_code, error_detail(exc.body), key) from None
    except sdk.APIConnectionError:
        where = request.base_url or service
        raise failure(
            backend, f"could not connect to {where}", "check base_url= and the network", key
        ) from None
    except ValueError as exc:  # a body that is not JSON (json.JSONDecodeError)
        raise failure(
            backend,
            f"malformed reply ({type(exc).__name__})",
            "check that base_url= points at the API, or set fallback=extractive",
            key,
        ) from None
    except base_error as exc:
        raise failure(
            backend,
            f"malformed reply ({type(exc).__name__})",
            f"check that base_url= serves {api}",
            key,
        ) from None


def client_options(request: SummaryRequest, key: str) -> dict[str, Any]:
    """Keyword arguments for an official SDK client: the key, the timeout, no retries (a failed
    call fails once, clearly), and `base_url` when the request names one."""
    options: dict[str, Any] = {"api_key": key, "timeout": request.timeout, "max_retries": 0}
    if request.base_url:
        options["base_url"] = request.base_url
    return options
