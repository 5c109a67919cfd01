"""JSON past the documented limits (nesting deeper than `MAX_DEPTH`, numbers longer than Python
reads) is bad input, exit 2 with one line, in every reader: session files (JSON and JSONL),
stash files and `-s` option values; and a format whose `load` fails hands the file to the next
format that recognises it."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

from click.testing import CliRunner

from compactkit.cli import make_cli
from compactkit.context import AgentContext
from compactkit.formats.base import MAX_DEPTH, Document, Format
from compactkit.hookspecs import hookimpl
from compactkit.registry import make_registry
from tests.conftest import sample

CLI = make_cli(lambda: make_registry(entry_points=False))


def run(*args: str, cli: Any = CLI) -> tuple[int, str, str]:
    result = CliRunner().invoke(cli, list(args))
    return result.exit_code, result.stdout, result.stderr


def nested(depth: int) -> str:
    return "[" * depth + "]" * depth


def one_error_line(err: str) -> str:
    assert err.startswith("compactkit: error: ") and err.count("\n") == 1, err
    return err


def test_a_session_nested_past_the_limit_is_exit_2_naming_the_file(tmp_path: Path) -> None:
    real = json.loads(sample("tau_bench").read_text(encoding="utf-8"))
    deep = tmp_path / "deep.json"  # a real file with one tool argument nested too deep
    real[0]["info"]["deep"] = json.loads(nested(MAX_DEPTH))
    deep.write_text(json.dumps(real))
    code, _, err = run("inspect", str(deep))
    assert code == 2
    assert f"{deep}: JSON nested deeper than {MAX_DEPTH} levels" in one_error_line(err)
    far = tmp_path / "far.json"  # deeper than Python's parser goes (a RecursionError before)
    far.write_text(nested(100_000))
    code, _, err = run("inspect", str(far))
    assert code == 2 and "nested deeper than" in one_error_line(err)


def test_nesting_at_the_limit_still_reads(tmp_path: Path) -> None:
    real = json.loads(sample("tau_bench").read_text(encoding="utf-8"))
    real[0]["info"]["deep"] = json.loads(nested(MAX_DEPTH - 3))  # under 3 levels of the file
    ok = tmp_path / "ok.json"
    ok.write_text(json.dumps(real))
    code, _, err = run("inspect", str(ok))
    assert code == 0, err


def test_a_lone_surrogate_escape_reads_as_a_replacement_character(tmp_path: Path) -> None:
    real = json.loads(sample("tau_bench").read_text(encoding="utf-8"))
    real[0]["traj"][1]["content"] = "cut in half: \ud83d"  # json.dumps writes the escape
    cut = tmp_path / "cut.json"
    cut.write_text(json.dumps(real))
    code, out, err = run("inspect", str(cut))
    assert code == 0, err  # was exit 3: the table could not be written as UTF-8
    code, out, err = run("convert", f"{cut}#0", "--to", "openai-chat")
    assert code == 0, err
    assert "cut in half: \ufffd" in json.loads(out)[1]["content"]


def test_a_jsonl_record_past_the_limits_is_exit_2_with_its_line(tmp_path: Path) -> None:
    lines = sample("claude-code-viewer").read_text(encoding="utf-8").splitlines()
    deep = tmp_path / "deep.jsonl"
    deep.write_text("\n".join([*lines[:3], '{"a": ' + nested(5000) + "}", *lines[3:]]) + "\n")
    code, _, err = run("inspect", str(deep))
    assert code == 2 and f"{deep}:4: JSON nested deeper than" in one_error_line(err)
    huge = tmp_path / "huge.jsonl"
    huge.write_text("\n".join([*lines[:2], '{"n": ' + "9" * 5000 + "}", *lines[2:]]) + "\n")
    code, _, err = run("inspect", str(huge))
    assert code == 2 and f"{huge}:3: a number has too many digits" in one_error_line(err)


def test_a_deep_file_in_a_bench_is_reported_like_any_unreadable_file(tmp_path: Path) -> None:
    good = tmp_path / "good.json"
    shutil.copy(sample("tau_bench"), good)
    broken = tmp_path / "broken.json"
    broken.write_text("this is not json\nat all\n")
    deep = tmp_path / "deep.json"
    deep.write_text(nested(100_000))
    base_code, base_out, base_err = run(
        "bench", str(good), str(broken), "-s", "sliding-window:max_tokens=4000"
    )
    code, out, err = run("bench", str(good), str(deep), "-s", "sliding-window:max_tokens=4000")
    # the same treatment as a file that is not JSON: same exit code, listed in the same stream
    assert code == base_code and "unexpected error" not in err
    assert (str(broken) in base_out, str(broken) in base_err) == (
        str(deep) in out,
        str(deep) in err,
    )
    assert "nested deeper than" in out + err and "prompt tokens" in out  # the good one ran
    assert (out + err).count(str(deep)) == 1  # named once, not once by bench and again by the error


def test_a_stash_nested_past_the_limit_is_exit_2(tmp_path: Path) -> None:
    small, stash = tmp_path / "small.json", tmp_path / "small.stash"
    code, _, err = run(
        "run", str(sample("sphinx")), "--budget", "30000", "-o", str(small), "--stash", str(stash)
    )
    assert code == 0, err
    stash.write_text('{"format": "compactkit.stash/1", "entries": ' + nested(5000)[:-1] + "}")
    code, _, err = run("expand", str(small), "--stash", str(stash), "-o", str(tmp_path / "x"))
    assert code == 2 and f"{stash}: JSON nested deeper than" in one_error_line(err)
    assert not (tmp_path / "x").exists()


def test_an_option_value_past_the_limits_is_exit_2(tmp_path: Path) -> None:
    for value, message in ((nested(5000), "nested deeper than"), ("9" * 5000, "too many digits")):
        code, _, err = run(
            "run",
            str(sample("sphinx")),
            "-s",
            f"sliding-window:keep={value}",
            "-o",
            str(tmp_path / "o"),
        )
        assert code == 2 and "bad option value: " in one_error_line(err) and message in err


# ----------------------------------------------------------------------------- fallback


class GreedyFormat(Format):
    """Recognises every file before any built-in does, then fails to load it."""

    name = "greedy"
    description = "claims everything, loads nothing"
    priority = 1000

    def sniff(self, doc: Document) -> bool:
        return True

    def load(self, doc: Document) -> list[AgentContext]:
        raise KeyError("boom")


class GreedyPlugin:
    @hookimpl
    def register_formats(self, register: Any) -> None:
        register(GreedyFormat())


GREEDY_CLI = make_cli(lambda: make_registry(entry_points=False, plugins=[GreedyPlugin()]))


def test_a_format_whose_load_raises_falls_back_to_the_next_one_that_sniffs(tmp_path: Path) -> None:
    code, out, err = run("inspect", "--json", str(sample("tau_bench")), cli=GREEDY_CLI)
    assert code == 0, err
    assert json.loads(out.splitlines()[0])["format"] == "openai-chat"


def test_when_every_format_fails_the_error_names_each_one_tried(tmp_path: Path) -> None:
    broken = tmp_path / "broken.json"  # the compactkit format recognises it, then refuses it
    broken.write_text('{"format": "compactkit.context/1", "messages": 5}')
    code, _, err = run("inspect", str(broken), cli=GREEDY_CLI)
    assert code == 2
    assert "greedy: cannot load as greedy: KeyError: 'boom'; compactkit: invalid" in one_error_line(
        err
    )
    code, _, err = run("inspect", "--format", "greedy", str(sample("tau_bench")), cli=GREEDY_CLI)
    assert code == 2 and "cannot load as greedy: KeyError" in one_error_line(err)  # no fallback
