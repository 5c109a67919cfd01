"""Pins: what no strategy may touch, checked after every step like tool pairing."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

import compactkit
from compactkit import (
    AgentContext,
    ContractViolation,
    Message,
    Pipeline,
    Strategy,
    TextBlock,
    ToolCallBlock,
    ToolResultBlock,
    build_pipeline,
    default_pipeline,
    expand,
    get_strategy,
    message,
    validate,
)
from compactkit.cli import make_cli
from compactkit.errors import ConfigError
from compactkit.pins import call_text, mark, parse_rule, pinned, resolve, split_lines, with_rules
from compactkit.registry import make_registry
from compactkit.testing import check_strategy

from .conftest import every_conversation, sample

CLI = make_cli(lambda: make_registry(entry_points=False))


def _call(cid: str, name: str = "Bash", **args: object) -> ToolCallBlock:
    return ToolCallBlock(id=cid, name=name, input=dict(args) or {"command": "ls"})


def _result(cid: str, *texts: str) -> Message:
    parts = tuple(TextBlock(text=t) for t in texts)
    return Message(role="tool", content=(ToolResultBlock(tool_call_id=cid, content=parts),))


FEEDBACK = "no, keep the old API and add a deprecation warning instead"


def _session(turns: int = 40) -> AgentContext:
    """A long tool session whose user corrected the agent inside a tool result (as Cline stores
    rejection feedback), with a TodoWrite call and a CLAUDE.md read along the way."""
    out: list[Message] = [message("user", "Refactor the exporter in src/export.py")]
    for i in range(turns):
        cid = f"c{i}"
        if i == 3:
            out.append(
                Message(role="assistant", content=(_call(cid, "Read", file_path="/r/CLAUDE.md"),))
            )
            out.append(_result(cid, "Use tabs. Never touch vendor/.\n" * 20))
            continue
        if i == 5:
            out.append(
                Message(role="assistant", content=(_call(cid, "TodoWrite", todos=["a", "b"]),))
            )
            out.append(_result(cid, "Todos have been modified successfully"))
            continue
        out.append(Message(role="assistant", content=(_call(cid, command=f"cat src/f{i}.py"),)))
        body = "\n".join(f"line {k} of file {i}" for k in range(120))
        if i == 7:
            out.append(_result(cid, "The user denied this operation.", FEEDBACK))
        else:
            out.append(_result(cid, body))
        if i == 20:
            out.append(message("user", "also keep the CSV writer"))
    out.append(message("assistant", "Done."))
    ctx = AgentContext(messages=tuple(out))
    feedback_at = next(
        i for i, m in enumerate(out) if any(FEEDBACK in t.text for t in m.tool_results)
    )
    return ctx.replace(pins=(mark(FEEDBACK, feedback_at, "user-feedback"),))


def _texts(ctx: AgentContext) -> list[str]:
    found = []
    for msg in ctx.messages:
        for block in msg.content:
            if isinstance(block, TextBlock):
                found.append(block.text)
            elif isinstance(block, ToolResultBlock):
                found.extend(p.text for p in block.content if isinstance(p, TextBlock))
    return found


# --------------------------------------------------------------------------- what is pinned


def test_the_users_words_task_last_request_and_pending_call_are_pinned() -> None:
    ctx = _session().append(Message(role="assistant", content=(_call("late", command="make"),)))
    reasons = {(p.reason, p.preview) for p in resolve(ctx)}
    assert ("task", "Refactor the exporter in src/export.py") in reasons
    assert ("last-request", "also keep the CSV writer") in reasons
    assert ("user-feedback", FEEDBACK[:40] + "...") in reasons
    assert any(p.reason == "pending-call" and p.call_id == "late" for p in resolve(ctx))


@pytest.mark.parametrize(
    ("rule", "pinned_text"),
    [
        ("path=**/CLAUDE.md", "Use tabs."),
        ("path=CLAUDE.md", "Use tabs."),
        ("re=line 5 of file 9\\b", "line 0 of file 9"),
        ("tool=Todo*", "Todos have been modified"),
    ],
)
def test_user_rules_pin_what_they_name(rule: str, pinned_text: str) -> None:
    ctx = with_rules(_session(), [rule])
    pins = pinned(ctx)
    assert any(pins.text(t) for t in _texts(ctx) if t.startswith(pinned_text))
    plain = pinned(_session())
    assert not any(plain.text(t) for t in _texts(ctx) if t.startswith(pinned_text))


@pytest.mark.parametrize("bad", ["tool", "colour=red", "re=(", "origin=robot", "path="])
def test_a_bad_rule_is_a_configuration_error(bad: str) -> None:
    with pytest.raises(ConfigError) as info:
        parse_rule(bad)
    assert info.value.exit_code == 2
    assert "\n" not in str(info.value)


def test_split_lines_isolates_the_words_and_renders_the_same() -> None:
    text = (
        "[execute_command] Result: done\nThe user provided the following feedback:\n"
        "<feedback>\nuse pnpm\n</feedback>\nmore"
    )
    start = text.index("use pnpm")
    parts, at = split_lines(text, start, start + len("use pnpm"))
    assert parts[at] == "use pnpm"
    assert "\n".join(parts) == text


# --------------------------------------------------------------------------- kept by every step


@pytest.mark.parametrize(
    "spec",
    [
        "default",
        "sliding-window",
        "observation-mask:keep_last=1,min_tokens=1",
        "llm-summary:keep_last=1",
        "static-elision",
        "etag-collapse",
    ],
)
def test_every_built_in_strategy_keeps_pinned_words_verbatim(spec: str) -> None:
    ctx = with_rules(_session(), ["tool=TodoWrite", "path=**/CLAUDE.md"])
    budget = compactkit.count_tokens(ctx) // 6
    out = build_pipeline([spec], budget=budget).run(ctx).context
    texts = _texts(out)
    assert FEEDBACK in texts
    assert "also keep the CSV writer" in texts
    assert "Use tabs. Never touch vendor/.\n" * 20 in texts
    todo = next(
        m.tool_calls[0]
        for m in ctx.messages
        if m.tool_calls and m.tool_calls[0].name == "TodoWrite"
    )
    assert todo in [c for m in out.messages for c in m.tool_calls] or call_text(todo) in texts
    assert validate(out, ctx) == []
    assert expand(out).messages == ctx.messages


def test_the_default_keeps_every_user_message_of_every_real_session_at_a_tight_budget() -> None:
    """Every text block of every message in the user's words, in every corpus conversation, is in
    the output verbatim (the validator checks it after each step; this reads the output)."""
    checked = 0
    for name, ctx in every_conversation():
        words = [t for m in ctx.messages if m.is_human for t in _texts(AgentContext(messages=(m,)))]
        budget = max(compactkit.count_tokens(ctx) // 5, 2_000)
        out = build_pipeline(default_pipeline(budget), budget=budget).run(ctx).context
        texts = _texts(out)
        missing = [w[:60] for w in words if w.strip() and w not in texts]
        assert missing == [], name
        checked += len(words)
    assert checked > 50


# --------------------------------------------------------------------------- the contract


class DropsLastUserMessage(Strategy):
    name = "drops-user"

    def compact(self, ctx: AgentContext) -> AgentContext:
        last = max(i for i, m in enumerate(ctx.messages) if m.is_human)
        return ctx.with_messages([*ctx.messages[:last], *ctx.messages[last + 1 :]])


class RewritesFeedback(Strategy):
    name = "rewrites-feedback"
    keeps_pins = False  # not believed: only compactkit's own reference policies may say so

    def compact(self, ctx: AgentContext) -> AgentContext:
        messages = []
        for msg in ctx.messages:
            blocks = []
            for block in msg.content:
                if isinstance(block, ToolResultBlock) and any(
                    FEEDBACK in p.text for p in block.content if isinstance(p, TextBlock)
                ):
                    block = ToolResultBlock(
                        tool_call_id=block.tool_call_id, content=(TextBlock(text="(feedback)"),)
                    )
                blocks.append(block)
            messages.append(Message(role=msg.role, content=tuple(blocks), metadata=msg.metadata))
        return ctx.with_messages(messages)


@pytest.mark.parametrize("strategy", [DropsLastUserMessage(), RewritesFeedback()])
def test_a_strategy_that_breaks_a_pin_breaks_the_contract(strategy: Strategy) -> None:
    ctx = _session()
    with pytest.raises(ContractViolation) as info:
        Pipeline([get_strategy("etag-collapse"), strategy]).run(ctx)
    text = str(info.value)
    assert info.value.exit_code == 3
    assert f"strategy {strategy.name!r}" in text and "pin-broken" in text and "message" in text
    # the conformance kit says the same to the plugin's author
    assert any("pin-broken" in p for p in check_strategy(strategy, ctx, recoverable=False))


def test_a_strategy_that_drops_the_pins_of_the_value_breaks_the_contract() -> None:
    def forget(ctx: AgentContext) -> AgentContext:
        return ctx.replace(pins=(), pin_rules=())

    with pytest.raises(ContractViolation, match="pin-broken"):
        Pipeline([forget], pins=["tool=TodoWrite"]).run(_session())


# --------------------------------------------------------------------------- surfaces


def test_run_pin_keeps_a_pinned_file_and_a_bad_rule_is_one_line_exit_2(tmp_path: Path) -> None:
    session = tmp_path / "s.json"
    compactkit.dump(_session(), session)
    out = tmp_path / "out.json"
    runner = CliRunner()
    result = runner.invoke(
        CLI,
        [
            "run",
            str(session),
            "-s",
            "observation-mask:keep_last=1,min_tokens=1",
            "--pin",
            "path=**/CLAUDE.md",
            "-o",
            str(out),
        ],
    )
    assert result.exit_code == 0, result.stderr
    compacted = compactkit.load_one(out)
    assert "Use tabs. Never touch vendor/.\n" * 20 in _texts(compacted)
    assert compacted.pin_rules == ("path=**/CLAUDE.md",)
    bad = runner.invoke(CLI, ["run", str(session), "--pin", "colour=red"])
    assert bad.exit_code == 2
    assert len(bad.stderr.strip().splitlines()) == 1 and "colour=red" in bad.stderr


def test_session_pins_travel_with_its_log(tmp_path: Path) -> None:
    ctx = _session()
    with compactkit.Session(ctx, trigger=4_000, target=2_000, pins=["tool=TodoWrite"]) as live:
        live.save(tmp_path / "s.log")
        live.append(message("user", "and run the tests"))
        live.compact_if_needed()
    resumed = compactkit.Session.load(tmp_path / "s.log")
    assert resumed.context.pin_rules == ("tool=TodoWrite",)
    assert FEEDBACK in _texts(resumed.context)
    assert "and run the tests" in _texts(resumed.context)
    resumed.close()


def test_pins_round_trip_in_native_json_and_old_files_read_the_same(tmp_path: Path) -> None:
    ctx = with_rules(_session(), ["re=TODO"])
    assert AgentContext.from_native(json.loads(ctx.to_json())) == ctx
    plain = compactkit.load_one(sample("sphinx-doc"))
    assert "pins" not in plain.to_native() and "pin_rules" not in plain.to_native()


def test_a_path_rule_pins_an_instruction_file_the_agent_injected_into_a_user_turn() -> None:
    injected = (
        "<system-reminder>\nContents of /repo/CLAUDE.md (project instructions, checked into the "
        "codebase):\n\nUse tabs.\n</system-reminder>"
    )
    ctx = AgentContext(
        messages=(
            message("user", "Fix the build"),
            Message(
                role="user", content=(TextBlock(text=injected),), metadata={"origin": "harness"}
            ),
            message("assistant", "On it."),
        )
    )
    assert pinned(with_rules(ctx, ["path=**/CLAUDE.md"])).text(injected)
    assert not pinned(with_rules(ctx, ["path=**/AGENTS.md"])).text(injected)


@pytest.mark.parametrize("command", ["bench", "check"])
def test_bench_and_check_take_pin_rules_and_refuse_a_bad_one(command: str) -> None:
    args = [command, str(sample("sphinx-doc"))] if command == "bench" else [command]
    help_text = CliRunner().invoke(CLI, [command, "--help"]).stdout
    assert "--pin RULE" in help_text
    bad = CliRunner().invoke(CLI, [*args, "--pin", "tool"])
    assert bad.exit_code == 2
    assert "pin rule 'tool' is not KIND=VALUE" in bad.stderr


def test_bench_pin_runs_the_pipeline_with_the_rule(tmp_path: Path) -> None:
    report = tmp_path / "bench.json"
    result = CliRunner().invoke(
        CLI,
        [
            "bench",
            str(sample("sphinx-doc")),
            "-s",
            "observation-mask:keep_last=1",
            "--pin",
            "re=.",
            "--mode",
            "oneshot",
            "--json",
            str(report),
        ],
    )
    assert result.exit_code == 0, result.stderr
    rows = json.loads(report.read_text())["sessions"]
    # every text is pinned by re=. : nothing is masked, so nothing is saved
    masked = [r for r in rows if r["pipeline"] != "none"]
    assert masked and all(r["tokens_after"] == r["tokens_before"] for r in masked)
    plain = tmp_path / "plain.json"
    args = ["bench", str(sample("sphinx-doc")), "-s", "observation-mask:keep_last=1"]
    CliRunner().invoke(CLI, [*args, "--mode", "oneshot", "--json", str(plain)])
    unpinned = [r for r in json.loads(plain.read_text())["sessions"] if r["pipeline"] != "none"]
    assert all(r["tokens_after"] < r["tokens_before"] for r in unpinned)


def _hashes_to_compact(monkeypatch: pytest.MonkeyPatch, turns: int) -> int:
    """How many texts pin checking hashes while the default pipeline compacts `turns` tiny
    user/assistant turns (the shape of a hostile 2 MB gateway request)."""
    import compactkit.pins as pins

    calls = 0
    real = pins.etag_of

    def counted(text: str) -> str:
        nonlocal calls
        calls += 1
        return real(text)

    messages = []
    for n in range(turns):
        messages += [message("user", f"u{n} ok go on"), message("assistant", f"a{n} fine")]
    ctx = AgentContext(messages=tuple(messages))
    monkeypatch.setattr(pins, "etag_of", counted)
    result = build_pipeline(["default"], budget=100).run(ctx)
    assert result.context is not ctx
    kept = "\n".join(m.text for m in result.context.messages)
    assert all(f"u{n} ok go on" in kept for n in range(turns))  # every user word kept
    return calls


def test_pin_checking_is_linear_in_the_messages_it_checks(monkeypatch: pytest.MonkeyPatch) -> None:
    """A summary carrying thousands of user messages holds a pin for each: each message's texts
    are read once, not once per pin (quadratic: 236 s for 25,000 turns in the gateway)."""
    small = _hashes_to_compact(monkeypatch, 300)
    large = _hashes_to_compact(monkeypatch, 600)
    assert large <= 2.2 * small, (small, large)
