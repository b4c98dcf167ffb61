"""Log: offsets, segments and positions, reads, truncation, the leader epoch cache."""

import pytest

from minibroker.broker.log import Log, LogOffsetMetadata


def filled(segment_bytes=250, batches=6, count=2, size=100, epoch=0) -> Log:
    log = Log(segment_bytes)
    for _ in range(batches):
        log.append_as_leader(count, size, epoch, 0)
    return log


def test_offsets_are_dense_and_segments_roll():
    log = filled()
    assert log.log_end_offset == 12
    assert [s.base_offset for s in log.segments] == [0, 4, 8]
    assert [s.size for s in log.segments] == [200, 200, 200]


def test_offset_metadata_positions():
    log = filled()
    assert log.offset_metadata(5) == LogOffsetMetadata(5, 4, 0)
    assert log.offset_metadata(6) == LogOffsetMetadata(6, 4, 100)
    assert log.offset_metadata(12) == LogOffsetMetadata(12, 8, 200)  # the end of the log
    assert LogOffsetMetadata(5, 4, 0).on_older_segment(LogOffsetMetadata(12, 8, 200))
    assert LogOffsetMetadata(8, 8, 0).on_same_segment(LogOffsetMetadata(12, 8, 200))
    assert LogOffsetMetadata(12, 8, 200).position_diff(LogOffsetMetadata(8, 8, 0)) == 200
    assert not LogOffsetMetadata(500).on_older_segment(LogOffsetMetadata(450, 0, 10))
    assert not LogOffsetMetadata(500).on_same_segment(LogOffsetMetadata(450, 0, 10))


def test_read_respects_max_bytes_but_returns_at_least_one_batch():
    log = filled()
    assert [b.base_offset for b in log.read(0, 250).batches] == [0, 2]
    assert [b.base_offset for b in log.read(3, 150).batches] == [2]  # starts inside batch 2
    assert [b.base_offset for b in log.read(0, 1).batches] == [0]  # KIP-74
    assert log.read(4, 10_000, max_offset=8).records == 4
    assert log.read(12, 100).batches == ()
    assert log.read(0, 10_000).size == 600


def test_truncate_drops_whole_batches_and_caps_hw():
    log = filled()
    log.maybe_increment_high_watermark(10)
    assert log.truncate_to(7) == 6  # the batch [6, 8) goes entirely
    assert (log.log_end_offset, log.high_watermark) == (6, 6)
    assert [s.base_offset for s in log.segments] == [0, 4]
    log.append_as_leader(1, 10, 0, 0)
    assert log.log_end_offset == 7


def test_high_watermark_only_rises_and_never_passes_the_leo():
    log = filled(batches=1)
    assert log.maybe_increment_high_watermark(1) is True
    assert log.maybe_increment_high_watermark(1) is False
    assert log.maybe_increment_high_watermark(0) is False
    with pytest.raises(ValueError):
        log.maybe_increment_high_watermark(3)
    log.set_high_watermark(99)
    assert log.high_watermark == 2


def test_leader_epoch_cache_and_end_offsets():
    log = Log()
    log.append_as_leader(5, 50, 0, 0)
    log.record_epoch_start(2)
    log.append_as_leader(5, 50, 2, 0)
    assert log.epochs == [(0, 0), (2, 5)]
    assert log.end_offset_for_epoch(0) == (0, 5)
    assert log.end_offset_for_epoch(1) == (0, 5)
    assert log.end_offset_for_epoch(2) == (2, 10)
    assert log.end_offset_for_epoch(-1) == (-1, -1)
    log.truncate_to(5)
    assert log.epochs == [(0, 0)]


def test_append_must_continue_at_the_leo():
    log = filled(batches=1)
    with pytest.raises(ValueError, match="LEO is 2"):
        log.append(log.batches()[0])
