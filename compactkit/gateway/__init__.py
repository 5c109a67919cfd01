"""`compactkit gateway`: the persistent compaction policy live, between an agent and its model
API (Anthropic Messages, OpenAI Chat Completions and Responses). See docs/gateway.md.

```python
from compactkit.gateway import GatewayConfig, create_app

app = create_app(GatewayConfig(upstream_anthropic="https://api.anthropic.com", trigger=60_000))
# uvicorn.run(app, host="127.0.0.1", port=8787)
```

Needs the `gateway` extra (`pip install 'compactkit[gateway]'`: starlette, uvicorn, httpx).
"""

from __future__ import annotations

from .app import Gateway, GatewayConfig, create_app

__all__ = ["Gateway", "GatewayConfig", "create_app"]
