"""A malformed baseline is bad input: exit 2 in one line naming the file, never 'unexpected
error' (exit 3). Each case is one edit of a baseline the check just wrote."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from .conftest import layout, run

CONFIG = (
    '[[tool.compactkit.check]]\nname = "c"\n'
    'sessions = ["examples/sessions/runtime_trajs_basic.json"]\nmode = "oneshot"\n'
    'pipeline = ["observation-mask"]\nmax_regression = { tokens = 0 }\n'
)
MARK = '"tokens": '


def _tokens(value: object) -> str:
    return f"{MARK}{json.dumps(value)}"


CASES = {
    "a string": _tokens("abc"),
    "null": _tokens(None),
    "a list": _tokens([1]),
    "1e999": f"{MARK}1e999",
    "NaN": f"{MARK}NaN",
    "5,000 digits": MARK + "9" * 5000,
    "deep nesting": MARK + "[" * 5000 + "]" * 5000,
}


@pytest.fixture(scope="module")
def written(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    folder = tmp_path_factory.mktemp("baseline")
    path = layout(folder, CONFIG, baseline=False)
    code, _, err = run("check", "--config", str(path), "--update-baseline")
    assert code == 0, err
    return path, (folder / "compactkit-baseline.json").read_text()


@pytest.mark.parametrize("case", list(CASES))
def test_a_malformed_baseline_is_exit_2_in_one_line(written: tuple[Path, str], case: str) -> None:
    path, good = written
    start = good.index(MARK)
    end = good.index(",", start)
    (path.parent / "compactkit-baseline.json").write_text(good[:start] + CASES[case] + good[end:])
    code, _, err = run("check", "--config", str(path))
    assert code == 2, err
    (line,) = err.strip().splitlines()
    assert line.startswith("compactkit: error: ") and "compactkit-baseline.json" in line


def test_a_baseline_that_is_not_utf8_is_exit_2(written: tuple[Path, str]) -> None:
    path, good = written
    (path.parent / "compactkit-baseline.json").write_bytes(b"\xff\xfe" + good.encode())
    code, _, err = run("check", "--config", str(path))
    assert code == 2 and "not UTF-8" in err
