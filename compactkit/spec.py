"""The spec language of `-s`, pyproject checks, `Session(pipeline=...)` and the integrations.

One strategy is `NAME[:key=value,...]` (values read as JSON where they parse: numbers, booleans;
else text); a pipeline is strategies joined by `+`. Two words stand for whole pipelines, alone or
inside a `+` combination: `none` (no compaction: nothing) and `default` (the default pipeline,
`compactkit.defaults.default_pipeline`, at the budget, or else at the trigger). `@FILE.json` names
a file of named pipelines (`[{"name": ..., "strategies": [...]}]`).

Stages: each strategy says itself when it runs (`Strategy.stage`): at the trigger, on the whole
history, or on arrival, on each new message (`compactkit strategies` lists which). A pipeline
holds both kinds; `default:arrival=off` is the default without its arrival stage
(`compactkit.defaults.ARRIVAL_PIPELINE`) and `default:arrival=on` the default with it, so one
bench run compares the two.

Parsing gives a `PipelineSpec`: a name, the strategy specs in order (`default` expanded, `none`
gone) and the budget. The budget goes into each strategy's budget option (`Strategy.budget_option`)
where its spec did not set one, as an option value, and the runner's trigger (`PipelineSpec.trigger`)
into each trigger option (`Strategy.trigger_option`) likewise: `steps` resolves a spec into `(strategy class,
options)` pairs, which `compactkit.build_pipeline` turns into a `Pipeline`.

    >>> parse_pipeline("etag-collapse + sliding-window:max_tokens=8000").strategies
    ('etag-collapse', 'sliding-window:max_tokens=8000')
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from .defaults import ARRIVAL_BY_DEFAULT, ARRIVAL_PIPELINE, DEFAULT_TRIGGER, default_pipeline
from .errors import BadInputError, ConfigError, redact
from .jsonio import loads
from .registry import Registry, current_registry
from .strategy import Strategy

NONE = "none"
DEFAULT = "default"


@dataclass(frozen=True)
class PipelineSpec:
    """A named pipeline as the user wrote it: `strategies` are `NAME[:key=value,...]` specs in
    order (`default` already expanded, `none` dropped); `budget` fills each strategy's budget
    option where its spec does not set it (the `--budget` of `run`, a check's `budget`, the target
    of a `Session`); None leaves every option as written.

    `pins` holds user pin rules (`tool=TodoWrite`, `path=**/CLAUDE.md`, ... see `compactkit.pins`):
    the pipeline built from the spec adds them to every context it runs on, and what they name is
    never touched.

    When to compact (a trigger) belongs to whoever runs the pipeline (a `Session`, the bench's
    persistent mode, a gateway), which passes `trigger=` to `parse_pipeline` so that `default`
    means the default pipeline at that trigger when no budget is given; the budget is the target a
    compaction aims at.
    """

    name: str
    strategies: tuple[str, ...]
    budget: int | None = None
    pins: tuple[str, ...] = ()
    trigger: int | None = None
    """When the runner compacts (the bench's `--trigger`): fills each strategy's trigger option
    (`Strategy.trigger_option`) where its spec neither sets it nor says `native=true`; None leaves
    every option as written."""

    def steps(
        self, registry: Registry | None = None
    ) -> list[tuple[type[Strategy], dict[str, Any]]]:
        """Each strategy's registered class and its options, with the budget filled in."""
        reg = registry or current_registry()
        out: list[tuple[type[Strategy], dict[str, Any]]] = []
        for text in self.strategies:
            name, options = parse_spec(text)
            cls: type[Strategy] = reg.strategies.get(name)
            option = cls.budget_option
            if self.budget is not None and option and option not in options:
                options[option] = self.budget
            at = cls.trigger_option
            if self.trigger is not None and at and at not in options and not options.get("native"):
                options[at] = self.trigger
            out.append((cls, options))
        return out

    def labels(self, registry: Registry | None = None) -> list[str]:
        """The strategies as they run: `NAME:key=value,...` with the budget written in."""
        return [redact(_label(cls.name or "", options)) for cls, options in self.steps(registry)]


def _label(name: str, options: dict[str, Any]) -> str:
    shown = ",".join(
        f"{k}={v if isinstance(v, str) else json.dumps(v)}" for k, v in options.items()
    )
    return f"{name}:{shown}" if shown else name


def parse_value(raw: str) -> Any:
    """Option values on the command line: JSON where it parses (numbers, booleans), else text."""
    try:
        return loads(raw, "")
    except json.JSONDecodeError:
        return raw
    except BadInputError as exc:  # nested too deep, a number too long
        raise ConfigError(f"bad option value: {exc.what}") from None


def parse_spec(spec: str) -> tuple[str, dict[str, Any]]:
    """`"name:key=value,key=value"` -> ("name", {key: value})."""
    name, _, rest = spec.partition(":")
    name = name.strip()
    if not name:
        raise ConfigError(f"empty strategy name in {spec!r} (use NAME[:key=value,...])")
    options: dict[str, Any] = {}
    for item in filter(None, (p.strip() for p in rest.split(","))):
        key, eq, value = item.partition("=")
        if not eq or not key.strip():
            raise ConfigError(f"bad option {item!r} in {spec!r} (use NAME:key=value,key=value)")
        options[key.strip().replace("-", "_")] = parse_value(value.strip())
    return name, options


def expand(
    specs: Iterable[str], *, budget: int | None = None, trigger: int | None = DEFAULT_TRIGGER
) -> tuple[str, ...]:
    """Strategy specs with `a+b` split, `none` dropped and `default` replaced by the default
    pipeline at `budget` (else at half the `trigger`, the target a `Session` and the gateway
    compact down to, so the next compaction is far away; with neither, the lossless one). A
    budget with no trigger is a one-shot run's (`compactkit run --budget`): the default then fills
    it with the newest turns (`default_pipeline(fill=True)`)."""
    out: list[str] = []
    for spec in specs:
        for part in (p.strip() for p in spec.split("+")):
            arrival = _default_arrival(part)
            if arrival is not None:
                out.extend(ARRIVAL_PIPELINE if arrival else ())
                aim = budget if budget is not None else None if trigger is None else trigger // 2
                out.extend(default_pipeline(aim, fill=budget is not None and trigger is None))
            elif part and part != NONE:
                out.append(part)
    return tuple(out)


_SWITCH = {"on": True, "off": False, True: True, False: False}


def _default_arrival(part: str) -> bool | None:
    """For `default[:arrival=on|off]`, whether its arrival stage is in; None for any other."""
    name, options = parse_spec(part) if part.startswith(DEFAULT) else ("", {})
    if name != DEFAULT:
        return None
    unknown = set(options) - {"arrival"}
    value = options.get("arrival", ARRIVAL_BY_DEFAULT)
    if unknown or value not in _SWITCH:
        raise ConfigError(
            f"bad default pipeline {part!r}: it takes one option, arrival=on|off "
            "(whether its arrival stage runs)"
        )
    return _SWITCH[value]


def parse_pipeline(
    text: str,
    defaults: Sequence[str] | None = None,
    *,
    budget: int | None = None,
    trigger: int | None = DEFAULT_TRIGGER,
    pins: Sequence[str] = (),
) -> PipelineSpec:
    """One `-s` value: `none`, `default`, or strategy specs joined by `+`
    (`observation-mask:keep_last=5 + sliding-window`), where `default` may stand alone or among
    the others. `default` is `defaults` when given, else the default pipeline at `budget` (or
    `trigger`, see `expand`); `budget` also fills each strategy's budget option when the
    pipeline is built."""
    text = text.strip()
    if not text:
        raise ConfigError("empty pipeline (use NAME[:key=value,...], 'default' or 'none')")
    parts = [p.strip() for p in text.split("+")]
    if not all(parts):
        raise ConfigError(
            f"empty step in pipeline {redact(text)!r}: '+' joins two strategies (a+b), "
            "none may be empty"
        )
    name = text if text in (NONE, DEFAULT) else redact(" + ".join(parts))
    if defaults is not None:  # what `default` stands for, given by the caller
        parts = [s for p in parts for s in (defaults if p == DEFAULT else [p])]
    strategies = expand(parts, budget=budget, trigger=trigger)
    return PipelineSpec(name, strategies, budget, tuple(pins))


def read_pipeline_file(
    path: str, *, budget: int | None = None, trigger: int | None = DEFAULT_TRIGGER
) -> list[PipelineSpec]:
    """A JSON file: `[{"name": "...", "strategies": ["name:key=value", ...]}, ...]` (each
    strategy in the spec language, `default` and `+` included)."""
    file = Path(path)
    try:
        data = loads(file.read_text(encoding="utf-8"), path)
    except FileNotFoundError:
        raise BadInputError("no such pipeline file", path=path) from None
    except json.JSONDecodeError as exc:
        raise BadInputError(f"not JSON: {exc.msg}", path=path, line=exc.lineno) from None
    if not isinstance(data, list) or not all(
        isinstance(d, dict)
        and isinstance(d.get("name"), str)
        and isinstance(d.get("strategies"), list)
        for d in data
    ):
        raise BadInputError('expected a list of {"name": ..., "strategies": [...]}', path=path)
    return [
        PipelineSpec(
            d["name"],
            expand((str(s) for s in d["strategies"]), budget=budget, trigger=trigger),
            budget,
        )
        for d in data
    ]


def parse_pipelines(
    values: Sequence[str],
    *,
    budget: int | None = None,
    trigger: int | None = DEFAULT_TRIGGER,
    pins: Sequence[str] = (),
) -> list[PipelineSpec]:
    """Every `-s` value as one pipeline each (`bench` compares them): a spec joined by `+`,
    `default`, `none`, or `@FILE.json` (a file of named pipelines)."""
    out: list[PipelineSpec] = []
    for text in values:
        if text.startswith("@"):
            found = read_pipeline_file(text[1:], budget=budget, trigger=trigger)
            out.extend(replace(spec, pins=tuple(pins)) for spec in found)
        else:
            out.append(parse_pipeline(text, budget=budget, trigger=trigger, pins=pins))
    return out


def one_pipeline(
    values: Sequence[str],
    *,
    budget: int | None = None,
    trigger: int | None = DEFAULT_TRIGGER,
    pins: Sequence[str] = (),
) -> PipelineSpec:
    """The `-s` values of a command that runs one pipeline (`run`, a check, a `Session`): every
    value's steps in order."""
    specs = parse_pipelines(values, budget=budget, trigger=trigger, pins=pins)
    steps = tuple(s for spec in specs for s in spec.strategies)
    name = redact(" + ".join(steps)) if steps else NONE
    return PipelineSpec(name, steps, budget, tuple(pins))


__all__ = [
    "PipelineSpec",
    "expand",
    "one_pipeline",
    "parse_pipeline",
    "parse_pipelines",
    "parse_spec",
    "parse_value",
    "read_pipeline_file",
]
