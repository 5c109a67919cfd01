"""Every error compactkit raises, in one tree, each with the exit code the CLI uses for it.

Exit codes: 0 ok; 1 budget exceeded or regression; 2 bad input, usage, configuration or an OS
error on the user's path; 3 a plugin failed to load or a strategy broke its contract;
130 interrupted (Ctrl-C), 143 terminated (SIGTERM).

`redact` is the one place secrets are masked: every error line, strategy label and report goes
through it.
"""

from __future__ import annotations

import re

EXIT_BUDGET = 1
EXIT_BAD_INPUT = 2
EXIT_PLUGIN = 3
EXIT_INTERRUPTED = 130
EXIT_TERMINATED = 143

# a key prefix, then a random-looking run (a digit somewhere): `api_conversation_history.json` is
# a file name, `sk-proj-4fJ...` is a key
_KEYISH = re.compile(r"\b(sk|key|api)[-_](?=[A-Za-z_\-]*\d)[A-Za-z0-9_\-]{8,}")
_URL_USERINFO = re.compile(r"(?P<scheme>\b[A-Za-z][A-Za-z0-9+.\-]*://)[^/\s@?#]+@")
_QUERY_SECRET = re.compile(
    r"(?i)(?P<key>[?&;](?:[a-z0-9_\-]*(?:key|token|secret|password|passwd|pwd|auth|sig|signature)"
    r"[a-z0-9_\-]*)=)(?:(?!,\w+=)[^&#;\s])+"
)


def redact(text: str, *secrets: str) -> str:
    """`text` on one line, with every secret masked: the ones given, anything shaped like an API
    key, the user and password of a URL (`http://user:pass@host` -> `http://***@host`) and
    credential-like query parameters (`?api_key=...`, `&token=...`)."""
    for secret in secrets:
        if secret:
            text = text.replace(secret, "***")
    text = _URL_USERINFO.sub(r"\g<scheme>***@", text)
    text = _QUERY_SECRET.sub(r"\g<key>***", text)
    text = _KEYISH.sub("***", text)
    return " ".join(text.split())


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
