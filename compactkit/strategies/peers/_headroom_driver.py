"""Run by the peer environment's own python (never imported by compactkit): headroom-ai's
`compress` on one request per line of standard input, the result as one line of standard output.

Request: {"messages": [OpenAI chat message dicts], "model": "gpt-4o"}.
Answer: {"messages": [...], "tokens_before": N, "tokens_after": N} or {"error": "..."}.
"""

import json
import sys


def main() -> None:
    # the peer environment's package, never installed beside compactkit (see peer_headroom)
    from headroom import compress  # type: ignore[import-not-found]

    for line in sys.stdin:
        try:
            request = json.loads(line)
            result = compress(request["messages"], model=request.get("model", "gpt-4o"))
            answer = {
                "messages": result.messages,
                "tokens_before": result.tokens_before,
                "tokens_after": result.tokens_after,
            }
        except Exception as exc:  # one bad request answers with its error, the driver goes on
            answer = {"error": f"{type(exc).__name__}: {exc}"}
        sys.stdout.write(json.dumps(answer, default=str) + "\n")
        sys.stdout.flush()


if __name__ == "__main__":
    main()
