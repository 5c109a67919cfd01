"""Session formats: reading files into `AgentContext`s and writing them back."""

from __future__ import annotations

from .base import Document, Format, parse_text, read_document, require_single

__all__ = ["Document", "Format", "parse_text", "read_document", "require_single"]
