"""A misbehaving MCP server on stdio (plain JSON-RPC, no SDK), for the proxy's failure cases.

Tools: `echo` answers its `text`; `fail` answers a JSON-RPC error; `hang` never answers;
`malformed` answers a result whose `content` is not a list; `die` exits the process; `meta`
answers the `_meta` and arguments it received, as JSON; `slow` answers its `text` after
`seconds`.
"""

from __future__ import annotations

import json
import os
import sys
import time

TOOLS = [
    {
        "name": name,
        "description": f"{name} (test)",
        "inputSchema": {
            "type": "object",
            "properties": {"text": {"type": "string"}, "seconds": {"type": "number"}},
        },
    }
    for name in ("echo", "fail", "hang", "malformed", "die", "meta", "slow")
]


def answer(msg_id: object, result: object = None, error: object = None) -> None:
    reply: dict[str, object] = {"jsonrpc": "2.0", "id": msg_id}
    reply.update({"error": error} if error is not None else {"result": result})
    sys.stdout.write(json.dumps(reply) + "\n")
    sys.stdout.flush()


def main() -> None:
    for line in sys.stdin:
        msg = json.loads(line)
        method, msg_id = msg.get("method"), msg.get("id")
        if msg_id is None:
            continue  # notifications
        params = msg.get("params") or {}
        if method == "initialize":
            answer(
                msg_id,
                {
                    "protocolVersion": params.get("protocolVersion", "2025-06-18"),
                    "capabilities": {"tools": {}},
                    "serverInfo": {"name": "fake-upstream", "version": "1"},
                },
            )
        elif method == "tools/list":
            answer(msg_id, {"tools": TOOLS})
        elif method == "ping":
            answer(msg_id, {})
        elif method == "tools/call":
            name = params.get("name")
            text = (params.get("arguments") or {}).get("text", "")
            if name == "echo":
                answer(msg_id, {"content": [{"type": "text", "text": text}]})
            elif name == "fail":
                answer(msg_id, error={"code": -32602, "message": "no such thing"})
            elif name == "malformed":
                answer(msg_id, {"content": "not a list"})
            elif name == "meta":
                seen = {"meta": params.get("_meta"), "arguments": params.get("arguments")}
                answer(msg_id, {"content": [{"type": "text", "text": json.dumps(seen)}]})
            elif name == "slow":
                time.sleep(float((params.get("arguments") or {}).get("seconds", 1)))
                answer(msg_id, {"content": [{"type": "text", "text": text}]})
            elif name == "die":
                os._exit(3)
            # hang: never answer
        else:
            answer(msg_id, error={"code": -32601, "message": "Method not found"})


if __name__ == "__main__":
    main()
