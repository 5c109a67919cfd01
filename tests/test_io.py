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
