"""`compactkit check`: token-budget and regression gates for CI.

Checks are configured in `[[tool.compactkit.check]]` (pyproject.toml) or `[[check]]`
(compactkit.toml); `run_checks` measures them through the bench runner and judges each limit
and each regression against a committed baseline; `report` renders what it found.
"""

from __future__ import annotations

from .baseline import BASELINE_SCHEMA, Baseline, changes, read_baseline, write_baseline
from .config import DEFAULT_BASELINE, CheckConfig, CheckFile, find_config, load_config
from .gate import CHECK_SCHEMA, CheckResult, CheckRun, Row, run_checks

__all__ = [
    "BASELINE_SCHEMA",
    "CHECK_SCHEMA",
    "DEFAULT_BASELINE",
    "Baseline",
    "CheckConfig",
    "CheckFile",
    "CheckResult",
    "CheckRun",
    "Row",
    "changes",
    "find_config",
    "load_config",
    "read_baseline",
    "run_checks",
    "write_baseline",
]
