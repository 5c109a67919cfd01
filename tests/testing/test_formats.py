"""The conformance kit a format author runs (`check_format`): what it catches and how it says where."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from compactkit import (
    ORIGIN_KEY,
    AgentContext,
    BadInputError,
    Document,
    Format,
    Message,
    TextBlock,
    ToolCallBlock,
    ToolResultBlock,
)
from compactkit.testing import check_format, pairing_problems

from ..conftest import sample

SESSION = {
    "toy": [
        {"role": "user", "text": "list the files"},
        {"role": "assistant", "text": "Listing.", "run": "ls", "output": "a.py b.py"},
        {"role": "note", "text": "(budget: 3 calls left)"},
        {"role": "assistant", "text": "Two files."},
    ]
}


class Toy(Format):
    """`{"toy": [{"role", "text", "run"?, "output"?}]}`, read and written back."""

    name = "toy"
    description = "a toy session format"
    priority = 10
    can_write = True

    def sniff(self, doc: Document) -> bool:
        return doc.kind == "json" and isinstance(doc.data, dict) and "toy" in doc.data

    def load(self, doc: Document) -> list[AgentContext]:
        if not self.sniff(doc):
            raise BadInputError("not a toy session", path=doc.path)
        messages: list[Message] = []
        for n, line in enumerate(doc.data["toy"]):
            messages.extend(self.messages(n, line))
        return [AgentContext(messages=tuple(messages), metadata=self.metadata())]

    def metadata(self) -> dict[str, Any]:
        return {"source_format": self.name}

    def messages(self, n: int, line: dict[str, Any]) -> list[Message]:
        text = (TextBlock(text=line["text"]),)
        if line["role"] == "note":
            return [Message(role="user", content=text, metadata={ORIGIN_KEY: "harness"})]
        if "run" not in line:
            return [Message(role=line["role"], content=text)]
        call = ToolCallBlock(id=f"call_{n}", name="shell", input={"command": line["run"]})
        result = ToolResultBlock(tool_call_id=call.id, content=(TextBlock(text=line["output"]),))
        return [
            Message(role="assistant", content=(*text, call)),
            Message(role="tool", content=(result,)),
        ]

    def dump(self, contexts: Sequence[AgentContext]) -> str:
        (ctx,) = contexts
        output = {r.tool_call_id: r.text for m in ctx.messages for r in m.tool_results}
        lines: list[dict[str, Any]] = []
        for m in ctx.messages:
            if m.role == "tool":
                continue
            line: dict[str, Any] = {"role": "note" if m.origin else m.role, "text": m.text}
            for call in m.tool_calls:
                line.update(run=call.input["command"], output=output[call.id])  # type: ignore[index]
            lines.append(line)
        return json.dumps({"toy": lines})


@pytest.fixture
def session(tmp_path: Path) -> Path:
    path = tmp_path / "toy.json"
    path.write_text(json.dumps(SESSION), encoding="utf-8")
    return path


def test_a_format_that_keeps_the_contract_passes(session: Path) -> None:
    assert check_format(Toy(), [session], others=[sample("test-repo-i1")]) == []
    assert check_format(Toy(), [session], writes="exact") == []


def test_a_sniff_that_claims_other_formats_files_is_caught(session: Path) -> None:
    class Greedy(Toy):
        def sniff(self, doc: Document) -> bool:
            return doc.kind == "json"

    problems = check_format(Greedy(), [session], others=[sample("test-repo-i1")])
    assert "testdata_gpt4_test-repo-i1.traj: sniff claims another format's file" in problems
    # the sessions the built-in writers write are other formats' files too, except where a
    # format of higher priority claims them (compactkit's native JSON: detection never picks Greedy)
    assert "<anthropic-messages sample>: sniff claims another format's file" in problems
    assert not any(p.startswith("<compactkit sample>") for p in problems)


def test_a_sniff_that_raises_is_reported(session: Path) -> None:
    class Crashing(Toy):
        def sniff(self, doc: Document) -> bool:
            if "toy" not in doc.data:
                raise KeyError("toy")
            return True

    problems = check_format(Crashing(), [session], others=[sample("test-repo-i1")])
    assert "testdata_gpt4_test-repo-i1.traj: sniff raised KeyError: 'toy'" in problems


def test_a_session_without_the_users_words_has_no_task(session: Path) -> None:
    class AllHarness(Toy):
        def messages(self, n: int, line: dict[str, Any]) -> list[Message]:
            out = super().messages(n, line)
            return [
                m.model_copy(update={"metadata": {ORIGIN_KEY: "harness"}})
                if m.role == "user"
                else m
                for m in out
            ]

    problems = check_format(AllHarness(), [session])
    assert problems == [
        "toy.json#0: has no message in the human's words (every user message has an origin)"
    ]


def test_unpaired_calls_unknown_origins_and_a_missing_source_format(session: Path) -> None:
    class Sloppy(Toy):
        def metadata(self) -> dict[str, Any]:
            return {}

        def messages(self, n: int, line: dict[str, Any]) -> list[Message]:
            out = [m for m in super().messages(n, line) if m.role != "tool"]  # results lost
            if line["role"] == "note":
                return [Message(role="assistant", content=out[0].content, metadata={"origin": "x"})]
            return out

    problems = check_format(Sloppy(), [session], writes=False)
    assert "toy.json#0: metadata source_format is None, not 'toy'" in problems
    assert "toy.json#0: pairing: message 1: tool call call_1 never answered" in problems
    assert any(p.startswith("toy.json#0: invalid: ") for p in problems)
    assert any("origin 'x' on a assistant message" in p for p in problems)


def test_a_writer_that_changes_what_it_reads_back_is_caught(session: Path) -> None:
    class Drifting(Toy):
        def dump(self, contexts: Sequence[AgentContext]) -> str:
            data = json.loads(super().dump(contexts))
            data["toy"][0]["text"] += "!"  # every trip adds one
            return json.dumps(data)

    problems = check_format(Drifting(), [session])
    assert problems == [
        "toy.json#0: export / re-import is not stable: the second trip differs at "
        "messages[0].content[0].text"
    ]
    exact = check_format(Drifting(), [session], writes="exact")
    assert "toy.json#0: load(dump(ctx)) != ctx at messages[0].content[0].text" in exact


def test_writes_needs_a_writer_and_files_are_needed(session: Path) -> None:
    class ReadOnly(Toy):
        can_write = False

    assert check_format(ReadOnly(), [session]) == []
    assert check_format(ReadOnly(), [session], writes=True) == [
        "toy: writes=True but can_write is False"
    ]
    assert check_format(ReadOnly(), []) == ["toy: no files of its own to check"]


def test_pairing_problems_name_the_message() -> None:
    call = ToolCallBlock(id="c1", name="shell", input={})
    ctx = AgentContext(
        messages=(
            Message(role="user", content=(TextBlock(text="go"),)),
            Message(role="assistant", content=(call,)),
            Message(role="user", content=(TextBlock(text="stop"),)),
            Message(role="assistant", content=(TextBlock(text="ok"),)),
        )
    )
    assert pairing_problems(ctx) == ["message 1: tool call c1 never answered"]
