"""A plugin strategy under a time limit runs in a reused worker process: on real sessions it gives
exactly what it gives in-process, call after call (the worker holds what it was sent and what it
returned); whatever it does (hang, end its process, change its input, leave a thread, read a
changed environment) the caller's context is untouched and the next call gets a worker that is
as good as new."""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path
from typing import Any

import pytest

import compactkit
from compactkit.bench.replay import call_points, run_session
from compactkit.context import AgentContext, ElidedBlock, TextBlock, ToolResultBlock
from compactkit.errors import ContractViolation, StrategyError, StrategyTimeout
from compactkit.pipeline import Pipeline
from compactkit.recovery import put
from compactkit.registry import get_counter
from compactkit.strategy import Strategy

from .conftest import corpus_files, sample

pytestmark = pytest.mark.skipif(not hasattr(os, "fork"), reason="isolation needs fork")
SESSION = sample("sphinx-doc")


class Caps(Strategy):
    """A plugin that changes what a real one does: long tool outputs become recoverable markers
    (new messages, recovery entries), and the context's metadata counts its calls."""

    name = "caps"

    def compact(self, ctx: AgentContext) -> AgentContext:
        recovery = dict(ctx.recovery)
        messages = []
        for msg in ctx.messages:
            blocks = tuple(self._cap(b, recovery) for b in msg.content)
            changed = any(a is not b for a, b in zip(blocks, msg.content, strict=True))
            messages.append(msg.model_copy(update={"content": blocks}) if changed else msg)
        rounds = int(str(ctx.metadata.get("caps-rounds", 0))) + 1
        metadata = {**ctx.metadata, "caps-rounds": rounds}
        return ctx.replace(messages=tuple(messages), recovery=recovery, metadata=metadata)

    def _cap(self, block: Any, recovery: dict[str, str]) -> Any:
        if not isinstance(block, ToolResultBlock):
            return block
        parts = []
        for part in block.content:
            if isinstance(part, TextBlock) and len(part.text) > 2_000:
                etag = put(recovery, [part])
                part = ElidedBlock(etag=etag, ref="caps", text=part.text[:200], label="capped")
            parts.append(part)
        return block.model_copy(update={"content": tuple(parts)})


class WherePid(Strategy):
    """Says which process it ran in, and what `CAPS_SEEN` was there."""

    name = "where-pid"

    def compact(self, ctx: AgentContext) -> AgentContext:
        seen = {"pid": os.getpid(), "seen": os.environ.get("CAPS_SEEN", "")}
        return ctx.replace(metadata={**ctx.metadata, **seen})


def _pid(pipeline: Pipeline, ctx: AgentContext) -> int:
    return int(str(pipeline.run(ctx).context.metadata["pid"]))


def _files() -> list[Path]:
    """Three real sessions of different formats, mid-sized (a few hundred calls between them)."""
    picked: dict[str, Path] = {}
    for path in corpus_files():
        if 100_000 < path.stat().st_size < 800_000:
            picked.setdefault(path.parent.name, path)
    return sorted(picked.values())[:3] or [SESSION]


@pytest.mark.parametrize("path", _files(), ids=lambda p: p.parent.name)
def test_a_plugin_in_its_worker_gives_what_it_gives_in_process(path: Path) -> None:
    """Every call of a replay (the history grows by the session's messages after each output),
    in-process and in the worker side by side: the same context to the byte, the same report,
    kept messages the caller's own objects."""
    ctx = max(compactkit.load(path), key=lambda c: len(c.messages))
    inline, isolated = Pipeline([Caps()]), Pipeline([Caps()], timeout=60)
    ours = theirs = ctx.replace(messages=())
    consumed = 0
    for index in call_points(ctx)[::3]:
        new = ctx.messages[consumed:index]
        ours, theirs, consumed = ours.append(*new), theirs.append(*new), index
        a, b = inline.run(ours), isolated.run(theirs)
        assert b.context.to_json() == a.context.to_json()
        assert [s.changes for s in b.steps] == [s.changes for s in a.steps]
        assert all(
            m is o for m, o in zip(b.context.messages, theirs.messages, strict=False) if m == o
        )
        ours, theirs = a.context, b.context
    assert int(str(theirs.metadata["caps-rounds"])) > 1


@pytest.mark.parametrize("mode", ["replay", "view"])
def test_a_bench_row_is_the_same_in_the_worker(mode: str) -> None:
    path = _files()[0]
    ctx = max(compactkit.load(path), key=lambda c: len(c.messages))
    counter = get_counter("o200k_base")
    rows = [
        run_session(path.name, ctx, Pipeline([Caps()], timeout=t), mode, counter, [], trigger=8_000)
        for t in (None, 60)
    ]
    assert rows[0].compactions or mode == "view"
    assert {**rows[1].as_json(), "seconds": 0} == {**rows[0].as_json(), "seconds": 0}


def test_one_worker_serves_every_call_and_a_hang_gets_a_fresh_one(tmp_path: Path) -> None:
    pidfile = tmp_path / "pid"

    class Hangs(Strategy):
        name = "hangs"

        def compact(self, ctx: AgentContext) -> AgentContext:
            pidfile.write_text(str(os.getpid()))
            time.sleep(600)
            return ctx

    ctx = compactkit.load_one(SESSION)
    before = ctx.model_copy(deep=True)
    isolated = Pipeline([WherePid()], timeout=60)
    first = _pid(isolated, ctx)
    assert first != os.getpid() and _pid(isolated, ctx) == first
    both = Pipeline([Caps(), WherePid()], timeout=60)
    assert _pid(both, ctx) == _pid(both, ctx)  # one worker for every step of a pipeline
    with pytest.raises(StrategyTimeout, match=r"strategy 'hangs' did not finish within 0\.5 s"):
        Pipeline([Hangs()], timeout=0.5).run(ctx)
    assert ctx == before
    assert _pid(isolated, ctx) not in (int(pidfile.read_text()), os.getpid())
    with pytest.raises(ProcessLookupError):
        os.kill(int(pidfile.read_text()), 0)  # the worker that hung is gone, not left behind


class EndsItsProcess(Strategy):
    name = "ends-its-process"

    def compact(self, ctx: AgentContext) -> AgentContext:
        os._exit(0)


class KillsItsProcess(Strategy):
    name = "kills-its-process"

    def compact(self, ctx: AgentContext) -> AgentContext:
        os.kill(os.getpid(), 9)
        return ctx


@pytest.mark.parametrize(
    ("cls", "how"), [(EndsItsProcess, "exit status 0"), (KillsItsProcess, "killed by signal 9")]
)
def test_a_strategy_that_ends_its_worker_fails_by_name(cls: type[Strategy], how: str) -> None:
    ctx = compactkit.load_one(SESSION)
    before = ctx.model_copy(deep=True)
    with pytest.raises(StrategyError) as caught:
        Pipeline([cls()], timeout=60).run(ctx)
    assert str(caught.value) == (
        f"strategy {cls.name!r} failed: its process ended without a result ({how})"
    )
    assert caught.value.exit_code == 3
    assert ctx == before
    assert Pipeline([Caps()], timeout=60).run(ctx).context == Pipeline([Caps()]).run(ctx).context


def _mutate_message_metadata(ctx: AgentContext) -> None:
    ctx.messages[-1].metadata["owned"] = True


def _mutate_tool_input(ctx: AgentContext) -> None:
    call = next(b for m in ctx.messages for b in m.tool_calls if isinstance(b.input, dict))
    assert isinstance(call.input, dict)
    call.input["owned"] = True


def _mutate_context_metadata(ctx: AgentContext) -> None:
    ctx.metadata["owned"] = True


def _mutate_recovery(ctx: AgentContext) -> None:
    ctx.recovery["0000000000000000"] = "owned"


def _replace_content(ctx: AgentContext) -> None:
    object.__setattr__(ctx.messages[0], "content", (TextBlock(text="owned"),))


@pytest.mark.parametrize(
    "mutate",
    [
        _mutate_message_metadata,
        _mutate_tool_input,
        _mutate_context_metadata,
        _mutate_recovery,
        _replace_content,
    ],
)
def test_a_strategy_that_changes_its_input_in_the_worker_breaks_the_contract(
    mutate: Any, tmp_path: Path
) -> None:
    done = tmp_path / "done"

    class Mutates(Strategy):
        """Changes its input on its first call; later, returns every message rebuilt (so that
        a worker holding what it changed would send the change back)."""

        name = "mutates"

        def compact(self, ctx: AgentContext) -> AgentContext:
            if not done.exists():  # (a file: the worker's memory is not the caller's)
                done.touch()
                mutate(ctx)
                return ctx
            return ctx.replace(messages=tuple(m.model_copy() for m in ctx.messages))

    ctx = compactkit.load_one(SESSION)
    before = ctx.model_copy(deep=True)
    isolated = Pipeline([Mutates()], timeout=60)
    with pytest.raises(ContractViolation, match=r"strategy 'mutates' .*mutated its input"):
        isolated.run(ctx)
    assert ctx == before
    # what it changed stayed in the worker it ran in: the next call is as in-process
    assert isolated.run(ctx).context.to_json() == Pipeline([Mutates()]).run(ctx).context.to_json()
    assert ctx == before


def test_a_thread_a_strategy_leaves_running_ends_with_its_worker() -> None:
    class LeavesAThread(Strategy):
        name = "leaves-a-thread"

        def compact(self, ctx: AgentContext) -> AgentContext:
            threading.Thread(target=time.sleep, args=(600,), daemon=True).start()
            return ctx.replace(metadata={**ctx.metadata, "thread-pid": os.getpid()})

    ctx = compactkit.load_one(SESSION)
    out = Pipeline([LeavesAThread(), WherePid()], timeout=60).run(ctx).context
    left = int(str(out.metadata["thread-pid"]))
    assert left != os.getpid() and out.metadata["pid"] != left  # the next step: a new worker
    with pytest.raises(ProcessLookupError):
        os.kill(left, 0)


def test_a_strategy_sees_the_environment_and_folder_of_its_call(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    ctx = compactkit.load_one(SESSION)
    isolated = Pipeline([WherePid()], timeout=60)
    monkeypatch.setenv("CAPS_SEEN", "first")
    assert isolated.run(ctx).context.metadata["seen"] == "first"
    monkeypatch.setenv("CAPS_SEEN", "second")
    assert isolated.run(ctx).context.metadata["seen"] == "second"

    class WhereAmI(Strategy):
        name = "where-am-i"

        def compact(self, ctx: AgentContext) -> AgentContext:
            return ctx.replace(metadata={**ctx.metadata, "cwd": os.getcwd()})

    folder = Pipeline([WhereAmI()], timeout=60)
    assert folder.run(ctx).context.metadata["cwd"] == os.getcwd()
    monkeypatch.chdir(tmp_path)
    assert folder.run(ctx).context.metadata["cwd"] == str(tmp_path)


def _without_pid(ctx: AgentContext) -> str:
    return ctx.replace(metadata={k: v for k, v in ctx.metadata.items() if k != "pid"}).to_json()


def test_threads_of_the_caller_each_get_their_own_worker() -> None:
    ctx = compactkit.load_one(SESSION)
    expected = _without_pid(Pipeline([Caps(), WherePid()]).run(ctx).context)
    results: dict[int, tuple[str, int]] = {}

    def work(n: int) -> None:
        out = Pipeline([Caps(), WherePid()], timeout=60).run(ctx).context
        results[n] = (_without_pid(out), int(str(out.metadata["pid"])))

    threads = [threading.Thread(target=work, args=(n,)) for n in range(3)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(120)
    assert [text for text, _ in results.values()] == [expected] * 3
    assert len({pid for _, pid in results.values()} | {os.getpid()}) == 4
    # their workers ended with them; this thread's next worker is whole
    ended = Pipeline([Caps(), WherePid()], timeout=60).run(ctx).context
    assert _without_pid(ended) == expected and ended.metadata["pid"] != os.getpid()
