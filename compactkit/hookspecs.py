"""The hooks a compactkit plugin may implement.

A plugin is any module or object with functions decorated by `compactkit.hookimpl`, registered through
the `compactkit` entry-point group::

    [project.entry-points.compactkit]
    my_plugin = "my_package.plugin"

Every `register_*` hook receives a `register` callable; call it once per thing you provide.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import pluggy

if TYPE_CHECKING:
    from .events import Event

hookspec = pluggy.HookspecMarker("compactkit")
hookimpl = pluggy.HookimplMarker("compactkit")


@hookspec
def register_formats(register: Callable[[Any], None]) -> None:
    """Register session formats (subclasses of `compactkit.Format`).

    :param register: call with a `Format` instance, e.g. ``register(MyFormat())``.
    """


@hookspec
def register_tokenizers(register: Callable[[Any], None]) -> None:
    """Register tokenizers (objects implementing `compactkit.Tokenizer`).

    :param register: call with a tokenizer instance, e.g. ``register(WordTokenizer())``.
    """


@hookspec
def register_strategies(register: Callable[[Any], None]) -> None:
    """Register compaction strategies (a `compactkit.Strategy` subclass, or a function decorated
    with `compactkit.strategy`).

    :param register: call with the strategy class or decorated function.
    """


@hookspec
def register_summarizers(register: Callable[[Any], None]) -> None:
    """Register llm-summary backends (subclasses of `compactkit.Summarizer`).

    :param register: call with the backend class.
    """


@hookspec
def register_scorers(register: Callable[[Any], None]) -> None:
    """Register retention scorers used by `compactkit bench`.

    :param register: call with a scorer instance.
    """


@hookspec
def compaction_event(event: Event) -> None:
    """Observe every compaction event (a `compactkit.Event`: started, strategy applied, finished,
    failed).

    :param event: the event; read-only. Exceptions raised here are reported, never propagated.
    """
