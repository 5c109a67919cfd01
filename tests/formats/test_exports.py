"""Exports a provider accepts: every corpus conversation, after every built-in strategy and the
default pipeline, written by both provider writers as a request to send, passes the providers'
documented ordering rules and the official SDK request types; plus the writer options (merging,
pending calls) on small hand-made contexts, and the CLI's one warning line."""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from compactkit import AgentContext
from compactkit.cli import make_cli
from compactkit.context import (
    ImageBlock,
    MaskedBlock,
    Message,
    TextBlock,
    ThinkingBlock,
    ToolCallBlock,
    ToolResultBlock,
)
from compactkit.defaults import default_pipeline
from compactkit.formats.anthropic_messages import AnthropicMessagesFormat, to_anthropic_request
from compactkit.formats.export import NO_RESULT, PLACEHOLDER_USER_TEXT, ExportNotes, WriterOptions
from compactkit.formats.openai_chat import OpenAIChatFormat, to_openai_messages, to_openai_request
from compactkit.formats.provider_rules import (
    LITELLM_EXTRA_KEYS,
    anthropic_rule_problems,
    anthropic_sdk_problems,
    openai_rule_problems,
    openai_sdk_problems,
)
from compactkit.pipeline import build_pipeline
from compactkit.registry import make_registry
from tests.conftest import every_conversation, sample
from tests.formats.test_openai_chat import parse

ANTHROPIC = AnthropicMessagesFormat()
OPENAI = OpenAIChatFormat()
REQUEST = WriterOptions(request=True)
BUDGET = 2000  # small enough that the budgeted strategies act on most conversations
PIPELINES: dict[str, list[str]] = {
    "none": [],
    "cap-output": ["cap-output:max_tokens=300"],
    "etag-collapse": ["etag-collapse"],
    "llm-summary": ["llm-summary"],
    "observation-mask": ["observation-mask:keep_last=2"],
    "sliding-window": ["sliding-window"],
    "static-elision": ["static-elision"],
    "default": default_pipeline(BUDGET),
    # the peers at thresholds small enough to act on most conversations
    "peer-openhands": ["peer-openhands:max_size=20"],
    "peer-claude-code": ["peer-claude-code:context_window=20000,summary_reserve=2000"],
    "peer-codex": ["peer-codex:context_window=10000,user_message_tokens=2000"],
    "peer-langchain": ["peer-langchain:trigger_tokens=6000,keep_messages=6"],
    "peer-pi": ["peer-pi:context_window=12000,reserve_tokens=2000,keep_recent_tokens=3000"],
    "peer-anthropic-clear": ["peer-anthropic-clear:trigger=5000"],
    "peer-anthropic-compact": ["peer-anthropic-compact:trigger=50000"],
    "peer-gemini-cli": ["peer-gemini-cli:token_limit=20000"],
    "peer-openai-agents": ["peer-openai-agents:recent_turns=1,max_output_chars=200"],
    "peer-adk": ["peer-adk:compaction_interval=1"],
    # the arrival folders, run on each message as it arrives (then the trigger-time stage)
    "fold-json": ["fold-json"],
    "fold-listings": ["fold-listings"],
    "fold-logs": ["fold-logs"],
    "fold-repeats": ["fold-repeats"],
    "default:arrival=on": ["default:arrival=on"],
}
NEEDS_SETUP = {"peer-headroom"}
"""Strategies that run a peer set up in an environment of its own (tests/bench/test_peer_headroom.py)."""


@cache
def compacted(pipeline: str) -> tuple[tuple[str, AgentContext], ...]:
    """Every sample and corpus conversation after `pipeline` (run once per pipeline)."""
    convs = every_conversation()
    if not PIPELINES[pipeline]:
        return tuple(convs)
    pipe = build_pipeline(PIPELINES[pipeline], budget=BUDGET)
    arrived = ((name, pipe.arrive(ctx.replace(messages=()), ctx.messages)) for name, ctx in convs)
    return tuple((name, pipe.compact(ctx)) for name, ctx in arrived)


def test_every_builtin_strategy_is_covered() -> None:
    names = set(make_registry(entry_points=False).strategies.names())
    assert names - NEEDS_SETUP <= set(PIPELINES)


# --------------------------------------------------------------------------- every export


@pytest.mark.corpus
@pytest.mark.parametrize("pipeline", list(PIPELINES))
def test_every_anthropic_request_is_accepted(pipeline: str) -> None:
    failures = []
    for name, ctx in compacted(pipeline):
        body = to_anthropic_request(ctx, REQUEST)
        problems = anthropic_rule_problems(body) + anthropic_sdk_problems(body)
        failures += [f"{name}: {p}" for p in problems[:3]]
        if ctx.metadata.get("tools"):
            assert body.get("tools"), f"{name}: the source's tool definitions were dropped"
    assert failures == []


@pytest.mark.corpus
@pytest.mark.parametrize("pipeline", list(PIPELINES))
def test_every_openai_request_is_accepted(pipeline: str) -> None:
    failures = []
    for name, ctx in compacted(pipeline):
        body = to_openai_request(ctx, REQUEST)
        tools = body.get("tools")
        problems = openai_rule_problems(body["messages"], tools)
        problems += openai_sdk_problems(body["messages"], tools)
        failures += [f"{name}: {p}" for p in problems[:3]]
        assert bool(tools) == bool(ctx.metadata.get("tools"))
    assert failures == []


@pytest.mark.corpus
@pytest.mark.parametrize("pipeline", ["none", "default"])
def test_every_saved_session_fits_the_sdk_types(pipeline: str) -> None:
    """The saved-session path (the default) is not merged, but every block still fits the SDK
    types; its only extra keys are litellm's thinking (and tool message names) for openai-chat."""
    failures = []
    for name, ctx in compacted(pipeline):
        body = to_anthropic_request(ctx)
        failures += [f"{name}: {p}" for p in anthropic_sdk_problems(body)[:3]]
        messages = to_openai_messages(ctx)
        problems = openai_sdk_problems(messages, extra_ok=LITELLM_EXTRA_KEYS)
        failures += [f"{name}: {p}" for p in problems[:3]]
    assert failures == []


# --------------------------------------------------------------------------- hand-made contexts


def user(text: str) -> Message:
    return Message(role="user", content=(TextBlock(text=text),))


def assistant(*blocks: Any) -> Message:
    return Message(
        role="assistant",
        content=tuple(TextBlock(text=b) if isinstance(b, str) else b for b in blocks),
    )


def result(cid: str, text: str = "ok") -> Message:
    return Message(
        role="tool", content=(ToolResultBlock(tool_call_id=cid, content=(TextBlock(text=text),)),)
    )


def call(cid: str, name: str = "bash") -> ToolCallBlock:
    return ToolCallBlock(id=cid, name=name, input={"command": "ls"})


# Claude-Code-like: a reply split over two assistant messages, a reminder after the results, a
# pending call at the end, and no tool definitions.
SPLIT = AgentContext(
    system_instruction="sys",
    messages=(
        user("fix it"),
        assistant(ThinkingBlock(thinking="hm", signature="sig"), "Looking."),
        assistant(call("toolu_1")),
        result("toolu_1", "a.py"),
        Message(
            role="user", content=(TextBlock(text="<reminder>"),), metadata={"origin": "harness"}
        ),
        user("also b.py"),
        assistant("Sure.  ", call("toolu_2")),
    ),
)


def test_anthropic_request_merges_turns_and_answers_the_pending_call() -> None:
    notes = ExportNotes()
    body = to_anthropic_request(SPLIT, REQUEST, notes)
    assert [m["role"] for m in body["messages"]] == [
        "user",
        "assistant",
        "user",
        "assistant",
        "user",
    ]
    assert [b["type"] for b in body["messages"][1]["content"]] == ["thinking", "text", "tool_use"]
    assert body["messages"][2]["content"] == [
        {"type": "tool_result", "tool_use_id": "toolu_1", "content": "a.py"},
        {"type": "text", "text": "<reminder>"},
        {"type": "text", "text": "also b.py"},
    ]
    assert body["messages"][4]["content"] == [
        {"type": "tool_result", "tool_use_id": "toolu_2", "content": NO_RESULT, "is_error": True}
    ]
    assert body["tools"] == [{"name": "bash", "input_schema": {"type": "object"}}]
    assert anthropic_rule_problems(body) == [] and anthropic_sdk_problems(body) == []
    assert notes.warning("anthropic-messages") == (
        "anthropic-messages export changed: 2 consecutive turns merged, "
        "1 pending calls answered, 1 tool definitions synthesized from calls"
    )


def test_anthropic_session_default_keeps_turns_and_the_pending_call() -> None:
    body = to_anthropic_request(SPLIT)
    assert [m["role"] for m in body["messages"]] == [
        "user", "assistant", "assistant", "user", "user", "assistant",
    ]  # fmt: skip
    assert "tools" not in body
    problems = anthropic_rule_problems(body, pending_ok=True)
    assert any("two assistant messages in a row" in p for p in problems)
    assert any("no tools" in p for p in problems)
    assert not any("without a tool_result" in p for p in problems)
    assert any("without a tool_result" in p for p in anthropic_rule_problems(body))


@pytest.mark.parametrize("fmt", ["anthropic", "openai"])
def test_pending_options(fmt: str) -> None:
    def written(pending: Any, request: bool = True) -> list[dict[str, Any]]:
        options = WriterOptions(request=request, pending=pending)
        if fmt == "anthropic":
            return list(to_anthropic_request(SPLIT, options)["messages"])
        return to_openai_messages(SPLIT, options)

    def ids(messages: list[dict[str, Any]]) -> tuple[list[str], list[str]]:
        calls = [c["id"] for m in messages for c in m.get("tool_calls") or []]
        calls += [b["id"] for m in messages for b in _blocks(m) if b["type"] == "tool_use"]
        results = [m["tool_call_id"] for m in messages if m["role"] == "tool"]
        results += [
            b["tool_use_id"] for m in messages for b in _blocks(m) if b["type"] == "tool_result"
        ]
        return calls, results

    assert ids(written("keep")) == (["toolu_1", "toolu_2"], ["toolu_1"])
    assert ids(written("drop")) == (["toolu_1"], ["toolu_1"])
    assert ids(written("answer")) == (["toolu_1", "toolu_2"], ["toolu_1", "toolu_2"])
    assert ids(written(None)) == ids(written("answer"))  # a request answers by default
    assert ids(written(None, request=False)) == ids(written("keep"))  # a session keeps it
    dropped = written("drop")
    last = dropped[-1]
    assert last["role"] == "assistant"  # the call went, its text stayed (whitespace stripped)
    text = last["content"] if fmt == "openai" else last["content"][0]["text"]
    assert text.strip() == "Sure."


def _blocks(m: dict[str, Any]) -> list[dict[str, Any]]:
    return m["content"] if isinstance(m.get("content"), list) else []


def test_anthropic_request_starting_with_assistant_gets_a_placeholder_user_turn() -> None:
    ctx = AgentContext(messages=(assistant("resumed"), user("go on"), assistant("done ")))
    notes = ExportNotes()
    body = to_anthropic_request(ctx, REQUEST, notes)
    assert body["messages"][0] == {
        "role": "user",
        "content": [{"type": "text", "text": PLACEHOLDER_USER_TEXT}],
    }
    assert body["messages"][-1]["content"] == [{"type": "text", "text": "done"}]
    assert anthropic_rule_problems(body) == []
    assert notes.changed["placeholder first user turns added"] == 1
    assert anthropic_rule_problems(to_anthropic_request(ctx))[0].endswith(
        "the first message must be a user message"
    )


def test_call_ids_are_rewritten_consistently_for_a_request() -> None:
    long_id = "call_Xy12|fc_0123456789abcdef0123456789abcdef"  # pi's OpenAI Responses ids
    ctx = AgentContext(messages=(user("go"), assistant(call(long_id)), result(long_id)))
    body = to_anthropic_request(ctx, REQUEST)
    new_id = body["messages"][1]["content"][0]["id"]
    assert new_id == "call_Xy12_fc_0123456789abcdef0123456789abcdef"
    assert body["messages"][2]["content"][0]["tool_use_id"] == new_id
    messages = to_openai_messages(ctx, REQUEST)
    assert len(messages[1]["tool_calls"][0]["id"]) <= 40
    assert messages[2]["tool_call_id"] == messages[1]["tool_calls"][0]["id"]
    assert openai_rule_problems(messages) == []
    session = to_openai_messages(ctx)  # a saved session keeps the ids it had
    assert session[1]["tool_calls"][0]["id"] == long_id
    assert any("longer than 40" in p for p in openai_rule_problems(session))


def test_openai_request_drops_thinking_names_and_images_and_reorders_results() -> None:
    image = ImageBlock(media_type="image/png", data="iVBOR")
    ctx = AgentContext(
        messages=(
            user("go"),
            assistant(ThinkingBlock(thinking="plan", signature="s"), call("c1"), call("c2")),
            Message(
                role="tool",
                name="bash",
                content=(ToolResultBlock(tool_call_id="c1", content=(TextBlock(text="x"), image)),),
            ),
            user("interjection"),
            result("c2"),
            assistant(ThinkingBlock(thinking="only thinking")),
            assistant(MaskedBlock(etag="e", label="old")),
        ),
        metadata={"tools": [{"name": "bash", "input_schema": {"type": "object"}}]},
    )
    notes = ExportNotes()
    body = to_openai_request(ctx, REQUEST, notes)
    roles = [m["role"] for m in body["messages"]]
    assert roles == ["user", "assistant", "tool", "tool", "user", "assistant"]
    assert "name" not in body["messages"][2] and "reasoning_content" not in body["messages"][1]
    assert body["tools"] == [
        {"type": "function", "function": {"name": "bash", "parameters": {"type": "object"}}}
    ]
    assert openai_rule_problems(body["messages"], body["tools"]) == []
    assert openai_sdk_problems(body["messages"], body["tools"]) == []
    assert notes.warning("openai-chat") == (
        "openai-chat export dropped 2 thinking blocks, 1 images, 1 tool message names, "
        "1 markers written as text, 1 empty messages; changed: 1 messages moved after tool results"
    )
    session = to_openai_messages(ctx)  # as recorded: the user message splits the results
    assert openai_rule_problems(session, pending_ok=True) == [
        "messages[1]: tool_calls c2 not answered by the tool messages right after",
        "messages[4]: tool message not right after an assistant's tool_calls",
        "messages[5]: assistant message with neither content nor tool_calls",
    ]


def test_openai_writer_keeps_tool_definitions_and_reads_them_back() -> None:
    tools = [
        {"name": "bash", "description": "run", "input_schema": {"type": "object"}},
        {"type": "web_search_20250305", "name": "web_search"},
    ]
    ctx = AgentContext(messages=(user("go"),), metadata={"tools": tools})
    result_ = OPENAI.export([ctx])
    data = json.loads(result_.text)
    assert data["tools"] == [
        {
            "type": "function",
            "function": {"name": "bash", "description": "run", "parameters": {"type": "object"}},
        }
    ]
    assert result_.warning("openai-chat") == (
        "openai-chat export dropped 1 tool definitions with no chat-completions form"
    )
    (again,) = OPENAI.load(parse(result_.text))
    assert again.metadata["tools"] == data["tools"]
    assert OPENAI.dump([again]) == result_.text  # the tools, once converted, round-trip


def test_saved_session_round_trips_after_the_writer_changes() -> None:
    for fmt in (ANTHROPIC, OPENAI):
        for name, ctx in compacted("none")[:40]:
            (ctx1,) = fmt.load(parse(fmt.dump([ctx])))
            (ctx2,) = fmt.load(parse(fmt.dump([ctx1])))
            assert ctx2 == ctx1, f"{fmt.name} {name}"


# --------------------------------------------------------------------------- the checkers can fail


def test_anthropic_rules_catch_what_the_api_refuses() -> None:
    body = {
        "messages": [
            {"role": "assistant", "content": [{"type": "tool_use", "id": "a.1", "name": "x", "input": {}}]},
            {"role": "user", "content": [
                {"type": "text", "text": " "}, {"type": "tool_result", "tool_use_id": "a.1"},
            ]},
            {"role": "user", "content": ""},
            {"role": "system", "content": "s"},
            {"role": "assistant", "content": "end "},
        ],
        "tools": [{"name": "bad name", "input_schema": {"type": "object"}}],
    }  # fmt: skip
    problems = anthropic_rule_problems(body)
    expected = [
        "messages[0]: the first message must be a user message",
        "messages[0]: tool_use id 'a.1' does not match ^[a-zA-Z0-9_-]+$",
        "messages[0]: tool_use a.1 without a tool_result at the start of the next message",
        "messages[1].content[0]: text block without non-whitespace text",
        "messages[1].content[1]: tool_result after other content",
        "messages[2]: two user messages in a row (roles must alternate)",
        "messages[2]: empty content",
        "messages[3]: role 'system' (only user and assistant; system is separate)",
        "messages[4]: final assistant content ends with whitespace",
        "tools[0]: tool name 'bad name' does not match ^[a-zA-Z0-9_-]{1,64}$",
    ]
    assert problems == expected
    assert anthropic_rule_problems({"messages": [body["messages"][0]]})[-1] == (
        "tools: the request holds tool_use / tool_result blocks but no tools"
    )


def test_openai_rules_catch_what_the_api_refuses() -> None:
    messages = [
        {"role": "user", "content": ""},
        {"role": "tool", "tool_call_id": "z", "content": "x"},
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "a", "type": "function", "function": {"name": "f", "arguments": "{}"}},
            {"id": "b", "type": "function", "function": {"name": "f", "arguments": "{}"}},
        ]},
        {"role": "tool", "tool_call_id": "a", "content": "1"},
        {"role": "user", "content": "hi"},
        {"role": "tool", "tool_call_id": "b", "content": "2"},
        {"role": "assistant", "content": ""},
    ]  # fmt: skip
    assert openai_rule_problems(messages) == [
        "messages[0]: empty user content",
        "messages[1]: tool message not right after an assistant's tool_calls",
        "messages[2]: tool_calls b not answered by the tool messages right after",
        "messages[5]: tool message not right after an assistant's tool_calls",
        "messages[6]: assistant message with neither content nor tool_calls",
    ]


def test_sdk_checks_reach_the_content_blocks() -> None:
    body = {
        "messages": [
            {"role": "user", "content": [{"type": "text", "text": "x", "colour": "red"}]},
            {"role": "assistant", "content": [{"type": "thinking", "thinking": "x"}]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": 7}]},
        ]
    }
    problems = anthropic_sdk_problems(body)
    assert "$.messages[1].content[0].ThinkingBlockParam.signature: Field required" in problems
    assert any(p.startswith("$.messages[2].content[0]") and "string" in p for p in problems)
    ok = {"messages": [body["messages"][0]]}
    assert anthropic_sdk_problems(ok) == ["$.messages[0].content[0]: unknown key 'colour'"]
    messages = [
        {"role": "assistant", "content": [{"type": "image_url", "image_url": {"url": "u"}}]},
        {"role": "tool", "content": "x"},
    ]
    problems = openai_sdk_problems(messages)
    assert any(p.startswith("$.messages[0].content") for p in problems)
    assert any("tool_call_id" in p for p in problems)
    named = [{"role": "tool", "tool_call_id": "a", "content": "x", "name": "bash"}]
    assert openai_sdk_problems(named) == ["$.messages[0]: unknown key 'name'"]
    assert openai_sdk_problems(named, extra_ok=LITELLM_EXTRA_KEYS) == []


# --------------------------------------------------------------------------- the command line

CLI = make_cli(lambda: make_registry(entry_points=False))


def test_convert_prints_one_warning_line_and_honours_the_options(tmp_path: Path) -> None:
    source = sample("pi-mono_before-compaction")
    out = tmp_path / "request.json"
    args = ["convert", str(source), "--to", "openai-chat", "--request", "-o", str(out)]
    result = CliRunner().invoke(CLI, args)
    assert result.exit_code == 0, result.stderr
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("warning: openai-chat export dropped ")
    assert " thinking blocks" in lines[0]
    body = json.loads(out.read_text(encoding="utf-8"))
    messages = body if isinstance(body, list) else body["messages"]
    assert openai_rule_problems(messages) == []
    result = CliRunner().invoke(
        CLI, ["convert", str(source), "--to", "anthropic-messages", "--pending", "drop"]
    )
    assert result.exit_code == 0
    assert len(result.stderr.splitlines()) <= 1
    result = CliRunner().invoke(CLI, ["convert", str(source), "--to", "compactkit", "--request"])
    assert result.exit_code == 2
    assert "--request and --pending apply to provider formats" in result.stderr
