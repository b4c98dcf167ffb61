"""The trio side: integer-ms clock, the paced clock, the reaper task and its FIFO executor task."""

from minibroker.runtime.clock import MsClock
from minibroker.runtime.determinism import deterministic_scheduling
from minibroker.runtime.executor import TaskExecutor
from minibroker.runtime.memory import quiet_gc
from minibroker.runtime.paced import PacedClock, PaceMeter
from minibroker.runtime.reaper import DEFAULT_POLL_INTERVAL_MS, Reaper
from minibroker.runtime.scheduler import Scheduler

__all__ = [
    "DEFAULT_POLL_INTERVAL_MS",
    "MsClock",
    "PaceMeter",
    "PacedClock",
    "Reaper",
    "Scheduler",
    "TaskExecutor",
    "deterministic_scheduling",
    "quiet_gc",
]
