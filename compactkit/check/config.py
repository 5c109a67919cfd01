"""The `check` configuration: `[[tool.compactkit.check]]` in pyproject.toml or `[[check]]` in
compactkit.toml, validated by pydantic models that reject unknown keys with a did-you-mean.

Paths are relative to the file that holds them. Token counts take human units (`8k`, `1.2M`,
`30_000`), shares a fraction or a percentage (`0.3`, `"30%"`).
"""

from __future__ import annotations

import difflib
import glob
import json
import re
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    StrictBool,
    ValidationError,
    ValidationInfo,
    field_validator,
)

from ..bench.retention import FACT_KINDS
from ..errors import ConfigError
from ..formats.loading import SessionAddress
from ..paths import SESSION_SUFFIXES, glob_paths, session_files
from ..pricing import PROFILES

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10 only
    import tomli as tomllib  # type: ignore[import-not-found, unused-ignore]  # 3.10's tomllib

CONFIG_FILES = ("compactkit.toml", "pyproject.toml")
"""Looked for in the working directory, then in each parent, in this order."""

DEFAULT_BASELINE = "compactkit-baseline.json"
"""The baseline's default path, beside the configuration file."""

_UNITS = {"": 1, "k": 1_000, "m": 1_000_000, "g": 1_000_000_000}
_TOKENS = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([kmg]?)\s*(?:tokens?)?\s*$", re.I)


def parse_tokens(value: Any) -> int:
    """A token count: an integer, or a string in human units (`8k`, `1.2M`, `30,000`, `30_000`)."""
    if isinstance(value, bool):
        raise ValueError(f"expected a token count like 8000, '8k' or '1.2M', got {value!r}")
    if isinstance(value, int):
        if value < 0:
            raise ValueError(f"a token count cannot be negative, got {value}")
        return value
    if isinstance(value, str):
        match = _TOKENS.match(value.replace(",", "").replace("_", ""))
        if match:
            count = float(match.group(1)) * _UNITS[match.group(2).lower()]
            if count != int(count):
                raise ValueError(f"a token count is a whole number, got {value!r}")
            return int(count)
    raise ValueError(f"expected a token count like 8000, '8k' or '1.2M', got {value!r}")


def parse_share(value: Any) -> float:
    """A share in [0, 1]: a number (`0.3`) or a percentage (`"30%"`)."""
    number: float | None = None
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        number = float(value)
    elif isinstance(value, str) and value.strip().endswith("%"):
        try:
            number = float(value.strip()[:-1]) / 100
        except ValueError:
            number = None
    if number is None or not 0 <= number <= 1:
        raise ValueError(f"expected a share like 0.3 or '30%' (0 to 1), got {value!r}")
    return number


def parse_slack(value: Any) -> str:
    """A tolerated token increase: a count (`0`, `500`, `1k`) or a percentage (`"2%"`), kept as
    written (normalized) and read by `token_slack`."""
    if isinstance(value, str) and value.strip().endswith("%"):
        parse_share(value)
        return value.strip()
    return str(parse_tokens(value))


def token_slack(text: str, baseline: int) -> int:
    """How many tokens over `baseline` a slack (`parse_slack`) allows."""
    if text.endswith("%"):
        return int(baseline * parse_share(text))
    return int(text)


def _dollars(value: Any) -> float:
    if isinstance(value, str):
        value = value.strip().removeprefix("$")
        try:
            value = float(value)
        except ValueError:
            raise ValueError(f"expected dollars like 0.5 or '$0.50', got {value!r}") from None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0:
        raise ValueError(f"expected dollars like 0.5 or '$0.50', got {value!r}")
    return float(value)


Tokens = Annotated[int, BeforeValidator(parse_tokens)]
Share = Annotated[float, BeforeValidator(parse_share)]
Dollars = Annotated[float, BeforeValidator(_dollars)]
Slack = Annotated[str, BeforeValidator(parse_slack)]


def did_you_mean(word: str, choices: Sequence[str]) -> str:
    """` (did you mean 'x'?)` for the closest choice, else the known choices."""
    close = difflib.get_close_matches(word, list(choices), n=1, cutoff=0.6)
    if close:
        return f" (did you mean {close[0]!r}?)"
    return f" (known: {', '.join(choices)})"


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class TokenLimit(_Model):
    """`max_tokens` as a table: a limit per session, on the total, or both."""

    session: Tokens | None = Field(None, description="Most tokens any one session may end with.")
    total: Tokens | None = Field(
        None, description="Most tokens all sessions may end with together."
    )


class SavingsLimit(_Model):
    """`min_savings` as a table: on the total, per session, or both."""

    session: Share | None = Field(None, description="Least savings every session must reach.")
    total: Share | None = Field(None, description="Least savings over all sessions together.")


class Regression(_Model):
    """`max_regression`: how much worse than the baseline each metric may get."""

    tokens: Slack | None = Field(
        None,
        description="Tokens more than the baseline (prompt tokens in replay, tokens after "
        "compaction): a count (`0`: exact, `1k`) or a share (`'2%'`).",
    )
    cost: Share | None = Field(
        None, description="Relative cost increase per pricing profile (`0`, `'2%'`)."
    )
    retention: Share | None = Field(
        None, description="Drop in retention, in points of share (`0`, `0.01`, `'1%'`)."
    )
    time: float | None = Field(
        None,
        gt=0,
        description="Slack factor on the check's total seconds (`2.0`: up to twice the baseline).",
    )


RETENTION_KEYS = ("overall", *FACT_KINDS)


class CheckConfig(_Model):
    """One `[[tool.compactkit.check]]` entry."""

    name: str = Field(description="The check's name (unique; the key in the baseline).")
    sessions: list[str] = Field(
        min_length=1,
        description="Globs of saved sessions relative to the file (`FILE#N` picks one "
        "conversation; a folder means every session file under it). A check matching no file "
        "fails.",
    )
    pipeline: Annotated[list[str], Field(min_length=1)] | Literal["default"] = Field(
        "default",
        description="Strategy specs in the syntax of `run -s` (`observation-mask:keep_last=5`), "
        "run in order, or `'default'` (the default pipeline).",
    )
    budget: Tokens | None = Field(
        None,
        ge=1,
        description="Token budget: fills each strategy's budget option (and the default "
        "pipeline's); in replay, history past it triggers compaction. Default 30k.",
    )
    mode: Literal["oneshot", "replay"] = Field(
        "replay",
        description="`replay`: call by call, compacting when the history passes the budget "
        "(prompt tokens and cost); `oneshot`: the pipeline once on the whole session.",
    )
    pricing: list[str] = Field(
        ["anthropic", "openai"], description="Pricing profiles for cost (replay)."
    )
    max_tokens: TokenLimit | None = Field(
        None,
        description="Tokens after compaction: a number is per session; "
        "`{session = '8k', total = '1.2M'}` for either or both.",
    )
    min_savings: SavingsLimit | None = Field(
        None,
        description="Least savings against no compaction (prompt tokens in replay, tokens in "
        "oneshot): a number is over the total; `{session = ..., total = ...}`.",
    )
    max_cost: dict[str, Dollars] | None = Field(
        None,
        description="Most dollars in total (replay): a number for every pricing profile, or "
        "`{anthropic = 0.5}` per profile.",
    )
    min_retention: dict[str, Share] | None = Field(
        None,
        description="Least share of facts kept over all sessions: a number overall, or "
        "`{overall = 0.95, task = 1.0, path = '90%'}` per kind "
        f"({', '.join(FACT_KINDS)}).",
    )
    max_regression: Regression | None = Field(
        None,
        description="Limits against the baseline, per session and in total; metrics not named "
        "are shown, not gated.",
    )
    message: str | None = Field(None, description="Printed under the check's failures.")
    informational: StrictBool = Field(
        False, description="Report the check without ever failing (exit 0 for it)."
    )
    pins: list[str] = Field(
        [],
        description="Pin rules (`tool=TodoWrite`, `path=**/CLAUDE.md`, `re=...`, `origin=...`): "
        "what the pipeline may never touch, besides the user's words, which are always pinned.",
    )

    @field_validator("pins")
    @classmethod
    def _pin_rules(cls, value: list[str]) -> list[str]:
        from ..pins import parse_rule

        try:
            return [str(parse_rule(rule)) for rule in value]
        except ConfigError as exc:
            raise ValueError(str(exc)) from None

    @field_validator("sessions", "pricing", mode="before")
    @classmethod
    def _one_or_many(cls, value: Any) -> Any:
        return [value] if isinstance(value, str) else value

    @field_validator("pipeline", mode="before")
    @classmethod
    def _pipeline(cls, value: Any) -> Any:
        if isinstance(value, str) and value != "default":
            return [value]
        return value

    @field_validator("max_tokens", mode="before")
    @classmethod
    def _tokens_scalar(cls, value: Any) -> Any:
        return value if isinstance(value, Mapping) else {"session": value}

    @field_validator("min_savings", mode="before")
    @classmethod
    def _savings_scalar(cls, value: Any) -> Any:
        return value if isinstance(value, Mapping) else {"total": value}

    @field_validator("pricing")
    @classmethod
    def _known_profiles(cls, value: list[str]) -> list[str]:
        for name in value:
            if name not in PROFILES:
                raise ValueError(
                    f"unknown pricing profile {name!r}{did_you_mean(name, [*PROFILES])}"
                )
        return value

    @field_validator("min_retention", mode="before")
    @classmethod
    def _known_kinds(cls, value: Any) -> Any:
        if not isinstance(value, Mapping):
            return {"overall": value}
        for kind in value:
            if kind not in RETENTION_KEYS:
                raise ValueError(
                    f"unknown retention kind {kind!r}{did_you_mean(kind, RETENTION_KEYS)}"
                )
        return value

    @field_validator("max_cost", mode="before")
    @classmethod
    def _cost_per_profile(cls, value: Any, info: ValidationInfo) -> Any:
        pricing = info.data.get("pricing", [])
        if not isinstance(value, Mapping):
            return {p: value for p in pricing}
        for name in value:
            if name not in pricing:
                raise ValueError(
                    f"{name!r} is not one of this check's pricing profiles"
                    f"{did_you_mean(name, pricing)}"
                )
        return value


_KNOWN_KEYS: dict[tuple[str, ...], Sequence[str]] = {
    (): list(CheckConfig.model_fields),
    ("max_tokens",): list(TokenLimit.model_fields),
    ("min_savings",): list(SavingsLimit.model_fields),
    ("max_regression",): list(Regression.model_fields),
}


@dataclass(frozen=True)
class CheckFile:
    """The checks of one configuration file."""

    path: Path
    checks: tuple[CheckConfig, ...]

    @property
    def root(self) -> Path:
        """The folder paths are relative to."""
        return self.path.parent

    @property
    def default_baseline(self) -> Path:
        return self.root / DEFAULT_BASELINE

    def with_pins(self, pins: Sequence[str]) -> CheckFile:
        """The same checks, each with the pin rules `pins` added (`check --pin`)."""
        checks = tuple(
            c.model_copy(update={"pins": list(dict.fromkeys((*c.pins, *pins)))})
            for c in self.checks
        )
        return CheckFile(self.path, checks)


def find_config(start: Path | None = None) -> Path:
    """The nearest compactkit.toml, or pyproject.toml with `[[tool.compactkit.check]]`, from
    `start` (default: the working directory) up."""
    here = (start or Path.cwd()).resolve()
    for folder in (here, *here.parents):
        for name in CONFIG_FILES:
            candidate = folder / name
            if candidate.is_file() and (
                name == "compactkit.toml" or "compactkit.check" in candidate.read_text("utf-8")
            ):
                return candidate
    raise ConfigError(
        "no checks found: add [[tool.compactkit.check]] to pyproject.toml or [[check]] to "
        "compactkit.toml, or give --config PATH (see docs/check.md)"
    )


def _entries(path: Path, data: dict[str, Any]) -> tuple[str, Any]:
    if path.name == "pyproject.toml" or "tool" in data:
        tool = data.get("tool", {}).get("compactkit", {})
        return "[[tool.compactkit.check]]", tool.get("check") if isinstance(tool, dict) else None
    return "[[check]]", data.get("check")


def load_config(path: str | Path | None = None) -> CheckFile:
    """Read and validate the checks of `path` (default: `find_config()`).

    Raises `ConfigError` (exit 2) naming the file, the line, the check and the key, with a
    did-you-mean for a misspelled key.
    """
    file = Path(path) if path is not None else find_config()
    try:
        text = file.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ConfigError(f"{file}: no such configuration file") from None
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{file}: not TOML: {exc}") from None
    header, entries = _entries(file, data)
    if not entries:
        raise ConfigError(f"{file}: no {header} entries (see docs/check.md)")
    if not isinstance(entries, list):
        raise ConfigError(f"{file}: {header.strip('[]')} must be an array of tables: {header}")
    checks: list[CheckConfig] = []
    for n, entry in enumerate(entries):
        where = f"{header} #{n + 1}"
        if isinstance(entry, dict) and isinstance(entry.get("name"), str):
            where += f" {entry['name']!r}"
        try:
            checks.append(CheckConfig.model_validate(entry))
        except ValidationError as exc:
            raise ConfigError(_one_line(file, text, header, n, where, exc)) from None
    names = [c.name for c in checks]
    for name in names:
        if names.count(name) > 1:
            raise ConfigError(f"{file}: two checks are named {name!r}: names must be unique")
    return CheckFile(file.resolve(), tuple(checks))


def _one_line(file: Path, text: str, header: str, n: int, where: str, exc: ValidationError) -> str:
    """The first validation error as `FILE:LINE: [[...]] #N 'name': key: what (did you mean)`."""
    errors = exc.errors()
    first = errors[0]
    loc = tuple(str(p) for p in first["loc"])
    key = ".".join(loc) or "(entry)"
    if first["type"] == "extra_forbidden":
        what = f"unknown key {loc[-1]!r}{did_you_mean(loc[-1], _KNOWN_KEYS.get(loc[:-1], ()))}"
    elif first["type"] == "missing":
        what = "missing (required)"
    else:
        what = str(first["msg"]).removeprefix("Value error, ")
        if first["type"] != "value_error":
            what += f", got {first['input']!r}"
    line = _line_of(text, header, n, loc[0] if loc else None)
    more = f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""
    return f"{file}{f':{line}' if line else ''}: {where}: {key}: {what}{more}"


def _line_of(text: str, header: str, n: int, key: str | None) -> int | None:
    """The line of `key` in the n-th `header` table (or of the header), when it can be found."""
    lines = text.splitlines()
    starts = [i for i, line in enumerate(lines) if line.strip().replace(" ", "") == header]
    if n >= len(starts):
        return None
    end = starts[n + 1] if n + 1 < len(starts) else len(lines)
    if key:
        pattern = re.compile(rf"^\s*[\"']?{re.escape(key)}[\"']?\s*=")
        for i in range(starts[n] + 1, end):
            if pattern.match(lines[i]):
                return i + 1
    return starts[n] + 1


def expand_sessions(check: CheckConfig, root: Path) -> list[str]:
    """The check's session addresses (absolute paths, `FILE#N` kept), in a stable order.

    Raises `ConfigError` when a pattern matches nothing: a gate over no session would pass
    silently forever."""
    out: list[str] = []
    for pattern in check.sessions:
        where = SessionAddress.parse(root / pattern)
        file, index = where.file, where.index
        magic = glob.has_magic(file)
        matches = glob_paths(file) if magic else [file]
        found: list[str] = []
        for match in matches:
            p = Path(match)
            if p.is_dir():
                if not file.endswith("**"):  # a trailing ** has listed what is inside already
                    found.extend(session_files(p))
            elif p.is_file() and (not magic or p.name.endswith(SESSION_SUFFIXES)):
                # a glob picks session files only (`**` also names /proc's endless files)
                found.append(str(p) if index is None else f"{p}#{index}")
        if not found:
            raise ConfigError(
                f"check {check.name!r}: sessions pattern {pattern!r} matches no file "
                f"(relative to {root})"
            )
        out.extend(found)
    return list(dict.fromkeys(out))


def config_reference() -> str:
    """The configuration reference of docs/check.md, generated from the models' fields (a test
    keeps the page equal to it and prints the new table when a field changes)."""
    lines = ["| key | type | default | meaning |", "| --- | --- | --- | --- |"]
    tables: dict[str, type[_Model]] = {
        "max_tokens": TokenLimit,
        "min_savings": SavingsLimit,
        "max_regression": Regression,
    }
    for name, info in CheckConfig.model_fields.items():
        lines.append(_reference_row(f"`{name}`", info))
        table = tables.get(name)
        for sub, sub_info in table.model_fields.items() if table else ():
            lines.append(_reference_row(f"`{name}.{sub}`", sub_info))
    return "\n".join(lines) + "\n"


def _reference_row(key: str, info: Any) -> str:
    name = key.strip("`")
    kind = _TYPE_NAMES.get(name, str(info.annotation))
    if info.is_required():
        default = "required"
    elif info.default is None:
        default = "-"
    else:
        default = "`" + json.dumps(info.default) + "`"
    description = (info.description or "").replace("|", "\\|")
    return f"| {key} | {kind} | {default} | {description} |"


_TYPE_NAMES = {
    "name": "string",
    "sessions": "list of globs",
    "pipeline": 'list of specs, or "default"',
    "budget": "tokens",
    "mode": '"replay" or "oneshot"',
    "pricing": "list of profiles",
    "max_tokens": "tokens, or table",
    "max_tokens.session": "tokens",
    "max_tokens.total": "tokens",
    "min_savings": "share, or table",
    "min_savings.session": "share",
    "min_savings.total": "share",
    "max_cost": "dollars, or table by profile",
    "min_retention": "share, or table by kind",
    "max_regression": "table",
    "max_regression.tokens": "tokens or share",
    "max_regression.cost": "share",
    "max_regression.retention": "share",
    "max_regression.time": "factor",
    "message": "string",
    "informational": "boolean",
}
