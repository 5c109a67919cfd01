"""Big sessions: JSON Lines read a line at a time, whole-document JSON read one byte a character,
`expand` and `convert` writing a message at a time, and what `run -o OUT` removes kept in the
content-addressed store OUT.recovery.jsonl beside the output (found by `expand` and `validate`),
or in the output with `--embed-recovery`."""

from __future__ import annotations

import hashlib
import io
import json
import tracemalloc
from pathlib import Path

import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import compactkit
import compactkit.jsonio as jsonio
import compactkit.recovery as recovery
from compactkit.cli import make_cli
from compactkit.context import Message, OmittedBlock, TextBlock
from compactkit.errors import BadInputError
from compactkit.formats.base import parse_text, read_document
from compactkit.formats.native import NativeFormat, write_native
from compactkit.registry import make_registry

from .conftest import corpus_file, corpus_files

CLI = make_cli(lambda: make_registry(entry_points=False))


def cli(*args: str | Path) -> tuple[int, str, str]:
    result = CliRunner().invoke(CLI, [str(a) for a in args])
    return result.exit_code, result.stdout, result.stderr


@pytest.fixture
def session() -> Path:
    return corpus_file("codemie_session-3fe1b6bc")


def compacted(tmp_path: Path, session: Path, *extra: str) -> Path:
    out = tmp_path / "small.json"
    code, _, stderr = cli(
        "run", session, "-s", "sliding-window", "--budget", "30000", "-o", out, *extra
    )
    assert code == 0, stderr
    return out


# --------------------------------------------------------------------------- the sidecar store


def test_run_writes_the_removed_messages_beside_the_output(tmp_path: Path, session: Path) -> None:
    digest = hashlib.sha256(session.read_bytes()).hexdigest()
    out = compacted(tmp_path, session)
    store = Path(f"{out}.recovery.jsonl")
    assert compactkit.load_one(out, recovery=False).recovery == {}
    lines = store.read_text(encoding="utf-8").splitlines()
    assert json.loads(lines[0]) == {"format": "compactkit.recovery/1", "entries": len(lines) - 1}
    entries = [json.loads(line) for line in lines[1:]]
    assert entries and all(recovery.check_entry(e["etag"], e["payload"]) for e in entries)
    (tmp_path / "embedded").mkdir()
    embedded = compacted(tmp_path / "embedded", session, "--embed-recovery")
    assert out.stat().st_size * 2 < embedded.stat().st_size
    assert hashlib.sha256(session.read_bytes()).hexdigest() == digest


def test_expand_finds_the_store_and_gives_back_the_session(tmp_path: Path, session: Path) -> None:
    out = compacted(tmp_path, session)
    back = tmp_path / "back.json"
    code, _, stderr = cli("expand", out, "-o", back)
    assert code == 0, stderr
    assert compactkit.load_one(back).messages == compactkit.load_one(session).messages
    code, stdout, _ = cli("validate", out)
    assert code == 0 and stdout.strip().endswith("ok")


def test_expand_takes_the_store_by_path_and_says_when_it_is_missing(
    tmp_path: Path, session: Path
) -> None:
    out = compacted(tmp_path, session)
    moved = tmp_path / "elsewhere.jsonl"
    Path(f"{out}.recovery.jsonl").rename(moved)
    code, _, stderr = cli("expand", out)
    assert code == 2 and "cannot be restored" in stderr and str(out) in stderr
    back = tmp_path / "back.json"
    code, _, stderr = cli("expand", out, "--stash", moved, "-o", back)
    assert code == 0, stderr
    assert compactkit.load_one(back).messages == compactkit.load_one(session).messages


def test_a_tampered_store_entry_is_refused_naming_its_etag(tmp_path: Path, session: Path) -> None:
    out = compacted(tmp_path, session)
    store = Path(f"{out}.recovery.jsonl")
    lines = store.read_text(encoding="utf-8").splitlines()
    entry = json.loads(lines[1])
    entry["payload"] = entry["payload"].replace("a", "b", 1)
    store.write_text("\n".join([lines[0], json.dumps(entry), *lines[2:]]) + "\n", encoding="utf-8")
    code, _, stderr = cli("expand", out, "-o", tmp_path / "back.json")
    assert code == 2 and entry["etag"] in stderr
    assert not (tmp_path / "back.json").exists()


def test_a_store_line_that_is_not_utf8_is_one_line_naming_it(tmp_path: Path, session: Path) -> None:
    out = compacted(tmp_path, session)
    store = Path(f"{out}.recovery.jsonl")
    lines = store.read_bytes().splitlines()
    store.write_bytes(
        b"\n".join([lines[0], lines[1][:20] + b"\xff\xfe" + lines[1][20:], *lines[2:]])
    )
    code, _, stderr = cli("expand", out, "-o", tmp_path / "back.json")
    assert code == 2
    assert stderr.strip().count("\n") == 0 and "recovery.jsonl:2: not UTF-8" in stderr
    assert not (tmp_path / "back.json").exists()


def test_embed_recovery_keeps_the_store_in_the_output(tmp_path: Path, session: Path) -> None:
    out = compacted(tmp_path, session, "--embed-recovery")
    assert not Path(f"{out}.recovery.jsonl").exists()
    assert compactkit.load_one(out).recovery
    back = tmp_path / "back.json"
    assert cli("expand", out, "-o", back)[0] == 0
    assert compactkit.load_one(back).messages == compactkit.load_one(session).messages
    code, _, stderr = cli("run", session, "--embed-recovery", "--stash", tmp_path / "s.json")
    assert code == 2 and "--embed-recovery" in stderr


def test_compacting_an_output_again_keeps_what_the_first_run_removed(
    tmp_path: Path, session: Path
) -> None:
    out = compacted(tmp_path, session)
    again = tmp_path / "smaller.json"
    code, _, stderr = cli("run", out, "-s", "sliding-window", "--budget", "15000", "-o", again)
    assert code == 0, stderr
    back = tmp_path / "back.json"
    assert cli("expand", again, "-o", back)[0] == 0
    assert compactkit.load_one(back).messages == compactkit.load_one(session).messages


def test_an_output_with_nothing_removed_leaves_no_store(tmp_path: Path, session: Path) -> None:
    out = compacted(tmp_path, session)
    assert Path(f"{out}.recovery.jsonl").exists()
    code, _, stderr = cli("run", session, "-s", "sliding-window", "--budget", "10000000", "-o", out)
    assert code == 0, stderr
    assert not Path(f"{out}.recovery.jsonl").exists()  # the old store described the old output


def test_a_huge_window_is_stored_in_parts_that_expand_back(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(recovery, "_CHUNK_ABOVE", 2000)
    monkeypatch.setattr(recovery, "_CHUNK", 500)
    ctx = compactkit.load_one(corpus_file("codemie_session-3fe1b6bc"))
    end = next(i for i, m in enumerate(ctx.messages) if i >= 30 and m.role == "user")
    window = list(ctx.messages[1:end])
    store: dict[str, str] = {}
    etag = recovery.put(store, window)
    assert etag == recovery.payload_etag(window) and len(store) > 3
    assert all(recovery.check_entry(k, v) for k, v in store.items())
    marker = Message(
        role="user",
        content=(OmittedBlock(etag=etag, messages=len(window)),),
        metadata={"compactkit_marker": "sliding-window"},
    )
    small = ctx.replace(messages=(ctx.messages[0], marker, *ctx.messages[end:]), recovery=store)
    assert compactkit.validate(small) == []
    assert recovery.expand(small).messages == ctx.messages
    assert recovery.flatten([marker], store) == window


def test_a_small_window_is_one_entry_as_before() -> None:
    items = [TextBlock(text="héllo 🙂"), TextBlock(text="x")]
    store: dict[str, str] = {}
    etag = recovery.put(store, items)
    text = compactkit.context.canonical_json([i.model_dump(mode="json") for i in items])
    assert store == {etag: text} and etag == compactkit.context.etag_of(text)


def traced_peak(*args: str | Path) -> float:
    """The peak of Python memory (MiB) while the command runs, over what was in use before."""
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        code, _, stderr = cli(*args)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert code in (0, 1), stderr  # 1: over budget, written all the same
    return (peak - before) / 2**20


def test_a_window_of_two_million_characters_is_never_held_whole(tmp_path: Path) -> None:
    session = corpus_file("pi-mono_before-compaction")
    traced_peak("inspect", session)  # the tokenizer, loaded once per process
    loading = traced_peak("inspect", session)  # read, load and count the session
    run = ("run", session, "-s", "sliding-window", "--budget", "30000", "-o")
    traced_peak(*run, tmp_path / "first.json")  # what a first run imports
    out = tmp_path / "small.json"
    running = traced_peak(*run, out)
    store = recovery.read_sidecar(f"{out}.recovery.jsonl")
    removed = sum(map(len, store.values())) / 2**20  # millions of characters
    assert removed > 1.5
    # held whole, the window took run 17.7 MiB over inspect's 6.4 and expand 22 MiB over reading
    # the output (it was one entry of 1.9 million characters, parsed whole); expand, which read
    # the whole store, now reads a part at a time from the file
    assert running - loading < removed, (running, loading, removed)
    reading = traced_peak("convert", out, "--to", "compactkit", "-o", tmp_path / "same.json")
    expanding = traced_peak("expand", out, "-o", tmp_path / "back.json")
    assert expanding - reading < removed / 4, (expanding, reading, removed)
    assert len(store) > 10  # a window of many parts
    assert (
        compactkit.load_one(tmp_path / "back.json").messages
        == compactkit.load_one(session).messages
    )


def test_a_store_read_an_entry_at_a_time_holds_what_a_whole_read_holds(
    tmp_path: Path, session: Path
) -> None:
    messages = compactkit.load_one(session).messages
    entries: dict[str, str] = {}
    for start in range(0, 100, 10):
        recovery.put(entries, messages[start : start + 10])
    path = tmp_path / "small.json.recovery.jsonl"
    with path.open("w", encoding="utf-8") as handle:
        recovery.write_sidecar(entries, handle)
    lazy = recovery.SidecarStore(path)
    assert len(lazy) == 10 and dict(lazy) == recovery.read_sidecar(path) == entries
    header, *lines = path.read_text(encoding="utf-8").splitlines()
    path.write_text("\n".join([header, *reversed(lines)]) + "\n", encoding="utf-8")
    with pytest.raises(BadInputError, match="recovery store line"):  # never another payload
        lazy[next(iter(lazy))]


# --------------------------------------------------------------------------- streaming JSONL


def test_every_corpus_jsonl_reads_as_a_whole_read_would() -> None:
    files = [p for p in corpus_files() if p.suffix == ".jsonl"]
    assert files
    for path in files:
        streamed = read_document(path)
        whole = parse_text(path.read_text(encoding="utf-8-sig"), str(path))
        assert (streamed.kind, streamed.data) == (whole.kind, whole.data), path


def test_a_line_separator_inside_a_record_is_not_a_line_break(tmp_path: Path) -> None:
    # U+2028 is legal raw inside a JSON string; only "\n" ends a JSONL record
    path = tmp_path / "s.jsonl"
    records = [
        {"role": "user", "content": "first\u2028line"},
        {"role": "assistant", "content": "ok"},
    ]
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records), "utf-8")
    assert read_document(path).data == records


def test_a_bad_record_or_byte_is_one_line_naming_where(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    path.write_bytes(b'{"a": 1}\n{"b": 2}\n{"c": \n')
    # a line that is not JSON is reported with its number; each format then skips it (as its
    # agent's own loader does) or refuses the file naming that line (docs/formats.md)
    doc = read_document(path)
    assert doc.data == [{"a": 1}, {"b": 2}]
    ((line, last),) = [(b.line, b.last) for b in doc.bad_lines]
    assert (line, last) == (3, True)
    path.write_bytes(b'{"a": 1}\n{"b": "\xff"}\n')
    with pytest.raises(BadInputError, match=r"bad byte at offset 16"):
        read_document(path)


# --------------------------------------------------------------------------- whole-document JSON


def test_every_corpus_json_reads_as_a_plain_read_would() -> None:
    """A whole-document session is read with its wide characters as JSON escapes (one byte a
    character in memory); the value read is the one a plain read gives."""
    files = [p for p in corpus_files() if p.suffix != ".jsonl"]
    assert files
    for path in files:
        read = read_document(path)
        plain = parse_text(path.read_text(encoding="utf-8-sig"), str(path))
        assert (read.kind, read.data) == (plain.kind, plain.data), path


def test_a_whole_document_with_an_emoji_is_read_in_under_four_times_its_size(
    tmp_path: Path,
) -> None:
    """One emoji made the whole text a four-byte-a-character string, and the read peaked at
    eleven times the file (the bytes, that text and a stripped copy of it). Now the text is
    parsed a piece at a time, never held whole: the peak is the value parsed (its strings that
    hold wide characters two or four bytes a character) and a few pieces of text."""
    ctx = compactkit.load_one(corpus_file("codemie_session-3fe1b6bc"))
    path = tmp_path / "session.json"
    path.write_text(compactkit.render(ctx.replace(messages=ctx.messages * 10)) + " \n", "utf-8")
    read_document(path)  # what a first read imports is not the read's
    text = path.read_text(encoding="utf-8")
    assert max(text) > "\uffff"  # the session holds characters that make a string four-byte
    del text
    tracemalloc.start()
    try:
        doc = read_document(path)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert doc.data == json.loads(path.read_text(encoding="utf-8"))
    assert peak < 4 * path.stat().st_size, f"{peak / path.stat().st_size:.2f}x the file"


def test_a_bad_whole_document_is_reported_where_a_plain_read_reports_it(tmp_path: Path) -> None:
    """Positions in a parse error are those of the file as it is, wide characters before them
    (which the read writes as escapes) or not."""
    path = tmp_path / "s.json"
    text = '{"messages": [{"text": "café → 🙂 ✓"} x]}'
    path.write_text(text, encoding="utf-8")
    with pytest.raises(json.JSONDecodeError) as plain:
        json.loads(text)
    where = f"not JSON: {plain.value.msg} at line 1 column {plain.value.colno}"
    with pytest.raises(BadInputError, match=where):
        read_document(path)
    path.write_text('{"text": "\\→"}', encoding="utf-8")  # a backslash escaping no escape
    with pytest.raises(BadInputError, match=r"Invalid \\escape"):
        read_document(path)


def test_the_native_writer_streams_the_text_dump_gives(tmp_path: Path) -> None:
    for path in corpus_files()[:40]:
        for ctx in compactkit.load(path):
            handle = io.StringIO()
            write_native(ctx, handle)
            assert handle.getvalue() == NativeFormat().dump([ctx]), path


def test_expand_writes_the_text_expand_would_render(tmp_path: Path, session: Path) -> None:
    out = compacted(tmp_path, session)
    back = tmp_path / "back.json"
    assert cli("expand", out, "-o", back)[0] == 0
    store = recovery.read_sidecar(f"{out}.recovery.jsonl")
    expanded = recovery.expand(compactkit.load_one(out), store)
    assert back.read_text(encoding="utf-8") == compactkit.render(expanded)


@settings(
    max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    values=st.lists(
        st.text(alphabet='ab"\\ \n,:{}[]uD8é→—🧪\ud83d\ude00', max_size=12), max_size=6
    ),
    ascii_only=st.booleans(),
    indent=st.sampled_from([None, 1]),
)
def test_text_read_in_pieces_parses_to_the_value_a_whole_read_gives(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    values: list[str],
    ascii_only: bool,
    indent: int | None,
) -> None:
    """Pieces of a few bytes, cut anywhere a character or an escape may be cut: the value parsed
    a piece at a time is what the file's own text parses to."""
    if not ascii_only and any("\ud800" <= c <= "\udfff" for v in values for c in v):
        return  # a lone surrogate cannot be written raw as UTF-8
    monkeypatch.setattr(jsonio, "_READ", 5)
    text = json.dumps(
        {"k": values, "n→": {"x": values[:1]}}, ensure_ascii=ascii_only, indent=indent
    )
    path = tmp_path / "s.json"
    path.write_text(text, encoding="utf-8")
    assert jsonio.read_value(path, str(path)) == jsonio.loads(text, "s")
