"""Configuration as a user writes it: human units, did-you-mean for misspelled keys, exit 2 with
the file, the line and the key."""

from __future__ import annotations

from pathlib import Path

import pytest

from compactkit import ConfigError
from compactkit.check import load_config
from compactkit.check.config import expand_sessions, parse_share, parse_tokens

from .conftest import run

SESSION = "examples/sessions/tau_bench_gpt-4o-airline.first3.json"


@pytest.mark.parametrize(
    ("text", "tokens"),
    [("8k", 8_000), ("1.2M", 1_200_000), ("30,000", 30_000), ("30_000", 30_000), (512, 512)],
)
def test_token_counts_take_human_units(text: str | int, tokens: int) -> None:
    assert parse_tokens(text) == tokens


def test_shares_take_fractions_and_percentages() -> None:
    assert parse_share("30%") == pytest.approx(0.3)
    assert parse_share(0.25) == 0.25
    with pytest.raises(ValueError, match="0 to 1"):
        parse_share("130%")


def _write(tmp_path: Path, body: str, name: str = "pyproject.toml") -> Path:
    path = tmp_path / name
    header = "[[tool.compactkit.check]]" if name == "pyproject.toml" else "[[check]]"
    path.write_text(f'[project]\nname = "x"\n\n{header}\nname = "c"\n{body}\n', encoding="utf-8")
    return path


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        (
            'sessions = ["a.json"]\nmax_token = "8k"',
            "pyproject.toml:7: [[tool.compactkit.check]] #1 'c': max_token: unknown key "
            "'max_token' (did you mean 'max_tokens'?)",
        ),
        (
            'sessions = ["a.json"]\nmax_regression = { token = 0 }',
            "max_regression.token: unknown key 'token' (did you mean 'tokens'?)",
        ),
        (
            'sessions = ["a.json"]\nmax_tokens = "8 kilo"',
            "pyproject.toml:7: [[tool.compactkit.check]] #1 'c': max_tokens.session: expected a "
            "token count like 8000, '8k' or '1.2M', got '8 kilo'",
        ),
        ('sessions = ["a.json"]\nmode = "replai"', "mode: Input should be 'oneshot' or 'replay'"),
        (
            'sessions = ["a.json"]\npricing = ["antropic"]',
            "pricing: unknown pricing profile 'antropic' (did you mean 'anthropic'?)",
        ),
        (
            'sessions = ["a.json"]\nmin_retention = { paths = 1.0 }',
            "unknown retention kind 'paths' (did you mean 'path'?)",
        ),
        (
            'sessions = ["a.json"]\npricing = ["openai"]\nmax_cost = { anthropic = 1 }',
            "'anthropic' is not one of this check's pricing profiles",
        ),
        ("budget = 1000", "sessions: missing (required)"),
        ('sessions = ["a.json"]\ninformational = "maybe"', "informational: Input should be"),
        ('sessions = ["a.json"]\npins = ["colour=red"]', "pins: pin rule 'colour=red' is not"),
    ],
)
def test_bad_configuration_is_one_line_exit_2_with_file_line_and_key(
    tmp_path: Path, body: str, expected: str
) -> None:
    path = _write(tmp_path, body)
    code, out, err = run("check", "--config", str(path))
    assert code == 2, out
    assert err.count("\n") == 1 and err.startswith("compactkit: error: ")
    assert expected in err


def test_compactkit_toml_is_read_and_found_from_a_subfolder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _write(tmp_path, 'sessions = ["a/*.json"]\nmax_tokens = "8k"', "compactkit.toml")
    (tmp_path / "sub").mkdir()
    monkeypatch.chdir(tmp_path / "sub")
    file = load_config()
    assert file.path == (tmp_path / "compactkit.toml").resolve()
    assert file.checks[0].max_tokens is not None
    assert file.checks[0].max_tokens.session == 8_000  # a plain number is per session


def test_a_check_matching_no_file_fails(tmp_path: Path) -> None:
    path = _write(tmp_path, 'sessions = ["sessions/*.jsonl"]')
    code, _, err = run("check", "--config", str(path))
    assert code == 2
    assert "check 'c': sessions pattern 'sessions/*.jsonl' matches no file" in err
    with pytest.raises(ConfigError):
        expand_sessions(load_config(path).checks[0], tmp_path)


def test_no_configuration_is_exit_2_saying_where_to_put_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "pyproject.toml").write_text('[project]\nname = "x"\n')
    monkeypatch.chdir(tmp_path)
    code, _, err = run("check")
    assert code == 2 and "[[tool.compactkit.check]]" in err


def test_duplicate_names_are_refused(tmp_path: Path) -> None:
    path = tmp_path / "compactkit.toml"
    path.write_text(
        '[[check]]\nname = "a"\nsessions = "x"\n[[check]]\nname = "a"\nsessions = "y"\n'
    )
    code, _, err = run("check", "--config", str(path))
    assert code == 2 and "two checks are named 'a'" in err


def test_sessions_relative_to_the_file_with_file_hash_n(tmp_path: Path) -> None:
    from .conftest import layout

    path = layout(
        tmp_path,
        f'[[tool.compactkit.check]]\nname = "c"\nsessions = ["{SESSION}#1", "examples/sessions/*.traj"]\n',
        baseline=False,
    )
    check = load_config(path).checks[0]
    found = expand_sessions(check, path.parent)
    assert [Path(f.split("#")[0]).name for f in found] == [
        "tau_bench_gpt-4o-airline.first3.json",
        "testdata_gpt4_test-repo-i1.traj",
    ]
    assert found[0].endswith("#1")


def test_pin_rules_of_a_check_reach_its_pipeline_and_name_it(tmp_path: Path) -> None:
    from compactkit.check.gate import resolve_pipeline
    from compactkit.registry import make_registry

    path = _write(tmp_path, 'sessions = ["a.json"]\npins = ["path=**/CLAUDE.md"]')
    (check,) = load_config(str(path)).checks
    spec = resolve_pipeline(check, make_registry(entry_points=False))
    assert spec.pins == ("path=**/CLAUDE.md",)
    assert spec.name.endswith("[pins: path=**/CLAUDE.md]")
    (pinned,) = load_config(str(path)).with_pins(["tool=TodoWrite"]).checks
    assert pinned.pins == ["path=**/CLAUDE.md", "tool=TodoWrite"]


def test_the_docs_reference_is_generated_from_the_models() -> None:
    from compactkit.check.config import CheckConfig, config_reference

    from ..conftest import ROOT

    page = (ROOT / "docs" / "check.md").read_text(encoding="utf-8")
    start, end = page.index("<!-- reference:start -->\n"), page.index("<!-- reference:end -->")
    table = config_reference()
    assert page[start + len("<!-- reference:start -->\n") : end] == table, (
        "docs/check.md's reference is stale; paste this between the markers:\n" + table
    )
    for name in CheckConfig.model_fields:
        assert f"| `{name}` |" in table and "Annotated" not in table
