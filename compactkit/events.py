"""Typed compaction events and the small bus that delivers them to independent observers.

Observers subscribe and get an unsubscribe function back; no layer passes callbacks to another.
An observer that raises is reported on stderr once and never breaks the compaction.
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any, Literal


@dataclass(frozen=True)
class Change:
    """One message a strategy changed, added or removed, and why."""

    action: Literal["changed", "removed", "added"]
    message: int
    """Index in the strategy's output (changed, added) or input (removed)."""
    reason: str


@dataclass(frozen=True)
class CompactionStarted:
    pipeline: str
    strategies: tuple[str, ...]
    tokens: int
    messages: int
    kind: Literal["started"] = "started"


@dataclass(frozen=True)
class StrategyApplied:
    pipeline: str
    strategy: str
    index: int
    tokens_before: int
    tokens_after: int
    messages_before: int
    messages_after: int
    seconds: float
    changes: tuple[Change, ...] = ()
    elided: tuple[str, ...] = ()
    """Etags of the markers this strategy added."""
    note: str = ""
    kind: Literal["applied"] = "applied"

    @property
    def saved(self) -> int:
        return self.tokens_before - self.tokens_after


@dataclass(frozen=True)
class CompactionFinished:
    pipeline: str
    tokens_before: int
    tokens_after: int
    seconds: float
    kind: Literal["finished"] = "finished"


@dataclass(frozen=True)
class CompactionFailed:
    pipeline: str
    strategy: str | None
    error: str
    exit_code: int
    kind: Literal["failed"] = "failed"


@dataclass(frozen=True)
class MessagesAppended:
    """Messages a `Session` appended; `tokens` is the whole context after them."""

    messages: int
    tokens_added: int
    tokens: int
    total_messages: int
    kind: Literal["appended"] = "appended"


@dataclass(frozen=True)
class SessionCompacted:
    """A `Session` passed its trigger and ran its pipeline (whose own events came before)."""

    pipeline: str
    trigger: int
    target: int
    tokens_before: int
    tokens_after: int
    messages_before: int
    messages_after: int
    seconds: float
    kind: Literal["compacted"] = "compacted"


@dataclass(frozen=True)
class SessionRestored:
    """A `Session` went back to a snapshot."""

    tokens: int
    messages: int
    kind: Literal["restored"] = "restored"


Event = (
    CompactionStarted
    | StrategyApplied
    | CompactionFinished
    | CompactionFailed
    | MessagesAppended
    | SessionCompacted
    | SessionRestored
)
Observer = Callable[[Event], None]


def event_json(event: Event) -> dict[str, Any]:
    return asdict(event)


@dataclass
class EventBus:
    """Delivers events to subscribers in subscription order."""

    _observers: list[Observer] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def subscribe(self, observer: Observer) -> Callable[[], None]:
        """Add `observer`; call the returned function to remove it."""
        with self._lock:
            self._observers.append(observer)

        def unsubscribe() -> None:
            with self._lock:
                if observer in self._observers:
                    self._observers.remove(observer)

        return unsubscribe

    def emit(self, event: Event) -> None:
        with self._lock:
            observers = list(self._observers)
        for observer in observers:
            try:
                observer(event)
            except Exception as exc:  # an observer must never break a compaction
                print(f"compactkit: observer {observer!r} raised {exc!r}", file=sys.stderr)
