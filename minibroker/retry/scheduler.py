"""The scheduler protocol (hold a record until its due time) and its embedded ``wheel`` backend."""

from __future__ import annotations

from typing import Any, Protocol

from minibroker.timer.system_timer import SystemTimer
from minibroker.timer.task import TimerTask


class RetryScheduler(Protocol):
    """Holds records until due. ``claim_due`` returns each scheduled record at most once, never before due;
    ``done`` is called once the claimed records were produced back (acknowledged)."""

    def schedule(self, record: Any, due_ms: int) -> None: ...

    def claim_due(self, now_ms: int) -> list[Any]: ...

    def done(self, records: list[Any]) -> None: ...

    def next_due(self) -> int | None: ...

    def pending(self) -> int: ...


class WheelScheduler:
    """The ``wheel`` backend: Kafka's SystemTimer (tick 1 ms), driven by ``claim_due``'s clock."""

    name = "wheel"

    def __init__(self, start_ms: int = 0) -> None:
        self._ready: list[Any] = []
        self.timer = SystemTimer(start_ms=start_ms, executor=lambda task: task.run())

    def schedule(self, record: Any, due_ms: int) -> None:
        delay = max(0, due_ms - self.timer.now())
        self.timer.add(TimerTask(delay, lambda: self._ready.append(record)))

    def claim_due(self, now_ms: int) -> list[Any]:
        self.timer.advance_clock(now_ms)
        ready, self._ready = self._ready, []
        return ready

    def done(self, records: list[Any]) -> None:
        """Nothing to forget: a claimed record left the wheel already."""

    def next_due(self) -> int | None:
        if self._ready:
            return self.timer.now()
        return self.timer.next_expiration()

    def pending(self) -> int:
        return self.timer.size + len(self._ready)
