"""Nothing dropped in silence: every writer over every sample, corpus and tests/live/sessions
conversation (as loaded, and compacted so that it holds every kind of marker), read back with the
same format; every difference the round trip shows (system prompt, error flags, images, thinking
and its signatures, markers, message names, the recorded model, roles, tool inputs, order, content)
is named in the one warning line `compactkit convert` prints on stderr (`Export.warning`, which
`convert` prints as it is; the CLI tests below check that on the sample files)."""

from __future__ import annotations

import difflib
import json
from collections import Counter
from collections.abc import Iterator
from functools import lru_cache
from pathlib import Path

import pytest
from click.testing import CliRunner

import compactkit
from compactkit import AgentContext
from compactkit.cli import make_cli
from compactkit.context import (
    MARKER_TYPES,
    ImageBlock,
    ThinkingBlock,
    ToolCallBlock,
    ToolResultBlock,
    render_block,
)
from compactkit.formats.base import parse_text
from compactkit.formats.export import recorded_model, walk_blocks
from compactkit.registry import make_registry
from tests.conftest import every_conversation, sample_files

REGISTRY = make_registry(entry_points=False)
WRITERS = [n for n in REGISTRY.formats.names() if REGISTRY.formats.get(n).can_write]
CLI = make_cli(lambda: make_registry(entry_points=False))
LIVE_SESSIONS = Path(__file__).parent.parent / "live" / "sessions"

COMPACTIONS = (
    # every marker type: collapsed, elided, masked, omitted; then summary
    [
        "etag-collapse",
        "static-elision",
        "observation-mask:keep_last=4,min_tokens=0",
        "sliding-window:max_tokens=8000",
    ],
    ["llm-summary:keep_last=4"],
)

NAMED_BY = {
    "system prompt": "system prompt",
    "error flags": "error flag",
    "images": "image",
    "thinking": "thinking",
    "thinking signatures": "signature",
    "markers": "marker",
    "message names": "name",
    "tool inputs": "tool input",
    "order": "moved",
    "model": "model",
}
"""The words the warning must hold for each kind of difference (`model`: the model the session
records, which a request needs; a role change: `"<role> messages"`; a `content` change has none: no
writer may change content unannounced)."""


# --------------------------------------------------------------------------- the differences


Item = tuple[str, ...]


def _items(ctx: AgentContext) -> list[Item]:
    """What a model reads of `ctx`, in order, whatever the grouping into messages: a user or
    system message's text, each assistant text, call and result (thinking and images apart)."""
    out: list[Item] = []
    for m in ctx.messages:
        if m.role in ("user", "system"):
            text = "\n".join(
                t for b in m.content if not isinstance(b, ImageBlock) for t in render_block(b)
            )
            out.append((m.role, text))
            continue
        for b in m.content:
            if isinstance(b, ToolResultBlock):
                out.append(("result", b.tool_call_id, "\n".join(render_block(b))))
            elif isinstance(b, ToolCallBlock):
                out.append(("call", b.id, b.name, json.dumps(b.input, sort_keys=True)))
            elif not isinstance(b, (ThinkingBlock, ImageBlock)):
                out.append((m.role, *render_block(b)))
    return out


def _sequence_differences(before: list[Item], after: list[Item]) -> Counter[str]:
    out: Counter[str] = Counter()
    opcodes = difflib.SequenceMatcher(None, before, after, autojunk=False).get_opcodes()
    deleted = Counter(x for tag, i1, i2, _, _ in opcodes if tag == "delete" for x in before[i1:i2])
    inserted = Counter(x for tag, _, _, j1, j2 in opcodes if tag == "insert" for x in after[j1:j2])
    out["order"] = sum((deleted & inserted).values())
    for tag, i1, i2, j1, j2 in opcodes:
        if tag == "replace" and i2 - i1 == j2 - j1:
            for a, b in zip(before[i1:i2], after[j1:j2], strict=True):
                out[_replaced(a, b)] += 1
        elif tag != "equal":
            out["content"] += max(i2 - i1, j2 - j1)
    out["content"] -= 2 * out["order"]
    return +out


def _replaced(a: Item, b: Item) -> str:
    if a[0] == "call" == b[0] and a[:3] == b[:3]:
        return "tool inputs"
    if a[0] != b[0] and a[1:] == b[1:]:
        return f"role: {a[0]} messages"
    return "content"


def round_trip_differences(before: AgentContext, after: AgentContext) -> Counter[str]:
    """What `after` (a context written and read back) lost or changed of `before`, counted by
    kind (the keys of `NAMED_BY`, `"role: <role> messages"`, or `"content"`)."""
    out: Counter[str] = Counter()
    if (before.system_instruction or None) != (after.system_instruction or None):
        out["system prompt"] += 1
    errors_after = {r.tool_call_id for m in after.messages for r in m.tool_results if r.is_error}
    out["error flags"] = sum(
        r.is_error and r.tool_call_id not in errors_after
        for m in before.messages
        for r in m.tool_results
    )
    blocks_before, blocks_after = walk_blocks(before), walk_blocks(after)

    def count(blocks: list[compactkit.Block], what: str) -> Counter[str]:
        if what == "images":
            return Counter(str(b.url or b.data) for b in blocks if isinstance(b, ImageBlock))
        if what == "thinking":
            return Counter(b.thinking for b in blocks if isinstance(b, ThinkingBlock))
        if what == "thinking signatures":
            return Counter(
                b.signature for b in blocks if isinstance(b, ThinkingBlock) and b.signature
            )
        return Counter(b.type for b in blocks if b.type in MARKER_TYPES)

    for what in ("images", "thinking", "thinking signatures", "markers"):
        out[what] = sum((count(blocks_before, what) - count(blocks_after, what)).values())
    if out["thinking"]:  # a dropped block takes its signature with it
        out["thinking signatures"] = max(0, out["thinking signatures"] - out["thinking"])
    names = Counter(m.name for m in before.messages if m.name) - Counter(
        m.name for m in after.messages if m.name
    )
    out["message names"] = sum(names.values())
    out["model"] = recorded_model(before) not in (None, recorded_model(after))
    out.update(_sequence_differences(_items(before), _items(after)))
    return +out


def unannounced(differences: Counter[str], warning: str | None) -> list[str]:
    """The kinds of difference `warning` does not name."""
    line = warning or ""
    return [
        kind
        for kind in differences
        if kind == "content" or NAMED_BY.get(kind, kind.removeprefix("role: ")) not in line
    ]


# --------------------------------------------------------------------------- the matrix


@lru_cache(maxsize=1)
def compacted() -> list[tuple[str, AgentContext]]:
    """The first conversation of every sample and corpus file, compacted by each of
    `COMPACTIONS` (their markers are what a writer must write as text, and say so)."""
    pipelines = [compactkit.build_pipeline(spec) for spec in COMPACTIONS]
    firsts = {name.split("#")[0]: (name, ctx) for name, ctx in reversed(every_conversation())}
    out = []
    for name, ctx in firsts.values():
        for k, pipeline in enumerate(pipelines):
            out.append((f"{name} compacted {k}", pipeline.run(ctx).context))
    return out


@lru_cache(maxsize=1)
def generated_sessions() -> list[tuple[str, AgentContext]]:
    """Every conversation of the sessions the real CLIs wrote for the tests (tests/live/sessions)."""
    return [
        (f"live/{path.name}#{n}", ctx)
        for path in sorted(LIVE_SESSIONS.glob("*.jsonl"))
        for n, ctx in enumerate(compactkit.load(path))
    ]


def every_input() -> Iterator[tuple[str, AgentContext]]:
    yield from every_conversation()
    yield from generated_sessions()
    yield from compacted()


@pytest.mark.parametrize("writer", WRITERS)
def test_every_difference_a_round_trip_shows_is_named_in_the_warning(writer: str) -> None:
    fmt = REGISTRY.formats.get(writer)
    silent: list[str] = []
    seen: Counter[str] = Counter()
    checked = 0
    for name, ctx in every_input():
        result = compactkit.export(ctx, writer, registry=REGISTRY)
        back = fmt.load(parse_text(result.text, name))
        assert len(back) == 1, name
        if writer == "compactkit-session":  # the log keeps the context; it loads the transcript
            ctx = compactkit.expand(ctx)  # (what its markers stand for put back, see its docs)
        differences = round_trip_differences(ctx, back[0])
        seen.update(differences)
        warning = result.warning(writer)
        silent += [
            f"{name}: {kind} x{differences[kind]} not in {warning!r}"
            for kind in unannounced(differences, warning)
        ]
        checked += 1
    assert checked > 250
    assert silent == [], "\n".join(silent[:10])
    assert seen["markers"] or writer.startswith("compactkit")  # the matrix held some


def test_the_difference_finder_sees_each_kind_of_loss() -> None:
    """The finder can fail: each kind of loss, made by hand, is found."""
    from compactkit import MaskedBlock, Message, TextBlock, ThinkingBlock, ToolCallBlock

    marker = MaskedBlock(etag="e1", label="old output")
    call = ToolCallBlock(id="c1", name="ls", input={"path": "."})
    result = ToolResultBlock(
        tool_call_id="c1",
        content=(TextBlock(text="denied"), ImageBlock(media_type="image/png", data="AAAA")),
        is_error=True,
    )
    before = AgentContext(
        system_instruction="Be brief.",
        messages=(
            Message(role="user", content=(TextBlock(text="list files"),), name="ada"),
            Message(role="system", content=(TextBlock(text="mind the sandbox"),)),
            Message(
                role="assistant",
                content=(ThinkingBlock(thinking="hm", signature="sig"), TextBlock(text="ok"), call),
            ),
            Message(role="tool", content=(result,)),
            Message(role="user", content=(marker,)),
        ),
    )
    assert round_trip_differences(before, before) == Counter()
    lossy = AgentContext(
        messages=(
            Message(role="user", content=(TextBlock(text="list files"),)),
            Message(role="user", content=(TextBlock(text="mind the sandbox"),)),
            Message(
                role="assistant",
                content=(
                    ThinkingBlock(thinking="hm"),
                    TextBlock(text="ok"),
                    call.model_copy(update={"input": {"input": "."}}),
                ),
            ),
            Message(
                role="tool",
                content=(
                    result.model_copy(
                        update={"content": (TextBlock(text="denied"),), "is_error": False}
                    ),
                ),
            ),
            Message(role="user", content=(TextBlock(text=compactkit.marker_text(marker)),)),
        ),
    )
    found = round_trip_differences(before, lossy)
    assert found == Counter(
        {
            "system prompt": 1,
            "error flags": 1,
            "images": 1,
            "thinking signatures": 1,
            "markers": 1,
            "message names": 1,
            "role: system messages": 1,
            "tool inputs": 1,
        }
    )
    assert unannounced(found, "x export dropped 1 images") == [k for k in found if k != "images"]
    reordered = before.with_messages([before.messages[1], before.messages[0], *before.messages[2:]])
    assert round_trip_differences(before, reordered) == Counter({"order": 1})
    assert unannounced(Counter({"content": 1}), "anything at all") == ["content"]


# --------------------------------------------------------------------------- what convert prints


@pytest.mark.parametrize("writer", WRITERS)
def test_convert_prints_the_warning_on_stderr(writer: str, tmp_path: Path) -> None:
    """`compactkit convert FILE --to WRITER` on every sample file prints exactly the warning
    line of the export (nothing when the round trip shows no difference)."""
    printed = 0
    for path in sample_files():
        contexts = compactkit.load(path)
        address = str(path) if len(contexts) == 1 else f"{path}#0"
        target = tmp_path / f"out{REGISTRY.formats.get(writer).extension}"
        result = CliRunner().invoke(CLI, ["convert", address, "--to", writer, "-o", str(target)])
        assert result.exit_code == 0, (path.name, result.stderr)
        expected = compactkit.export(contexts[0], writer, registry=REGISTRY).warning(writer)
        warnings = [w for w in result.stderr.splitlines() if w.startswith("warning: ")]
        assert warnings == ([f"warning: {expected}"] if expected else []), path.name
        assert (
            target.read_text(encoding="utf-8")
            == compactkit.export(contexts[0], writer, registry=REGISTRY).text
        )
        printed += bool(expected)
    assert printed or writer.startswith("compactkit")
