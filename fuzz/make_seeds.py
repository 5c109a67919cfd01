"""Write the seed corpora in fuzz/seeds/ (run from the repository root, with the shared corpus
beside it): small slices of real sessions, each still read by its format.

    .venv/bin/python fuzz/make_seeds.py [CORPUS_DIR]

Slices keep the first records (JSONL) or the first items of each list (JSON), every string cut to
200 characters, at most ~4 KB a file. Formats without a file in the corpus are seeded from the test
suite's records (cline, anthropic-messages) or from the writers (compactkit, compactkit-session).
"""

from __future__ import annotations

import hashlib
import importlib
import json
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from compactkit.formats.base import parse_text
from compactkit.pipeline import build_pipeline
from compactkit.recovery import split_stash, stash_json
from fuzz.targets import REGISTRY, SEEDS, SHAPED, STASH_CONTEXT, directory

LIMIT = 4096
CORPUS = {
    "claude-code": [
        "claude_code_jsonl/claude-code-viewer_sample-project_1af7fc5e-8455-4414-9ccd-011d40f70b2a.jsonl",
        "claude_code_jsonl/codemie_incremental-subagents_turn-2_agent-a485154.jsonl",
    ],
    "codex-rollout": [
        "codex_rollout_jsonl/codemie_rollout-2026-05-11T11-26-55-019e1625-789d-76c0-80ab-3724b5ddb799.jsonl"
    ],
    "pi-session": ["pi_session/pi-mono_before-compaction.jsonl"],
    "mini-swe-agent": ["mini_swe_agent_traj/gemini3pro_psf__requests-1142.traj.json"],
    "swe-agent": ["swe_agent_traj/demo_ctf_crypto_katy.traj"],
    "openai-chat": [
        "openai_chat_tools/openhands-sdk_fncall-llm-message.json",
        "openai_chat_tools/tau_bench_gpt-4o-airline_historical_trajectories.json",
    ],
    "openhands-events": [
        "openhands_events/runtime_trajs_basic.json",
        "openhands_events/resolver_mock_output.jsonl",
    ],
    "gemini-cli": ["gemini_cli_session/codemie_gemini_session-2025-12-01T21-45-5b959dae.json"],
}


def shrink(value: Any, items: int, chars: int) -> Any:
    if isinstance(value, str):
        return value[:chars]
    if isinstance(value, list):
        return [shrink(v, items, chars) for v in value[:items]]
    if isinstance(value, dict):
        return {k: shrink(v, items, chars) for k, v in value.items()}
    return value


def loads_as(name: str, text: str) -> bool:
    fmt = REGISTRY.formats.get(name)
    try:
        doc = parse_text(text, "seed")
        return bool(fmt.sniff(doc)) and bool(fmt.load(doc))
    except Exception:
        return False


def slice_of(name: str, text: str) -> str | None:
    doc = parse_text(text, "seed")
    for items, chars in ((8, 200), (6, 120), (4, 80), (3, 60), (2, 40)):
        if doc.kind == "jsonl":
            for count in range(min(len(doc.data), 40), 0, -1):
                out = "".join(json.dumps(shrink(r, items, chars)) + "\n" for r in doc.data[:count])
                if len(out) <= LIMIT and loads_as(name, out):
                    return out
        else:
            out = json.dumps(shrink(doc.data, items, chars), indent=1) + "\n"
            if len(out) <= LIMIT and loads_as(name, out):
                return out
    return None


def write(target: str, text: str) -> None:
    folder = SEEDS / directory(target)
    folder.mkdir(parents=True, exist_ok=True)
    data = text.encode("utf-8")
    (folder / (hashlib.sha256(data).hexdigest()[:16] + ".seed")).write_bytes(data)


def test_records(module: str, *names: str) -> list[Any]:
    import importlib

    mod = importlib.import_module(module)
    return [getattr(mod, n) for n in names]


def shaped_seeds() -> list[tuple[str, str]]:
    """Seeds of the formats whose files the tests write after the upstream schema (no corpus
    file): each sample read as the command line reads it (a database or folder as the document
    its format makes of it), as JSON or JSON Lines, sliced like the others."""
    import importlib
    import tempfile

    from compactkit.formats.loading import read_session

    out: list[tuple[str, str]] = []
    for name in sorted(SHAPED):
        module = importlib.import_module(f"tests.formats.test_{name.replace('-', '_')}")
        with tempfile.TemporaryDirectory() as folder:
            for path in module.samples(Path(folder)):
                doc = read_session(path, REGISTRY)
                if doc.kind == "jsonl":
                    text = "".join(json.dumps(r) + "\n" for r in doc.data)
                else:
                    text = json.dumps(doc.data, indent=1) + "\n"
                sliced = slice_of(name, text)
                if sliced is not None:
                    out.append((name, sliced))
    return out


def sqlite_seeds() -> list[tuple[str, str]]:
    """Seeds of the SQLite stores: each sample database's rows as JSON,
    `{table: [row, ...]}` (JSON text as its value, other bytes as `{"hex": ...}`), which
    `fuzz.targets.sqlite_target` writes back into a database of the same schema."""
    import sqlite3
    import tempfile

    from fuzz.targets import SQLITE_STORES

    modules = {"crush": ("test_crush", "samples"), "opencode-go": ("test_crush", "go_samples")}
    modules["cursor-agent"] = ("test_cursor_agent", "samples")
    out: list[tuple[str, str]] = []
    for name in SQLITE_STORES:
        module, function = modules[name]
        samples = getattr(importlib.import_module(f"tests.formats.{module}"), function)
        with tempfile.TemporaryDirectory() as folder:
            for path in samples(Path(folder)):
                db = sqlite3.connect(path)
                tables = [
                    r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type='table'")
                ]
                rows = {t: _rows(db, t) for t in tables if not t.startswith("sqlite_")}
                db.close()
                out.append((name, json.dumps(rows, indent=1) + "\n"))
    return out


def _rows(db: Any, table: str) -> list[dict[str, Any]]:
    cursor = db.execute(f'SELECT * FROM "{table}"')
    names = [c[0] for c in cursor.description]
    return [{k: _seed_cell(v) for k, v in zip(names, r, strict=True)} for r in cursor.fetchall()]


def _seed_cell(value: Any) -> Any:
    """A cell as the seed holds it: JSON text (a message's parts, a blob) as its value, so that
    the mutations reach inside it (`fuzz.targets.write_store` writes it back as text); other
    bytes as `{"hex": ...}`."""
    text = value
    if isinstance(value, bytes):
        try:
            text = value.decode("utf-8")
        except UnicodeDecodeError:
            return {"hex": value.hex()}
    if isinstance(text, str) and text[:1] in ("{", "["):
        try:
            return json.loads(text)
        except json.JSONDecodeError:
            pass
    return {"hex": value.hex()} if isinstance(value, bytes) else value


def main(corpus: Path) -> None:
    seeded: dict[str, list[str]] = {}
    for name, files in CORPUS.items():
        for rel in files:
            text = slice_of(name, (corpus / rel).read_text(encoding="utf-8"))
            if text is None:
                print(f"no slice of {rel} loads as {name}", file=sys.stderr)
                continue
            seeded.setdefault(name, []).append(text)
    for name, module, names in (
        ("cline", "tests.formats.test_cline", ("XML_TASK", "NATIVE_TASK", "ROO_TASK", "ROO_V2")),
        ("cline", "tests.formats.test_roo_code", ("HISTORY",)),
        ("anthropic-messages", "tests.formats.test_anthropic_messages", ("REQUEST", "CLINE")),
    ):
        for data in test_records(module, *names):
            text = json.dumps(shrink(data, 8, 200), indent=1) + "\n"
            if loads_as(name, text):
                seeded.setdefault(name, []).append(text)
    for name, text in shaped_seeds():
        seeded.setdefault(name, []).append(text)
    for name, text in sqlite_seeds():  # SQLite session stores
        seeded.setdefault(name, []).append(text)
    # the writers: every context of the corpus-derived seeds, as compactkit and session-log files
    native, log = REGISTRY.formats.get("compactkit"), REGISTRY.formats.get("compactkit-session")
    for name in ("claude-code", "openai-chat"):
        doc = parse_text(seeded[name][0], "seed")
        contexts = REGISTRY.formats.get(name).load(doc)
        seeded.setdefault("compactkit", []).append(native.dump(contexts[:1]))
        seeded.setdefault("compactkit-session", []).append(log.dump(contexts[:1]))
    seeded["kilo-code"] = list(seeded["cline"])  # Kilo Code's histories are Roo Code's
    for name, texts in sorted(seeded.items()):
        for text in texts:
            write(f"format:{name}", text)
        write("session", texts[0])
    # stash: a compacted context (kept beside the seeds) and the stash its compaction wrote
    ctx = native.load(parse_text(seeded["compactkit"][0], "seed"))[0]
    pipeline = build_pipeline(["llm-summary:keep_last=1"], registry=REGISTRY)
    compacted, entries = split_stash(pipeline.compact(ctx))
    STASH_CONTEXT.write_text(compacted.to_json(indent=1) + "\n", encoding="utf-8")
    write("stash", stash_json(entries))
    write("stash", stash_json({}))
    for spec in (
        "observation-mask:keep_last=5+sliding-window",
        "llm-summary:keep_last=2,fallback=extractive,max_tokens=30000",
        "default",
        "none",
        "etag-collapse:per_field=false cap-output:max_tokens=1k",
        'observation-mask:exclude_tools="a|b",placeholder={tool} omitted',
    ):
        write("spec", spec)


if __name__ == "__main__":
    main(Path(sys.argv[1] if len(sys.argv) > 1 else "../shared/corpus"))
