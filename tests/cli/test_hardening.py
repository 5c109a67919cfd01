"""The command line under hostile and careless use: outputs that would overwrite inputs, output sets
that must land together, OS errors, interrupts, closed pipes, usage errors and leaked credentials.
Every case runs on real sessions of the corpus, copied to a temporary folder."""

from __future__ import annotations

import hashlib
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from compactkit.cli import make_cli
from compactkit.registry import Registry, make_registry

from ..conftest import corpus_file


def _registry(plugins_dir: str | None = None) -> Registry:
    return make_registry(entry_points=False, plugins_dir=plugins_dir)


CLI = make_cli(_registry)


def run(*args: str, env: dict[str, str] | None = None) -> tuple[int, str, str]:
    result = CliRunner().invoke(CLI, list(args), env=env)
    return result.exit_code, result.stdout, result.stderr


def one_line(err: str) -> str:
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert "Traceback" not in err
    assert ".tmp" not in err, err  # never a temporary file's name
    return lines[0]


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def leftovers(folder: Path) -> list[str]:
    """Temporary files an output set left behind."""
    return sorted(p.name for p in folder.rglob("*.tmp"))


@pytest.fixture
def work(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A folder holding T.json (50 conversations) and B.json (one), the current directory."""
    shutil.copyfile(corpus_file("tau_bench_gpt-4o-airline"), tmp_path / "T.json")
    shutil.copyfile(corpus_file("runtime_trajs_basic"), tmp_path / "B.json")
    monkeypatch.chdir(tmp_path)
    return tmp_path


# --------------------------------------------------------------- never overwrite what was given


@pytest.mark.parametrize(
    "args",
    [
        ("convert", "T.json#2", "--to", "compactkit", "-o", "T.json"),
        ("convert", "T.json", "--to", "openai-chat", "-o", "./T.json"),
        ("run", "B.json", "-s", "sliding-window", "-o", "B.json"),
        ("run", "B.json", "-s", "sliding-window", "-o", "out.json", "--stash", "B.json"),
        ("run", "B.json", "-s", "sliding-window", "-o", "out.json", "--report-json", "B.json"),
        ("run", "L.json", "-s", "sliding-window", "-o", "B.json"),  # L.json links to B.json
        ("run", "H.json", "-s", "sliding-window", "-o", "B.json"),  # H.json: a hard link
        ("expand", "out.json", "--stash", "B.json", "-o", "B.json"),
        ("bench", "B.json", "-s", "sliding-window", "--json", "B.json"),
        ("bench", "T.json", "B.json", "-s", "sliding-window", "--markdown", "T.json"),
        ("bench", ".", "-s", "sliding-window", "--html", "sub/../T.json"),
    ],
)
def test_an_output_naming_an_input_is_refused_before_any_work(
    work: Path, args: tuple[str, ...]
) -> None:
    (work / "L.json").symlink_to(work / "B.json")
    os.link(work / "B.json", work / "H.json")
    (work / "sub").mkdir()
    (work / "out.json").write_text("{}")
    before = {p.name: digest(p) for p in work.iterdir() if p.is_file()}
    code, out, err = run(*args)
    assert code == 2, err
    line = one_line(err)
    assert "names an input file" in line
    assert out == ""
    assert {p.name: digest(p) for p in work.iterdir() if p.is_file()} == before
    assert "tokens:" not in err  # refused before the pipeline ran


@pytest.mark.parametrize(
    "args",
    [
        ("run", "B.json", "-s", "sliding-window", "-o", "x.json", "--stash", "./x.json"),
        ("run", "B.json", "-s", "sliding-window", "-o", "x.json", "--json", "sub/../x.json"),
        ("bench", "B.json", "-s", "sliding-window", "--json", "x.json", "--markdown", "x.json"),
    ],
)
def test_two_outputs_naming_one_file_are_refused(work: Path, args: tuple[str, ...]) -> None:
    (work / "sub").mkdir()
    code, _, err = run(*args)
    assert code == 2
    assert "both name" in one_line(err)
    assert not (work / "x.json").exists()


def test_check_refuses_a_report_over_its_own_configuration_or_baseline(work: Path) -> None:
    config = work / "compactkit.toml"
    config.write_text(
        '[[check]]\nname = "gate"\nsessions = ["B.json"]\npipeline = "sliding-window"\n'
    )
    before = digest(config)
    for option in ("--json", "--markdown", "--junit"):
        for target in ("compactkit.toml", "B.json"):
            code, _, err = run("check", "--config", str(config), option, target)
            assert code == 2, err
            assert "names an input file" in one_line(err)
    assert digest(config) == before


# --------------------------------------------------------------- output folders and OS errors


@pytest.mark.parametrize(
    ("target", "says"),
    [
        ("nodir/out.json", "no such directory 'nodir'"),
        ("folder", "is a directory"),
        ("B.json/out.json", "'B.json' is not a directory"),
    ],
)
def test_an_output_that_cannot_be_written_is_exit_2_before_anything_is_written(
    work: Path, target: str, says: str
) -> None:
    (work / "folder").mkdir()
    code, _, err = run(
        "run", "B.json", "-s", "sliding-window", "-o", "small.json", "--json", target
    )
    assert code == 2
    line = one_line(err)
    assert line.startswith(f"compactkit: error: {target}: ")
    assert says in line
    assert not (work / "small.json").exists()  # the set is written whole or not at all
    assert leftovers(work) == []


def as_a_user(command: list[str]) -> list[str]:
    """`command` without the power to write anywhere: root gets its DAC capabilities dropped."""
    if os.geteuid() != 0:
        return command
    setpriv = shutil.which("setpriv")
    if setpriv is None:
        pytest.skip("running as root without setpriv: a read-only folder is writable to root")
    caps = "-dac_override,-dac_read_search"
    return [setpriv, "--bounding-set", caps, "--inh-caps", caps, *command]


def test_a_read_only_output_folder_is_exit_2_naming_the_output(work: Path) -> None:
    locked = work / "locked"
    locked.mkdir()
    locked.chmod(0o555)
    target = "locked/out.json"
    proc = subprocess.run(
        as_a_user(
            [
                *(sys.executable, "-m", "compactkit", "run", "B.json", "-s", "sliding-window"),
                *("-o", "small.json", "--stash", target),
            ]
        ),
        capture_output=True,
        text=True,
        cwd=work,
        timeout=120,
    )
    locked.chmod(0o755)
    assert proc.returncode == 2, proc.stderr
    line = one_line(proc.stderr)
    assert line.startswith(f"compactkit: error: {target}: ")
    assert "read-only" in line
    assert list(locked.iterdir()) == []
    assert not (work / "small.json").exists()


# --------------------------------------------------------------- all outputs land together

WRITER_PLUGIN = '''
"""A writer format that breaks, or takes its time, while the output is rendered."""
import os
import time

from compactkit import Format, hookimpl


class Slow(Format):
    name = "slow-writer"
    description = "a writer for interrupt tests"
    can_write = True

    def sniff(self, doc):
        return False

    def load(self, doc):
        return []

    def dump(self, contexts):
        if os.environ.get("SLOW_WRITER") == "raise":
            raise RuntimeError("the writer broke")
        open(os.environ["SLOW_WRITER_MARK"], "w").close()
        time.sleep(120)
        return ""


@hookimpl
def register_formats(register):
    register(Slow())
'''


@pytest.fixture
def writer_plugin(tmp_path: Path) -> Path:
    folder = tmp_path / "plugins"
    folder.mkdir()
    (folder / "slow_writer.py").write_text(WRITER_PLUGIN)
    return folder


def test_a_failure_after_the_stash_is_staged_writes_no_file(
    work: Path, writer_plugin: Path
) -> None:
    code, _, err = run(
        *("--plugins-dir", str(writer_plugin), "run", "B.json", "-s", "sliding-window"),
        *("--to", "slow-writer", "-o", "out.txt", "--stash", "s.json", "--json", "r.json"),
        env={"SLOW_WRITER": "raise"},
    )
    assert code == 3, err
    assert "the writer broke" in one_line(err)
    assert not any((work / name).exists() for name in ("out.txt", "s.json", "r.json"))
    assert leftovers(work) == []


@pytest.mark.parametrize(
    ("sig", "code", "line"),
    [
        (signal.SIGTERM, 143, "compactkit: terminated"),
        (signal.SIGINT, 130, "compactkit: interrupted"),
    ],
)
def test_an_interrupt_removes_staged_files_and_exits_with_one_line(
    work: Path, writer_plugin: Path, sig: signal.Signals, code: int, line: str
) -> None:
    mark = work / "rendering"
    proc = subprocess.Popen(
        [
            *(sys.executable, "-m", "compactkit", "--plugins-dir", str(writer_plugin), "run"),
            *("B.json", "-s", "sliding-window", "--to", "slow-writer", "-o", "out.txt"),
            *("--stash", "s.json"),
        ],
        cwd=work,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "SLOW_WRITER_MARK": str(mark)},
    )
    try:
        deadline = time.monotonic() + 60
        while not mark.exists():
            assert proc.poll() is None, proc.communicate()
            assert time.monotonic() < deadline
            time.sleep(0.05)
        assert leftovers(work) != []  # the stash is staged while the output renders
        proc.send_signal(sig)
        _, err = proc.communicate(timeout=30)
    finally:
        proc.kill()
    assert proc.returncode == code, err
    assert one_line(err) == line
    assert leftovers(work) == []
    assert not (work / "s.json").exists()
    assert not (work / "out.txt").exists()


# --------------------------------------------------------------- exits: pipes, usage, addresses


@pytest.mark.parametrize("json_flag", [(), ("--json",)])
def test_a_closed_stdout_pipe_exits_quietly(work: Path, json_flag: tuple[str, ...]) -> None:
    proc = subprocess.Popen(
        [sys.executable, "-m", "compactkit", "inspect", "T.json", *json_flag],
        cwd=work,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert proc.stdout is not None and proc.stderr is not None
    assert proc.stdout.readline()
    proc.stdout.close()  # like `| head -1`
    err = proc.stderr.read().decode()
    assert proc.wait(timeout=120) == 0
    assert err == ""


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (("inspect", "--nope", "B.json"), "No such option '--nope'"),
        (("run", "B.json", "--budget", "many"), "'many' is not a valid integer"),
        (("convert", "B.json"), "Missing option '--to'"),
        (("frobnicate",), "No such command 'frobnicate'"),
    ],
)
def test_usage_errors_are_one_line_with_where_help_is(
    work: Path, args: tuple[str, ...], says: str
) -> None:
    code, _, err = run(*args)
    assert code == 2
    line = one_line(err)
    assert line.startswith("compactkit: error: ")
    assert says in line
    assert "--help" in line
    assert "Usage:" not in err


@pytest.mark.parametrize("address", ["T.json#abc", "T.json#", "T.json#1.5"])
def test_a_bad_conversation_number_says_what_hash_n_means(work: Path, address: str) -> None:
    code, _, err = run("inspect", address)
    assert code == 2
    suffix = address.partition("#")[2]
    assert one_line(err) == (
        "compactkit: error: T.json: FILE#N selects the N-th conversation (0-based) of FILE; "
        f"got '#{suffix}'"
    )


def test_plugins_exits_3_when_a_plugin_is_in_error(tmp_path: Path) -> None:
    folder = tmp_path / "plugins"
    folder.mkdir()
    (folder / "broken.py").write_text("raise RuntimeError('cannot start')\n")
    for flag in ((), ("--json",)):
        code, out, err = run("--plugins-dir", str(folder), "plugins", *flag)
        assert code == 3
        assert "broken" in out
        assert "plugin(s) with errors: broken" in one_line(err)


# --------------------------------------------------------------- credentials never printed

LEAKY = "http://user:secret@127.0.0.1:9/v1?api_key=secret2"


@pytest.mark.parametrize("fallback", ["error", "extractive"])
def test_base_url_credentials_appear_in_no_output(work: Path, fallback: str) -> None:
    spec = f"llm-summary:backend=openai,base_url={LEAKY},keep_last=2,max_tokens=100,"
    spec += f"fallback={fallback}"
    env = {"OPENAI_API_KEY": "sk-test-not-a-real-key-0000"}
    code, out, err = run(
        *("run", "B.json", "-s", spec, "-o", "small.json", "--json", "run.json", "--explain"),
        env=env,
    )
    # the extractive fallback cannot fit max_tokens=100: the output is written, exit 1
    assert code == (3 if fallback == "error" else 1), err
    seen = [out, err]
    if fallback == "error":
        assert "could not connect to http://***@127.0.0.1:9/v1?api_key=***" in one_line(err)
    else:
        seen += [(work / "small.json").read_text(), (work / "run.json").read_text()]
        assert "base_url=http://***@127.0.0.1:9/v1?api_key=***" in seen[-1]
    code, out, err = run(
        *("bench", "B.json", "-s", spec, "--json", "b.json", "--markdown", "b.md"),
        *("--html", "b.html"),
        env=env,
    )
    seen += [out, err, *((work / n).read_text() for n in ("b.json", "b.md", "b.html"))]
    assert "127.0.0.1:9" in seen[-1]
    for text in seen:
        assert "secret" not in text
        assert "user:" not in text
