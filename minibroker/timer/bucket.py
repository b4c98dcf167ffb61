"""TimerTaskList: one bucket of a timing wheel.

A bucket holds the entries whose expirations fall in one tick of one wheel level.
It is FIFO (entries leave ``flush`` in insertion order) and removal is O(1)
amortised: the bucket *is* a Python list of entries, an entry knows its bucket,
and ``remove`` only detaches the entry (``entry.bucket = None``) and counts it in
``removed``. ``flush`` skips removed entries. Once ``removed`` passes
``compact_after`` the bucket looks at its list (``maybe_compact``): when removed
entries outnumber live ones it drops them (asyncio's "more than half cancelled"
rule for its timer heap, applied per bucket); either way the next look comes when
removed entries reach twice the live ones plus ``COMPACT_MIN``. The hot path thus
compares two attributes and never calls ``len``; a compaction scans at most
``2 * removed`` items, all paid for by those removals; and a bucket never holds more
removed entries than twice its live ones at its last look, plus ``COMPACT_MIN``.
Kafka's bucket is a doubly linked list; in CPython a list keeps append and iteration
in C, and a removal touches only the entry and the bucket, not its neighbours,
which matters when a million entries do not fit in the cache.

All buckets of one timer share a ``TaskCounter`` whose ``value`` is the number of
live entries in all of them, which is what ``SystemTimer.size`` reports. Kafka
increments and decrements one atomic counter on every add and remove; here each
bucket already counts its holes, so the counter adds the buckets' sizes up when it
is read (O(buckets), and only snapshots read it) and adding or removing an entry
pays for no counter at all.

A bucket's ``expiration`` is the start of the tick it covers, or -1 while it is
not queued. ``set_expiration`` reports whether the value changed: the wheel
offers the bucket to the delay queue only then, i.e. once per wheel cycle.
``flush`` empties the bucket and resets the expiration to -1 so a reused bucket
can be offered again.

Invariants: an entry is live in bucket ``b`` exactly when ``entry.bucket is b``,
and then it sits in ``b``'s list exactly once; ``removed`` is the number of list
items that are not live, at most ``compact_after``; ``size == len(list) - removed``.
"""

from __future__ import annotations

from collections.abc import Callable

from minibroker.timer.task import STALE, TimerTask, TimerTaskEntry

_list_len = list.__len__

#: removed entries a bucket may hold beyond twice its live ones at its last look
COMPACT_MIN = 64


class TaskCounter:
    """The number of live entries in all buckets that share this counter."""

    __slots__ = ("_buckets",)

    def __init__(self) -> None:
        self._buckets: list[TimerTaskList] = []

    @property
    def value(self) -> int:
        """Entries in the buckets now (each bucket's list length minus its holes)."""
        return sum(bucket.size for bucket in self._buckets)


class TimerTaskList(list):
    """A FIFO bucket of timer task entries with amortised O(1) removal and a shared counter.

    The list's items are the entries, live and removed; iterate with ``entries()``.
    """

    __slots__ = ("_counter", "expiration", "level", "index", "removed", "compact_after")

    def __init__(self, counter: TaskCounter, level: int = 1, index: int = 0) -> None:
        super().__init__()
        self._counter = counter
        counter._buckets.append(self)
        self.expiration = -1
        #: where the bucket sits: wheel level (1 = finest) and slot
        self.level = level
        self.index = index
        #: list items whose entry has left the bucket
        self.removed = 0
        #: the number of removed items above which the bucket looks at its list again
        self.compact_after = COMPACT_MIN

    __hash__ = object.__hash__
    __eq__ = object.__eq__

    @property
    def size(self) -> int:
        """Live entries in the bucket."""
        return _list_len(self) - self.removed

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
        """Append ``entry`` at the tail, first detaching it from any other bucket.

        An entry that was removed from this very bucket may still sit in its list, so the
        bucket is compacted first in that case (the wheel never does this: an entry that
        left a bucket is never placed again, a re-armed task gets a new entry).
        """
        if entry.bucket is not None:
            entry.bucket.remove(entry)
        if self.removed:
            self.compact()
        self.append(entry)
        entry.bucket = self

    def remove(self, entry: TimerTaskEntry) -> None:  # type: ignore[override]
        """Remove ``entry`` if it is live in this bucket. O(1) amortised."""
        if entry.bucket is self:
            entry.remove()

    def compact(self) -> None:
        """Drop the removed entries from the list, keeping the live ones in order."""
        live = []
        keep = live.append
        for entry in self:
            bucket = entry.bucket
            if bucket is self:
                keep(entry)
            elif bucket is STALE:
                entry.bucket = None  # a task that was its own entry here leaves the list for good
        self[:] = live
        self.removed = 0
        self.compact_after = 2 * len(live) + COMPACT_MIN

    def maybe_compact(self) -> None:
        """Compact if removed entries outnumber live ones; in any case set the next look."""
        live = self.size
        if self.removed > live:
            self.compact()
        else:
            self.compact_after = 2 * live + COMPACT_MIN

    def entries(self) -> list[TimerTaskEntry]:
        """The live entries, head first."""
        return [entry for entry in self if entry.bucket is self]

    def drain(self) -> list[TimerTaskEntry]:
        """Empty the bucket and reset its expiration to -1; return the live entries, head first."""
        entries = self.entries()
        for entry in self:
            if entry.bucket is STALE:
                entry.bucket = None
        self.clear()
        self.removed = 0
        self.compact_after = COMPACT_MIN
        self.expiration = -1
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
        for entry in self.entries():
            task = entry.task
            if task._entry is entry:
                f(task)

    def __repr__(self) -> str:
        return f"TimerTaskList(expiration={self.expiration}, size={self.size})"
