"""`compactkit run`, `expand`, `validate` and `diff` as a user runs them."""

from __future__ import annotations

import hashlib
import json
from collections import Counter
from pathlib import Path
from typing import Any

from click.testing import CliRunner

import compactkit
from compactkit.cli import make_cli
from compactkit.registry import make_registry

from ..conftest import sample

CLI = make_cli(lambda: make_registry(entry_points=False))
SESSION = sample("sphinx-doc")


def run(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(CLI, list(args))
    return result.exit_code, result.stdout, result.stderr


def test_run_fits_the_budget_reports_each_strategy_and_never_touches_the_input(
    tmp_path: Path,
) -> None:
    digest = hashlib.sha256(SESSION.read_bytes()).hexdigest()
    out, report = tmp_path / "out.json", tmp_path / "report.json"
    code, stdout, stderr = run(
        "run", str(SESSION), "--budget", "30000", "-o", str(out), "--report-json", str(report)
    )
    assert code == 0, stderr
    before = compactkit.count_tokens(compactkit.load_one(SESSION))
    after = compactkit.count_tokens(compactkit.load_one(out))
    assert after <= 30000 < before
    assert f"tokens: {before:,} -> {after:,}" in stdout
    data = json.loads(report.read_text())
    assert data["schema"] == "compactkit.run/1"
    assert data["tokens_before"] == before and data["tokens_after"] == after
    assert [s["strategy"].split(":")[0] for s in data["steps"]] == [
        "etag-collapse",
        "llm-summary",
        "sliding-window",
    ]
    for step, nxt in zip(data["steps"], data["steps"][1:], strict=False):
        assert step["tokens_after"] == nxt["tokens_before"]
    assert hashlib.sha256(SESSION.read_bytes()).hexdigest() == digest


def test_strategy_order_is_pipeline_order_and_explain_says_why(tmp_path: Path) -> None:
    code, stdout, _ = run(
        "run",
        str(SESSION),
        "-s",
        "observation-mask:keep_last=3",
        "-s",
        "sliding-window",
        "--budget",
        "25000",
        "--explain",
        "-o",
        str(tmp_path / "o.json"),
    )
    assert code == 0
    lines = stdout.splitlines()
    mask = next(i for i, line in enumerate(lines) if "observation-mask" in line)
    window = next(i for i, line in enumerate(lines) if "sliding-window" in line)
    assert mask < window
    assert any("changed" in line and "masked" in line for line in lines[mask:window])
    assert any("removed  messages" in line for line in lines[window:])


def test_over_budget_writes_the_output_and_exits_1(tmp_path: Path) -> None:
    out = tmp_path / "out.json"
    code, _, stderr = run("run", str(SESSION), "--budget", "500", "-o", str(out))
    assert code == 1
    assert out.exists()
    after = compactkit.count_tokens(compactkit.load_one(out))
    assert f"{after - 500:,} over the budget of 500" in stderr


def test_stash_then_expand_gives_back_the_original(tmp_path: Path) -> None:
    out, stash, back = tmp_path / "o.json", tmp_path / "o.stash", tmp_path / "back.json"
    code, _, _ = run(
        "run", str(SESSION), "--budget", "20000", "-o", str(out), "--stash", str(stash)
    )
    assert code == 0
    assert compactkit.load_one(out).recovery == {}
    code, _, stderr = run("expand", str(out), "-o", str(back))
    assert code == 2 and "cannot be restored" in stderr  # without the stash nothing comes back
    code, _, _ = run("expand", str(out), "--stash", str(stash), "-o", str(back))
    assert code == 0
    assert compactkit.load_one(back) == compactkit.load_one(SESSION)
    code, stdout, _ = run("diff", str(SESSION), str(back))
    assert stdout.strip() == "no differences"


def test_validate_and_diff_commands(tmp_path: Path) -> None:
    out = tmp_path / "o.json"
    run("run", str(SESSION), "-s", "sliding-window:max_tokens=20000", "-o", str(out))
    code, stdout, _ = run("validate", str(out), "--against", str(SESSION))
    assert code == 0 and stdout.strip().endswith("ok")
    code, stdout, _ = run("diff", "--json", str(SESSION), str(out))
    data = json.loads(stdout)
    removed = [m for m in data["messages"] if m["change"] == "removed"]
    assert data["schema"] == "compactkit.diff/1" and len(removed) > 100
    # a context broken by hand is caught, with exit 3
    ctx = compactkit.load_one(SESSION)
    broken = ctx.with_messages(ctx.messages[:5] + ctx.messages[6:])
    compactkit.dump(broken, tmp_path / "broken.json")
    code, stdout, _ = run("validate", str(tmp_path / "broken.json"))
    assert code == 3
    assert "unanswered-tool-call" in stdout or "tool-result-without-call" in stdout


def test_bad_strategy_specs_are_usage_errors() -> None:
    for spec, expected in [
        ("nope", "unknown strategy 'nope'"),
        ("sliding-window:max_tokens=-5", "greater than or equal to 1"),
        ("sliding-window:frobnicate=1", "Extra inputs are not permitted"),
    ]:
        code, _, stderr = run("run", str(SESSION), "-s", spec)
        assert code == 2, stderr
        assert expected in stderr
        assert len(stderr.strip().splitlines()) == 1


def test_provider_output_warns_when_the_recovery_store_would_be_lost(tmp_path: Path) -> None:
    out = tmp_path / "o.openai.json"
    code, _, stderr = run(
        "run", str(SESSION), "--budget", "20000", "--to", "openai-chat", "-o", str(out)
    )
    assert code == 0
    assert "--stash" not in stderr  # kept in the store beside the output
    assert Path(f"{out}.recovery.jsonl").is_file()
    code, _, stderr = run("run", str(SESSION), "--budget", "20000", "--to", "openai-chat")
    assert code == 0
    assert "--stash" in stderr
    body = json.loads(out.read_text())  # with the session's model: {"model", "messages"}
    messages = body["messages"] if isinstance(body, dict) else body
    assert any("earlier messages]" in str(m.get("content")) for m in messages)  # the summary


def test_run_tokenizes_each_text_of_the_session_once(tmp_path: Path, monkeypatch: Any) -> None:
    """The run's own count and its strategies' counts share one counter: each text is tokenized
    once (it was twice, and every block and message then remembered two counts in a dict)."""
    from compactkit.tokens import TiktokenTokenizer

    encoded: Counter[str | bytes] = Counter()
    encode = TiktokenTokenizer.encode

    def spy(self: TiktokenTokenizer, text: str | bytes) -> list[int]:
        encoded[text] += 1
        return encode(self, text)

    monkeypatch.setattr(TiktokenTokenizer, "encode", spy)
    monkeypatch.setattr("compactkit.tokens._PARALLEL_ABOVE", 10**12)  # whole texts, one thread
    out = tmp_path / "out.json"
    code, _, err = run(
        "run",
        str(sample("sphinx-doc__sphinx-9229")),
        "-s",
        "sliding-window",
        "--budget",
        "30000",
        "-o",
        str(out),
    )
    assert code == 0, err
    big = {text: n for text, n in encoded.items() if len(text) > 200}
    assert len(big) > 50
    assert max(big.values()) == 1, [n for n in big.values() if n > 1][:5]


def test_diff_exit_code_says_whether_the_contexts_differ(tmp_path: Path) -> None:
    """`diff --exit-code` exits 1 when the files differ, 0 when not, as `git diff` does; without
    it, 0 either way (as before)."""
    out = tmp_path / "o.json"
    run("run", str(SESSION), "-s", "sliding-window:max_tokens=20000", "-o", str(out))
    copy = tmp_path / "copy.json"
    compactkit.dump(compactkit.load_one(SESSION), copy)
    assert run("diff", "--exit-code", str(SESSION), str(out))[0] == 1
    assert run("diff", "--exit-code", "--json", str(SESSION), str(out))[0] == 1
    code, stdout, _ = run("diff", "--exit-code", str(SESSION), str(copy))
    assert (code, stdout.strip()) == (0, "no differences")
    assert run("diff", str(SESSION), str(out))[0] == 0
