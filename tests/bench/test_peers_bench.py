"""The peers in the bench: they decide themselves when to compact, and the reports show the peers
table with compactkit's pipelines first."""

from __future__ import annotations

from pathlib import Path

from click.testing import CliRunner

from compactkit.bench.report import peer_rows, render_html, render_markdown
from compactkit.bench.runner import run_bench
from compactkit.cli import make_cli
from compactkit.registry import make_registry
from compactkit.spec import parse_pipeline

from ..conftest import sample


def test_a_native_peer_triggers_on_its_own_threshold_not_the_benchs() -> None:
    # the SWE-agent trajectory has 285 events but 65,862 tokens: over OpenHands' 80 events, under
    # a bench trigger of 100,000 tokens
    path = str(sample("sphinx-doc"))
    names = ["default", "peer-openhands:native=true", "peer-openhands"]
    report = run_bench([path], [parse_pipeline(n, None) for n in names], trigger=100_000)
    by_name = {p["name"]: p["totals"] for p in report["pipelines"]}
    assert by_name["default"]["compactions"] == 0
    native = by_name["peer-openhands:native=true"]
    assert native["compactions"] >= 3
    assert native["prompt_tokens"] < by_name["none"]["prompt_tokens"]
    assert native["violations"] == 0
    # at the bench's trigger, like the default: never reached
    assert by_name["peer-openhands"]["compactions"] == 0


def test_the_peers_table_lists_compactkits_pipelines_first() -> None:
    path = str(sample("pi-mono_before-compaction"))
    names = ["peer-pi:context_window=40000", "default", "peer-codex:context_window=40000"]
    report = run_bench([path], [parse_pipeline(n, None) for n in names], trigger=30_000)
    rows = peer_rows(report)
    assert [r["pipeline"] for r in rows] == [
        "default",
        "peer-pi:context_window=40000",
        "peer-codex:context_window=40000",
    ]
    assert list(rows[0]) == [
        "pipeline",
        "prompt tokens",
        "cost anthropic",
        "cost openai",
        "worst session",
        "summarizer",
        "retention",
        "task",
        "user_message",
        "last_instruction",
        "path",
        "error",
        "compactions / session",
    ]
    assert all(float(r["compactions / session"]) >= 1 for r in rows)
    markdown = render_markdown(report)
    assert "## Peers" in markdown
    assert markdown.index("## Peers") < markdown.index("## Per session")
    assert "<h2>Peers</h2>" in render_html(report)
    without = run_bench([path], [parse_pipeline("default", None)], trigger=30_000)
    assert peer_rows(without) == []
    assert "## Peers" not in render_markdown(without)


def test_peers_are_selectable_wherever_default_is(tmp_path: Path) -> None:
    cli = make_cli(lambda: make_registry(entry_points=False))
    path = str(sample("pi-mono_before-compaction"))
    out = tmp_path / "out.json"
    result = CliRunner().invoke(
        cli, ["run", path, "-s", "peer-pi:context_window=40000", "-o", str(out)]
    )
    assert result.exit_code == 0, result.output
    assert '"type":"summary"' in out.read_text(encoding="utf-8").replace(" ", "")
    listing = CliRunner().invoke(cli, ["strategies"])
    for name in (
        "peer-openhands",
        "peer-claude-code",
        "peer-codex",
        "peer-langchain",
        "peer-pi",
        "peer-anthropic-clear",
        "peer-anthropic-compact",
        "peer-gemini-cli",
        "peer-openai-agents",
        "peer-adk",
    ):
        assert name in listing.output


def test_the_newer_peers_trigger_on_their_own_numbers_in_a_replay() -> None:
    # 144 messages, 92,409 tokens at the end: over Anthropic's clearing trigger at 30,000, under
    # Gemini CLI's half of 1,048,576 and Anthropic's compaction trigger of 150,000
    path = str(sample("pi-mono_before-compaction"))
    names = [
        "peer-anthropic-clear:trigger=30000",
        "peer-anthropic-compact:native=true",
        "peer-gemini-cli:native=true",
        "peer-openai-agents",
        "peer-adk:native=true",
    ]
    report = run_bench([path], [parse_pipeline(n, None) for n in names], trigger=30_000)
    by_name = {p["name"]: p["totals"] for p in report["pipelines"]}
    none = by_name["none"]
    for name in ("peer-anthropic-compact:native=true", "peer-gemini-cli:native=true"):
        assert by_name[name]["compactions"] == 0
        assert by_name[name]["prompt_tokens"] == none["prompt_tokens"]
        assert by_name[name]["cost"] == none["cost"]
    for name in (
        "peer-anthropic-clear:trigger=30000",
        "peer-openai-agents",
        "peer-adk:native=true",
    ):
        assert by_name[name]["compactions"] >= 1, name
        assert by_name[name]["prompt_tokens"] < none["prompt_tokens"], name
        assert by_name[name]["violations"] == 0, name
    rows = {r["pipeline"] for r in peer_rows(report)}
    assert set(names) <= rows
