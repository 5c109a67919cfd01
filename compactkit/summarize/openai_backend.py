"""The `openai` llm-summary backend: any OpenAI-compatible chat-completions endpoint, through the
official `openai` SDK (install `compactkit[openai]`).

The key comes from `OPENAI_API_KEY`; `base_url` points at any compatible server (vLLM, Ollama,
LiteLLM, Azure-style proxies). Requests use temperature 0 and no retries; failures become one-line
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

ENV_KEY = "OPENAI_API_KEY"
DEFAULT_MODEL = "gpt-4o-mini"


class OpenAISummarizer(Summarizer):
    """Summaries from an OpenAI-compatible `/v1/chat/completions` endpoint."""

    name = "openai"
    description = (
        "OpenAI or any OpenAI-compatible endpoint (official SDK; OPENAI_API_KEY, base_url, model)."
    )
    default_model = DEFAULT_MODEL

    def summarize(self, request: SummaryRequest) -> str:
        sdk = import_sdk("openai", "openai", self.name)
        key = api_key(ENV_KEY, self.name)
        model = request.model or self.default_model
        kwargs = client_options(request, key)
        transcript = request.transcript
        with sdk_errors(
            sdk,
            sdk.OpenAIError,
            self.name,
            request,
            key,
            "the OpenAI API",
            "the chat completions API",
        ):
            client = sdk.OpenAI(**kwargs)
            with client:
                reply = client.chat.completions.create(
                    model=model,
                    temperature=0,
                    messages=[
                        {"role": "system", "content": self.system_prompt(request)},
                        {"role": "user", "content": transcript},
                    ],
                )
        return _reply_text(reply, self.name, key)


def _reply_text(reply: Any, backend: str, key: str) -> str:
    hint = "check that base_url= serves the chat completions API, or set fallback=extractive"
    choices = getattr(reply, "choices", None)
    if not isinstance(choices, list) or not choices:
        raise failure(backend, "malformed reply (no choices)", hint, key)
    message = getattr(choices[0], "message", None)
    text = getattr(message, "content", None)
    if not isinstance(text, str) or not text.strip():
        raise failure(backend, "malformed reply (empty summary text)", hint, key)
    return text.strip()
