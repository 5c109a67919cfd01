"""Real MCP servers for the mcp-proxy tests and the replay bench, installed through the registries:
the reference filesystem server from npm (once, into the git-ignored out/cache/npm) and
`mcp-server-git` from PyPI (the `test` extra installs it; the setup installs it when missing)."""

from __future__ import annotations

import importlib.util
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
NPM_CACHE = ROOT / "out" / "cache" / "npm"
FILESYSTEM_PACKAGE = "@modelcontextprotocol/server-filesystem@2026.8.31"
FILESYSTEM_ENTRY = (
    NPM_CACHE / "node_modules" / "@modelcontextprotocol" / "server-filesystem" / "dist" / "index.js"
)
PROXY = [sys.executable, "-m", "compactkit", "mcp-proxy"]


def node() -> str | None:
    return shutil.which("node")


def filesystem_server() -> list[str]:
    """The command that starts the filesystem server (directories to serve go after it); npm
    installs it into out/cache/npm the first time."""
    node_bin = node()
    npm = shutil.which("npm")
    if node_bin is None or npm is None:
        raise RuntimeError("node and npm are needed for @modelcontextprotocol/server-filesystem")
    if not FILESYSTEM_ENTRY.is_file():
        NPM_CACHE.mkdir(parents=True, exist_ok=True)
        subprocess.run(
            [
                npm,
                "install",
                "--prefix",
                str(NPM_CACHE),
                "--no-audit",
                "--no-fund",
                "--loglevel=error",
                FILESYSTEM_PACKAGE,
            ],
            check=True,
            timeout=300,
        )
    return [node_bin, str(FILESYSTEM_ENTRY)]


def git_server() -> list[str]:
    """The command that starts `mcp-server-git` (pip installs it when the venv lacks it)."""
    if importlib.util.find_spec("mcp_server_git") is None:
        subprocess.run(
            [sys.executable, "-m", "pip", "install", "--quiet", "mcp-server-git>=2026.10"],
            check=True,
            timeout=300,
        )
    return [sys.executable, "-m", "mcp_server_git"]
