"""Small helpers shared by format adapters."""

from __future__ import annotations

import json
from typing import Any

from ..context import ContentPart, ImageBlock, TextBlock


def as_text(value: Any) -> str:
    """Render an arbitrary JSON value as text (strings pass through unchanged)."""
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False)


def parse_arguments(raw: Any) -> Any:
    """Tool-call arguments as a JSON value: JSON strings are parsed, other text kept as a string."""
    if isinstance(raw, str):
        try:
            return json.loads(raw) if raw.strip() else {}
        except json.JSONDecodeError:
            return raw
    return {} if raw is None else raw


def parts_from_content(content: Any) -> tuple[ContentPart, ...]:
    """Tool-result or message content (a string, or a list of text/image parts) as content parts."""
    if content is None:
        return ()
    if isinstance(content, str):
        return (TextBlock(text=content),) if content else ()
    if isinstance(content, dict):
        content = [content]
    parts: list[ContentPart] = []
    for item in content:
        if isinstance(item, str):
            parts.append(TextBlock(text=item))
        elif isinstance(item, dict):
            kind = item.get("type")
            if kind in ("text", "input_text", "output_text"):
                parts.append(TextBlock(text=as_text(item.get("text"))))
            elif kind in ("image", "image_url", "input_image"):
                parts.append(image_from(item))
            else:
                parts.append(TextBlock(text=as_text(item)))
        else:
            parts.append(TextBlock(text=as_text(item)))
    return tuple(parts)


def image_from(item: dict[str, Any]) -> ImageBlock:
    """An image part from the OpenAI (`image_url`) or Anthropic (`source`) shapes."""
    if item.get("type") == "image_url":
        url = item.get("image_url")
        url = url.get("url") if isinstance(url, dict) else url
        return ImageBlock(url=url)
    if item.get("type") == "input_image":
        return ImageBlock(url=item.get("image_url"))
    source = item.get("source") or {}
    if source.get("type") == "base64":
        return ImageBlock(media_type=source.get("media_type"), data=source.get("data"))
    return ImageBlock(media_type=source.get("media_type"), url=source.get("url"))
