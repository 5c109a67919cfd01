"""An agent loop with the official openai SDK: a compactkit Session holds the context, compacts it
before every model call, and logs it so a crashed run resumes (see docs/agent-loop.md)."""

import json
import sys
from pathlib import Path

from openai import OpenAI

import compactkit
from compactkit import Message, Session, TextBlock, ToolCallBlock, ToolResultBlock, WriterOptions

TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "read_file",
            "description": "Read a file",
            "parameters": {"type": "object", "properties": {"path": {"type": "string"}}},
        },
    }
]


def run(task: str, log: Path, model: str = "gpt-4.1-mini", trigger: int = 60_000) -> str:
    client = OpenAI()  # OPENAI_BASE_URL and OPENAI_API_KEY come from the environment
    if log.exists():
        session = Session.load(log)  # resume where a crashed run stopped
    else:
        session = Session(trigger=trigger, target=trigger // 2)
        session.save(log)
        session.append(compactkit.message("user", task))
    while True:
        session.compact_if_needed()
        request = compactkit.export(session.context, "openai-chat", WriterOptions(request=True))
        reply = (
            client.chat.completions.create(
                model=model,
                messages=json.loads(request.text),
                tools=TOOLS,  # type: ignore[arg-type]
            )
            .choices[0]
            .message
        )
        calls = [
            ToolCallBlock(id=c.id, name=c.function.name, input=json.loads(c.function.arguments))
            for c in reply.tool_calls or []
            if c.type == "function"
        ]
        text = [TextBlock(text=reply.content)] if reply.content else []
        session.append(Message(role="assistant", content=(*text, *calls)))
        if not calls:
            return reply.content or ""
        for call in calls:
            output = Path(str(call.input["path"])).read_text()  # type: ignore[call-overload,index]
            result = ToolResultBlock(tool_call_id=call.id, content=(TextBlock(text=output),))
            session.append(Message(role="tool", content=(result,)))


if __name__ == "__main__":
    print(run(sys.argv[1], Path(sys.argv[2])))
