"""The anthropic-messages adapter: request bodies and saved arrays, and its writer.

There is no corpus folder for this format: the inputs are written here following the Messages API
documentation (content blocks text / image / tool_use / tool_result / thinking / redacted_thinking),
and every corpus conversation of every other format is exported to it and read back.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

import compactkit
from compactkit import AgentContext
from compactkit.context import (
    Block,
    ImageBlock,
    MaskedBlock,
    Message,
    TextBlock,
    ThinkingBlock,
    ToolCallBlock,
    ToolResultBlock,
    marker_text,
)
from compactkit.errors import BadInputError
from compactkit.formats.anthropic_messages import AnthropicMessagesFormat, to_anthropic_request
from compactkit.formats.openai_chat import OpenAIChatFormat
from tests.conftest import corpus_files, sample
from tests.formats._checks import pairing_problems
from tests.formats.test_openai_chat import (
    actual_view,
    corpus_contexts,
    norm_image,
    openai_order_problems,
    openai_shape_problems,
    parse,
    parts,
    reimport,
    sdk_module,
    shape_problems,
)

FMT = AnthropicMessagesFormat()
OPENAI = OpenAIChatFormat()

# A request as the API documentation describes one: system as text blocks (with cache_control),
# extended thinking with signatures, a redacted block, parallel tool use, results with string and
# block content, an error result, an image, and text after the results.
REQUEST: dict[str, Any] = {
    "model": "claude-sonnet-4-5",
    "max_tokens": 2048,
    "system": [
        {"type": "text", "text": "You are a coding agent."},
        {"type": "text", "text": "Work in /repo.", "cache_control": {"type": "ephemeral"}},
    ],
    "tools": [
        {
            "name": "bash",
            "description": "Run a shell command",
            "input_schema": {"type": "object", "properties": {"command": {"type": "string"}}},
        }
    ],
    "messages": [
        {"role": "user", "content": "Why does the test fail?"},
        {
            "role": "assistant",
            "content": [
                {"type": "thinking", "thinking": "Run the tests first.", "signature": "EqQBCgIYAh"},
                {"type": "text", "text": "Let me run them."},
                {
                    "type": "tool_use",
                    "id": "toolu_01",
                    "name": "bash",
                    "input": {"command": "pytest -q"},
                },
                {"type": "tool_use", "id": "toolu_02", "name": "bash", "input": {"command": "ls"}},
            ],
        },
        {
            "role": "user",
            "content": [
                {
                    "type": "tool_result",
                    "tool_use_id": "toolu_01",
                    "content": "1 failed",
                    "is_error": True,
                },
                {
                    "type": "tool_result",
                    "tool_use_id": "toolu_02",
                    "content": [
                        {"type": "text", "text": "a.py\nb.png"},
                        {
                            "type": "image",
                            "source": {
                                "type": "base64",
                                "media_type": "image/png",
                                "data": "iVBOR",
                            },
                        },
                    ],
                },
                {"type": "text", "text": "b.png is the screenshot."},
            ],
        },
        {
            "role": "assistant",
            "content": [
                {"type": "redacted_thinking", "data": "EmwKAhgBEgy3va3pzix"},
                {
                    "type": "tool_use",
                    "id": "toolu_03",
                    "name": "bash",
                    "input": {"command": "cat a.py"},
                },
            ],
        },
        {
            "role": "user",
            "content": [{"type": "tool_result", "tool_use_id": "toolu_03", "content": "x = 1"}],
        },
        {"role": "assistant", "content": [{"type": "text", "text": "a.py sets x = 1."}]},
    ],
}

# A saved array as Cline writes api_conversation_history.json (Anthropic messages plus `ts`).
CLINE = [
    {
        "role": "user",
        "content": [{"type": "text", "text": "<task>fix it</task>"}],
        "ts": 1700000000000,
    },
    {
        "role": "assistant",
        "content": [
            {"type": "text", "text": "Reading."},
            {"type": "tool_use", "id": "toolu_a", "name": "read_file", "input": {"path": "x.py"}},
        ],
        "ts": 1700000001000,
    },
    {
        "role": "user",
        "content": [
            {
                "type": "tool_result",
                "tool_use_id": "toolu_a",
                "content": [{"type": "text", "text": "x"}],
            }
        ],
        "ts": 1700000002000,
    },
]


def write(tmp_path: Path, data: Any, name: str = "session.json") -> Path:
    path = tmp_path / name
    path.write_text(json.dumps(data), encoding="utf-8")
    return path


# --------------------------------------------------------------------------- reading


def test_request_body_loads_with_every_block(tmp_path: Path) -> None:
    (ctx,) = compactkit.load(write(tmp_path, REQUEST))  # auto-detection
    assert ctx.metadata["source_format"] == "anthropic-messages"
    assert ctx.metadata["model"] == "claude-sonnet-4-5"
    assert ctx.metadata["tools"] == REQUEST["tools"]
    assert ctx.system_instruction == "You are a coding agent.\nWork in /repo."
    assert ctx.task == "Why does the test fail?"
    assert pairing_problems(ctx) == []
    assert [m.role for m in ctx.messages] == [
        "user",
        "assistant",
        "tool",
        "user",
        "assistant",
        "tool",
        "assistant",
    ]
    assert ctx.messages[1].content == (
        ThinkingBlock(thinking="Run the tests first.", signature="EqQBCgIYAh"),
        TextBlock(text="Let me run them."),
        ToolCallBlock(id="toolu_01", name="bash", input={"command": "pytest -q"}),
        ToolCallBlock(id="toolu_02", name="bash", input={"command": "ls"}),
    )
    assert ctx.messages[2].content == (
        ToolResultBlock(
            tool_call_id="toolu_01", content=(TextBlock(text="1 failed"),), is_error=True
        ),
        ToolResultBlock(
            tool_call_id="toolu_02",
            content=(
                TextBlock(text="a.py\nb.png"),
                ImageBlock(media_type="image/png", data="iVBOR"),
            ),
        ),
    )
    assert ctx.messages[3].text == "b.png is the screenshot."
    assert ctx.messages[4].content[0] == ThinkingBlock(
        thinking="", signature="EmwKAhgBEgy3va3pzix", redacted=True
    )

    # independent counts from the raw JSON
    raw = REQUEST["messages"]
    blocks = [b for m in raw if isinstance(m["content"], list) for b in m["content"]]
    assert sum(len(m.tool_calls) for m in ctx.messages) == sum(
        b["type"] == "tool_use" for b in blocks
    )
    assert sum(len(m.tool_results) for m in ctx.messages) == sum(
        b["type"] == "tool_result" for b in blocks
    )


def test_cline_array_loads_with_timestamps(tmp_path: Path) -> None:
    (ctx,) = compactkit.load(write(tmp_path, CLINE))
    assert ctx.metadata == {"source_format": "anthropic-messages"}
    assert ctx.system_instruction is None
    assert [m.role for m in ctx.messages] == ["user", "assistant", "tool"]
    assert [m.metadata.get("timestamp") for m in ctx.messages] == [m["ts"] for m in CLINE]
    assert ctx.messages[2].tool_results[0].text == "x"
    assert pairing_problems(ctx) == []


def test_unanswered_call_and_unknown_result_are_synthesized(tmp_path: Path) -> None:
    data = [
        {"role": "user", "content": "go"},
        {
            "role": "assistant",
            "content": [{"type": "tool_use", "id": "t1", "name": "a", "input": {}}],
        },
        {"role": "user", "content": [{"type": "text", "text": "interrupted"}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t9", "content": "?"}]},
        {
            "role": "assistant",
            "content": [{"type": "tool_use", "id": "t2", "name": "b", "input": {}}],
        },
    ]
    (ctx,) = compactkit.load(write(tmp_path, data))
    assert pairing_problems(ctx) == []  # t2 stays pending: the session ends on it
    assert ctx.metadata["synthesized_results"] == 1 and ctx.metadata["synthesized_calls"] == 1
    assert ctx.messages[2].metadata == {"synthesized": True}
    assert ctx.messages[2].tool_results[0].is_error


def test_truncated_file_is_bad_input(tmp_path: Path) -> None:
    text = json.dumps(REQUEST, indent=1)
    bad = tmp_path / "truncated.json"
    bad.write_text(text[: len(text) // 2], encoding="utf-8")
    with pytest.raises(BadInputError):
        compactkit.load(bad)
    with pytest.raises(BadInputError, match="not Anthropic messages"):
        compactkit.load(sample("openhands-sdk_fncall"), format="anthropic-messages")


# --------------------------------------------------------------------------- sniffing


def test_sniffing_tells_the_two_apart() -> None:
    assert FMT.sniff(parse(json.dumps(REQUEST))) and not OPENAI.sniff(parse(json.dumps(REQUEST)))
    assert FMT.sniff(parse(json.dumps(CLINE))) and not OPENAI.sniff(parse(json.dumps(CLINE)))
    body = {"system": "be brief", "messages": [{"role": "user", "content": "hi"}]}
    assert FMT.sniff(parse(json.dumps(body))) and not OPENAI.sniff(parse(json.dumps(body)))
    strings = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}]
    assert OPENAI.sniff(parse(json.dumps(strings))) and not FMT.sniff(parse(json.dumps(strings)))
    # every corpus file: see test_openai_chat.test_sniffs_only_its_own_files


# --------------------------------------------------------------------------- what survives


def anthropic_view(
    ctx: AgentContext,
) -> tuple[str | None, list[tuple[str, str | None, tuple[Any, ...]]]]:
    """What a Messages API request keeps of `ctx`: thinking signed by Claude (or by an unknown
    model) only, object inputs, results
    (with is_error) of consecutive tool messages together, mid-conversation system text as user
    text, no names, no empty text or empty messages, markers as text."""
    system = ctx.system_instruction
    messages = list(ctx.messages)
    if system is None and messages and messages[0].role == "system":
        system = messages.pop(0).text
    out: list[tuple[str, str | None, tuple[Any, ...]]] = []
    for m in messages:
        if m.role == "assistant":
            model = m.metadata.get("model") or ctx.metadata.get("model")
            claude = not isinstance(model, str) or any(
                k in model.lower() for k in ("claude", "anthropic")
            )
            blocks: list[Block] = []
            for b in m.content:
                if isinstance(b, ThinkingBlock):
                    if b.signature is not None and claude:
                        blocks.append(b)
                elif isinstance(b, ToolCallBlock):
                    value = b.input if isinstance(b.input, dict) else {"input": b.input}
                    blocks.append(ToolCallBlock(id=b.id, name=b.name, input=value))
                elif isinstance(b, ImageBlock):
                    blocks.append(norm_image(b))
                else:
                    blocks.extend(parts([b]))
            if blocks:
                out.append(("assistant", None, tuple(blocks)))
            continue
        results = tuple(
            ToolResultBlock(
                tool_call_id=r.tool_call_id, content=parts(r.content), is_error=r.is_error
            )
            for r in m.tool_results
        )
        others = parts(b for b in m.content if not isinstance(b, ToolResultBlock))
        if results:
            if out and out[-1][0] == "tool":
                out[-1] = ("tool", None, out[-1][2] + results)
            else:
                out.append(("tool", None, results))
        if others:
            out.append(("user", None, others))
    return system or None, out


def anthropic_order_problems(body: dict[str, Any]) -> list[str]:
    """What the API refuses about tool results: one that does not answer a tool_use of the
    assistant message right before it, or that comes after other content in its message."""
    problems = []
    previous: dict[str, Any] | None = None
    for n, m in enumerate(body["messages"]):
        blocks = m["content"] if isinstance(m["content"], list) else []
        called = {
            b["id"]
            for b in (previous or {}).get("content", [])
            if isinstance(b, dict) and b["type"] == "tool_use"
        }
        seen_other = False
        for b in blocks:
            if b["type"] != "tool_result":
                seen_other = True
            elif seen_other:
                problems.append(f"messages[{n}]: tool_result after other content")
            elif b["tool_use_id"] not in called:
                problems.append(
                    f"messages[{n}]: tool_result {b['tool_use_id']} answers no call just before"
                )
        previous = m
    return problems


def anthropic_shape_problems(body: dict[str, Any]) -> list[str]:
    params = sdk_module("anthropic", "types.message_create_params")
    full = {**body, "model": "claude-sonnet-4-5", "max_tokens": 1024}
    return shape_problems(full, params.MessageCreateParamsNonStreaming)


@pytest.mark.corpus
@pytest.mark.parametrize("path", corpus_files(), ids=lambda p: p.name[:40])
def test_export_reimport_is_stable_for_every_corpus_conversation(path: Path) -> None:
    for ctx in corpus_contexts(path):
        body = to_anthropic_request(ctx)
        assert anthropic_shape_problems(body) == []
        if pairing_problems(ctx) == []:
            assert anthropic_order_problems(body) == []
        ctx1 = reimport(FMT, ctx)
        assert reimport(FMT, ctx1) == ctx1
        assert actual_view(ctx1) == anthropic_view(ctx)
        if pairing_problems(ctx) == []:
            assert pairing_problems(ctx1) == []


def test_request_round_trips_exactly_and_passes_the_sdk_shape(tmp_path: Path) -> None:
    (ctx,) = compactkit.load(write(tmp_path, REQUEST))
    body = to_anthropic_request(ctx)
    expected = dict(REQUEST)  # the model and max_tokens too
    expected["system"] = "You are a coding agent.\nWork in /repo."
    expected["messages"] = [
        m
        if m["role"] != "user" or isinstance(m["content"], list)
        else {**m, "content": [{"type": "text", "text": m["content"]}]}
        for m in REQUEST["messages"]
    ]
    assert body == expected
    assert anthropic_shape_problems(body) == []
    assert anthropic_order_problems(body) == []
    assert reimport(FMT, ctx).messages == tuple(
        Message(role=m.role, content=m.content) for m in ctx.messages
    )


def test_bundled_openai_sample_exports_to_a_valid_request() -> None:
    (ctx,) = compactkit.load(sample("openhands-sdk_fncall"))
    body = to_anthropic_request(ctx)
    assert body["system"] == ctx.system_instruction
    assert [m["role"] for m in body["messages"]][:3] == ["user", "assistant", "user"]
    assert body["messages"][2]["content"][0]["type"] == "tool_result"
    assert anthropic_order_problems(body) == []
    ctx1 = reimport(FMT, ctx)
    assert [c.id for m in ctx1.messages for c in m.tool_calls] == [
        c.id for m in ctx.messages for c in m.tool_calls
    ]
    assert [r.text for m in ctx1.messages for r in m.tool_results] == [
        r.text for m in ctx.messages for r in m.tool_results
    ]


def test_writer_merges_results_drops_unsigned_thinking_and_renders_markers() -> None:
    masked = MaskedBlock(etag="e1", label="old output")
    ctx = AgentContext(
        system_instruction="sys",
        messages=(
            Message(role="user", content=(TextBlock(text="go"),)),
            Message(
                role="assistant",
                content=(
                    ThinkingBlock(thinking="unsigned, from another provider"),
                    ToolCallBlock(id="a", name="patch", input="*** Begin Patch"),
                    ToolCallBlock(id="b", name="ls", input={}),
                ),
            ),
            Message(role="tool", content=(ToolResultBlock(tool_call_id="a", content=(masked,)),)),
            Message(role="tool", content=(ToolResultBlock(tool_call_id="b", is_error=True),)),
            Message(role="system", content=(TextBlock(text="note: budget low"),)),
            Message(role="assistant", name="bot", content=(TextBlock(text="done"),)),
        ),
        metadata={
            "tools": [
                {"type": "function", "function": {"name": "ls", "parameters": {"type": "object"}}}
            ]
        },
    )
    body = to_anthropic_request(ctx)
    assert body["messages"][1]["content"] == [
        {"type": "tool_use", "id": "a", "name": "patch", "input": {"input": "*** Begin Patch"}},
        {"type": "tool_use", "id": "b", "name": "ls", "input": {}},
    ]
    assert body["messages"][2] == {
        "role": "user",
        "content": [
            {"type": "tool_result", "tool_use_id": "a", "content": marker_text(masked)},
            {"type": "tool_result", "tool_use_id": "b", "is_error": True},
            {"type": "text", "text": "note: budget low"},
        ],
    }
    assert body["tools"] == [{"name": "ls", "input_schema": {"type": "object"}}]
    assert anthropic_shape_problems(body) == []
    assert anthropic_order_problems(body) == []
    ctx1 = reimport(FMT, ctx)
    assert actual_view(ctx1) == anthropic_view(ctx)
    assert ctx1.metadata["tools"] == body["tools"]


def test_several_contexts_dump_as_jsonl_and_load_back() -> None:
    contexts = compactkit.load(sample("tau_bench"))
    text = FMT.dump(contexts)
    doc = parse(text)
    assert doc.kind == "jsonl" and FMT.sniff(doc)
    again = FMT.load(doc)
    assert [c.messages for c in again] == [reimport(FMT, c).messages for c in contexts]


def test_shape_and_order_checks_catch_what_the_api_refuses() -> None:
    # the checks above are only worth something if they can fail
    unsigned = {
        "messages": [{"role": "assistant", "content": [{"type": "thinking", "thinking": "x"}]}]
    }
    assert anthropic_shape_problems(unsigned) == [
        "$.messages[0].content[0]: missing 'signature' (ThinkingBlockParam)"
    ]
    early = {
        "messages": [
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1"}]},
            {
                "role": "assistant",
                "content": [{"type": "tool_use", "id": "t1", "name": "a", "input": {}}],
            },
        ]
    }
    assert anthropic_order_problems(early) == [
        "messages[0]: tool_result t1 answers no call just before"
    ]
    assert openai_shape_problems([{"role": "tool", "content": "x"}]) == [
        "$[0]: missing 'tool_call_id' (ChatCompletionToolMessageParam)"
    ]
    assert openai_order_problems([{"role": "tool", "tool_call_id": "a", "content": ""}]) != []


def test_bedrock_body_is_anthropic() -> None:
    body = {
        "anthropic_version": "bedrock-2023-05-31",
        "messages": [{"role": "user", "content": "hi"}],
    }
    assert FMT.sniff(parse(json.dumps(body))) and not OPENAI.sniff(parse(json.dumps(body)))


def test_tools_are_written_in_the_anthropic_shape() -> None:
    tools = [
        {
            "type": "function",
            "function": {"name": "ls", "description": "list", "parameters": {"type": "object"}},
        },
        {"type": "function", "name": "cat", "parameters": {"type": "object", "properties": {}}},
        {"type": "custom", "name": "apply_patch", "description": "patch"},
        {"type": "web_search_preview"},
        {"type": "web_search_20250305", "name": "web_search", "max_uses": 3},
        {"name": "bash", "input_schema": {"type": "object"}},
    ]
    body = to_anthropic_request(AgentContext(metadata={"tools": tools}))
    assert body["tools"] == [
        {"name": "ls", "description": "list", "input_schema": {"type": "object"}},
        {"name": "cat", "input_schema": {"type": "object", "properties": {}}},
        {
            "name": "apply_patch",
            "description": "patch",
            "input_schema": {
                "type": "object",
                "properties": {"input": {"type": "string"}},
                "required": ["input"],
            },
        },
        {"type": "web_search_20250305", "name": "web_search", "max_uses": 3},
        {"name": "bash", "input_schema": {"type": "object"}},
    ]
    assert anthropic_shape_problems({**body, "messages": [{"role": "user", "content": "hi"}]}) == []


# --------------------------------------------------------------------------- user messages (reader)


def test_reader_user_words_next_to_tool_results_stay_the_humans(tmp_path: Path) -> None:
    image = {
        "type": "image",
        "source": {"type": "base64", "media_type": "image/png", "data": "AAAA"},
    }
    body = {
        "system": "sys",
        "messages": [
            {"role": "user", "content": [{"type": "text", "text": "Read a.py"}, image]},
            {
                "role": "assistant",
                "content": [
                    {"type": "tool_use", "id": "t1", "name": "read", "input": {"path": "a.py"}}
                ],
            },
            {
                "role": "user",
                "content": [
                    {"type": "tool_result", "tool_use_id": "t1", "content": "print(1)"},
                    {"type": "text", "text": "Now make it print 2"},
                ],
            },
            {
                "role": "assistant",
                "content": [{"type": "tool_use", "id": "t2", "name": "edit", "input": {}}],
            },
            {
                "role": "user",
                "content": [
                    {"type": "tool_result", "tool_use_id": "t2", "content": "ok"},
                    {"type": "tool_result", "tool_use_id": "t1", "content": "late copy"},
                ],
            },
        ],
    }
    path = tmp_path / "request.json"
    path.write_text(json.dumps(body), encoding="utf-8")
    ctx = compactkit.load_one(path)
    humans = [m for m in ctx.messages if m.is_human]
    assert [m.text for m in humans] == ["Read a.py", "Now make it print 2"]
    assert [b.type for b in humans[0].content] == ["text", "image"]
    assert [(m.origin, m.text) for m in ctx.messages if m.role == "user" and not m.is_human] == [
        ("tool-output", "late copy")
    ]
    assert "skipped_records" not in ctx.metadata
