"""HeapTimer: a priority queue of tasks with lazy deletion (baseline ``heap``).

This is the design Kafka used before KAFKA-1989 (a ``DelayQueue`` of requests)
and the one asyncio and trio use for their own timers: every task is a heap
node ordered by ``(expiration, arrival)``. ``cancel`` only marks the node; the
node leaves the heap when it reaches the head, or when the heap is rebuilt.
The rebuild follows asyncio's rule: when more than 100 nodes are queued and
more than half of them are cancelled, keep only the live ones and heapify.

Invariants: ``size`` = queued nodes − cancelled nodes; ``_cancelled`` counts the
cancelled nodes still in the heap; a node's ``owner`` is the timer while it is
queued and live, else None.
"""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Callable

from minibroker.timer.base import Clock, Executor, TimerBase
from minibroker.timer.snapshot import TimerView
from minibroker.timer.task import TimerTask

#: asyncio's _MIN_SCHEDULED_TIMER_HANDLES and _MIN_CANCELLED_TIMER_HANDLES_FRACTION
MIN_SCHEDULED = 100
MIN_CANCELLED_FRACTION = 0.5


class HeapEntry:
    """A heap node's handle: cancelling it marks the node and counts it as dead."""

    __slots__ = ("task", "expiration_ms", "owner")

    def __init__(self, task: TimerTask, expiration_ms: int, owner: HeapTimer) -> None:
        self.task = task
        self.expiration_ms = expiration_ms
        self.owner: HeapTimer | None = owner
        task._bind(self)

    def remove(self) -> None:
        owner = self.owner
        if owner is not None:
            self.owner = None
            owner._cancelled += 1


class HeapTimer(TimerBase):
    """One binary heap of tasks; O(log n) add and pop, O(1) lazy cancel."""

    name = "heap"

    def __init__(
        self,
        tick_ms: int = 1,
        wheel_size: int = 0,
        start_ms: int = 0,
        *,
        clock: Clock | None = None,
        executor: Executor | None = None,
        on_earlier_expiration: Callable[[int], object] | None = None,
    ) -> None:
        super().__init__(start_ms, clock, executor, on_earlier_expiration)
        self._heap: list[tuple[int, int, HeapEntry]] = []
        self._seq = itertools.count()
        self._cancelled = 0

    def add(self, task: TimerTask) -> None:
        """Arm ``task`` at now + delay_ms; a task already due runs at once."""
        clock = self.clock
        expiration = task.delay_ms + (self._now if clock is None else clock())
        entry = HeapEntry(task, expiration, self)
        if expiration <= self._now:
            entry.owner = None
            task._entry = None
            self.executor(task)
            return
        heap = self._heap
        heapq.heappush(heap, (expiration, next(self._seq), entry))
        if heap[0][2] is entry and self.on_earlier_expiration is not None:
            self.on_earlier_expiration(expiration)

    def _drop_cancelled_head(self) -> None:
        heap = self._heap
        while heap and heap[0][2].owner is None:
            heapq.heappop(heap)
            self._cancelled -= 1

    def advance_clock(self, now_ms: int) -> bool:
        """Run every live task with expiration <= ``now_ms``; True if one ran."""
        self._observe(now_ms)
        heap = self._heap
        if len(heap) > MIN_SCHEDULED and self._cancelled > MIN_CANCELLED_FRACTION * len(heap):
            live = [node for node in heap if node[2].owner is not None]
            heapq.heapify(live)
            self._heap = heap = live
            self._cancelled = 0
        pop = heapq.heappop
        due = []
        while heap and heap[0][0] <= now_ms:
            entry = pop(heap)[2]
            if entry.owner is None:
                self._cancelled -= 1
            else:
                entry.owner = None
                entry.task._entry = None
                due.append(entry.task)
        executor = self.executor
        for task in due:
            executor(task)
        return bool(due)

    def next_expiration(self) -> int | None:
        """Expiration of the earliest live task, or None."""
        self._drop_cancelled_head()
        return self._heap[0][0] if self._heap else None

    @property
    def size(self) -> int:
        return len(self._heap) - self._cancelled

    def snapshot(self, queue_head: int = 8) -> TimerView:
        head = tuple(
            (expiration, 1)
            for expiration, _, entry in heapq.nsmallest(
                queue_head, (node for node in self._heap if node[2].owner is not None)
            )
        )
        return TimerView(self.name, self._now, self.size, (), head)
