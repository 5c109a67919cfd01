"""Cursor agent transcripts in plain text (`agent-transcripts/<id>.txt`), written after the form
the public readers of it parse and published transcripts show (found in the code corpus by their
`[Tool call]` / `[Tool result]` markers): `user:` / `assistant:` turns, `<user_query>` tags,
`[Thinking]` lines, `[Tool call] NAME` with indented `name: value` arguments, `[Tool result]
NAME` lines."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import compactkit
from compactkit.errors import BadInputError
from tests.formats._checks import pairing_problems
from tests.formats._inspect import inspect_output

FIRST = "install telegram on this linux computer\n\nflatpak install flathub org.telegram.desktop"
SECOND = "it's showing a 404 error"

TRANSCRIPT = f"""user:
<user_query>
{FIRST}
</user_query>

assistant:
[Thinking] The user wants Telegram installed with Flatpak.
I'll install Telegram using Flatpak for you.
[Tool call] Shell
  command: flatpak install flathub org.telegram.desktop -y
  description: Install Telegram via Flatpak
  timeout: 300000
[Tool call] Shell
  command: flatpak list | grep -i telegram
  description: Check the install

[Tool result] Shell

[Tool result] Shell
org.telegram.desktop  stable

assistant:
Telegram is installed. Launch it with `flatpak run org.telegram.desktop`.

user:
<attached_files>
src/app/page.tsx
</attached_files>
<user_query>
{SECOND}
</user_query>

user:
<system_reminder>Keep answers short.</system_reminder>

assistant:
[Thinking] **Checking the route**
[Tool call] ReadFile
  path: src/app/page.tsx

[Tool result] ReadFile

assistant:
The page is missing its default export; I added it.
"""


def samples(folder: Path) -> list[Path]:
    path = folder / "agent-transcripts" / "5b1e9c2a-0d4f-4e8b-a7c3-1f2e3d4c5b6a.txt"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(TRANSCRIPT, encoding="utf-8")
    return [path]


def test_a_text_transcript_loads_with_the_users_words_and_paired_calls(tmp_path: Path) -> None:
    (path,) = samples(tmp_path)
    ctx = compactkit.load_one(path)
    assert ctx.metadata["source_format"] == "cursor-text"
    human = [m.text for m in ctx.messages if m.is_human]
    assert len(human) == 2 and FIRST in human[0] and SECOND in human[1]
    assert [m.origin for m in ctx.messages if m.role == "user" and not m.is_human] == ["harness"]
    calls = [c for m in ctx.messages for c in m.tool_calls]
    assert [c.name for c in calls] == ["Shell", "Shell", "ReadFile"]
    assert calls[0].input == {
        "command": "flatpak install flathub org.telegram.desktop -y",
        "description": "Install Telegram via Flatpak",
        "timeout": "300000",
    }
    results = {r.tool_call_id: r.text for m in ctx.messages for r in m.tool_results}
    assert results[calls[1].id] == "org.telegram.desktop  stable" and results[calls[0].id] == ""
    first = next(m for m in ctx.messages if m.role == "assistant")
    assert [b.type for b in first.content] == ["thinking", "text", "tool_call", "tool_call"]
    assert pairing_problems(ctx) == [] and compactkit.validate(ctx) == []
    assert "format=cursor-text" in inspect_output(path)


def test_a_txt_file_that_is_no_transcript_is_not_taken(tmp_path: Path) -> None:
    path = tmp_path / "notes.txt"
    path.write_text("shopping list:\nmilk\n", encoding="utf-8")
    with pytest.raises(BadInputError):
        compactkit.load(path)


MARKERS = [
    "user:",
    "assistant:",
    "[Thinking] ",
    "[Tool call] Shell",
    "  command: ",
    "[Tool result] Shell",
    "<user_query>",
    "",
]


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    lines=st.lists(
        st.tuples(
            st.sampled_from(MARKERS),
            st.text(max_size=20).filter(lambda t: "\n" not in t and "\r" not in t),
        ),
        max_size=25,
    )
)
def test_any_transcript_text_is_read_or_refused_in_one_line(
    tmp_path: Path, lines: list[tuple[str, str]]
) -> None:
    """The text form is not JSON, so the JSON fuzz targets skip it: random lines of each kind the
    transcript holds are read (valid and paired) or refused in one line."""
    path = tmp_path / "t.txt"
    path.write_text("user:\n" + "".join(p + t + "\n" for p, t in lines), encoding="utf-8")
    try:
        contexts = compactkit.load(path)
    except BadInputError as exc:
        assert "\n" not in str(exc)
        return
    for ctx in contexts:
        assert pairing_problems(ctx) == [] and compactkit.validate(ctx) == []
