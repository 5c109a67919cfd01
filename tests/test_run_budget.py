"""`run --budget N` means what users expect: a session larger than N ends between 0.7 N and N,
the newest turns kept verbatim beside the summary; `--target` asks for less."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

import compactkit
from compactkit.cli import make_cli
from compactkit.registry import make_registry
from compactkit.strategies._common import units

from .conftest import every_conversation

CLI = make_cli(lambda **kw: make_registry(entry_points=False, env={}, **kw))


def _run(path: str, *args: str, out: Path) -> tuple[int, compactkit.AgentContext]:
    result = CliRunner().invoke(CLI, ["run", path, *args, "-o", str(out)])
    return result.exit_code, compactkit.load_one(out)


def _large() -> list[tuple[str, compactkit.AgentContext]]:
    return [(n, c) for n, c in every_conversation() if compactkit.count_tokens(c) > 45_000]


def _next_turn_too_large(
    ctx: compactkit.AgentContext, out: compactkit.AgentContext, budget: int
) -> bool:
    """Whether the turn just older than the turns `out` kept verbatim after its summary could not
    be kept: turns are kept whole, newest first, beside a summary for which a quarter of the
    budget (at most 4,000 tokens) is set aside."""
    kept = 0
    while kept < len(out.messages) and out.messages[-1 - kept] == ctx.messages[-1 - kept]:
        kept += 1
    first = len(ctx.messages) - kept
    edge = next(u for u in reversed(units(ctx.messages)) if u.start < first)
    summary = sum(
        compactkit.count_tokens(b.text)
        for m in out.messages
        for b in m.content
        if b.type == "summary"
    )
    reserve = min(4_000, budget // 4)
    room = budget - compactkit.count_tokens(out) + summary - reserve
    turn = ctx.replace(messages=ctx.messages[edge.start : first])
    return compactkit.count_tokens(turn) - compactkit.count_tokens(ctx.replace(messages=())) > room


def test_the_99k_claude_code_session_ends_near_its_budget(tmp_path: Path) -> None:
    """The session a new user tried: 99,504 tokens under --budget 30000 ended at 6,349."""
    name, ctx = next((n, c) for n, c in _large() if "3fe1b6bc" in n)
    source = tmp_path / "in.json"
    compactkit.dump(ctx, source)
    code, out = _run(str(source), "--budget", "30000", out=tmp_path / "out.json")
    assert code == 0 and 21_000 <= compactkit.count_tokens(out) <= 30_000, name


@pytest.mark.parametrize("budget", [30_000, 12_000])
def test_a_budget_is_used_not_undershot(tmp_path: Path, budget: int) -> None:
    """Every large session ends between 0.7 N and N, unless what must stay is over N (exit 1,
    as before) or the turn at the edge of the kept ones is larger than what is left of N."""
    misses, held = [], 0
    for name, ctx in _large():
        source = tmp_path / "in.json"
        compactkit.dump(ctx, source)
        code, out = _run(str(source), "--budget", str(budget), out=tmp_path / "out.json")
        tokens = compactkit.count_tokens(out)
        if code == 1 and tokens > budget:
            continue  # the newest turn, the task and the user's words alone are over N
        if 0.7 * budget <= tokens <= budget and code == 0:
            held += 1
        elif not _next_turn_too_large(ctx, out, budget):
            misses.append(f"{name}: {tokens:,} tokens for a budget of {budget:,} (exit {code})")
    assert misses == []
    assert held >= len(_large()) // 2


def test_the_newest_turns_stay_verbatim(tmp_path: Path) -> None:
    name, ctx = next((n, c) for n, c in _large() if "3fe1b6bc" in n)
    source = tmp_path / "in.json"
    compactkit.dump(ctx, source)
    _, out = _run(str(source), "--budget", "30000", out=tmp_path / "out.json")
    tail = out.messages[-5:]
    assert tail == ctx.messages[-5:], name


def test_target_asks_for_less(tmp_path: Path) -> None:
    name, ctx = next((n, c) for n, c in _large() if "3fe1b6bc" in n)
    source = tmp_path / "in.json"
    compactkit.dump(ctx, source)
    code, out = _run(str(source), "--budget", "30000", "--target", "10000", out=tmp_path / "o.json")
    assert code == 0 and 7_000 <= compactkit.count_tokens(out) <= 10_000, name
    result = CliRunner().invoke(CLI, ["run", str(source), "--budget", "5000", "--target", "9000"])
    assert result.exit_code == 2 and "--target 9,000 is above --budget 5,000" in result.stderr
