"""Whole-document sessions (compactkit JSON, mini-swe-agent and SWE-agent trajectories, OpenAI and
Anthropic message arrays, Cline histories, Gemini CLI sessions) are converted a record at a time,
each raw record let go of once converted: loading never holds a session's parsed records and its
context both whole, gives the context it gave before, and a format that fails half way through
leaves the next format the whole session."""

from __future__ import annotations

import json
import tracemalloc
from pathlib import Path
from typing import Any

import pytest

import compactkit
from compactkit import AgentContext, BadInputError, Document, Format
from compactkit.formats.base import read_document
from compactkit.formats.loading import detect_format, load_document
from compactkit.registry import make_registry
from tests.formats.test_cline import ROO_TASK, ROO_V2, XML_TASK, big_task

from ..conftest import corpus_file, corpus_files

WHOLE_DOCUMENT_FORMATS = {
    "compactkit",
    "mini-swe-agent",
    "swe-agent",
    "openai-chat",
    "anthropic-messages",
    "cline",
    "gemini-cli",
}


def sessions(tmp_path: Path) -> list[Path]:
    """Every whole-document corpus session of those formats, every corpus session written as
    compactkit JSON and as an Anthropic request, and Cline and Roo Code task histories."""
    paths = [p for p in corpus_files() if p.suffix != ".jsonl"]
    for n, source in enumerate(corpus_files()[:12]):
        for fmt in ("compactkit", "anthropic-messages"):
            contexts = compactkit.load(source)
            try:
                text = compactkit.render(contexts, fmt)
            except BadInputError:  # a writer of one conversation, given several
                continue
            path = tmp_path / f"{n}-{source.stem}.{fmt}.json"
            path.write_text(text, encoding="utf-8")
            paths.append(path)
    for n, task in enumerate([XML_TASK, big_task(30), ROO_TASK, ROO_V2]):
        path = tmp_path / f"cline-{n}" / "api_conversation_history.json"
        path.parent.mkdir()
        path.write_text(json.dumps(task), encoding="utf-8")
        paths.append(path)
    return paths


def test_every_session_loads_the_context_it_gave_with_its_records_kept(tmp_path: Path) -> None:
    """`compactkit.load` lets go of each record it converts; the format's `load` given the
    document as read keeps them all: the contexts are the same."""
    seen: set[str] = set()
    for path in sessions(tmp_path):
        kept = read_document(path)
        fmt = detect_format(kept)
        if fmt.name not in WHOLE_DOCUMENT_FORMATS:
            continue
        seen.add(fmt.name)
        assert compactkit.load(path) == fmt.load(kept), path
        assert kept.data == read_document(path).data, path  # the document given was not touched
    assert seen == WHOLE_DOCUMENT_FORMATS


class HalfTaken(Format):
    """A plugin format claiming Cline histories first, that gives up half way through."""

    name = "half-taken"
    description = "takes half of a Cline history, then fails"
    priority = 1000

    def sniff(self, doc: Document) -> bool:
        return doc.kind == "json" and isinstance(doc.data, list)

    def load(self, doc: Document) -> list[AgentContext]:
        records: list[Any] = doc.data
        for n, _ in enumerate(doc.take(records)):
            if n == len(records) // 2:
                raise BadInputError("not mine after all", path=doc.path)
        return []


class HalfTakenPlugin:
    @compactkit.hookimpl
    def register_formats(self, register: Any) -> None:
        register(HalfTaken())


def test_a_format_failing_half_way_leaves_the_next_the_whole_session(tmp_path: Path) -> None:
    path = tmp_path / "task" / "api_conversation_history.json"
    path.parent.mkdir()
    path.write_text(json.dumps(big_task(30)), encoding="utf-8")
    registry = make_registry(entry_points=False, plugins=[HalfTakenPlugin()])
    (ctx,) = compactkit.load(path, registry=registry)
    assert ctx.metadata["source_format"] == "cline"
    assert ctx == compactkit.load_one(path)
    with pytest.raises(BadInputError, match="not mine after all"):
        compactkit.load(path, format="half-taken", registry=registry)


def _load_peak(path: Path, let_go: bool) -> tuple[int, int, int]:
    """(the parsed document, the peak of loading it, the contexts loaded), in bytes traced: the
    document read, then loaded with its records let go of (or, to compare, kept)."""
    tracemalloc.start()
    try:
        doc = read_document(path)
        parsed, _ = tracemalloc.get_traced_memory()
        tracemalloc.reset_peak()
        reread = (lambda: read_document(path)) if let_go else None
        _, contexts = load_document(doc, reread=reread)
        del doc
        loaded, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert contexts
    return parsed, peak, loaded


@pytest.mark.parametrize("name", ["codemie_session-3fe1b6bc", "psf__requests-1142"])
def test_loading_never_holds_the_parsed_records_and_the_context_whole(
    tmp_path: Path, name: str
) -> None:
    """At its peak, loading holds little more (a fifth of the file) than the larger of the
    parsed document and the context: compactkit JSON (the largest Claude Code session, four
    times over) and a mini-swe-agent trajectory (the largest, its steps eight times over).
    Kept whole, the records and the context took a quarter to two thirds of the file more."""
    source = corpus_file(name)
    path = tmp_path / "session.json"
    if source.suffix == ".jsonl":
        ctx = compactkit.load_one(source)
        path.write_text(compactkit.render(ctx.replace(messages=ctx.messages * 4)), "utf-8")
    else:
        data = json.loads(source.read_text(encoding="utf-8"))
        # the steps without the last message, the output submitted (two thirds of the file):
        # converting one message takes a few times its size for a moment, whatever the rest
        head, steps = data["messages"][:2], data["messages"][2:-1]
        data["messages"] = head + [json.loads(json.dumps(m)) for _ in range(8) for m in steps]
        path.write_text(json.dumps(data), encoding="utf-8")
    compactkit.load(path)  # what a first load imports is not the load's
    size = path.stat().st_size
    parsed, peak, loaded = _load_peak(path, let_go=True)
    assert peak - max(parsed, loaded) < size / 5, f"{(peak - max(parsed, loaded)) / size:.2f}x"
