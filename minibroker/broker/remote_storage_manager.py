"""RemoteStorageManager: the emulated remote tier of tiered storage (KIP-405), held in memory.

Kafka reaches its remote tier through two plugins: a ``RemoteStorageManager`` that holds the
copied segments' data and a ``RemoteLogMetadataManager`` that lists them
(https://github.com/apache/kafka/blob/trunk/storage/api/src/main/java/org/apache/kafka/server/log/remote/storage/RemoteStorageManager.java).
minibroker keeps both in this one object, shared by every broker of a cluster (the tier is outside
the brokers, as an object store is): per partition, the copied segments in offset order, each a
``RemoteLogSegmentMetadata`` with its batches.

How long a copy or a read takes, and whether it fails, is the broker's side
(``remote_log_manager``): the tier itself answers at once.

Invariants: a partition's segments are contiguous and increasing (each starts right after the
previous one ends); a segment is never changed once copied.
"""

from __future__ import annotations

import bisect

import attrs

from minibroker.common.messages import TopicPartition
from minibroker.common.record_batch import RecordBatch


@attrs.frozen(slots=True)
class RemoteLogSegmentMetadata:
    """One copied segment: offsets ``[start_offset, end_offset]``, its size and newest append time."""

    tp: TopicPartition
    start_offset: int
    end_offset: int
    max_timestamp_ms: int
    size: int
    batches: tuple[RecordBatch, ...] = attrs.field(repr=False, eq=False)


class RemoteStorageManager:
    """The remote tier's segments, per partition."""

    def __init__(self) -> None:
        self.segments: dict[TopicPartition, list[RemoteLogSegmentMetadata]] = {}

    def copy_log_segment(
        self, tp: TopicPartition, batches: tuple[RecordBatch, ...]
    ) -> RemoteLogSegmentMetadata:
        """Store a closed segment's batches; they must start right after what the tier holds."""
        if not batches:
            raise ValueError("an empty segment is not copied")
        held = self.segments.setdefault(tp, [])
        if held and batches[0].base_offset != held[-1].end_offset + 1:
            raise ValueError(
                f"{tp}: segment at {batches[0].base_offset} does not follow remote end {held[-1].end_offset}"
            )
        metadata = RemoteLogSegmentMetadata(
            tp,
            batches[0].base_offset,
            batches[-1].next_offset - 1,
            max(batch.append_time_ms for batch in batches),
            sum(batch.size for batch in batches),
            batches,
        )
        held.append(metadata)
        return metadata

    def highest_offset(self, tp: TopicPartition) -> int:
        """The last offset the tier holds for ``tp`` (-1: none)."""
        held = self.segments.get(tp)
        return held[-1].end_offset if held else -1

    def segment_for(self, tp: TopicPartition, offset: int) -> RemoteLogSegmentMetadata | None:
        """The segment holding ``offset``, or None."""
        held = self.segments.get(tp, [])
        i = bisect.bisect_right([s.start_offset for s in held], offset) - 1
        if i < 0 or held[i].end_offset < offset:
            return None
        return held[i]

    def fetch_log_segment(
        self, segment: RemoteLogSegmentMetadata, offset: int, max_bytes: int
    ) -> tuple[RecordBatch, ...]:
        """Batches of ``segment`` from the one holding ``offset``, within ``max_bytes`` (the first always)."""
        out: list[RecordBatch] = []
        size = 0
        for batch in segment.batches:
            if batch.next_offset <= offset:
                continue
            if out and size + batch.size > max_bytes:
                break
            out.append(batch)
            size += batch.size
        return tuple(out)

    def find_offset_by_timestamp(
        self, tp: TopicPartition, target_ms: int, start_offset: int
    ) -> tuple[int, int, int] | None:
        """(append time, offset, leader epoch) of the first batch from ``start_offset`` stamped
        ``target_ms`` or later."""
        for segment in self.segments.get(tp, []):
            if segment.end_offset < start_offset or segment.max_timestamp_ms < target_ms:
                continue
            for batch in segment.batches:
                if batch.next_offset > start_offset and batch.append_time_ms >= target_ms:
                    return batch.append_time_ms, max(batch.base_offset, start_offset), batch.leader_epoch
        return None

    def delete_partition(self, tp: TopicPartition) -> None:
        """Forget a deleted topic partition's segments."""
        self.segments.pop(tp, None)
