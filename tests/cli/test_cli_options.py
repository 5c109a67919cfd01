"""What every command shares: `-` for stdin and stdout, one `-s`, one `--json`, `--debug` after the
command, help with an example and exit codes, shell completion, `--plugins-dir`."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from click.shell_completion import ShellComplete
from click.testing import CliRunner

import compactkit
from compactkit.cli import COMMANDS, make_cli
from compactkit.registry import make_registry

from ..conftest import ROOT, sample

CLI = make_cli(lambda **kw: make_registry(entry_points=False, env={}, **kw))
SESSION = sample("test-repo-i1")
FIXTURE_PLUGINS = ROOT / "tests" / "fixture_plugins"


def run(*args: str, input: bytes | str | None = None) -> tuple[int, str, str]:
    result = CliRunner().invoke(CLI, list(args), input=input)
    return result.exit_code, result.stdout, result.stderr


# ----------------------------------------------------------------------------- - for stdin/stdout


def test_a_session_is_read_from_stdin_with_dash() -> None:
    code, out, err = run("inspect", "--json", "-", input=SESSION.read_bytes())
    assert code == 0, err
    report = json.loads(out)
    assert report["file"] == "<stdin>"
    assert report["tokens"] == compactkit.count_tokens(compactkit.load_one(SESSION))
    code, out, err = run("convert", "-", "--to", "compactkit", input=SESSION.read_bytes())
    assert code == 0, err
    assert compactkit.AgentContext.from_native(json.loads(out)) == compactkit.load_one(SESSION)


def test_bad_stdin_is_one_line_with_exit_2() -> None:
    code, out, err = run("inspect", "-", input=b"not json\nat all\n")
    assert code == 2
    assert out == ""
    assert err.strip().splitlines() == [err.strip()]
    assert "<stdin>" in err and "not JSON" in err


def test_dash_writes_stdout_and_two_results_on_stdout_are_refused(tmp_path: Path) -> None:
    out = tmp_path / "o.json"
    code, stdout, err = run(
        "run", str(SESSION), "-s", "sliding-window:max_tokens=10800", "-o", str(out), "--json", "-"
    )
    assert code == 0, err
    report = json.loads(stdout)
    assert report["schema"] == "compactkit.run/1"
    assert report["tokens_after"] == compactkit.count_tokens(compactkit.load_one(out))
    assert "tokens:" in err  # the human summary moved to stderr
    code, _, err = run("run", str(SESSION), "--json", "-")
    assert code == 2
    assert "--output and --json would both go to stdout" in err
    code, stdout, err = run("run", str(SESSION), "-s", "none", "-o", "-")
    assert code == 0, err
    assert compactkit.AgentContext.from_native(json.loads(stdout)) == compactkit.load_one(SESSION)


def test_stdin_is_read_once() -> None:
    code, _, err = run("validate", "-", "--against", "-", input=SESSION.read_bytes())
    assert code == 2
    assert "stdin ('-') can be read only once" in err


# ----------------------------------------------------------------------------- -s and --json


def test_s_is_one_pipeline_spec_in_run_and_bench(tmp_path: Path) -> None:
    joined, repeated = tmp_path / "joined.json", tmp_path / "repeated.json"
    spec = ["observation-mask:keep_last=1", "sliding-window:max_tokens=10800"]
    assert run("run", str(SESSION), "-s", "+".join(spec), "-o", str(joined))[0] == 0
    assert run("run", str(SESSION), "-s", spec[0], "-s", spec[1], "-o", str(repeated))[0] == 0
    assert compactkit.load_one(joined) == compactkit.load_one(repeated)
    assert joined.read_text() == repeated.read_text()
    report = tmp_path / "bench.json"
    code, _, err = run("bench", str(SESSION), "-s", "+".join(spec), "--json", str(report))
    assert code == 0, err
    names = [p["name"] for p in json.loads(report.read_text())["pipelines"]]
    assert names == ["none", " + ".join(spec)]


def test_bench_json_to_stdout_moves_the_table_to_stderr() -> None:
    code, out, err = run(
        "bench", str(SESSION), "-s", "sliding-window:max_tokens=4000", "--json", "-"
    )
    assert code == 0, err
    assert json.loads(out)["schema"] == "compactkit.bench/1"
    assert "compactkit bench" in err


def test_every_json_output_names_its_schema(tmp_path: Path) -> None:
    for args, schema in [
        (["formats", "--json"], "compactkit.formats/1"),
        (["plugins", "--json"], "compactkit.plugins/1"),
        (["strategies", "--json"], "compactkit.strategies/1"),
        (["inspect", "--json", str(SESSION)], "compactkit.inspect/1"),
        (["diff", "--json", str(SESSION), str(SESSION)], "compactkit.diff/1"),
        (["validate", "--json", str(SESSION)], "compactkit.validate/1"),
    ]:
        code, out, err = run(*args)
        assert code == 0, (args, err)
        assert json.loads(out)["schema"] == schema, args


def test_validate_json_names_context_message_and_rule(tmp_path: Path) -> None:
    ctx = compactkit.load_one(SESSION)
    broken = tmp_path / "broken.json"
    compactkit.dump(ctx.with_messages(ctx.messages[:2] + ctx.messages[3:]), broken)
    code, out, _ = run("validate", "--json", str(broken), str(SESSION))
    assert code == 3
    data = json.loads(out)
    assert data["ok"] is False and data["violations"] >= 1
    first, second = data["contexts"]
    assert first["context"] == str(broken) and not first["ok"]
    assert {"rule", "message", "detail"} <= set(first["violations"][0])
    assert any(
        v["rule"] in {"unanswered-tool-call", "tool-result-without-call"}
        for v in first["violations"]
    )
    assert second == {"context": str(SESSION), "ok": True, "violations": []}


# ----------------------------------------------------------------------------- debug, help


def test_debug_is_accepted_after_the_command(tmp_path: Path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text('{"hello": "world"}')
    code, _, err = run("inspect", str(bad), "--debug")
    assert code == 2
    assert "Traceback" in err
    code, _, err = run("inspect", str(bad))
    assert "Traceback" not in err


@pytest.mark.parametrize("command", COMMANDS, ids=lambda c: str(c.name))
def test_help_has_an_example_and_the_exit_codes(command: object) -> None:
    name = command.name  # type: ignore[attr-defined]
    code, out, _ = run(name, "--help")
    assert code == 0
    assert "Example:" in out and f"compactkit {name}" in out.split("Example:")[1]
    assert "Exit codes: 0" in out
    assert "--debug" in out


def test_the_group_help_lists_exit_codes_and_global_options() -> None:
    code, out, _ = run("--help")
    assert code == 0
    assert "Exit codes: 0 ok; 1 budget" in out
    assert "--plugins-dir DIR" in out


# ----------------------------------------------------------------------------- completion


def _complete(args: list[str], incomplete: str) -> list[str]:
    completer = ShellComplete(CLI, {}, "compactkit", "_COMPACTKIT_COMPLETE")
    return [item.value for item in completer.get_completions(args, incomplete)]


def test_strategy_format_and_tokenizer_names_complete() -> None:
    assert _complete(["run", str(SESSION), "-s"], "sli") == ["sliding-window"]
    assert _complete(["bench", str(SESSION), "-s"], "observation-mask+sl") == [
        "observation-mask+sliding-window"
    ]
    assert "default" in _complete(["bench", "x", "--pipeline"], "")
    assert _complete(["convert", "x", "--to"], "openai") == ["openai-chat"]
    writable = _complete(["run", "x", "--to"], "")
    assert "compactkit" in writable and "claude-code" in writable
    assert "gemini-cli" not in writable  # only writers
    assert "claude-code" in _complete(["inspect", "x", "--format"], "cl")
    assert _complete(["inspect", "x", "--tokenizer"], "cl100") == ["cl100k_base"]


def test_bash_completion_script_is_what_the_docs_say() -> None:
    exe = shutil.which("compactkit", path=str(Path(sys.executable).parent))
    assert exe is not None
    script = subprocess.run(
        [exe], env={"_COMPACTKIT_COMPLETE": "bash_source"}, capture_output=True, text=True
    )
    assert script.returncode == 0
    assert "_compactkit_completion" in script.stdout
    assert "_COMPACTKIT_COMPLETE=bash_source compactkit" in (ROOT / "docs" / "cli.md").read_text()


# ----------------------------------------------------------------------------- plugins


def test_plugins_dir_loads_unpackaged_modules_each_in_its_own_error_handling(
    tmp_path: Path,
) -> None:
    shutil.copy(FIXTURE_PLUGINS / "words_tokenizer.py", tmp_path / "words.py")
    shutil.copy(FIXTURE_PLUGINS / "broken_import.py", tmp_path / "broken.py")
    (tmp_path / "_helper.py").write_text("raise SystemExit('never imported')\n")
    code, out, err = run("--plugins-dir", str(tmp_path), "plugins")
    assert code == 3
    assert "words [plugins-dir] ok" in out and "tokenizer: words" in out
    assert "broken [plugins-dir] ERROR" in out and "not_a_real_dependency_of_anything" in out
    assert "_helper" not in out
    assert "plugin(s) with errors: broken" in err
    code, out, err = run(
        "--plugins-dir", str(tmp_path), "inspect", "--json", "--tokenizer", "words", str(SESSION)
    )
    assert code == 0, err  # the broken one stops nothing
    code, _, err = run("--plugins-dir", str(tmp_path / "nope"), "plugins")
    assert code == 2 and "does not exist" in err


def test_plugins_dir_from_the_environment(tmp_path: Path) -> None:
    shutil.copy(FIXTURE_PLUGINS / "words_tokenizer.py", tmp_path / "words.py")
    reg = make_registry(entry_points=False, env={"COMPACTKIT_PLUGINS_DIR": str(tmp_path)})
    assert "words" in reg.tokenizers and reg.errors == []
    missing = make_registry(entry_points=False, env={"COMPACTKIT_PLUGINS_DIR": str(tmp_path / "x")})
    assert [e for _, e in missing.errors] == [
        f"plugins folder {str(tmp_path / 'x')!r} does not exist"
    ]


def test_plugins_exits_0_when_every_plugin_loaded() -> None:
    code, out, _ = run("plugins")
    assert code == 0
    assert "compactkit.builtins.strategies [builtin] ok" in out


def test_each_make_cli_has_its_own_registry_and_state() -> None:
    from compactkit import hookimpl

    class Only:
        @hookimpl
        def register_tokenizers(self, register):  # type: ignore[no-untyped-def]
            class Chars:
                name = "chars"
                description = "one token per character"

                def count(self, text):  # type: ignore[no-untyped-def]
                    return len(text)

                def count_many(self, texts):  # type: ignore[no-untyped-def]
                    return [len(t) for t in texts]

            register(Chars())

    with_plugin = make_cli(lambda: make_registry(entry_points=False, plugins=[Only()]))
    plain = make_cli(lambda: make_registry(entry_points=False))
    names = lambda cli: CliRunner().invoke(cli, ["plugins", "--json"]).stdout  # noqa: E731
    assert "chars" in names(with_plugin) and "chars" not in names(plain)
    fixed = CliRunner().invoke(plain, ["--plugins-dir", str(FIXTURE_PLUGINS), "plugins"])
    assert fixed.exit_code == 2 and "fixed registry" in fixed.stderr


def test_python_m_compactkit_and_the_entry_point_run() -> None:
    for argv in ([sys.executable, "-m", "compactkit", "--version"],):
        done = subprocess.run(argv, capture_output=True, text=True, check=False)
        assert done.returncode == 0 and compactkit.__version__ in done.stdout
    assert compactkit.make_cli is make_cli


# ----------------------------------------------------------------------------- a third party's strategy


CAP_OUTPUT = ROOT / "plugins" / "compactkit-cap-output" / "compactkit_cap_output" / "__init__.py"


def test_explain_and_the_report_count_only_what_a_plugin_strategy_changed(tmp_path: Path) -> None:
    """Issue 11, bug 1 as the CLI shows it: a strategy from outside compactkit used to be reported
    as changing every message ("265 changes for 0 tokens saved")."""
    plugins = tmp_path / "plugins"
    plugins.mkdir()
    shutil.copy(CAP_OUTPUT, plugins / "cap.py")
    session = sample("sphinx-doc")
    before = compactkit.load_one(session)
    for max_tokens, expect_changes in [(10**6, False), (500, True)]:
        out, report = tmp_path / f"o{max_tokens}.json", tmp_path / f"r{max_tokens}.json"
        code, stdout, err = run(
            "--plugins-dir", str(plugins), "run", str(session),
            "-s", f"cap-output:max_tokens={max_tokens}",
            "--explain", "-o", str(out), "--json", str(report),
        )  # fmt: skip
        assert code == 0, err
        after = compactkit.load_one(out)
        differ = [
            i
            for i, (a, b) in enumerate(zip(before.messages, after.messages, strict=True))
            if a != b
        ]
        step = json.loads(report.read_text())["steps"][0]
        assert sorted({c["message"] for c in step["changes"]}) == differ
        assert bool(differ) is expect_changes
        if not expect_changes:
            assert " 0 change(s)" in stdout and "content changed" not in stdout


def test_bench_workers_load_the_same_plugins_folder(tmp_path: Path) -> None:
    """Worker processes rebuild the parent's registry: a tokenizer from --plugins-dir is there."""
    folder = tmp_path / "plugins"
    folder.mkdir()
    shutil.copy(FIXTURE_PLUGINS / "words_tokenizer.py", folder / "words.py")
    out = tmp_path / "bench.json"
    args = ["--plugins-dir", str(folder), "bench", "--tokenizer", "words", "--mode", "oneshot"]
    paths = [str(sample("test-repo-i1")), str(sample("sphinx-doc__sphinx-9229"))]
    code, _, err = run(*args, "--workers", "2", "--json", str(out), *paths)
    assert code == 0, err
    report = json.loads(out.read_text())
    assert report["tokenizer"] == "words"
    assert report["failed"] == [], report["failed"]
    serial = tmp_path / "serial.json"
    assert run(*args, "--json", str(serial), *paths)[0] == 0

    def tokens(data: dict[str, Any]) -> list[tuple[str, int]]:
        return [(p["name"], p["totals"]["tokens_after"]) for p in data["pipelines"]]

    assert tokens(report) == tokens(json.loads(serial.read_text()))


def _explained(stdout: str) -> list[str]:
    """The reasons `--explain` gives (after `message N:` / `messages N-M:`)."""
    return [
        line.split(": ", 1)[1]
        for line in stdout.splitlines()
        if line.startswith("      ") and ": " in line
    ]


def test_explain_reads_as_a_sentence_with_no_word_said_twice(tmp_path: Path) -> None:
    """Issue 33: `--explain` printed "elided 4042 characters elided" (the marker's kind, then a
    label saying it again); cap-output and the plugin template label their markers so."""
    plugins = tmp_path / "plugins"
    plugins.mkdir()
    shutil.copy(CAP_OUTPUT, plugins / "cap.py")
    code, stdout, err = run(
        "--plugins-dir", str(plugins), "run", str(sample("sphinx-doc")),
        "-s", "cap-output:max_tokens=500+observation-mask+sliding-window", "--budget", "20000",
        "--explain", "-o", str(tmp_path / "o.json"),
    )  # fmt: skip
    assert code == 0, err
    reasons = _explained(stdout)
    assert "67 lines elided" in reasons
    assert "omitted: dropped to fit 20,000 tokens" in reasons
    assert any(r.startswith("masked: ") for r in reasons)
    for reason in reasons:
        kind = reason.split(":")[0].split()[-1]
        assert reason.count(kind) == 1, reason
