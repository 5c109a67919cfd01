"""What a tool call did: the files it read or changed, its command, whether it failed and why.

The one place that knows the agents' tool vocabularies (Claude Code `Read`/`Edit`/`Bash`, Codex `shell`
and `apply_patch`, pi `read`/`edit`, OpenHands `str_replace_editor`/`execute_bash`, SWE-agent `open`/
`edit` commands, Gemini CLI `read_file`/`replace`/`run_shell_command`, Cline `read_file`/
`write_to_file`/`execute_command`) and how shell commands name files. Strategies label what they
replace with it, the extractive summary lists files, commands and errors with it, and `inspect` names
payloads with it. (The retention scorer keeps its own reading on purpose: a judge that shared this code
would agree with the summary by construction.)

    >>> call = ToolCallBlock(id="1", name="Bash", input={"command": "sed -i 's/a/b/' src/x.py"})
    >>> read_call(call).changed
    ('src/x.py',)
"""

from __future__ import annotations

import posixpath
import re
import shlex
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any, Literal

from .context import ElidedBlock, TextBlock, ToolCallBlock, ToolResultBlock

PATH_KEYS = ("file_path", "path", "filepath", "filename", "file", "absolute_path", "notebook_path")
"""Arguments that name the one file a call works on, in the order they are looked for."""
COMMAND_KEYS = ("command", "cmd", "code", "script")
"""Arguments that hold a command (a string, or a list of words)."""

EDITOR_TOOLS = {"str_replace_editor", "str_replace_based_edit_tool", "text_editor", "editor"}
"""Tools with a `command` sub-command (`view`, `create`, `str_replace`...) and a `path`."""
EDITOR_READ = {"view", "read"}
WRITE_TOOLS = {
    "edit",
    "multiedit",
    "write",
    "write_file",
    "write_to_file",
    "replace",
    "replace_in_file",
    "create_file",
    "edit_file",
    "notebookedit",
    "str_replace",
    "insert",
    "create",
    "delete_file",
    "apply_diff",
}
READ_TOOLS = {"read", "read_file", "view", "view_file", "open", "cat", "notebookread", "open_file"}
QUIET_TOOLS = {"think", "bashoutput", "write_stdin", "killbash", "killshell"}
"""Calls that neither touch files nor run a command of their own (polls, notes to self)."""
PLAN_TOOLS = {"todowrite", "update_plan", "todo_write"}
READ_COMMANDS = {"cat", "nl", "head", "tail", "less", "more", "bat"}
SHELL_CHARS = 4000
"""Only the start of a long command is parsed for the files it touches."""

_SHELL_OPS = {"|", "||", "&", "&&", ";", ";;", "\n", "(", ")", "|&"}
_PATCH_FILE = re.compile(r"^\*\*\* (?:Update|Add|Delete) File: (.+)$", re.M)
_MOVE_TO = re.compile(r"^\*\*\* Move to: (.+)$", re.M)
_HEREDOC = re.compile(r"<<-?\s*['\"]?([A-Za-z_][A-Za-z0-9_]*)['\"]?")
_PLAIN_PATH = re.compile(r"^[\w./~+@-]+$")
_EXIT_CODE = re.compile(
    r"<returncode>\s*(-?\d+)\s*</returncode>|exited with code (-?\d+)|exit code:?\s*(-?\d+)"
    r"|exit status:?\s*(-?\d+)",
    re.I,
)
_STRONG_ERROR = re.compile(
    r"\b\w*(?:Error|Exception)\b\s*[:(]"
    r"|(?:^|[:)\]]\s)(?:error|ERROR)(?:\[\w+\])?(?: TS\d+)?:"
    r"|\bfatal:|^E\s{2,}\S|^FAILED\b|^\u00d7\s"  # \u00d7: the cross that biome/rustc print
)
_WEAK_ERROR = re.compile(
    r"Error|Exception|\berror\b|ERROR|FAILED|\bfailed\b|Traceback|No such file or directory"
    r"|command not found|Permission denied|\b(?:[0-9]+ )?exceptions?\b|\bfailures?\b"
)
_WRAPPER_LINE = re.compile(r"^[\s\d]*(?:</?[A-Za-z][\w-]*>[\s\d]*)+$")
"""Tags a harness wraps output in (`<returncode>1</returncode>`, `<output>`), not what it says."""
_SOURCE_LINE = re.compile(r"^\s*>?\s*\d+\s*(?:[│|:]|$)|^\s*[│|]")

CallKind = Literal[
    "plan", "quiet", "editor", "patch", "swe-agent", "write", "read", "command", "other"
]


# --------------------------------------------------------------------------- arguments


def input_dict(call: ToolCallBlock) -> dict[str, Any]:
    """The call's arguments when they are an object (empty for free-text tools)."""
    return call.input if isinstance(call.input, dict) else {}


def path_arg(call: ToolCallBlock) -> str | None:
    """The file the call names in an argument (`file_path`, `path`...), stripped."""
    return path_in(input_dict(call))


def path_in(data: Mapping[str, Any]) -> str | None:
    """The file that arguments name (`file_path`, `path`...), stripped: `path_arg` of a call."""
    for key in PATH_KEYS:
        value = data.get(key)
        if isinstance(value, str) and value.strip():
            return value.strip()
    return None


def command_arg(call: ToolCallBlock) -> tuple[str, str] | None:
    """(argument name, command text) of a shell-like call: a free-text input is a command; a list of
    words is joined with spaces."""
    if isinstance(call.input, str):
        return ("command", call.input) if call.input.strip() else None
    data = input_dict(call)
    for key in COMMAND_KEYS:
        value = data.get(key)
        if isinstance(value, list):
            value = _argv_text([str(v) for v in value])
        if isinstance(value, str) and value.strip():
            return key, value
    return None


def _argv_text(argv: list[str]) -> str:
    """An argument vector as the command line it runs: the script of `bash -lc SCRIPT` (Codex's
    `shell` tool), else the words quoted where they need it."""
    if (
        len(argv) == 3
        and argv[0].rsplit("/", 1)[-1] in ("bash", "sh", "zsh")
        and argv[1]
        in (
            "-c",
            "-lc",
        )
    ):
        return argv[2]
    return shlex.join(argv)


def patch_files(call: ToolCallBlock) -> list[str] | None:
    """The files an `apply_patch` style call changes (`*** Update File: x`), None when the call
    carries no patch."""
    data = input_dict(call)
    patch = call.input if isinstance(call.input, str) else data.get("input") or data.get("patch")
    if not isinstance(patch, str) or "*** Begin Patch" not in patch:
        return None
    return [found.strip() for found in (*_PATCH_FILE.findall(patch), *_MOVE_TO.findall(patch))]


# --------------------------------------------------------------------------- shell commands


def _drop_heredocs(command: str) -> str:
    """The command without here-document bodies (their text is data, not shell)."""
    out: list[str] = []
    lines = command.split("\n")
    i = 0
    while i < len(lines):
        line = lines[i]
        out.append(line)
        match = _HEREDOC.search(line)
        i += 1
        if match:
            end = match.group(1)
            while i < len(lines) and lines[i].strip() != end:
                i += 1
            i += 1
    return "\n".join(out)


_SHELL_SYNTAX = re.compile(r"[\"'\\();<>|&\n#]")
"""What makes shlex split a command line otherwise than at its blanks."""
_SHELL_BLANKS = re.compile(r"[ \t\r]+")


def shell_words(command: str) -> list[list[str]]:
    """Simple commands (word lists, redirections kept as tokens) of a shell command line."""
    text = _drop_heredocs(command[:SHELL_CHARS])
    # comment lines go first: shlex would swallow their newline and join the commands around them
    text = "\n".join(line for line in text.split("\n") if not line.lstrip().startswith("#"))
    if _SHELL_SYNTAX.search(text) is None:  # no quote, escape, comment or operator: plain words
        tokens = [word for word in _SHELL_BLANKS.split(text) if word]
    else:
        lexer = shlex.shlex(text, posix=True, punctuation_chars="();<>|&\n")
        lexer.whitespace = " \t\r"
        lexer.whitespace_split = True
        try:
            tokens = list(lexer)
        except ValueError:  # unbalanced quotes: fall back to plain words on the first line
            tokens = command.split("\n", 1)[0].split()
    commands: list[list[str]] = [[]]
    for token in tokens:
        if token in _SHELL_OPS:
            commands.append([])
        else:
            commands[-1].append(token)
    return [c for c in commands if c]


def looks_like_path(word: str) -> bool:
    """A word that names a file (has a dot or a slash, no shell syntax, not a flag or a device)."""
    return (
        bool(_PLAIN_PATH.match(word))
        and not word.startswith("-")
        and word not in ("/dev/null", "/dev/stdout", "/dev/stderr")
        and ("." in word or "/" in word)
    )


def shell_files(command: str) -> tuple[list[str], list[str]]:
    """(files read, files changed) by a shell command, as far as its words tell."""
    read: list[str] = []
    changed: list[str] = []
    cwd = ""  # a `cd DIR` earlier in the same command line makes later relative paths DIR/...

    def at(path: str) -> str:
        if not cwd or path.startswith(("/", "~")):
            return path
        return posixpath.normpath(posixpath.join(cwd, path))

    for words in shell_words(command):
        plain: list[str] = []
        k = 0
        while k < len(words):
            word = words[k]
            if word in (">", ">>", ">|") and k + 1 < len(words):
                if looks_like_path(words[k + 1]):
                    changed.append(at(words[k + 1]))
                k += 2
                continue
            if word in ("<", "<<", "<<<", "<<-", ">&", "<&") and k + 1 < len(words):
                k += 2
                continue
            plain.append(word)
            k += 1
        while plain and ("=" in plain[0] and not plain[0].startswith("-")):
            plain = plain[1:]  # VAR=value prefixes
        if plain and plain[0] in ("sudo", "env", "time", "nohup"):
            plain = plain[1:]
        if not plain:
            continue
        tool = plain[0].rsplit("/", 1)[-1]
        args = plain[1:]
        if tool == "cd":
            target = args[0] if args else ""
            cwd = "" if not target or target.startswith(("/", "~", "-")) else at(target)
            if target.startswith("/"):
                cwd = target
            continue
        # operands as written (a bare word is no path even once `cd` puts a directory before it)
        files = [a for a in args if a and not a.startswith("-")]  # `sed -i ''` (BSD)
        found: list[str] = []
        into = changed
        if tool in ("sed", "perl") and any(a.startswith("-i") or a == "-pi" for a in args):
            has_script_flag = any(a in ("-e", "--expression", "-f") for a in args)
            found = files if has_script_flag else files[1:]
            if has_script_flag:  # the argument after -e is the script
                scripts = {args[i + 1] for i, a in enumerate(args[:-1]) if a in ("-e", "-f")}
                found = [f for f in files if f not in scripts]
        elif tool == "sed" and "-n" in args and len(files) >= 2:
            found, into = files[1:], read
        elif tool in ("tee", "touch", "rm", "unlink") or (tool == "mv" and len(files) >= 2):
            found = files
        elif tool == "cp" and len(files) >= 2:
            found = files[-1:]
        elif tool in READ_COMMANDS:
            found, into = files, read
        into.extend(at(f) for f in found if looks_like_path(f))
    return read, changed


def _path_from_command(command: str) -> str | None:
    """The one file a simple read command shows whole (`cat x`, `sed -n 1,80p x`, `open x`)."""
    command = command.strip()
    if not command or "\n" in command or any(op in command for op in ("|", "&&", ";", ">")):
        return None
    try:
        words = shlex.split(command)
    except ValueError:
        return None
    if words and words[0] in ("bash", "sh") and len(words) >= 3 and words[1] in ("-c", "-lc"):
        return _path_from_command(words[2])
    if not words:
        return None
    tool = words[0].rsplit("/", 1)[-1]
    args = [w for w in words[1:] if not w.startswith("-")]
    if tool in READ_COMMANDS and len(args) == 1:
        return args[0]
    if tool == "sed" and "-n" in words and len(args) == 2 and re.fullmatch(r"[\d,$p;]+", args[0]):
        return args[1]
    if tool in ("open", "view") and args:
        return args[0]
    return None


def payload_path(call: ToolCallBlock | None) -> str | None:
    """The file whose content a call's result shows, when one can be told: a path argument, or one
    `cat`/`sed -n`/`head` style shell command on one file."""
    if call is None:
        return None
    held = call.__dict__  # a block never changes: what it names is worked out once
    if "_payload_path" not in held:
        held["_payload_path"] = _payload_path(call)
    found: str | None = held["_payload_path"]
    return found


def _payload_path(call: ToolCallBlock) -> str | None:
    path = path_arg(call)
    if path:
        return path
    command = command_arg(call)
    if command is None or command[0] not in ("command", "cmd"):
        return None
    return _path_from_command(command[1])


# --------------------------------------------------------------------------- outcomes


def exit_code(text: str) -> int | None:
    """The exit code a tool output reports (looked for at its start and end only)."""
    for chunk in (text[:400], text[-400:]):
        match = _EXIT_CODE.search(chunk)
        if match:
            value = next(g for g in match.groups() if g is not None)
            return int(value)
    return None


def shown_text(result: ToolResultBlock) -> str:
    """The text of a tool output as the model is shown it: its text parts, and the text of an
    output folded on arrival (an `ElidedBlock`, whose `text` is the folded output)."""
    if all(isinstance(p, TextBlock) for p in result.content):
        return result.text
    return "\n".join(p.text for p in result.content if isinstance(p, (TextBlock, ElidedBlock)))


def failed(result: ToolResultBlock | None) -> tuple[bool, int | None]:
    """(whether the call failed, the exit code its output reports): an error result, or a nonzero
    exit code. A call with no result has not failed."""
    if result is None:
        return False, None
    held = result.__dict__  # a block never changes: its outcome is read once
    if "_failed" not in held:
        code = exit_code(shown_text(result))
        held["_failed"] = (result.is_error or (code is not None and code != 0), code)
    found: tuple[bool, int | None] = held["_failed"]
    return found


def error_line(text: str) -> str:
    """The line of a failed call's output that says what went wrong: the last line shaped like an
    error report (`ValueError: ...`, `error TS2305: ...`, `E   assert ...`), else the last line
    naming an error, else the first non-empty line. Source listings in the output are skipped."""
    lines = [
        line.strip()
        for line in text.splitlines()
        if line.strip() and not _SOURCE_LINE.match(line) and not _WRAPPER_LINE.match(line)
    ]
    for pattern in (_STRONG_ERROR, _WEAK_ERROR):
        for line in reversed(lines):
            if pattern.search(line):
                return line
    return lines[0] if lines else ""


# --------------------------------------------------------------------------- one call


@dataclass(frozen=True)
class CallFacts:
    """What one tool call did, read off its input (see `read_call`)."""

    kind: CallKind
    name: str
    """The tool name, lowercased."""
    path: str | None = None
    """The file named by an argument."""
    read: tuple[str, ...] = ()
    changed: tuple[str, ...] = ()
    command: str | None = None
    """The command text of a shell-like call (also set for `code` calls, whose files are not read
    off the text: it is a program, not shell)."""
    sub: str = ""
    """An editor's sub-command (`view`, `str_replace`), or a SWE-agent command's name."""
    args: tuple[str, ...] = ()
    """A SWE-agent command's words after its name."""


def read_call(call: ToolCallBlock, open_file: str | None = None) -> CallFacts:
    """Classify `call` and read which files it read or changed. `open_file` is the file a SWE-agent
    session has open (its `edit`/`insert` commands change that file)."""
    name = call.name.strip().lower()
    data = input_dict(call)
    if name in PLAN_TOOLS:
        return CallFacts("plan", name)
    if name in QUIET_TOOLS:
        return CallFacts("quiet", name)
    path = path_arg(call)
    if name in EDITOR_TOOLS and path:
        sub = str(data.get("command", "")).lower()
        reads = sub in EDITOR_READ
        return CallFacts(
            "editor",
            name,
            path,
            read=(path,) if reads else (),
            changed=() if reads else (path,),
            sub=sub,
        )
    patched = patch_files(call)
    if patched is not None:
        return CallFacts("patch", name, path, changed=tuple(patched))
    command = command_arg(call)
    if command and not path and command[0] == "command" and name != "bash":
        # SWE-agent style tools: {"command": "open src/x.py 120"}, {"command": "edit 1:3\n..."}
        words = command[1].split()
        if words and words[0].lower() == name:
            return _swe_agent(name, words[1:], open_file, command[1])
    if name in WRITE_TOOLS and path:
        return CallFacts("write", name, path, changed=(path,))
    if name in READ_TOOLS and path:
        return CallFacts("read", name, path, read=(path,))
    if command:
        key, text = command
        read, changed = shell_files(text) if key != "code" else ([], [])
        return CallFacts("command", name, path, tuple(read), tuple(changed), command=text, sub=key)
    return CallFacts("other", name, path, read=(path,) if path else ())


def _swe_agent(name: str, args: list[str], open_file: str | None, text: str) -> CallFacts:
    target = args[0] if args and looks_like_path(args[0]) else None
    facts = CallFacts("swe-agent", name, target, command=text, sub=name, args=tuple(args))
    if name in ("open", "view") and target:
        return replace(facts, read=(target,))
    if name == "create" and target:
        return replace(facts, changed=(target,))
    if name in ("edit", "insert", "append") and open_file:
        return replace(facts, changed=(open_file,))
    return facts
