"""TimerTaskList: one bucket of a timing wheel.

A bucket holds the entries whose expirations fall in one tick of one wheel level.
It is FIFO (entries leave ``flush`` in insertion order) and removal is O(1): the
bucket *is* an insertion-ordered dict of entries used as a linked set, which
keeps the hot path in C.

All buckets of one timer share a ``TaskCounter``: ``add`` increments it and
``remove`` decrements it, so the counter is the number of entries sitting in
buckets, which is what ``SystemTimer.size`` reports.

A bucket's ``expiration`` is the start of the tick it covers, or -1 while it is
not queued. ``set_expiration`` reports whether the value changed: the wheel
offers the bucket to the delay queue only then, i.e. once per wheel cycle.
``flush`` empties the bucket and resets the expiration to -1 so a reused bucket
can be offered again.
"""

from __future__ import annotations

from collections.abc import Callable

from minibroker.timer.task import TimerTask, TimerTaskEntry


class TaskCounter:
    """The number of entries in all buckets of one timer."""

    __slots__ = ("value",)

    def __init__(self) -> None:
        self.value = 0


class TimerTaskList(dict):
    """A FIFO bucket of timer task entries with O(1) removal and a shared counter.

    The dict's keys are the entries; values are unused.
    """

    __slots__ = ("_counter", "expiration", "level", "index")

    def __init__(self, counter: TaskCounter, level: int = 1, index: int = 0) -> None:
        super().__init__()
        self._counter = counter
        self.expiration = -1
        #: where the bucket sits: wheel level (1 = finest) and slot
        self.level = level
        self.index = index

    __hash__ = object.__hash__
    __eq__ = object.__eq__

    def set_expiration(self, expiration_ms: int) -> bool:
        """Set the bucket's expiration; True only if the stored value changed."""
        if self.expiration == expiration_ms:
            return False
        self.expiration = expiration_ms
        return True

    def delay_ms(self, now_ms: int) -> int:
        """Time left until the bucket is due (Kafka's ``getDelay``), never negative."""
        return max(self.expiration - now_ms, 0)

    def add(self, entry: TimerTaskEntry) -> None:
        """Append ``entry`` at the tail, first detaching it from any other bucket."""
        if entry.bucket is not None:
            entry.bucket.remove(entry)
        self[entry] = None
        entry.bucket = self
        self._counter.value += 1

    def remove(self, entry: TimerTaskEntry) -> None:
        """Remove ``entry`` if it sits in this bucket. O(1)."""
        if entry.bucket is self:
            del self[entry]
            entry.bucket = None
            self._counter.value -= 1

    def drain(self) -> list[TimerTaskEntry]:
        """Empty the bucket and reset its expiration to -1; return the entries, head first."""
        entries = list(self)
        self.clear()
        self.expiration = -1
        self._counter.value -= len(entries)
        for entry in entries:
            entry.bucket = None
        return entries

    def flush(self, reinsert: Callable[[TimerTaskEntry], object]) -> None:
        """``drain`` the bucket and hand every entry, head first, to ``reinsert``.

        Entries reinserted by the wheel never land back in this bucket.
        """
        for entry in self.drain():
            reinsert(entry)

    def foreach(self, f: Callable[[TimerTask], object]) -> None:
        """Call ``f`` on the task of every entry that is not cancelled, in FIFO order."""
        for entry in list(self):
            if not entry.cancelled():
                f(entry.task)

    def __repr__(self) -> str:
        return f"TimerTaskList(expiration={self.expiration}, size={len(self)})"
