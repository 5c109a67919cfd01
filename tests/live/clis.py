"""The real agent CLIs from npm, installed once into a cache, run offline against a base URL.

`install(CLAUDE_CODE)` / `install(CODEX)` / `install(PI)` put the pinned package into the cache
(npm, through the registry, on first use; later calls reuse it) and return the executable.
`run_claude`, `run_codex` and `run_pi` run one task in a `Sandbox` (a temporary HOME and
workspace), non-interactively, against `base_url` (the fake upstream, or a gateway in front of
it), and return a `CliRun`: exit code, output, the session file the CLI wrote and the requests the
fake upstream saw meanwhile.
"""

from __future__ import annotations

import fcntl
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.live.terminal import Terminal
from tests.live.upstream import FakeUpstream, RecordedRequest, Script, Turn, answer


@dataclass(frozen=True)
class NpmCli:
    package: str
    version: str  # pinned: bump it here and regenerate tests/live/sessions (README.md)
    bin: str


CLAUDE_CODE = NpmCli("@anthropic-ai/claude-code", "2.1.332", "claude")
CODEX = NpmCli("@openai/codex", "0.171.0", "codex")
PI = NpmCli("@mariozechner/pi-coding-agent", "0.73.1", "pi")

NPM_INSTALL_TIMEOUT_S = 600
RUN_TIMEOUT_S = 120  # one CLI run; a scripted session takes a few seconds


class LiveSetupError(RuntimeError):
    """The CLI could not be installed or started: the message says what and how to retry."""


def cache_dir() -> Path:
    """Where the CLIs are installed: `COMPACTKIT_LIVE_CACHE`, else inside the running virtualenv
    (so `make clean` removes it), else ~/.cache/compactkit-live."""
    env = os.environ.get("COMPACTKIT_LIVE_CACHE")
    if env:
        return Path(env)
    if sys.prefix != sys.base_prefix:
        return Path(sys.prefix) / "compactkit-live"
    return Path.home() / ".cache" / "compactkit-live"


def install(cli: NpmCli, root: Path | None = None) -> Path:
    """The CLI's executable, installed from the npm registry on first use (one installer at a time
    across processes; an install is moved into place only once it works)."""
    root = root or cache_dir()
    target = root / f"{cli.package.replace('/', '__').lstrip('@')}-{cli.version}"
    executable = target / "node_modules" / ".bin" / cli.bin
    if executable.exists():
        return executable
    npm = shutil.which("npm")
    if npm is None:
        raise LiveSetupError(f"npm is not on PATH: install Node.js and npm to run {cli.package}")
    root.mkdir(parents=True, exist_ok=True)
    with open(root / ".install.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if executable.exists():  # another process installed it while we waited
            return executable
        staging = Path(tempfile.mkdtemp(prefix=".staging-", dir=root))
        try:
            _npm_install(npm, cli, staging)
            _check_version(cli, staging / "node_modules" / ".bin" / cli.bin)
            staging.rename(target)
        finally:
            shutil.rmtree(staging, ignore_errors=True)
    return executable


def _npm_install(npm: str, cli: NpmCli, prefix: Path) -> None:
    spec = f"{cli.package}@{cli.version}"
    command = [npm, "install", "--prefix", str(prefix), "--no-audit", "--no-fund", "--no-save"]
    command += ["--loglevel=error", "--include=optional", spec]
    try:
        done = subprocess.run(
            command,
            capture_output=True,
            text=True,
            timeout=NPM_INSTALL_TIMEOUT_S,
            stdin=subprocess.DEVNULL,
        )
    except subprocess.TimeoutExpired as exc:
        raise LiveSetupError(
            f"npm install {spec} did not finish in {NPM_INSTALL_TIMEOUT_S} s (is the npm registry reachable?)"
        ) from exc
    if done.returncode != 0:
        tail = (done.stderr or done.stdout).strip().splitlines()[-8:]
        raise LiveSetupError(
            f"npm install {spec} failed (exit {done.returncode}): " + " | ".join(tail)
        )


def _check_version(cli: NpmCli, executable: Path) -> None:
    try:
        done = subprocess.run(
            [str(executable), "--version"],
            capture_output=True,
            text=True,
            timeout=60,
            stdin=subprocess.DEVNULL,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise LiveSetupError(
            f"{cli.package}@{cli.version} installed but does not start: {exc}"
        ) from exc
    # pi prints its version on stderr, the others on stdout
    if done.returncode != 0 or cli.version not in done.stdout + done.stderr:
        raise LiveSetupError(
            f"{cli.package}@{cli.version} installed but `{cli.bin} --version` said "
            f"{(done.stdout + done.stderr).strip()[:200]!r} (exit {done.returncode})"
        )


@dataclass(frozen=True)
class Sandbox:
    """A temporary HOME, workspace and TMPDIR: everything a CLI writes stays inside (Claude Code
    keeps task output under $TMPDIR/claude-UID). Reuse one sandbox for a run and its resume."""

    home: Path
    workspace: Path
    tmp: Path

    @classmethod
    def create(cls, parent: Path) -> Sandbox:
        sandbox = cls(parent / "home", parent / "workspace", parent / "tmp")
        for folder in (sandbox.home, sandbox.workspace, sandbox.tmp):
            folder.mkdir(parents=True, exist_ok=True)
        return sandbox

    @property
    def codex_home(self) -> Path:
        return self.home / ".codex"


@dataclass
class CliRun:
    """One CLI run: what it printed, what it wrote, what the upstream saw meanwhile."""

    args: list[str]
    returncode: int
    stdout: str
    stderr: str
    seconds: float
    requests: list[RecordedRequest] = field(default_factory=list)  # what the upstream saw meanwhile
    output: Any = None  # Claude Code: the --output-format json object; Codex: the --json events
    session_id: str | None = None
    session_file: Path | None = None

    def turn_requests(self) -> list[RecordedRequest]:
        return [r for r in self.requests if r.is_turn]

    def describe(self) -> str:
        """A short account for assertion messages (the API key is a placeholder, never a secret)."""
        tail = "\n".join(self.stderr.strip().splitlines()[-15:])
        return (
            f"{' '.join(self.args[:2])} ... exit {self.returncode} in {self.seconds:.1f}s, "
            f"{len(self.requests)} requests\nstdout: {self.stdout[-1500:]}\nstderr tail:\n{tail}"
        )


def _base_env(sandbox: Sandbox) -> dict[str, str]:
    """A clean environment: nothing of the caller's own agent or keys leaks into the run."""
    return {
        "PATH": os.environ.get("PATH", "/usr/local/bin:/usr/bin:/bin"),
        "HOME": str(sandbox.home),
        "TMPDIR": str(sandbox.tmp),
        "USER": os.environ.get("USER", "root"),
        "SHELL": "/bin/bash",
        "LANG": "C.UTF-8",
        "TZ": "UTC",
        "TERM": "dumb",
        "NO_COLOR": "1",
    }


def _run(
    args: list[str],
    env: dict[str, str],
    cwd: Path,
    upstream: FakeUpstream | None,
    timeout: float,
) -> CliRun:
    """Run the CLI to its end (killed with everything it started past `timeout`); the caller
    fills in what it printed and wrote."""
    seen = len(upstream.requests) if upstream is not None else 0
    start = time.monotonic()
    process = subprocess.Popen(
        args,
        cwd=cwd,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,  # so a timeout ends the CLI and every tool process it started
    )
    try:
        stdout, stderr = process.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        stdout, stderr = process.communicate()
        stderr += f"\n[harness] killed after {timeout} s"
    return CliRun(
        args=args,
        returncode=process.returncode,
        stdout=stdout,
        stderr=stderr,
        seconds=time.monotonic() - start,
        requests=list(upstream.requests[seen:]) if upstream is not None else [],
    )


def _base_url(
    upstream: FakeUpstream | None, script: Script | Sequence[Turn] | None, base_url: str | None
) -> str:
    """The URL the CLI is pointed at (default: the upstream's), after loading `script`."""
    if script is not None:
        if upstream is None:
            raise ValueError("a script needs the FakeUpstream that plays it")
        upstream.set_script(script)
    url = base_url or (upstream.url if upstream is not None else None)
    if url is None:
        raise ValueError("a run needs a base_url or an upstream")
    return url


# --- Claude Code ------------------------------------------------------------------------------------

# What Claude Code needs offline: a base URL and any key. CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC
# turns off telemetry, error reporting, the update check and the startup probe (`HEAD /api/hello`):
# with it, strace shows no connection but the ones to the base URL.
CLAUDE_ENV = {
    "ANTHROPIC_API_KEY": "sk-ant-compactkit-live-placeholder",
    "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
}


def run_claude(
    task: str,
    sandbox: Sandbox,
    *,
    upstream: FakeUpstream | None = None,
    script: Script | Sequence[Turn] | None = None,
    base_url: str | None = None,
    resume: str | None = None,
    allowed_tools: Sequence[str] = ("Bash", "Read"),
    extra_args: Sequence[str] = (),
    env: Mapping[str, str] | None = None,
    timeout: float = RUN_TIMEOUT_S,
    executable: Path | None = None,
) -> CliRun:
    """`claude -p TASK --allowedTools ... --output-format json` in `sandbox`, against `base_url`
    (default: the upstream's). `resume` continues a session by id (`--resume ID`). `script`, if
    given, is loaded into `upstream` first."""
    url = _base_url(upstream, script, base_url)
    args = [str(executable or install(CLAUDE_CODE)), "-p", task, "--output-format", "json"]
    args += ["--allowedTools", ",".join(allowed_tools)]
    if resume is not None:
        args += ["--resume", resume]
    args += list(extra_args)
    run_env = _base_env(sandbox) | CLAUDE_ENV | {"ANTHROPIC_BASE_URL": url} | dict(env or {})
    run = _run(args, run_env, sandbox.workspace, upstream, timeout)
    run.output = _json_or_none(run.stdout)
    if isinstance(run.output, dict) and isinstance(run.output.get("session_id"), str):
        run.session_id = run.output["session_id"]
        run.session_file = claude_session_file(sandbox, run.output["session_id"])
    return run


# The interactive UI (`claude`, no -p) in a fresh HOME needs onboarding done, the workspace trusted
# and the API key of the environment approved, else it asks first (see start_claude_tui). A short
# system prompt, not recorded (`--system-prompt-snapshot off`), keeps the session file small.
CLAUDE_TUI_ARGS = (
    "--permission-mode",
    "default",  # ask before an edit (the default, auto mode, would decide alone)
    "--strict-mcp-config",
    "--system-prompt-snapshot",
    "off",
    "--system-prompt",
    "You are a coding agent. Use the tools to do what the user asks.",
)


def start_claude_tui(
    sandbox: Sandbox,
    *,
    upstream: FakeUpstream | None = None,
    script: Script | Sequence[Turn] | None = None,
    base_url: str | None = None,
    tools: Sequence[str] = ("Bash", "Read", "Edit"),
    allowed_tools: Sequence[str] = ("Bash", "Read"),
    extra_args: Sequence[str] = (),
    env: Mapping[str, str] | None = None,
    executable: Path | None = None,
) -> Terminal:
    """`claude` in its interactive UI under a pty in `sandbox`, against `base_url` (default: the
    upstream's), offering `tools` and asking before any tool outside `allowed_tools`. Agents run
    in the foreground (`CLAUDE_CODE_DISABLE_BACKGROUND_TASKS`), so each turn ends in order.
    `--bare` (in `extra_args`) offers Bash, Read and Edit only."""
    url = _base_url(upstream, script, base_url)
    key = CLAUDE_ENV["ANTHROPIC_API_KEY"]
    state = {
        "hasCompletedOnboarding": True,
        "theme": "dark",
        "numStartups": 2,
        "customApiKeyResponses": {"approved": [key[-20:]], "rejected": []},
        "projects": {str(sandbox.workspace): {"hasTrustDialogAccepted": True, "allowedTools": []}},
    }
    (sandbox.home / ".claude.json").write_text(json.dumps(state))
    args = [str(executable or install(CLAUDE_CODE)), *CLAUDE_TUI_ARGS]
    args += ["--tools", ",".join(tools), "--allowedTools", ",".join(allowed_tools), *extra_args]
    run_env = _base_env(sandbox) | CLAUDE_ENV | {"ANTHROPIC_BASE_URL": url}
    run_env |= {
        "TERM": "xterm-256color",
        "CLAUDE_CODE_DISABLE_BACKGROUND_TASKS": "1",
        # the UI installs the official plugin marketplace at start (a clone from github.com)
        "CLAUDE_CODE_DISABLE_OFFICIAL_MARKETPLACE_AUTOINSTALL": "1",
    }
    run_env.pop("NO_COLOR")
    return Terminal(args, run_env | dict(env or {}), sandbox.workspace)


def claude_session_file(sandbox: Sandbox, session_id: str) -> Path | None:
    """$HOME/.claude/projects/<cwd with / as ->/<session id>.jsonl, where Claude Code writes it."""
    found = sorted((sandbox.home / ".claude" / "projects").glob(f"*/{session_id}.jsonl"))
    return found[0] if found else None


# --- Codex --------------------------------------------------------------------------------------

CODEX_MODEL = "gpt-5.5"  # a model Codex 0.171 knows (its tools and instructions for it)
CODEX_PROVIDER = "compactkit-live"
CODEX_KEY_ENV = "COMPACTKIT_LIVE_OPENAI_KEY"


def codex_config(base_url: str, model: str = CODEX_MODEL) -> str:
    """$CODEX_HOME/config.toml for one run. Offline: `features.plugins = false` stops the plugin
    catalogue sync (github.com) and `analytics.enabled = false` the analytics upload (chatgpt.com);
    strace then shows no connection but the ones to base_url. No retries: a failure shows at once."""
    return "\n".join(
        [
            f'model = "{model}"',
            f'model_provider = "{CODEX_PROVIDER}"',
            "",
            "[analytics]",
            "enabled = false",
            "",
            "[features]",
            "plugins = false",
            "",
            f'[model_providers."{CODEX_PROVIDER}"]',
            'name = "compactkit live test upstream"',
            f'base_url = "{base_url.rstrip("/")}/v1"',
            'wire_api = "responses"',
            f'env_key = "{CODEX_KEY_ENV}"',
            "request_max_retries = 0",
            "stream_max_retries = 0",
            "",
        ]
    )


def run_codex(
    task: str,
    sandbox: Sandbox,
    *,
    upstream: FakeUpstream | None = None,
    script: Script | Sequence[Turn] | None = None,
    base_url: str | None = None,
    resume: str | None = None,
    model: str = CODEX_MODEL,
    extra_args: Sequence[str] = (),
    env: Mapping[str, str] | None = None,
    timeout: float = RUN_TIMEOUT_S,
    executable: Path | None = None,
) -> CliRun:
    """`codex exec --json --skip-git-repo-check --dangerously-bypass-approvals-and-sandbox TASK`
    in `sandbox` with a provider at `base_url` + /v1 (Responses API); `resume` continues a session
    by id (`codex exec resume ID TASK`)."""
    url = _base_url(upstream, script, base_url)
    sandbox.codex_home.mkdir(parents=True, exist_ok=True)
    (sandbox.codex_home / "config.toml").write_text(codex_config(url, model))
    args = [str(executable or install(CODEX)), "exec"]
    if resume is not None:
        args += ["resume"]
    args += ["--json", "--skip-git-repo-check", "--dangerously-bypass-approvals-and-sandbox"]
    args += list(extra_args)
    args += [resume, task] if resume is not None else [task]
    run_env = _base_env(sandbox) | {
        "CODEX_HOME": str(sandbox.codex_home),
        CODEX_KEY_ENV: "sk-compactkit-live-placeholder",
    }
    run_env |= dict(env or {})
    run = _run(args, run_env, sandbox.workspace, upstream, timeout)
    lines = (_json_or_none(line) for line in run.stdout.splitlines())
    run.output = [event for event in lines if isinstance(event, dict)]
    started = [e for e in run.output if e.get("type") == "thread.started"]
    if started and isinstance(started[0].get("thread_id"), str):
        run.session_id = started[0]["thread_id"]
        run.session_file = codex_rollout_file(sandbox, started[0]["thread_id"])
    return run


# The UI fetches an announcement from raw.githubusercontent.com at every start and no setting stops
# it; through a proxy on a loopback port nobody listens on, that fetch fails at once without a DNS
# lookup, while the fake model on 127.0.0.1 is reached directly.
NO_INTERNET_PROXY = {
    "HTTPS_PROXY": "http://127.0.0.1:9",
    "HTTP_PROXY": "http://127.0.0.1:9",
    "ALL_PROXY": "http://127.0.0.1:9",
    "NO_PROXY": "127.0.0.1,localhost",
}


def offers_exec_command(request: RecordedRequest) -> bool:
    """A Codex turn request: it offers the shell tool (its title request offers apply_patch only)."""
    tools = request.body.get("tools") if isinstance(request.body, dict) else None
    return any(isinstance(t, dict) and t.get("name") == "exec_command" for t in tools or [])


def start_codex_tui(
    sandbox: Sandbox,
    *,
    upstream: FakeUpstream | None = None,
    script: Script | Sequence[Turn] | None = None,
    base_url: str | None = None,
    model: str = CODEX_MODEL,
    instructions: str = "You are a coding agent. Use the tools to do what the user asks.",
    env: Mapping[str, str] | None = None,
    executable: Path | None = None,
) -> Terminal:
    """`codex --no-daemon` in its interactive UI under a pty in `sandbox`: the workspace trusted,
    a read-only sandbox, and the model asking before a command that needs more
    (`approval_policy = "on-request"`: a call with `sandbox_permissions: require_escalated`).
    `instructions` replaces Codex's long base instructions (`model_instructions_file`), which
    keeps the rollout small. Without --no-daemon it starts a background app server."""
    url = _base_url(upstream, script, base_url)
    sandbox.codex_home.mkdir(parents=True, exist_ok=True)
    (sandbox.codex_home / "instructions.md").write_text(instructions + "\n")
    settings = [
        'approval_policy = "on-request"',
        'sandbox_mode = "read-only"',
        f'model_instructions_file = "{sandbox.codex_home / "instructions.md"}"',
        "check_for_update_on_startup = false",  # else: api.github.com (the latest release)
        codex_config(url, model),
        "[tui]",
        "show_tooltips = false",  # else: raw.githubusercontent.com (the announcement tip)
        "",
        f'[projects."{sandbox.workspace}"]',
        'trust_level = "trusted"',
        "",
    ]
    (sandbox.codex_home / "config.toml").write_text("\n".join(settings))
    run_env = _base_env(sandbox) | {
        "CODEX_HOME": str(sandbox.codex_home),
        CODEX_KEY_ENV: "sk-compactkit-live-placeholder",
        "TERM": "xterm-256color",
    }
    run_env |= NO_INTERNET_PROXY
    run_env.pop("NO_COLOR")
    args = [str(executable or install(CODEX)), "--no-daemon"]
    return Terminal(args, run_env | dict(env or {}), sandbox.workspace)


def codex_rollout_file(sandbox: Sandbox, session_id: str) -> Path | None:
    """$CODEX_HOME/sessions/YYYY/MM/DD/rollout-<time>-<session id>.jsonl, where Codex writes it."""
    found = sorted((sandbox.codex_home / "sessions").rglob(f"rollout-*-{session_id}.jsonl"))
    return found[0] if found else None


def codex_final_message(run: CliRun) -> str | None:
    """The agent's last message in a Codex run (from its --json events)."""
    texts = [
        e["item"].get("text")
        for e in run.output or []
        if e.get("type") == "item.completed"
        and (e.get("item") or {}).get("type") == "agent_message"
    ]
    return texts[-1] if texts else None


# --- pi -----------------------------------------------------------------------------------------

PI_PROVIDER = "compactkit-live"
PI_MODEL = "fake-model"
PI_CONTEXT_WINDOW = 200_000


def pi_models(base_url: str) -> str:
    """~/.pi/agent/models.json for one run: a custom provider on the Anthropic Messages API at
    `base_url` (pi's Anthropic client adds /v1/messages) with one model and a placeholder key."""
    provider = {
        "baseUrl": base_url.rstrip("/"),
        "api": "anthropic-messages",
        "apiKey": "sk-ant-compactkit-live-placeholder",
        "models": [{"id": PI_MODEL, "contextWindow": PI_CONTEXT_WINDOW, "maxTokens": 8192}],
    }
    return json.dumps({"providers": {PI_PROVIDER: provider}}, indent=2)


def pi_session_dir(sandbox: Sandbox) -> Path:
    """~/.pi/agent/sessions/--<cwd without its first /, every / as ->--/, where pi keeps the
    sessions of the workspace (`getDefaultSessionDir`)."""
    cwd = str(sandbox.workspace.resolve()).lstrip("/").replace("/", "-").replace(":", "-")
    return sandbox.home / ".pi" / "agent" / "sessions" / f"--{cwd}--"


def run_pi(
    task: str,
    sandbox: Sandbox,
    *,
    upstream: FakeUpstream | None = None,
    script: Script | Sequence[Turn] | None = None,
    base_url: str | None = None,
    resume: str | None = None,
    extra_args: Sequence[str] = (),
    env: Mapping[str, str] | None = None,
    timeout: float = RUN_TIMEOUT_S,
    executable: Path | None = None,
) -> CliRun:
    """`pi --print --offline --provider compactkit-live --model fake-model TASK` in `sandbox`
    against `base_url` (models.json); `resume` continues a session by id (`--session ID`, which
    pi looks up among the workspace's sessions). `--offline` (PI_OFFLINE=1) turns off pi's startup
    network (version and package checks)."""
    url = _base_url(upstream, script, base_url)
    agent_dir = sandbox.home / ".pi" / "agent"
    agent_dir.mkdir(parents=True, exist_ok=True)
    (agent_dir / "models.json").write_text(pi_models(url))
    args = [str(executable or install(PI)), "--print", "--offline"]
    args += ["--provider", PI_PROVIDER, "--model", PI_MODEL]
    if resume is not None:
        args += ["--session", resume]
    args += [*extra_args, task]
    run_env = _base_env(sandbox) | {"PI_OFFLINE": "1"} | dict(env or {})
    before = set(pi_session_files(sandbox))
    run = _run(args, run_env, sandbox.workspace, upstream, timeout)
    run.output = run.stdout
    # the file it created, else the one it went on in (the last written)
    files = pi_session_files(sandbox)
    found = [p for p in files if p not in before] or sorted(files, key=lambda p: p.stat().st_mtime)[
        -1:
    ]
    if found:
        run.session_file = found[0]
        run.session_id = json.loads(found[0].read_text().splitlines()[0]).get("id")
    return run


def pi_session_files(sandbox: Sandbox) -> list[Path]:
    return sorted(pi_session_dir(sandbox).glob("*.jsonl"))


PI_CONTEXT_SCRIPT = Path(__file__).with_name("pi_context.mjs")


def pi_contexts(files: Sequence[Path], executable: Path | None = None) -> list[dict[str, Any]]:
    """What pi sends its model for each session file, by pi's own loader from the installed
    package (`SessionManager.open`, `buildSessionContext`, `convertToLlm`; see pi_context.mjs):
    one object per file with `sessionId`, `model`, `thinkingLevel` and the `messages`."""
    node = shutil.which("node")
    if node is None:
        raise LiveSetupError("node is not on PATH: install Node.js to run pi's session loader")
    package = (executable or install(PI)).resolve().parents[1]  # node_modules/<pkg>/dist/cli.js
    done = subprocess.run(
        [node, str(PI_CONTEXT_SCRIPT), str(package), *map(str, files)],
        capture_output=True,
        text=True,
        timeout=RUN_TIMEOUT_S + 5 * len(files),
        stdin=subprocess.DEVNULL,
    )
    if done.returncode != 0:
        raise AssertionError(
            f"pi's session loader failed (exit {done.returncode}): {done.stderr[-2000:]}"
        )
    return [json.loads(line) for line in done.stdout.splitlines() if line.strip()]


def _json_or_none(text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError:
        return None


FIRST_TASK = "Write the numbers 1 to 3000 to f.txt, then read it back."
"""The first run's task in the resume tests: a file written and read back (a long tool output)."""


def first_session(
    run: Callable[..., CliRun],
    folder: Path,
    upstream: FakeUpstream,
    script: Script | Sequence[Turn],
    executable: Path,
) -> CliRun:
    """An agent's first run of `FIRST_TASK` in a new sandbox under `folder`, checked to have
    ended well and written its session file."""
    done = run(
        FIRST_TASK, Sandbox.create(folder), upstream=upstream, script=script, executable=executable
    )
    assert done.returncode == 0 and done.session_file is not None, done.describe()
    return done


def claude_project(sandbox: Sandbox) -> Path:
    """Where Claude Code keeps the sessions of the sandbox's workspace: a folder named after its
    cwd, every character but a letter or digit made "-"."""
    slug = re.sub(r"[^A-Za-z0-9]", "-", str(sandbox.workspace))
    return sandbox.home / ".claude" / "projects" / slug


QUESTION = "How many lines does f.txt have?"
"""What the resume tests ask an agent resumed on a session of `FIRST_TASK`."""


def session_target(run: Callable[..., CliRun], sandbox: Sandbox, session_id: str) -> Path:
    """Where the agent `run` starts finds session `session_id` in `sandbox` (the folder made):
    Claude Code's project folder, a Codex day folder of rollouts, pi's sessions of the workspace."""
    if run is run_claude:
        folder, name = claude_project(sandbox), f"{session_id}.jsonl"
    elif run is run_codex:
        folder = sandbox.codex_home / "sessions" / "2026" / "01" / "01"
        name = f"rollout-2026-01-01T00-00-00-{session_id}.jsonl"
    else:
        folder, name = pi_session_dir(sandbox), f"2026-01-01T00-00-00-000Z_{session_id}.jsonl"
    folder.mkdir(parents=True)
    return folder / name


def resume(
    run: Callable[..., CliRun],
    sandbox: Sandbox,
    upstream: FakeUpstream,
    session_id: str,
    executable: Path,
    reply: str = "3000 lines.",
) -> CliRun:
    """The agent resumed on session `session_id` in `sandbox` and asked `QUESTION`, the model
    answering `reply`; checked to have ended well."""
    resumed = run(
        QUESTION,
        sandbox,
        upstream=upstream,
        script=[answer(reply)],
        resume=session_id,
        executable=executable,
    )
    assert resumed.returncode == 0, resumed.describe()
    return resumed
