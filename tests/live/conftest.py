"""Fixtures for tests with the real agent CLIs: the installed CLIs (once per test session), a
started fake upstream, and a sandbox (temporary HOME and workspace) per test."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.live.clis import CLAUDE_CODE, CODEX, PI, LiveSetupError, NpmCli, Sandbox, install
from tests.live.upstream import FakeUpstream


def _installed(cli: NpmCli) -> Path:
    try:
        return install(cli)
    except LiveSetupError as exc:  # a failure, never a skip: the suite must run these tests
        pytest.fail(f"cannot set up {cli.package}@{cli.version}: {exc}", pytrace=False)


@pytest.fixture(scope="session")
def claude_cli() -> Path:
    """The Claude Code executable (npm install into the cache on first use)."""
    return _installed(CLAUDE_CODE)


@pytest.fixture(scope="session")
def codex_cli() -> Path:
    """The Codex executable (npm install into the cache on first use)."""
    return _installed(CODEX)


@pytest.fixture(scope="session")
def pi_cli() -> Path:
    """The pi executable (npm install of pi's coding-agent package into the cache on first use)."""
    return _installed(PI)


@pytest.fixture
def fake_upstream() -> Iterator[FakeUpstream]:
    """A started fake model API with no script yet (give one with `script=` or `set_script`)."""
    with FakeUpstream() as upstream:
        yield upstream


@pytest.fixture
def sandbox(tmp_path: Path) -> Sandbox:
    return Sandbox.create(tmp_path)
