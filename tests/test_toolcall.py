"""What a tool call did, read the same way for every agent's tool vocabulary (compactkit.toolcall)."""

from __future__ import annotations

import shlex
from typing import Any

import pytest

from compactkit import TextBlock, ToolCallBlock, ToolResultBlock
from compactkit.toolcall import (
    _SHELL_OPS,
    error_line,
    exit_code,
    failed,
    payload_path,
    read_call,
    shell_files,
    shell_words,
)

# agent, tool name, input, kind, files read, files changed, command
CALLS: list[tuple[str, str, Any, str, tuple[str, ...], tuple[str, ...], str | None]] = [
    (
        "claude-code",
        "Read",
        {"file_path": "/repo/src/app.py"},
        "read",
        ("/repo/src/app.py",),
        (),
        None,
    ),
    (
        "claude-code",
        "Edit",
        {"file_path": "/repo/a.py", "old_string": "x", "new_string": "y"},
        "write",
        (),
        ("/repo/a.py",),
        None,
    ),
    ("claude-code", "MultiEdit", {"file_path": "b.py", "edits": []}, "write", (), ("b.py",), None),
    ("claude-code", "Write", {"file_path": "c.md", "content": "#"}, "write", (), ("c.md",), None),
    ("claude-code", "NotebookEdit", {"notebook_path": "n.ipynb"}, "write", (), ("n.ipynb",), None),
    (
        "claude-code",
        "Bash",
        {"command": "pytest -q tests/test_a.py"},
        "command",
        (),
        (),
        "pytest -q tests/test_a.py",
    ),
    ("claude-code", "TodoWrite", {"todos": []}, "plan", (), (), None),
    ("claude-code", "Grep", {"pattern": "foo"}, "other", (), (), None),
    (
        "codex",
        "shell",
        {"command": ["bash", "-lc", "cat src/lib.rs"]},
        "command",
        ("src/lib.rs",),
        (),
        "cat src/lib.rs",
    ),
    (
        "codex",
        "apply_patch",
        "*** Begin Patch\n*** Update File: src/main.rs\n@@\n-a\n+b\n*** End Patch",
        "patch",
        (),
        ("src/main.rs",),
        None,
    ),
    (
        "codex",
        "exec_command",
        {"cmd": "sed -i 's/a/b/' Cargo.toml"},
        "command",
        (),
        ("Cargo.toml",),
        "sed -i 's/a/b/' Cargo.toml",
    ),
    ("codex", "update_plan", {"plan": []}, "plan", (), (), None),
    ("codex", "write_stdin", {"session_id": 3, "chars": ""}, "quiet", (), (), None),
    ("pi", "read", {"path": "README.md"}, "read", ("README.md",), (), None),
    (
        "pi",
        "edit",
        {"path": "src/x.ts", "oldText": "a", "newText": "b"},
        "write",
        (),
        ("src/x.ts",),
        None,
    ),
    ("pi", "write", {"path": "out.txt", "content": ""}, "write", (), ("out.txt",), None),
    (
        "pi",
        "bash",
        {"command": "echo hi > notes.txt"},
        "command",
        (),
        ("notes.txt",),
        "echo hi > notes.txt",
    ),
    (
        "openhands",
        "str_replace_editor",
        {"command": "view", "path": "/w/a.py"},
        "editor",
        ("/w/a.py",),
        (),
        None,
    ),
    (
        "openhands",
        "str_replace_editor",
        {"command": "str_replace", "path": "/w/a.py"},
        "editor",
        (),
        ("/w/a.py",),
        None,
    ),
    (
        "openhands",
        "execute_bash",
        {"command": "cd /w && cat setup.cfg"},
        "command",
        ("/w/setup.cfg",),
        (),
        "cd /w && cat setup.cfg",
    ),
    (
        "openhands",
        "execute_ipython_cell",
        {"code": "open('x.py').read()"},
        "command",
        (),
        (),
        "open('x.py').read()",
    ),
    ("openhands", "think", {"thought": "hmm"}, "quiet", (), (), None),
    (
        "swe-agent",
        "open",
        {"command": "open src/marshmallow/fields.py 120"},
        "swe-agent",
        ("src/marshmallow/fields.py",),
        (),
        "open src/marshmallow/fields.py 120",
    ),
    (
        "swe-agent",
        "create",
        {"command": "create reproduce.py"},
        "swe-agent",
        (),
        ("reproduce.py",),
        "create reproduce.py",
    ),
    (
        "gemini-cli",
        "read_file",
        {"absolute_path": "/p/index.ts"},
        "read",
        ("/p/index.ts",),
        (),
        None,
    ),
    (
        "gemini-cli",
        "replace",
        {"file_path": "/p/index.ts", "old_string": "a"},
        "write",
        (),
        ("/p/index.ts",),
        None,
    ),
    (
        "gemini-cli",
        "write_file",
        {"file_path": "/p/b.ts", "content": ""},
        "write",
        (),
        ("/p/b.ts",),
        None,
    ),
    ("gemini-cli", "run_shell_command", {"command": "npm test"}, "command", (), (), "npm test"),
    ("cline", "read_file", {"path": "src/app.ts"}, "read", ("src/app.ts",), (), None),
    (
        "cline",
        "write_to_file",
        {"path": "src/new.ts", "content": ""},
        "write",
        (),
        ("src/new.ts",),
        None,
    ),
    (
        "cline",
        "replace_in_file",
        {"path": "src/app.ts", "diff": "..."},
        "write",
        (),
        ("src/app.ts",),
        None,
    ),
    (
        "cline",
        "execute_command",
        {"command": "rm -f build/out.js", "requires_approval": "false"},
        "command",
        (),
        ("build/out.js",),
        "rm -f build/out.js",
    ),
]


@pytest.mark.parametrize(
    ("agent", "name", "given", "kind", "read", "changed", "command"),
    CALLS,
    ids=[f"{row[0]}-{row[1]}-{n}" for n, row in enumerate(CALLS)],
)
def test_each_agents_tools_are_read_the_same_way(
    agent: str,
    name: str,
    given: Any,
    kind: str,
    read: tuple[str, ...],
    changed: tuple[str, ...],
    command: str | None,
) -> None:
    did = read_call(ToolCallBlock(id="c1", name=name, input=given))
    assert (did.kind, did.read, did.changed, did.command) == (kind, read, changed, command)


def test_a_swe_agent_edit_changes_the_open_file() -> None:
    edit = ToolCallBlock(id="c2", name="edit", input={"command": "edit 3:4\nx = 1\nend_of_edit"})
    assert read_call(edit, open_file="src/a.py").changed == ("src/a.py",)
    assert read_call(edit).changed == ()  # nothing open: no file to name


def test_the_file_a_result_shows() -> None:
    def call(given: Any) -> ToolCallBlock:
        return ToolCallBlock(id="c", name="tool", input=given)

    assert payload_path(call({"file_path": "a.py"})) == "a.py"
    assert payload_path(call({"command": "sed -n 1,80p src/b.py"})) == "src/b.py"
    assert payload_path(call({"cmd": ["bash", "-lc", "cat c.txt"]})) == "c.txt"
    assert payload_path(call("nl -ba d.py")) == "d.py"
    assert payload_path(call({"command": "cat a.py | grep x"})) is None  # not the whole file
    assert payload_path(None) is None


def test_failure_is_an_error_flag_or_a_nonzero_exit_code() -> None:
    def result(text: str, is_error: bool = False) -> ToolResultBlock:
        return ToolResultBlock(tool_call_id="c", content=(TextBlock(text=text),), is_error=is_error)

    assert failed(result("<returncode>2</returncode>\nboom")) == (True, 2)
    assert failed(result("Process exited with code 0\nok")) == (False, 0)
    assert failed(result("denied", is_error=True)) == (True, None)
    assert failed(None) == (False, None)


def test_shell_commands_tell_which_files_they_change() -> None:
    read, changed = shell_files(
        "cd repo && sed -i 's/a > b/c/' src/x.py && cat <<'EOF' > notes/plan.md\n"
        "x > y.txt inside the heredoc\nEOF\n"
        'python -c "print(1 > 0)" 2>&1 | tee -a log/run.log; cat README.md'
    )
    assert changed == ["repo/src/x.py", "repo/notes/plan.md", "repo/log/run.log"]
    assert read == ["repo/README.md"]
    assert shell_files("echo hi > /dev/null; ls >& out.txt") == ([], [])


@pytest.mark.parametrize(
    "command",
    [
        "python -m pytest -q tests/test_x.py",
        "  ls\t-la   src/ \r",
        "grep -rn TODO src/ éàü ~/notes.md x=1 *.py",
        "",
        "git diff HEAD~1 -- 'src/a b.py' | head -5",  # quoted and piped: read by shlex
        "cat a.txt # a comment after",
        "echo \\$HOME > out.txt",
    ],
)
def test_command_words_are_what_a_posix_shell_lexer_gives(command: str) -> None:
    lexer = shlex.shlex(command, posix=True, punctuation_chars="();<>|&\n")
    lexer.whitespace = " \t\r"
    lexer.whitespace_split = True
    words = [w for w in lexer if w not in _SHELL_OPS]
    assert [w for c in shell_words(command) for w in c] == words


def test_error_lines_and_exit_codes_are_read_from_outputs() -> None:
    traceback = "Traceback (most recent call last):\n  File 'x.py', line 3\nValueError: bad value\n"
    assert error_line(traceback) == "ValueError: bad value"
    tsc = (
        "npm error code 2\nsrc/a.ts(16,58): error TS2305: no member 'X'.\nnpm error command failed"
    )
    assert error_line(tsc) == "src/a.ts(16,58): error TS2305: no member 'X'."
    assert exit_code("<returncode>1</returncode>\n<output>\n</output>") == 1
    assert exit_code("Chunk ID: 1\nProcess exited with code 2\nOutput:\n") == 2
    assert exit_code("ok\n[The command completed with exit code 0.]") == 0
    assert exit_code("text mentioning exited with code ${code}") is None
