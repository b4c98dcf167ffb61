"""SharePartition: one share group's view of one partition, on the partition's leader (KIP-932).

Kafka's class: https://github.com/apache/kafka/blob/trunk/core/src/main/java/kafka/server/share/SharePartition.java
(docs/kafka-model.md, "Share groups"). A share partition hands the records of its partition to the members
of a share group, each record under a time-limited *acquisition lock*:

- The window runs from the share-partition start offset (SPSO, ``start_offset``) to the end offset (SPEO,
  ``end_offset``, inclusive; ``next_fetch_offset`` is one past it). Every offset in it is *in flight*, in one
  of the states Available, Acquired, Acknowledged or Archived, with its delivery count. Offsets below the
  SPSO are done; offsets above the SPEO were never delivered.
- ``acquire`` first hands out Available records of the window (redeliveries, lowest offset first), then new
  records from ``next_fetch_offset`` up to the readable end (the HW, or the LSO for read_committed), never
  more than ``max_records`` and never so many that the window outgrows ``max_record_locks`` records
  (``group.share.partition.max.record.locks``). Each acquisition raises the delivery count of its records
  by one and arms one ``AcquisitionLock`` for the run of offsets it took on the broker's timer, due exactly
  ``lock_duration_ms`` later.
- ``acknowledge``: ACCEPT makes an Acquired record Acknowledged; RELEASE makes it Available again; REJECT
  (and GAP) Archived. Only the member that holds a record may acknowledge it (else INVALID_RECORD_STATE,
  and nothing of that request's batches for this partition changes).
- A record released (RELEASE, lock expiry, the member leaving) whose delivery count reached
  ``delivery_count_limit`` (``group.share.delivery.count.limit``) is Archived instead of Available.
- The SPSO moves up over every Acknowledged or Archived record at its head; those leave the window.

Invariants: every offset in ``[start_offset, next_fetch_offset)`` has a record; an Acquired record has a
member and a live lock, no other record has either; a lock is on the timer exactly while one of its records
is still Acquired under it; a record is acknowledged at most once per delivery.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Iterable

import attrs

from minibroker.broker.share.acquisition_lock import AcquisitionLock
from minibroker.common.errors import Errors
from minibroker.common.messages import TopicPartition
from minibroker.coordinator.share.messages import PersistedBatch, ShareGroupState
from minibroker.trace import NULL_TRACER, Tracer


class RecordState(enum.IntEnum):
    """Kafka's ``RecordState`` ids."""

    AVAILABLE = 0
    ACQUIRED = 1
    ACKNOWLEDGED = 2
    ARCHIVED = 4


class AcknowledgeType(enum.IntEnum):
    """The acknowledge types of ShareFetch and ShareAcknowledge."""

    GAP = 0
    ACCEPT = 1
    RELEASE = 2
    REJECT = 3


@attrs.define(slots=True)
class InFlightRecord:
    """One offset of the window: its state, delivery count, holder and lock while Acquired."""

    state: RecordState = RecordState.AVAILABLE
    delivery_count: int = 0
    member_id: str | None = None
    lock: AcquisitionLock | None = None


@attrs.frozen(slots=True)
class AcquiredRecords:
    """A run of offsets handed to one member in one acquisition, all with the same delivery count."""

    first_offset: int
    last_offset: int
    delivery_count: int


@attrs.frozen(slots=True)
class AcknowledgementBatch:
    """``first_offset..last_offset`` with one type for all, or one type per offset."""

    first_offset: int
    last_offset: int
    types: tuple[int, ...]


class SharePartition:
    """The in-flight window of ``group_id`` on ``tp``; see the module docstring for the rules."""

    def __init__(
        self,
        group_id: str,
        tp: TopicPartition,
        timer: object,
        now: Callable[[], int],
        *,
        lock_duration_ms: int,
        delivery_count_limit: int,
        max_record_locks: int,
        on_release: Callable[[SharePartition], object] = lambda sp: None,
        on_change: Callable[[SharePartition], object] = lambda sp: None,
        tracer: Tracer = NULL_TRACER,
        broker_id: int = -1,
    ) -> None:
        self.group_id = group_id
        self.tp = tp
        self.timer = timer
        self.now = now
        self.lock_duration_ms = lock_duration_ms
        self.delivery_count_limit = delivery_count_limit
        self.max_record_locks = max_record_locks
        #: called after records became Available again (a lock expired, a RELEASE): a waiting fetch may go on
        self.on_release = on_release
        #: called after a change the share coordinator must keep (acknowledgements, releases, expiries)
        self.on_change = on_change
        self.tracer = tracer
        self.broker_id = broker_id
        self.start_offset = -1
        self.next_fetch_offset = -1
        #: the share coordinator's state epoch this window was read at (its writes carry it)
        self.state_epoch = 0
        #: when the leader appended the record at an offset (None when the log no longer has it): the
        #: ``share.accept`` events' produce-to-accept time
        self.append_time: Callable[[int], int | None] = lambda offset: None
        self.records: dict[int, InFlightRecord] = {}
        self._available = 0
        self.locks: set[AcquisitionLock] = set()
        #: running totals: records acquired, lock expiries, acknowledgements by type, records archived
        self.acquired_total = 0
        self.lock_expiries = 0
        self.archived_total = 0
        self.acknowledged = {t.name: 0 for t in AcknowledgeType}

    # ---- state ---------------------------------------------------------------------------------------------
    @property
    def initialized(self) -> bool:
        return self.start_offset >= 0

    def initialize(self, start_offset: int) -> None:
        """Start the window at ``start_offset`` (``share.auto.offset.reset`` or the persisted SPSO)."""
        self.start_offset = self.next_fetch_offset = start_offset
        self._emit("share.init", offset=start_offset)

    def restore(self, state: ShareGroupState) -> None:
        """Start the window from the share coordinator's state: Available, Acknowledged and Archived
        records with their persisted delivery counts (a record persisted while Acquired is Available)."""
        self.start_offset = self.next_fetch_offset = state.start_offset
        self.state_epoch = state.state_epoch
        for batch in state.batches:
            for offset in range(batch.first_offset, batch.last_offset + 1):
                kind = RecordState(batch.state)
                if kind is RecordState.ACQUIRED:
                    kind = RecordState.AVAILABLE
                self.records[offset] = InFlightRecord(kind, batch.delivery_count)
                self._available += kind is RecordState.AVAILABLE
                self.next_fetch_offset = max(self.next_fetch_offset, offset + 1)
        for offset in range(self.start_offset, self.next_fetch_offset):
            self.records.setdefault(offset, InFlightRecord(RecordState.ARCHIVED))
        self.records = dict(sorted(self.records.items()))
        self._emit("share.init", offset=self.start_offset, end_offset=self.end_offset, cause="restored")
        self._advance_start()

    def snapshot(self) -> ShareGroupState:
        """The state to persist: an Acquired record counts as Available with its delivery count before
        this delivery (Kafka persists a delivery when the record is released or acknowledged)."""
        batches: list[PersistedBatch] = []
        for offset, record in self.records.items():
            state, count = record.state, record.delivery_count
            if state is RecordState.ACQUIRED:
                state, count = RecordState.AVAILABLE, count - 1
            last = batches[-1] if batches else None
            same = last is not None and (last.state, last.delivery_count) == (state, count)
            if same and last.last_offset + 1 == offset:
                batches[-1] = PersistedBatch(last.first_offset, offset, count, int(state))
            else:
                batches.append(PersistedBatch(offset, offset, count, int(state)))
        return ShareGroupState(self.start_offset, tuple(batches), self.state_epoch)

    @property
    def end_offset(self) -> int:
        """The SPEO: the last offset in flight (SPSO - 1 while the window is empty)."""
        return self.next_fetch_offset - 1

    def count(self, state: RecordState) -> int:
        return sum(1 for record in self.records.values() if record.state is state)

    def can_acquire(self, read_end: int) -> bool:
        """True when ``acquire`` would hand out at least one record."""
        if not self.initialized:
            return False
        if self._available:
            return True
        return (
            self.next_fetch_offset < read_end
            and self.next_fetch_offset - self.start_offset < self.max_record_locks
        )

    def move_start(self, log_start_offset: int) -> None:
        """The log no longer holds offsets below ``log_start_offset`` (DeleteRecords, retention): the window
        starts there at least; records below it leave it, whatever their state (their locks go with them)."""
        if not self.initialized or log_start_offset <= self.start_offset:
            return
        for offset in range(self.start_offset, min(log_start_offset, self.next_fetch_offset)):
            record = self.records.pop(offset)
            if record.state is RecordState.ACQUIRED:
                self._settle(offset, record, RecordState.ARCHIVED)
            elif record.state is RecordState.AVAILABLE:
                self._available -= 1
        self.start_offset = log_start_offset
        self.next_fetch_offset = max(self.next_fetch_offset, log_start_offset)
        self._emit("share.spso", offset=self.start_offset, end_offset=self.end_offset, cause="log_start")
        self.on_change(self)

    # ---- acquisition ---------------------------------------------------------------------------------------
    def acquire(self, member_id: str, max_records: int, read_end: int) -> list[AcquiredRecords]:
        """Up to ``max_records`` redeliveries first, then new records below ``read_end``."""
        acquired: list[AcquiredRecords] = []
        if not self.initialized:
            return acquired
        left = max_records
        if self._available:
            run: list[int] = []
            for offset, record in self.records.items():
                if left <= 0:
                    break
                if record.state is RecordState.AVAILABLE:
                    run.append(offset)
                    left -= 1
            acquired.extend(self._acquire_offsets(member_id, run, True))
        room = self.max_record_locks - (self.next_fetch_offset - self.start_offset)
        last = min(read_end, self.next_fetch_offset + min(left, room))
        if last > self.next_fetch_offset:
            first = self.next_fetch_offset
            for offset in range(first, last):
                self.records[offset] = InFlightRecord()
            self.next_fetch_offset = last
            acquired.extend(self._acquire_offsets(member_id, range(first, last), False))
        return acquired

    def _acquire_offsets(
        self, member_id: str, offsets: Iterable[int], redelivery: bool
    ) -> list[AcquiredRecords]:
        """Acquire ``offsets`` (ascending): one lock for them all, one ``AcquiredRecords`` per run of equal
        delivery count and consecutive offsets."""
        offsets = list(offsets)
        if not offsets:
            return []
        lock = AcquisitionLock(
            self.lock_expired,
            f"{self.group_id}-{self.tp}",
            member_id,
            offsets,
            self.lock_duration_ms,
            self.now() + self.lock_duration_ms,
        )
        runs: list[AcquiredRecords] = []
        for offset in offsets:
            record = self.records[offset]
            if redelivery:
                self._available -= 1
            record.state = RecordState.ACQUIRED
            record.delivery_count += 1
            record.member_id = member_id
            record.lock = lock
            last = runs[-1] if runs else None
            if (
                last is not None
                and last.last_offset + 1 == offset
                and last.delivery_count == record.delivery_count
            ):
                runs[-1] = AcquiredRecords(last.first_offset, offset, last.delivery_count)
            else:
                runs.append(AcquiredRecords(offset, offset, record.delivery_count))
        self.locks.add(lock)
        self.acquired_total += len(offsets)
        self.timer.add(lock)
        if self.tracer.enabled:
            for run in runs:
                self._emit(
                    "share.acquire",
                    member=member_id,
                    offset=run.first_offset,
                    last_offset=run.last_offset,
                    count=run.last_offset - run.first_offset + 1,
                    delivery_count=run.delivery_count,
                    deadline_ms=lock.deadline_ms,
                )
        return runs

    # ---- acknowledgement -----------------------------------------------------------------------------------
    def acknowledge(self, member_id: str, batches: Iterable[AcknowledgementBatch]) -> Errors:
        """Apply ``batches`` of ``member_id``; INVALID_RECORD_STATE (nothing applied) if any offset is not
        Acquired by that member, INVALID_REQUEST if a batch's types do not fit its range."""
        plan: list[tuple[int, AcknowledgeType]] = []
        for batch in batches:
            size = batch.last_offset - batch.first_offset + 1
            if (
                size <= 0
                or len(batch.types) not in (1, size)
                or any(t not in (0, 1, 2, 3) for t in batch.types)
            ):
                return Errors.INVALID_REQUEST
            for i, offset in enumerate(range(batch.first_offset, batch.last_offset + 1)):
                kind = AcknowledgeType(batch.types[0] if len(batch.types) == 1 else batch.types[i])
                record = self.records.get(offset)
                if kind is not AcknowledgeType.GAP and (
                    record is None
                    or record.state is not RecordState.ACQUIRED
                    or record.member_id != member_id
                ):
                    return Errors.INVALID_RECORD_STATE
                plan.append((offset, kind))
        released = False
        accepted: list[tuple[int, int]] = []
        for batch_start, kind in plan:
            record = self.records.get(batch_start)
            if record is None or record.state is not RecordState.ACQUIRED:
                continue  # a GAP offset that is not in flight
            self.acknowledged[kind.name] += 1
            if kind is AcknowledgeType.ACCEPT:
                accepted.append((batch_start, record.delivery_count))
                self._settle(batch_start, record, RecordState.ACKNOWLEDGED)
            elif kind is AcknowledgeType.RELEASE:
                released |= self._release(batch_start, record, "release")
            else:
                self._archive(batch_start, record, kind.name.lower())
        if self.tracer.enabled:
            for batch in batches:
                self._emit(
                    "share.ack",
                    member=member_id,
                    offset=batch.first_offset,
                    last_offset=batch.last_offset,
                    types=[AcknowledgeType(t).name for t in batch.types],
                )
            now = self.now()
            for offset, delivery_count in accepted:
                appended = self.append_time(offset)
                self._emit(
                    "share.accept",
                    offset=offset,
                    delivery_count=delivery_count,
                    latency_ms=now - appended if appended is not None else None,
                )
        self._advance_start()
        self.on_change(self)
        if released:
            self.on_release(self)
        return Errors.NONE

    def release_member(self, member_id: str) -> int:
        """Release every record ``member_id`` holds (it left, or closed its share session); how many."""
        held = [
            (o, r)
            for o, r in self.records.items()
            if r.state is RecordState.ACQUIRED and r.member_id == member_id
        ]
        released = False
        for offset, record in held:
            released |= self._release(offset, record, "member")
        self._advance_start()
        if held:
            self.on_change(self)
        if released:
            self.on_release(self)
        return len(held)

    def close(self) -> None:
        """Disarm every lock (the partition left this broker; the records are not released here)."""
        for lock in list(self.locks):
            lock.cancel()
        self.locks.clear()

    # ---- lock expiry ---------------------------------------------------------------------------------------
    def lock_expired(self, lock: AcquisitionLock) -> None:
        """``lock`` ran: its records still Acquired under it go (Available, or Archived at the limit)."""
        if lock not in self.locks:
            return
        expired = [o for o in lock.offsets if (r := self.records.get(o)) is not None and r.lock is lock]
        self.lock_expiries += 1
        if self.tracer.enabled:
            self._emit(
                "share.lock.expire",
                member=lock.member_id,
                offset=expired[0] if expired else -1,
                last_offset=expired[-1] if expired else -1,
                count=len(expired),
                deadline_ms=lock.deadline_ms,
            )
        released = False
        for offset in expired:
            released |= self._release(offset, self.records[offset], "lock")
        self.locks.discard(lock)
        self._advance_start()
        if expired:
            self.on_change(self)
        if released:
            self.on_release(self)

    # ---- transitions ---------------------------------------------------------------------------------------
    def _settle(self, offset: int, record: InFlightRecord, state: RecordState) -> None:
        """Record leaves Acquired for ``state``; its lock goes off the timer once it holds nothing more."""
        lock = record.lock
        record.state = state
        record.member_id = None
        record.lock = None
        if lock is not None:
            lock.remaining -= 1
            if lock.remaining == 0 and lock in self.locks:
                self.locks.discard(lock)
                lock.cancel()

    def _release(self, offset: int, record: InFlightRecord, cause: str) -> bool:
        """Available again, or Archived once its delivery count reached the limit; True if Available."""
        if record.delivery_count >= self.delivery_count_limit:
            self._archive(offset, record, "limit")
            return False
        self._settle(offset, record, RecordState.AVAILABLE)
        self._available += 1
        return True

    def _archive(self, offset: int, record: InFlightRecord, cause: str) -> None:
        self._settle(offset, record, RecordState.ARCHIVED)
        self.archived_total += 1
        if self.tracer.enabled:
            self._emit("share.archive", offset=offset, delivery_count=record.delivery_count, cause=cause)

    def _advance_start(self) -> None:
        """Move the SPSO over the Acknowledged and Archived records at the head of the window."""
        records = self.records
        start = self.start_offset
        while start < self.next_fetch_offset:
            record = records[start]
            if record.state is not RecordState.ACKNOWLEDGED and record.state is not RecordState.ARCHIVED:
                break
            del records[start]
            start += 1
        if start != self.start_offset:
            self.start_offset = start
            self._emit("share.spso", offset=start, end_offset=self.end_offset)

    def _emit(self, kind: str, **fields: object) -> None:
        if self.tracer.enabled:
            self.tracer.emit(
                kind, broker=self.broker_id, group=self.group_id, partition=str(self.tp), **fields
            )
