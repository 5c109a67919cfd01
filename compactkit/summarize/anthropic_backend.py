"""The `anthropic` llm-summary backend: the Anthropic Messages API through the official `anthropic`
SDK (install `compactkit[anthropic]`).

The key comes from `ANTHROPIC_API_KEY`; `base_url` points at a proxy or gateway. Requests ask for
temperature 0 and at most `summary_max_tokens` tokens, with no retries; failures become one-line
`StrategyError`s that never contain the key.
"""

from __future__ import annotations

from typing import Any

from .base import (
    Summarizer,
    SummaryRequest,
    api_key,
    client_options,
    failure,
    import_sdk,
    sdk_errors,
)

ENV_KEY = "ANTHROPIC_API_KEY"
DEFAULT_MODEL = "claude-haiku-4-5"


class AnthropicSummarizer(Summarizer):
    """Summaries from the Anthropic Messages API (`/v1/messages`)."""

    name = "anthropic"
    description = "Anthropic Messages API (official SDK; ANTHROPIC_API_KEY, base_url, model)."
    default_model = DEFAULT_MODEL

    def summarize(self, request: SummaryRequest) -> str:
        sdk = import_sdk("anthropic", "anthropic", self.name)
        key = api_key(ENV_KEY, self.name)
        model = request.model or self.default_model
        kwargs = client_options(request, key)
        transcript = request.transcript
        create_kwargs: dict[str, Any] = {
            "model": model,
            "max_tokens": request.summary_max_tokens,
            "system": self.system_prompt(request),
            "messages": [{"role": "user", "content": transcript}],
        }
        with sdk_errors(
            sdk,
            sdk.AnthropicError,
            self.name,
            request,
            key,
            "the Anthropic API",
            "the Messages API",
        ):
            client = sdk.Anthropic(**kwargs)
            with client:
                messages = client.messages
                if _accepts(messages.create, "temperature"):
                    create_kwargs["temperature"] = 0
                else:  # SDK versions without the parameter still send it in the body
                    create_kwargs["extra_body"] = {"temperature": 0}
                reply = messages.create(**create_kwargs)
        return _reply_text(reply, self.name, key)


def _accepts(fn: Any, parameter: str) -> bool:
    import inspect

    try:
        return parameter in inspect.signature(fn).parameters
    except (TypeError, ValueError):
        return False


def _reply_text(reply: Any, backend: str, key: str) -> str:
    hint = "check that base_url= serves the Messages API, or set fallback=extractive"
    content = getattr(reply, "content", None)
    if not isinstance(content, list) or not content:
        raise failure(backend, "malformed reply (no content)", hint, key)
    texts = [getattr(b, "text", None) for b in content if getattr(b, "type", None) == "text"]
    text = "\n".join(t for t in texts if isinstance(t, str)).strip()
    if not text:
        raise failure(backend, "malformed reply (empty summary text)", hint, key)
    return text
