"""The plugin registry: built-ins as plugins, broken plugins contained, duplicates named."""

from __future__ import annotations

import importlib
from importlib import metadata

import pytest
from click.testing import CliRunner

import compactkit
from compactkit.cli import make_cli
from compactkit.errors import PluginError
from compactkit.pipeline import build_pipeline
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


def test_plugins_command_lists_errors_and_exits_3(monkeypatch: pytest.MonkeyPatch) -> None:
    _entry_points(monkeypatch, broken="broken_import", words="words_tokenizer")
    cli = make_cli(lambda: make_registry(env={}))
    result = CliRunner().invoke(cli, ["plugins"])
    assert result.exit_code == 3  # a plugin failed to load: listed, and the exit code says so
    assert "plugin(s) with errors: broken" in result.stderr
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


class _InstanceNotClass:
    """Registers a strategy instance (and a format class): both are the wrong kind of object."""

    @compactkit.hookimpl
    def register_strategies(self, register):  # type: ignore[no-untyped-def]
        from compactkit.strategies.sliding_window import SlidingWindow

        class Mine(SlidingWindow):
            name = "mine"

        register(Mine())

    @compactkit.hookimpl
    def register_formats(self, register):  # type: ignore[no-untyped-def]
        class MyFormat(compactkit.Format):
            name = "my-format"

        register(MyFormat)


def test_what_a_hook_registers_is_checked_at_load_with_what_to_register_instead() -> None:
    reg = make_registry(entry_points=False, plugins=[_InstanceNotClass()])
    errors = [error for plugin, error in reg.errors if plugin == "_InstanceNotClass"]
    assert any(
        "'mine' is an instance: register the class (register(MyStrategy))" in e for e in errors
    )
    assert any(
        "'my-format' is a class: register an instance, register(MyFormat())" in e for e in errors
    )
    assert "mine" not in reg.strategies and "my-format" not in reg.formats
    result = CliRunner().invoke(
        make_cli(lambda: make_registry(entry_points=False, plugins=[_InstanceNotClass()])),
        ["plugins"],
    )
    assert "register the class" in result.output


class _Observer:
    def __init__(self) -> None:
        self.seen: list[str] = []

    @compactkit.hookimpl
    def compaction_event(self, event):  # type: ignore[no-untyped-def]
        self.seen.append(event.kind)


def test_hooks_go_through_pluggy_so_tracing_shows_every_call(
    capsys: pytest.CaptureFixture[str],
) -> None:
    observer = _Observer()
    reg = make_registry(entry_points=False, plugins=[observer], env={"COMPACTKIT_TRACE_HOOKS": "1"})
    err = capsys.readouterr().err
    assert "register_strategies" in err and "register_formats" in err
    assert "sliding-window" in reg.strategies  # traced and still collected
    pipeline = build_pipeline(["sliding-window"], budget=3000, registry=reg)
    pipeline.run(compactkit.load_one(sample("test-repo-i1")))
    assert "compaction_event" in capsys.readouterr().err
    assert observer.seen == ["started", "applied", "finished"]
