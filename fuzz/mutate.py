"""Structure-aware mutation of JSON and JSONL session files, for atheris' custom mutator.

A byte-level mutation of a session file is almost never JSON any more, so most inputs would stop at
the parser. Half the time, an input that parses is changed as a value instead: a key dropped, a
value replaced by one of another type, a value nested deeply, a huge or non-finite number, a record
repeated, dropped or swapped, a string cut or given odd characters. The result is written back as
JSON (or one record per line), sometimes with invalid UTF-8 spliced in.
"""

from __future__ import annotations

import copy
import json
import random
import re
from typing import Any

ODD_VALUES: tuple[Any, ...] = (
    None,
    True,
    False,
    0,
    -1,
    2**63,
    -(2**64) - 1,
    1e308,
    -0.0,
    float("nan"),
    float("inf"),
    "",
    " ",
    "\x00",
    "\ud800",
    "\u202e",
    "x" * 300,
    "{",
    "[]",
    "null",
    [],
    {},
    [None],
    {"": None},
    {"type": "text", "text": ""},
    {"role": "user", "content": ""},
    {"type": "tool_use", "id": "", "name": "", "input": {}},
    {"type": "tool_result", "tool_use_id": "", "content": []},
)


def _odd(rng: random.Random) -> Any:
    return copy.deepcopy(rng.choice(ODD_VALUES))  # a copy: later changes must not reach the table


def parse(data: bytes) -> tuple[str, list[Any]] | None:
    """("json", [value]) or ("jsonl", records) when `data` parses, else None."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return None
    try:
        return "json", [json.loads(text)]
    except (ValueError, RecursionError):
        pass
    lines = [line for line in text.splitlines() if line.strip()]
    try:
        records = [json.loads(line) for line in lines]
    except (ValueError, RecursionError):
        return None
    return ("jsonl", records) if len(records) > 1 else None


HUGE = "\u0000huge number of digits: "
"""A string standing for a number of that many digits (Python's json cannot write one over 4300)."""
_HUGE = re.compile(r'"\\u0000huge number of digits: (\d+)"')


def serialize(kind: str, values: list[Any]) -> bytes:
    if kind == "json":
        text = json.dumps(values[0] if values else None)
    else:
        text = "".join(json.dumps(v) + "\n" for v in values)
    text = _HUGE.sub(lambda m: "9" * int(m.group(1)), text)
    return text.encode("utf-8", "surrogatepass")


def _containers(value: Any, out: list[Any], depth: int = 0) -> list[Any]:
    if depth > 40:
        return out
    if isinstance(value, dict):
        out.append(value)
        for child in value.values():
            _containers(child, out, depth + 1)
    elif isinstance(value, list):
        out.append(value)
        for child in value:
            _containers(child, out, depth + 1)
    return out


def _nested(rng: random.Random, value: Any) -> Any:
    for _ in range(rng.choice((2, 20, 99, 100, 101, 150, 1200))):
        value = [value] if rng.random() < 0.5 else {"content": value}
    return value


def _new_value(rng: random.Random, old: Any, sample: list[Any]) -> Any:
    choice = rng.random()
    if choice < 0.45:
        return _odd(rng)
    if choice < 0.6:
        return _nested(rng, old)
    if choice < 0.7 and isinstance(old, str):
        return old[: rng.randrange(len(old) + 1)] + rng.choice(("", "\ud800", "\x00", "é", "```"))
    if choice < 0.8:
        return f"{HUGE}{rng.choice((19, 400, 4301, 5000))}"
    return copy.deepcopy(rng.choice(sample)) if sample else None  # a copy: no cycles


def mutate_value(rng: random.Random, kind: str, values: list[Any]) -> list[Any]:
    """One structural change to `values` (the file's records), in place where it can."""
    if kind == "jsonl" and values and rng.random() < 0.2:
        i, j = rng.randrange(len(values)), rng.randrange(len(values))
        op = rng.randrange(3)
        if op == 0:
            values.insert(j, copy.deepcopy(values[i]))
        elif op == 1 and len(values) > 1:
            del values[i]
        else:
            values[i], values[j] = values[j], values[i]
        return values
    nodes = _containers(values, [])
    sample = [c for node in nodes for c in (node.values() if isinstance(node, dict) else node)]
    node = rng.choice(nodes)
    if isinstance(node, dict) and node:
        key = rng.choice(list(node))
        if rng.random() < 0.35:
            del node[key]
        else:
            node[key] = _new_value(rng, node[key], sample)
    elif isinstance(node, list) and node:
        i = rng.randrange(len(node))
        op = rng.random()
        if op < 0.2:
            del node[i]
        elif op < 0.35:
            node.insert(i, copy.deepcopy(node[i]))
        else:
            node[i] = _new_value(rng, node[i], sample)
    elif isinstance(node, dict):
        node[rng.choice(("type", "role", "content", "id", "name"))] = _odd(rng)
    else:
        node.append(_odd(rng))
    return values


def mutate(data: bytes, max_size: int, seed: int, fallback: Any) -> bytes:
    """atheris custom mutator: a structural change to a JSON/JSONL input half the time, else
    libFuzzer's own byte mutation (`fallback(data, max_size)`)."""
    rng = random.Random(seed)
    parsed = parse(data) if rng.random() < 0.5 else None
    if parsed is None:
        out: bytes = fallback(data, max_size)
        return out
    kind, values = parsed
    try:
        for _ in range(rng.choice((1, 1, 2, 3))):
            values = mutate_value(rng, kind, values)
        out = serialize(kind, values)
    except (ValueError, RecursionError):
        out = fallback(data, max_size)
    if rng.random() < 0.05 and out:
        at = rng.randrange(len(out))
        out = out[:at] + rng.choice((b"\xff", b"\xc3", b"\xed\xa0\x80", b"\x00")) + out[at:]
    return out[:max_size]
