"""etag-collapse on real sessions: repeated payloads become markers, per-field splits, repairs."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import compactkit
from compactkit import (
    AgentContext,
    CollapsedBlock,
    ConfigError,
    ElidedBlock,
    MaskedBlock,
    ToolResultBlock,
)
from compactkit.context import Message, TextBlock, ToolCallBlock, message
from compactkit.pipeline import Pipeline
from compactkit.recovery import expand, payload_etag, put
from compactkit.registry import get_counter
from compactkit.strategies.etag_collapse import EtagCollapse, field_etag
from compactkit.strategies.sliding_window import SlidingWindow
from compactkit.testing import check_strategy
from compactkit.testing.generate import contexts
from compactkit.validate import validate

from ..conftest import ROOT, contract_failures, corpus_file, sample

GEMINI = "codemie_gemini_session"
FOLDER = "/Users/Jane_Smith/Documents/projects/epm-cdme/assistants/"


def results(ctx: AgentContext) -> list[tuple[int, ToolResultBlock]]:
    return [(i, b) for i, m in enumerate(ctx.messages) for b in m.tool_results]


def collapsed(result: ToolResultBlock) -> CollapsedBlock | None:
    if len(result.content) == 1 and isinstance(result.content[0], CollapsedBlock):
        return result.content[0]
    return None


@pytest.mark.parametrize(
    "options", [{}, {"min_tokens": 0, "per_field": False}], ids=["default", "non-default"]
)
def test_every_sample_and_corpus_conversation_keeps_the_contract(options: dict[str, Any]) -> None:
    assert contract_failures(EtagCollapse(**options)) == []


@settings(max_examples=60, deadline=None)
@given(ctx=contexts())
def test_generated_contexts_keep_the_contract(ctx: AgentContext) -> None:
    assert check_strategy(EtagCollapse(), ctx) == []
    assert check_strategy(EtagCollapse(min_tokens=0), ctx) == []


def test_files_read_again_unchanged_collapse_to_the_first_copy() -> None:
    ctx = compactkit.load_one(sample(GEMINI))
    out = EtagCollapse().compact(ctx)
    # message 8 reads lead_memory.txt; message 16 reads it again, writes lead_gemini.txt with the
    # same text and reads that back: both reads repeat message 8 exactly
    first = ctx.messages[8].tool_results[0]
    assert out.messages[8] is ctx.messages[8]  # the first full copy stays, the same object
    again = out.messages[16].tool_results
    expected_paths = [FOLDER + "lead_memory.txt", None, FOLDER + "lead_gemini.txt"]
    for result, path in zip(again, expected_paths, strict=True):
        marker = collapsed(result)
        if path is None:  # the write_file confirmation is not a repeat
            assert marker is None
            continue
        assert marker == CollapsedBlock(
            etag=payload_etag(first.content),
            path=path,
            unchanged=True,
            label=f"same as the result of call {first.tool_call_id}",
        )
    counter = get_counter()
    saved = sum(
        counter.block(a) - counter.block(b)
        for a, b in zip(ctx.messages[16].tool_results, again, strict=True)
    )
    assert saved > 2 * 1000
    assert compactkit.count_tokens(ctx) - compactkit.count_tokens(out) == saved
    changed = [
        i for i, (a, b) in enumerate(zip(ctx.messages, out.messages, strict=True)) if a is not b
    ]
    assert changed == [16]
    assert expand(out) == ctx


def test_a_tau_bench_lookup_repeated_unchanged_collapses() -> None:
    file = corpus_file("tau_bench_gpt-4o-airline_historical")
    ctx = compactkit.load_one(f"{file}#13")
    out = EtagCollapse().compact(ctx)
    # conversation 13 looks the same reservation up twice (messages 3 and 15) and gets the same
    # JSON back: the second answer collapses to the first
    first, again = ctx.messages[4].tool_results[0], ctx.messages[16].tool_results[0]
    assert ctx.messages[3].tool_calls[0].input == ctx.messages[15].tool_calls[0].input
    assert ctx.messages[15].tool_calls[0].name == "get_reservation_details"
    assert first.content == again.content
    marker = collapsed(out.messages[16].tool_results[0])
    assert marker == CollapsedBlock(
        etag=payload_etag(first.content),
        path=None,
        unchanged=True,
        label=f"same as the result of call {first.tool_call_id}",
    )
    counter = get_counter()
    assert counter.block(again) - counter.block(out.messages[16].tool_results[0]) > 250
    all_markers = sum(
        collapsed(r) is not None
        for conversation in compactkit.load(file)
        for _, r in results(EtagCollapse().compact(conversation))
    )
    assert all_markers == 7


def test_nothing_to_do_returns_the_same_object() -> None:
    ctx = compactkit.load_one(sample("test-repo-i1"))  # no payload repeats
    assert EtagCollapse().compact(ctx) is ctx
    gemini = compactkit.load_one(sample(GEMINI))
    assert EtagCollapse(min_tokens=10**6).compact(gemini) is gemini
    once = EtagCollapse().compact(gemini)
    assert EtagCollapse().compact(once) is once


# --------------------------------------------------------------------------- built contexts


def mask_first_result(ctx: AgentContext, i: int) -> AgentContext:
    """`ctx` with the first tool result of message `i` masked, as another strategy might."""
    recovery = dict(ctx.recovery)
    msg = ctx.messages[i]
    old = msg.tool_results[0]
    marker = MaskedBlock(etag=put(recovery, old.content), label="hidden")
    new = ToolResultBlock(tool_call_id=old.tool_call_id, content=(marker,), is_error=old.is_error)
    content = tuple(new if b is old else b for b in msg.content)
    messages = list(ctx.messages)
    messages[i] = Message(role=msg.role, content=content, metadata=msg.metadata)
    return ctx.replace(messages=tuple(messages), recovery=recovery)


def call(n: int, name: str, args: dict[str, Any]) -> Message:
    return Message(role="assistant", content=(ToolCallBlock(id=f"c{n}", name=name, input=args),))


def result(n: int, text: str) -> Message:
    block = ToolResultBlock(tool_call_id=f"c{n}", content=(TextBlock(text=text),))
    return Message(role="tool", content=(block,))


def session(*steps: tuple[str, dict[str, Any], str]) -> AgentContext:
    messages = [message("user", "Do the task")]
    for n, (name, args, text) in enumerate(steps):
        messages += [call(n, name, args), result(n, text)]
    messages.append(message("assistant", "done"))
    return AgentContext(messages=tuple(messages))


FILE_A = "\n".join(f"line {n}: def function_{n}(value): return value * {n}" for n in range(30))
FILE_B = FILE_A.replace("line 7:", "line 7 (edited):")


def test_a_file_that_changed_back_is_a_new_version_and_stays_full() -> None:
    read = ("read", {"path": "src/app.py"})
    ctx = session((*read, FILE_A), (*read, FILE_B), (*read, FILE_A), (*read, FILE_A))
    out = EtagCollapse().compact(ctx)
    kinds = [collapsed(r) for _, r in results(out)]
    assert kinds[:3] == [None, None, None]  # A, then B (changed), then A again: a new version
    marker = kinds[3]
    assert marker is not None and marker.path == "src/app.py" and marker.unchanged
    first_a = results(ctx)[0][1]  # the first full copy of A
    assert marker.label == f"same as the result of call {first_a.tool_call_id}"
    assert check_strategy(EtagCollapse(), ctx) == []


def test_another_call_with_identical_output_collapses() -> None:
    ctx = session(
        ("bash", {"command": "cat src/app.py"}, FILE_A),
        ("read", {"path": "src/app.py"}, FILE_A),
        ("bash", {"command": "python -m pytest -q"}, FILE_B),
        ("bash", {"command": "python -m pytest -q --lf"}, FILE_B),
    )
    out = EtagCollapse().compact(ctx)
    markers = [collapsed(r) for _, r in results(out)]
    assert markers[0] is None and markers[2] is None
    assert markers[1] is not None and markers[1].path == "src/app.py"
    assert markers[3] is not None and markers[3].path is None
    assert markers[3].label == f"same as the result of call {results(ctx)[2][1].tool_call_id}"


def test_small_repeats_stay() -> None:
    ctx = session(
        ("bash", {"command": "ls"}, "a.py b.py"), ("bash", {"command": "ls"}, "a.py b.py")
    )
    assert EtagCollapse().compact(ctx) is ctx
    assert EtagCollapse(min_tokens=0).compact(ctx) is ctx  # a marker would not be smaller


RESERVATION: dict[str, Any] = {
    "reservation_id": "ABC123",
    "user_id": "sara_doe_1",
    "origin": "JFK",
    "destination": "SFO",
    "flights": [
        {"flight_number": f"HAT{n:03d}", "date": f"2024-05-{n + 10}", "price": 100 + n}
        for n in range(8)
    ],
    "passengers": [
        {"first_name": "Sara", "last_name": "Doe", "dob": "1990-01-01"},
        {"first_name": "Tom", "last_name": "Doe", "dob": "1992-02-02"},
    ],
    "status": "active",
}
LOOKUP = ("get_reservation_details", {"reservation_id": "ABC123"})


def test_a_json_result_with_one_changed_field_resends_only_that_field() -> None:
    changed = {**RESERVATION, "status": "cancelled"}
    original = json.dumps(changed, indent=2)
    ctx = session((*LOOKUP, json.dumps(RESERVATION)), (*LOOKUP, original))
    out = EtagCollapse().compact(ctx)
    assert out.messages[2] is ctx.messages[2]
    parts = out.messages[4].tool_results[0].content
    carrier, *fields = parts
    base_call = ctx.messages[2].tool_results[0].tool_call_id  # the full JSON it changed from
    assert isinstance(carrier, ElidedBlock) and carrier.ref == f"the result of call {base_call}"
    shown = json.loads(carrier.text)
    assert shown["status"] == "cancelled"
    assert "flights" not in shown and "passengers" not in shown
    assert [f.field for f in fields if isinstance(f, CollapsedBlock)] == ["flights", "passengers"]
    for f in fields:
        assert isinstance(f, CollapsedBlock) and f.field is not None and f.unchanged
        assert f.etag == field_etag(f.field, compactkit.context.canonical_json(changed[f.field]))
    assert compactkit.count_tokens(out) < compactkit.count_tokens(ctx) - 150
    # recovery gives back the exact original text (indentation included)
    assert expand(out).messages[4].tool_results[0].content == (TextBlock(text=original),)
    assert expand(out) == ctx
    assert check_strategy(EtagCollapse(), ctx) == []
    assert EtagCollapse(per_field=False).compact(ctx) is ctx


def test_a_field_changed_in_between_is_not_called_unchanged() -> None:
    moved = {**RESERVATION, "flights": RESERVATION["flights"][:4]}
    ctx = session(
        (*LOOKUP, json.dumps(RESERVATION)),
        (*LOOKUP, json.dumps({**moved, "status": "changed"})),
        (*LOOKUP, json.dumps({**RESERVATION, "status": "final"})),
    )
    out = EtagCollapse().compact(ctx)
    third = out.messages[6].tool_results[0].content
    fields = [p.field for p in third if isinstance(p, CollapsedBlock)]
    assert fields == ["passengers"]  # flights equal the base again, but changed in between
    assert isinstance(third[0], ElidedBlock) and "flights" in json.loads(third[0].text)
    assert check_strategy(EtagCollapse(), ctx) == []


def test_per_field_results_whose_base_is_gone_are_expanded_back() -> None:
    ctx = session(
        (*LOOKUP, json.dumps(RESERVATION)),
        (*LOOKUP, json.dumps({**RESERVATION, "status": "cancelled"})),
        (*LOOKUP, json.dumps({**RESERVATION, "status": "refunded"})),
    )
    out = EtagCollapse().compact(ctx)
    assert isinstance(out.messages[4].tool_results[0].content[0], ElidedBlock)
    masked = mask_first_result(out, 2)  # another strategy hides the base
    assert masked.messages[2].tool_results[0].content[0].type == "masked"
    repaired = EtagCollapse().compact(masked)
    # the oldest split result shows in full again; the newest stays split, because every field
    # it calls unchanged is now visible in that restored copy
    assert repaired.messages[4].tool_results[0] == ctx.messages[4].tool_results[0]
    newest = repaired.messages[6].tool_results[0].content
    assert isinstance(newest[0], ElidedBlock)
    assert [p.field for p in newest[1:] if isinstance(p, CollapsedBlock)] == [
        "flights",
        "passengers",
    ]
    assert validate(repaired, masked) == []
    assert expand(repaired) == expand(ctx)
    assert EtagCollapse().compact(repaired) is repaired


def test_a_collapse_whose_full_copy_was_masked_is_expanded_back() -> None:
    ctx = compactkit.load_one(sample(GEMINI))
    out = EtagCollapse().compact(ctx)
    masked = mask_first_result(out, 8)  # another strategy hides message 8, the full copy
    assert masked.messages[8].tool_results[0].content[0].type == "masked"
    repaired = EtagCollapse().compact(masked)
    newest = repaired.messages[16].tool_results
    assert newest[2] == ctx.messages[16].tool_results[2]  # the newest marker, expanded back
    assert collapsed(newest[0]) is not None  # the older marker now points at that copy
    assert validate(repaired, masked) == []
    assert expand(repaired) == ctx


def test_a_pipeline_that_drops_the_full_copy_expands_the_newest_marker() -> None:
    ctx = compactkit.load_one(sample(GEMINI))
    pipeline = Pipeline([EtagCollapse(), SlidingWindow(max_tokens=7000)])
    run = pipeline.run(ctx)  # the pipeline validates every step; a violation would raise
    out = run.context
    originals = {r.tool_call_id: r for _, r in results(ctx)}
    kept = {r.tool_call_id: r for _, r in results(out)}
    first_copy = ctx.messages[8].tool_results[0]
    assert first_copy.tool_call_id not in kept  # the message with the full copy was dropped
    lead_memory, _, lead_gemini = ctx.messages[16].tool_results
    assert kept[lead_gemini.tool_call_id] == originals[lead_gemini.tool_call_id]  # expanded back
    marker = collapsed(kept[lead_memory.tool_call_id])
    assert marker is not None and marker.etag == payload_etag(lead_gemini.content)
    assert validate(out, ctx) == []
    assert expand(out) == ctx
    assert run.tokens_after <= 7000


def test_options_are_documented_and_strict() -> None:
    for name, info in EtagCollapse.Options.model_fields.items():
        assert info.description, name
    with pytest.raises(ConfigError, match="min_tokns"):
        EtagCollapse(min_tokns=3)
    with pytest.raises(ConfigError):
        EtagCollapse(min_tokens=-1)


def test_the_python_examples_of_the_docs_page_run(monkeypatch: pytest.MonkeyPatch) -> None:
    page = ROOT / "docs" / "strategies" / "etag-collapse.md"
    blocks = re.findall(r"```python\n(.*?)```", page.read_text(encoding="utf-8"), re.S)
    assert blocks
    monkeypatch.chdir(ROOT)
    for n, code in enumerate(blocks):
        exec(compile(code, f"{page.name}[{n}]", "exec"), {"__name__": f"docs_{n}"})


_FLIGHTS = [
    [{"flight_number": f"HAT{n:03d}", "date": f"2024-05-{n + 10}"} for n in range(k, k + 6)]
    for k in range(3)
]


@st.composite
def json_lookups(draw: st.DrawFn) -> AgentContext:
    """Sessions of JSON lookups whose fields change now and then (and change back)."""
    steps = []
    for _ in range(draw(st.integers(1, 12))):
        obj = {
            "id": draw(st.sampled_from(["A1", "B2"])),
            "status": draw(st.sampled_from(["active", "cancelled"])),
            "flights": draw(st.sampled_from(_FLIGHTS)),
            "passengers": draw(st.sampled_from(_FLIGHTS[:2])),
        }
        if draw(st.booleans()):
            del obj["status"]
        name = draw(st.sampled_from(["get_reservation", "update_reservation"]))
        text = json.dumps(obj, indent=draw(st.sampled_from([None, 2])))
        steps.append((name, {"reservation_id": obj["id"]}, text))
    return session(*steps)


@settings(max_examples=60, deadline=None)
@given(ctx=json_lookups())
def test_generated_json_lookups_keep_the_contract(ctx: AgentContext) -> None:
    for strategy in (EtagCollapse(), EtagCollapse(min_tokens=0)):
        assert check_strategy(strategy, ctx) == []
        out = strategy.compact(ctx)
        hidden = mask_first_result(out, 2) if out.messages[2].tool_results else out
        repaired = strategy.compact(hidden)
        assert validate(repaired, hidden) == []
        assert strategy.compact(repaired) == repaired
        assert expand(repaired) == expand(ctx)
