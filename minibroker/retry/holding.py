"""Where the retry service holds records until due, and which retry-topic offsets it may commit.

A ``Held`` is one record read from a retry topic: where it was read (``tp``, ``offset``), where it goes
back to, and when. Both holders answer one question the service asks after every poll: "up to which
offset of each partition are the records safe without the retry topic?"

- ``WheelHolding`` (in memory, a ``WheelScheduler``): a record is safe only once it was produced back, so
  a partition's commit point is its lowest offset still held (``LowWater``). After a crash the retry topic
  is read again from there: nothing lost; records delivered above the commit point are delivered again.
  A record whose identity (``redis_scheduler.identity``: original offset and attempt) is held, or was
  delivered within the last ``RECENT_IDENTITIES`` deliveries, is a duplicate (a redelivered record that
  failed again): it is not held twice, its offset counts as finished.
- ``RedisHolding`` (``RedisScheduler``): a record is safe once it is in the sorted set, so the commit
  point is simply past the last record read. A record read twice maps to the same member and is not
  scheduled twice (see the scheduler's tombstones).
"""

from __future__ import annotations

import heapq
from collections import deque
from typing import Any

import attrs

from minibroker.retry import headers as h
from minibroker.retry.member import pack
from minibroker.retry.redis_scheduler import identity
from minibroker.retry.scheduler import WheelScheduler

#: how many delivered identities ``WheelHolding`` remembers to recognise a late duplicate
RECENT_IDENTITIES = 100_000


@attrs.frozen(slots=True)
class Held:
    tp: Any  # the retry topic's TopicPartition (kafka-python's)
    offset: int
    record: h.RetryRecord
    due_ms: int
    epoch: int = 0  # the partition's assignment epoch when read (WheelHolding drops stale ones)


class LowWater:
    """Per partition: offsets read but not finished; the commit point is the lowest unfinished one.

    Invariant: ``commit_point(tp)`` never exceeds an offset that was added and not finished.
    """

    def __init__(self) -> None:
        self._open: dict[Any, list[int]] = {}
        self._finished: dict[Any, set[int]] = {}
        self._next: dict[Any, int] = {}

    def add(self, tp: Any, offset: int) -> None:
        heapq.heappush(self._open.setdefault(tp, []), offset)
        self._next[tp] = max(self._next.get(tp, 0), offset + 1)

    def finish(self, tp: Any, offset: int) -> None:
        if tp in self._open:
            self._finished.setdefault(tp, set()).add(offset)

    def forget(self, tp: Any) -> None:
        for table in (self._open, self._finished, self._next):
            table.pop(tp, None)

    def commit_point(self, tp: Any) -> int | None:
        heap, finished = self._open.get(tp, []), self._finished.get(tp, set())
        while heap and heap[0] in finished:
            finished.discard(heapq.heappop(heap))
        return heap[0] if heap else self._next.get(tp)

    def partitions(self) -> list[Any]:
        return list(self._next)


class WheelHolding:
    """Held records in a ``WheelScheduler``; commit points from a ``LowWater``."""

    name = "wheel"

    def __init__(self, now_ms: int) -> None:
        self.wheel = WheelScheduler(start_ms=now_ms)
        self.marks = LowWater()
        self.epochs: dict[Any, int] = {}
        self._ready: deque[Held] = deque()
        self._held_ids: dict[str, tuple[Any, int]] = {}  # identity -> (tp, epoch) of the record held
        self._recent: dict[str, None] = {}  # delivered identities, oldest first
        self.duplicates = 0

    def hold(self, batch: list[Held]) -> None:
        for held in batch:
            self.marks.add(held.tp, held.offset)
            key = identity(held.record, pack(held.record))
            twin = self._held_ids.get(key)
            if key in self._recent or (twin is not None and twin[1] == self.epochs.get(twin[0], 0)):
                self.duplicates += 1
                self.marks.finish(held.tp, held.offset)
                continue
            epoch = self.epochs.get(held.tp, 0)
            self._held_ids[key] = (held.tp, epoch)
            self.wheel.schedule(attrs.evolve(held, epoch=epoch), held.due_ms)

    def _forget_identity(self, held: Held, delivered: bool) -> None:
        key = identity(held.record, pack(held.record))
        if self._held_ids.get(key) == (held.tp, held.epoch):
            del self._held_ids[key]
        if delivered:
            self._recent[key] = None
            if len(self._recent) > RECENT_IDENTITIES:
                del self._recent[next(iter(self._recent))]

    def claim(self, now_ms: int, limit: int) -> list[Held]:
        ready = self._ready
        ready.extend(self.wheel.claim_due(now_ms))
        claimed = [ready.popleft() for _ in range(min(limit, len(ready)))]
        stale = [held for held in claimed if held.epoch != self.epochs.get(held.tp, 0)]
        for held in stale:  # dropped with its revoked partition: its next owner reads it again
            self._forget_identity(held, delivered=False)
        return [held for held in claimed if held.epoch == self.epochs.get(held.tp, 0)]

    def done(self, batch: list[Held]) -> None:
        for held in batch:
            self.marks.finish(held.tp, held.offset)
            self._forget_identity(held, delivered=True)

    def release(self, batch: list[Held], due_ms: int) -> None:
        for held in batch:
            self.wheel.schedule(held, due_ms)

    def revoke(self, tps: list[Any]) -> None:
        """Drop what is held of ``tps``: their next owner reads it again from the commit point."""
        for tp in tps:
            self.epochs[tp] = self.epochs.get(tp, 0) + 1
            self.marks.forget(tp)

    def commit_points(self) -> dict[Any, int]:
        points = {tp: self.marks.commit_point(tp) for tp in self.marks.partitions()}
        return {tp: point for tp, point in points.items() if point is not None}

    def next_due(self) -> int | None:
        return self.wheel.next_due()

    def pending(self) -> int:
        return self.wheel.pending() + len(self._ready)

    def recover(self, now_ms: int, lease_ms: int) -> int:
        return 0  # nothing is claimed beyond this process


class RedisHolding:
    """Held records in a ``RedisScheduler``; a record read is committed once it is in the sorted set."""

    name = "redis"

    def __init__(self, scheduler: Any) -> None:
        self.scheduler = scheduler
        self._read: dict[Any, int] = {}

    def hold(self, batch: list[Held]) -> None:
        self.scheduler.schedule_many((held.record, held.due_ms) for held in batch)
        for held in batch:
            self._read[held.tp] = max(self._read.get(held.tp, 0), held.offset + 1)

    def claim(self, now_ms: int, limit: int) -> list[Held]:
        self.scheduler.batch = limit
        return [Held(None, -1, record, now_ms) for record in self.scheduler.claim_due(now_ms)]

    def done(self, batch: list[Held]) -> None:
        self.scheduler.done([held.record for held in batch])

    def release(self, batch: list[Held], due_ms: int) -> None:
        self.scheduler.release([held.record for held in batch], due_ms)

    def revoke(self, tps: list[Any]) -> None:
        for tp in tps:
            self._read.pop(tp, None)

    def commit_points(self) -> dict[Any, int]:
        return dict(self._read)

    def next_due(self) -> int | None:
        return self.scheduler.next_due()

    def pending(self) -> int:
        return self.scheduler.pending()

    def recover(self, now_ms: int, lease_ms: int) -> int:
        """Claims older than ``lease_ms`` (their scheduler died mid-batch) become due now."""
        return self.scheduler.recover(now_ms - lease_ms, now_ms)
