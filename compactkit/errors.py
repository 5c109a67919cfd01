"""Every error compactkit raises, in one tree, each with the exit code the CLI uses for it.

Exit codes: 0 ok; 1 budget exceeded or regression; 2 bad input, usage, configuration or an OS
error on the user's path; 3 a plugin failed to load or a strategy broke its contract;
130 interrupted (Ctrl-C), 143 terminated (SIGTERM).

`redact` is the one place secrets are masked: every error line, strategy label, report, table,
baseline and Session log option goes through it (`redact_json` for JSON values, `redacted` for a
stream a console prints to).
"""

from __future__ import annotations

import base64
import binascii
import re
from typing import Any, TextIO, cast

EXIT_BUDGET = 1
EXIT_BAD_INPUT = 2
EXIT_PLUGIN = 3
EXIT_INTERRUPTED = 130
EXIT_TERMINATED = 143

FAILURE_CODES = (EXIT_BUDGET, EXIT_BAD_INPUT, EXIT_PLUGIN)


def failure_code(code: object) -> int:
    """The exit code of something that failed: `code` when it is a documented failure code (1, 2,
    3), else 3 (a code a plugin made up, 0 or None included: a failure never exits 0)."""
    return code if type(code) is int and code in FAILURE_CODES else EXIT_PLUGIN


# a key prefix, then a random-looking run (a digit somewhere): `api_conversation_history.json` is
# a file name, `sk-proj-4fJ...` is a key
_KEYISH = re.compile(r"\b(sk|key|api)[-_](?=[A-Za-z_\-]*\d)[A-Za-z0-9_\-]{8,}")
# a secret's text stops at whitespace and at what quotes or closes it in JSON, HTML or markdown
_STOP = "\\s\"'<>`\\\\"
_URL_USERINFO = re.compile(rf"(?P<scheme>\b[A-Za-z][A-Za-z0-9+.\-]*://)[^/{_STOP}@?#]+@")
_QUERY_SECRET = re.compile(
    r"(?i)(?P<key>[?&;](?:[a-z0-9_\-]*(?:key|token|secret|password|passwd|pwd|auth|sig|signature)"
    rf"[a-z0-9_\-]*)=)(?:(?!,\w+=)[^&#;{_STOP}])+"
)
# an `Authorization:` header's value, whatever its scheme (`"authorization": "Basic ..."` too)
_AUTH_HEADER = re.compile(
    r"(?i)(?P<head>\b(?:proxy-)?authorization[\"']?\s*[:=]\s*[\"']?"
    rf"(?:(?:basic|bearer|token|digest|negotiate)\s+)?)[^{_STOP},;&}}]+"
)
# `Bearer <token>` and `Basic <base64 of user:password>` anywhere else (a server's echo)
_AUTH_SCHEME = re.compile(r"\b(?P<scheme>Basic|Bearer)\s+(?P<cred>[A-Za-z0-9+/._~\-]{8,}=*)")


def _credential(match: re.Match[str]) -> str:
    scheme, cred = match.group("scheme"), match.group("cred")
    if scheme == "Basic":
        try:
            secret = ":" in base64.b64decode(cred, validate=True).decode("utf-8")
        except (binascii.Error, UnicodeDecodeError):
            secret = False
    else:  # a token, not an English word: a digit or a symbol in it, or long
        secret = len(cred) >= 20 or any(not c.isalpha() for c in cred)
    return f"{scheme} ***" if secret else match.group()


def redact(text: str, *secrets: str, one_line: bool = True) -> str:
    """`text` with every secret masked: the ones given, anything shaped like an API key, the user
    and password of a URL (`http://user:pass@host` -> `http://***@host`), credential-like query
    parameters (`?api_key=...`, `&token=...`) and authorization credentials (`Authorization:
    ...`, `Bearer <token>`, `Basic <base64 of user:password>`). On one line (whitespace runs
    become one space) unless `one_line=False`, for reports and files that keep their layout."""
    for secret in secrets:
        if secret:
            text = text.replace(secret, "***")
    text = _URL_USERINFO.sub(r"\g<scheme>***@", text)
    text = _QUERY_SECRET.sub(r"\g<key>***", text)
    text = _AUTH_HEADER.sub(r"\g<head>***", text)
    text = _AUTH_SCHEME.sub(_credential, text)
    text = _KEYISH.sub("***", text)
    return " ".join(text.split()) if one_line else text


def redact_json(value: Any) -> Any:
    """A JSON value with `redact` applied to every string in it (keys too), layout kept: what
    reports, baselines and logs write."""
    if isinstance(value, str):
        return redact(value, one_line=False)
    if isinstance(value, dict):
        return {redact(str(k), one_line=False): redact_json(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [redact_json(v) for v in value]
    return value


class RedactedStream:
    """A text stream that writes through `redact` (layout kept): a rich console printing a report
    to a terminal writes into one."""

    def __init__(self, stream: TextIO) -> None:
        self._stream = stream

    def write(self, text: str) -> int:
        self._stream.write(redact(text, one_line=False))
        return len(text)

    def __getattr__(self, name: str) -> Any:  # isatty, fileno, flush, encoding, ...
        return getattr(self._stream, name)


def redacted(stream: TextIO) -> TextIO:
    """`stream` behind a `RedactedStream`, typed as the stream it stands for."""
    return cast(TextIO, RedactedStream(stream))


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


class SessionLogBusy(CompactkitError):
    """Another `Session` (in this process or another) is writing the log: two writers would lose
    each other's records, so the second is refused."""

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
