"""The plugin registry: built-ins as plugins, broken plugins contained, duplicates named."""

from __future__ import annotations

import importlib
from importlib import metadata

import pytest
from click.testing import CliRunner

import compactkit
from compactkit.cli import make_cli
from compactkit.errors import PluginError
from compactkit.registry import make_registry

from .conftest import sample


def _entry_points(monkeypatch: pytest.MonkeyPatch, **plugins: str) -> None:
    eps = [
        metadata.EntryPoint(name=name, value=f"tests.fixture_plugins.{module}", group="compactkit")
        for name, module in plugins.items()
    ]

    def fake(*, group: str) -> list[metadata.EntryPoint]:
        return eps if group == "compactkit" else []

    monkeypatch.setattr("compactkit.registry.metadata.entry_points", fake)


def test_builtins_are_ordinary_plugins() -> None:
    reg = make_registry(entry_points=False)
    names = {p.name: p for p in reg.plugins}
    assert names["compactkit.builtins.formats"].source == "builtin"
    assert "claude-code" in names["compactkit.builtins.formats"].provides["format"]
    assert reg.tokenizers.names() == ["cl100k_base", "o200k_base"]
    assert reg.errors == []


def test_broken_plugins_are_listed_and_the_rest_keeps_working(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    _entry_points(
        monkeypatch,
        broken="broken_import",
        hostile="exits_on_import",
        typo="misspelled_hook",
        raising="raising_hook",
        words="words_tokenizer",
    )
    reg = make_registry(env={})
    errors = dict(reg.errors)
    assert "not_a_real_dependency_of_anything" in errors["broken"]
    assert "SystemExit" in errors["hostile"]
    assert "register_formatz" in errors["typo"]
    assert "tokenizer backend unavailable" in errors["raising"]
    # the good plugin and every built-in still work
    assert "words" in reg.tokenizers
    ctx = compactkit.load_one(sample("gemini_session"), registry=reg)
    assert len(ctx.messages) > 0


def test_duplicate_names_are_an_error_naming_both_plugins(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    _entry_points(monkeypatch, impostor="duplicate_format")
    reg = make_registry(env={})
    messages = [e for _, e in reg.errors]
    assert any("'compactkit.builtins.formats'" in m and "'impostor'" in m for m in messages)
    with pytest.raises(PluginError, match="registered by both"):
        reg.formats.get("gemini-cli")
    # other formats are unaffected
    assert reg.formats.get("claude-code").name == "claude-code"


def test_allow_list_limits_entry_point_plugins(monkeypatch: pytest.MonkeyPatch) -> None:
    _entry_points(monkeypatch, broken="broken_import", words="words_tokenizer")
    reg = make_registry(env={"COMPACTKIT_LOAD_PLUGINS": "words"})
    assert reg.errors == []
    assert "words" in reg.tokenizers
    none = make_registry(env={"COMPACTKIT_LOAD_PLUGINS": ""})
    assert {p.source for p in none.plugins} == {"builtin"}


def test_plugins_command_lists_errors_without_failing(monkeypatch: pytest.MonkeyPatch) -> None:
    _entry_points(monkeypatch, broken="broken_import", words="words_tokenizer")
    cli = make_cli(lambda: make_registry(env={}))
    result = CliRunner().invoke(cli, ["plugins"])
    assert result.exit_code == 0
    assert "broken [entry-point] ERROR" in result.output
    assert "tokenizer: words" in result.output
    # a broken plugin does not stop other commands
    inspected = CliRunner().invoke(
        cli, ["inspect", "--json", "--tokenizer", "words", str(sample("gemini_session"))]
    )
    assert inspected.exit_code == 0, inspected.output


def test_trace_env_var_traces_hook_calls(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    importlib.import_module("compactkit.builtins.formats")
    reg = make_registry(entry_points=False, env={"COMPACTKIT_TRACE_HOOKS": "1"})
    reg.pm.hook.register_formats(register=lambda fmt: None)
    assert "register_formats" in capsys.readouterr().err
