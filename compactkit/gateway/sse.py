"""The usage a provider reports, read from a response body or its server-sent events."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

from .conversations import Usage


def events(data: bytes) -> Iterator[Any]:
    """The JSON payloads of `data:` lines in an event stream (others skipped)."""
    for line in data.splitlines():
        if not line.startswith(b"data:"):
            continue
        text = line[5:].strip()
        if not text or text == b"[DONE]":
            continue
        try:
            yield json.loads(text)
        except ValueError:
            continue


def _int(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def _from_usage(api: str, usage: Any) -> Usage | None:
    if not isinstance(usage, dict):
        return None
    if api == "anthropic":
        return Usage(
            responses=1,
            input_tokens=_int(usage.get("input_tokens")),
            cache_read_tokens=_int(usage.get("cache_read_input_tokens")),
            cache_write_tokens=_int(usage.get("cache_creation_input_tokens")),
            output_tokens=_int(usage.get("output_tokens")),
        )
    details = usage.get("prompt_tokens_details") or usage.get("input_tokens_details") or {}
    cached = _int(details.get("cached_tokens")) if isinstance(details, dict) else 0
    prompt = _int(usage.get("prompt_tokens", usage.get("input_tokens")))
    output = _int(usage.get("completion_tokens", usage.get("output_tokens")))
    # OpenAI counts cached tokens inside the prompt; recorded here as Anthropic does, apart
    return Usage(
        responses=1, input_tokens=prompt - cached, cache_read_tokens=cached, output_tokens=output
    )


def usage_of_body(api: str, body: bytes) -> Usage | None:
    """The usage of a non-streamed response."""
    try:
        data = json.loads(body)
    except ValueError:
        return None
    return _from_usage(api, data.get("usage")) if isinstance(data, dict) else None


def usage_of_events(api: str, body: bytes) -> Usage | None:
    """The usage of a streamed response: Anthropic's `message_start` then `message_delta`
    (whose counts are cumulative), the chat-completions chunk that carries `usage` (with
    `stream_options.include_usage`), the Responses `response.completed` event."""
    found: Usage | None = None
    for event in events(body):
        if not isinstance(event, dict):
            continue
        if api == "anthropic":
            kind = event.get("type")
            if kind == "message_start" and isinstance(event.get("message"), dict):
                found = _from_usage(api, event["message"].get("usage")) or found
            elif kind == "message_delta" and isinstance(event.get("usage"), dict) and found:
                delta = event["usage"]
                found.output_tokens = _int(delta.get("output_tokens")) or found.output_tokens
                for key, attr in (
                    ("input_tokens", "input_tokens"),
                    ("cache_read_input_tokens", "cache_read_tokens"),
                    ("cache_creation_input_tokens", "cache_write_tokens"),
                ):
                    if _int(delta.get(key)):
                        setattr(found, attr, _int(delta[key]))
        elif api == "openai-chat":
            found = _from_usage(api, event.get("usage")) or found
        elif event.get("type") == "response.completed" and isinstance(event.get("response"), dict):
            found = _from_usage(api, event["response"].get("usage")) or found
    return found


__all__ = ["events", "usage_of_body", "usage_of_events"]
