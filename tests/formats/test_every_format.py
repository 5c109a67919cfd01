"""Every built-in format passes the conformance kit a third-party format author runs
(`compactkit.testing.check_format`), on its own real files, against every other format's files."""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path

import pytest

import compactkit
from compactkit import AgentContext, Document
from compactkit.formats.loading import read_session
from compactkit.registry import Registry, make_registry
from compactkit.testing import check_format

from ..conftest import corpus_files, every_conversation, sample_files
from . import (
    test_aider,
    test_claude_code_stream,
    test_claude_managed_agents,
    test_codex_exec,
    test_continue,
    test_copilot_cli,
    test_cursor,
    test_cursor_text,
    test_gemini_cli_stream,
    test_goose,
    test_kilo_code,
    test_opencode,
    test_qwen_code,
    test_vscode_chat,
)
from .test_cline import NATIVE_TASK, ROO_TASK, ROO_V2, XML_TASK
from .test_crush import go_samples as opencode_go_samples
from .test_crush import samples as crush_samples
from .test_cursor_agent import samples as cursor_agent_samples
from .test_roo_code import HISTORY as ROO_NATIVE

SESSION_FILES = {
    # format: (its corpus folder, the name prefixes of its bundled samples)
    "claude-code": ("claude_code_jsonl", ("claude-code-viewer",)),
    "codex-rollout": ("codex_rollout_jsonl", ("codemie_rollout",)),
    "gemini-cli": ("gemini_cli_session", ("codemie_gemini",)),
    "mini-swe-agent": ("mini_swe_agent_traj", ("gemini3pro",)),
    "openai-chat": ("openai_chat_tools", ("openhands-sdk", "tau_bench")),
    "openhands-events": ("openhands_events", ("resolver_mock", "runtime_trajs")),
    "pi-session": ("pi_session", ("pi-mono",)),
    "swe-agent": ("swe_agent_traj", ("testdata_gpt4",)),
}
"""The formats whose files the shared corpus (and the bundled samples) hold."""

WRITTEN = ("compactkit", "anthropic-messages", "cline", "compactkit-session")
"""Formats with no agent session in the corpus: their files are written here (the native and
Anthropic writers on corpus conversations; Cline and Roo Code task histories after their source,
from test_cline; session logs by a `Session` replaying corpus conversations as they grew)."""

SHAPED = {
    "aider": test_aider.samples,
    "copilot-cli": test_copilot_cli.samples,
    "opencode": test_opencode.samples,
    "goose": test_goose.samples,
    "cursor": test_cursor.samples,
    "crush": crush_samples,
    "opencode-go": opencode_go_samples,
    "cursor-agent": cursor_agent_samples,
    "claude-code-stream": test_claude_code_stream.samples,
    "codex-exec": test_codex_exec.samples,
    "gemini-cli-stream": test_gemini_cli_stream.samples,
    "claude-managed-agents": test_claude_managed_agents.samples,
    "qwen-code": test_qwen_code.samples,
    "cursor-text": test_cursor_text.samples,
    "kilo-code": test_kilo_code.samples,
    "continue": test_continue.samples,
    "vscode-chat": test_vscode_chat.samples,
}
"""Formats with no session in the corpus, whose files their tests write after the upstream schema
(each test module names the upstream source its records follow)."""

EXACT = {"compactkit", "compactkit-session"}
"""Writers whose files read back exactly (`load(dump(ctx)) == ctx`)."""


@pytest.fixture(scope="module")
def builtins() -> Registry:
    return make_registry(entry_points=False)


def _session_files(name: str) -> list[Path]:
    folder, prefixes = SESSION_FILES[name]
    files = [*sample_files(), *corpus_files()]
    mine = [p for p in files if p.parent.name == folder or p.name.startswith(prefixes)]
    return list(dict.fromkeys(mine))


def _first_of_each_format(with_calls: bool) -> list[AgentContext]:
    """The first conversation of each source format (the first with a tool call, if asked)."""
    chosen: dict[object, AgentContext] = {}
    for _, ctx in every_conversation():
        source = ctx.metadata["source_format"]
        if source not in chosen and (not with_calls or any(m.tool_calls for m in ctx.messages)):
            chosen[source] = ctx
    return list(chosen.values())


def _written(name: str, folder: Path) -> list[Path]:
    folder.mkdir(parents=True, exist_ok=True)
    out: list[Path] = []
    if name == "cline":
        for n, history in enumerate((XML_TASK, NATIVE_TASK, ROO_TASK, ROO_V2, ROO_NATIVE)):
            task = folder / f"17450000000{n:02d}"
            task.mkdir()
            out.append(task / "api_conversation_history.json")
            out[-1].write_text(json.dumps(history), encoding="utf-8")
        return out
    contexts = _first_of_each_format(with_calls=name == "anthropic-messages")
    if name == "compactkit-session":
        return [_session_log(ctx, folder) for ctx in contexts]
    for ctx in contexts:
        path = folder / f"{ctx.metadata['source_format']}.json"
        path.write_text(compactkit.export(ctx, name).text, encoding="utf-8")
        out.append(path)
    if name == "compactkit":  # several conversations: one per JSONL line
        path = folder / "several.jsonl"
        path.write_text(compactkit.render(contexts[:3], name), encoding="utf-8")
        out.append(path)
    return out


def _session_log(ctx: AgentContext, folder: Path) -> Path:
    """The log of a `Session` that grew `ctx` message by message, compacting past a small trigger."""
    path = folder / f"{ctx.metadata['source_format']}.jsonl"
    with compactkit.Session(ctx.replace(messages=()), trigger=4_000, target=2_000) as session:
        session.save(path)
        for message in ctx.messages:
            session.append(message)
            session.compact_if_needed()
    return path


@pytest.fixture(scope="module")
def documents(tmp_path_factory: pytest.TempPathFactory) -> dict[str, list[Document]]:
    """Every format's own files, read once."""
    root = tmp_path_factory.mktemp("written")
    paths = {name: _session_files(name) for name in SESSION_FILES}
    paths.update({name: _written(name, root / name) for name in WRITTEN})
    paths.update({name: write(root / name) for name, write in SHAPED.items()})
    return {name: [_read(p) for p in files] for name, files in paths.items()}


@cache
def _read(path: Path) -> Document:
    return read_session(path, make_registry(entry_points=False))


def test_every_built_in_format_is_checked(builtins: Registry) -> None:
    assert sorted(builtins.formats.names()) == sorted([*SESSION_FILES, *WRITTEN, *SHAPED])


@pytest.mark.parametrize("name", sorted([*SESSION_FILES, *WRITTEN, *SHAPED]))
def test_format_keeps_the_contract(
    name: str, builtins: Registry, documents: dict[str, list[Document]]
) -> None:
    fmt = builtins.formats.get(name)
    own = documents[name]
    others = [doc for other, docs in documents.items() if other != name for doc in docs]
    assert own and others
    writes = "exact" if name in EXACT else None
    assert check_format(fmt, own, others=others, writes=writes, registry=builtins) == []
