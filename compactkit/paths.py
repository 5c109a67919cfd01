"""Finding session files under folders and globs without following symlinked folders.

A folder's walk and a glob's `**` do not enter a symlink to a folder: a link to `..` would list
every session again, and `/proc/self/**` would never end. Neither lists a named pipe, socket or
device: reading one waits for a writer that may never come (a file named on its own is read,
`<(cat s.jsonl)` included).
"""

from __future__ import annotations

import os
import re
import stat
from collections.abc import Iterator
from pathlib import Path

SESSION_SUFFIXES = (".json", ".jsonl", ".traj")
"""The file names a folder of sessions is searched for."""

_MAGIC = re.compile(r"[*?\[]")


def _special(path: str) -> bool:
    """A named pipe, socket or device (a symlink followed; a dangling one is not special: it is
    listed, and reported as missing when read)."""
    try:
        mode = os.stat(path).st_mode
    except OSError:
        return False
    return not (stat.S_ISREG(mode) or stat.S_ISDIR(mode))


def walk_files(folder: Path) -> Iterator[Path]:
    """Every file under `folder`, in a stable order; symlinked folders are not entered."""
    for root, dirs, files in os.walk(folder, followlinks=False):
        dirs.sort()
        for name in sorted(files):
            yield Path(root) / name


STORE_NAMES = ("opencode.db", "sessions.db", ".aider.chat.history.md", "crush.db", "store.db")
"""Sessions kept in files no suffix names: OpenCode's (both), Goose's, Crush's and cursor-agent's
databases, aider's history."""


def session_files(folder: Path) -> list[str]:
    """The sessions under `folder`, each once: files by `SESSION_SUFFIXES` or `STORE_NAMES`, and
    the agents' sessions of several files by the path that reads them whole: an OpenCode
    `storage/` folder (`session/`, `message/`, `part/`; left out beside an `opencode.db`, which
    OpenCode migrated it into) or its first layout's `storage/session/` (`info/`, `message/`), a
    software-agent-sdk conversation folder (`base_state.json` and `events/`); a Claude Code
    session's `<session>/subagents/` transcripts are read with `<session>.jsonl`, and the legacy
    `.jsonl` files beside Goose's `sessions.db` are in it."""
    found: list[str] = []
    for root, dirs, files in os.walk(folder, followlinks=False):
        here = Path(root)
        dirs.sort()
        if (
            {"session", "message", "part"} <= set(dirs)
            or ("base_state.json" in files and "events" in dirs)
            or (here.name == "session" and {"info", "message"} <= set(dirs))
        ):
            found.append(root)  # a session store of several files: read as one
            dirs.clear()
            continue
        if (
            here.name == "subagents"
            and (here.parent.parent / f"{here.parent.name}.jsonl").is_file()
        ):
            dirs.clear()  # read with the session they belong to
            continue
        if "opencode.db" in files and "storage" in dirs:
            dirs.remove("storage")
        goose_db = "sessions.db" in files
        for name in sorted(files):
            if (
                name in STORE_NAMES
                or (name.endswith(SESSION_SUFFIXES) and not (goose_db and name.endswith(".jsonl")))
            ) and not _special(str(here / name)):
                found.append(str(here / name))
    return found


def _segment(part: str) -> str:
    """The regex of one glob path segment (`*`, `?` and `[...]` never match a `/`)."""
    out, i = [], 0
    while i < len(part):
        c = part[i]
        if c == "*":
            out.append("[^/]*")
        elif c == "?":
            out.append("[^/]")
        elif c == "[" and "]" in part[i + 1 :]:
            end = part.index("]", i + 2 if part[i + 1 : i + 2] in ("!", "]") else i + 1)
            body = part[i + 1 : end].replace("\\", "\\\\")
            out.append("[^" + body[1:] + "]" if body.startswith("!") else "[" + body + "]")
            i = end
        else:
            out.append(re.escape(c))
        i += 1
    return "".join(out)


def glob_paths(pattern: str) -> list[str]:
    """Files and folders matching `pattern` (`**` for any depth), sorted; symlinked folders are
    not entered (unlike `glob.glob(recursive=True)`)."""
    parts = pattern.replace(os.sep, "/").split("/")
    fixed = 0
    while fixed < len(parts) and not _MAGIC.search(parts[fixed]):
        fixed += 1
    if fixed == len(parts):
        return [pattern] if Path(pattern).exists() else []
    base = "/".join(parts[:fixed]) or ("/" if pattern.startswith("/") else ".")
    rest = parts[fixed:]
    pieces = []
    for k, part in enumerate(rest):
        last = k == len(rest) - 1
        if part == "**":
            pieces.append(".*" if last else "(?:[^/]+/)*")
        else:
            pieces.append(_segment(part) + ("" if last else "/"))
    regex = re.compile("".join(pieces) + r"\Z", re.S)
    root = Path(base)
    if not root.is_dir():
        return []
    found: list[str] = []
    for current, dirs, files in os.walk(root, followlinks=False):
        dirs.sort()
        rel = os.path.relpath(current, root)
        prefix = "" if rel == "." else rel.replace(os.sep, "/") + "/"
        for name in [*dirs, *files]:
            path = os.path.join(current, name)
            if regex.match(prefix + name) and not _special(path):
                found.append(path)
    return sorted(found)


__all__ = ["SESSION_SUFFIXES", "STORE_NAMES", "glob_paths", "session_files", "walk_files"]
