"""ServeState: what a tool server sends the second time, on payloads from real sessions."""

from __future__ import annotations

import json
import multiprocessing
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

import compactkit
from compactkit import AgentContext, Pipeline
from compactkit.context import (
    CollapsedBlock,
    ElidedBlock,
    Message,
    TextBlock,
    ToolCallBlock,
    ToolResultBlock,
    marker_text,
)
from compactkit.recovery import payload_etag
from compactkit.serve import (
    MemoryServeStore,
    ServeState,
    SqliteServeStore,
    observer,
    serve_key,
    text_etag,
)
from compactkit.strategies.etag_collapse import EtagCollapse, field_etag
from compactkit.strategies.observation_mask import ObservationMask

from ..conftest import SAMPLES

SESSION = SAMPLES / "gemini3pro_sphinx-doc__sphinx-9229.traj.json"


def _payloads() -> list[str]:
    """The longest distinct tool outputs of a bundled real session."""
    (ctx,) = compactkit.load(SESSION)
    texts = {r.text for m in ctx.messages for r in m.tool_results if len(r.text) > 400}
    return sorted(texts, key=len, reverse=True)[:3]


def test_first_serve_is_full_then_a_marker_while_unchanged() -> None:
    big, other, _ = _payloads()
    key, path = serve_key("read_text_file", {"path": "/src/conf.py"})
    first = ServeState().serve(key, big, path=path)
    again = first.state.serve(key, big, path=path)
    assert first.full and first.text == big
    assert not again.full
    (marker,) = again.parts
    assert isinstance(marker, CollapsedBlock)
    assert (marker.path, marker.etag, marker.unchanged) == ("/src/conf.py", text_etag(big), True)
    assert "same as the result of call 1" in again.text and "\n" not in again.text
    changed = again.state.serve(key, other, path=path)
    assert changed.full and changed.text == other  # a changed file goes in full


def test_marker_is_etag_collapses_marker_for_the_same_payload() -> None:
    big = _payloads()[0]
    call = ToolCallBlock(id="c1", name="Read", input={"file_path": "/src/conf.py"})
    call2 = ToolCallBlock(id="c2", name="Read", input={"file_path": "/src/conf.py"})
    ctx = AgentContext(
        messages=(
            Message(role="user", content=(TextBlock(text="task"),)),
            Message(role="assistant", content=(call,)),
            Message(
                role="tool",
                content=(ToolResultBlock(tool_call_id="c1", content=(TextBlock(text=big),)),),
            ),
            Message(role="assistant", content=(call2,)),
            Message(
                role="tool",
                content=(ToolResultBlock(tool_call_id="c2", content=(TextBlock(text=big),)),),
            ),
        )
    )
    collapsed = EtagCollapse().compact(ctx).messages[4].tool_results[0].content[0]
    key, path = serve_key(call.name, call.input)
    served = ServeState().serve(key, big, path=path).state.serve(key, big, path=path)
    (marker,) = served.parts
    assert isinstance(collapsed, CollapsedBlock) and isinstance(marker, CollapsedBlock)
    assert (marker.etag, marker.path, marker.unchanged) == (collapsed.etag, collapsed.path, True)
    assert json.loads(marker_text(marker)).keys() == json.loads(marker_text(collapsed)).keys()


def test_keys_follow_the_path_a_tool_names_else_the_arguments() -> None:
    assert serve_key("Read", {"file_path": "a.py"}) == serve_key("Read", {"file_path": " a.py "})
    assert serve_key("Read", {"file_path": "a.py"})[1] == "a.py"
    assert serve_key("Bash", {"command": "cat a.py"})[1] == "a.py"
    ranged = serve_key("read_text_file", {"path": "a.py", "head": 5})
    assert ranged != serve_key("read_text_file", {"path": "a.py"})  # a range is its own view
    assert serve_key("git_status", {"repo_path": "/r"}) == (
        'call\x1fgit_status\x1f{"repo_path":"/r"}',
        None,
    )


def _doc(status: str) -> str:
    return json.dumps(
        {
            "description": "A tool that reports the build. " * 20,
            "schema": {
                "type": "object",
                "properties": {"x": {"type": "string"}},
                "notes": "n" * 300,
            },
            "status": status,
        }
    )


def test_json_payload_resends_only_the_changed_field_and_static_fields_once() -> None:
    state = ServeState()
    first = state.serve("build", _doc("running"))
    second = first.state.serve("build", _doc("passed"))
    carrier, *markers = second.parts
    assert isinstance(carrier, ElidedBlock) and json.loads(carrier.text) == {"status": "passed"}
    assert {m.field for m in markers if isinstance(m, CollapsedBlock)} == {"description", "schema"}
    for m in markers:
        assert isinstance(m, CollapsedBlock) and m.field is not None
        value = json.loads(_doc("x"))[m.field]
        assert m.etag == field_etag(
            m.field, json.dumps(value, sort_keys=True, separators=(",", ":"))
        )
    assert len(second.text) < len(_doc("passed")) / 3
    third = second.state.serve("build", _doc("failed"))
    assert "same as the result of call 1" in third.text  # static fields still name call 1
    assert json.loads(third.text.splitlines()[0]) == {"status": "failed"}


def test_refresh_skip_known_and_reset() -> None:
    big = _payloads()[0]
    state = ServeState().serve("k", big).state
    assert state.serve("k", big, refresh=True).full
    skipped = ServeState().serve("k", big, skip=True)
    assert skipped.parts == () and not skipped.state.serve("k", big).full  # recorded as served
    fields = ServeState().serve("build", _doc("a"), skip=["description", "schema"])
    assert json.loads(fields.text) == {"status": "a"}
    restarted = ServeState().serve("k", big, known=[text_etag(big)])
    assert not restarted.full and "same as the content with this etag" in restarted.text
    assert state.reset().serve("k", big).full
    assert state.reset([text_etag(big)]).serve("k", big).full
    assert not state.reset(["0000000000000000"]).serve("k", big).full


def test_state_is_a_plain_serializable_value() -> None:
    big = _payloads()[0]
    state = ServeState().serve("k", big).state.serve("build", _doc("a")).state
    back = ServeState.model_validate_json(state.model_dump_json())
    assert back == state
    assert not back.serve("k", big).full
    with pytest.raises(Exception, match="frozen"):
        state.calls = 3  # type: ignore[misc]
    assert text_etag(big) in state.etags


def _tool_context(payloads: list[str]) -> AgentContext:
    messages = [Message(role="user", content=(TextBlock(text="task: fix the bug"),))]
    for n, text in enumerate(payloads):
        messages.append(
            Message(
                role="assistant",
                content=(ToolCallBlock(id=f"c{n}", name="Read", input={"file_path": f"f{n}.py"}),),
            )
        )
        messages.append(
            Message(
                role="tool",
                content=(ToolResultBlock(tool_call_id=f"c{n}", content=(TextBlock(text=text),)),),
            )
        )
    messages.append(Message(role="assistant", content=(TextBlock(text="done"),)))
    return AgentContext(messages=tuple(messages))


def test_compaction_event_forgets_what_the_compaction_removed() -> None:
    payloads = _payloads()
    store = MemoryServeStore()
    for n, text in enumerate(payloads):
        key, path = serve_key("Read", {"file_path": f"f{n}.py"})
        store.serve("s", key, text, path=path)
    pipeline = Pipeline([ObservationMask(keep_last=1)])
    pipeline.subscribe(observer(store, "s"))
    pipeline.run(_tool_context(payloads))
    # the two older outputs were masked: served in full again; the newest is still held
    for n, text in enumerate(payloads):
        key, path = serve_key("Read", {"file_path": f"f{n}.py"})
        assert store.serve("s", key, text, path=path).full == (n < 2)


def _serve_many(db: str, worker: int, count: int) -> None:
    store = SqliteServeStore(db, timeout=60)
    for n in range(count):
        store.serve("shared", f"w{worker}-{n}", f"payload {worker} {n} " * 40)
        store.serve("shared", "common", "the same payload for everyone " * 40)


def test_sqlite_state_survives_processes_and_concurrent_writers(tmp_path: Path) -> None:
    db = str(tmp_path / "serve.db")
    SqliteServeStore(db)
    workers, count = 4, 15
    ctx = multiprocessing.get_context("spawn")
    procs = [ctx.Process(target=_serve_many, args=(db, w, count)) for w in range(workers)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(120)
        assert p.exitcode == 0
    state = SqliteServeStore(db).load("shared")
    assert state.calls == workers * count * 2  # no serve lost to a concurrent writer
    assert len(state.served) == workers * count + 1
    again = SqliteServeStore(db).serve("shared", "w0-0", "payload 0 0 " * 40)
    assert not again.full  # a new process sees what the others served
    assert SqliteServeStore(db).load("other").calls == 0


@given(st.text(alphabet=st.characters(exclude_categories=("Cs",))))
def test_a_text_etag_is_the_etag_collapse_gives_the_same_result(text: str) -> None:
    """The serve state hashes a text's JSON string directly; the etag is the recovery store's."""
    assert text_etag(text) == payload_etag((TextBlock(text=text),))


def test_text_etag_of_real_payloads_and_of_a_lone_surrogate() -> None:
    for text in _payloads():
        assert text_etag(text) == payload_etag((TextBlock(text=text),))
    with pytest.raises(UnicodeEncodeError):  # as the recovery store's etag refuses it
        payload_etag((TextBlock(text="a\ud800"),))
    with pytest.raises(UnicodeEncodeError):
        text_etag("a\ud800")
