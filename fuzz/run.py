"""Run the fuzz targets of `fuzz/targets.py` under atheris (libFuzzer, coverage-guided).

    .venv/bin/python fuzz/run.py --all --runs 100000       # every target, 100k inputs each
    .venv/bin/python fuzz/run.py --all --seconds 6         # every target for 6 s (CI smoke run)
    .venv/bin/python fuzz/run.py format:pi-session --runs 5000

Each target starts from its seeds (`fuzz/seeds/<target>/`), every regression input
(`fuzz/regressions/<target>/`) and what earlier runs found (`fuzz/.work/<target>/`, not committed).
An input that raises anything but a `CompactkitError` is a crash: the first input of each distinct
crash (exception type and the innermost compactkit line) is written to
`fuzz/regressions/<target>/<sha256>.bin` and fuzzing goes on. An input running longer than
`--timeout` seconds is a hang: libFuzzer stops the target and its input is kept there too.
`tests/test_fuzz_regressions.py` replays every kept input. Exit status 1 when anything crashed or
hung, else 0.
"""

from __future__ import annotations

import argparse
import faulthandler
import hashlib
import json
import os
import re
import subprocess
import sys
import time
import traceback
import types
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
WORK = HERE / ".work"
MAX_LEN = {"spec": 512}
SHARED_READERS = [
    "compactkit.formats.base",
    "compactkit.formats._util",
    "compactkit.formats._pairing",
    "compactkit.formats._chat",
    "compactkit.jsonio",
]
MODULES = {
    "session": ["compactkit.formats"],
    "stash": ["compactkit.recovery", "compactkit.cli._input", "compactkit.formats.base"],
    "spec": [
        "compactkit.strategy",
        "compactkit.cli._options",
        "compactkit.bench.runner",
        "compactkit.pipeline",
    ],
}
"""What each target's coverage is measured on (a format target: its module and the shared
helpers); instrumenting every module would cost more start-up time than a smoke run has."""


def instrument(target: str) -> int:
    """Add atheris' coverage instrumentation to the functions and methods of the modules `target`
    exercises; return how many."""
    import atheris

    from fuzz.targets import REGISTRY

    if target.startswith("format:"):
        fmt = REGISTRY.formats.get(target.split(":", 1)[1])
        prefixes = [type(fmt).__module__, *SHARED_READERS]
    else:
        prefixes = MODULES[target]
    count = 0
    for name, module in list(sys.modules.items()):
        if not any(name == p or name.startswith(p + ".") for p in prefixes):
            continue
        for obj in list(vars(module).values()):
            if getattr(obj, "__module__", None) != name:
                continue
            members = list(vars(obj).values()) if isinstance(obj, type) else [obj]
            for member in members:
                func = getattr(member, "__func__", member)  # static and class methods
                if isinstance(func, types.FunctionType):
                    atheris.instrument_func(func)
                    count += 1
    return count


def dir_of(target: str) -> str:
    return target.replace(":", "-")


def signature(exc: BaseException) -> str:
    """Exception type and the innermost frame inside compactkit (else the innermost frame)."""
    exc = exc.__cause__ or exc  # a sniff that raised: where it raised
    frames = traceback.extract_tb(exc.__traceback__)
    ours = [f for f in frames if "/compactkit/" in f.filename] or frames
    where = f"{Path(ours[-1].filename).name}:{ours[-1].lineno}" if ours else "?"
    return f"{type(exc).__name__} at {where}"


def keep(target: str, data: bytes, note: str) -> Path:
    folder = HERE / "regressions" / dir_of(target)
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / (hashlib.sha256(data).hexdigest()[:16] + ".bin")
    if not path.exists():
        path.write_bytes(data)
        print(f"kept {path.relative_to(ROOT)}: {note}", file=sys.stderr, flush=True)
    return path


def fuzz_one(target: str, runs: int | None, seconds: int | None, timeout: int) -> None:
    """Fuzz `target` in this process (never returns: libFuzzer exits)."""
    import atheris

    sys.path.insert(0, str(ROOT))
    from fuzz import targets

    instrument(target)
    from fuzz.mutate import mutate

    run = targets.TARGETS[target]
    seen: set[str] = set()
    stats = {"target": target, "inputs": 0, "crashes": 0, "distinct": [], "started": time.time()}
    stats_file = WORK / dir_of(target) / "stats.json"

    def flush() -> None:
        stats["seconds"] = round(time.time() - float(stats["started"]), 1)
        stats_file.write_text(json.dumps(stats))

    current = WORK / dir_of(target) / "current.bin"

    def one_input(data: bytes) -> None:
        stats["inputs"] = int(stats["inputs"]) + 1
        current.write_bytes(data)  # what a hang leaves behind for run_all to keep
        faulthandler.dump_traceback_later(timeout, exit=True)
        try:
            run(data)
        except Exception as exc:
            stats["crashes"] = int(stats["crashes"]) + 1
            sig = signature(exc)
            if sig not in seen:
                seen.add(sig)
                stats["distinct"].append(sig)  # type: ignore[union-attr]
                keep(target, data, f"{sig}: {str(exc)[:200]}")
                flush()
        finally:
            faulthandler.cancel_dump_traceback_later()
        if int(stats["inputs"]) % 1000 == 0:
            flush()

    def guarded_mutate(data: bytes, max_size: int, seed: int) -> bytes:
        faulthandler.dump_traceback_later(timeout, exit=True)
        try:
            return mutate(data, max_size, seed, atheris.Mutate)
        finally:
            faulthandler.cancel_dump_traceback_later()

    corpus = WORK / dir_of(target) / "corpus"
    corpus.mkdir(parents=True, exist_ok=True)
    artifacts = WORK / dir_of(target) / "artifacts"
    artifacts.mkdir(parents=True, exist_ok=True)
    args = [
        sys.argv[0],
        str(corpus),
        *(
            str(d)
            for d in (HERE / "seeds" / dir_of(target), HERE / "regressions" / dir_of(target))
            if d.is_dir()
        ),
        f"-timeout={timeout}",
        f"-max_len={MAX_LEN.get(target, 8192)}",
        f"-artifact_prefix={artifacts}/",
        "-rss_limit_mb=3072",
        "-print_final_stats=1",
    ]
    if runs is not None:
        args.append(f"-runs={runs}")
    if seconds is not None:
        args.append(f"-max_total_time={seconds}")
    atheris.Setup(
        args,
        one_input,
        custom_mutator=guarded_mutate,
    )
    flush()
    atheris.Fuzz()


def run_all(names: list[str], runs: int | None, seconds: int | None, timeout: int) -> int:
    """Each target in its own process, one after the other; a summary line per target."""
    failed = 0
    print(f"{'target':28} {'inputs':>9} {'seconds':>8} {'inputs/s':>9}  crashes  hangs")
    for name in names:
        folder = WORK / dir_of(name)
        folder.mkdir(parents=True, exist_ok=True)
        for old in [
            *(folder / "artifacts").glob("*"),
            folder / "current.bin",
            folder / "stats.json",
        ]:
            old.unlink(missing_ok=True)
        cmd = [sys.executable, __file__, name, f"--timeout={timeout}"]
        cmd += [f"--runs={runs}"] if runs is not None else []
        cmd += [f"--seconds={seconds}"] if seconds is not None else []
        started = time.time()
        proc = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT)
        elapsed = time.time() - started
        (folder / "libfuzzer.log").write_text(proc.stderr)
        done = re.search(r"Done (\d+) runs in (\d+) second", proc.stderr)
        stats = (
            json.loads((folder / "stats.json").read_text())
            if (folder / "stats.json").exists()
            else {}
        )
        inputs = int(done.group(1)) if done else int(stats.get("inputs", 0))
        hangs = []
        for artifact in sorted((folder / "artifacts").glob("*")):
            kind = artifact.name.split("-")[0]
            hangs.append(kind)
            keep(name, artifact.read_bytes(), f"{kind} (libFuzzer stopped the target)")
        crashes = list(stats.get("distinct", []))
        if not done and not hangs and (folder / "current.bin").exists():
            hangs.append(f"exit {proc.returncode}")
            keep(name, (folder / "current.bin").read_bytes(), f"exit {proc.returncode} (a hang?)")
            sys.stderr.write(proc.stderr[-3000:])
        rate = inputs / elapsed if elapsed else 0.0
        print(
            f"{name:28} {inputs:>9} {elapsed:>8.1f} {rate:>9.0f}  {len(crashes):>7}  {len(hangs):>5}",
            flush=True,
        )
        for sig in crashes:
            print(f"    crash: {sig}")
        for hang in hangs:
            print(f"    {hang}")
        failed += bool(crashes or hangs)
    return 1 if failed else 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("target", nargs="*", help="targets (default with --all: every one)")
    parser.add_argument("--all", action="store_true", help="every target, each in its own process")
    parser.add_argument("--list", action="store_true", help="print the target names")
    parser.add_argument("--runs", type=int, default=None, help="inputs per target")
    parser.add_argument("--seconds", type=int, default=None, help="time per target")
    parser.add_argument("--timeout", type=int, default=10, help="per-input time limit (s)")
    args, _ = parser.parse_known_args()
    if args.list or args.all:
        sys.path.insert(0, str(ROOT))
        from fuzz.targets import TARGETS

        if args.list:
            print("\n".join(TARGETS))
            return 0
        return run_all(args.target or list(TARGETS), args.runs, args.seconds, args.timeout)
    if len(args.target) != 1:
        parser.error("give one target, or --all")
    fuzz_one(args.target[0], args.runs, args.seconds, args.timeout)
    return 0


if __name__ == "__main__":
    os.environ.setdefault("PYTHONHASHSEED", "0")
    sys.exit(main())
