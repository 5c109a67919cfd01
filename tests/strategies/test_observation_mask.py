"""observation-mask on real sessions: old tool outputs become labelled, recoverable placeholders."""

from __future__ import annotations

import re
from typing import Any

import pytest
from hypothesis import given, settings

import compactkit
from compactkit import AgentContext, ConfigError, MaskedBlock, ToolResultBlock
from compactkit.context import Message, TextBlock, ToolCallBlock, message
from compactkit.pipeline import Pipeline, build_pipeline, get_strategy
from compactkit.recovery import expand, payload_etag
from compactkit.registry import get_counter
from compactkit.strategies.etag_collapse import EtagCollapse
from compactkit.strategies.observation_mask import PLACEHOLDER_FIELDS, ObservationMask
from compactkit.testing import check_strategy
from compactkit.testing.generate import contexts
from compactkit.validate import validate

from ..conftest import ROOT, contract_failures, sample

NON_DEFAULT: dict[str, Any] = {
    "keep_last": 3,
    "min_tokens": 0,
    "placeholder": "{status}: {tool} {path}{command} ({chars} chars) {call_id}",
}


def results(ctx: AgentContext) -> list[tuple[int, ToolResultBlock]]:
    return [(i, b) for i, m in enumerate(ctx.messages) for b in m.tool_results]


@pytest.mark.parametrize("options", [{}, NON_DEFAULT], ids=["default", "non-default"])
def test_every_sample_and_corpus_conversation_keeps_the_contract(
    options: dict[str, Any],
) -> None:
    assert contract_failures(ObservationMask(**options)) == []


@settings(max_examples=60, deadline=None)
@given(ctx=contexts())
def test_generated_contexts_keep_the_contract(ctx: AgentContext) -> None:
    assert check_strategy(ObservationMask(), ctx) == []
    assert check_strategy(ObservationMask(keep_last=2, min_tokens=0), ctx) == []


def test_old_outputs_of_a_real_session_become_labelled_placeholders() -> None:
    ctx = compactkit.load_one(sample("pi-mono_before-compaction"))
    out = ObservationMask().compact(ctx)
    counter = get_counter()
    before, after = results(ctx), results(out)
    assert len(before) == len(after) == 67
    masked_tokens = masked = 0
    for n, ((i, old), (j, new)) in enumerate(zip(before, after, strict=True)):
        assert i == j
        assert (new.tool_call_id, new.is_error) == (old.tool_call_id, old.is_error)
        size = sum(counter.block(p) for p in old.content)
        if n >= len(before) - 10 or size < 40:
            assert new == old, f"result {n} should stay"
            continue
        if new == old:  # kept although old: only when a placeholder would not be smaller
            assert size < 80, f"result {n} ({size} tokens) should be masked"
            continue
        assert len(new.content) == 1 and isinstance(new.content[0], MaskedBlock)
        marker = new.content[0]
        assert marker.etag == payload_etag(old.content)
        assert f"({size} tokens, " in marker.label
        assert counter.block(new) < counter.block(old)
        masked_tokens += counter.block(old) - counter.block(new)
        masked += 1
    # the first read of the session: a 1,543-line file
    first = after[0][1].content[0]
    assert isinstance(first, MaskedBlock)
    path = "/Users/badlogic/workspaces/pi-mono/packages/coding-agent/src/main.ts"
    tokens = compactkit.count_tokens(before[0][1].text)
    lines = len(before[0][1].text.splitlines())
    assert first.label == f"read {path} output omitted ({tokens} tokens, {lines} lines)"
    assert lines == 1543
    saved = compactkit.count_tokens(ctx) - compactkit.count_tokens(out)
    assert saved == masked_tokens > 40_000
    assert masked == 30
    assert expand(out) == ctx


def test_unchanged_messages_are_reused_and_the_head_is_untouched() -> None:
    ctx = compactkit.load_one(sample("sphinx-doc"))
    out = ObservationMask().compact(ctx)
    changed = [
        i for i, (a, b) in enumerate(zip(ctx.messages, out.messages, strict=True)) if a is not b
    ]
    assert changed
    assert all(ctx.messages[i].role == "tool" for i in changed)
    assert out.system_instruction == ctx.system_instruction
    task = ctx.first_user_index
    assert task is not None and out.messages[task] is ctx.messages[task]
    assert validate(out, ctx) == []


def test_label_names_the_command_and_the_error_flag() -> None:
    call = ToolCallBlock(id="c1", name="bash", input={"command": "pytest -x tests/"})
    output = "\n".join(f"FAILED tests/test_{n}.py::test_thing - AssertionError" for n in range(30))
    ctx = AgentContext(
        messages=(
            message("user", "fix the tests"),
            Message(role="assistant", content=(call,)),
            Message(
                role="tool",
                content=(
                    ToolResultBlock(
                        tool_call_id="c1", content=(TextBlock(text=output),), is_error=True
                    ),
                ),
            ),
            message("assistant", "looking"),
        )
    )
    out = ObservationMask(keep_last=0).compact(ctx)
    result = out.messages[2].tool_results[0]
    assert result.is_error and result.tool_call_id == "c1"
    marker = result.content[0]
    assert isinstance(marker, MaskedBlock)
    tokens = compactkit.count_tokens(output)
    expected = f"bash `pytest -x tests/` output omitted ({tokens} tokens, 30 lines), error"
    assert marker.label == expected
    assert check_strategy(ObservationMask(keep_last=0), ctx) == []
    custom = ObservationMask(keep_last=0, placeholder="{status} {tool} {lines}").compact(ctx)
    label = custom.messages[2].tool_results[0].content[0]
    assert isinstance(label, MaskedBlock) and label.label == "error bash 30"


def test_nothing_to_do_returns_the_same_object() -> None:
    ctx = compactkit.load_one(sample("sphinx-doc"))
    assert ObservationMask(keep_last=10_000).compact(ctx) is ctx
    assert ObservationMask(min_tokens=10**9).compact(ctx) is ctx
    once = ObservationMask().compact(ctx)
    assert ObservationMask().compact(once) is once  # already masked: left alone
    no_tools = AgentContext(messages=(message("user", "hi"), message("assistant", "hello")))
    assert ObservationMask(keep_last=0).compact(no_tools) is no_tools


def test_small_outputs_and_excluded_tools_stay() -> None:
    ctx = compactkit.load_one(sample("sphinx-doc"))
    counter = get_counter()
    out = ObservationMask(min_tokens=200).compact(ctx)
    for (_, old), (_, new) in zip(results(ctx), results(out), strict=True):
        if sum(counter.block(p) for p in old.content) < 200:
            assert new == old
    assert ObservationMask(exclude_tools=["bash"]).compact(ctx) is ctx
    assert ObservationMask(exclude_tools="bash|read").options.exclude_tools == ("bash", "read")


def test_a_placeholder_never_costs_more_than_the_output() -> None:
    ctx = compactkit.load_one(sample("sphinx-doc"))
    counter = get_counter()
    out = ObservationMask(keep_last=0, min_tokens=0).compact(ctx)
    for (_, old), (_, new) in zip(results(ctx), results(out), strict=True):
        if new != old:
            assert counter.block(new) < counter.block(old)
        elif old.content:
            probe = MaskedBlock(etag=payload_etag(old.content), label="x")
            assert counter.block(old) <= counter.block(probe) + 40  # only tiny outputs stay


@pytest.mark.parametrize(
    ("template", "problem"),
    [
        ("{tool} {nope}", "unknown field {nope}"),
        ("{}", "unknown field {}"),
        ("{tool.upper}", "unknown field {tool.upper}"),
        ("{tokens:q}", "does not format"),
        ("{tool", "not a valid template"),
    ],
)
def test_bad_placeholders_are_rejected_when_options_are_validated(
    template: str, problem: str
) -> None:
    with pytest.raises(ConfigError, match="placeholder") as err:
        ObservationMask(placeholder=template)
    assert problem in str(err.value)
    with pytest.raises(ConfigError):
        get_strategy("observation-mask", placeholder=template)


def test_options_are_documented_and_strict() -> None:
    for name, info in ObservationMask.Options.model_fields.items():
        assert info.description, name
    description = ObservationMask.Options.model_fields["placeholder"].description or ""
    assert all(f"{{{field}}}" in description for field in PLACEHOLDER_FIELDS)
    with pytest.raises(ConfigError, match="keep_lst"):
        ObservationMask(keep_lst=3)
    pipeline = build_pipeline(["observation-mask:keep_last=2,placeholder={tool} gone"])
    strategy = pipeline.strategies[0]
    assert isinstance(strategy, ObservationMask)
    assert strategy.options.keep_last == 2 and strategy.options.placeholder == "{tool} gone"


def test_a_full_copy_that_collapsed_markers_point_at_is_not_masked() -> None:
    ctx = compactkit.load_one(sample("codemie_gemini_session"))
    collapsed = EtagCollapse().compact(ctx)
    out = ObservationMask(keep_last=3).compact(collapsed)
    assert out.messages[8] is collapsed.messages[8]  # the copy message 16's markers stand for
    assert ObservationMask(keep_last=3).compact(ctx).messages[8] is not ctx.messages[8]
    pipeline = build_pipeline(["etag-collapse", "static-elision", "observation-mask:keep_last=3"])
    assert check_strategy(pipeline, ctx) == []


def test_the_python_examples_of_the_docs_page_run(monkeypatch: pytest.MonkeyPatch) -> None:
    page = ROOT / "docs" / "strategies" / "observation-mask.md"
    blocks = re.findall(r"```python\n(.*?)```", page.read_text(encoding="utf-8"), re.S)
    assert blocks
    monkeypatch.chdir(ROOT)
    for n, code in enumerate(blocks):
        exec(compile(code, f"{page.name}[{n}]", "exec"), {"__name__": f"docs_{n}"})


@settings(max_examples=60, deadline=None)
@given(ctx=contexts())
def test_generated_contexts_stay_valid_after_etag_collapse(ctx: AgentContext) -> None:
    pipeline = Pipeline([EtagCollapse(min_tokens=0), ObservationMask(keep_last=2, min_tokens=0)])
    assert check_strategy(pipeline, ctx) == []
