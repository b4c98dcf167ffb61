"""Log: one replica's copy of a partition, as record batches in segments.

Offsets are dense as appended: a batch of ``count`` records starting at ``base_offset``
occupies ``[base_offset, base_offset + count)``; the log cleaner (``log_cleaner``) may leave
holes between batches, never moving a record to another offset. Segments roll when the active
one would exceed ``segment_bytes``, or when a batch arrives more than ``segment_ms`` after the
active segment's first one (Kafka's ``segment.ms``, at the batch's append time); a position is
(segment base offset, byte position in segment), Kafka's ``LogOffsetMetadata``, which is what
DelayedFetch compares to tell "same segment" from "older segment".

- log start offset: the first offset still held (0 until DeleteRecords, or the leader's
  log start offset replicated to a follower, moves it up; never above the HW on a leader);
- local log start offset: the first offset held in this log's own segments. It equals the log
  start offset unless tiered storage (KIP-405) deleted local segments already copied to the remote
  tier; the offsets between the two are read from there. ``log start <= local log start <= LEO``;
- highest offset in remote storage: the last offset the remote tier holds (-1: none);
- log end offset (LEO): the next offset to be written;
- high watermark (HW): the first offset not yet known to be replicated to the
  ISR; consumers read below it. ``0 <= HW <= LEO`` always.
- last stable offset (LSO): the first offset of the earliest open transaction, or the
  HW when it is lower or none is open; READ_COMMITTED consumers read below it.
  ``LSO <= HW`` always.

Each log keeps its producers' last batches (``producer_state``), updated on every
append and rebuilt on truncation, so every replica can deduplicate once it leads.

The leader epoch cache records the first offset of each leader epoch (Kafka's
``LeaderEpochFileCache``), so a follower can find where its log diverges.

The log is held in memory; a ``LogStore`` (``store``), when one is attached, is told of every
change as it happens, so the same log can also be kept in files (``minibroker.sim.storage``
writes segments, indexes and checkpoints and loads them back). Without one nothing else happens.
"""

from __future__ import annotations

import bisect
from collections.abc import Callable, Sequence
from typing import Protocol

import attrs

from minibroker.broker.producer_state import ProducerStateManager
from minibroker.common.record_batch import ProducerBatch, RecordBatch


@attrs.frozen(slots=True, order=True)
class LogOffsetMetadata:
    """An offset and, when known, where it lies: segment base offset and byte position.

    ``segment_base_offset`` is -1 when only the message offset is known (Kafka's
    UNKNOWN_OFFSET_METADATA); such a position is on no segment.
    """

    message_offset: int
    segment_base_offset: int = -1
    relative_position: int = 0

    @property
    def message_offset_only(self) -> bool:
        return self.segment_base_offset < 0

    def on_older_segment(self, other: LogOffsetMetadata) -> bool:
        """True when this position lies on an earlier segment than ``other``."""
        if self.message_offset_only or other.message_offset_only:
            return False
        return self.segment_base_offset < other.segment_base_offset

    def on_same_segment(self, other: LogOffsetMetadata) -> bool:
        if self.message_offset_only or other.message_offset_only:
            return False
        return self.segment_base_offset == other.segment_base_offset

    def position_diff(self, other: LogOffsetMetadata) -> int:
        """Bytes from ``other`` to this position, both on the same segment."""
        return self.relative_position - other.relative_position


@attrs.define(slots=True)
class Segment:
    """Batches from ``base_offset`` on; ``size`` bytes so far."""

    base_offset: int
    batches: list[RecordBatch] = attrs.Factory(list)
    bases: list[int] = attrs.Factory(list)  # base offset of each batch, for bisect
    positions: list[int] = attrs.Factory(list)  # byte position of each batch
    size: int = 0

    def push(self, batch: RecordBatch) -> None:
        self.bases.append(batch.base_offset)
        self.positions.append(self.size)
        self.batches.append(batch)
        self.size += batch.size

    def pop(self) -> RecordBatch:
        batch = self.batches.pop()
        self.bases.pop()
        self.positions.pop()
        self.size -= batch.size
        return batch


def _total_size(info: FetchDataInfo) -> int:
    return sum(batch.size for batch in info.batches)


@attrs.frozen(slots=True)
class FetchDataInfo:
    """What a read returned: where it started, the batches (possibly none) and their total ``size``."""

    fetch_offset_metadata: LogOffsetMetadata
    batches: tuple[RecordBatch, ...]
    #: the batches' bytes (the read counts them as it goes; computed when not given)
    size: int = attrs.field(default=attrs.Factory(_total_size, takes_self=True))

    @property
    def records(self) -> int:
        return sum(batch.count for batch in self.batches)


class LogStore(Protocol):
    """Where a log's changes go besides memory; each call follows the change it names."""

    def appended(self, log: Log, batch: RecordBatch) -> None: ...

    def truncated(self, log: Log) -> None:
        """The log end offset went down (``truncate_to``) or the log was emptied at a new start."""

    def start_offset_moved(self, log: Log) -> None: ...

    def epochs_changed(self, log: Log) -> None: ...


class Log:
    """A replica's log: segments of batches, LEO, HW, log start offset, leader epoch cache."""

    def __init__(self, segment_bytes: int = 1_073_741_824, segment_ms: int = 2**63 - 1) -> None:
        if segment_bytes < 1 or segment_ms < 1:
            raise ValueError("segment_bytes and segment_ms must be >= 1")
        self.segment_bytes = segment_bytes
        self.segment_ms = segment_ms
        self.segments: list[Segment] = [Segment(0)]
        self.segment_bases: list[int] = [0]
        self.log_start_offset = 0
        self.log_end_offset = 0
        self.high_watermark = 0
        self.epochs: list[tuple[int, int]] = []  # (leader epoch, start offset), both increasing
        self.producer_state = ProducerStateManager()
        #: the log's files, when it has any (``LogStore``); None keeps it in memory only
        self.store: LogStore | None = None
        #: tiered storage: the last offset copied to the remote tier (-1: none)
        self.highest_offset_in_remote_storage = -1
        #: the log cleaner's checkpoint: the first offset it has not cleaned (None: never cleaned)
        self.cleaner_checkpoint: int | None = None
        #: offset of a tombstone the cleaner kept -> when it may go (Kafka's deleteHorizonMs)
        self.delete_horizons: dict[int, int] = {}
        #: called after the active segment rolled (the log cleaner may have work)
        self.on_roll: Callable[[], None] | None = None
        #: the last position ``offset_metadata`` made at or past the LEO, answered again while it is
        #: still where that offset lies (same offset, active segment and size)
        self._end_position = LogOffsetMetadata(0, 0, 0)

    # --- writing ---------------------------------------------------------------------------
    def append(self, batch: RecordBatch) -> None:
        """Append a batch at the LEO, or past it: a follower copying a compacted leader skips its holes."""
        if batch.base_offset < self.log_end_offset:
            raise ValueError(f"append at offset {batch.base_offset} but LEO is {self.log_end_offset}")
        if batch.count < 1 or batch.size < 0:
            raise ValueError("a batch holds at least one record and a non-negative size")
        segment = self.segments[-1]
        if segment.batches and (
            segment.size + batch.size > self.segment_bytes
            or batch.append_time_ms - segment.batches[0].append_time_ms > self.segment_ms
        ):
            segment = Segment(batch.base_offset)
            self.segments.append(segment)
            self.segment_bases.append(batch.base_offset)
            if self.on_roll is not None:
                self.on_roll()
        # Segment.push inlined: every replica's append passes here
        segment.bases.append(batch.base_offset)
        segment.positions.append(segment.size)
        segment.batches.append(batch)
        segment.size += batch.size
        self.log_end_offset = batch.base_offset + batch.count  # batch.next_offset
        if batch.producers:
            self.producer_state.record(batch.base_offset, batch.producers)
        if not self.epochs or batch.leader_epoch > self.epochs[-1][0]:
            self.epochs.append((batch.leader_epoch, batch.base_offset))
            if self.store is not None:
                self.store.epochs_changed(self)
        if self.store is not None:
            self.store.appended(self, batch)

    def append_as_leader(
        self,
        count: int,
        size: int,
        leader_epoch: int,
        now_ms: int,
        values=None,
        raw: bytes | None = None,
        producers: tuple[ProducerBatch, ...] = (),
    ) -> RecordBatch:
        """Assign offsets from the LEO and append; return the batch written."""
        batch = RecordBatch(self.log_end_offset, count, size, leader_epoch, now_ms, values, raw, producers)
        self.append(batch)
        return batch

    def truncate_to(self, offset: int) -> int:
        """Drop every record at ``offset`` or above; return how many records were removed.

        Batches are atomic: truncating inside a batch drops the whole batch. The leader epoch
        cache loses every epoch starting at or past the new end, even when no record goes:
        a broker that led an epoch without writing to it holds an entry at its LEO that a
        new leader's log does not have (Kafka's ``truncateTo`` does the same), and keeping
        it would make every fetch find the log diverging again.
        """
        if offset >= self.log_end_offset:
            kept = [(epoch, start) for epoch, start in self.epochs if start < self.log_end_offset]
            if kept != self.epochs:
                self.epochs = kept
                if self.store is not None:
                    self.store.epochs_changed(self)
            return 0
        offset = max(offset, self.log_start_offset)
        while len(self.segments) > 1 and self.segments[-1].base_offset >= offset:
            self.segments.pop()
            self.segment_bases.pop()
        segment = self.segments[-1]
        while segment.batches and segment.batches[-1].next_offset > offset:
            offset = min(offset, segment.pop().base_offset)
        removed = self.log_end_offset - offset
        self.log_end_offset = offset
        self.high_watermark = min(self.high_watermark, offset)
        self.epochs = [(epoch, start) for epoch, start in self.epochs if start < offset]
        self.delete_horizons = {at: ms for at, ms in self.delete_horizons.items() if at < offset}
        if removed and len(self.producer_state):
            self.producer_state.rebuild((b.base_offset, b.producers) for b in self.batches() if b.producers)
        if self.store is not None:
            self.store.truncated(self)
            self.store.epochs_changed(self)
        return removed

    def maybe_increment_log_start_offset(self, offset: int) -> bool:
        """Move the log start offset up to ``offset`` (never down); True if it moved.

        Records below it are no longer readable; segments that lie wholly below it are
        dropped (Kafka deletes them in the background; here at once). The caller checks
        ``offset`` against the HW (a leader) or takes it from its leader (a follower).
        """
        if offset <= self.log_start_offset:
            return False
        self.log_start_offset = offset
        while len(self.segments) > 1 and self.segments[1].base_offset <= offset:
            self.segments.pop(0)
            self.segment_bases.pop(0)
        if self.store is not None:
            self.store.start_offset_moved(self)
        return True

    @property
    def local_log_start_offset(self) -> int:
        """The first offset this log holds in its own segments (Kafka's ``localLogStartOffset``)."""
        return max(self.log_start_offset, self.segments[0].base_offset)

    def delete_local_segment(self) -> Segment:
        """Drop the oldest local segment (tiered storage's local retention); never the active one.

        The log start offset stays: the records now live only in the remote tier.
        """
        if len(self.segments) < 2:
            raise ValueError("the active segment is never deleted")
        self.segment_bases.pop(0)
        return self.segments.pop(0)

    def truncate_fully_and_start_at(self, offset: int) -> None:
        """Drop everything and start empty at ``offset`` (a follower behind its leader's log start)."""
        self.segments = [Segment(offset)]
        self.segment_bases = [offset]
        self.log_start_offset = offset
        self.log_end_offset = offset
        self.high_watermark = offset
        self.epochs = []
        self.producer_state.rebuild(())
        if self.store is not None:
            self.store.truncated(self)
            self.store.epochs_changed(self)

    def replace_segments(self, count: int, segments: list[Segment]) -> None:
        """Put ``segments`` (the cleaner's, same offsets with holes) in place of the first ``count``.

        The active segment is never among them; the log start and end offsets do not move.
        """
        if not 0 < count < len(self.segments):
            raise ValueError(f"can replace 1..{len(self.segments) - 1} segments, not {count}")
        self.segments[:count] = segments
        self.segment_bases = [segment.base_offset for segment in self.segments]

    # --- high watermark --------------------------------------------------------------------
    def maybe_increment_high_watermark(self, candidate: int) -> bool:
        """Raise the HW to ``candidate`` if higher; True if it rose. Above the LEO is an error."""
        if candidate > self.log_end_offset:
            raise ValueError(f"HW candidate {candidate} is above the LEO {self.log_end_offset}")
        if candidate > self.high_watermark:
            self.high_watermark = candidate
            return True
        return False

    @property
    def last_stable_offset(self) -> int:
        """Kafka's ``lastStableOffset``: min(first offset of the earliest open transaction, HW)."""
        first = self.producer_state.first_unstable_offset()
        return self.high_watermark if first is None else min(first, self.high_watermark)

    def set_high_watermark(self, offset: int) -> None:
        """Follower rule: the HW from the leader, capped at our own LEO."""
        self.high_watermark = max(0, min(offset, self.log_end_offset))

    # --- reading ---------------------------------------------------------------------------
    def offset_metadata(self, offset: int) -> LogOffsetMetadata:
        """Where ``offset`` lies: its segment and byte position (the end of the log included)."""
        if offset >= self.log_end_offset:
            segment = self.segments[-1]
            end = self._end_position
            if (
                end.message_offset == offset
                and end.relative_position == segment.size
                and end.segment_base_offset == segment.base_offset
            ):
                return end
            end = self._end_position = LogOffsetMetadata(offset, segment.base_offset, segment.size)
            return end
        segment = self.segments[self._segment_index(offset)]
        i = bisect.bisect_right(segment.bases, offset) - 1
        return LogOffsetMetadata(offset, segment.base_offset, segment.positions[i] if i >= 0 else 0)

    def _segment_index(self, offset: int) -> int:
        return max(0, bisect.bisect_right(self.segment_bases, offset) - 1)

    def read(self, offset: int, max_bytes: int, max_offset: int | None = None) -> FetchDataInfo:
        """Batches from ``offset`` up to ``max_offset`` (exclusive; default LEO), within ``max_bytes``.

        The first batch is returned even if it alone exceeds ``max_bytes`` (KIP-74), so a
        reader always progresses. A read starting inside a batch returns that whole batch.
        """
        limit = self.log_end_offset if max_offset is None else min(max_offset, self.log_end_offset)
        start = self.offset_metadata(offset)
        if offset >= limit:
            return FetchDataInfo(start, (), 0)
        out: list[RecordBatch] = []
        size = 0
        first = self._segment_index(offset)
        for segment in self.segments[first:]:
            skip = (
                max(0, bisect.bisect_right(segment.bases, offset) - 1)
                if segment is self.segments[first]
                else 0
            )
            for batch in segment.batches[skip:]:
                end = batch.base_offset + batch.count  # batch.next_offset
                if end <= offset:
                    continue
                if end > limit:
                    return FetchDataInfo(start, tuple(out), size)
                if out and size + batch.size > max_bytes:
                    return FetchDataInfo(start, tuple(out), size)
                out.append(batch)
                size += batch.size
        return FetchDataInfo(start, tuple(out), size)

    def batches(self) -> list[RecordBatch]:
        return [batch for segment in self.segments for batch in segment.batches]

    # --- leader epochs ---------------------------------------------------------------------
    def latest_epoch(self) -> int:
        return self.epochs[-1][0] if self.epochs else -1

    def end_offset_for_epoch(self, epoch: int) -> tuple[int, int]:
        """Kafka's OffsetsForLeaderEpoch: (largest epoch <= ``epoch``, its end offset); (-1, -1) if none."""
        epochs = self.epochs
        if epochs and epoch >= epochs[-1][0]:  # the latest epoch: it ends at the LEO
            return epochs[-1][0], self.log_end_offset
        starts = [e for e, _ in epochs]
        i = bisect.bisect_right(starts, epoch) - 1
        if i < 0:
            return -1, -1
        found = self.epochs[i][0]
        end = self.epochs[i + 1][1] if i + 1 < len(self.epochs) else self.log_end_offset
        return found, end

    def record_epoch_start(self, epoch: int) -> None:
        """A new leader records its epoch starting at its LEO (even before writing to it)."""
        if not self.epochs or epoch > self.epochs[-1][0]:
            self.epochs.append((epoch, self.log_end_offset))
            if self.store is not None:
                self.store.epochs_changed(self)

    def __repr__(self) -> str:
        return (
            f"Log(start={self.log_start_offset}, hw={self.high_watermark}, leo={self.log_end_offset}, "
            f"segments={len(self.segments)})"
        )


def total_size(batches: Sequence[RecordBatch]) -> int:
    return sum(batch.size for batch in batches)
