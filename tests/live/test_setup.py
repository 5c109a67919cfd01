"""When the CLIs cannot be installed, the live tests fail with one clear line: they never skip."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.live.clis import LiveSetupError, NpmCli, install
from tests.live.conftest import _installed

BROKEN = NpmCli("@example/agent-cli", "1.2.3", "agent")


def fake_npm(bin_dir: Path, script: str) -> None:
    bin_dir.mkdir()
    npm = bin_dir / "npm"
    npm.write_text("#!/bin/sh\n" + script)
    npm.chmod(0o755)


def test_a_failed_npm_install_is_a_clear_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake_npm(
        tmp_path / "bin",
        'echo "npm error code E404" >&2\necho "npm error 404 Not Found" >&2\nexit 1\n',
    )
    monkeypatch.setenv("PATH", str(tmp_path / "bin"))
    with pytest.raises(
        LiveSetupError,
        match=r"npm install @example/agent-cli@1\.2\.3 failed \(exit 1\): .*404 Not Found",
    ):
        install(BROKEN, root=tmp_path / "cache")
    assert [p.name for p in (tmp_path / "cache").iterdir()] == [
        ".install.lock"
    ]  # nothing half-installed


def test_an_install_whose_cli_does_not_start_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # npm "succeeds" but leaves an executable that reports another version
    fake_npm(
        tmp_path / "bin",
        'prefix="$3"; mkdir -p "$prefix/node_modules/.bin"\n'
        'printf "#!/bin/sh\\necho 0.0.1\\n" > "$prefix/node_modules/.bin/agent"\n'
        'chmod +x "$prefix/node_modules/.bin/agent"\n',
    )
    monkeypatch.setenv("PATH", f"{tmp_path / 'bin'}:/usr/bin:/bin")
    with pytest.raises(LiveSetupError, match=r"installed but `agent --version` said '0\.0\.1'"):
        install(BROKEN, root=tmp_path / "cache")
    assert not (tmp_path / "cache" / "example__agent-cli-1.2.3").exists()


def test_the_fixture_fails_the_test_instead_of_skipping(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))  # no npm at all
    monkeypatch.setenv("COMPACTKIT_LIVE_CACHE", str(tmp_path / "cache"))
    with pytest.raises(
        pytest.fail.Exception, match=r"cannot set up @example/agent-cli@1\.2\.3: npm is not on PATH"
    ):
        _installed(BROKEN)
