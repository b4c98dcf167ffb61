"""Keyed timer tasks on the broker's one SystemTimer (Kafka's ``CoordinatorTimer``).

``schedule(key, delay_ms, operation)`` arms ``operation`` to run at ``now + delay_ms``;
scheduling a key that is armed cancels the earlier task first, so at most one task
per key is ever on the wheel. ``cancel(key)`` disarms it. When a task fires it is
forgotten before its operation runs, so the operation may re-arm its own key.

Kafka 4.x gives the group coordinator its own SystemTimer and reaper
(``group-coordinator-reaper``) and a fired task schedules a write on the
coordinator's event loop; here the tasks sit on the broker's one timer beside the
purgatories (a deliberate deviation, docs/deviations.md) and the operation runs on the reaper's executor.

Every arm, cancel and expiry is traced as ``timer.schedule`` / ``timer.cancel`` /
``timer.expire`` with the key and the deadline.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from minibroker.timer import TimerTask
from minibroker.trace import NULL_TRACER, Tracer


class _CoordinatorTimerTask(TimerTask):
    """A keyed task; the wheel's trace events name it by its key (``op_id``)."""

    __slots__ = ("key", "deadline_ms", "owner", "operation")

    def __init__(
        self, owner: CoordinatorTimer, key: str, delay_ms: int, deadline_ms: int, operation: Callable[[], Any]
    ):
        super().__init__(delay_ms)
        self.owner = owner
        self.key = key
        self.deadline_ms = deadline_ms
        self.operation = operation

    @property
    def op_id(self) -> str:
        return self.key

    def run(self) -> None:
        self.owner._fire(self)


class CoordinatorTimer:
    """At most one armed task per key, on ``timer``."""

    def __init__(
        self, timer: Any, now: Callable[[], int], tracer: Tracer = NULL_TRACER, broker: int = -1
    ) -> None:
        self.timer = timer
        self.now = now
        self.tracer = tracer
        self.broker = broker
        self.tasks: dict[str, _CoordinatorTimerTask] = {}

    def schedule(self, key: str, delay_ms: int, operation: Callable[[], Any]) -> int:
        """Arm ``key`` to run ``operation`` in ``delay_ms``; return its deadline."""
        old = self.tasks.pop(key, None)
        if old is not None:
            old.cancel()
        deadline = self.now() + delay_ms
        task = _CoordinatorTimerTask(self, key, delay_ms, deadline, operation)
        self.tasks[key] = task
        if self.tracer.enabled:
            self.tracer.emit(
                "timer.schedule",
                broker=self.broker,
                key=key,
                delay_ms=delay_ms,
                deadline_ms=deadline,
                replaced=old is not None,
            )
        self.timer.add(task)
        return deadline

    def cancel(self, key: str) -> bool:
        task = self.tasks.pop(key, None)
        if task is None:
            return False
        task.cancel()
        if self.tracer.enabled:
            self.tracer.emit("timer.cancel", broker=self.broker, key=key, deadline_ms=task.deadline_ms)
        return True

    def deadline(self, key: str) -> int | None:
        task = self.tasks.get(key)
        return None if task is None else task.deadline_ms

    def armed(self) -> list[tuple[str, int]]:
        """(key, deadline) of every armed task, soonest first."""
        return sorted(((k, t.deadline_ms) for k, t in self.tasks.items()), key=lambda kv: (kv[1], kv[0]))

    def _fire(self, task: _CoordinatorTimerTask) -> None:
        if self.tasks.get(task.key) is not task:
            return  # replaced or cancelled after it was handed to the executor
        del self.tasks[task.key]
        if self.tracer.enabled:
            self.tracer.emit("timer.expire", broker=self.broker, key=task.key, deadline_ms=task.deadline_ms)
        task.operation()
