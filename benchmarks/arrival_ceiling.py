"""How much any arrival compressor could save: the bench with oracle strategies that empty tool
outputs on arrival (`benchmarks/ceiling/oracle.py`), beside the default with and without its
arrival stage, at one or more triggers.

    python benchmarks/arrival_ceiling.py ../shared/corpus --trigger 30000,100000 --json out.json

Prints, per trigger, each pipeline's cost as a share of `default:arrival=off` and, over the
sessions the default never compacts, as a share of `none` (Anthropic / OpenAI pricing).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from collections import defaultdict
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
PIPELINES = [
    "default:arrival=off",
    "default:arrival=on",
    "oracle-outputs+default:arrival=off",
    "oracle-all-outputs+default:arrival=off",
]
PRICINGS = ("anthropic", "openai")


def ratios(report: dict[str, Any]) -> dict[str, dict[str, dict[str, float]]]:
    """pipeline -> {"vs_default": {pricing: x}, "never_vs_none": {pricing: x}} for one trigger."""
    rows: dict[str, dict[str, Any]] = defaultdict(dict)
    for row in report["sessions"]:
        rows[row["session"]][row["pipeline"]] = row
    base = "default:arrival=off"
    names = [p["name"] for p in report["pipelines"]]
    never = [s for s, r in rows.items() if r[base]["compactions"] == 0]

    def total(pipeline: str, pricing: str, sessions: list[str]) -> float:
        return sum(rows[s][pipeline]["cost"][pricing] for s in sessions)

    out: dict[str, dict[str, dict[str, float]]] = {}
    for name in names:
        out[name] = {
            "vs_default": {
                p: round(total(name, p, list(rows)) / total(base, p, list(rows)), 3)
                for p in PRICINGS
            },
            "never_vs_none": {
                p: round(total(name, p, never) / total("none", p, never), 3) for p in PRICINGS
            },
        }
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("paths", nargs="+")
    parser.add_argument("--trigger", default="30000")
    parser.add_argument("--json", dest="json_out")
    args = parser.parse_args()
    figures: dict[str, Any] = {}
    env = {**os.environ, "COMPACTKIT_PLUGINS_DIR": str(HERE / "ceiling")}
    for trigger in args.trigger.split(","):
        with tempfile.TemporaryDirectory() as tmp:
            report_path = Path(tmp) / "bench.json"
            command = [sys.executable, "-m", "compactkit", "bench", *args.paths]
            for spec in PIPELINES:
                command += ["-s", spec]
            command += ["--trigger", trigger, "--json", str(report_path)]
            subprocess.run(command, env=env, check=True, stdout=subprocess.DEVNULL)
            report = json.loads(report_path.read_text())
        figures[trigger] = ratios(report)
        for name, got in figures[trigger].items():
            vs, never = got["vs_default"], got["never_vs_none"]
            print(
                f"trigger {trigger} {name:42s} vs default {vs['anthropic']:.3f} / "
                f"{vs['openai']:.3f}   never compacted vs none {never['anthropic']:.3f} / "
                f"{never['openai']:.3f}"
            )
    if args.json_out:
        Path(args.json_out).write_text(json.dumps(figures, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
