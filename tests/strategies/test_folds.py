"""The built-in arrival folders: what each folds, that errors, tracebacks, summaries and the
user's words stay whole, that the original comes back by etag, and that each keeps the arrival
contract on every sample and corpus conversation."""

from __future__ import annotations

import json
import re

import pytest
from hypothesis import given, settings

import compactkit
from compactkit import (
    AgentContext,
    ElidedBlock,
    FoldJson,
    FoldListings,
    FoldLogs,
    FoldRepeats,
    Message,
    Pipeline,
    Strategy,
    TextBlock,
    ToolCallBlock,
    ToolResultBlock,
    message,
)
from compactkit.recovery import expand
from compactkit.testing import check_strategy
from compactkit.testing.generate import contexts

from ..conftest import contract_failures, sample

FOLDERS = [FoldJson, FoldListings, FoldLogs, FoldRepeats]


def _turn(cid: str, text: str, **call: object) -> list[Message]:
    inputs = call or {"command": "run"}
    return [
        Message(role="assistant", content=(ToolCallBlock(id=cid, name="bash", input=inputs),)),
        Message(
            role="tool",
            content=(ToolResultBlock(tool_call_id=cid, content=(TextBlock(text=text),)),),
        ),
    ]


def _arrive(strategy: Strategy, *turns: list[Message]) -> AgentContext:
    start = AgentContext(messages=(message("user", "fix the build"),))
    return Pipeline([strategy]).arrive(start, [m for turn in turns for m in turn])


def _shown(ctx: AgentContext, index: int = -1) -> str:
    part = ctx.messages[index].tool_results[0].content[0]
    assert isinstance(part, ElidedBlock), "the output was not folded"
    return part.text


def _original(ctx: AgentContext, index: int = -1) -> str:
    return expand(ctx).messages[index].tool_results[0].text


@pytest.mark.parametrize("folder", FOLDERS, ids=lambda c: c.name)
def test_every_sample_and_corpus_conversation_keeps_the_arrival_contract(
    folder: type[Strategy],
) -> None:
    assert contract_failures(folder()) == []


def test_fold_repeats_names_where_the_lines_of_a_reread_file_are() -> None:
    source = "\n".join(f"def f{n}(x):\n    return x * {n}" for n in range(60))
    edited = source.replace("return x * 30", "return x * 31")
    ctx = _arrive(
        FoldRepeats(),
        _turn("read1", source, path="a.py"),
        _turn("read2", edited, path="a.py"),
    )
    shown = _shown(ctx)
    assert "[same as lines 1-61 of the result of call read1]" in shown
    assert "    return x * 31" in shown  # the changed line is shown
    assert len(shown) < len(edited) / 2
    assert _original(ctx) == edited
    assert ctx.messages[2].tool_results[0].text == source  # the first read stays as it was sent


def test_fold_repeats_keeps_error_lines_whole() -> None:
    block = "\n".join(f"step {n} of the build went fine" for n in range(20))
    failing = block + "\nERROR: step 20 failed\n" + block
    ctx = _arrive(FoldRepeats(), _turn("run1", block), _turn("run2", failing))
    shown = _shown(ctx)
    assert "ERROR: step 20 failed" in shown.splitlines()
    assert re.search(r"\[same as lines 1-\d+ of the result of call run1\]", shown)


def test_fold_json_writes_the_keys_of_same_shaped_records_once() -> None:
    records = [
        {"id": n, "name": f"item {n}", "price": {"amount": n * 10, "currency": "EUR"}}
        for n in range(30)
    ]
    ctx = _arrive(FoldJson(), _turn("api", json.dumps(records, indent=2)))
    body, _, note = _shown(ctx).rpartition("\n")
    table = json.loads(body)
    assert table["[keys]"] == ["id", "name", "price.amount", "price.currency"]
    rebuilt = [
        {"id": i, "name": name, "price": {"amount": amount, "currency": cur}}
        for i, name, amount, cur in table["[rows]"]
    ]
    assert rebuilt == records
    assert note.startswith("[folded: ") and "etag" in note
    assert json.loads(_original(ctx)) == records


def test_fold_logs_collapses_progress_and_keeps_the_traceback_and_summary() -> None:
    progress = [f"Downloading pkg-{n}.whl ({n} kB)" for n in range(40)]
    warning = "UserWarning: deprecated option"
    trace = [
        "Traceback (most recent call last):",
        '  File "setup.py", line 3, in <module>',
        "    build()",
        "RuntimeError: compiler not found",
    ]
    log = "\n".join(
        [*progress, warning, "building", warning, "linking", warning, *trace, "1 failed, 2 passed"]
    )
    ctx = _arrive(FoldLogs(), _turn("pip", log))
    shown = _shown(ctx).splitlines()
    assert "[38 more progress lines]" in shown
    assert shown.count(warning) == 1
    assert "[this warning appears 3 times in this output]" in shown
    for line in [*trace, "1 failed, 2 passed"]:
        assert line in shown
    assert _original(ctx) == log


def test_fold_listings_groups_search_results_by_file() -> None:
    hits = [f"src/pkg/module_{n // 10}.py:{n}:    value = compute({n})" for n in range(40)]
    text = "\n".join(hits)
    ctx = _arrive(FoldListings(), _turn("grep", text, command="grep -rn compute src"))
    shown = _shown(ctx).splitlines()
    assert shown[:2] == ["src/pkg/module_0.py:", "  0:    value = compute(0)"]
    rebuilt, current = [], ""
    for line in shown[:-1]:
        if line.startswith("  "):
            rebuilt.append(f"{current}:{line[2:]}")
        else:
            current = line[:-1]
    assert rebuilt == hits


def test_the_users_words_and_file_reads_are_never_folded() -> None:
    records = json.dumps([{"id": n, "name": f"n{n}"} for n in range(50)], indent=2)
    pipeline = compactkit.build_pipeline(["default:arrival=on"], budget=15_000)
    start = AgentContext(messages=())
    ctx = pipeline.arrive(start, [message("user", records), *_turn("r", records, path="x.json")])
    assert ctx.messages[0].text == records
    assert ctx.messages[2].tool_results[0].text == records  # a file the agent may edit


def test_a_pinned_output_is_left_whole() -> None:
    log = "\n".join(f"Downloading pkg-{n}.whl" for n in range(40))
    start = AgentContext(messages=(message("user", "go"),), pin_rules=("tool=bash",))
    ctx = Pipeline([FoldLogs()]).arrive(start, _turn("pip", log))
    assert ctx.messages[-1].tool_results[0].text == log


def test_the_default_arrival_stage_folds_a_real_session_recoverably() -> None:
    source = compactkit.load_one(sample("gemini3pro"))
    pipeline = compactkit.build_pipeline(["default:arrival=on"], budget=15_000)
    arrived = pipeline.arrive(source.replace(messages=()), source.messages)
    count = compactkit.get_counter("o200k_base").context
    assert count(arrived) < 0.95 * count(source)
    assert expand(arrived) == source
    assert compactkit.validate(arrived, source) == []


def test_a_folded_output_whose_named_lines_are_gone_is_put_back_at_the_next_compaction() -> None:
    source = "\n".join(f"def f{n}(x):\n    return x * {n}" for n in range(60))
    ctx = _arrive(
        FoldRepeats(), _turn("read1", source, path="a.py"), _turn("read2", source, path="a.py")
    )
    assert "of the result of call read1]" in _shown(ctx)
    # a window that dropped the first read (its turn) keeps a reference to lines it cannot see
    window = ctx.with_messages([ctx.messages[0], *ctx.messages[3:]])
    repaired = compactkit.EtagCollapse().compact(window)
    assert repaired.messages[-1].tool_results[0].text == source
    assert compactkit.validate(repaired) == []
    # while the lines it names are shown, the fold stays
    assert compactkit.EtagCollapse().compact(ctx).messages[-1] == ctx.messages[-1]


@pytest.mark.parametrize("folder", FOLDERS, ids=lambda c: c.name)
@settings(max_examples=40, deadline=None)
@given(ctx=contexts())
def test_generated_contexts_keep_the_arrival_contract(
    folder: type[Strategy], ctx: AgentContext
) -> None:
    assert check_strategy(folder(min_chars=0), ctx, runs=2) == []
