"""What the live checks share: the running cluster, what it appended and which broker lives ended, and the
violations found so far (the first of each key only).

``Observer`` (``observe``) is a ``LiveRun`` fed by the trace; each live check (``operations``,
``replication``, ``groups``) holds the ``LiveRun`` it reads and reports to, and never the observer that
dispatches events to it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from minibroker.chaos.records import Append
from minibroker.chaos.violations import Violation

if TYPE_CHECKING:
    from minibroker.scenario.run import ScenarioRunner
    from minibroker.sim.cluster import Cluster


class LiveRun:
    """The run as the live checks see it; ``runner`` is set before the run starts."""

    def __init__(self) -> None:
        self.runner: ScenarioRunner | None = None
        self.violations: list[Violation] = []
        self._seen: set[tuple[Any, ...]] = set()
        self.appends: dict[tuple[str, str], list[Append]] = {}  # (op, partition) -> appends
        self.lives: dict[int, int] = {}  # broker -> lives ended (crash, shutdown, restart)

    @property
    def cluster(self) -> Cluster | None:
        return None if self.runner is None else self.runner.cluster

    def violate(self, key: tuple[Any, ...], violation: Violation) -> None:
        """Keep the first violation of each ``key`` (one broken rule is reported once)."""
        if key not in self._seen:
            self._seen.add(key)
            self.violations.append(violation)
