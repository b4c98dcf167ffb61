"""Record batches (Kafka's message format v2) between the wire and the emulated log.

Produce: a partition's ``records`` are one or more v2 batches back to back.
``validate_records`` checks each one with kafka-python's ``DefaultRecordBatch``
(length within the bytes, magic 2, CRC32C over attributes..end, a record count
that matches ``lastOffsetDelta + 1``) and returns the record count and the
bytes, unchanged. A bad batch rejects the partition with CORRUPT_MESSAGE
(Kafka's ``CorruptRecordException``); nothing of it is appended.

Compression, with the codes Kafka's produce path ends with (nothing is stored):

- codec ids 5-7 name no codec. Kafka's ``CompressionType.forId`` throws an
  ``IllegalArgumentException`` that no handler maps, so the answer is
  UNKNOWN_SERVER_ERROR: for the partition from Produce v7 on, and for every
  partition of the request before v7, where ``ProduceRequest.validateRecords``
  reads the codec while checking for zstd (``WholeRequest``);
- zstd before Produce v7: UNSUPPORTED_COMPRESSION_TYPE (that same check);
- codecs 1-4 whose bytes do not decompress (``compression.py``): Kafka's
  decompressing iterator wraps the codec's ``IOException`` in a
  ``KafkaException``, again UNKNOWN_SERVER_ERROR;
- decompressed records that do not parse, or whose number is not the batch's
  count: INVALID_RECORD (Kafka's ``InvalidRecordException`` from the record
  iterator);
- our own bound: a batch that decompresses past ``socket.request.max.bytes``:
  RECORD_TOO_LARGE (Kafka would try to hold it all).

Both of Kafka's codes are non-retriable for clients, so a producer fails the
batch instead of resending it. Uncompressed batches are not parsed record by
record (the CRC guards them; parsing every record in Python would cost the
throughput the benchmarks show).

Fetch: the log keeps a produce's bytes as one ``RecordBatch`` (``raw``) whose
``base_offset`` the leader assigned. ``encode_batches`` writes each inner
batch's baseOffset (bytes 0-8) and partitionLeaderEpoch (bytes 12-16): both lie
outside the CRC, so the batches stay valid. Batches written without bytes (by
scenario steps or minibroker's own clients) are built here as valid v2 batches
of ``count`` records, timestamped at their append time on the wall clock.

Idempotence: the producer id, epoch and sequence range of each batch an
idempotent producer wrote go with the records (``ProducedRecords.producers``)
to the leader, which deduplicates and checks them (``broker.producer_state``);
a transactional batch (isTransactional) opens its producer's transaction on the
partition. A control batch from a client is INVALID_RECORD: only the transaction
coordinator writes markers.

Not done (say so to users): compressed batches are kept as sent (checked,
not recompressed).
"""

from __future__ import annotations

import struct
from collections.abc import Iterator, Sequence

import attrs
from kafka.errors import CorruptRecordError
from kafka.record.default_records import DefaultRecordBatch, DefaultRecordBatchBuilder

from minibroker.broker.producer_state import NO_PRODUCER_ID, ProducerBatch, last_sequence
from minibroker.common.errors import Errors
from minibroker.common.record_batch import RecordBatch
from minibroker.server.compression import (
    CODEC_NAMES,
    ZSTD,
    DecompressedTooLarge,
    DecompressionError,
    decompress,
)

#: baseOffset .. recordsCount: the fixed part of a v2 batch
HEADER_SIZE = DefaultRecordBatch.HEADER_STRUCT.size
#: the batch length counts the bytes after baseOffset and the length itself
LOG_OVERHEAD = 12
_BASE_OFFSET = struct.Struct(">q")
_LENGTH = struct.Struct(">i")
_EPOCH = struct.Struct(">i")
_EPOCH_AT = 12
_MAGIC_AT = 16
_LAST_DELTA = struct.Struct(">i")
_LAST_DELTA_AT = 23
_COUNT = struct.Struct(">i")
_COUNT_AT = 57
ATTRIBUTES = struct.Struct(">h")
ATTRIBUTES_AT = 21
CODEC_MASK = 0x07
#: the first Produce version that may carry zstd (KIP-110)
ZSTD_FROM_PRODUCE_VERSION = 7
#: what a batch may decompress to when no other bound is given
DEFAULT_DECOMPRESSED_LIMIT = 104_857_600


class InvalidRecords(Exception):
    """A partition's records cannot be appended; ``error`` is what the producer is told."""

    def __init__(self, error: Errors, reason: str) -> None:
        super().__init__(reason)
        self.error = error


class WholeRequest(InvalidRecords):
    """Records that fail the whole Produce request, every partition with ``error`` (Kafka before v7)."""


@attrs.frozen
class ProducedRecords:
    """Validated records of one partition: ``count`` records in ``batches`` v2 batches."""

    count: int
    batches: int
    raw: bytes = attrs.field(repr=False)
    #: the producer fields of the batches an idempotent producer wrote (checked by the leader)
    producers: tuple[ProducerBatch, ...] = ()


def inner_batches(raw: bytes) -> Iterator[tuple[int, int]]:
    """(start, end) of each batch in ``raw``; raises ``InvalidRecords`` if the lengths do not tile it."""
    pos = 0
    size = len(raw)
    while pos < size:
        if size - pos < HEADER_SIZE:
            raise InvalidRecords(
                Errors.CORRUPT_MESSAGE, f"{size - pos} bytes left at {pos}, less than a batch header"
            )
        (length,) = _LENGTH.unpack_from(raw, pos + 8)
        end = pos + LOG_OVERHEAD + length
        if length < HEADER_SIZE - LOG_OVERHEAD or end > size:
            raise InvalidRecords(
                Errors.CORRUPT_MESSAGE, f"batch at {pos} has length {length}, {size - pos} bytes remain"
            )
        yield pos, end
        pos = end


def validate_records(
    raw: bytes | None,
    produce_version: int = ZSTD_FROM_PRODUCE_VERSION,
    decompressed_limit: int = DEFAULT_DECOMPRESSED_LIMIT,
) -> ProducedRecords:
    """Check every batch of a produce's partition data; return its record count and bytes."""
    if not raw:
        return ProducedRecords(0, 0, b"")
    raw = bytes(raw)
    count = 0
    batches = 0
    producers: list[ProducerBatch] = []
    for start, end in inner_batches(raw):
        magic = raw[start + _MAGIC_AT]
        if magic != 2:
            raise InvalidRecords(Errors.CORRUPT_MESSAGE, f"batch at {start} has magic {magic}, not 2")
        batch = DefaultRecordBatch(raw[start:end])
        if not batch.validate_crc():
            raise InvalidRecords(Errors.CORRUPT_MESSAGE, f"batch at {start} fails its CRC32C check")
        records = batch.records_count
        if records < 1 or batch.last_offset_delta != records - 1:
            raise InvalidRecords(
                Errors.CORRUPT_MESSAGE,
                f"batch at {start} has {records} records but lastOffsetDelta {batch.last_offset_delta}",
            )
        if batch.is_control_batch:  # only a transaction coordinator writes markers (Kafka's LogValidator)
            raise InvalidRecords(Errors.INVALID_RECORD, f"batch at {start} is a control batch")
        codec = batch.attributes & CODEC_MASK
        if codec:
            _check_compressed(raw[start:end], start, codec, produce_version, decompressed_limit)
        if batch.producer_id != NO_PRODUCER_ID:
            first = batch.base_sequence
            producers.append(
                ProducerBatch(
                    batch.producer_id,
                    batch.producer_epoch,
                    first,
                    last_sequence(first, batch.last_offset_delta),
                    count,
                    count + records - 1,
                    batch.is_transactional,
                )
            )
        count += records
        batches += 1
    return ProducedRecords(count, batches, raw, tuple(producers))


def _check_compressed(raw: bytes, start: int, codec: int, produce_version: int, limit: int) -> None:
    """Decompress the batch's records and parse them all (Kafka's LogValidator does as much)."""
    where = f"batch at {start}"
    if codec not in CODEC_NAMES:
        reason = f"{where} names compression codec {codec}; Kafka's codecs are 0-4"
        if produce_version < ZSTD_FROM_PRODUCE_VERSION:
            raise WholeRequest(Errors.UNKNOWN_SERVER_ERROR, reason)
        raise InvalidRecords(Errors.UNKNOWN_SERVER_ERROR, reason)
    name = CODEC_NAMES[codec]
    if codec == ZSTD and produce_version < ZSTD_FROM_PRODUCE_VERSION:
        raise InvalidRecords(
            Errors.UNSUPPORTED_COMPRESSION_TYPE,
            f"{where} uses zstd, which Produce v{produce_version} may not carry (v7+)",
        )
    try:
        records = decompress(codec, raw[HEADER_SIZE:], limit)
    except DecompressionError as error:
        raise InvalidRecords(
            Errors.UNKNOWN_SERVER_ERROR, f"{where}: its {name} bytes do not decompress ({error})"
        ) from None
    except DecompressedTooLarge as error:
        raise InvalidRecords(Errors.RECORD_TOO_LARGE, f"{where}: its {name} bytes {error}") from None
    plain = bytearray(raw[:HEADER_SIZE]) + records
    (attributes,) = ATTRIBUTES.unpack_from(plain, ATTRIBUTES_AT)
    ATTRIBUTES.pack_into(plain, ATTRIBUTES_AT, attributes & ~CODEC_MASK)
    try:
        for _ in DefaultRecordBatch(bytes(plain)):
            pass
    except (CorruptRecordError, UnicodeDecodeError) as error:  # a header key must be UTF-8 to be read back
        reason = f"{where}: its {name} records do not parse ({error})"
        raise InvalidRecords(Errors.INVALID_RECORD, reason) from None


def rewrite(raw: bytes, base_offset: int, leader_epoch: int) -> bytearray:
    """``raw``'s batches renumbered from ``base_offset``, stamped with ``leader_epoch`` (CRCs untouched)."""
    out = bytearray(raw)
    _stamp(out, 0, raw, base_offset, leader_epoch)
    return out


def _stamp(out: bytearray, at: int, raw: bytes, base_offset: int, leader_epoch: int) -> None:
    """Renumber and stamp, in place, the copy of ``raw``'s batches that starts at ``at`` in ``out``."""
    offset = base_offset
    for start, _ in inner_batches(raw):
        _BASE_OFFSET.pack_into(out, at + start, offset)
        _EPOCH.pack_into(out, at + start + _EPOCH_AT, leader_epoch)
        (last_delta,) = _LAST_DELTA.unpack_from(raw, start + _LAST_DELTA_AT)
        offset += last_delta + 1


def synthesize(batch: RecordBatch, epoch_origin_ms: int) -> bytes:
    """A v2 batch standing for ``batch`` (records with its values, or zero bytes making up its size)."""
    builder = DefaultRecordBatchBuilder(
        magic=2,
        compression_type=0,
        is_transactional=False,
        producer_id=-1,
        producer_epoch=-1,
        base_sequence=-1,
        batch_size=2**31 - 1,
    )
    timestamp = epoch_origin_ms + batch.append_time_ms
    filler = bytes(max(0, batch.size // max(1, batch.count) - 8))
    for i in range(batch.count):
        value = batch.values[i] if batch.values and i < len(batch.values) else filler
        builder.append(i, timestamp=timestamp, key=None, value=value, headers=[])
    return bytes(builder.build())


def encode_batches(batches: Sequence[RecordBatch], epoch_origin_ms: int) -> bytes | bytearray:
    """The ``records`` of a fetch response: every batch as v2 bytes, at its offsets and epoch.

    The stored bytes are copied once, into the response's buffer, and stamped there."""
    raws = [batch.raw if batch.raw is not None else synthesize(batch, epoch_origin_ms) for batch in batches]
    out = bytearray(sum(len(raw) for raw in raws))
    at = 0
    for batch, raw in zip(batches, raws, strict=True):
        out[at : at + len(raw)] = raw
        _stamp(out, at, raw, batch.base_offset, batch.leader_epoch)
        at += len(raw)
    return out


def offset_for_timestamp(
    batches: Sequence[RecordBatch], target_ms: int, epoch_origin_ms: int
) -> tuple[int, int] | None:
    """ListOffsets by time: (timestamp, offset) of the first record stamped at or after ``target_ms``."""
    for batch in batches:
        if batch.raw is None:
            timestamp = epoch_origin_ms + batch.append_time_ms
            if timestamp >= target_ms:
                return timestamp, batch.base_offset
            continue
        raw = rewrite(batch.raw, batch.base_offset, batch.leader_epoch)
        for start, end in inner_batches(batch.raw):
            inner = DefaultRecordBatch(raw[start:end])
            if inner.max_timestamp < target_ms:
                continue
            try:
                for record in inner:
                    if record.timestamp >= target_ms:
                        return record.timestamp, record.offset
            except Exception:  # a codec kafka-python lacks: answer at batch granularity
                return inner.max_timestamp, inner.base_offset
    return None


def max_timestamp_offset(batches: Sequence[RecordBatch], epoch_origin_ms: int) -> tuple[int, int, int] | None:
    """ListOffsets MAX_TIMESTAMP (-3): (timestamp, offset, leader epoch) of the first record stamped latest.

    As Kafka's ``UnifiedLog.fetchOffsetByTimestamp``: the first batch whose max timestamp is the
    highest, and in it the first record at that timestamp (``offsetOfMaxTimestamp``).
    """
    best: tuple[int, int, int] | None = None
    for batch in batches:
        if batch.raw is None:
            timestamp = epoch_origin_ms + batch.append_time_ms
            if best is None or timestamp > best[0]:
                best = (timestamp, batch.base_offset, batch.leader_epoch)
            continue
        raw = rewrite(batch.raw, batch.base_offset, batch.leader_epoch)
        for start, end in inner_batches(batch.raw):
            inner = DefaultRecordBatch(raw[start:end])
            if best is not None and inner.max_timestamp <= best[0]:
                continue
            offset = inner.base_offset
            if inner.timestamp_type == 0:  # CreateTime: the first record at the max timestamp
                try:
                    offset = next(r.offset for r in inner if r.timestamp == inner.max_timestamp)
                except (StopIteration, Exception):  # a codec kafka-python lacks: the batch's first offset
                    offset = inner.base_offset
            best = (inner.max_timestamp, offset, batch.leader_epoch)
    return best
