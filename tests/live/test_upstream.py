"""The fake upstream speaks each API as the official SDKs parse it, streamed and not: tool calls
with their arguments, final answers, usage with the cached prefix, side requests that leave the
script alone, and a clear error when the script runs out."""

from __future__ import annotations

import json
from collections.abc import Iterator

import anthropic
import httpx
import openai
import pytest

from tests.live.upstream import FakeUpstream, Script, answer, call, last_tool_result

WEATHER_TOOL = {
    "name": "weather",
    "description": "Weather in a city",
    "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}},
}
FUNCTION = {
    "type": "function",
    "name": "weather",
    "description": "Weather in a city",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
}
TITLE = {
    "type": "object",
    "properties": {"title": {"type": "string"}, "emoji": {"type": "string"}},
    "required": ["title"],
}
CHAT_FUNCTION = {"type": "function", "function": {k: v for k, v in FUNCTION.items() if k != "type"}}


def script() -> Script:
    city = 'Zürich, "Old Town" ' + "x" * 60  # long enough to arrive in several deltas
    return Script([call("weather", city=city), answer(lambda r: f"It is {last_tool_result(r)}.")])


@pytest.fixture
def upstream() -> Iterator[FakeUpstream]:
    with FakeUpstream(script()) as fake:
        yield fake


def anthropic_client(upstream: FakeUpstream) -> anthropic.Anthropic:
    return anthropic.Anthropic(base_url=upstream.url, api_key="placeholder", max_retries=0)


def openai_client(upstream: FakeUpstream) -> openai.OpenAI:
    return openai.OpenAI(base_url=f"{upstream.url}/v1", api_key="placeholder", max_retries=0)


@pytest.mark.parametrize("stream", [False, True], ids=["json", "sse"])
def test_anthropic_messages_tool_call_then_answer(upstream: FakeUpstream, stream: bool) -> None:
    client = anthropic_client(upstream)
    messages: list[dict[str, object]] = [{"role": "user", "content": "Weather?"}]

    def turn() -> anthropic.types.Message:
        kwargs = {"model": "m", "max_tokens": 100, "messages": messages, "tools": [WEATHER_TOOL]}
        if not stream:
            return client.messages.create(**kwargs)
        with client.messages.stream(**kwargs) as events:
            return events.get_final_message()

    first = turn()
    assert first.stop_reason == "tool_use"
    tool_use = first.content[0]
    assert tool_use.type == "tool_use" and tool_use.name == "weather"
    assert tool_use.input == {"city": script().turns[0].tool_calls[0].input["city"]}
    messages += [
        {"role": "assistant", "content": [b.model_dump() for b in first.content]},
        {
            "role": "user",
            "content": [{"type": "tool_result", "tool_use_id": tool_use.id, "content": "sunny"}],
        },
    ]
    second = turn()
    assert second.stop_reason == "end_turn"
    assert second.content[0].type == "text" and second.content[0].text == "It is sunny."
    # the second request repeats the first one's prompt: that prefix is reported as cached
    assert second.usage.cache_read_input_tokens and second.usage.cache_read_input_tokens > 0
    assert second.usage.input_tokens > 0 and second.usage.output_tokens > 0
    assert [r.turn for r in upstream.requests] == [0, 1]
    assert upstream.requests[1].body["messages"][2]["content"][0]["tool_use_id"] == tool_use.id


@pytest.mark.parametrize("stream", [False, True], ids=["json", "sse"])
def test_openai_responses_function_call_then_answer(upstream: FakeUpstream, stream: bool) -> None:
    client = openai_client(upstream)
    items: list[dict[str, object]] = [{"role": "user", "content": "Weather?"}]

    def turn() -> openai.types.responses.Response:
        if not stream:
            return client.responses.create(model="m", input=items, tools=[FUNCTION])
        with client.responses.stream(model="m", input=items, tools=[FUNCTION]) as events:
            kinds = [event.type for event in events]
            final = events.get_final_response()
        assert kinds[0] == "response.created" and kinds[-1] == "response.completed"
        return final

    first = turn()
    function_call = first.output[0]
    assert function_call.type == "function_call" and function_call.name == "weather"
    assert json.loads(function_call.arguments) == dict(script().turns[0].tool_calls[0].input)
    items += [
        function_call.model_dump(exclude_none=True),
        {"type": "function_call_output", "call_id": function_call.call_id, "output": "sunny"},
    ]
    second = turn()
    assert second.output_text == "It is sunny."
    assert second.usage is not None and second.usage.input_tokens_details.cached_tokens > 0


@pytest.mark.parametrize("stream", [False, True], ids=["json", "sse"])
def test_openai_chat_completions_tool_call_then_answer(
    upstream: FakeUpstream, stream: bool
) -> None:
    client = openai_client(upstream)
    messages: list[dict[str, object]] = [{"role": "user", "content": "Weather?"}]

    def turn() -> tuple[str | None, list[dict[str, object]], object]:
        if not stream:
            done = client.chat.completions.create(
                model="m", messages=messages, tools=[CHAT_FUNCTION]
            )
            message = done.choices[0].message
            calls = [c.model_dump() for c in message.tool_calls or []]
            return message.content, calls, done.usage
        chunks = list(
            client.chat.completions.create(
                model="m",
                messages=messages,
                tools=[CHAT_FUNCTION],
                stream=True,
                stream_options={"include_usage": True},
            )
        )
        text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
        calls: dict[int, dict[str, object]] = {}
        for chunk in chunks:
            for delta in (chunk.choices[0].delta.tool_calls or []) if chunk.choices else []:
                entry = calls.setdefault(
                    delta.index,
                    {"id": delta.id, "type": "function", "function": {"name": "", "arguments": ""}},
                )
                entry["function"]["name"] += delta.function.name or ""
                entry["function"]["arguments"] += delta.function.arguments or ""
        return text or None, list(calls.values()), chunks[-1].usage

    text, calls, _ = turn()
    assert text is None and len(calls) == 1
    assert json.loads(calls[0]["function"]["arguments"]) == dict(
        script().turns[0].tool_calls[0].input
    )
    messages += [
        {"role": "assistant", "content": None, "tool_calls": calls},
        {"role": "tool", "tool_call_id": calls[0]["id"], "content": "sunny"},
    ]
    text, calls, usage = turn()
    assert text == "It is sunny." and calls == []
    assert usage is not None and usage.prompt_tokens_details.cached_tokens > 0


def test_side_requests_are_answered_without_using_the_script(upstream: FakeUpstream) -> None:
    client = anthropic_client(upstream)
    title = client.messages.create(
        model="m", max_tokens=20, messages=[{"role": "user", "content": "Title?"}]
    )
    assert title.content[0].text == upstream.script.side_text
    counted = client.messages.count_tokens(
        model="m", messages=[{"role": "user", "content": "x" * 400}]
    )
    assert counted.input_tokens >= 100
    assert httpx.head(f"{upstream.url}/api/hello").status_code == 200
    assert httpx.get(f"{upstream.url}/v1/models").json()["data"][0]["id"]
    titled = client.messages.create(
        model="m",
        max_tokens=20,
        messages=[{"role": "user", "content": "Title as JSON?"}],
        extra_body={"output_config": {"format": {"type": "json_schema", "schema": TITLE}}},
    )
    assert json.loads(titled.content[0].text) == {"title": upstream.script.side_text}
    assert upstream.side_requests() == upstream.requests and upstream.script.served == {}
    sent = upstream.requests[0].headers  # recorded as sent (this SDK sends the key as a bearer)
    assert "placeholder" in sent.get("x-api-key", sent.get("authorization", ""))


def test_a_request_past_the_script_is_a_clear_error(upstream: FakeUpstream) -> None:
    client = anthropic_client(upstream)
    kwargs = {
        "model": "m",
        "max_tokens": 10,
        "messages": [{"role": "user", "content": "hi"}],
        "tools": [WEATHER_TOOL],
    }
    client.messages.create(**kwargs)
    client.messages.create(**kwargs)
    with pytest.raises(anthropic.BadRequestError, match="no turn left"):
        client.messages.create(**kwargs)
    assert upstream.problems == ["turn request 3 but the script has 2 turns"]


def test_threads_play_their_own_turns_whatever_the_interleaving() -> None:
    script = Script(
        [answer("main 1"), answer("main 2")],
        threads={"Sub task": [answer("sub 1"), answer("sub 2")]},
    )
    with FakeUpstream(script) as upstream:
        client = anthropic_client(upstream)

        def say(text: str) -> str:
            reply = client.messages.create(
                model="m",
                max_tokens=10,
                tools=[WEATHER_TOOL],
                messages=[{"role": "user", "content": text}],
            )
            return reply.content[0].text

        said = [say("Main task"), say("Sub task: count"), say("Sub task: count"), say("Main task")]
    assert said == ["main 1", "sub 1", "sub 2", "main 2"]
    assert [(r.thread, r.turn) for r in upstream.requests] == [
        ("", 0),
        ("Sub task", 0),
        ("Sub task", 1),
        ("", 1),
    ]
