"""A log segment's files: ``<base offset>.log`` (batches) and ``<base offset>.index`` (offset index).

The ``.log`` file is a sequence of entries, one per ``RecordBatch`` the log appended, each
framed like a Kafka v2 batch header (``DefaultRecordBatch``)::

    base offset   int64      the batch's first offset
    length        int32      bytes after this field
    leader epoch  int32      partitionLeaderEpoch
    magic         int8       2
    crc           uint32     CRC-32 of everything after this field (zlib's, not Kafka's CRC-32C)
    body                     count int32, size int32, append time int64 (ms since the Unix epoch:
                             the log's clock restarts at 0 with each process), the idempotent producer
                             fields, the values, ``raw``: the client's v2 record batch bytes, and,
                             when a producer batch is transactional or a marker, its transaction
                             fields (``_TXN``: isTransactional, control type, coordinator epoch)

so the batches a Kafka client sent are kept as bytes, and one entry is one ``write``. The
``.index`` file maps each entry to its byte position (relative offset int32, position int32;
Kafka's ``OffsetIndex`` is sparse, this one has an entry per batch). The index is derived: a
missing or inconsistent index is rebuilt from the ``.log`` on load (as Kafka rebuilds a
corrupt one).

``read_entries`` is Kafka's segment recovery (``LogSegment.recover``): it reads entries
while each is whole, CRC-valid and follows the previous one's offsets, and reports the byte
position where the valid part ends; everything after is a torn or corrupt tail.
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Iterator

import attrs

from minibroker.broker.log import RecordBatch
from minibroker.broker.producer_state import ProducerBatch

MAGIC = 2
#: base offset, length (the part of the header before what ``length`` counts)
_PREFIX = struct.Struct(">qi")
#: leader epoch, magic, crc
_HEADER = struct.Struct(">ibI")
_BODY = struct.Struct(">iiq")
_PRODUCER = struct.Struct(">qhiiii")
#: a producer batch's transactional flag, control type (-1: data) and coordinator epoch; entries of data
#: that is neither transactional nor a marker leave them out (and so read as written before they existed)
_TXN = struct.Struct(">bbi")
_INDEX = struct.Struct(">ii")
#: the smallest entry: header, body, three counts
MIN_ENTRY = _PREFIX.size + _HEADER.size + _BODY.size + 12
#: the largest entry accepted on load (a length past it is corruption, not a batch)
MAX_ENTRY = 1 << 30


def log_name(base_offset: int) -> str:
    return f"{base_offset:020d}.log"


def index_name(base_offset: int) -> str:
    return f"{base_offset:020d}.index"


def encode(batch: RecordBatch, origin_ms: int = 0) -> bytes:
    """``batch`` as one entry of a ``.log`` file; ``origin_ms``: the wall-clock time of the log's time 0."""
    parts = [
        _BODY.pack(batch.count, batch.size, origin_ms + batch.append_time_ms),
        struct.pack(">i", len(batch.producers)),
    ]
    for p in batch.producers:
        parts.append(
            _PRODUCER.pack(p.producer_id, p.epoch, p.first_seq, p.last_seq, p.first_delta, p.last_delta)
        )
    if batch.values is None:
        parts.append(struct.pack(">i", -1))
    else:
        parts.append(struct.pack(">i", len(batch.values)))
        for value in batch.values:
            parts += [struct.pack(">i", len(value)), value]
    if batch.raw is None:
        parts.append(struct.pack(">i", -1))
    else:
        parts += [struct.pack(">i", len(batch.raw)), batch.raw]
    if any(p.transactional or p.control >= 0 for p in batch.producers):
        parts.append(struct.pack(">i", len(batch.producers)))
        parts += [_TXN.pack(p.transactional, p.control, p.coordinator_epoch) for p in batch.producers]
    body = b"".join(parts)
    crc = zlib.crc32(body)
    length = _HEADER.size + len(body)
    return _PREFIX.pack(batch.base_offset, length) + _HEADER.pack(batch.leader_epoch, MAGIC, crc) + body


def index_entry(base_offset: int, segment_base: int, position: int) -> bytes:
    return _INDEX.pack(base_offset - segment_base, position)


def read_index(data: bytes, segment_base: int) -> list[tuple[int, int]]:
    """(offset, position) pairs of an ``.index`` file's whole entries."""
    whole = len(data) - len(data) % _INDEX.size
    return [(segment_base + rel, pos) for rel, pos in _INDEX.iter_unpack(data[:whole])]


class CorruptEntry(ValueError):
    """An entry that is not a whole, CRC-valid batch following the one before it."""


@attrs.frozen(slots=True)
class Scan:
    """What ``read_entries`` found: the valid batches, their positions, where validity ends, and why."""

    batches: tuple[RecordBatch, ...]
    positions: tuple[int, ...]
    valid_bytes: int
    problem: str | None


def read_entries(data: bytes, expected_offset: int | None = None, origin_ms: int = 0) -> Scan:
    """Every valid entry of a ``.log`` file's bytes, stopping at the first invalid one; append times are
    made relative to ``origin_ms`` (the wall-clock time of the reading log's time 0)."""
    batches: list[RecordBatch] = []
    positions: list[int] = []
    position = 0
    problem = None
    while position < len(data):
        try:
            batch, size = _decode(data, position, origin_ms)
        except CorruptEntry as error:
            problem = str(error)
            break
        if expected_offset is not None and batch.base_offset != expected_offset:
            problem = f"batch at offset {batch.base_offset} where {expected_offset} was expected"
            break
        batches.append(batch)
        positions.append(position)
        position += size
        expected_offset = batch.next_offset
    return Scan(tuple(batches), tuple(positions), position, problem)


def _decode(data: bytes, position: int, origin_ms: int) -> tuple[RecordBatch, int]:
    if len(data) - position < _PREFIX.size + _HEADER.size:
        raise CorruptEntry(f"{len(data) - position} bytes, less than a batch header")
    base_offset, length = _PREFIX.unpack_from(data, position)
    if not _HEADER.size <= length <= MAX_ENTRY:
        raise CorruptEntry(f"batch length {length} is impossible")
    end = position + _PREFIX.size + length
    if end > len(data):
        raise CorruptEntry(f"a batch of {length} bytes but only {len(data) - position - _PREFIX.size} remain")
    epoch, magic, crc = _HEADER.unpack_from(data, position + _PREFIX.size)
    if magic != MAGIC:
        raise CorruptEntry(f"magic {magic}, expected {MAGIC}")
    body = memoryview(data)[position + _PREFIX.size + _HEADER.size : end]
    if zlib.crc32(body) != crc:
        raise CorruptEntry(f"CRC mismatch in the batch at offset {base_offset}")
    try:
        return _body(base_offset, epoch, bytes(body), origin_ms), end - position
    except (struct.error, ValueError) as error:
        raise CorruptEntry(f"the batch at offset {base_offset} does not parse: {error}") from None


def _body(base_offset: int, epoch: int, body: bytes, origin_ms: int) -> RecordBatch:
    count, size, append_ms = _BODY.unpack_from(body, 0)
    at = _BODY.size
    if count < 1 or size < 0 or base_offset < 0:
        raise ValueError(f"count {count}, size {size}")
    (n,) = struct.unpack_from(">i", body, at)
    at += 4
    producers = []
    for _ in range(n):
        producers.append(ProducerBatch(*_PRODUCER.unpack_from(body, at)))
        at += _PRODUCER.size
    values: list[bytes] | None = None
    (n,) = struct.unpack_from(">i", body, at)
    at += 4
    if n >= 0:
        values = []
        for _ in range(n):
            value, at = _sized(body, at)
            values.append(value)
    (n,) = struct.unpack_from(">i", body, at)
    raw = None
    if n >= 0:
        raw, at = _sized(body, at)
    else:
        at += 4
    if at < len(body):
        (n,) = struct.unpack_from(">i", body, at)
        if n != len(producers):
            raise ValueError(f"transaction fields of {n} producer batches, not {len(producers)}")
        at += 4
        for i in range(n):
            transactional, control, coordinator_epoch = _TXN.unpack_from(body, at)
            at += _TXN.size
            producers[i] = attrs.evolve(
                producers[i],
                transactional=bool(transactional),
                control=control,
                coordinator_epoch=coordinator_epoch,
            )
    if at != len(body):
        raise ValueError(f"{len(body) - at} bytes left over")
    return RecordBatch(
        base_offset,
        count,
        size,
        epoch,
        append_ms - origin_ms,
        None if values is None else tuple(values),
        raw,
        tuple(producers),
    )


def _sized(body: bytes, at: int) -> tuple[bytes, int]:
    (n,) = struct.unpack_from(">i", body, at)
    at += 4
    if n < 0 or at + n > len(body):
        raise ValueError(f"a field of {n} bytes past the end")
    return body[at : at + n], at + n


def entries(scan: Scan) -> Iterator[tuple[RecordBatch, int]]:
    return zip(scan.batches, scan.positions, strict=True)
