"""The audit of a shared gateway, case by case: an upstream set to 'none' is nowhere, the user's
words in every form the API takes survive compaction, a body the gateway cannot plan passes
through unchanged, a cut stream ends in an error event the SDKs read, hostile sizes stay bounded."""

from __future__ import annotations

import json
import re
from typing import Any

import anthropic
import httpx
import openai
import pytest

from compactkit.gateway import GatewayConfig, create_app

from .agents import anthropic_agent, chat_agent, responses_agent
from .conftest import KEY, chunk
from .upstream import FakeModel, serving

TASK = "Find why pydicom fails on the negative pixel value and fix it; keep the public API."
TRIGGER = 6000


def _bodies(model: FakeModel, path: str) -> list[bytes]:
    return [r.body for r in model.received if r.path == path]


# --------------------------------------------------------------------------- 'none' is nowhere


def test_upstream_anthropic_none_never_sends_anthropic_requests(
    model: FakeModel, upstream: str
) -> None:
    """`--upstream-anthropic none` beside an OpenAI upstream: an Anthropic request gets an
    Anthropic error and goes nowhere (its key never leaves); OpenAI requests still go."""
    config = GatewayConfig(upstream_anthropic=None, upstream_openai=upstream)
    with serving(create_app(config)) as base:
        with pytest.raises(anthropic.APIStatusError) as caught:
            anthropic_agent(base, TASK)
        count = httpx.post(
            base + "/v1/messages/count_tokens", content=b"{}", headers={"x-api-key": KEY}
        )
        assert model.received == [], "an Anthropic request went to the OpenAI upstream"
        run = chat_agent(base, TASK)
    assert caught.value.status_code == 502
    assert caught.value.body["error"]["type"] == "api_error"  # type: ignore[index]
    assert "--upstream-anthropic" in caught.value.message
    assert count.status_code == 502 and count.json()["type"] == "error"
    assert run.answer == model.final
    assert {r.path for r in model.received} == {"/v1/chat/completions"}


def test_upstream_openai_none_never_sends_openai_requests(model: FakeModel, upstream: str) -> None:
    config = GatewayConfig(upstream_anthropic=upstream, upstream_openai=None)
    with serving(create_app(config)) as base:
        with pytest.raises(openai.APIStatusError) as chat:
            chat_agent(base, TASK)
        with pytest.raises(openai.APIStatusError) as responses:
            responses_agent(base, TASK)
        models = httpx.get(base + "/v1/models", headers={"authorization": f"Bearer {KEY}"})
        assert model.received == [], "an OpenAI request went to the Anthropic upstream"
        run = anthropic_agent(base, TASK)
    for caught in (chat, responses):
        assert caught.value.status_code == 502
        assert "--upstream-openai" in caught.value.message
    assert models.status_code == 502 and "error" in models.json()
    assert run.answer == model.final
    assert {r.path for r in model.received} == {"/v1/messages"}


# --------------------------------------------------------------------------- the user's words


def _steps(api: str, body: dict[str, Any]) -> tuple[str, str, dict[str, Any]] | str:
    """Four reads after each user message (`Step N: ...`), then an answer."""
    items = body["input"]
    at, step = 0, 0
    for n, item in enumerate(items):  # the newest user words the model got
        if item.get("role") == "user" and (found := re.search(r"Step (\d+):", json.dumps(item))):
            at, step = n, int(found.group(1))
    done = sum(1 for item in items[at:] if item.get("type") == "function_call_output")
    if done >= 4:
        return f"Step {step} done."
    return f"call_{step}_{done}", "read_file", {"path": f"chunk{(step * 4 + done) % 20}"}


def test_responses_short_form_user_items_survive_compaction(
    model: FakeModel, start_gateway
) -> None:
    """A Responses user item `{"role": "user", "content": "..."}` (no `type`), the short form the
    API takes, is the user's message: past compactions every request still brings the model the
    newest user words, and the last one every word the user wrote."""
    model.script = _steps
    base = start_gateway(trigger=TRIGGER, target=3000)
    items: list[dict[str, Any]] = []
    client = openai.OpenAI(base_url=base + "/v1", api_key=KEY, max_retries=0)
    for step in range(6):
        words = f"Step {step}: now look at case number {step * 7919} of the pixel bug."
        items.append({"role": "user", "content": words})
        while True:
            output = client.responses.create(model="gpt-test", input=items, store=False).output  # type: ignore[arg-type]
            items.extend(o.model_dump(exclude_none=True) for o in output)
            got = _bodies(model, "/v1/responses")[-1].decode()
            assert words in got, f"a request of step {step} lost the user's newest words"
            calls = [o for o in output if o.type == "function_call"]
            if not calls:
                break
            for c in calls:
                path = json.loads(c.arguments)["path"]
                items.append(
                    {"type": "function_call_output", "call_id": c.call_id, "output": chunk(path)}
                )
    stats = httpx.get(base + "/compactkit/stats").json()
    assert stats["counters"]["compacted_requests"] > 0
    for step in range(6):  # the summary holds the earlier words, or they follow it verbatim
        assert f"case number {step * 7919} of the pixel bug" in got
