"""`convert --request` writes a request the provider takes as it is: `model` and `max_tokens`
(openai-chat: `max_completion_tokens`) come from the session or from `--model` / `--max-tokens`,
and when neither gives one that the request needs, one line (exit 2) says which. Checked against
the official SDK request types with nothing added (`sdk_problems`)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

import compactkit
from compactkit.cli import make_cli
from compactkit.formats.export import recorded_max_tokens, recorded_model
from compactkit.formats.provider_rules import (
    anthropic_rule_problems,
    openai_rule_problems,
    sdk_problems,
)
from compactkit.registry import make_registry
from tests.conftest import sample, sample_files

CLI = make_cli(lambda: make_registry(entry_points=False))
SDK_TYPE = {
    "anthropic-messages": (
        "anthropic.types.message_create_params",
        "MessageCreateParamsNonStreaming",
    ),
    "openai-chat": (
        "openai.types.chat.completion_create_params",
        "CompletionCreateParamsNonStreaming",
    ),
}


def convert(*args: str) -> Any:
    return CliRunner().invoke(CLI, ["convert", *args])


def accepted(writer: str, body: dict[str, Any]) -> list[str]:
    """What the provider would refuse in `body`: its SDK type (model and limit included, nothing
    added) and its ordering rules."""
    problems = sdk_problems(body, *SDK_TYPE[writer])
    if writer == "anthropic-messages":
        return problems + anthropic_rule_problems(body)
    return problems + openai_rule_problems(body["messages"], body.get("tools"))


@pytest.mark.parametrize("writer", list(SDK_TYPE))
def test_every_sample_gives_a_request_the_sdk_takes_or_says_what_is_missing(
    writer: str, tmp_path: Path
) -> None:
    out = tmp_path / "request.json"
    asked = 0
    for path in sample_files():
        contexts = compactkit.load(path)
        address = str(path) if len(contexts) == 1 else f"{path}#0"
        model, limit = recorded_model(contexts[0]), recorded_max_tokens(contexts[0])
        result = convert(address, "--to", writer, "--request", "-o", str(out))
        if (
            result.exit_code == 2
        ):  # the session lacks one: the line says which, and passing it works
            (line,) = result.stderr.strip().splitlines()
            served = model is not None and ("claude" in model or writer == "openai-chat")
            needs = [] if served else ["--model"]
            needs += ["--max-tokens"] if writer == "anthropic-messages" and limit is None else []
            assert line.endswith("pass " + " and ".join(needs)), (path.name, line)
            assert not out.exists()
            result = convert(
                address, "--to", writer, "--request", "-o", str(out),
                "--model", "claude-sonnet-4-5" if writer == "anthropic-messages" else "gpt-4o",
                "--max-tokens", "4096",
            )  # fmt: skip
            asked += 1
        assert result.exit_code == 0, (path.name, result.stderr)
        body = json.loads(out.read_text(encoding="utf-8"))
        assert accepted(writer, body) == [], path.name
        if model is not None and writer == "openai-chat":
            assert body["model"] == model  # as the session recorded it
        out.unlink()
    assert asked  # some samples record no model


def test_the_session_gives_model_and_max_tokens_and_the_options_override_them(
    tmp_path: Path,
) -> None:
    session = tmp_path / "saved.json"
    request = {
        "model": "claude-sonnet-4-5",
        "max_tokens": 2048,
        "messages": [{"role": "user", "content": [{"type": "text", "text": "Hello"}]}],
    }
    session.write_text(json.dumps(request), encoding="utf-8")
    out = tmp_path / "request.json"
    assert (
        convert(str(session), "--to", "anthropic-messages", "--request", "-o", str(out)).exit_code
        == 0
    )
    body = json.loads(out.read_text(encoding="utf-8"))
    assert (body["model"], body["max_tokens"]) == ("claude-sonnet-4-5", 2048)
    assert accepted("anthropic-messages", body) == []
    args = ["--model", "claude-opus-4-1", "--max-tokens", "100"]
    result = convert(str(session), "--to", "openai-chat", "--request", "-o", str(out), *args)
    assert result.exit_code == 0, result.stderr
    body = json.loads(out.read_text(encoding="utf-8"))
    assert (body["model"], body["max_completion_tokens"]) == ("claude-opus-4-1", 100)
    assert accepted("openai-chat", body) == []


def test_a_model_the_provider_does_not_serve_is_named_not_sent() -> None:
    """A Codex session records gpt-5.5: an Anthropic request does not take it."""
    result = convert(
        str(sample("codemie_rollout")), "--to", "anthropic-messages", "--request", "-o", "-"
    )
    assert result.exit_code == 2
    assert result.stderr.strip() == (
        "compactkit: error: anthropic-messages --request needs a model and max_tokens, which the "
        "session does not give (it records gpt-5.5, which anthropic-messages does not serve): "
        "pass --model and --max-tokens"
    )
    assert result.stdout == ""


def test_model_and_max_tokens_are_for_requests() -> None:
    path = str(sample("codemie_rollout"))
    result = convert(path, "--to", "openai-chat", "--model", "gpt-4o")
    assert result.exit_code == 2
    assert "add --request" in result.stderr
    result = convert(path, "--to", "openai-chat", "--request", "--max-tokens", "0")
    assert result.exit_code == 2


def test_the_python_api_adds_no_model_unless_asked() -> None:
    """`WriterOptions(request=True)` alone keeps the body as before (the caller names the model
    in its SDK call); with `model` it is a complete request."""
    ctx = compactkit.load_one(sample("codemie_rollout"))
    bare = json.loads(
        compactkit.export(ctx, "openai-chat", compactkit.WriterOptions(request=True)).text
    )
    assert isinstance(bare, list)  # the messages array, as examples/openai_loop.py sends it
    options = compactkit.WriterOptions(request=True, model="gpt-4o", max_tokens=512)
    body = json.loads(compactkit.export(ctx, "openai-chat", options).text)
    assert list(body)[:3] == ["model", "max_completion_tokens", "messages"]
    assert accepted("openai-chat", body) == []
