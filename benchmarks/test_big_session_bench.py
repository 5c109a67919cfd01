"""Big sessions: peak memory of `compactkit inspect`, `run -s sliding-window --budget 30000` and
`expand` on a generated session of every format compactkit reads, as a ratio to the session's
size (target < 3x), and the size of what `run` writes. The table of every format's peaks and
ratios is printed at the end of the module.

The sessions are made at benchmark time, in a temporary directory, from real sessions of the
corpus (`benchmarks/big_sessions.py`): a session's records repeated, every copy with its own ids
and long strings (tagged with the copy's number, so that no copy repeats another's payloads),
chained onto the previous copy where the format chains records, and written in the format's own
layout. Three formats at full size: Claude Code JSON Lines (read a record at a time), the corpus's
largest session repeated to 300 MB (`COMPACTKIT_BIG_SESSION_MB`; a smaller value for quick
iterations); two whole-document JSON formats, read as one value, at about 100 MB: compactkit's
own context (that session converted by `compactkit convert`, about a third of its size: the
native form is denser) and a mini-swe-agent trajectory (the corpus's largest, its steps
repeated to a third of the size).

Every other format (and layout: OpenCode's database and its older `storage/` folder) at a
thirtieth of that size, 10 MiB: at 100 MB each, the fifteen of them would add over an hour to the
module on a 2-core machine (`inspect` and `run` take 0.7-1.5 s a MiB); at 10 MiB the whole module
takes about 12 min (11.7 min of CPU; 30 min on a machine loaded with 9 runnable processes; the
three formats alone took 4-5 min). At that size the fixed cost (the interpreter, compactkit and,
but for `expand`, the tokenizer's vocabulary: about 120 MiB, 45 for `expand`, measured per
command on the small real session) is most of the peak, so what is judged is what a session adds
over it, as for the three at a smaller `COMPACTKIT_BIG_SESSION_MB`: `TARGET_RATIO` where a format
meets it, else its measured bound (`BOUNDS`).

- Real sessions of the format, repeated: Codex rollout (its turns; the session's instructions
  once), pi session (its entries; a compaction's kept index moved with its copy), Gemini CLI chat
  (its messages), tau-bench chat messages (the largest trajectory's), SWE-agent `.traj` (its
  `history` and `trajectory` steps), OpenHands event list (the longest eval run's events, ids
  and `cause` renumbered per copy).
- The Session log: a Claude Code session three times the size converted by `compactkit convert`
  (compactkit chains its records itself).
- Formats the corpus has no session of: the messages of the corpus's largest Claude Code session
  as compactkit loads them, written as each format's writer writes them: an Anthropic Messages
  request, Goose `sessions.db`, OpenCode `opencode.db` and `storage/`, aider's Markdown history,
  a Cline task's `api_conversation_history.json`, a Copilot CLI `session-state/<id>/` folder, a
  Cursor agent transcript, a Crush `crush.db`, a cursor-agent `store.db`.

Each command runs in its own process; its peak RSS is the `ru_maxrss` that `wait4` reports for
it (to a small launcher: see `_LAUNCHER`).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from benchmarks.big_sessions import (
    make_aider,
    make_anthropic,
    make_cline,
    make_codex,
    make_copilot,
    make_crush,
    make_cursor,
    make_cursor_agent,
    make_gemini,
    make_goose,
    make_openai_chat,
    make_opencode_db,
    make_opencode_storage,
    make_openhands,
    make_pi,
    make_session,
    make_swe_agent,
    make_trajectory,
    messages_of,
)
from tests.conftest import corpus_files

SIZE_MB = int(os.environ.get("COMPACTKIT_BIG_SESSION_MB", "300"))
TARGET_RATIO = 3.0
SOURCE_NAME = "codemie_session-3fe1b6bc.jsonl"  # the largest Claude Code session of the corpus
TRAJ_NAME = "gemini3pro_psf__requests-1142.traj.json"  # the largest mini-swe-agent trajectory
CODEX_NAME = "codemie_rollout-2026-05-11T11-26-55-019e1625-789d-76c0-80ab-3724b5ddb799.jsonl"
PI_NAME = "pi-mono_before-compaction.jsonl"
GEMINI_NAME = "codemie_gemini_session-2025-12-01T21-45-5b959dae.json"
CHAT_NAME = "tau_bench_gpt-4o-airline_historical_trajectories.json"
SWE_NAME = "testdata_gpt4_pydicom-1458.traj"  # the largest SWE-agent run (not a demonstration)
OPENHANDS_NAME = "multi_swe_bench_example_output.jsonl"  # the longest event histories
OTHER_MB = max(1, SIZE_MB // 30)
BOUNDS: dict[tuple[str, str], float] = {
    # Every (format, command) is held to the target now. What brought the last ones under it
    # (main 3644fb4, measured by hand; the ratio for the whole-document formats at about 100 MiB,
    # the part over the fixed cost at 10 MiB): run counting with the strategies' own counter
    # (it counted a session twice, every block then keeping two counts in a dict), a message's
    # nested metadata held as its JSON text, its tool calls and results no longer kept on it.
    # compactkit JSON run 3.05x -> 2.85x (inspect 2.81x); mini-swe-agent inspect 3.09x -> 2.84x,
    # run 3.20x -> 2.81x; OpenAI chat inspect 3.01x -> 2.67x (run 2.42x). Before: pi's session
    # 3.20x / 3.79x, OpenHands' events run 3.05x and the Session log 7.96x / 7.87x (2.09x /
    # 2.07x, 1.96x / 1.81x and 1.94x / 1.92x on a clean clone's make bench, main d0c0a4e); the
    # whole-document formats 4.01x / 4.07x (compactkit) and 4.03x / 3.81x (mini-swe-agent)
    # before their loaders let go of each record and the lean text form; a 90 MB compactkit file
    # took 8.1x earlier still.
}
"""The measured bound of each (format, command) not yet under `TARGET_RATIO` (every other is
held to it), a fifth to a quarter over the figure measured on main: a bound that catches a
return to worse. Whole documents are dense (about their text's size) and their strings holding
wide characters take two or four bytes a character; `run` holds besides the recovery store's
text of all it removed."""


_LAUNCHER = """
import os, subprocess, sys
child = subprocess.Popen(sys.argv[2:])
_, status, usage = os.wait4(child.pid, 0)  # the rusage of this child alone
with open(sys.argv[1], "w") as out:
    out.write(str(usage.ru_maxrss))
sys.exit(os.waitstatus_to_exitcode(status))
"""
"""Starts a command and writes its peak RSS (KiB) to a file. A child's `ru_maxrss` starts at the
RSS of the process that started it (Linux keeps the high-water mark across fork and exec), so the
command is started by this small process, never by the test process, whose size would count."""


def peak_rss(args: list[str], cwd: Path) -> tuple[int, subprocess.CompletedProcess[str]]:
    """(peak RSS in bytes, the finished process) of `compactkit ARGS` run in its own process."""
    cwd = cwd.resolve()
    out, err, rss = cwd / "stdout.txt", cwd / "stderr.txt", cwd / "rss.txt"
    with out.open("w") as stdout, err.open("w") as stderr:
        command = [sys.executable, "-m", "compactkit", *args]
        code = subprocess.call(
            [sys.executable, "-c", _LAUNCHER, str(rss), *command],
            cwd=cwd,
            stdout=stdout,
            stderr=stderr,
        )
    done = subprocess.CompletedProcess(
        args, code, out.read_text(encoding="utf-8"), err.read_text(encoding="utf-8")
    )
    return int(rss.read_text()) * 1024, done


@pytest.fixture(scope="module")
def source() -> Path:
    return _corpus(SOURCE_NAME)


def _corpus(name: str) -> Path:
    sources = [p for p in corpus_files() if p.name == name]
    if not sources:
        pytest.skip(f"{name} is only in the full corpus, which is not present here")
    return sources[0]


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    made = tmp_path_factory.mktemp("big")
    yield made
    shutil.rmtree(made)  # nothing this large is left behind in the temporary folder


@pytest.fixture(scope="module")
def big_session(source: Path, folder: Path) -> Path:
    path = folder / "big-session.jsonl"
    make_session(source, path, SIZE_MB * 2**20)
    return path


def _convert(session: Path, fmt: str, target: Path) -> Path:
    _, done = peak_rss(
        ["convert", str(session.resolve()), "--to", fmt, "-o", target.name], target.parent
    )
    assert done.returncode == 0, done.stderr
    return target


def _log(folder: Path, size: int) -> Path:
    """A Session log: a Claude Code session three times the size converted (its records are
    chained by compactkit, so they cannot be copied)."""
    claude = folder / "claude.jsonl"
    make_session(_corpus(SOURCE_NAME), claude, size * 3)
    log = _convert(claude, "compactkit-session", folder / "big.session.jsonl")
    claude.unlink()
    return log


def _messages(make: Callable[[list[dict[str, Any]], Path, int], Path]) -> Maker:
    return lambda folder, size: make(messages_of(_corpus(SOURCE_NAME)), folder, size)


def _real(make: Callable[[Path, Path, int], Path], name: str) -> Maker:
    return lambda folder, size: make(_corpus(name), folder, size)


Maker = Callable[[Path, int], Path]
OTHERS: dict[str, tuple[str, Maker]] = {
    "codex-rollout": ("codex-rollout", _real(make_codex, CODEX_NAME)),
    "pi-session": ("pi-session", _real(make_pi, PI_NAME)),
    "gemini-cli": ("gemini-cli", _real(make_gemini, GEMINI_NAME)),
    "openai-chat": ("openai-chat", _real(make_openai_chat, CHAT_NAME)),
    "swe-agent": ("swe-agent", _real(make_swe_agent, SWE_NAME)),
    "openhands-events": ("openhands-events", _real(make_openhands, OPENHANDS_NAME)),
    "compactkit-session": ("compactkit-session", _log),
    "anthropic-messages": ("anthropic-messages", _messages(make_anthropic)),
    "goose": ("goose", _messages(make_goose)),
    "opencode": ("opencode", _messages(make_opencode_db)),
    "opencode-storage": ("opencode", _messages(make_opencode_storage)),
    "aider": ("aider", _messages(make_aider)),
    "cline": ("cline", _messages(make_cline)),
    "copilot-cli": ("copilot-cli", _messages(make_copilot)),
    "cursor": ("cursor", _messages(make_cursor)),
    # SQLite session stores
    "crush": ("crush", _messages(make_crush)),
    "cursor-agent": ("cursor-agent", _messages(make_cursor_agent)),
}
"""Every other format (and layout), by row name: (the format `inspect` names, its maker)."""
MARKERS = {"collapsed", "elided", "masked", "summary", "omitted"}
"""The block types that stand for something removed."""
MAIN = ["claude-code", "compactkit", "mini-swe-agent"]
FORMATS = [*MAIN, *OTHERS]


@pytest.fixture(scope="module")
def sessions(big_session: Path, folder: Path) -> dict[str, Path]:
    """The big session of each format, by row name (made once, beside the Claude Code one)."""
    native = _convert(big_session, "compactkit", folder / "big-native.json")
    trajectory = folder / "big.traj.json"
    make_trajectory(_corpus(TRAJ_NAME), trajectory, SIZE_MB * 2**20 // 3)
    made = {"claude-code": big_session, "compactkit": native, "mini-swe-agent": trajectory}
    for name, (_, make) in OTHERS.items():
        (folder / name).mkdir()
        made[name] = make(folder / name, OTHER_MB * 2**20)
    return made


def size_of(path: Path) -> int:
    """The bytes of a session: its file, or every file of its folder."""
    if path.is_file():
        return path.stat().st_size
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


@pytest.fixture(scope="module")
def fixed_cost(source: Path, folder: Path) -> dict[str, int]:
    """Peak RSS of each command on the small real session, by command: the interpreter,
    compactkit and (but for `expand`) the tokenizer's vocabulary, which a session of any size
    pays once."""
    out = folder / "small-out.json"
    commands = {
        "inspect": ["inspect", "--json", str(source)],
        "run": ["run", str(source), "-s", "sliding-window", "--budget", "30000", "-o", out.name],
        "expand": ["expand", out.name, "-o", "small-back.json"],
    }
    fixed: dict[str, int] = {}
    for command, args in commands.items():
        fixed[command], done = peak_rss(args, folder)
        assert done.returncode in (0, 1), done.stderr
    return fixed


RESULTS: dict[str, dict[str, str]] = {}
"""The measured peaks, by row name, then command: the table printed at the end."""


@pytest.fixture(scope="module", autouse=True)
def table() -> Iterator[None]:
    yield
    if RESULTS:
        rows = [
            f"| {name} | {r.get('file', '')} | {r.get('inspect', '')} | {r.get('run', '')} "
            f"| {r.get('expand', '')} |"
            for name in FORMATS
            if (r := RESULTS.get(name))
        ]
        head = "| format | file MiB | inspect MiB (ratio) | run MiB (ratio) | expand MiB (ratio) |"
        print("\n\n" + "\n".join([head, "| --- | --- | --- | --- | --- |", *rows]))


def _check(fmt: str, command: str, rss: int, size: int, fixed_cost: dict[str, int]) -> None:
    """A session of the main three formats at the full size must keep its whole peak under its
    bound (`TARGET_RATIO`, or the measured bound of `BOUNDS`) times the file's size; a smaller
    session cannot, the fixed cost alone being near that, so there what it adds over the fixed
    cost must."""
    target = BOUNDS.get((fmt, command), TARGET_RATIO)
    fixed = fixed_cost[command]
    ratio, added = rss / size, (rss - fixed) / size
    full = fmt in MAIN and SIZE_MB >= 300
    judged = ratio if full else added
    print(
        f"\n{fmt}: {command}: file {size / 2**20:,.1f} MiB, peak RSS {rss / 2**20:,.0f} MiB "
        f"(fixed cost {fixed / 2**20:,.0f} MiB): ratio {ratio:.2f}x, {added:.2f}x over the fixed "
        f"cost (target < {target}x on the {'ratio' if full else 'part over the fixed cost'})"
    )
    row = RESULTS.setdefault(fmt, {"file": f"{size / 2**20:,.1f}"})
    row[command] = f"{rss / 2**20:,.0f} ({ratio:.2f}x; +{added:.2f}x)"
    assert judged < target


def _least(fmt: str, size: int) -> int:
    """Fewer messages than this means the session was not read whole: about 40 a MiB (aider's
    history, with no tool calls, has the fewest)."""
    return max(10, min(1000, size // 2**20 * 40))


@pytest.mark.parametrize("fmt", FORMATS)
def test_inspect_peak_rss(fmt: str, sessions: dict[str, Path], fixed_cost: dict[str, int]) -> None:
    path = sessions[fmt]
    size = size_of(path)
    rss, done = peak_rss(["inspect", "--json", str(path)], path.parent)
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout.splitlines()[0])
    assert report["messages"] > _least(fmt, size)
    assert report["format"] == OTHERS.get(fmt, (fmt,))[0]
    _check(fmt, "inspect", rss, size, fixed_cost)


@pytest.mark.parametrize("fmt", FORMATS)
def test_run_and_expand_peak_rss(
    fmt: str, sessions: dict[str, Path], fixed_cost: dict[str, int]
) -> None:
    path = sessions[fmt]
    size = size_of(path)
    folder = path.parent
    output, back = folder / f"out-{fmt}.json", folder / f"back-{fmt}.json"
    args = ["run", str(path), "-s", "sliding-window", "--budget", "30000", "-o", output.name]
    rss, done = peak_rss(args, folder)
    # 1: the user's words of a session this long do not all fit 30,000 tokens; they are pinned,
    # so the output is written over the budget and says so
    assert done.returncode in (0, 1), done.stderr
    store = Path(f"{output}.recovery.jsonl")
    print(
        f"\n{fmt}: run output {output.stat().st_size / 2**10:,.0f} KiB, "
        f"store beside it {size_of(store) / 2**20 if store.exists() else 0:,.0f} MiB"
    )
    # the small context asked for (30,000 tokens and the pinned words), not the session
    assert output.stat().st_size < max(size / 10, 2**19)
    _check(fmt, "run", rss, size, fixed_cost)
    rss, done = peak_rss(["expand", output.name, "-o", back.name], folder)
    assert done.returncode == 0, done.stderr
    restored = json.loads(back.read_text(encoding="utf-8"))
    assert len(restored["messages"]) > _least(fmt, size)
    blocks = [b for m in restored["messages"] for b in m["content"]]
    kinds = {b["type"] for b in blocks} | {p["type"] for b in blocks for p in b.get("content", ())}
    assert not kinds & MARKERS  # every removal restored
    _check(fmt, "expand", rss, size, fixed_cost)
    for made in (output, store, back):
        made.unlink(missing_ok=True)  # no store when nothing was removed (a small session)
