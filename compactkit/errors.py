"""Every error compactkit raises, in one tree, each with the exit code the CLI uses for it.

Exit codes: 0 ok; 1 budget exceeded or regression; 2 bad input, usage or configuration;
3 a plugin failed to load or a strategy broke its contract.
"""

from __future__ import annotations

EXIT_BUDGET = 1
EXIT_BAD_INPUT = 2
EXIT_PLUGIN = 3


class CompactkitError(Exception):
    """Base of all compactkit errors. `str(err)` is one line: what, where, what to do."""

    exit_code = EXIT_BAD_INPUT


class BadInputError(CompactkitError):
    """A file or value that cannot be read as asked: not found, not JSON, unknown format, ..."""

    exit_code = EXIT_BAD_INPUT

    def __init__(
        self,
        what: str,
        *,
        path: str | None = None,
        line: int | None = None,
        hint: str | None = None,
    ) -> None:
        self.what = what
        self.path = path
        self.line = line
        self.hint = hint
        where = ""
        if path is not None:
            where = f"{path}:{line}: " if line is not None else f"{path}: "
        tail = f" ({hint})" if hint else ""
        super().__init__(f"{where}{what}{tail}")


class ConfigError(CompactkitError):
    """Bad options, an unknown strategy or tokenizer name, a malformed command line value."""

    exit_code = EXIT_BAD_INPUT


class PluginError(CompactkitError):
    """A plugin failed to load, registered a name twice, or raised inside a hook."""

    exit_code = EXIT_PLUGIN


class ContractViolation(CompactkitError):
    """A strategy returned a context that breaks an invariant (or mutated its input)."""

    exit_code = EXIT_PLUGIN


class StrategyError(CompactkitError):
    """A strategy raised while compacting; the caller's context is untouched."""

    exit_code = EXIT_PLUGIN

class RecoveryError(BadInputError):
    """A recovery-store or stash entry that is not what its etag names: tampered, from another
    context, not JSON, or not the shape its marker needs. Never restored."""

    def __init__(self, etag: str, what: str, *, path: str | None = None) -> None:
        self.etag = etag
        super().__init__(f"recovery entry {etag}: {what}", path=path)


class StrategyTimeout(StrategyError):
    """A strategy ran longer than its timeout and was stopped; the caller's context is untouched."""
