"""Chaos: random fault schedules, Kafka's guarantees checked after each, failures shrunk to scenarios.

A front end: schedules are scenario models, played by the scenario
runner; see docs/chaos.md.
"""

from minibroker.chaos.generate import generate
from minibroker.chaos.profiles import PROFILES, Profile
from minibroker.chaos.run import RunOutcome, run_index, run_schedule
from minibroker.chaos.schedule import Schedule, compile_schedule
from minibroker.chaos.violations import INVARIANTS, Violation

__all__ = [
    "INVARIANTS",
    "PROFILES",
    "Profile",
    "RunOutcome",
    "Schedule",
    "Violation",
    "compile_schedule",
    "generate",
    "run_index",
    "run_schedule",
]
