"""Structured fuzzing with hypothesis: real records (the seeds in fuzz/seeds/, slices of real
sessions) changed the way a broken or hostile file would be: keys dropped, values of another type,
values nested deeply, huge and non-finite numbers, records repeated, dropped or swapped, invalid
UTF-8. Every format reads each with a result or a one-line `CompactkitError`.

`COMPACTKIT_FUZZ_EXAMPLES` sets the examples per target (`make fuzz` runs thousands; the default
keeps the suite quick). A failing input is written to fuzz/regressions/<target>/ before the test
fails, so that tests/test_fuzz_regressions.py replays it from then on.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import random
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fuzz.mutate import mutate_value, parse, serialize
from fuzz.targets import REGRESSIONS, SEEDS, TARGETS, directory

EXAMPLES = int(os.environ.get("COMPACTKIT_FUZZ_EXAMPLES", "15"))
EXPLORE = "COMPACTKIT_FUZZ_EXAMPLES" in os.environ
"""`make fuzz` explores new examples each run; the test suite replays the same ones (no flakes)."""
FILE_TARGETS = [t for t in TARGETS if t.startswith("format:") or t in ("session", "stash")]

json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.integers(min_value=10**19, max_value=10**400)
    | st.floats()  # NaN and infinities included: Python's json writes and reads them
    | st.text(max_size=40),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=10), inner, max_size=4)
    ),
    max_leaves=12,
)


def seeds(target: str) -> list[tuple[str, list[Any]]]:
    out = []
    for path in sorted((SEEDS / directory(target)).glob("*.seed")):
        parsed = parse(path.read_bytes())
        if parsed is not None:
            out.append(parsed)
    return out


def keep(target: str, data: bytes) -> Path:
    folder = REGRESSIONS / directory(target)
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / (hashlib.sha256(data).hexdigest()[:16] + ".bin")
    path.write_bytes(data)
    return path


@st.composite
def mutated_file(draw: st.DrawFn, target: str) -> bytes:
    kind, values = draw(st.sampled_from(seeds(target)))
    values = json.loads(json.dumps(values))  # a fresh copy to change
    rng = draw(st.randoms(use_true_random=False))
    for _ in range(draw(st.integers(min_value=1, max_value=4))):
        values = mutate_value(rng, kind, values)
    if draw(st.booleans()):  # one value of any JSON type, anywhere in one record
        record = values[rng.randrange(len(values))] if values else None
        if isinstance(record, dict):
            record[draw(st.sampled_from([*record, "content", "type"]))] = draw(json_values)
    try:
        data = serialize(kind, values)
    except (ValueError, RecursionError):
        data = serialize(kind, [None])
    if draw(st.integers(min_value=0, max_value=9)) == 0 and data:  # invalid UTF-8 spliced in
        at = draw(st.integers(min_value=0, max_value=len(data) - 1))
        data = data[:at] + draw(st.sampled_from([b"\xff", b"\xc3", b"\xed\xa0\x80"])) + data[at:]
    return data


@pytest.mark.parametrize("target", FILE_TARGETS)
def test_mutated_real_records_are_read_or_refused_in_one_line(target: str) -> None:
    @settings(
        max_examples=EXAMPLES,
        deadline=None,
        database=None,
        derandomize=not EXPLORE,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    )
    @given(mutated_file(target))
    def check(data: bytes) -> None:
        try:
            TARGETS[target](data)
        except Exception:
            keep(target, data)
            raise

    check()


@settings(max_examples=EXAMPLES * 2, deadline=None, database=None, derandomize=not EXPLORE)
@given(
    st.lists(
        st.sampled_from(["observation-mask", "sliding-window", "llm-summary", "x", ""]), max_size=3
    ),
    st.lists(st.tuples(st.text(max_size=12), json_values), max_size=3),
    st.sampled_from(["+", " ", " + ", ","]),
)
def test_strategy_specs_are_parsed_or_refused_in_one_line(
    names: list[str], options: list[tuple[str, Any]], joiner: str
) -> None:
    def text(value: Any) -> str:
        return value if isinstance(value, str) else json.dumps(value)

    opts = ",".join(f"{key}={text(value)}" for key, value in options)
    spec = joiner.join(f"{name}:{opts}" if opts else name for name in names)
    data = spec.encode("utf-8", "surrogatepass")
    try:
        TARGETS["spec"](data)
    except Exception:
        keep("spec", data)
        raise


def test_the_mutations_reach_every_kind_of_value() -> None:
    """The generator is not a no-op: over a few seeds it drops keys, nests past the limit and
    writes huge and non-finite numbers."""
    rng = random.Random(7)
    seen: set[str] = set()
    kind, values = seeds("format:claude-code")[0]
    for _ in range(400):
        out = mutate_value(rng, kind, json.loads(json.dumps(values)))
        try:
            text = serialize(kind, out).decode("utf-8", "replace")
        except RecursionError:  # nested past what json writes: past the limit, too
            seen.add("nested")
            continue
        if len(text) < len(serialize(kind, values)):
            seen.add("shorter")
        if "[[[[[[[[[[" in text or '{"content": {"content": {"content"' in text:
            seen.add("nested")
        if "9" * 400 in text:
            seen.add("huge")
        if "NaN" in text or "Infinity" in text:
            seen.add("non-finite")
    assert seen == {"shorter", "nested", "huge", "non-finite"}
    assert math.isnan(json.loads("NaN"))
