"""The small protocol every timer implements, and the registry of timers by name.

``kafka`` is Kafka's SystemTimer (hierarchical wheel over a delay queue of
buckets); ``heap`` and ``hashed`` are the baselines it is measured against.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

from minibroker.timer.hashed_wheel import HashedWheelTimer
from minibroker.timer.heap_timer import HeapTimer
from minibroker.timer.snapshot import TimerView
from minibroker.timer.system_timer import SystemTimer
from minibroker.timer.task import TimerTask


class Timer(Protocol):
    """Arms tasks in integer ms; ``advance_clock(now)`` hands every due task to the executor."""

    name: str
    clock: Callable[[], int] | None
    executor: Callable[[TimerTask], object]
    on_earlier_expiration: Callable[[int], object] | None

    def add(self, task: TimerTask) -> None: ...

    def advance_clock(self, now_ms: int) -> bool: ...

    def next_expiration(self) -> int | None: ...

    @property
    def size(self) -> int: ...

    def now(self) -> int: ...

    def snapshot(self, queue_head: int = 8) -> TimerView: ...

    def close(self) -> None: ...


TIMERS: dict[str, Callable[..., Timer]] = {
    "kafka": SystemTimer,
    "heap": HeapTimer,
    "hashed": HashedWheelTimer,
}


def make_timer(kind: str, **kwargs: Any) -> Timer:
    """Build the timer registered as ``kind`` (``kafka``, ``heap`` or ``hashed``)."""
    try:
        factory = TIMERS[kind]
    except KeyError:
        raise ValueError(f"unknown timer {kind!r}: expected one of {', '.join(TIMERS)}") from None
    return factory(**kwargs)
