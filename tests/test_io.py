"""Loading and writing: FILE#N addresses, detection, atomic writes, exports."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import compactkit
from compactkit import BadInputError, ConfigError

from .conftest import sample

TAU = sample("tau_bench")


def test_a_file_of_several_conversations_is_addressed_by_number() -> None:
    every = compactkit.load(TAU)
    assert len(every) == 3
    assert compactkit.load(f"{TAU}#2") == [every[2]]
    assert compactkit.load_one(f"{TAU}#0") == every[0]
    with pytest.raises(BadInputError, match=r"holds 3 conversations.*#N, N from 0 to 2"):
        compactkit.load_one(TAU)
    with pytest.raises(BadInputError, match=r"conversation #7 out of range.*#0 to #2"):
        compactkit.load(f"{TAU}#7")


def test_a_file_whose_name_ends_in_a_number_sign_is_read_as_named(tmp_path: Path) -> None:
    odd = tmp_path / "session.json#1"
    odd.write_bytes(sample("test-repo-i1").read_bytes())
    assert compactkit.load_one(odd).metadata["source_format"] == "swe-agent"


def test_native_files_round_trip_and_are_written_atomically(tmp_path: Path) -> None:
    ctx = compactkit.load_one(f"{TAU}#1")
    target = tmp_path / "ctx.json"
    target.write_text("old", encoding="utf-8")
    target.chmod(0o640)
    compactkit.dump(ctx, target)
    assert compactkit.load_one(target) == ctx
    assert target.stat().st_mode & 0o777 == 0o640  # the mode of the file it replaced
    assert [p.name for p in tmp_path.iterdir()] == ["ctx.json"]  # no temp file left


def test_writing_a_format_that_cannot_be_written_names_the_writers() -> None:
    ctx = compactkit.load_one(f"{TAU}#1")
    with pytest.raises(ConfigError, match=r"cannot be written.*openai-chat"):
        compactkit.render(ctx, "gemini-cli")


def test_export_reports_what_a_request_drops() -> None:
    ctx = compactkit.load_one(sample("claude-code-viewer"))
    request = compactkit.export(ctx, "anthropic-messages", compactkit.WriterOptions(request=True))
    assert request.text.startswith("{")
    saved = compactkit.export(ctx, "compactkit")
    assert compactkit.AgentContext.from_native(json.loads(saved.text)) == ctx
    assert saved.warning("compactkit") is None
    with pytest.raises(ConfigError, match="takes no writer options"):
        compactkit.export(ctx, "compactkit", compactkit.WriterOptions(request=True))


def test_a_compacted_output_reads_with_its_store_in_python_as_on_the_command_line(
    tmp_path: Path,
) -> None:
    """`compactkit.load_one(out.json)` reads what `compactkit run out.json` reads: the output with
    the recovery store `run -o` wrote beside it, so that its markers expand in Python too."""
    from click.testing import CliRunner

    from compactkit.cli import make_cli
    from compactkit.registry import make_registry

    cli = make_cli(lambda **kw: make_registry(entry_points=False, **kw))
    source = sample("sphinx-doc")
    out = tmp_path / "small.json"
    made = CliRunner().invoke(cli, ["run", str(source), "--budget", "20000", "-o", str(out)])
    assert made.exit_code == 0, made.stderr
    store = tmp_path / "small.json.recovery.jsonl"
    assert store.is_file()

    ctx = compactkit.load_one(out)
    assert ctx.recovery  # the store beside the file, read with it
    assert compactkit.unrecoverable(ctx) == []
    assert compactkit.expand(ctx).messages == compactkit.load_one(source).messages
    alone = compactkit.load_one(out, recovery=False)
    assert not alone.recovery and compactkit.unrecoverable(alone)

    again = CliRunner().invoke(cli, ["run", str(out), "-s", "sliding-window:max_tokens=8000"])
    assert again.exit_code == 0, again.stderr  # the command line reads the same store

    store.unlink()
    with pytest.raises(BadInputError, match=r"cannot be restored.*recovery store .* is missing"):
        compactkit.load_one(out, restorable=True)
    missing = CliRunner().invoke(cli, ["run", str(out)])
    assert missing.exit_code == 2 and "is missing" in missing.stderr


def test_a_session_address_is_a_value_parsed_once(tmp_path: Path) -> None:
    from compactkit.formats.loading import SessionAddress

    picked = SessionAddress.parse(f"{TAU}#2")
    assert (picked.file, picked.index, str(picked)) == (str(TAU), 2, f"{TAU}#2")
    assert SessionAddress.parse(picked) is picked  # a parsed address is passed on as it is
    assert SessionAddress.parse("-#1").stdin and SessionAddress.parse("-").sidecar is None
    assert SessionAddress.parse("out.json").sidecar == "out.json.recovery.jsonl"
    assert SessionAddress.parse(tmp_path / "no-such#x").index is None  # no file: read as named
    with pytest.raises(BadInputError, match=r"FILE#N selects the N-th conversation"):
        SessionAddress.parse(f"{TAU}#x")
    with pytest.raises(AttributeError):
        picked.index = 0  # type: ignore[misc]
