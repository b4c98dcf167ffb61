"""HashedWheelTimer: Netty's single wheel with rounds (baseline ``hashed``).

One wheel of ``wheel_size`` buckets (rounded up to a power of two; Netty's
default is 512) of ``tick_ms`` each. A task due at ``e`` belongs to tick
``ceil(e / tick_ms)``; it goes into bucket ``tick % wheel_size`` with
``remaining_rounds = (tick − current_tick) // wheel_size``. The pointer visits
every tick in turn, empty or not: visiting a bucket fires its entries whose
rounds reached zero and decrements the rounds of the others. Cost therefore
grows with elapsed time and with ``delay / (tick_ms · wheel_size)``.

Deviations from Netty, both for a single-threaded, integer-ms timer: new tasks go
straight into their bucket (no MPSC hand-off queue) and a tick is processed at
its own start time ``tick · tick_ms`` rather than one tick later, so a task fires
at exactly its expiration when tick_ms is 1. A task already due when added runs
at once, like SystemTimer.

Invariant: ``size`` is the number of entries in buckets; ``_tick`` is the next
tick to visit, and every tick before it has been visited.
"""

from __future__ import annotations

from collections.abc import Callable

from minibroker.timer.base import Clock, Executor, TimerBase
from minibroker.timer.snapshot import BucketView, LevelView, TimerView
from minibroker.timer.task import TimerTask


class HashedEntry:
    """A task's place in one bucket, with its remaining rounds."""

    __slots__ = ("task", "expiration_ms", "rounds", "bucket", "owner")

    def __init__(self, task: TimerTask, expiration_ms: int, rounds: int, owner: HashedWheelTimer) -> None:
        self.task = task
        self.expiration_ms = expiration_ms
        self.rounds = rounds
        self.bucket: dict[HashedEntry, None] | None = None
        self.owner = owner
        task._bind(self)

    def remove(self) -> None:
        bucket = self.bucket
        if bucket is not None:
            del bucket[self]
            self.bucket = None
            self.owner._size -= 1


class HashedWheelTimer(TimerBase):
    """Netty-style hashed wheel: O(1) add and cancel, one visit per tick."""

    name = "hashed"

    def __init__(
        self,
        tick_ms: int = 1,
        wheel_size: int = 512,
        start_ms: int = 0,
        *,
        clock: Clock | None = None,
        executor: Executor | None = None,
        on_earlier_expiration: Callable[[int], object] | None = None,
    ) -> None:
        if tick_ms < 1 or wheel_size < 1:
            raise ValueError("tick_ms and wheel_size must be >= 1")
        super().__init__(start_ms, clock, executor, on_earlier_expiration)
        size = 1
        while size < wheel_size:
            size <<= 1
        self.tick_ms = tick_ms
        self.wheel_size = size
        self._mask = size - 1
        self._buckets: list[dict[HashedEntry, None]] = [{} for _ in range(size)]
        self._tick = start_ms // tick_ms + 1
        self._size = 0

    def add(self, task: TimerTask) -> None:
        """Arm ``task`` at now + delay_ms; a task already due runs at once."""
        clock = self.clock
        expiration = task.delay_ms + (self._now if clock is None else clock())
        tick = -(-expiration // self.tick_ms)
        current = self._tick
        if tick < current:
            HashedEntry(task, expiration, 0, self)
            task._entry = None
            self.executor(task)
            return
        was_idle = self._size == 0
        entry = HashedEntry(task, expiration, (tick - current) // self.wheel_size, self)
        bucket = self._buckets[tick & self._mask]
        bucket[entry] = None
        entry.bucket = bucket
        self._size += 1
        if was_idle and self.on_earlier_expiration is not None:
            self.on_earlier_expiration(current * self.tick_ms)

    def advance_clock(self, now_ms: int) -> bool:
        """Visit every tick up to ``now_ms``, one by one; True if a task fired."""
        self._observe(now_ms)
        last = now_ms // self.tick_ms
        tick = self._tick
        if tick > last:
            return False
        buckets, mask = self._buckets, self._mask
        due = []
        while tick <= last:
            bucket = buckets[tick & mask]
            if bucket:
                for entry in list(bucket):
                    if entry.rounds <= 0:
                        del bucket[entry]
                        entry.bucket = None
                        self._size -= 1
                        entry.task._entry = None
                        due.append(entry.task)
                    else:
                        entry.rounds -= 1
            tick += 1
        self._tick = tick
        executor = self.executor
        for task in due:
            executor(task)
        return bool(due)

    def next_expiration(self) -> int | None:
        """The next tick's time while anything is armed: the pointer never skips a tick."""
        return self._tick * self.tick_ms if self._size else None

    @property
    def size(self) -> int:
        return self._size

    def snapshot(self, queue_head: int = 8) -> TimerView:
        buckets = tuple(
            BucketView(index, -1, len(bucket)) for index, bucket in enumerate(self._buckets) if bucket
        )
        level = LevelView(
            1,
            self.tick_ms,
            self.wheel_size,
            self.tick_ms * self.wheel_size,
            (self._tick - 1) * self.tick_ms,
            buckets,
        )
        nxt = self.next_expiration()
        return TimerView(self.name, self._now, self._size, (level,), () if nxt is None else ((nxt, 0),))
