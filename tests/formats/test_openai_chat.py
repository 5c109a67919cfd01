"""The openai-chat adapter on real OpenAI chat logs (tau-bench, OpenHands SDK), and its writer."""

from __future__ import annotations

import importlib
import importlib.util
import json
import sys
import types
import typing
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from functools import cache
from pathlib import Path
from typing import Any

import pytest
import typing_extensions

import compactkit
from compactkit import AgentContext
from compactkit.context import (
    MARKER_TYPES,
    Block,
    CollapsedBlock,
    ImageBlock,
    MaskedBlock,
    Message,
    OmittedBlock,
    SummaryBlock,
    TextBlock,
    ThinkingBlock,
    ToolCallBlock,
    ToolResultBlock,
    marker_text,
)
from compactkit.errors import BadInputError
from compactkit.formats._util import parse_arguments
from compactkit.formats.anthropic_messages import AnthropicMessagesFormat
from compactkit.formats.base import Document, parse_text
from compactkit.formats.export import recorded_max_tokens, recorded_model
from compactkit.formats.openai_chat import OpenAIChatFormat, image_from_url, to_openai_messages
from tests.conftest import corpus_files, sample
from tests.formats._checks import pairing_problems

FMT = OpenAIChatFormat()
ANTHROPIC = AnthropicMessagesFormat()
FOLDER = "openai_chat_tools"
SKELETON_ERRORS = ("unknown session format", "NotImplementedError")


# --------------------------------------------------------------------------- corpus helpers
# (test_anthropic_messages imports these)


def own_files() -> list[Path]:
    files = [p for p in corpus_files() if p.parent.name == FOLDER]
    return files or [sample("openhands-sdk_fncall"), sample("litellm-log"), sample("tau_bench")]


@cache
def _load_corpus_file(path: Path) -> tuple[AgentContext, ...] | None:
    """Every conversation of a corpus file; None when its format's adapter is still a skeleton."""
    try:
        return tuple(compactkit.load(path))
    except BadInputError as exc:
        if path.parent.name != FOLDER and any(s in str(exc) for s in SKELETON_ERRORS):
            return None
        raise


def corpus_contexts(path: Path) -> tuple[AgentContext, ...]:
    contexts = _load_corpus_file(path)
    if contexts is None:
        pytest.skip(f"the adapter for {path.parent.name} is not written yet")
    return contexts


def parse(text: str) -> Document:
    return parse_text(text, "<written>")


def reimport(fmt: Any, ctx: AgentContext) -> AgentContext:
    doc = parse(fmt.dump([ctx]))
    assert fmt.sniff(doc), f"{fmt.name} does not recognise what it wrote"
    contexts = fmt.load(doc)
    assert len(contexts) == 1
    return contexts[0]  # type: ignore[no-any-return]


# --------------------------------------------------------------------------- SDK shape check


def sdk_module(package: str, module: str) -> types.ModuleType:
    """`package.module` of an installed SDK, loaded under a private alias package so that the
    SDK's `__init__` (its HTTP client and every type: seconds for anthropic) is not run. The
    request TypedDicts only import siblings relatively, so they load the same; should that ever
    fail, the ordinary import is used."""
    alias = f"_compactkit_test_{package}"
    try:
        if alias not in sys.modules:
            spec = importlib.util.find_spec(package)
            assert spec is not None and spec.origin is not None
            root = Path(spec.origin).parent
            for name, folder in ((alias, root), (f"{alias}.types", root / "types")):
                stub = types.ModuleType(name)
                stub.__path__ = [str(folder)]
                sys.modules[name] = stub
        return importlib.import_module(f"{alias}.{module}")
    except Exception:
        return importlib.import_module(f"{package}.{module}")


def _strip(tp: Any) -> Any:
    origin = typing.get_origin(tp)
    while origin in (typing_extensions.Required, typing_extensions.NotRequired, typing.Annotated):
        tp = typing.get_args(tp)[0]
        origin = typing.get_origin(tp)
    return tp


@cache
def _plan(tp: Any) -> tuple[Any, ...]:
    """How to check a value against `tp`, worked out once per type."""
    tp = _strip(tp)
    origin = typing.get_origin(tp)
    if tp is Any or tp is object:
        return ("any",)
    if tp is type(None) or tp is None:
        return ("none",)
    if origin in (typing.Union, types.UnionType):
        return ("union", typing.get_args(tp))
    if origin is typing.Literal:
        return ("literal", frozenset(typing.get_args(tp)))
    if typing_extensions.is_typeddict(tp):
        fields: dict[str, tuple[Any, bool]] = {}
        tags: dict[str, frozenset[Any]] = {}
        for key, hint in typing.get_type_hints(tp, include_extras=True).items():
            required = typing.get_origin(hint) is typing_extensions.Required or (
                tp.__total__ and typing.get_origin(hint) is not typing_extensions.NotRequired
            )
            fields[key] = (hint, required)
            inner = _strip(hint)
            if typing.get_origin(inner) is typing.Literal:
                tags[key] = frozenset(typing.get_args(inner))
        return ("typeddict", tp.__name__, fields, tags)
    if origin in (list, Iterable, Sequence, typing.Iterable):
        return ("list", (typing.get_args(tp) or (Any,))[0])
    if origin in (dict, Mapping):
        return ("dict",)
    if tp is float:
        return ("number",)
    if isinstance(tp, type):
        return ("type", tp)
    return ("any",)  # anything more exotic is not checked


def _excluded(value: Any, member: Any) -> bool:
    """True when `member` cannot be meant for `value`: an array for a non-array type, an object
    for a non-object type, or a literal tag (`role`, `type`) of a TypedDict that differs."""
    plan = _plan(member)
    kind = plan[0]
    if isinstance(value, list):
        return kind not in ("list", "any", "union")
    if isinstance(value, dict):
        if kind not in ("typeddict", "dict", "any", "union"):
            return True
        return kind == "typeddict" and any(
            key in value and value[key] not in allowed for key, allowed in plan[3].items()
        )
    return False


def shape_problems(value: Any, tp: Any, path: str = "$", extra_ok: Iterable[str] = ()) -> list[str]:
    """Where `value` does not fit the SDK's request TypedDict `tp` (required keys, unknown keys
    other than the dotted key names in `extra_ok`, literal values, element types)."""
    allowed = extra_ok if isinstance(extra_ok, frozenset) else frozenset(extra_ok)
    plan = _plan(tp)
    kind = plan[0]
    if kind == "any":
        return []
    if kind == "none":
        return [] if value is None else [f"{path}: expected null"]
    if kind == "union":
        best: list[str] | None = None
        for member in plan[1]:
            if _excluded(value, member):
                continue
            problems = shape_problems(value, member, path, allowed)
            if not problems:
                return []
            if best is None or len(problems) < len(best):
                best = problems
        return best or [f"{path}: no union member fits"]
    if kind == "literal":
        return [] if value in plan[1] else [f"{path}: {value!r} not allowed"]
    if kind == "typeddict":
        _, name, fields, _ = plan
        if not isinstance(value, dict):
            return [f"{path}: expected an object for {name}"]
        problems = []
        for key, (hint, required) in fields.items():
            if key in value:
                problems += shape_problems(value[key], hint, f"{path}.{key}", allowed)
            elif required:
                problems.append(f"{path}: missing {key!r} ({name})")
        problems += [
            f"{path}: unknown key {key!r} ({name})"
            for key in value
            if key not in fields and f"{name}.{key}" not in allowed
        ]
        return problems
    if kind == "list":
        if not isinstance(value, list):
            return [f"{path}: expected an array"]
        return [
            p
            for n, v in enumerate(value)
            for p in shape_problems(v, plan[1], f"{path}[{n}]", allowed)
        ]
    if kind == "dict":
        return [] if isinstance(value, dict) else [f"{path}: expected an object"]
    if kind == "number":
        ok = isinstance(value, (int, float)) and not isinstance(value, bool)
        return [] if ok else [f"{path}: expected a number"]
    expected = plan[1]
    ok = isinstance(value, expected) and not (expected is int and isinstance(value, bool))
    return [] if ok else [f"{path}: expected {expected.__name__}, got {type(value).__name__}"]


# litellm's thinking fields, and `name` on tool messages as the corpus itself records it
OPENAI_EXTRA_OK = (
    "ChatCompletionAssistantMessageParam.reasoning_content",
    "ChatCompletionAssistantMessageParam.thinking_blocks",
    "ChatCompletionToolMessageParam.name",
)


def openai_shape_problems(messages: list[dict[str, Any]]) -> list[str]:
    param = sdk_module("openai", "types.chat.chat_completion_message_param")
    extra_ok = frozenset(OPENAI_EXTRA_OK)
    return [
        p
        for n, m in enumerate(messages)
        for p in shape_problems(m, param.ChatCompletionMessageParam, f"$[{n}]", extra_ok)
    ]


def openai_order_problems(messages: list[dict[str, Any]]) -> list[str]:
    """Tool messages whose call was not made by an earlier assistant message."""
    called: set[str] = set()
    problems = []
    for n, m in enumerate(messages):
        for call in m.get("tool_calls") or []:
            called.add(call["id"])
        if m["role"] == "tool" and m["tool_call_id"] not in called:
            problems.append(f"$[{n}]: result for {m['tool_call_id']} before its call")
    return problems


# --------------------------------------------------------------------------- what survives


def norm_image(image: ImageBlock) -> ImageBlock:
    if image.url is not None and image.url.startswith("data:"):
        image = image_from_url(image.url)
    if image.data is not None and image.media_type is None:
        image = ImageBlock(media_type="image/png", data=image.data)
    return image


def as_part(block: Block) -> Block | None:
    """A block as a non-thinking, non-call part of written content: images, or non-empty text."""
    if isinstance(block, ImageBlock):
        return norm_image(block)
    if isinstance(block, TextBlock):
        text = block.text
    elif block.type in MARKER_TYPES:
        text = marker_text(block)  # type: ignore[arg-type]
    elif isinstance(block, ThinkingBlock):
        text = block.thinking
    elif isinstance(block, ToolCallBlock):
        text = json.dumps({"tool_call": block.name, "id": block.id, "input": block.input})
    else:
        text = block.text if isinstance(block, ToolResultBlock) else ""
    return TextBlock(text=text) if text else None


def parts(blocks: Iterable[Block]) -> tuple[Any, ...]:
    return tuple(p for p in (as_part(b) for b in blocks) if p is not None)


def openai_view(
    ctx: AgentContext,
) -> tuple[str | None, list[tuple[str, str | None, tuple[Any, ...]]]]:
    """What an OpenAI messages array keeps of `ctx`: the system instruction and, per message,
    (role, name, blocks) - thinking first, then text/images, then calls; one result per tool
    message without `is_error`; markers as text; empty text dropped."""
    system = ctx.system_instruction
    messages = list(ctx.messages)
    if system is None and messages and messages[0].role == "system":
        first = messages.pop(0)
        system = "\n".join(p.text for p in parts(first.content) if isinstance(p, TextBlock))
    out: list[tuple[str, str | None, tuple[Any, ...]]] = []
    for m in messages:
        if m.role == "assistant":
            thinking = [b for b in m.content if isinstance(b, ThinkingBlock)]
            if len(thinking) == 1 and thinking[0].signature is None and not thinking[0].redacted:
                thinking = [b for b in thinking if b.thinking]  # sent as reasoning_content
            thinking = [
                ThinkingBlock(thinking=b.thinking, signature=b.signature or "", redacted=True)
                if b.redacted
                else b
                for b in thinking
            ]
            body = parts(b for b in m.content if not isinstance(b, (ThinkingBlock, ToolCallBlock)))
            calls = tuple(
                ToolCallBlock(
                    id=c.id,
                    name=c.name,
                    input=parse_arguments(c.input) if isinstance(c.input, str) else c.input,
                )
                for c in m.tool_calls
            )
            out.append(("assistant", m.name, (*thinking, *body, *calls)))
            continue
        for r in m.tool_results:
            result = ToolResultBlock(tool_call_id=r.tool_call_id, content=parts(r.content))
            out.append(("tool", m.name, (result,)))
        others = [b for b in m.content if not isinstance(b, ToolResultBlock)]
        if m.role == "tool" or m.tool_results:
            if others:
                out.append(("user", None, parts(others)))
        else:
            out.append((m.role, m.name, parts(others)))
    return system, out


def actual_view(
    ctx: AgentContext,
) -> tuple[str | None, list[tuple[str, str | None, tuple[Any, ...]]]]:
    return ctx.system_instruction, [(m.role, m.name, m.content) for m in ctx.messages]


# --------------------------------------------------------------------------- raw data (plain json)


def raw_conversations(path: Path) -> list[list[dict[str, Any]]]:
    """The message arrays of a corpus file, the logged response appended (plain json code)."""
    data = json.loads(path.read_text(encoding="utf-8"))
    if isinstance(data, list) and data and "traj" in data[0]:
        return [list(t["traj"]) for t in data]
    if isinstance(data, dict):
        msgs = list(data["messages"])
        if "response" in data:
            msgs.append(data["response"]["choices"][0]["message"])
        return [msgs]
    return [data]


def raw_text(content: Any) -> str:
    if isinstance(content, str):
        return content
    return "\n".join(p["text"] for p in content or [] if p.get("type") == "text")


# --------------------------------------------------------------------------- the corpus files


@pytest.mark.corpus
@pytest.mark.parametrize("path", own_files(), ids=lambda p: p.name[:40])
def test_corpus_file_loads_with_every_call_and_result(path: Path) -> None:
    contexts = corpus_contexts(path)  # compactkit.load: auto-detection
    raws = raw_conversations(path)
    assert len(contexts) == len(raws)
    for ctx, raw in zip(contexts, raws, strict=True):
        assert ctx.metadata["source_format"] == "openai-chat"
        assert pairing_problems(ctx) == []
        assert "synthesized_results" not in ctx.metadata
        assert "synthesized_calls" not in ctx.metadata

        raw_calls = [c for m in raw if m["role"] == "assistant" for c in m.get("tool_calls") or []]
        raw_results = [m for m in raw if m["role"] == "tool"]
        calls = [c for m in ctx.messages for c in m.tool_calls]
        results = [r for m in ctx.messages for r in m.tool_results]
        assert len(calls) == len(raw_calls)
        assert len(results) == len(raw_results)
        assert [c.name for c in calls] == [c["function"]["name"] for c in raw_calls]
        assert [c.input for c in calls] == [
            json.loads(c["function"]["arguments"]) for c in raw_calls
        ]
        assert [r.text for r in results] == [raw_text(m["content"]) for m in raw_results]
        # ids as recorded, except a reused id, renamed `<id>_<n>` together with its result
        # ids as recorded, except that a reused id becomes `<id>_<n>` with the results after it
        uses: Counter[str] = Counter()
        latest: dict[str, str] = {}
        expected_calls, expected_results = [], []
        for m in raw:
            for c in m.get("tool_calls") or []:
                uses[c["id"]] += 1
                latest[c["id"]] = c["id"] if uses[c["id"]] == 1 else f"{c['id']}_{uses[c['id']]}"
                expected_calls.append(latest[c["id"]])
            if m["role"] == "tool":
                expected_results.append(latest[m["tool_call_id"]])
        assert [c.id for c in calls] == expected_calls
        assert [r.tool_call_id for r in results] == expected_results
        reused = sum(n - 1 for n in uses.values())
        assert ctx.metadata.get("renamed_calls", 0) == reused
        assert len({c.id for c in calls}) == len(calls)

        assert raw[0]["role"] == "system"
        assert ctx.system_instruction == raw_text(raw[0]["content"])
        first_user = next(m for m in raw if m["role"] == "user")
        assert ctx.task == raw_text(first_user["content"])
        # these logs record no reasoning, and none is invented
        has_reasoning = any("reasoning_content" in m or "thinking_blocks" in m for m in raw)
        thinking = [b for m in ctx.messages for b in m.content if isinstance(b, ThinkingBlock)]
        assert bool(thinking) == has_reasoning


@pytest.mark.corpus
@pytest.mark.parametrize("path", own_files(), ids=lambda p: p.name[:40])
def test_corpus_file_native_json_round_trips_exactly(path: Path, tmp_path: Path) -> None:
    contexts = list(corpus_contexts(path))
    out = tmp_path / "native.json"
    compactkit.dump(contexts, out, format="compactkit")
    assert compactkit.load(out) == contexts


@pytest.mark.corpus
def test_tau_bench_reused_call_ids_are_renamed_with_their_results() -> None:
    path = next(p for p in own_files() if "tau_bench" in p.name)
    ctx = corpus_contexts(path)[0]
    raw = raw_conversations(path)[0]
    ids = [c["id"] for m in raw for c in m.get("tool_calls") or []]
    assert ids.count("call_HGn16KZh9oNCruxsMJ4gYXan") == 2  # the raw file reuses it
    calls = [c.id for m in ctx.messages for c in m.tool_calls]
    assert calls[1:3] == ["call_HGn16KZh9oNCruxsMJ4gYXan", "call_HGn16KZh9oNCruxsMJ4gYXan_2"]
    second = next(
        i
        for i, m in enumerate(ctx.messages)
        if "call_HGn16KZh9oNCruxsMJ4gYXan_2" in {c.id for c in m.tool_calls}
    )
    result = ctx.messages[second + 1].tool_results[0]
    assert result.tool_call_id == "call_HGn16KZh9oNCruxsMJ4gYXan_2"
    assert result.text.startswith('[[{"flight_number": "HAT057"')  # the one-stop search answer
    assert ctx.metadata["task_id"] == 0 and ctx.metadata["conversation"] == 0


@pytest.mark.corpus
def test_litellm_log_response_becomes_the_last_assistant_message() -> None:
    path = next(p for p in own_files() if "litellm-log" in p.name)
    raw = json.loads(path.read_text(encoding="utf-8"))
    (ctx,) = corpus_contexts(path)
    last = ctx.messages[-1]
    assert last.role == "assistant"
    assert last.metadata["id"] == raw["response"]["id"]
    assert last.metadata["usage"] == raw["response"]["usage"]
    assert last.metadata["model"] == ctx.metadata["model"] == raw["response"]["model"]
    assert [c.name for c in last.tool_calls] == ["finish"]  # pending: the log ends on it
    assert ctx.metadata["tools"] == raw["tools"]
    assert len(ctx.messages) == len(raw["messages"])  # minus the system message, plus response


def test_bundled_samples_load() -> None:
    tau = compactkit.load(sample("tau_bench"))
    assert len(tau) == 3
    assert [c.metadata["conversation"] for c in tau] == [0, 1, 2]
    (fncall,) = compactkit.load(sample("openhands-sdk_fncall"))
    assert fncall.system_instruction is not None
    assert fncall.system_instruction.startswith("You are OpenHands agent")
    assert [m.role for m in fncall.messages[:3]] == ["user", "assistant", "tool"]
    assert fncall.messages[2].name == "str_replace_editor"
    assert fncall.messages[1].tool_calls[0].input == {
        "command": "create",
        "path": "/workspace/hello.py",
        "file_text": "print('Hello, World!')",
        "security_risk": "LOW",
    }
    for ctx in [*tau, fncall]:
        assert pairing_problems(ctx) == []


def test_truncated_file_is_bad_input(tmp_path: Path) -> None:
    text = sample("openhands-sdk_fncall").read_text(encoding="utf-8")
    bad = tmp_path / "truncated.json"
    bad.write_text(text[: len(text) // 2], encoding="utf-8")
    with pytest.raises(BadInputError):
        compactkit.load(bad)
    other = tmp_path / "other.json"
    other.write_text('{"sessionId": "x", "messages": [{"type": "user"}]}', encoding="utf-8")
    with pytest.raises(BadInputError, match="not OpenAI chat messages"):
        compactkit.load(other, format="openai-chat")


# --------------------------------------------------------------------------- sniffing


@pytest.mark.parametrize("path", corpus_files(), ids=lambda p: p.name[:40])
def test_sniffs_only_its_own_files(path: Path) -> None:
    doc = compactkit.formats.read_document(path)
    own = path.parent.name == FOLDER or (
        path.parent.name == "sessions" and path.name.startswith(("tau_bench", "openhands-sdk"))
    )
    assert FMT.sniff(doc) == own
    assert not ANTHROPIC.sniff(doc)


def test_ambiguous_and_anthropic_arrays() -> None:
    plain = parse(
        json.dumps([{"role": "user", "content": "hi"}, {"role": "assistant", "content": "yo"}])
    )
    assert FMT.sniff(plain) and not ANTHROPIC.sniff(plain)
    blocks = [
        {"role": "user", "content": "list files"},
        {
            "role": "assistant",
            "content": [{"type": "tool_use", "id": "t1", "name": "ls", "input": {}}],
        },
    ]
    anthropic = parse(json.dumps(blocks))
    assert ANTHROPIC.sniff(anthropic) and not FMT.sniff(anthropic)
    native = parse(
        AgentContext(messages=(Message(role="user", content=(TextBlock(text="x"),)),)).to_json()
    )
    assert not FMT.sniff(native)


# --------------------------------------------------------------------------- export / re-import


@pytest.mark.corpus
@pytest.mark.parametrize("path", corpus_files(), ids=lambda p: p.name[:40])
def test_export_reimport_is_stable_for_every_corpus_conversation(path: Path) -> None:
    for ctx in corpus_contexts(path):
        written = to_openai_messages(ctx)
        assert openai_order_problems(written) == []
        assert openai_shape_problems(written) == []
        ctx1 = reimport(FMT, ctx)
        assert reimport(FMT, ctx1) == ctx1
        assert actual_view(ctx1) == openai_view(ctx)
        tools = {"tools": ctx.metadata["tools"]} if ctx.metadata.get("tools") else {}
        model = {"model": recorded_model(ctx)} if recorded_model(ctx) else {}
        limit = {"max_tokens": recorded_max_tokens(ctx)} if recorded_max_tokens(ctx) else {}
        # tools, the session's model and output limit are written
        assert ctx1.metadata == {"source_format": "openai-chat", **model, **tools, **limit}
        if pairing_problems(ctx) == []:
            assert pairing_problems(ctx1) == []


def test_several_contexts_dump_as_jsonl_and_load_back() -> None:
    tau = compactkit.load(sample("tau_bench"))
    text = FMT.dump(tau)
    assert len(text.splitlines()) == 3
    again = FMT.load(parse(text))
    assert [c.messages for c in again] == [reimport(FMT, c).messages for c in tau]
    assert [c.metadata["conversation"] for c in again] == [0, 1, 2]


# --------------------------------------------------------------------------- reader details


def load_messages(messages: Any, **container: Any) -> AgentContext:
    data = {**container, "messages": messages} if container else messages
    (ctx,) = FMT.load(parse(json.dumps(data)))
    return ctx


def test_reasoning_and_thinking_blocks_are_kept_and_written_back() -> None:
    ctx = load_messages(
        [
            {"role": "user", "content": [{"type": "text", "text": "go"}]},
            {
                "role": "assistant",
                "content": "checking",
                "reasoning_content": "joined text litellm also sends",
                "thinking_blocks": [
                    {"type": "thinking", "thinking": "first look", "signature": "sig-1"},
                    {"type": "redacted_thinking", "data": "ENCRYPTED"},
                ],
                "tool_calls": [
                    {
                        "id": "c1",
                        "type": "function",
                        "function": {"name": "ls", "arguments": "not json"},
                    }
                ],
            },
            {"role": "tool", "tool_call_id": "c1", "content": "a.py"},
            {"role": "assistant", "content": None, "reasoning_content": "plain reasoning"},
        ]
    )
    first = ctx.messages[1]
    assert first.content == (
        ThinkingBlock(thinking="first look", signature="sig-1"),
        ThinkingBlock(thinking="", signature="ENCRYPTED", redacted=True),
        TextBlock(text="checking"),
        ToolCallBlock(id="c1", name="ls", input="not json"),
    )
    assert ctx.messages[3].content == (ThinkingBlock(thinking="plain reasoning"),)
    written = to_openai_messages(ctx)
    assert written[1]["thinking_blocks"][0] == {
        "type": "thinking",
        "thinking": "first look",
        "signature": "sig-1",
    }
    assert written[1]["tool_calls"][0]["function"]["arguments"] == "not json"
    assert written[3] == {
        "role": "assistant",
        "content": "",
        "reasoning_content": "plain reasoning",
    }
    assert reimport(FMT, ctx).messages == tuple(
        Message(role=m.role, content=m.content, name=m.name) for m in ctx.messages
    )


def test_missing_results_and_calls_are_synthesized() -> None:
    ctx = load_messages(
        [
            {"role": "user", "content": "go"},
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {"id": "a", "type": "function", "function": {"name": "x", "arguments": "{}"}},
                    {"id": "b", "type": "function", "function": {"name": "y", "arguments": "{}"}},
                ],
            },
            {"role": "tool", "tool_call_id": "a", "content": "done"},
            {"role": "user", "content": "and?"},
            {"role": "tool", "tool_call_id": "ghost", "name": "z", "content": "boo"},
            {"role": "tool", "tool_call_id": "a", "content": "again"},
        ]
    )
    assert pairing_problems(ctx) == []
    assert ctx.metadata["synthesized_results"] == 1
    assert ctx.metadata["synthesized_calls"] == 1
    assert ctx.metadata["orphan_results"] == 1
    synth = ctx.messages[3]
    assert synth.metadata == {"synthesized": True}
    assert synth.tool_results[0].tool_call_id == "b" and synth.tool_results[0].is_error
    assert ctx.messages[5].tool_calls[0].name == "z"
    assert ctx.messages[-1].role == "user" and ctx.messages[-1].text == "again"


def test_legacy_function_call_custom_call_images_and_request_body() -> None:
    ctx = load_messages(
        [
            {"role": "developer", "content": "be brief"},
            {
                "role": "user",
                "name": "ana",
                "content": [
                    {"type": "text", "text": "see"},
                    {"type": "image_url", "image_url": {"url": "data:image/jpeg;base64,QUJD"}},
                ],
            },
            {
                "role": "assistant",
                "content": None,
                "function_call": {"name": "f", "arguments": '{"q": 1}'},
            },
            {"role": "function", "name": "f", "content": "one"},
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": "p1",
                        "type": "custom",
                        "custom": {"name": "apply_patch", "input": "*** Begin"},
                    }
                ],
            },
        ],
        model="gpt-4o",
        tools=[{"type": "function", "function": {"name": "f", "parameters": {}}}],
    )
    assert ctx.system_instruction == "be brief"
    assert ctx.metadata["model"] == "gpt-4o" and ctx.metadata["tools"][0]["function"]["name"] == "f"
    assert ctx.messages[0].name == "ana"
    assert ctx.messages[0].content[1] == ImageBlock(media_type="image/jpeg", data="QUJD")
    assert ctx.messages[1].tool_calls[0] == ToolCallBlock(id="call_0", name="f", input={"q": 1})
    assert ctx.messages[2].tool_results[0].tool_call_id == "call_0"
    assert ctx.messages[3].tool_calls[0].input == "*** Begin"
    written = to_openai_messages(ctx)
    assert written[1]["content"][1] == {
        "type": "image_url",
        "image_url": {"url": "data:image/jpeg;base64,QUJD"},
    }
    assert openai_shape_problems(written) == []


def test_markers_are_written_as_text_and_results_one_per_message() -> None:
    masked = MaskedBlock(etag="e1", label="old ls output")
    summary = SummaryBlock(text="they talked", etag="e2", summarized_messages=4)
    omitted = OmittedBlock(etag="e0", messages=12)
    ctx = AgentContext(
        system_instruction="sys",
        messages=(
            Message(role="user", content=(omitted, summary, TextBlock(text="next"))),
            Message(
                role="assistant",
                content=(
                    ToolCallBlock(id="a", name="ls", input={"p": "."}),
                    ToolCallBlock(id="b", name="ls", input={"p": "/"}),
                ),
            ),
            Message(
                role="tool",
                content=(
                    ToolResultBlock(tool_call_id="a", content=(masked,), is_error=True),
                    ToolResultBlock(
                        tool_call_id="b", content=(CollapsedBlock(etag="e3", path="/x"),)
                    ),
                ),
            ),
        ),
    )
    written = to_openai_messages(ctx)
    assert written[1]["content"] == [
        {"type": "text", "text": marker_text(omitted)},
        {"type": "text", "text": marker_text(summary)},
        {"type": "text", "text": "next"},
    ]
    assert [m["role"] for m in written] == ["system", "user", "assistant", "tool", "tool"]
    assert written[3] == {"role": "tool", "tool_call_id": "a", "content": marker_text(masked)}
    assert openai_shape_problems(written) == []
    ctx1 = reimport(FMT, ctx)
    assert actual_view(ctx1) == openai_view(ctx)
    assert ctx1.messages[2].tool_results[0].is_error is False  # not carried by the format


def test_jsonl_fine_tuning_layout_gives_one_conversation_per_line() -> None:
    lines = [
        {"messages": [{"role": "user", "content": "a"}, {"role": "assistant", "content": "b"}]},
        {"messages": [{"role": "user", "content": "c"}]},
    ]
    doc = parse("\n".join(json.dumps(x) for x in lines) + "\n")
    assert doc.kind == "jsonl" and FMT.sniff(doc)
    contexts = FMT.load(doc)
    assert [c.task for c in contexts] == ["a", "c"]
    assert [c.metadata["conversation"] for c in contexts] == [0, 1]


# --------------------------------------------------------------------------- user messages (reader)


def test_reader_every_user_message_is_the_humans_once(tmp_path: Path) -> None:
    """A plain `role: user` message is the human's (text and image parts); tool output is never
    one, except a duplicate result moved to user text, which is marked as tool output."""
    image = {"type": "image_url", "image_url": {"url": "https://x.test/shot.png"}}
    call = {"id": "c1", "type": "function", "function": {"name": "ls", "arguments": "{}"}}
    messages = [
        {"role": "system", "content": "sys"},
        {"role": "user", "content": [{"type": "text", "text": "What is in here?"}, image]},
        {"role": "assistant", "content": None, "tool_calls": [call]},
        {"role": "tool", "tool_call_id": "c1", "content": "a.py"},
        {"role": "tool", "tool_call_id": "c1", "content": "a.py again"},
        {"role": "user", "content": "Thanks! ###STOP###"},
    ]
    path = tmp_path / "chat.json"
    path.write_text(json.dumps(messages), encoding="utf-8")
    ctx = compactkit.load_one(path)
    humans = [m for m in ctx.messages if m.is_human]
    assert [m.text for m in humans] == ["What is in here?", "Thanks! ###STOP###"]
    assert [b.type for b in humans[0].content] == ["text", "image"]
    moved = [m for m in ctx.messages if m.role == "user" and not m.is_human]
    assert [(m.origin, m.text) for m in moved] == [("tool-output", "a.py again")]
    assert "skipped_records" not in ctx.metadata


def test_reader_tau_bench_simulated_user_counts_as_the_user() -> None:
    path = next((p for p in corpus_files() if p.name.startswith("tau_bench")), None)
    if path is None:
        pytest.skip("the tau-bench file is only in the full corpus")
    raw = json.loads(path.read_text(encoding="utf-8"))
    contexts = compactkit.load(path)
    for trajectory, ctx in zip(raw, contexts, strict=True):
        typed = [m["content"] for m in trajectory["traj"] if m["role"] == "user" and m["content"]]
        assert [m.text for m in ctx.messages if m.is_human] == typed
