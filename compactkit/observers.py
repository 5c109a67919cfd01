"""Two independent observers of compaction events: statistics and a progress display."""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from typing import IO, Any

from .events import (
    CompactionFailed,
    CompactionFinished,
    CompactionStarted,
    Event,
    StrategyApplied,
    event_json,
)


@dataclass
class StatsRecorder:
    """Collects what each strategy did; `report()` is the versioned JSON `run --report-json` writes."""

    started: CompactionStarted | None = None
    applied: list[StrategyApplied] = field(default_factory=list)
    finished: CompactionFinished | None = None
    failed: CompactionFailed | None = None

    def __call__(self, event: Event) -> None:
        if isinstance(event, CompactionStarted):
            self.started, self.applied, self.finished, self.failed = event, [], None, None
        elif isinstance(event, StrategyApplied):
            self.applied.append(event)
        elif isinstance(event, CompactionFinished):
            self.finished = event
        elif isinstance(event, CompactionFailed):
            self.failed = event

    def report(self) -> dict[str, Any]:
        steps = []
        for step in self.applied:
            data = event_json(step)
            data.pop("kind", None)
            data.pop("pipeline", None)
            data["saved"] = step.saved
            steps.append(data)
        return {
            "schema": "compactkit.run/1",
            "pipeline": self.started.pipeline if self.started else None,
            "tokens_before": self.started.tokens if self.started else None,
            "tokens_after": self.finished.tokens_after if self.finished else None,
            "seconds": self.finished.seconds if self.finished else None,
            "steps": steps,
            "failed": event_json(self.failed) if self.failed else None,
        }


class ProgressDisplay:
    """A progress bar on stderr while strategies run; shows nothing when stderr is not a terminal."""

    def __init__(self, stream: IO[str] | None = None) -> None:
        self.stream = stream or sys.stderr
        self.enabled = self.stream.isatty()
        self._progress: Any = None
        self._task: Any = None

    def __call__(self, event: Event) -> None:
        if not self.enabled:
            return
        from rich.console import Console
        from rich.progress import Progress

        if isinstance(event, CompactionStarted):
            self._progress = Progress(console=Console(file=self.stream), transient=True)
            self._progress.start()
            self._task = self._progress.add_task("compacting", total=len(event.strategies))
        elif isinstance(event, StrategyApplied) and self._progress is not None:
            self._progress.update(
                self._task, advance=1, description=f"{event.strategy}: {event.tokens_after:,} tok"
            )
        elif isinstance(event, (CompactionFinished, CompactionFailed)) and self._progress:
            self._progress.stop()
            self._progress = None
