"""A whole-document session (native JSON, a trajectory, Cline's history, a provider request) is
parsed from its file a piece at a time (`jsonio.read_value`): the value is the one `json.loads`
gives on the whole text, and every way the text can fail fails as it did."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import compactkit
import compactkit.jsonio as jsonio
from compactkit.errors import BadInputError
from compactkit.formats.base import MAX_DEPTH, parse_text, read_document
from compactkit.jsonio import interned

from .conftest import corpus_files, sample_files


def whole_documents() -> list[Path]:
    """Every sample and corpus file that is one JSON value (not JSON Lines)."""
    out = []
    for path in dict.fromkeys([*sample_files(), *corpus_files()]):
        try:
            json.loads(path.read_text(encoding="utf-8-sig"))
        except (ValueError, UnicodeDecodeError):
            continue
        out.append(path)
    return out


def outcome(read: Any) -> tuple[str, str]:
    """What a read gives, to compare: the value as exact JSON text (types and key order), or
    which failure."""
    try:
        value = read()
    except json.JSONDecodeError:
        return ("not JSON", "")
    except BadInputError as exc:
        return ("refused", exc.what)
    return ("value", json.dumps(value, ensure_ascii=False))


def pieces(path: Path) -> tuple[str, str]:
    return outcome(lambda: jsonio.read_value(path, str(path), interned))


def whole(text: str) -> tuple[str, str]:
    return outcome(lambda: jsonio.loads(text, "x", object_hook=interned))


DOCUMENTS = whole_documents()


def test_the_whole_document_formats_are_all_there() -> None:
    folders = {p.parent.name for p in DOCUMENTS}
    assert {"mini_swe_agent_traj", "openai_chat_tools"} <= folders or len(DOCUMENTS) >= 5


@pytest.mark.parametrize("chunk", [1 << 20, 97, 5])
@pytest.mark.parametrize("path", DOCUMENTS, ids=lambda p: f"{p.parent.name}/{p.name}"[:60])
def test_every_real_document_reads_as_a_whole_parse_reads_it(
    path: Path, chunk: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(jsonio, "_READ", chunk)
    got = pieces(path)
    assert got[0] == "value"
    assert got == whole(path.read_text(encoding="utf-8-sig"))


WRITERS = ["anthropic-messages", "compactkit", "openai-chat"]
"""The writers whose files are one JSON value (a request, a native context)."""


@pytest.mark.parametrize("writer", WRITERS)
def test_what_each_writer_writes_reads_as_a_whole_parse_reads_it(
    writer: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Requests and native contexts made from real conversations of several formats, as written
    and on one line, read at 13-byte and 64 KiB pieces."""
    path = tmp_path / "s.json"
    for source in DOCUMENTS[:4] + [p for p in corpus_files() if p.suffix == ".jsonl"][:1]:
        for ctx in compactkit.load(source):
            written = compactkit.render(ctx, writer)
            for text in (written, json.dumps(json.loads(written))):  # as written, one line
                path.write_text(text, encoding="utf-8")
                for chunk in (13, 1 << 16):
                    monkeypatch.setattr(jsonio, "_READ", chunk)
                    got = pieces(path)
                    assert got[0] == "value" and got == whole(text), (source.name, chunk)


def test_a_real_document_reads_the_same_whatever_byte_the_first_piece_ends_on(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A native context of a message holding wide characters, escapes (a surrogate pair, an
    escaped backslash before `u`), numbers that go on past a cut (`1.5e+7`) and literals: read
    with a first piece of every length, so each element is cut at every character."""
    raw = r"""{
 "format": "compactkit.context/1",
 "messages": [
  {"role": "user", "content": [{"type": "text",
   "text": "é→🧪 \u00e9 \ud83d\ude00 \ud800 lone, \\ud800 not an escape \" \\"}]},
  [1.5e+7, -0.25, 12345678901234567890, true, false, null, -Infinity, NaN, 0],
  -12.5E-3
 ],
 "n": 31415
}"""
    escaped = raw.replace("é", "\\u00e9").replace("→", "\\u2192").replace("🧪", "\\ud83e\\uddea")
    path = tmp_path / "s.json"
    for text in (raw, escaped):
        path.write_text(text, encoding="utf-8")
        expected = whole(text)
        assert expected[0] == "value" and "\ufffd lone" in expected[1]
        for chunk in range(1, len(text.encode()) + 2):
            monkeypatch.setattr(jsonio, "_READ", chunk)
            assert pieces(path) == expected, chunk


json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(10**30), 10**30)
    | st.floats(allow_nan=False)
    | st.text(alphabet='ab"\\ \n,:{}[]uD8é→—🧪\ud83d\ude00\udc00', max_size=10),
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.dictionaries(st.text(alphabet="ab→🧪\\", max_size=3), inner, max_size=4)
    ),
    max_leaves=20,
)


@settings(
    max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    value=json_values,
    wrap=st.sampled_from(["bare", "array", "messages", "nested"]),
    indent=st.sampled_from([None, 0, 2]),
    chunk=st.integers(1, 40),
    ascii_only=st.booleans(),
)
def test_any_document_cut_anywhere_reads_as_a_whole_parse_reads_it(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    value: Any,
    wrap: str,
    indent: int | None,
    chunk: int,
    ascii_only: bool,
) -> None:
    """Values of every JSON type at the top, as array elements, in `{"messages": [...]}` and
    deeper, with wide characters, escapes and lone surrogates (U+FFFD once read) split across
    pieces of 1 to 40 bytes."""
    doc = {
        "bare": value,
        "array": [value, value],
        "messages": {"format": "x", "messages": [value, {"k": value}], "info": {"v": value}},
        "nested": {"a": {"b": {"c": [value]}}, "d": [[value]]},
    }[wrap]
    text = json.dumps(doc, ensure_ascii=ascii_only, indent=indent)
    if any("\ud800" <= c <= "\udfff" for c in text):  # a lone surrogate has no UTF-8: escaped
        text = json.dumps(doc, indent=indent)
    path = tmp_path / "s.json"
    path.write_text(text, encoding="utf-8")
    monkeypatch.setattr(jsonio, "_READ", chunk)
    expected = whole(text)
    assert pieces(path) == expected
    assert "\ud800" not in expected[1]  # lone surrogates read as U+FFFD


def test_every_prefix_of_a_document_fails_or_reads_as_a_whole_parse(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A file cut anywhere (a crash while writing) is not JSON exactly when the whole parse
    says so: no cut value is taken for a whole one (`12` of `12.5`, `tr` of `true`)."""
    text = json.dumps(
        {"messages": [{"a": [1.25e-3, True, "x→\\"]}, 12.5, None, "🧪"], "n": -7}, indent=1
    )
    path = tmp_path / "s.json"
    for end in range(len(text) + 1):
        path.write_text(text[:end], encoding="utf-8")
        for chunk in (1, 3, 1 << 20):
            monkeypatch.setattr(jsonio, "_READ", chunk)
            assert pieces(path) == whole(text[:end]), (end, chunk)


def test_text_that_is_not_json_fails_as_the_whole_parse_does(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    base = '{"messages": [{"role": "user", "text": "hi"}, {"role": "assistant"}], "info": {}}'
    broken = [
        base.replace('"hi"', "hi"),
        base.replace(", ", " "),
        base.replace('"info"', "info"),
        base.replace(":", "", 1),
        base + " {}",
        base + "\n\u00a0",  # Unicode whitespace that JSON does not skip
        "\ufeff" + base,  # a second BOM after the one dropped
        base.replace("}]", "},]"),
        base.replace("hi", "a\tb"),  # a raw control character in a string
        "[1, 2,",
        "",
        "  \n",
        '["a" "b"]',
        '{"a" 1}',
        "NaNa",
    ]
    path = tmp_path / "s.json"
    for text in broken:
        path.write_text("\ufeff" + text, encoding="utf-8")
        for chunk in (1, 4, 1 << 20):
            monkeypatch.setattr(jsonio, "_READ", chunk)
            assert pieces(path) == whole(text) == ("not JSON", ""), (text, chunk)


def nested(depth: int) -> str:
    return "[" * depth + "]" * depth


@pytest.mark.parametrize("chunk", [2, 1 << 20])
def test_nesting_past_the_limit_is_refused_at_any_level_as_before(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, chunk: int
) -> None:
    """At the top, as an element of a top-level array, in `{"messages": [...]}`, in an object
    three levels down: the limit is `MAX_DEPTH` in the whole file, as a whole parse counts it."""
    monkeypatch.setattr(jsonio, "_READ", chunk)
    path = tmp_path / "s.json"
    for template in ("{}", "[1, {}]", '{"messages": [{}]}', '{"a": {"b": {"c": [{}]}}}'):
        for depth in range(MAX_DEPTH - 5, MAX_DEPTH + 2):
            text = template.replace("{}", nested(depth))
            path.write_text(text, encoding="utf-8")
            expected = whole(text)
            assert pieces(path) == expected, (template, depth)
        assert expected[0] == "refused" and "nested deeper" in expected[1]
    path.write_text('{"messages": [' + nested(100_000) + "]}", encoding="utf-8")
    assert pieces(path) == ("refused", f"JSON nested deeper than {MAX_DEPTH} levels")


def test_a_deep_value_before_text_that_is_not_json_is_not_json(tmp_path: Path) -> None:
    """As a whole parse: the text is not one JSON value, so it goes on to be read as JSON
    Lines (or fails as text that is not JSON), whatever it nests."""
    text = "[" + nested(MAX_DEPTH + 5) + ", oops]"
    path = tmp_path / "s.json"
    path.write_text(text, encoding="utf-8")
    assert pieces(path) == whole(text) == ("not JSON", "")
    with pytest.raises(BadInputError, match="not JSON: Expecting value at line 1"):
        read_document(path)


@pytest.mark.parametrize("chunk", [3, 1 << 20])
def test_a_number_too_long_is_refused_even_across_pieces(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, chunk: int
) -> None:
    monkeypatch.setattr(jsonio, "_READ", chunk)
    path = tmp_path / "s.json"
    path.write_text('{"messages": [{"n": ' + "7" * 5000 + "}]}", encoding="utf-8")
    assert pieces(path) == ("refused", "a number has too many digits to read")


@pytest.mark.parametrize("chunk", [1, 7, 1 << 20])
def test_bytes_that_are_not_text_are_refused_with_their_offset(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, chunk: int
) -> None:
    monkeypatch.setattr(jsonio, "_READ", chunk)
    path = tmp_path / "s.json"
    good = '{"messages": [{"text": "é→🧪"}], "n": 1}'.encode()
    for at in (0, 5, 20, len(good) - 1):
        path.write_bytes(good[:at] + b"\xff" + good[at:])
        with pytest.raises(BadInputError, match=rf"not UTF-8 text \(bad byte at offset {at}\)"):
            read_document(path)
    # a bad byte after a refused number is still the error a whole read gives
    path.write_bytes(b'{"n": ' + b"7" * 5000 + b', "t": "\xff"}')
    with pytest.raises(BadInputError, match="not UTF-8 text"):
        read_document(path)
    path.write_bytes(b'{"a": "\x00"}')
    with pytest.raises(BadInputError, match="binary data"):
        read_document(path)


def test_a_parse_error_names_the_line_and_column_of_the_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Positions count the file's own characters (wide ones one each), as they always did."""
    monkeypatch.setattr(jsonio, "_READ", 4)
    text = '[\n {"text": "🧪🧪🧪 é→"},\n {"text": "x" "y"}\n]\n'
    path = tmp_path / "s.json"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(BadInputError) as caught:
        read_document(path)
    assert caught.value.what == "not JSON: Expecting ',' delimiter at line 3 column 15"
    with pytest.raises(BadInputError) as again:
        parse_text(text, str(path))
    assert again.value.what == caught.value.what


def test_json_lines_whose_first_record_is_damaged_still_read_as_json_lines(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(jsonio, "_READ", 3)
    path = tmp_path / "s.jsonl"
    records = [{"type": "user", "n": n} for n in range(4)]
    path.write_text('{"type": "us\n' + "".join(json.dumps(r) + "\n" for r in records))
    doc = read_document(path)
    assert doc.kind == "jsonl" and doc.data == records
    assert [b.line for b in doc.bad_lines] == [1]


def test_a_document_on_one_line_reads_as_one_value(tmp_path: Path) -> None:
    """Cline's history and provider requests are one line: one JSON value, not a JSON Lines
    file of one record."""
    path = tmp_path / "s.json"
    for value in ({"messages": [{"role": "user", "content": "hi"}]}, [{"role": "user"}]):
        for end in ("", "\n", "\n\n  \n"):
            path.write_text(json.dumps(value) + end, encoding="utf-8")
            doc = read_document(path)
            assert (doc.kind, doc.data) == ("json", value)
