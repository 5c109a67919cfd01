"""The gateway between the official SDKs and a scripted fake model: pass-through below the
trigger, one compaction then a stable prefix past it, every API streamed and not."""

from __future__ import annotations

import pytest

from .agents import anthropic_agent, chat_agent, responses_agent
from .checks import check_conversation
from .upstream import FakeModel

TASK = "Find why pydicom fails on the negative pixel value and fix it; keep the public API."
TRIGGER = 6000


def _received(model: FakeModel, path: str) -> list[bytes]:
    return [r.body for r in model.received if r.path == path]


AGENTS = {
    "anthropic": (anthropic_agent, "/v1/messages"),
    "openai-chat": (chat_agent, "/v1/chat/completions"),
    "openai-responses": (responses_agent, "/v1/responses"),
}


@pytest.mark.parametrize("stream", [False, True], ids=["sync", "streamed"])
@pytest.mark.parametrize("api", list(AGENTS))
def test_an_sdk_agent_through_the_gateway(
    model: FakeModel, start_gateway, api: str, stream: bool
) -> None:
    """The agent finishes; below the trigger its requests pass byte-identical; past it they are
    compacted, stay under the trigger, keep the provider's rules, the user's words and every
    other field, and share the previous request's prefix except at compactions."""
    agent, path = AGENTS[api]
    model.turns = 14
    base = start_gateway(trigger=TRIGGER, target=3000)
    run = agent(base, TASK, stream=stream)
    assert run.answer == model.final
    compacted = check_conversation(api, run.sent, _received(model, path), TRIGGER, TASK)  # type: ignore[arg-type]
    assert compacted > 0, "the conversation went past the trigger but nothing was compacted"
