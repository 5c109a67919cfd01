"""aider `.aider.chat.history.md`, written as Aider-AI/aider `aider/io.py` writes it
(`user_input`: `"\\n#### "` + the input's lines joined by `"  \\n#### "`; `tool_output`: `"> "` +
text + `"  \\n"`; `ai_output`: the reply; a `# aider chat started at` line per run) and read as
`aider/utils.py` `split_chat_history_markdown` reads it."""

from __future__ import annotations

from pathlib import Path

from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import compactkit
from compactkit.cli import make_cli
from compactkit.errors import BadInputError
from compactkit.registry import make_registry

CLI = make_cli(lambda: make_registry(entry_points=False))

HISTORY = """
# aider chat started at 2024-05-01 10:00:00

> Aider v0.50.0{BR}
> Main model: gpt-4o with diff edit format{BR}
> Added cli.py to the chat.{BR}

#### add a --verbose flag to cli.py{BR}
#### and print each file processed{BR}

Here is the change:

cli.py
```python
<<<<<<< SEARCH
def main():
=======
def main(verbose=False):
>>>>>>> REPLACE
```

> Applied edit to cli.py{BR}
> Commit 1a2b3c4 feat: add --verbose flag{BR}

#### /run pytest -q{BR}

> Add the output to the chat? (Y)es/(n)o [Yes]: y{BR}

#### looks good, thanks{BR}

You're welcome!

# aider chat started at 2024-05-02 09:00:00

#### explain utils.py{BR}

It holds the path helpers.
""".replace("{BR}", "  ")  # aider ends each line it writes with a hard break


def samples(folder: Path) -> list[Path]:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / ".aider.chat.history.md"
    path.write_text(HISTORY.lstrip("\n"), encoding="utf-8")
    return [path]


def test_each_aider_run_is_a_conversation_with_the_users_words(tmp_path: Path) -> None:
    (path,) = samples(tmp_path)
    first, second = compactkit.load(path)
    assert first.metadata["source_format"] == "aider"
    assert first.metadata["started"] == "2024-05-01 10:00:00"
    assert [m.text for m in first.messages if m.role == "user"] == [
        "add a --verbose flag to cli.py\nand print each file processed",
        "/run pytest -q",
        "looks good, thanks",
    ]
    assert first.messages[2].metadata.get("command") is True
    assert first.task.startswith("add a --verbose flag")
    assert first.messages[1].role == "assistant" and "<<<<<<< SEARCH" in first.messages[1].text
    assert all("Applied edit" not in m.text for m in first.messages)  # aider's own output
    assert first.metadata["skipped_records"] == {"tool output": 6}
    assert [m.text for m in second.messages] == ["explain utils.py", "It holds the path helpers."]


def test_the_cli_reads_the_markdown_history(tmp_path: Path) -> None:
    (path,) = samples(tmp_path)
    result = CliRunner().invoke(CLI, ["inspect", f"{path}#1"])
    assert result.exit_code == 0, result.stderr
    assert (
        "format=aider" in result.stdout.replace(" ", "").replace("\n", "")
        or "aider" in result.stdout
    )
    other = tmp_path / "notes.md"
    other.write_text("# Notes\n\nnothing here\n", encoding="utf-8")
    refused = CliRunner().invoke(CLI, ["inspect", str(other)])
    assert refused.exit_code == 2  # a Markdown file that is no aider history is not claimed


PREFIXES = ["#### ", "> ", "# ", "# aider chat started at ", "", "####", ">", "\ufeff"]


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    lines=st.lists(
        st.tuples(
            st.sampled_from(PREFIXES),
            st.text(max_size=30).filter(lambda t: "\n" not in t and "\r" not in t),
        ),
        max_size=25,
    )
)
def test_any_history_text_is_read_or_refused_in_one_line(
    tmp_path: Path, lines: list[tuple[str, str]]
) -> None:
    """aider's history is Markdown, not JSON, so the JSON fuzz targets skip it: random lines of
    each kind aider writes are read (every typed line kept in a user message) or refused."""
    path = tmp_path / ".aider.chat.history.md"
    path.write_text("".join(p + t + "\n" for p, t in lines), encoding="utf-8")
    try:
        contexts = compactkit.load(path)
    except BadInputError as exc:
        assert "\n" not in str(exc)
        return
    users = "\n".join(m.text for c in contexts for m in c.messages if m.role == "user")
    for prefix, text in lines:
        if prefix == "#### " and text.strip():
            assert text.rstrip().removesuffix("  ").strip() in users or text.strip() in users
    for ctx in contexts:
        assert compactkit.validate(ctx) == []
