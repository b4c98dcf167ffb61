"""TimingWheel: one level of Kafka's hierarchical timing wheel.

A level has ``wheel_size`` buckets, each covering ``tick_ms``; the level spans
``interval = tick_ms * wheel_size``. Its clock ``current_time`` is always a
multiple of ``tick_ms`` and only moves forward, in ``advance_clock``, when the
timer polls a due bucket. An entry with expiration ``e`` goes, on the first
level where it fits:

- nowhere, when ``e < current_time + tick_ms`` (already expired: the caller runs it);
- into bucket ``(e // tick_ms) % wheel_size`` when ``e < current_time + interval``;
  the bucket's expiration becomes ``(e // tick_ms) * tick_ms``, the start of
  its tick, and the bucket is offered to the delay queue only if that changed;
- otherwise into the overflow level, created on demand with
  ``tick_ms = interval`` and started at this level's ``current_time``.

With tick 1 ms and 20 buckets the levels span 20 ms, 400 ms, 8 s, 160 s, ...
All levels share the task counter and the one delay queue of their timer.
Entries of a higher level are never run from there: when their bucket is due
the timer reinserts them from the bottom level, where they fall into a finer
bucket or run.
"""

from __future__ import annotations

from collections.abc import Callable

from minibroker.timer.bucket import TaskCounter, TimerTaskList
from minibroker.timer.task import TimerTaskEntry

#: matches no real expiration (expirations may be negative: a task added with a negative delay)
_NO_EXPIRATION = -(2**63)


class TimingWheel:
    """One level of the wheel; ``overflow_wheel`` is the next, coarser level."""

    __slots__ = (
        "tick_ms",
        "wheel_size",
        "interval",
        "current_time",
        "buckets",
        "overflow_wheel",
        "_counter",
        "_offer",
        "level",
        "_last_expiration",
        "_last_bucket",
        "_due_before",
        "_limit",
    )

    def __init__(
        self,
        tick_ms: int,
        wheel_size: int,
        start_ms: int,
        counter: TaskCounter,
        offer: Callable[[TimerTaskList], None],
        level: int = 1,
    ) -> None:
        if tick_ms < 1 or wheel_size < 2:  # one bucket: every overflow level as fine as the last, endlessly
            raise ValueError(f"tick_ms must be >= 1 and wheel_size >= 2, got {tick_ms} and {wheel_size}")
        self.tick_ms = tick_ms
        self.wheel_size = wheel_size
        self.interval = tick_ms * wheel_size
        self.current_time = start_ms - start_ms % tick_ms
        # kept equal to current_time + tick_ms and current_time + interval (the two bounds of add)
        self._due_before = self.current_time + tick_ms
        self._limit = self.current_time + self.interval
        self.level = level
        self.buckets = [TimerTaskList(counter, level, index) for index in range(wheel_size)]
        self.overflow_wheel: TimingWheel | None = None
        self._counter = counter
        self._offer = offer
        # the last placement, valid until the clock next moves (placement is a pure function of the
        # expiration and the levels' clocks): a burst of equal expirations skips the level walk
        self._last_expiration = _NO_EXPIRATION
        self._last_bucket: TimerTaskList | None = None

    def _add_overflow_wheel(self) -> TimingWheel:
        if self.overflow_wheel is None:
            self.overflow_wheel = TimingWheel(
                self.interval, self.wheel_size, self.current_time, self._counter, self._offer, self.level + 1
            )
        return self.overflow_wheel

    def place(self, expiration: int) -> TimerTaskList | None:
        """The bucket an entry expiring at ``expiration`` belongs in, or None if it is already expired.

        Walks up from this level to the first one whose span holds the expiration (creating
        overflow levels on demand), sets the bucket's expiration to the start of its tick and
        offers the bucket to the delay queue when that changed. Remembers the answer until the
        clock next moves: callers may reuse ``_last_bucket`` while ``_last_expiration`` matches.
        """
        if expiration < self._due_before:
            return None
        wheel = self
        while expiration >= wheel._limit:
            wheel = wheel.overflow_wheel or wheel._add_overflow_wheel()
        tick = wheel.tick_ms
        virtual_id = expiration // tick
        bucket = wheel.buckets[virtual_id % wheel.wheel_size]
        self._last_expiration = expiration
        self._last_bucket = bucket
        start = virtual_id * tick
        if bucket.expiration != start:
            bucket.expiration = start
            self._offer(bucket)
        return bucket

    def add(self, entry: TimerTaskEntry) -> bool:
        """Store ``entry`` on this level or an overflow level (Kafka's ``TimingWheel.add``).

        False when the entry is cancelled or already expired (``e < current_time + tick_ms``):
        the caller drops or runs it. The entry must be in no bucket (fresh or drained), as
        every entry the wheel sees is. ``SystemTimer`` inlines this, with the placement memo.
        """
        if entry.task._entry is not entry:
            return False
        bucket = self.place(entry.expiration_ms)
        if bucket is None:
            return False
        bucket.append(entry)
        entry.bucket = bucket
        return True

    def advance_clock(self, time_ms: int) -> None:
        """Move this level, and every overflow level, forward to ``time_ms`` rounded down to the tick.

        A level that does not move ends the walk, as in Kafka's recursive ``advanceClock``.
        """
        wheel: TimingWheel | None = self
        while wheel is not None and time_ms >= wheel._due_before:
            time_ms = wheel.current_time = time_ms - time_ms % wheel.tick_ms
            wheel._due_before = time_ms + wheel.tick_ms
            wheel._limit = time_ms + wheel.interval
            wheel._last_expiration = _NO_EXPIRATION
            wheel = wheel.overflow_wheel

    def levels(self) -> list[TimingWheel]:
        """This level and the overflow levels created so far, finest first."""
        out: list[TimingWheel] = []
        wheel: TimingWheel | None = self
        while wheel is not None:
            out.append(wheel)
            wheel = wheel.overflow_wheel
        return out

    def __repr__(self) -> str:
        return (
            f"TimingWheel(tick_ms={self.tick_ms}, wheel_size={self.wheel_size}, "
            f"current_time={self.current_time})"
        )
