"""Record batches: CRC-checked on produce, renumbered without breaking their CRC on fetch."""

from __future__ import annotations

import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kafka.record.default_records import DefaultRecordBatch
from kafka.record.memory_records import MemoryRecords, MemoryRecordsBuilder

from minibroker.common.errors import Errors
from minibroker.common.record_batch import RecordBatch
from minibroker.server.records import (
    InvalidRecords,
    encode_batches,
    offset_for_timestamp,
    rewrite,
    synthesize,
    validate_records,
)


def batch(values: list[bytes], timestamp: int = 1_700_000_000_000, compression: int = 0) -> bytes:
    builder = MemoryRecordsBuilder(magic=2, compression_type=compression, batch_size=1 << 20)
    for i, value in enumerate(values):
        builder.append(timestamp=timestamp + i, key=None, value=value)
    builder.close()
    return bytes(builder.buffer())


def read_back(raw: bytes) -> list[tuple[int, int, bytes]]:
    """(offset, leader epoch, value) of every record, each batch's CRC checked."""
    out = []
    records = MemoryRecords(raw)
    while (b := records.next_batch()) is not None:
        assert b.validate_crc()
        out += [(r.offset, b.leader_epoch, r.value) for r in b]
    return out


def test_a_valid_produce_is_counted_and_kept_byte_for_byte():
    raw = batch([b"a", b"bb", b"ccc"]) + batch([b"d"])
    produced = validate_records(raw)
    assert (produced.count, produced.batches, produced.raw) == (4, 2, raw)


def test_no_records_is_an_empty_append():
    assert validate_records(None).count == 0
    assert validate_records(b"").count == 0


@pytest.mark.parametrize(
    ("damage", "reason"),
    [
        (lambda raw: raw[:-1], "has length"),
        (lambda raw: raw[:30], "less than a batch header"),
        (lambda raw: raw[:16] + b"\x01" + raw[17:], "has magic 1, not 2"),
        (lambda raw: raw[:-1] + bytes([raw[-1] ^ 1]), "fails its CRC32C check"),
        (lambda raw: raw + b"\x00" * 5, "less than a batch header"),
    ],
)
def test_damaged_batches_are_corrupt_message(damage, reason):
    with pytest.raises(InvalidRecords, match=reason) as failure:
        validate_records(damage(batch([b"value"])))
    assert failure.value.error is Errors.CORRUPT_MESSAGE


def test_a_record_count_that_disagrees_with_last_offset_delta_is_corrupt():
    raw = bytearray(batch([b"a", b"b"]))
    struct.pack_into(">i", raw, 57, 3)  # recordsCount is inside the CRC: recompute it to isolate the check
    from kafka.record.util import calc_crc32c

    struct.pack_into(">I", raw, 17, calc_crc32c(memoryview(raw)[21:]))
    with pytest.raises(InvalidRecords, match="3 records but lastOffsetDelta 1"):
        validate_records(bytes(raw))


@settings(max_examples=300, deadline=None)
@given(st.integers(min_value=17), st.integers(1, 255))
def test_any_change_from_the_crc_on_is_caught(position, flip):
    raw = bytearray(batch([b"alpha", b"beta", b"gamma"]))
    raw[17 + position % (len(raw) - 17)] ^= flip
    with pytest.raises(InvalidRecords):
        validate_records(bytes(raw))


@given(st.integers(0, 2**40), st.integers(0, 2**31 - 1))
def test_rewrite_numbers_every_inner_batch_and_keeps_crcs(base, epoch):
    raw = batch([b"a", b"b"]) + batch([b"c"]) + batch([b"d", b"e", b"f"])
    out = rewrite(raw, base, epoch)
    assert read_back(bytes(out)) == [
        (base + i, epoch, v) for i, v in enumerate([b"a", b"b", b"c", b"d", b"e", b"f"])
    ]
    assert validate_records(bytes(out)).count == 6


def test_compressed_batches_pass_through():
    raw = batch([b"x" * 100] * 10, compression=1)  # gzip
    assert DefaultRecordBatch(raw).compression_type == 1
    assert validate_records(raw).count == 10
    assert [v for _, _, v in read_back(bytes(rewrite(raw, 40, 2)))] == [b"x" * 100] * 10


def test_batches_without_bytes_are_built_as_valid_v2_batches():
    with_values = RecordBatch(5, 2, 20, 1, append_time_ms=250, values=(b"one", b"two"))
    sized = RecordBatch(7, 3, 300, 1, append_time_ms=300)
    data = encode_batches([with_values, sized], epoch_origin_ms=1_000_000)
    records = read_back(data)
    assert [(o, e) for o, e, _ in records] == [(5, 1), (6, 1), (7, 1), (8, 1), (9, 1)]
    assert [v for _, _, v in records[:2]] == [b"one", b"two"]
    assert all(len(v) == 92 for _, _, v in records[2:])
    inner = DefaultRecordBatch(synthesize(with_values, 1_000_000))
    assert inner.max_timestamp == 1_000_250


def test_offset_for_timestamp_finds_the_first_record_at_or_after():
    raw = batch([b"a", b"b", b"c"], timestamp=1000)  # stamped 1000, 1001, 1002
    batches = [RecordBatch(10, 3, len(raw), 0, raw=raw), RecordBatch(13, 1, 50, 0, append_time_ms=500)]
    assert offset_for_timestamp(batches, 1001, epoch_origin_ms=2000) == (1001, 11)
    assert offset_for_timestamp(batches, 1003, epoch_origin_ms=2000) == (2500, 13)
    assert offset_for_timestamp(batches, 9999, epoch_origin_ms=2000) is None
