"""Print the JSON Schema of the native context format (`python -m compactkit.schema`)."""

from __future__ import annotations

import json
from typing import Any

from .context import NATIVE_FORMAT_TAG, AgentContext


def context_schema() -> dict[str, Any]:
    """JSON Schema of a native context file, with its required format tag."""
    schema = AgentContext.model_json_schema()
    schema["title"] = "compactkit context"
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["properties"] = {
        "format": {"const": NATIVE_FORMAT_TAG, "description": "Format tag and version."},
        **schema["properties"],
    }
    schema["required"] = ["format", *schema.get("required", [])]
    return schema


if __name__ == "__main__":
    print(json.dumps(context_schema(), indent=2, sort_keys=True))
