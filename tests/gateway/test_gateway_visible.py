"""What a user of the gateway sees: the start-up line, one log line per compaction (a line per
request only with -v), `--print-env`, and the page at `/compactkit/` (the caller's own
conversations), the page rendered by a real chromium the way the bench report is."""

from __future__ import annotations

import html
import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx
import pytest
from click.testing import CliRunner

from compactkit.cli import make_cli

from ..bench.test_report_browser import _browse, chromium  # noqa: F401
from .agents import anthropic_agent, chat_agent
from .conftest import KEY, Start

ROOT = Path(__file__).resolve().parents[2]
OTHER_KEY = "sk-other-0000000000000000OTHER"


def _gateway(upstream: str, *options: str) -> tuple[subprocess.Popen[str], str, str]:
    """`compactkit gateway` in a process at a free port: (process, base URL, start-up line)."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "compactkit",
            "gateway",
            "--listen",
            "127.0.0.1:0",
            "--upstream-anthropic",
            upstream,
            "--upstream-openai",
            upstream,
            *options,
        ],
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    assert proc.stderr is not None
    line = proc.stderr.readline()
    found = re.search(r"listening on (http://\S+)", line)
    assert found, line
    return proc, found[1], line


def _stop(proc: subprocess.Popen[str]) -> str:
    proc.terminate()
    _, err = proc.communicate(timeout=30)
    return err


def test_start_up_line_names_upstreams_pipeline_summarizer_trigger_target(upstream: str) -> None:
    proc, _, line = _gateway(upstream, "--trigger", "3000", "--target", "1500")
    _stop(proc)
    assert f"anthropic -> {upstream}" in line and f"openai -> {upstream}" in line
    assert (
        "; pipeline " in line
        and "llm-summary:" in line
        and "; summarizer auto (fallback extractive);" in line
    )
    assert "; trigger 3,000; target 1,500; compaction: when it pays)" in line


@pytest.mark.parametrize("verbose", [False, True])
def test_one_log_line_per_compaction_request_lines_only_with_v(
    upstream: str, verbose: bool
) -> None:
    options = ("--trigger", "2500", "--target", "1200", "--policy", "always")
    proc, base, _ = _gateway(upstream, *options, *(["-v"] * verbose))
    try:
        anthropic_agent(base, "Fix the failing test in the parser.")
        stats = httpx.get(base + "/compactkit/stats", headers={"x-api-key": KEY}).json()
    finally:
        err = _stop(proc)
    compactions = stats["totals"]["compactions"]
    assert compactions >= 1
    lines = [line for line in err.splitlines() if " compacted conversation " in line]
    assert len(lines) == compactions, err
    for line in lines:
        assert re.search(
            r"compacted conversation \S+: \d+ -> \d+ tokens, \d+ of \d+ messages replaced", line
        )
        # the default: the agent's own model (the fake answers), priced from its usage; the
        # extractive summary when the model's is not ready (this agent never pauses)
        upstream = r"summary by upstream \(\d+\.\d{4} USD: \d+ of \d+ prompt tokens read from"
        assert re.search(upstream, line) or "summary by extractive (fallback)" in line
    requests = [line for line in err.splitlines() if "HTTP Request: POST" in line]
    calls = sum(c["summary_calls"] for c in stats["conversations"].values())
    assert len(requests) == (stats["totals"]["requests"] + calls if verbose else 0), err
    assert KEY not in err


@pytest.mark.parametrize(
    ("agent", "expected"),
    [
        ("claude", ["export ANTHROPIC_BASE_URL=http://127.0.0.1:9911"]),
        (
            "sdk",
            [
                "export OPENAI_BASE_URL=http://127.0.0.1:9911/v1",
                "export ANTHROPIC_BASE_URL=http://127.0.0.1:9911",
            ],
        ),
        (
            "codex",
            [
                'base_url = "http://127.0.0.1:9911/v1"',
                'wire_api = "responses"',
                'model_provider = "compactkit"',
            ],
        ),
    ],
)
def test_print_env_points_an_agent_at_the_gateway(agent: str, expected: list[str]) -> None:
    done = CliRunner().invoke(
        make_cli(), ["gateway", "--listen", "127.0.0.1:9911", "--print-env", agent]
    )
    assert done.exit_code == 0, done.output
    for line in expected:
        assert line in done.output.splitlines()


def _page(base: str, headers: dict[str, str] | None = None) -> dict[str, Any]:
    """The page's embedded figures (what its script draws)."""
    got = httpx.get(base + "/compactkit/", headers=headers or {})
    assert got.status_code == 200 and got.headers["content-type"].startswith("text/html")
    assert not re.search(r"""(src|href)=["']?(https?:)?//""", got.text)  # nothing external
    found = re.search(r'<script id="data" type="application/json">(.*?)</script>', got.text, re.S)
    assert found
    data: dict[str, Any] = json.loads(found[1])
    return data


def test_page_shows_the_callers_own_conversations_and_savings(start_gateway: Start) -> None:
    base = start_gateway(trigger=2500, target=1200)
    anthropic_agent(base, "Fix the failing test in the parser.")
    chat_agent(base, "Another user's task.", headers={"authorization": f"Bearer {OTHER_KEY}"})
    mine = _page(base, {"x-api-key": KEY})
    (conv,) = mine["conversations"].values()
    assert conv["compactions"] >= 1 and conv["tokens_saved"] > 0
    assert conv["usage"]["responses"] == conv["requests"]
    # the reported prompt cost scaled to what the client sent: more than was paid for prompts
    assert conv["dollars_saved"] > 0 and mine["totals"]["dollars_saved"] == conv["dollars_saved"]
    theirs = _page(base, {"authorization": f"Bearer {OTHER_KEY}"})
    assert len(theirs["conversations"]) == 1 and set(theirs["conversations"]).isdisjoint(
        mine["conversations"]
    )
    assert _page(base)["conversations"] == {}  # no credential: nobody's


def test_page_in_a_real_browser(
    start_gateway: Start,
    chromium: str,  # noqa: F811
    tmp_path: Path,
) -> None:
    """The page as chromium draws it (saved as the gateway served it to the caller: it is
    self-contained): the figures drawn by the page's own script, the caller's conversation only."""
    base = start_gateway(trigger=2500, target=1200)
    anthropic_agent(base, "Fix the failing test in the parser.")
    chat_agent(base, "Another user's task.", key=OTHER_KEY)
    saved = tmp_path / "gateway.html"
    saved.write_text(httpx.get(base + "/compactkit/", headers={"x-api-key": KEY}).text)
    (conv,) = _page(base, {"x-api-key": KEY})["conversations"].values()
    dom = _browse(chromium, saved, "--window-size=1280,1000", "--dump-dom").stdout
    drawn = dom.split("<tbody>")[1].split("</tbody>")[0]
    cells = [html.unescape(c) for c in re.findall(r"<td[^>]*>([^<]*)</td>", drawn)]
    assert len(re.findall(r"<tr>", drawn)) == 1
    assert cells[1:6] == [
        f"{conv[name]:,}"
        for name in ("requests", "compactions", "tokens_client", "tokens_sent", "tokens_saved")
    ]
    assert f"${conv['dollars_saved']:.4f}" in cells
    assert "summarizer extractive" in dom and "trigger 2,500" in dom
