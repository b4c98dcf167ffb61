"""LogCleanerManager: which part of a compacted log may be cleaned now, and which log is the filthiest.

Kafka's ``LogCleanerManager`` and ``LogToClean``
(https://github.com/apache/kafka/blob/trunk/core/src/main/scala/kafka/log/LogCleanerManager.scala):

- the *first dirty offset* is the cleaner's checkpoint for the log (where its last cleaning ended),
  or the log start offset when there is none or it lies outside the log;
- the *first uncleanable offset* is the least of the last stable offset, the base offset of the
  active segment (never cleaned), and, with ``min.compaction.lag.ms``, the base offset of the first
  dirty segment holding a record appended less than that long ago; it is then moved down to the
  base offset of the segment holding it, so only whole segments are cleaned;
- the *cleanable ratio* is the bytes of the segments from the first dirty offset to the first
  uncleanable one over those bytes plus the bytes of the segments below the first dirty offset;
- a log *must* be cleaned when the first record of its earliest dirty non-active segment was
  appended more than ``max.compaction.lag.ms`` ago (Kafka skips appends stamped 0 here, as it skips
  batches without a timestamp);
- a log is cleanable when it has bytes and either its ratio is above ``min.cleanable.dirty.ratio`` or
  it must be cleaned and has cleanable bytes. The filthiest (highest ratio; on a tie the first
  partition in order) is cleaned first.

Times are append times in virtual ms (the batches' ``append_time_ms``), where Kafka reads the
records' timestamps.
"""

from __future__ import annotations

from collections.abc import Iterable

import attrs

from minibroker.broker.log import Log, Segment
from minibroker.broker.log_config import LogConfig
from minibroker.common.messages import TopicPartition


@attrs.frozen
class LogToClean:
    """One log's cleanable range: ``[first_dirty_offset, first_uncleanable_offset)`` and its bytes."""

    tp: TopicPartition
    first_dirty_offset: int
    first_uncleanable_offset: int
    clean_bytes: int
    cleanable_bytes: int
    need_compaction_now: bool

    @property
    def total_bytes(self) -> int:
        return self.clean_bytes + self.cleanable_bytes

    @property
    def cleanable_ratio(self) -> float:
        return self.cleanable_bytes / self.total_bytes if self.total_bytes else 0.0


def first_dirty_offset(log: Log) -> int:
    checkpoint = log.cleaner_checkpoint
    if checkpoint is None or not log.log_start_offset <= checkpoint <= log.log_end_offset:
        return log.log_start_offset
    return checkpoint


def _segments_from(log: Log, offset: int) -> list[Segment]:
    """The non-active segments from the one holding ``offset`` on (Kafka's nonActiveLogSegmentsFrom)."""
    index = max(
        0, next((i for i, s in enumerate(log.segments) if s.base_offset > offset), len(log.segments)) - 1
    )
    return log.segments[index:-1]


def cleanable(tp: TopicPartition, log: Log, config: LogConfig, now: int) -> LogToClean:
    """Kafka's ``cleanableOffsets``, ``calculateCleanableBytes`` and ``maxCompactionDelay`` for ``log``."""
    dirty = first_dirty_offset(log)
    bounds = [log.last_stable_offset, log.segments[-1].base_offset]
    dirty_segments = _segments_from(log, dirty)
    if config.min_compaction_lag_ms > 0:
        recent = next(
            (
                s
                for s in dirty_segments
                if max((b.append_time_ms for b in s.batches), default=-1) > now - config.min_compaction_lag_ms
            ),
            None,
        )
        if recent is not None:
            bounds.append(recent.base_offset)
    uncleanable = max(dirty, min(bounds))
    holding = _segments_from(log, uncleanable)
    first_uncleanable = (holding[0] if holding else log.segments[-1]).base_offset
    start = min(dirty, first_uncleanable)
    ends = [s.base_offset for s in log.segments[1:]] + [log.log_end_offset]
    cleanable_bytes = sum(
        s.size
        for s, end in zip(log.segments, ends, strict=True)
        if s.base_offset < first_uncleanable and end > start
    )
    clean_bytes = sum(s.size for s in log.segments if s.base_offset < dirty)
    firsts = [s.batches[0].append_time_ms for s in dirty_segments if s.batches]
    earliest = min((t for t in firsts if t > 0), default=None)
    need_now = earliest is not None and earliest < now - config.max_compaction_lag_ms
    return LogToClean(tp, dirty, first_uncleanable, clean_bytes, cleanable_bytes, need_now)


def grab_filthiest(
    candidates: Iterable[tuple[TopicPartition, Log, LogConfig]], now: int
) -> LogToClean | None:
    """Kafka's ``grabFilthiestCompactedLog``: the cleanable log with the highest ratio, or None."""
    best: LogToClean | None = None
    for tp, log, config in sorted(candidates, key=lambda c: c[0]):
        if not config.compact:
            continue
        ltc = cleanable(tp, log, config, now)
        if ltc.total_bytes <= 0:
            continue
        ready = (
            ltc.need_compaction_now and ltc.cleanable_bytes > 0
        ) or ltc.cleanable_ratio > config.min_cleanable_ratio
        if ready and (best is None or ltc.cleanable_ratio > best.cleanable_ratio):
            best = ltc
    return best
