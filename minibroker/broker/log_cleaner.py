"""LogCleaner: compaction of ``cleanup.policy=compact`` logs, on the broker's timer.

Kafka's ``LogCleaner`` and its ``Cleaner``
(https://github.com/apache/kafka/blob/trunk/core/src/main/scala/kafka/log/LogCleaner.scala),
with the choice of what to clean in ``log_cleaner_manager``:

- **Cadence.** Kafka's cleaner thread cleans the filthiest cleanable log, again and again, and
  sleeps ``log.cleaner.backoff.ms`` (15 s) when none is left. A cleaning takes no virtual time here,
  so the cleaner runs at ``broker start + k × log.cleaner.backoff.ms`` and then cleans every
  cleanable log, filthiest first. Its task on the broker's SystemTimer is armed once a compacted log
  this broker hosts has a segment besides its active one (before that nothing can be cleaned; the
  task then lands on the next instant of that grid), and stays armed while one has.
- **One cleaning** (``Cleaner.clean``) reads the dirty range ``[first dirty, first uncleanable)`` into
  an offset map (key -> its last offset there), then rewrites every segment below the first
  uncleanable offset: a keyed record is kept when no later record in the dirty range has its key; a
  tombstone (null value) kept by a cleaning gets a delete horizon of that cleaning's time +
  ``delete.retention.ms`` and is removed by the first cleaning at or after it (KIP-534). Kept records
  keep their offsets; the removed ones leave holes. The cleaned segments are grouped as Kafka
  groups them (consecutive segments while their original sizes fit in ``segment.bytes``) and
  replace the originals; the checkpoint moves to the end of the dirty range.
- **What is kept whole** (never removed, never in the map): batches of idempotent or transactional
  producers and transaction markers (Kafka compacts the former too, keeping each producer's last
  batch, and removes markers and aborted records after the delete horizon); compressed batches;
  records without a key (Kafka removes those; a compacted topic refuses them on produce); the
  emulator's own record batches without bytes, which carry no keys.

Record keys: a wire client's batches carry Kafka's v2 records (key, value); the coordinators'
records on ``__consumer_offsets`` and ``__transaction_state`` are values whose key a ``key_of``
function reads (``ReplicaManager.record_keys``).
"""

from __future__ import annotations

from collections.abc import Callable

import attrs

from minibroker.broker.log import Log, Segment
from minibroker.broker.log_cleaner_manager import LogToClean, grab_filthiest
from minibroker.broker.log_config import LogConfig
from minibroker.common.messages import TopicPartition
from minibroker.common.record_batch import RecordBatch
from minibroker.timer import Timer, TimerTask
from minibroker.trace import NULL_TRACER, Tracer

#: a value's compaction key and whether it is a tombstone; None: not compacted (kept as it is)
KeyOf = Callable[[bytes], "tuple[bytes, bool] | None"]

_HEADER_SIZE = 61  # a v2 batch's header (Kafka's RECORD_BATCH_OVERHEAD)
_LAST_DELTA_AT = 23


@attrs.frozen
class CleanerStats:
    """What one cleaning did: records and tombstones removed, segments before and after."""

    removed: int
    tombstones_removed: int
    segments_before: int
    segments_after: int


@attrs.define
class _Record:
    """One record of a batch being cleaned: its offset, key, and the batch that holds it if it stays."""

    offset: int
    key: bytes
    tombstone: bool
    alone: Callable[[], RecordBatch]  # the record as a batch of its own


def _raw_parts(batch: RecordBatch) -> list[tuple[RecordBatch, list[_Record] | None]] | None:
    """``batch``'s inner v2 batches, each as a RecordBatch with its keyed records (None: kept whole)."""
    from kafka.record.default_records import DefaultRecordBatch, DefaultRecordBatchBuilder

    raw = batch.raw
    assert raw is not None
    parts: list[tuple[RecordBatch, list[_Record] | None]] = []
    pos, base = 0, batch.base_offset
    while pos < len(raw):
        length = int.from_bytes(raw[pos + 8 : pos + 12], "big", signed=True)
        end = pos + 12 + length
        inner_bytes = bytes(raw[pos:end])
        inner = DefaultRecordBatch(inner_bytes)
        span = inner.last_offset_delta + 1
        part = RecordBatch(
            base, span, len(inner_bytes), batch.leader_epoch, batch.append_time_ms, raw=inner_bytes
        )
        keyed: list[_Record] | None = None
        if inner.compression_type == 0 and not inner.is_control_batch and inner.producer_id < 0:
            keyed = []
            for record in inner:
                if record.key is None:
                    keyed = None  # keyless: the batch stays as it is
                    break

                def alone(record=record, offset=base + record.offset - inner.base_offset) -> RecordBatch:
                    builder = DefaultRecordBatchBuilder(2, 0, False, -1, -1, -1, 2**31 - 1)
                    builder.append(
                        0,
                        timestamp=record.timestamp,
                        key=record.key,
                        value=record.value,
                        headers=list(record.headers),
                    )
                    out = bytes(builder.build())
                    return RecordBatch(offset, 1, len(out), batch.leader_epoch, batch.append_time_ms, raw=out)

                keyed.append(
                    _Record(
                        base + record.offset - inner.base_offset,
                        bytes(record.key),
                        record.value is None,
                        alone,
                    )
                )
        parts.append((part, keyed))
        pos, base = end, base + span
    return parts


def _value_records(batch: RecordBatch, key_of: KeyOf) -> list[tuple[RecordBatch, list[_Record] | None]]:
    """A batch of values (the coordinators'), one record each, keyed by ``key_of``."""
    assert batch.values is not None
    share = batch.size // max(1, len(batch.values))
    parts: list[tuple[RecordBatch, list[_Record] | None]] = []
    for i, value in enumerate(batch.values):
        single = RecordBatch(
            batch.base_offset + i, 1, share, batch.leader_epoch, batch.append_time_ms, values=(value,)
        )
        found = key_of(value)
        if found is None:
            parts.append((single, None))
        else:
            key, tombstone = found
            parts.append(
                (single, [_Record(single.base_offset, key, tombstone, lambda single=single: single)])
            )
    return parts


def _parts(batch: RecordBatch, key_of: KeyOf | None) -> list[tuple[RecordBatch, list[_Record] | None]]:
    """The pieces a batch may be cleaned in; a batch kept whole is one piece with no records."""
    if batch.producers:
        return [(batch, None)]
    if batch.raw is not None:
        try:
            parts = _raw_parts(batch)
        except Exception:  # bytes kafka-python cannot read: kept as they are
            parts = None
        return parts if parts is not None else [(batch, None)]
    if batch.values is not None and key_of is not None and len(batch.values) == batch.count:
        return _value_records(batch, key_of)
    return [(batch, None)]


def keyed_records(batch: RecordBatch) -> list[tuple[int, bytes, bool]]:
    """The records of ``batch`` the cleaner may remove: (offset, key, tombstone), in offset order."""
    return [(r.offset, r.key, r.tombstone) for _, records in _parts(batch, None) for r in records or ()]


class Cleaner:
    """Cleans one log at a time (Kafka's ``Cleaner.doClean``); stateless between cleanings."""

    def __init__(self, key_of: Callable[[str], KeyOf | None] = lambda topic: None) -> None:
        #: topic -> how to read its values' keys (None: its values carry none)
        self.key_of = key_of

    def clean(self, ltc: LogToClean, log: Log, config: LogConfig, now: int) -> CleanerStats:
        key_of = self.key_of(ltc.tp.topic)
        upper = ltc.first_uncleanable_offset
        count = next(i for i, s in enumerate(log.segments) if s.base_offset >= upper or s is log.segments[-1])
        if count == 0:
            return CleanerStats(0, 0, len(log.segments), len(log.segments))
        pieces: list[list[tuple[RecordBatch, list[_Record] | None]]] = []
        offset_map: dict[bytes, int] = {}
        end_offset = ltc.first_dirty_offset
        for segment in log.segments[:count]:
            parts = [part for batch in segment.batches for part in _parts(batch, key_of)]
            pieces.append(parts)
            for batch, records in parts:
                if batch.next_offset <= ltc.first_dirty_offset:
                    continue
                for record in records or ():
                    if record.offset >= ltc.first_dirty_offset:
                        offset_map[record.key] = record.offset
                end_offset = max(end_offset, batch.next_offset)
        removed = tombstones = 0
        cleaned: list[Segment] = []
        for group in _groups(log.segments[:count], config.segment_bytes):
            out = Segment(log.segments[group[0]].base_offset)
            for index in group:
                for batch, records in pieces[index]:
                    if records is None:
                        out.push(batch)
                        continue
                    kept = []
                    for record in records:
                        if record.offset < offset_map.get(record.key, -1):
                            log.delete_horizons.pop(record.offset, None)
                            removed += 1
                            continue
                        if record.tombstone:
                            horizon = log.delete_horizons.get(record.offset)
                            if horizon is not None and now >= horizon:
                                del log.delete_horizons[record.offset]
                                removed += 1
                                tombstones += 1
                                continue
                            if horizon is None:
                                log.delete_horizons[record.offset] = now + config.delete_retention_ms
                        kept.append(record)
                    if len(kept) == len(records):
                        out.push(batch)
                    else:
                        for record in kept:
                            out.push(record.alone())
            cleaned.append(out)
        before = len(log.segments)
        log.replace_segments(count, cleaned)
        log.cleaner_checkpoint = end_offset
        return CleanerStats(removed, tombstones, before, len(log.segments))


def _groups(segments: list[Segment], max_size: int) -> list[list[int]]:
    """Kafka's ``groupSegmentsBySize``: consecutive segments while their sizes add up to ``max_size``."""
    groups: list[list[int]] = []
    size = 0
    for i, segment in enumerate(segments):
        if groups and size + segment.size <= max_size:
            groups[-1].append(i)
            size += segment.size
        else:
            groups.append([i])
            size = segment.size
    return groups


class _CleanerTask(TimerTask):
    """The cleaner's next run, named ``log-cleaner`` in timer traces."""

    __slots__ = ("op_id",)

    def __init__(self, delay_ms: int, action: Callable[[], object]) -> None:
        super().__init__(delay_ms, action)
        self.op_id = "log-cleaner"


class LogCleaner:
    """One broker's cleaner: runs on its timer every ``backoff_ms`` while a compacted log can roll over.

    ``logs()`` lists the hosted logs with their configs; ``started_ms`` is the broker's start (the
    grid the runs fall on). ``wake()`` is called when a log rolls a segment (and at start).
    """

    def __init__(
        self,
        broker_id: int,
        timer: Timer,
        now: Callable[[], int],
        logs: Callable[[], list[tuple[TopicPartition, Log, LogConfig]]],
        backoff_ms: int,
        cleaner: Cleaner,
        tracer: Tracer = NULL_TRACER,
    ) -> None:
        self.broker_id = broker_id
        self.timer = timer
        self.now = now
        self.logs = logs
        self.backoff_ms = backoff_ms
        self.cleaner = cleaner
        self.tracer = tracer
        self.started_ms = now()
        self.enabled = True
        self.cleanings = 0
        self._task: _CleanerTask | None = None

    def _has_work(self) -> bool:
        return any(config.compact and len(log.segments) > 1 for _, log, config in self.logs())

    def wake(self) -> None:
        """Arm the next run (the next instant of the grid after now) if none is armed and one may clean."""
        if self._task is not None or not self.enabled or not self._has_work():
            return
        now = self.now()
        due = self.started_ms + ((now - self.started_ms) // self.backoff_ms + 1) * self.backoff_ms
        self._arm(due - now)

    def _arm(self, delay_ms: int) -> None:
        self._task = _CleanerTask(delay_ms, self.run)
        self.timer.add(self._task)

    def run(self) -> None:
        """Clean every cleanable log, filthiest first; then sleep ``backoff_ms`` if any may clean later."""
        self._task = None
        now = self.now()
        done: set[TopicPartition] = set()
        while self.enabled:
            candidates = [c for c in self.logs() if c[0] not in done]
            ltc = grab_filthiest(candidates, now)
            if ltc is None:
                break
            done.add(ltc.tp)
            log, config = next((log, config) for tp, log, config in candidates if tp == ltc.tp)
            stats = self.cleaner.clean(ltc, log, config, now)
            self.cleanings += 1
            if self.tracer.enabled:
                self.tracer.emit(
                    "log.clean",
                    broker=self.broker_id,
                    partition=str(ltc.tp),
                    first_dirty=ltc.first_dirty_offset,
                    end=log.cleaner_checkpoint,
                    dirty_bytes=ltc.cleanable_bytes,
                    total_bytes=ltc.total_bytes,
                    removed=stats.removed,
                    tombstones=stats.tombstones_removed,
                    segments=stats.segments_after,
                )
        if self.enabled and self._has_work():
            self._arm(self.backoff_ms)

    def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            self._task = None
