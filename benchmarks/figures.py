"""The measured figures of README.md and docs/, from the commands that measure them.

`make figures` (`python -m benchmarks.figures`) runs every bench of `RUNS` and every replay of
`SCRIPTS` over the shared corpus (`COMPACTKIT_CORPUS`, else `../shared/corpus`), the quick start's
commands on the bundled sample and the policy's thrash example, writes the named figures to
`docs/figures.json` (with each run's command under `commands`), then rewrites the docs from it:

* a number followed by `<!-- fig:KEY -->` (no space between) is written again from the figure
  `KEY` (a dotted path into the JSON) at the precision and in the unit it is written in: `43.2%`
  is a share shown in percent to one decimal, `0.980x` a ratio, `$26.54` dollars, `29,987,769` a
  count;
* a table between `<!-- figures:NAME -->` and `<!-- /figures -->` is generated whole by
  `TABLES[NAME]`.

`--docs-only` rewrites the docs from the committed JSON without measuring (after editing a
marker or a table's code); `--reuse [DIR]` reads the reports an earlier run left in DIR (default
`out/figures`, where every run keeps them) instead of running those again, so it is for working
on the docs only: after a change to the code, run it without. The benches and the rewrite are
deterministic: the same code gives the same JSON, the same JSON the same docs. A marker naming no
figure, or a figure that is None or negative (a comparison the sentence states no longer holds),
stops the rewrite before any page is written. `tests/test_figures.py` checks the docs against the
JSON without running anything.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from compactkit.atomic import write_atomic
from compactkit.policy import MIN_CLEARED, SLACK
from compactkit.strategies.peers.headroom_env import installed, setup

ROOT = Path(__file__).resolve().parent.parent
FIGURES = ROOT / "docs" / "figures.json"
DOCS = [
    ROOT / "README.md",
    *sorted((ROOT / "docs").glob("*.md")),
    *sorted((ROOT / "docs").glob("*/*.md")),
]
SAMPLE = "examples/sessions/gemini3pro_sphinx-doc__sphinx-9229.traj.json"
SAMPLE_BUDGET = 30_000
SCHEMA = "compactkit.figures/1"

PRICING = ["--pricing", "anthropic", "--pricing", "openai"]
PEERS = [
    "peer-adk",
    "peer-anthropic-clear",
    "peer-anthropic-compact",
    "peer-claude-code",
    "peer-codex",
    "peer-gemini-cli",
    "peer-langchain",
    "peer-openai-agents",
    "peer-openhands",
    "peer-pi",
]
FRONTIER_TRIGGERS = (30_000, 60_000, 100_000, 150_000)


def native(peer: str) -> str:
    """The peer as it ships (`peer-openai-agents` has no trigger, so no `native` option)."""
    return peer if peer == "peer-openai-agents" else f"{peer}:native=true"


def _specs(*names: str) -> list[str]:
    return [arg for name in names for arg in ("-s", name)]


SHAPES = ("agent", "templates", "pinned", "paste", "chat", "short_end")
SHAPE_PEERS = ("peer-anthropic-compact", "peer-codex", "peer-claude-code", "peer-adk")
SHAPE_PIPELINES = ("default", *SHAPE_PEERS)

RUNS: dict[str, list[str]] = {
    # every pipeline and peer at each trigger, like for like (docs/bench.md, the README)
    "frontier": [
        *PRICING,
        "--trigger",
        ",".join(str(t) for t in FRONTIER_TRIGGERS),
        *_specs("default", "default:arrival=on", *PEERS),
    ],
    # the built-in strategies at the 30,000-token trigger (docs/bench.md, docs/arrival.md)
    "persistent": [
        *PRICING,
        "--trigger",
        "30000",
        *_specs(
            "default",
            "default:arrival=off",
            "default:arrival=on",
            "sliding-window:max_tokens=30000",
            "observation-mask",
            "etag-collapse",
            "static-elision",
            "llm-summary:max_tokens=30000",
        ),
    ],
    # the pipeline before every call, the history never replaced
    "view": [*PRICING, "--mode", "view", *_specs("observation-mask", "default")],
    # the peers as they ship: their own triggers and windows
    "native": [
        *PRICING,
        "--trigger",
        "30000",
        *_specs("default", *(native(peer) for peer in PEERS)),
    ],
}
"""Each bench `make figures` runs over the corpus: its options after `compactkit bench CORPUS`
(`--workers 2 --json` added)."""

# every strategy once over each whole conversation (docs/strategies/*.md)
ONESHOT = ["etag-collapse", "static-elision", "observation-mask", "llm-summary"]
BUDGETS = (16_000, 4_000)
RUNS["oneshot"] = [
    "--mode",
    "oneshot",
    *_specs(
        *ONESHOT,
        "static-elision:include_assistant=true",
        *(f"llm-summary:max_tokens={budget}" for budget in BUDGETS),
    ),
]

PINNED = ["--pin", "path=**/CLAUDE.md", "--pin", "path=**/AGENTS.md"]
# the default against the peers that summarize on generated sessions (docs/bench.md)
RUNS["shapes"] = [*PRICING, "--trigger", "30000", *_specs("default", *SHAPE_PEERS)]
RUNS["pins-off"] = [*PRICING, "--trigger", "30000", *_specs("default")]
RUNS["pins"] = [*RUNS["pins-off"], *PINNED]
# headroom-ai itself against the arrival stage (docs/arrival.md), in its own environment
RUNS["headroom"] = [
    "--mode",
    "persistent",
    *PRICING,
    "--timeout",
    "0",  # under a time limit the peer's driver process does not survive (exit 3, not running)
    *_specs("peer-headroom", "default:arrival=off", "default:arrival=on"),
]
RUN_PATHS = {
    **{
        name: [
            f"CORPUS/{folder}"
            for folder in ("claude_code_jsonl", "pi_session", "codex_rollout_jsonl")
        ]
        for name in ("pins-off", "pins")
    },
    "headroom": ["examples/sessions", "CORPUS/openhands_events", "CORPUS/mini_swe_agent_traj"],
    "shapes": ["out/figures/shapes"],
}
"""What a run reads, where not the whole corpus (`CORPUS/...` in the corpus, else in the
checkout): what pinning costs (docs/strategies.md) on the Claude Code, pi and Codex
conversations, which read CLAUDE.md and AGENTS.md files; headroom, which takes about 0.1 s a
call, on the bundled sessions and two corpus folders."""


SCRIPTS = {
    # docs/serve.md: the corpus's file reads through `compactkit mcp-proxy` (npx fetches the
    # reference filesystem server once)
    "serve": ["-m", "benchmarks.serve_replay", "--json"],
    # docs/gateway.md: every conversation through `compactkit gateway`, beside the bench
    "gateway": ["benchmarks/gateway_replay.py", "CORPUS", "--json"],
    # docs/arrival.md: what any arrival compressor could save (oracles beside the default)
    "ceiling": ["benchmarks/arrival_ceiling.py", "CORPUS", "--trigger", "30000,100000", "--json"],
}
"""The replays `make figures` runs besides the benches: their arguments, the JSON's path last."""


def commands() -> dict[str, str]:
    """Each run's command line, `CORPUS` for the corpus folder."""
    return {
        name: " ".join(
            [
                "compactkit bench",
                *RUN_PATHS.get(name, ["CORPUS"]),
                *args,
                "--workers 2",
            ]
        )
        for name, args in RUNS.items()
    } | {name: f"python {' '.join(args)} FILE" for name, args in SCRIPTS.items()}


# --- measuring ------------------------------------------------------------------------------


def corpus_dir() -> Path:
    """`COMPACTKIT_CORPUS`, else `../shared/corpus` beside the checkout (as the tests look)."""
    env = os.environ.get("COMPACTKIT_CORPUS")
    path = Path(env) if env else ROOT.parent / "shared" / "corpus"
    if not path.is_dir():
        sys.exit(f"no corpus at {path}: set COMPACTKIT_CORPUS to the shared corpus folder")
    return path


def _compactkit(*args: str) -> list[str]:
    return [sys.executable, "-m", "compactkit", *args]


def run_bench(name: str, corpus: Path, out_dir: Path, workers: int) -> dict[str, Any]:
    """Run bench `name` of `RUNS` over `corpus`; its report is kept as `out_dir/NAME.json`."""
    out = out_dir / f"{name}.json"
    paths = [p.replace("CORPUS", str(corpus), 1) for p in RUN_PATHS.get(name, ["CORPUS"])]
    if name == "headroom" and not installed():  # its own environment, from the package registry
        setup()
    args = ["bench", *paths, *RUNS[name], "--workers", str(workers), "--json", str(out)]
    started = time.monotonic()
    print(f"figures: {name}: compactkit {' '.join(args)}", file=sys.stderr, flush=True)
    subprocess.run(_compactkit(*args), cwd=ROOT, check=True, stdout=subprocess.DEVNULL)
    print(f"figures: {name}: {time.monotonic() - started:.0f} s", file=sys.stderr, flush=True)
    return load_report(out_dir, name)


def run_script(name: str, corpus: Path, out_dir: Path) -> None:
    """Run replay `name` of `SCRIPTS` over `corpus`; its JSON is kept as `out_dir/NAME.json`."""
    out = out_dir / f"{name}.json"
    args = [str(corpus) if a == "CORPUS" else a for a in SCRIPTS[name]]
    print(f"figures: {name}: python {' '.join(args)} {out}", file=sys.stderr, flush=True)
    started = time.monotonic()
    env = {**os.environ, "COMPACTKIT_CORPUS": str(corpus)}
    command = [sys.executable, *args, str(out)]
    subprocess.run(command, cwd=ROOT, env=env, check=True, stdout=subprocess.DEVNULL)
    print(f"figures: {name}: {time.monotonic() - started:.0f} s", file=sys.stderr, flush=True)


def load_report(out_dir: Path, name: str) -> dict[str, Any]:
    report: dict[str, Any] = json.loads((out_dir / f"{name}.json").read_text(encoding="utf-8"))
    return report


def measure_sample() -> dict[str, Any]:
    """What `make run` shows of the bundled sample: its tokens, and what `compactkit run
    --budget 30000` leaves of them (the run report's figures)."""
    inspected = subprocess.run(
        _compactkit("inspect", "--json", SAMPLE), cwd=ROOT, check=True, capture_output=True
    )
    tokens = json.loads(inspected.stdout)
    with tempfile.TemporaryDirectory() as tmp:
        report_path = Path(tmp) / "report.json"
        subprocess.run(
            _compactkit(
                "run",
                SAMPLE,
                "--budget",
                str(SAMPLE_BUDGET),
                "-o",
                str(Path(tmp) / "out.json"),
                "--report-json",
                str(report_path),
            ),
            cwd=ROOT,
            check=True,
            capture_output=True,
        )
        report = json.loads(report_path.read_text(encoding="utf-8"))
    return {
        "tokens": tokens["tokens"],
        "budget": SAMPLE_BUDGET,
        "tokens_after": report["tokens_after"],
    }


# --- the figures ----------------------------------------------------------------------------


def _share(part: float, whole: float) -> float | None:
    return round(part / whole, 6) if whole else None


def pipeline_figures(totals: dict[str, Any], sessions: int) -> dict[str, Any]:
    """One pipeline's totals (a report's, or a frontier entry's), flat and named."""
    cost, vs_none = totals["cost"], totals["cost_vs_none"]
    summarizer = totals["summarizer"]
    worst = totals.get("worst_session_cost_vs_none")
    out: dict[str, Any] = {
        "prompt_tokens": totals["prompt_tokens"],
        "saved": totals["savings"],
        "worst_session": worst["ratio"] if worst else None,
        "retention": totals["retention"],
        "compactions": totals["compactions"],
        "compactions_per_session": _share(totals["compactions"], sessions),
        "summarizer_calls": summarizer["calls"],
    }
    for profile in cost:
        out[f"cost_{profile}"] = cost[profile]
        out[f"cost_vs_none_{profile}"] = vs_none[profile]
        out[f"summaries_{profile}"] = _share(summarizer["cost"][profile], cost[profile])
    for kind, share in totals["retention_by_kind"].items():
        out[f"retention_{kind}"] = share
    for key in ("cached_tokens", "recoverability", "violations", "model_calls", "sessions"):
        if key in totals:
            out[key] = totals[key]
    return out


def run_figures(report: dict[str, Any]) -> dict[str, Any]:
    """Every pipeline of a one-trigger report, by its name."""
    sessions = len({row["session"] for row in report["sessions"]})
    return {p["name"]: pipeline_figures(p["totals"], sessions) for p in report["pipelines"]}


def frontier_figures(report: dict[str, Any]) -> dict[str, Any]:
    """Every pipeline at every trigger of a frontier report: `{trigger: {pipeline: figures}}`."""
    sessions = len({row["session"] for row in report["sessions"]})
    return {
        str(point["trigger"]): {
            p["name"]: pipeline_figures(p, sessions) for p in point["pipelines"]
        }
        for point in report["frontier"]
    }


def _rows(report: dict[str, Any], pipeline: str) -> dict[str, dict[str, Any]]:
    return {r["session"]: r for r in report["sessions"] if r["pipeline"] == pipeline}


def folders(sessions: list[str]) -> dict[str, str]:
    """The corpus folder of each session (`pi_session` of `.../corpus/pi_session/x.jsonl#0`):
    the first part of its path under the folder all the sessions share."""
    files = [s.split("#", 1)[0] for s in sessions]
    common = os.path.commonpath(files) if len(set(files)) > 1 else os.path.dirname(files[0])
    return {
        s: Path(os.path.relpath(f, common)).parts[0] for s, f in zip(sessions, files, strict=True)
    }


def corpus_figures(report: dict[str, Any]) -> dict[str, Any]:
    """What the corpus holds: conversations, files, model calls, facts by kind (from `none`)."""
    none = _rows(report, "none")
    facts: dict[str, int] = {}
    for row in none.values():
        facts["all"] = facts.get("all", 0) + row["retention"].get("total", 0)
        for kind, v in row["retention"].get("by_kind", {}).items():
            facts[kind] = facts.get(kind, 0) + v["total"]
    return {
        "conversations": len(none),
        "files": len({s.split("#", 1)[0] for s in none}),
        "model_calls": sum(r["model_calls"] for r in none.values()),
        "prompt_tokens": sum(r["prompt_tokens"] for r in none.values()),
        "facts": dict(sorted(facts.items())),
    }


def folder_figures(report: dict[str, Any], pipeline: str = "default") -> dict[str, Any]:
    """`pipeline` against `none` per corpus folder."""
    none, ours = _rows(report, "none"), _rows(report, pipeline)
    total = sum(r["prompt_tokens"] for r in none.values())
    where = folders(list(none))
    out: dict[str, Any] = {}
    for name in sorted(set(where.values())):
        sessions = [s for s in none if where[s] == name and s in ours]
        base = sum(none[s]["prompt_tokens"] for s in sessions)
        mine = sum(ours[s]["prompt_tokens"] for s in sessions)
        entry: dict[str, Any] = {
            "conversations": len(sessions),
            "none_prompt_tokens": base,
            "prompt_tokens": mine,
            "saved": round(1 - mine / base, 6) if base else 0.0,
            "share_of_prompt_tokens": _share(base, total),
            "compactions": sum(ours[s]["compactions"] for s in sessions),
        }
        for profile in report["pricing"]:
            entry[f"cost_vs_none_{profile}"] = _share(
                sum(ours[s]["cost"][profile] for s in sessions),
                sum(none[s]["cost"][profile] for s in sessions),
            )
        out[name] = entry
    return out


def _reaches(row: dict[str, Any], trigger: int) -> bool:
    """Whether a `none` session's history ever passes `trigger` (its largest prompt)."""
    return any(call[1] > trigger for call in row["calls"])  # [message, prompt_tokens, ...]


def arrival_figures(report: dict[str, Any]) -> dict[str, Any]:
    """`default:arrival=on` against `default:arrival=off` (docs/arrival.md): over the corpus,
    on the sessions that never reach the trigger (against `none`), and per session that does."""
    none, on = _rows(report, "none"), _rows(report, "default:arrival=on")
    off = _rows(report, "default:arrival=off")
    short = [s for s, row in none.items() if not _reaches(row, report["trigger"])]
    out: dict[str, Any] = {"sessions_reaching_trigger": len(none) - len(short)}
    for profile in report["pricing"]:
        cost = {
            name: sum(r["cost"][profile] for r in rows.values())
            for name, rows in (("on", on), ("off", off))
        }
        out[f"vs_off_{profile}"] = _share(cost["on"], cost["off"])
        out[f"short_vs_none_{profile}"] = _share(
            sum(on[s]["cost"][profile] for s in short), sum(none[s]["cost"][profile] for s in short)
        )
        ratios = [
            on[s]["cost"][profile] / off[s]["cost"][profile]
            for s in none
            if s not in short and off[s]["cost"][profile]
        ]
        out[f"long_vs_off_min_{profile}"] = round(min(ratios), 6) if ratios else None
        out[f"long_vs_off_max_{profile}"] = round(max(ratios), 6) if ratios else None
    return out


LOWEST_KINDS = ("all", "user_message", "path", "error")


def lowest_sessions(report: dict[str, Any]) -> dict[str, Any]:
    """Per pipeline and fact kind, the session that kept the least (its folder, facts kept and
    held), or None when every session kept all."""
    where = folders(sorted({r["session"] for r in report["sessions"]}))
    out: dict[str, Any] = {}
    for p in report["pipelines"]:
        entry: dict[str, Any] = {}
        for kind in LOWEST_KINDS:
            worst = None
            for session, row in sorted(_rows(report, p["name"]).items()):
                held = row["retention"] if kind == "all" else row["retention"]["by_kind"].get(kind)
                if held and held["total"] and held["kept"] < held["total"]:
                    share = held["kept"] / held["total"]
                    if worst is None or share < worst[0]:
                        worst = (share, where[session], held["kept"], held["total"])
            entry[kind] = (
                {"folder": worst[1], "kept": worst[2], "total": worst[3]} if worst else None
            )
        out[p["name"]] = entry
    return out


def _points(pipelines: dict[str, Any]) -> list[float]:
    """Each peer's cost minus the default's, in points of `none`'s cost (both pricings):
    positive where the default costs less."""
    ours = pipelines["default"]
    return [
        round((theirs[key] - ours[key]) * 100, 6)
        for name, theirs in pipelines.items()
        if name.startswith("peer-")
        for key in ("cost_vs_none_anthropic", "cost_vs_none_openai")
    ]


def lead_points(pipelines: dict[str, Any]) -> float | None:
    """How far the cheapest peer's cost is above the default's, in points of `none`'s cost
    under either pricing; None when a peer costs as little as the default or less (then a
    sentence saying the default is the cheapest no longer holds)."""
    lead = min(_points(pipelines), default=None)
    return lead if lead is not None and lead > 0 else None


def peer_gaps(frontier: dict[str, Any]) -> dict[str, Any]:
    """How the default compares with the peers on the frontier. `lead_points` at the first
    trigger (`lead_points`); `min_points` and `max_points`: at the later triggers, by how much
    the peers that cost less than the default undercut it (None when none does)."""
    first, *later = frontier
    under = [-p for t in later for p in _points(frontier[t]) if p < 0]
    return {
        "lead_points": lead_points(frontier[first]),
        "min_points": min(under, default=None),
        "max_points": max(under, default=None),
    }


def _session_shares(report: dict[str, Any], profile: str) -> dict[str, float]:
    """Each session's cost under the default as a share of its cost under `none`."""
    none, ours = _rows(report, "none"), _rows(report, "default")
    return {s: r["cost"][profile] / none[s]["cost"][profile] for s, r in ours.items()}


def pin_figures(off: dict[str, Any], on: dict[str, Any]) -> dict[str, Any]:
    """The default without and with `PINNED` (docs/strategies.md): its totals each way, the
    prompt tokens the pins add, and the session whose cost they raise the most (Anthropic
    pricing), its share of `none` each way."""
    without, pinned = run_figures(off)["default"], run_figures(on)["default"]
    shares_off, shares_on = _session_shares(off, "anthropic"), _session_shares(on, "anthropic")
    most = max(shares_on, key=lambda s: (shares_on[s] - shares_off[s], s))
    return {
        "off": without,
        "on": pinned,
        "added_prompt_tokens": round(pinned["prompt_tokens"] / without["prompt_tokens"] - 1, 6),
        "most_raised": {
            "session": Path(most.split("#", 1)[0]).name,
            "off": round(shares_off[most], 6),
            "on": round(shares_on[most], 6),
        },
    }


def measure_thrash() -> dict[str, Any]:
    """docs/bench.md's example of a policy that thrashes: the generated session whose user turns
    alone pass the target (`tests/policy/sessions.py`, a 3,000-word spec every 6 calls),
    replayed with the default at 30,000 tokens compacting whenever over the trigger (`always`)
    and under the policy (`pays`), against `none`, Anthropic pricing."""
    from compactkit.bench.replay import run_session
    from compactkit.pipeline import build_pipeline
    from compactkit.pricing import get_profile
    from compactkit.registry import get_counter
    from compactkit.spec import parse_pipeline
    from tests.policy import sessions

    ctx = sessions.pinned(words=3_000)
    out: dict[str, Any] = {}
    for name, pipeline, policy in (
        ("none", "none", "pays"),
        ("always", "default", "always"),
        ("pays", "default", "pays"),
    ):
        result = run_session(
            name,
            ctx,
            build_pipeline(parse_pipeline(pipeline, trigger=30_000)),
            "persistent",
            get_counter(),
            [get_profile("anthropic"), get_profile("openai")],
            trigger=30_000,
            policy=policy,
        )
        out[name] = {
            "model_calls": len(result.calls),
            "compactions": result.compactions,
            "cost_vs_none_anthropic": _share(
                result.cost["anthropic"], out.get("none", {}).get("cost", result.cost["anthropic"])
            ),
            "cost": result.cost["anthropic"],
        }
    return out


SHAPES_DIR = "out/figures/shapes"


def write_shapes(folder: Path) -> None:
    """The generated sessions of `tests/policy/sessions.py` as files the `shapes` run reads:
    shapes the corpus has few of (templates and pastes in the user's turns, a chat of user
    text), the same bytes every time (seeded)."""
    import compactkit
    from tests.policy import sessions

    folder.mkdir(parents=True, exist_ok=True)
    for shape in SHAPES:
        compactkit.dump(getattr(sessions, shape)(), folder / f"{shape}.json")


def shape_figures(report: dict[str, Any]) -> dict[str, Any]:
    """Per generated session and pipeline of the `shapes` run: cost as a share of `none` per
    pricing, compactions, and the user's messages kept."""
    out: dict[str, Any] = {}
    for row in report["sessions"]:
        shape = Path(row["session"]).stem
        out.setdefault(shape, {})[row["pipeline"]] = row
    figures: dict[str, Any] = {}
    for shape in SHAPES:
        rows, none = out[shape], out[shape]["none"]
        figures[shape] = {}
        for name in SHAPE_PIPELINES:
            row = rows[name]
            users = row["retention"]["by_kind"].get("user_message", {})
            figures[shape][name] = {
                "compactions": row["compactions"],
                "user_messages_kept": users.get("kept"),
                "user_messages": users.get("total"),
                **{
                    f"cost_vs_none_{p}": _share(row["cost"][p], none["cost"][p])
                    for p in report["pricing"]
                },
            }
    return figures


def table_shapes(figures: dict[str, Any]) -> list[str]:
    """docs/bench.md: the generated shapes, default against the peers that summarize."""
    lines = [
        _row(["session (`tests/policy/sessions.py`)", *(f"`{p}`" for p in SHAPE_PIPELINES)]),
        _row(["---"] * (1 + len(SHAPE_PIPELINES))),
    ]
    for shape, rows in figures["shapes"].items():
        cells = [f"`{shape}`"]
        for name in SHAPE_PIPELINES:
            row = rows[name]
            cells.append(
                f"{_pct(row['cost_vs_none_anthropic'])} / {_pct(row['cost_vs_none_openai'])}, "
                f"{row['user_messages_kept']}/{row['user_messages']} user messages"
            )
        lines.append(_row(cells))
    return lines


def _sums(rows: list[dict[str, Any]]) -> dict[str, Any]:
    before = sum(r["tokens_before"] for r in rows)
    after = sum(r["tokens_after"] for r in rows)
    return {
        "files": len({r["session"].split("#", 1)[0] for r in rows}),
        "conversations": len(rows),
        "tokens_before": before,
        "tokens_after": after,
        "saved": round(1 - after / before, 6) if before else 0.0,
    }


def oneshot_figures(report: dict[str, Any]) -> dict[str, Any]:
    """Each pipeline compacting every whole conversation once: its tokens before and after over
    the corpus (`all`) and per folder, where each folder also names what its largest
    conversation saved and what the folder saves without it."""
    out: dict[str, Any] = {}
    for p in report["pipelines"]:
        rows = _rows(report, p["name"])
        where = folders(list(rows))
        by_folder: dict[str, Any] = {}
        for name in sorted(set(where.values())):
            mine = [r for s, r in rows.items() if where[s] == name]
            largest = max(mine, key=lambda r: (r["tokens_before"], r["session"]))
            by_folder[name] = {
                **_sums(mine),
                "largest_saved": _sums([largest])["saved"],
                "saved_without_largest": _sums([r for r in mine if r is not largest])["saved"],
            }
        out[p["name"]] = {"all": _sums(list(rows.values())), "folders": by_folder}
    return out


def budget_figures(report: dict[str, Any]) -> dict[str, Any]:
    """`llm-summary:max_tokens=N` on the conversations over N: how many, how many fit after."""
    out: dict[str, Any] = {}
    for budget in BUDGETS:
        rows = _rows(report, f"llm-summary:max_tokens={budget}").values()
        over = [r for r in rows if r["tokens_before"] > budget]
        fit = sum(r["tokens_after"] <= budget for r in over)
        out[str(budget)] = {
            "over": len(over),
            "fit": fit,
            "still_over": len(over) - fit,
            "tokens_before": sum(r["tokens_before"] for r in over),
            "tokens_after": sum(r["tokens_after"] for r in over),
        }
    return out


def serve_figures(report: dict[str, Any]) -> dict[str, Any]:
    """The serve replay's token figures (its timings are left out: they move with the machine),
    and the conversation the proxy saves the most on."""
    total = {k: v for k, v in report["summary"].items() if k != "latency_ms"}
    total["saved"] = _share(total["direct_tokens"] - total["proxy_tokens"], total["direct_tokens"])
    total["collapse_saved"] = _share(
        total["direct_tokens"] - total["collapse_tokens"], total["direct_tokens"]
    )
    total["collapse_fewer"] = total["proxy_tokens"] - total["collapse_tokens"]
    best = max(
        report["sessions"],
        key=lambda r: (
            (r["direct_tokens"] - r["proxy_tokens"]) / (r["direct_tokens"] or 1),
            r["name"],
        ),
    )
    total["best"] = {
        "direct_tokens": best["direct_tokens"],
        "proxy_tokens": best["proxy_tokens"],
        "saved": _share(best["direct_tokens"] - best["proxy_tokens"], best["direct_tokens"]),
    }
    return total


def gateway_figures(report: dict[str, Any]) -> dict[str, Any]:
    """What the upstream received through the gateway against what the bench says, per corpus
    folder and `all`; `differing`: on the conversations where they differ, how much fewer
    prompt tokens the upstream got and how much more it cost (the bench's arithmetic)."""
    rows = report["conversations"]

    def sums(mine: list[dict[str, Any]]) -> dict[str, Any]:
        keys = [k for k in mine[0] if k.startswith(("bench_", "upstream_"))] if mine else []
        out: dict[str, Any] = {k: round(sum(r[k] for r in mine), 6) for k in keys}
        out["conversations"] = len(mine)
        out["calls"] = sum(r["calls"] for r in mine)
        out["compactions"] = sum(r["compactions"] for r in mine)
        out["identical"] = sum(_identical(r) for r in mine)
        return out

    differing = sums([r for r in rows if not _identical(r)])
    by_folder = {
        f: sums([r for r in rows if r["folder"] == f]) for f in sorted({r["folder"] for r in rows})
    }
    return {
        "trigger": report["trigger"],
        "target": report["target"],
        "folders": by_folder,
        "all": sums(rows),
        "differing": {
            "conversations": differing["conversations"],
            "prompt_tokens_fewer": _share(
                differing.get("bench_prompt_tokens", 0)
                - differing.get("upstream_prompt_tokens", 0),
                differing.get("bench_prompt_tokens", 0),
            ),
            "cost_more": _share(
                differing.get("upstream_cost_anthropic", 0)
                - differing.get("bench_cost_anthropic", 0),
                differing.get("bench_cost_anthropic", 0),
            ),
        },
    }


def _identical(row: dict[str, Any]) -> bool:
    """The upstream received the prompt and cached tokens the bench counts."""
    return (row["upstream_prompt_tokens"], row["upstream_cached_tokens"]) == (
        row["bench_prompt_tokens"],
        row["bench_cached_tokens"],
    )


def headroom_figures(report: dict[str, Any]) -> dict[str, Any]:
    """headroom and the default without and with its arrival stage, and what the arrival stage
    costs as a share of what headroom costs."""
    out = run_figures(report)
    ours, theirs = out["default:arrival=on"], out["peer-headroom"]
    for profile in report["pricing"]:
        out[f"arrival_vs_headroom_{profile}"] = _share(
            ours[f"cost_{profile}"], theirs[f"cost_{profile}"]
        )
    return out


def build(
    reports: dict[str, dict[str, Any]], sample: dict[str, Any], thrash: dict[str, Any]
) -> dict[str, Any]:
    """docs/figures.json from the bench reports and the quick start's figures."""
    frontier = frontier_figures(reports["frontier"])
    native = run_figures(reports["native"])
    persistent = reports["persistent"]
    return {
        "schema": SCHEMA,
        "commands": commands(),
        "sample": sample,
        "policy": {"slack_ratio": 1 + SLACK, "min_cleared": MIN_CLEARED},
        "corpus": corpus_figures(persistent),
        "frontier": frontier,
        "frontier_gaps": peer_gaps(frontier),
        "persistent": run_figures(persistent),
        "folders": folder_figures(persistent),
        "arrival": arrival_figures(persistent),
        "view": run_figures(reports["view"]),
        "native": native,
        "native_lowest": lowest_sessions(reports["native"]),
        "native_lead_points": lead_points(native),
        "pins": pin_figures(reports["pins-off"], reports["pins"]),
        "oneshot": oneshot_figures(reports["oneshot"]),
        "budgets": budget_figures(reports["oneshot"]),
        "serve": serve_figures(reports["serve"]),
        "gateway": gateway_figures(reports["gateway"]),
        "headroom": headroom_figures(reports["headroom"]),
        "ceiling": ceiling_figures(reports["ceiling"]),
        "thrash": thrash,
        "shapes": shape_figures(reports["shapes"]),
    }


# --- writing them into the docs -------------------------------------------------------------

NUMBER = r"\$?\d[\d,]*(?:\.\d+)?[%x]?"
MARKED = re.compile(rf"(?P<number>{NUMBER})<!-- fig:(?P<key>[^ >]+) -->")
TABLE = re.compile(
    r"(?P<begin><!-- figures:(?P<name>[\w-]+) -->\n)(?P<body>.*?)(?P<end><!-- /figures -->)", re.S
)


class FigureError(KeyError):
    """A marker names a figure the JSON does not hold (or holds no value for)."""


def lookup(figures: dict[str, Any], key: str) -> Any:
    """The figure at dotted `key` (`frontier.30000.default.saved`)."""
    value: Any = figures
    for part in key.split("."):
        if not isinstance(value, dict) or part not in value:
            raise FigureError(f"{key}: no such figure in docs/figures.json")
        value = value[part]
    if value is None or isinstance(value, (dict, list)):
        raise FigureError(f"{key}: no single value in docs/figures.json ({value!r})")
    return value


def show(value: float, written: str) -> str:
    """`value` written as `written` is: `%` a share in percent, `x` a ratio, `$` dollars, at the
    same number of decimals, thousands separated by commas."""
    if value < 0:  # the sentence it stands in was written for a positive figure
        raise FigureError(f"{value} is negative where {written} is written: reword the sentence")
    unit = written[-1] if written[-1] in "%x" else ""
    digits = written.strip("$%x")
    decimals = len(digits.split(".")[1]) if "." in digits else 0
    scaled = value * 100 if unit == "%" else value
    return f"{'$' if written.startswith('$') else ''}{scaled:,.{decimals}f}{unit}"


def rewrite(text: str, figures: dict[str, Any]) -> str:
    """`text` with every marked number and generated table written from `figures`."""

    def number(m: re.Match[str]) -> str:
        value = lookup(figures, m["key"])
        return f"{show(value, m['number'])}<!-- fig:{m['key']} -->"

    def table(m: re.Match[str]) -> str:
        if m["name"] not in TABLES:
            raise FigureError(
                f"figures:{m['name']}: no such table (TABLES in benchmarks/figures.py)"
            )
        body = "\n".join(TABLES[m["name"]](figures))
        return f"{m['begin']}{body}\n{m['end']}"

    return MARKED.sub(number, TABLE.sub(table, text))


# --- the generated tables -------------------------------------------------------------------


def _pct(value: float | None, decimals: int = 1) -> str:
    return "-" if value is None else f"{value * 100:.{decimals}f}%"


def _cost(profile: str) -> Callable[[dict[str, Any]], str]:
    return lambda p: f"${p[f'cost_{profile}']:,.2f} ({_pct(p[f'cost_vs_none_{profile}'])})"


def _share_of(key: str) -> Callable[[dict[str, Any]], str]:
    return lambda p: _pct(p[key])


def _count(key: str) -> Callable[[dict[str, Any]], str]:
    return lambda p: f"{p[key]:,}"


KINDS = ("task", "user_message", "last_instruction", "path", "error")
COLUMNS: dict[str, Callable[[dict[str, Any]], str]] = {
    "prompt tokens": _count("prompt_tokens"),
    "saved": _share_of("saved"),
    "cached": _count("cached_tokens"),
    "cost anthropic": _cost("anthropic"),
    "cost openai": _cost("openai"),
    "cost anthropic, share": _share_of("cost_vs_none_anthropic"),
    "cost openai, share": _share_of("cost_vs_none_openai"),
    "costs, share": lambda p: (
        f"{_pct(p['cost_vs_none_anthropic'])} / {_pct(p['cost_vs_none_openai'])}"
    ),
    "worst session": _share_of("worst_session"),
    "retention": _share_of("retention"),
    "recoverable": _share_of("recoverability"),
    "violations": _count("violations"),
    "compactions": _count("compactions"),
    "compactions / session": lambda p: f"{p['compactions_per_session']:.2f}",
    "conversations": _count("conversations"),
    "prompt tokens, none": _count("none_prompt_tokens"),
    "files": _count("files"),
    "tokens_before": _count("tokens_before"),
    "tokens_after": _count("tokens_after"),
    "over": _count("over"),
    "fit": _count("fit"),
    "still_over": _count("still_over"),
    "reads": _count("reads"),
    "direct_tokens": _count("direct_tokens"),
    "proxy_tokens": _count("proxy_tokens"),
    "collapse": lambda p: str(p["collapse"]),
    "markers": _count("markers"),
    "calls": _count("calls"),
    "bench_prompt_tokens": _count("bench_prompt_tokens"),
    "upstream_prompt_tokens": _count("upstream_prompt_tokens"),
    "bench_cached_tokens": _count("bench_cached_tokens"),
    "upstream_cached_tokens": _count("upstream_cached_tokens"),
    "bench_cost_anthropic": lambda p: f"{p['bench_cost_anthropic']:.2f}",
    "upstream_cost_anthropic": lambda p: f"{p['upstream_cost_anthropic']:.2f}",
    "identical": lambda p: f"{p['identical']} of {p['conversations']}",
    "bad_markers": _count("bad_markers"),
    **{kind: _share_of(f"retention_{kind}") for kind in KINDS},
}
"""Each column a generated table may have: how a row's figures fill its cell."""


def _row(cells: list[str]) -> str:
    return "| " + " | ".join(cells) + " |"


def _table(
    first: str,
    rows: dict[str, dict[str, Any]],
    columns: list[str | tuple[str, str]],
    name: Callable[[str], str] = lambda n: f"`{n}`",
) -> list[str]:
    """A table of `rows` (its name first), one column per `columns` entry: a name of
    `COLUMNS`, or (header, name of `COLUMNS`) where the header says more."""
    pairs = [c if isinstance(c, tuple) else (c, c) for c in columns]
    lines = [_row([first, *(header for header, _ in pairs)])]
    lines.append("|---|" + "---:|" * len(pairs))
    for key, figures in rows.items():
        lines.append(_row([name(key), *(COLUMNS[column](figures) for _, column in pairs)]))
    return lines


def _but(rows: dict[str, Any], *dropped: str) -> dict[str, Any]:
    """`rows` without those whose name is one of `dropped` or contains `arrival=`."""
    return {k: v for k, v in rows.items() if k not in dropped and "arrival=" not in k}


def table_frontier(figures: dict[str, Any]) -> list[str]:
    """docs/bench.md, the frontier like for like: every pipeline at every trigger."""
    frontier = figures["frontier"]
    triggers = list(frontier)
    lines = [_row(["pipeline", *(f"{int(t) // 1000}k" for t in triggers)])]
    lines.append(_row(["---"] * (len(triggers) + 1)))
    for name in frontier[triggers[0]]:
        if name == "none":
            continue
        cells = []
        for t in triggers:
            p = frontier[t][name]
            cells.append(
                f"{_pct(p['cost_vs_none_anthropic'])} / {_pct(p['cost_vs_none_openai'])} "
                f"({_pct(p['summaries_anthropic'], 0)} summaries), {_pct(p['retention'], 2)}"
            )
        lines.append(_row([f"`{name}`", *cells]))
    return lines


def table_trigger(figures: dict[str, Any]) -> list[str]:
    """docs/bench.md: the default pipeline at each trigger of the frontier."""
    rows = {f"{int(t):,}": pipelines["default"] for t, pipelines in figures["frontier"].items()}
    columns: list[str | tuple[str, str]] = [
        ("prompt tokens saved", "saved"),
        ("cost anthropic", "cost anthropic, share"),
        ("cost openai", "cost openai, share"),
        "worst session",
        "retention",
    ]
    return _table("trigger", rows, columns, name=str)


REPLAY_COLUMNS: list[str | tuple[str, str]] = [
    "prompt tokens",
    "saved",
    "cached",
    ("cost anthropic (vs none)", "cost anthropic"),
    ("cost openai (vs none)", "cost openai"),
    ("worst session vs none", "worst session"),
    "retention",
]


def table_persistent(figures: dict[str, Any]) -> list[str]:
    """docs/bench.md, the corpus measured: every built-in strategy at the 30,000 trigger."""
    columns = [*REPLAY_COLUMNS, "recoverable", "violations", "compactions"]
    return _table("pipeline", _but(figures["persistent"]), columns)


def table_kinds(figures: dict[str, Any]) -> list[str]:
    """docs/bench.md: retention by kind of fact, same run."""
    columns: list[str | tuple[str, str]] = [*KINDS, ("all", "retention")]
    return _table("pipeline", _but(figures["persistent"]), columns)


def table_view(figures: dict[str, Any]) -> list[str]:
    """docs/bench.md: the pipelines in view mode."""
    return _table("pipeline", _but(figures["view"], "none"), REPLAY_COLUMNS)


def table_folders(figures: dict[str, Any]) -> list[str]:
    """docs/bench.md: the default against `none` per corpus folder."""
    columns: list[str | tuple[str, str]] = [
        "conversations",
        "prompt tokens, none",
        ("default", "prompt tokens"),
        "saved",
        ("cost anthropic", "cost anthropic, share"),
        ("cost openai", "cost openai, share"),
        "compactions",
    ]
    return _table("folder", figures["folders"], columns, name=str)


def _native_name(name: str) -> str:
    return name.removesuffix(":native=true")


def table_native(figures: dict[str, Any]) -> list[str]:
    """docs/bench.md, the peers on the corpus: the default and the peers as they ship."""
    columns: list[str | tuple[str, str]] = [
        "prompt tokens",
        "cost anthropic",
        "cost openai",
        "worst session",
        "retention",
        *((kind.replace("_", "\\_"), kind) for kind in KINDS),
        "compactions / session",
    ]
    return _table("pipeline", _but(figures["native"], "none"), columns, name=_native_name)


def table_native_lowest(figures: dict[str, Any]) -> list[str]:
    """docs/bench.md: per peer, the session that kept the least of each kind."""
    lines = [_row(["pipeline", "retention", "user\\_message", "path", "error"])]
    lines.append(_row(["---"] * 5))
    lowest = figures["native_lowest"]
    whole = [_native_name(n) for n, e in lowest.items() if n != "none" and not any(e.values())]
    if whole:
        lines.append(_row([", ".join(whole), "none below 100%", "none", "none", "none"]))
    for name, entry in lowest.items():
        if name in ("none", *whole) or not any(entry.values()):
            continue
        cells = [
            f"`{e['folder']}`, {e['kept']} of {e['total']}" if e else "none"
            for e in (entry[kind] for kind in LOWEST_KINDS)
        ]
        lines.append(_row([_native_name(name), *cells]))
    return lines


def table_arrival(figures: dict[str, Any]) -> list[str]:
    """docs/arrival.md: the arrival stage against the default without it."""
    a, on = figures["arrival"], figures["persistent"]["default:arrival=on"]
    lines = [
        _row(
            [
                "",
                "cost vs `default:arrival=off` (Anthropic / OpenAI)",
                "sessions never reaching the trigger, vs `none`",
                "retention",
            ]
        ),
        _row(["---"] * 4),
    ]
    lines.append(
        _row(
            [
                "`default:arrival=on`",
                f"{a['vs_off_anthropic']:.3f}x / {a['vs_off_openai']:.3f}x",
                f"{a['short_vs_none_anthropic']:.3f}x / {a['short_vs_none_openai']:.3f}x",
                f"{_pct(on['retention'])} (recoverable {_pct(on['recoverability'])})",
            ]
        )
    )
    return lines


CEILING = {
    "folders": "default:arrival=on",
    "reads_kept": "oracle-outputs + default:arrival=off",
    "everything": "oracle-all-outputs + default:arrival=off",
}
"""The rows of the arrival ceiling (benchmarks/arrival_ceiling.py): the built-in folders, every
tool output emptied but file reads, every tool output emptied."""


def ceiling_figures(report: dict[str, Any]) -> dict[str, Any]:
    """Per trigger and `CEILING` row: cost against the default without arrival, and over the
    sessions it never compacts against `none`, per pricing."""
    return {
        trigger: {
            row: {
                f"{what}_{profile}": pipelines[name][what][profile]
                for what in ("vs_default", "never_vs_none")
                for profile in ("anthropic", "openai")
            }
            for row, name in CEILING.items()
        }
        for trigger, pipelines in report.items()
    }


def table_ceiling(figures: dict[str, Any]) -> list[str]:
    """docs/arrival.md: the arrival ceiling."""
    labels = {
        "folders": "the built-in folders (`default:arrival=on`)",
        "reads_kept": "every tool output emptied, file reads kept",
        "everything": "every tool output emptied, file reads too",
    }
    lines = [
        _row(
            [
                "arrival stage, before `default`",
                "trigger",
                "cost vs `default:arrival=off` (Anthropic / OpenAI)",
                "never compacted, vs `none`",
            ]
        ),
        _row(["---"] * 4),
    ]
    for trigger, rows in figures["ceiling"].items():
        for row, got in rows.items():
            lines.append(
                _row(
                    [
                        labels[row],
                        f"{int(trigger) // 1000}k",
                        f"{got['vs_default_anthropic']:.3f}x / {got['vs_default_openai']:.3f}x",
                        f"{got['never_vs_none_anthropic']:.3f}x / "
                        f"{got['never_vs_none_openai']:.3f}x",
                    ]
                )
            )
    return lines


def table_oneshot(strategy: str) -> Callable[[dict[str, Any]], list[str]]:
    """docs/strategies/STRATEGY.md: the strategy once over each conversation, per folder."""

    def table(figures: dict[str, Any]) -> list[str]:
        measured = figures["oneshot"][strategy]
        rows = {**measured["folders"], "**all**": measured["all"]}
        columns: list[str | tuple[str, str]] = [
            "files",
            "conversations",
            ("tokens before", "tokens_before"),
            ("tokens after", "tokens_after"),
            "saved",
        ]
        return _table("corpus folder", rows, columns, name=str)

    return table


def table_budgets(figures: dict[str, Any]) -> list[str]:
    """docs/strategies/llm-summary.md: with a budget, on the conversations over it."""
    rows = {f"{int(b):,}": v for b, v in figures["budgets"].items()}
    columns: list[str | tuple[str, str]] = [
        ("conversations over it", "over"),
        ("fit afterwards", "fit"),
        ("still over", "still_over"),
        ("tokens before", "tokens_before"),
        ("tokens after", "tokens_after"),
    ]
    return _table("budget", rows, columns, name=str)


def table_headroom(figures: dict[str, Any]) -> list[str]:
    """docs/arrival.md: headroom against the default without and with its arrival stage."""
    rows = {k: v for k, v in figures["headroom"].items() if isinstance(v, dict) and k != "none"}
    columns: list[str | tuple[str, str]] = [
        ("cost vs none (Anthropic / OpenAI)", "costs, share"),
        "retention",
        "recoverable",
    ]
    return _table("", rows, columns)


def table_serve(figures: dict[str, Any]) -> list[str]:
    """docs/serve.md: the corpus's file reads through the proxy and directly."""
    serve = figures["serve"]
    row = {
        **serve,
        "collapse": f"{serve['collapse_tokens']:,} ({_pct(serve['collapse_saved'])})",
    }
    columns: list[str | tuple[str, str]] = [
        "reads",
        ("tokens served directly", "direct_tokens"),
        ("through the proxy", "proxy_tokens"),
        "saved",
        ("etag-collapse applied afterwards", "collapse"),
        "markers",
        ("markers naming content not held", "bad_markers"),
    ]
    return _table("sessions with reads", {str(serve["sessions"]): row}, columns, name=str)


def table_gateway(figures: dict[str, Any]) -> list[str]:
    """docs/gateway.md: the bench's figures and the upstream's, per corpus folder."""
    gateway = figures["gateway"]
    rows = {**gateway["folders"], "**all**": gateway["all"]}
    columns: list[str | tuple[str, str]] = [
        "conversations",
        ("model calls", "calls"),
        "compactions",
        ("bench prompt tokens", "bench_prompt_tokens"),
        ("upstream prompt tokens", "upstream_prompt_tokens"),
        ("bench cached", "bench_cached_tokens"),
        ("upstream cached", "upstream_cached_tokens"),
        ("bench cost (anthropic, USD)", "bench_cost_anthropic"),
        ("upstream cost", "upstream_cost_anthropic"),
        "identical",
    ]
    return _table("format", rows, columns, name=str)


TABLES: dict[str, Callable[[dict[str, Any]], list[str]]] = {
    "frontier": table_frontier,
    "trigger": table_trigger,
    "persistent": table_persistent,
    "kinds": table_kinds,
    "view": table_view,
    "folders": table_folders,
    "native": table_native,
    "native-lowest": table_native_lowest,
    "arrival": table_arrival,
    "budgets": table_budgets,
    "serve": table_serve,
    "gateway": table_gateway,
    "headroom": table_headroom,
    "ceiling": table_ceiling,
    "shapes": table_shapes,
    **{f"oneshot-{strategy}": table_oneshot(strategy) for strategy in ONESHOT},
}
"""Each table `make figures` writes between `<!-- figures:NAME -->` and `<!-- /figures -->`."""


# --- the command ----------------------------------------------------------------------------


def rewrite_docs(figures: dict[str, Any], paths: list[Path] = DOCS) -> list[Path]:
    """Rewrite every doc page from `figures` (all or none: a bad marker anywhere writes
    nothing); the pages that changed."""
    texts = {path: path.read_text(encoding="utf-8") for path in paths}
    new = {path: rewrite(text, figures) for path, text in texts.items()}
    changed = [path for path in paths if new[path] != texts[path]]
    for path in changed:
        write_atomic(path, new[path])
    return changed


def measure(reuse: Path | None, out_dir: Path, workers: int) -> dict[str, Any]:
    """Every figure: each bench of `RUNS` (an earlier report in `reuse` when there is one)."""
    corpus = corpus_dir()
    out_dir.mkdir(parents=True, exist_ok=True)
    reports = {}
    write_shapes(ROOT / SHAPES_DIR)
    for name in RUNS:
        if reuse is not None and (reuse / f"{name}.json").is_file():
            reports[name] = load_report(reuse, name)
        else:
            reports[name] = run_bench(name, corpus, out_dir, workers)
    for name in SCRIPTS:
        if reuse is not None and (reuse / f"{name}.json").is_file():
            reports[name] = load_report(reuse, name)
        else:
            run_script(name, corpus, out_dir)
            reports[name] = load_report(out_dir, name)
    return build(reports, measure_sample(), measure_thrash())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.figures", description=__doc__)
    parser.add_argument("--docs-only", action="store_true", help="rewrite from the JSON only")
    parser.add_argument(
        "--reuse",
        type=Path,
        nargs="?",
        const=ROOT / "out" / "figures",
        help="read the bench reports left in this folder instead of running",
    )
    parser.add_argument("--workers", type=int, default=2)
    args = parser.parse_args(argv)
    if args.docs_only:
        figures = json.loads(FIGURES.read_text(encoding="utf-8"))
    else:
        figures = measure(args.reuse, ROOT / "out" / "figures", args.workers)
        write_atomic(FIGURES, json.dumps(figures, indent=1) + "\n")
        print(f"figures: wrote {FIGURES.relative_to(ROOT)}", file=sys.stderr)
    try:
        changed = rewrite_docs(figures)
    except FigureError as error:  # a marker naming a figure no run gives: fix the marker
        print(f"figures: {error.args[0]}", file=sys.stderr)
        return 1
    for path in changed:
        print(f"figures: rewrote {path.relative_to(ROOT)}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
