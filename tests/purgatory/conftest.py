"""A delayed operation for tests: completable by an external flag, recording its callbacks."""

from __future__ import annotations

import pytest

from minibroker.purgatory import DelayedOperation, DelayedOperationPurgatory
from minibroker.timer import SystemTimer


class MockOperation(DelayedOperation):
    """Completes once ``completable`` is set; logs ("complete"|"expire", clock time)."""

    __slots__ = ("completable", "log", "clock", "try_calls", "lock_seen")

    def __init__(self, delay_ms: int, clock=None) -> None:
        super().__init__(delay_ms)
        self.completable = False
        self.log: list[tuple[str, int | None]] = []
        self.clock = clock
        self.try_calls = 0
        self.lock_seen: list[bool] = []

    def _now(self):
        return None if self.clock is None else self.clock()

    def try_complete(self) -> bool:
        self.try_calls += 1
        self.lock_seen.append(self.lock_held)
        return self.force_complete() if self.completable else False

    def on_complete(self) -> None:
        self.log.append(("complete", self._now()))

    def on_expiration(self) -> None:
        self.log.append(("expire", self._now()))


@pytest.fixture
def timer():
    return SystemTimer()


@pytest.fixture
def purgatory(timer):
    return DelayedOperationPurgatory("mock", timer, purge_interval=1000)
