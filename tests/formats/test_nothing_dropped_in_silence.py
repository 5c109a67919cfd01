"""Nothing dropped in silence: every writer over every sample, corpus and tests/live/sessions
conversation (as loaded, and compacted so that it holds every kind of marker), read back with the
same format; every difference the round trip shows (system prompt, error flags, images, thinking
and its signatures, markers, message names, the recorded model, roles, tool inputs, order, content)
is named in the one warning line `compactkit convert` prints on stderr (`Export.warning`, which
`convert` prints as it is; the CLI tests below check that on the sample files)."""

from __future__ import annotations

import difflib
import itertools
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
from compactkit.formats.export import (
    NO_RESULT,
    PLACEHOLDER_USER_TEXT,
    recorded_model,
    walk_blocks,
)
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

NAMED_BY: dict[str, str | tuple[str, ...]] = {
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
    # what a request to send changes (`--request`)
    "merged": "merged",
    "call ids": "call ids",
    "whitespace": "whitespace",
    "empty": ("empty", "blank"),
    "placeholder": "placeholder",
    "answered": "answered",
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
    deleted = [x for tag, i1, i2, _, _ in opcodes if tag == "delete" for x in before[i1:i2]]
    inserted = [y for tag, _, _, j1, j2 in opcodes if tag == "insert" for y in after[j1:j2]]
    out["order"] = sum((Counter(deleted) & Counter(inserted)).values())
    # moved, or a call or result whose id was rewritten: the same but for the id
    moved = Counter(map(_but_id, deleted)) & Counter(map(_but_id, inserted))
    out["call ids"] = sum(moved.values()) - out["order"]
    for tag, i1, i2, j1, j2 in opcodes:
        if tag == "replace":
            out.update(_replaced_run(before[i1:i2], after[j1:j2]))
    left = moved.copy()
    for x in deleted:
        if left[_but_id(x)] > 0:
            left[_but_id(x)] -= 1
        else:
            out["empty" if x[-1] == "" else "content"] += 1
    for y in inserted:
        if moved[_but_id(y)] > 0:
            moved[_but_id(y)] -= 1
        else:
            out[_inserted(y)] += 1
    return +out


def _but_id(item: Item) -> Item:
    return (item[0], *item[2:]) if item[0] in ("call", "result") else item


def _inserted(item: Item) -> str:
    if item == ("user", PLACEHOLDER_USER_TEXT):
        return "placeholder"
    return "answered" if item[0] == "result" and item[-1] == NO_RESULT else "content"


def _replaced_run(before: list[Item], after: list[Item]) -> Counter[str]:
    """How a run of items reads back as another: texts merged (joined by lines), a role, call id
    or tool input changed, trailing whitespace stripped; `content` for what none explains."""
    out: Counter[str] = Counter()
    i = 0
    for item in after:
        if _inserted(item) != "content":  # what a request adds
            out[_inserted(item)] += 1
            continue
        texts = itertools.takewhile(lambda x: x[0] not in ("call", "result"), before[i:])
        run = list(itertools.accumulate((x[1] for x in texts), lambda a, b: f"{a}\n{b}"))
        k = next((k for k, t in enumerate(run, 1) if item[-1] in (t, t.rstrip())), 0)
        if item[0] in ("call", "result") or k == 0:
            out[_replaced(before[i], item) if i < len(before) else "content"] += 1
            i += 1
            continue
        out["merged"] += k - 1
        out.update(f"role: {x[0]} messages" for x in before[i : i + k] if x[0] != item[0])
        out["whitespace"] += run[k - 1] != item[-1]
        i += k
    out.update("empty" if x[-1] == "" else "content" for x in before[i:])
    return out


def _replaced(a: Item, b: Item) -> str:
    if a[0] == "call" == b[0] and a[2:] == b[2:]:
        return "call ids"
    if a[0] == "call" == b[0] and a[:3] == b[:3]:
        return "tool inputs"
    if a[0] == "result" == b[0] and a[2:] == b[2:]:
        return "call ids"
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
    calls = [[c for m in x.messages for c in m.tool_calls] for x in (before, after)]
    pairs = zip(calls[0], calls[1], strict=False)  # a request may drop or add a call
    renamed = {a.id: b.id for a, b in pairs if (a.name, a.input) == (b.name, b.input)}
    out["error flags"] = sum(
        r.is_error and renamed.get(r.tool_call_id, r.tool_call_id) not in errors_after
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
    out = []
    for kind in differences:
        words = NAMED_BY.get(kind, kind.removeprefix("role: "))
        if kind == "content" or not any(
            w in line for w in (words if isinstance(words, tuple) else (words,))
        ):
            out.append(kind)
    return out


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


@pytest.mark.parametrize("writer", ["anthropic-messages", "openai-chat"])
def test_every_difference_of_a_request_is_named_in_the_warning(writer: str) -> None:
    """The same with `--request` (turns merged, call ids rewritten, pending calls answered, ...);
    its model is the one `--model` or the session gives (tests/formats/test_request_settings.py)."""
    fmt = REGISTRY.formats.get(writer)
    options = compactkit.WriterOptions(request=True)
    silent: list[str] = []
    for name, ctx in every_input():
        result = compactkit.export(ctx, writer, options, registry=REGISTRY)
        differences = round_trip_differences(ctx, fmt.load(parse_text(result.text, name))[0])
        del differences["model"]
        warning = result.warning(writer)
        silent += [
            f"{name}: {kind} x{differences[kind]} not in {warning!r}"
            for kind in unannounced(differences, warning)
        ]
    assert silent == [], "\n".join(silent[:10])


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
    # what a request changes
    bad_id = ToolCallBlock(id="x.1", name="ls", input={})
    saved = AgentContext(
        messages=(
            Message(role="assistant", content=(TextBlock(text="hi "),)),
            Message(role="user", content=(TextBlock(text="a"),)),
            Message(role="user", content=(TextBlock(text="b"),)),
            Message(role="assistant", content=(bad_id,)),
        )
    )
    answer = ToolResultBlock(tool_call_id="x_1", content=(TextBlock(text=NO_RESULT),))
    request = AgentContext(
        messages=(
            Message(role="user", content=(TextBlock(text=PLACEHOLDER_USER_TEXT),)),
            Message(role="assistant", content=(TextBlock(text="hi"),)),
            Message(role="user", content=(TextBlock(text="a"), TextBlock(text="b"))),
            Message(role="assistant", content=(bad_id.model_copy(update={"id": "x_1"}),)),
            Message(role="tool", content=(answer,)),
        )
    )
    assert round_trip_differences(saved, request) == Counter(
        {"placeholder": 1, "whitespace": 1, "merged": 1, "call ids": 1, "answered": 1}
    )


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


def test_run_to_an_agent_format_lists_the_markers_it_writes_as_text(tmp_path: Path) -> None:
    """`run --to` prints the same line: the masked outputs are markers Codex has no record for."""
    out = tmp_path / "rollout.jsonl"
    session = next(p for p in sample_files() if "claude-code-viewer" in p.name)
    spec = "observation-mask:keep_last=0,min_tokens=0"
    result = CliRunner().invoke(
        CLI, ["run", str(session), "-s", spec, "--to", "codex-rollout", "-o", str(out)]
    )
    assert result.exit_code == 0, result.stderr
    (line,) = [w for w in result.stderr.splitlines() if w.startswith("warning: ")]
    assert line.startswith("warning: codex-rollout export dropped ")
    assert "markers written as text" in line and "session model" in line
    masked = [r for m in compactkit.load_one(out).messages for r in m.tool_results]
    assert any(r.text.startswith("[") and "etag" in r.text for r in masked)  # the marker's text
