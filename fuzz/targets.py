"""Fuzz targets: each reads untrusted bytes the way the command line does.

A target returns normally or raises a `CompactkitError` (a one-line error, exit 2 or 3). Any other
exception is a crash; `sniff` raising or returning a non-bool is one too. The same functions run
under atheris (`fuzz/run.py`), hypothesis (`tests/formats/test_fuzz_records.py`) and the replay of
every input that ever failed (`tests/test_fuzz_regressions.py`).

Targets: `format:NAME` for every built-in format (`Format.sniff`, then `Format.load` as with
`--format NAME`), `session` (detection and fallback, `compactkit.formats.loading.load_document`), `stash` (the
stash file `expand --stash` reads, then `expand` over a compacted context), `spec` (a `-s` value:
`compactkit.spec.parse_pipelines`, then `build_pipeline` with the options it gives).
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Callable
from pathlib import Path

from compactkit.cli import _input
from compactkit.context import AgentContext
from compactkit.errors import CompactkitError
from compactkit.formats.base import Document, read_document
from compactkit.formats.loading import load_document
from compactkit.pipeline import build_pipeline
from compactkit.recovery import expand, read_stash
from compactkit.registry import Registry, make_registry
from compactkit.spec import parse_pipelines

HERE = Path(__file__).resolve().parent
SEEDS = HERE / "seeds"
REGRESSIONS = HERE / "regressions"
STASH_CONTEXT = SEEDS / "stash.context.json"
"""The compacted context whose markers the `stash` target's stash files are read against."""

REGISTRY: Registry = make_registry(entry_points=False)
_SCRATCH = Path(
    tempfile.mkdtemp(
        prefix="compactkit-fuzz-", dir="/dev/shm" if os.path.isdir("/dev/shm") else None
    )
)


class Crash(AssertionError):
    """A target broke its contract without raising (a sniff that raised or returned a non-bool)."""


def _file(data: bytes, name: str = "input.json") -> str:
    path = _SCRATCH / name
    path.write_bytes(data)
    return str(path)


def _document(data: bytes) -> Document | None:
    try:
        return read_document(_file(data))
    except CompactkitError:
        return None


def _check_contexts(contexts: object) -> None:
    if not isinstance(contexts, list) or not all(isinstance(c, AgentContext) for c in contexts):
        raise Crash(f"load returned {type(contexts).__name__}, not a list of AgentContext")


def format_target(name: str) -> Callable[[bytes], None]:
    fmt = REGISTRY.formats.get(name)

    def run(data: bytes) -> None:
        doc = _document(data)
        if doc is None:
            return
        try:
            sniffed = fmt.sniff(doc)
        except Exception as exc:
            raise Crash(f"{name}.sniff raised {type(exc).__name__}: {exc}") from exc
        if not isinstance(sniffed, bool):
            raise Crash(f"{name}.sniff returned {type(sniffed).__name__}")
        try:
            contexts = fmt.load(doc)
        except CompactkitError:
            return
        _check_contexts(contexts)

    return run


def session_target(data: bytes) -> None:
    doc = _document(data)
    if doc is None:
        return
    try:
        _, contexts = load_document(doc, None, REGISTRY)
    except CompactkitError:
        return
    _check_contexts(contexts)


_stash_context: AgentContext | None = None


def stash_target(data: bytes) -> None:
    global _stash_context
    if _stash_context is None:
        _stash_context = AgentContext.from_native(
            json.loads(STASH_CONTEXT.read_text(encoding="utf-8"))
        )
    try:
        path = _file(data, "input.stash")
        read_entries = getattr(_input, "read_entries", None)  # what `expand --stash` reads with
        if read_entries is not None:
            entries = read_entries(path)
        else:
            entries = read_stash(_input.read_stash_text(path), path)
        expand(_stash_context, entries)
    except CompactkitError:
        return


def spec_target(data: bytes) -> None:
    text = data.decode("utf-8", errors="replace")
    if text.startswith("@"):  # a pipeline file: a path, not a value to parse
        return
    try:
        for spec in parse_pipelines([text], budget=4000):
            build_pipeline(spec, registry=REGISTRY)
    except CompactkitError:
        return


SHAPED = ("copilot-cli", "cursor", "goose", "opencode")
"""Formats seeded from the records their tests write after the upstream schema (no corpus file)."""

# the readers of headless streams, event logs and forks (kilo-code is seeded with cline's seeds:
# it is cline's reader; cursor-text is a text format, in TEXT_FORMATS)
SHAPED += (
    "claude-code-stream",
    "claude-managed-agents",
    "codex-exec",
    "gemini-cli-stream",
    "qwen-code",
    "continue",
    "vscode-chat",
)

TEXT_FORMATS = ("aider", "cursor-text")
"""Formats whose files are not JSON: the byte mutations here are of JSON values, so they are
fuzzed by their own property test instead (tests/formats/test_aider.py, test_cursor_text.py)."""

TARGETS: dict[str, Callable[[bytes], None]] = {
    **{
        f"format:{name}": format_target(name)
        for name in REGISTRY.formats.names()
        if name not in TEXT_FORMATS
    },
    "session": session_target,
    "stash": stash_target,
    "spec": spec_target,
}


def directory(target: str) -> str:
    """The folder name of a target's seeds and regressions (`format:pi-session` -> `format-pi-session`)."""
    return target.replace(":", "-")


# --------------------------------------------------------------------------- SQLite session stores
# A store is fuzzed through its rows: an input is JSON, `{table: [row, ...]}` (a value
# `{"hex": ...}` is bytes, an array or another object JSON text), written into a database of the
# upstream's schema, which the format then reads as the command line does (`read_layout`,
# `sniff`, `load`). Byte mutations of the database itself stop at SQLite's own checks; its rows
# are what the readers parse.

CURSOR_AGENT_SCHEMA = (
    "CREATE TABLE blobs (id TEXT PRIMARY KEY, data BLOB);"
    "CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT);"
)
"""cursor-agent's `store.db` (see compactkit/formats/cursor_agent.py)."""


def _sqlite_schemas() -> dict[str, str]:
    from tests.formats.shapes import OPENCODE_GO_SCHEMA, crush_schema

    return {"crush": crush_schema(), "opencode-go": OPENCODE_GO_SCHEMA}


def _cell(value: object) -> object:
    if isinstance(value, dict) and set(value) == {"hex"} and isinstance(value["hex"], str):
        return bytes.fromhex(value["hex"])
    if value is None or (
        isinstance(value, (str, int, float, bytes)) and not isinstance(value, bool)
    ):
        return value
    return json.dumps(value)


def write_store(rows: object, schema: str, path: Path) -> bool:
    """A database at `path` of `schema` holding `rows` (`{table: [row, ...]}`); False when the
    rows do not fit it (a row SQLite refuses: not an input the agent could have written)."""
    import sqlite3

    from compactkit.formats._util import as_dict

    if not isinstance(rows, dict):
        return False
    for stale in (path, Path(f"{path}-wal"), Path(f"{path}-shm")):
        stale.unlink(missing_ok=True)
    db = sqlite3.connect(path)
    try:
        db.executescript(schema)
        for table, items in rows.items():
            quoted = '"' + str(table).replace('"', '""') + '"'
            known = {r[1] for r in db.execute(f"PRAGMA table_info({quoted})")}
            for row in items if isinstance(items, list) and known else ():
                cells = {k: _cell(v) for k, v in as_dict(row).items() if k in known}
                if cells:
                    names = ", ".join(f'"{k}"' for k in cells)
                    marks = ", ".join("?" * len(cells))
                    sql = f"INSERT INTO {quoted} ({names}) VALUES ({marks})"
                    db.execute(sql, list(cells.values()))
        db.commit()
    except (sqlite3.Error, ValueError, OverflowError, UnicodeEncodeError):
        return False
    finally:
        db.close()
    return True


def sqlite_target(name: str, schema: str) -> Callable[[bytes], None]:
    fmt = REGISTRY.formats.get(name)

    def run(data: bytes) -> None:
        try:
            rows = json.loads(data.decode("utf-8"))
        except (UnicodeDecodeError, ValueError, RecursionError):
            return
        path = _SCRATCH / f"{name}.db"
        if not write_store(rows, schema, path):
            return
        try:
            doc = fmt.read_layout(path)
            if doc is None:
                return
            sniffed = fmt.sniff(doc)
            if sniffed is not True:
                raise Crash(f"{name}.sniff did not take its own layout: {sniffed!r}")
            _check_contexts(fmt.load(doc))
        except CompactkitError:
            return

    return run


SQLITE_STORES = {**_sqlite_schemas(), "cursor-agent": CURSOR_AGENT_SCHEMA}
"""Formats whose files are SQLite stores, and the schema their rows are fuzzed in."""
TARGETS.update({f"format:{n}": sqlite_target(n, s) for n, s in SQLITE_STORES.items()})
