"""The retention scorer: facts from what the model saw, kept or recoverable, and scorer plugins."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import compactkit
import compactkit.recovery
from compactkit import (
    AgentContext,
    Message,
    TextBlock,
    ToolCallBlock,
    ToolResultBlock,
)
from compactkit.bench.retention import FACT_KINDS, FactRetention, extract_facts
from compactkit.bench.runner import run_bench
from compactkit.pipeline import get_strategy
from compactkit.registry import make_registry
from compactkit.spec import parse_pipeline

from ..conftest import every_conversation, sample


def test_retention_counts_what_the_model_can_still_see() -> None:
    ctx = compactkit.load_one(sample("sphinx-doc"))
    facts = extract_facts(ctx)
    kinds = {f.kind for f in facts}
    assert {"task", "last_instruction", "path", "error"} <= kinds
    assert facts[0].kind == "task" and facts[0].text in " ".join(ctx.task.split())
    out = get_strategy("sliding-window", max_tokens=15_000).compact(ctx)
    kept, recovered = FactRetention().score(ctx, out)
    assert kept.kind_share("task") == 1.0
    assert kept.share < 1.0  # the dropped middle held paths and errors
    assert recovered.share == 1.0  # expand brings everything back


def test_none_keeps_every_fact_of_every_corpus_conversation() -> None:
    """Facts are what the model saw in the original, so the unchanged context keeps them all."""
    kinds: dict[str, int] = {}
    for name, ctx in every_conversation():
        kept, recovered = FactRetention().score(ctx, ctx)
        for kind, (got, total) in kept.by_kind.items():
            assert got == total, f"{name}: {kind} {got}/{total}"
            kinds[kind] = kinds.get(kind, 0) + total
        assert recovered.share == 1.0, name
    assert set(kinds) == set(FACT_KINDS) and min(kinds.values()) > 0
    assert kinds["user_message"] >= kinds["task"]


def _said(text: str) -> Message:
    return Message(role="user", content=(TextBlock(text=text),))


def test_a_dropped_user_message_lowers_user_retention() -> None:
    ctx = compactkit.load_one(sample("pi-mono"))
    said = [i for i, m in enumerate(ctx.messages) if m.is_human]
    assert len(said) >= 5
    dropped = said[3]
    # the message replaced by something else the model sees: one user message fewer
    out = ctx.with_messages(
        (*ctx.messages[:dropped], _said("(removed)"), *ctx.messages[dropped + 1 :])
    )
    kept, recovered = FactRetention().score(ctx, out)
    total = kept.by_kind["user_message"][1]
    assert total == len({" ".join(ctx.messages[i].text.split())[:1000] for i in said})
    assert kept.by_kind["user_message"] == [total - 1, total]
    assert kept.kind_share("path") == 1.0 and recovered.by_kind["user_message"][0] == total - 1
    # cut to its first 100 characters, a message is not retained either
    text = ctx.messages[said[1]].text
    assert len(text) > 100
    shortened = ctx.with_messages(
        (*ctx.messages[: said[1]], _said(text[:100]), *ctx.messages[said[1] + 1 :])
    )
    assert FactRetention().score(ctx, shortened)[0].by_kind["user_message"] == [total - 1, total]
    # harness text in a user turn is not the user's words: no fact, whatever happens to it
    harness = ctx.with_messages(
        (
            *ctx.messages,
            Message(
                role="user",
                content=(TextBlock(text="<system-reminder>tests pass</system-reminder>"),),
                metadata={"origin": "harness"},
            ),
        )
    )
    assert all(
        f.kind != "user_message" or "system-reminder" not in f.text for f in extract_facts(harness)
    )


def test_facts_are_only_what_the_model_saw() -> None:
    call = ToolCallBlock(id="c1", name="bash", input={"command": "cd app && cat src/io.py | head"})
    edit = ToolCallBlock(id="c2", name="edit", input={"file_path": "src/api.py", "old": "a"})
    failed = ToolResultBlock(
        tool_call_id="c1",
        content=(
            TextBlock(
                text="<returncode>1</returncode>\n<output>\nTraceback (most recent call last):\n"
                '  File "src/io.py", line 3\n    raise ValueError(x)\nValueError: bad header\n'
                "npm error Lifecycle script `test` failed with error:\n</output>"
            ),
        ),
    )
    ok = ToolResultBlock(tool_call_id="c2", content=(TextBlock(text="Exit code: 0\nerror: none"),))
    ctx = AgentContext(
        system_instruction="You are a coding agent.",
        messages=(
            Message(
                role="user",
                content=(TextBlock(text="Fix the header parsing"),),
                metadata={"cwd": "/home/me/secret-path.py"},
            ),
            Message(role="assistant", content=(call, edit)),
            Message(role="tool", content=(failed, ok)),
        ),
        recovery={
            "0123456789abcdef": '[{"role":"user","content":[{"type":"text","text":"x.py"}]}]'
        },
    )
    facts = {(f.kind, f.text) for f in extract_facts(ctx)}
    assert facts == {
        ("task", "Fix the header parsing"),
        ("user_message", "Fix the header parsing"),
        ("last_instruction", "Fix the header parsing"),
        ("path", "src/io.py"),
        ("path", "src/api.py"),
        ("error", "ValueError: bad header"),  # the report, not the npm wrapper or the source line
    }


def test_the_scorer_imports_nothing_from_what_it_judges() -> None:
    """The scorer's extraction is its own: no module it imports (directly or through other
    compactkit modules) is a summarizer or a strategy."""
    import ast
    import importlib.util

    def is_module(name: str) -> bool:
        try:
            return importlib.util.find_spec(name) is not None
        except ModuleNotFoundError:  # `package.module.attribute`
            return False

    seen: set[str] = set()
    todo = ["compactkit.bench.retention"]
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        spec = importlib.util.find_spec(name)
        assert spec is not None and spec.origin is not None
        tree = ast.parse(Path(spec.origin).read_text(encoding="utf-8"))
        package = name if spec.origin.endswith("__init__.py") else name.rpartition(".")[0]
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom):
                base = importlib.util.resolve_name("." * node.level + (node.module or ""), package)
                found = [base] + [f"{base}.{a.name}" for a in node.names]
            elif isinstance(node, ast.Import):
                found = [a.name for a in node.names]
            else:
                continue
            for module in found:
                if module.startswith("compactkit") and is_module(module):
                    todo.append(module)
    assert "compactkit.recovery" in seen and "compactkit.context" in seen
    judged = sorted(
        m for m in seen if m.startswith(("compactkit.summarize", "compactkit.strategies"))
    )
    assert judged == []


class _TaskLengthScorer:
    """A third-party scorer: is the task still visible, scored on its own."""

    name = "task-only"
    description = "the task, alone"

    def score(self, original: Any, compacted: Any, stash: Any = None) -> Any:
        from compactkit.bench.retention import Fact, score_facts, visible_text

        facts = [Fact("task", " ".join(original.task.split())[:200])]
        return score_facts(facts, visible_text(compacted)), score_facts(
            facts, visible_text(compactkit.recovery.expand(compacted))
        )


class _BrokenScorer:
    name = "broken"
    description = "raises"

    def score(self, original: Any, compacted: Any, stash: Any = None) -> Any:
        raise RuntimeError("scorer bug")


class _ScorerPlugin:
    @compactkit.hookimpl
    def register_scorers(self, register: Any) -> None:
        register(_TaskLengthScorer())
        register(_BrokenScorer())


def test_scorer_plugins_are_reported_and_cannot_break_a_run() -> None:
    registry = make_registry(entry_points=False, plugins=[_ScorerPlugin()])
    assert registry.scorers.names() == ["broken", "facts", "task-only"]
    window = [parse_pipeline("sliding-window:max_tokens=20000")]
    report = run_bench([str(sample("sphinx-doc"))], window, trigger=20_000, registry=registry)
    for session in report["sessions"]:
        assert session["scores"]["task-only"]["retention"]["share"] == 1.0
        assert "scorer bug" in session["scores"]["broken"]["error"]
        assert "facts" not in session["scores"]  # the built-in one fills `retention` itself
