"""Generated long sessions of the shapes that make a compaction policy thrash or never pay back.

Each is deterministic (seeded) and shaped after what real agents write: tool calls with their
results, assistant text, and turns in the user's own words. The shapes:

* ``templates``: a custom prompt template (about 4,000 tokens) expanded inside several user turns,
  as Codex prompts do, so the user's words alone pass the target;
* ``chat``: a chat whose turns are only user text and assistant answers (aider);
* ``paste``: large pasted logs in user turns (the pinned words over the target);
* ``agent``: an ordinary coding session (read, edit, test) that keeps growing;
* ``short_end``: an agent session that ends a few calls after it first crosses the trigger.
"""

from __future__ import annotations

import random
from collections.abc import Callable

from compactkit import AgentContext, Message, TextBlock, ToolCallBlock, ToolResultBlock

_TEXT = (
    "the request handler returns a cached value when the key is present otherwise it reads the "
    "configuration file parses every section validates the schema and stores the result in the "
    "registry so that later calls reuse it without touching the disk again while tests cover each "
    "branch including errors raised for missing keys malformed values and permissions"
)
_WORDS = _TEXT.split(" ")


def _prose(rng: random.Random, words: int) -> str:
    return " ".join(rng.choice(_WORDS) for _ in range(words))


def _code(rng: random.Random, path: str, lines: int) -> str:
    body = [f"# {path}"]
    for k in range(lines):
        name = rng.choice(_WORDS)
        body.append(f"def {name}_{k}(value: int) -> int:  # {_prose(rng, 6)}")
        body.append(f"    return value * {rng.randint(2, 99)} + {name[:3]!r}.count('e')")
    return "\n".join(body)


def _user(text: str) -> Message:
    return Message(role="user", content=(TextBlock(text=text),))


def _assistant(text: str) -> Message:
    return Message(role="assistant", content=(TextBlock(text=text),))


def _tool_turn(rng: random.Random, n: int, lines: int) -> list[Message]:
    path = f"src/pkg/module_{rng.randint(0, 40)}.py"
    kind = rng.random()
    if kind < 0.5:
        call = ToolCallBlock(id=f"call_{n}", name="read_file", input={"path": path})
        out, error = _code(rng, path, lines), False
    elif kind < 0.8:
        cmd = f"pytest tests/test_module_{rng.randint(0, 40)}.py -q"
        call = ToolCallBlock(id=f"call_{n}", name="bash", input={"command": cmd})
        error = rng.random() < 0.3
        tail = (
            f"FAILED tests/test_x.py::test_{n} - AssertionError: {_prose(rng, 5)}\n1 failed"
            if error
            else f"{rng.randint(3, 90)} passed"
        )
        out = "\n".join(f"tests/test_{k}.py ....." for k in range(lines // 4)) + "\n" + tail
    else:
        call = ToolCallBlock(
            id=f"call_{n}",
            name="edit_file",
            input={"path": path, "old": _prose(rng, 8), "new": _prose(rng, 9)},
        )
        out, error = f"edited {path}", False
    head = Message(role="assistant", content=(TextBlock(text=_prose(rng, 25)), call))
    result = ToolResultBlock(tool_call_id=call.id, content=(TextBlock(text=out),), is_error=error)
    return [head, Message(role="tool", content=(result,))]


def _output(msg: Message, tokens: int) -> Message:
    """The message with the output tokens a session records for its model call."""
    usage = {"output_tokens": tokens}
    return msg.model_copy(update={"metadata": {**msg.metadata, "usage": usage}})


def agent(seed: int = 1, calls: int = 160, lines: int = 30) -> AgentContext:
    rng = random.Random(seed)
    messages: list[Message] = [_user("Fix the failing configuration tests. " + _prose(rng, 40))]
    for n in range(calls):
        turn = _tool_turn(rng, n, lines)
        turn[0] = _output(turn[0], rng.randint(80, 400))
        messages.extend(turn)
        if rng.random() < 0.06:
            messages.append(_user("Also: " + _prose(rng, rng.randint(10, 60))))
    messages.append(_output(_assistant("Done. " + _prose(rng, 40)), 200))
    return AgentContext(
        system_instruction="You are a coding agent. " + _prose(rng, 300),
        messages=tuple(messages),
        metadata={"source_format": "generated"},
    )


def _working(
    rng: random.Random,
    first: Message,
    calls: int,
    lines: int,
    every: int,
    user_turn: Callable[[int], Message],
    done: str,
) -> AgentContext:
    """A session that opens with `first`, then `calls` tool turns with a turn in the user's words
    (`user_turn(n)`) before every `every`th, closing with the answer `done`."""
    messages = [first]
    for n in range(calls):
        if n and n % every == 0:
            messages.append(user_turn(n))
        turn = _tool_turn(rng, n, lines)
        turn[0] = _output(turn[0], rng.randint(80, 300))
        messages.extend(turn)
    messages.append(_output(_assistant(done + " " + _prose(rng, 30)), 150))
    return AgentContext(messages=tuple(messages), metadata={"source_format": "generated"})


def templates(seed: int = 2, calls: int = 103, template_words: int = 3_000) -> AgentContext:
    """User turns that expand one ~4k-token prompt template (re-sent several times)."""
    rng = random.Random(seed)
    template = "<custom prompt: review>\n" + _prose(rng, template_words) + "\n</custom prompt>"

    def resent(n: int) -> Message:  # the template as is, with this turn's request after it
        request = TextBlock(text=f"Now review part {n // 12}.")
        return Message(role="user", content=(TextBlock(text=template), request))

    first = _user(template + "\nReview the parser module.")
    return _working(rng, first, calls, 14, 12, resent, "Review finished.")


def pinned(seed: int = 6, calls: int = 110, words: int = 1_200) -> AgentContext:
    """A new long message in the user's own words every few calls (specs, reviews pasted in):
    the user's words alone grow past the target, and none repeats."""
    rng = random.Random(seed)
    first = _user("Implement the spec below.\n" + _prose(rng, words))

    def spec(n: int) -> Message:
        return _user(f"Spec part {n // 6}:\n" + _prose(rng, words))

    return _working(rng, first, calls, 12, 6, spec, "Implemented.")


def chat(seed: int = 3, turns: int = 90) -> AgentContext:
    """Only user text and assistant answers."""
    rng = random.Random(seed)
    messages: list[Message] = []
    for n in range(turns):
        messages.append(_user(f"Question {n}: " + _prose(rng, rng.randint(40, 400))))
        messages.append(_output(_assistant(_prose(rng, rng.randint(100, 500))), 400))
    return AgentContext(messages=tuple(messages), metadata={"source_format": "generated"})


def paste(seed: int = 4, calls: int = 80) -> AgentContext:
    """Large pasted logs in the user's turns."""
    rng = random.Random(seed)
    log = "\n".join(f"2026-01-0{k % 9 + 1} ERROR worker {k}: {_prose(rng, 12)}" for k in range(400))

    def pasted(text: str) -> Message:
        return Message(role="user", content=(TextBlock(text=text), TextBlock(text=log)))

    first = pasted("Why does the worker crash? Log:")
    return _working(
        rng, first, calls, 20, 20, lambda _: pasted("It crashed again, the same log:"), "Found it."
    )


def short_end(seed: int = 5, trigger: int = 30_000) -> AgentContext:
    """An agent session cut a few calls after it first passes `trigger` tokens."""
    from compactkit.registry import get_counter

    full = agent(seed, calls=200)
    counter = get_counter("o200k_base")
    total = counter.preamble(full)
    for i, msg in enumerate(full.messages):
        total += counter.message(msg)
        if total > trigger and msg.role == "tool":
            return full.replace(messages=full.messages[: i + 5])
    return full


ALL = {
    "agent": agent,
    "templates": templates,
    "pinned": pinned,
    "chat": chat,
    "paste": paste,
    "short_end": short_end,
}
