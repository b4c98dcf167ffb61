"""Record batches: what a log holds and a Produce or Fetch carries, and Kafka's v2 format.

``RecordBatch`` is one batch as the emulator stores it (offsets, size, leader epoch, the records or
the raw v2 bytes a client sent), with the idempotent producer fields of its v2 batches
(``ProducerBatch``); Kafka's ``org.apache.kafka.common.record.RecordBatch``. ``build_batch`` and
``records`` build and read v2 bytes with kafka-python's codec, imported on first use: importing this
module loads neither the emulator nor kafka-python.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable, Iterator

import attrs

#: Kafka's ControlRecordType codes, the key of a transaction marker's one record
ABORT_MARKER = 0
COMMIT_MARKER = 1


@attrs.frozen(slots=True)
class ProducerBatch:
    """The producer fields of one v2 batch inside a ``RecordBatch``.

    ``first_delta``/``last_delta``: its first and last record's offsets relative to the
    ``RecordBatch``'s base offset (a Produce may carry several batches for one partition).
    ``transactional``: the batch belongs to a transaction (isTransactional); ``control``: a
    transaction marker's type (``ABORT_MARKER`` or ``COMMIT_MARKER``), -1 for data;
    ``coordinator_epoch``: a marker's transaction coordinator epoch (the leader epoch of its
    ``__transaction_state`` partition), -1 for data.
    """

    producer_id: int
    epoch: int
    first_seq: int
    last_seq: int
    first_delta: int = 0
    last_delta: int = 0
    transactional: bool = False
    control: int = -1
    coordinator_epoch: int = -1


@attrs.frozen(slots=True)
class RecordBatch:
    """``count`` records written by the leader of ``leader_epoch``; ``size`` bytes on disk.

    ``raw`` holds the producer's record batch bytes (Kafka's v2 format) when the records came
    over the wire; replication copies this object, so every replica holds the same bytes.
    ``producers``: the idempotent producer fields of its v2 batches (none for plain batches).
    """

    base_offset: int
    count: int
    size: int
    leader_epoch: int
    append_time_ms: int = 0
    values: tuple[bytes, ...] | None = None
    raw: bytes | None = attrs.field(default=None, repr=False)
    producers: tuple[ProducerBatch, ...] = attrs.field(default=(), repr=False)

    @property
    def last_offset(self) -> int:
        return self.base_offset + self.count - 1

    @property
    def next_offset(self) -> int:
        return self.base_offset + self.count


def build_batch(records: Iterable[tuple[int, bytes | None, bytes | None, list[tuple[str, bytes]]]]) -> bytes:
    """One v2 batch of (timestamp, key, value, headers) records."""
    from kafka.record.default_records import DefaultRecordBatchBuilder

    # magic 2, no compression, not transactional, no producer id/epoch/sequence, no size limit
    builder = DefaultRecordBatchBuilder(2, 0, False, -1, -1, -1, 2**31 - 1)
    for i, (timestamp, key, value, headers) in enumerate(records):
        builder.append(i, timestamp=timestamp, key=key, value=value, headers=headers)
    return bytes(builder.build())


def build_control_batch(
    producer_id: int, epoch: int, marker: int, coordinator_epoch: int, timestamp_ms: int
) -> bytes:
    """A transaction marker: one v2 control batch (isTransactional, isControl) of one record.

    Kafka's ``EndTransactionMarker``: key = version 0 and the ControlRecordType (``marker``),
    value = version 0 and the coordinator epoch.
    """
    from kafka.record.default_records import DefaultRecordBatch, DefaultRecordBatchBuilder
    from kafka.record.util import calc_crc32c

    builder = DefaultRecordBatchBuilder(2, 0, True, producer_id, epoch, -1, 2**31 - 1)
    key = struct.pack(">hh", 0, marker)
    value = struct.pack(">hi", 0, coordinator_epoch)
    builder.append(0, timestamp=timestamp_ms, key=key, value=value, headers=[])
    out = bytearray(builder.build())
    at = DefaultRecordBatch.ATTRIBUTES_OFFSET
    (attributes,) = struct.unpack_from(">h", out, at)
    struct.pack_into(">h", out, at, attributes | DefaultRecordBatch.CONTROL_MASK)
    struct.pack_into(">I", out, DefaultRecordBatch.CRC_OFFSET, calc_crc32c(bytes(out[at:])))
    return bytes(out)


def records(raw: bytes) -> Iterator:
    """Every record of the v2 batches in ``raw``, in order (kafka-python record objects)."""
    from kafka.record.memory_records import MemoryRecords

    batches = MemoryRecords(raw)
    while (batch := batches.next_batch()) is not None:
        yield from batch
