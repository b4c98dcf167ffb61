"""Kafka's v2 record batches, built and read with kafka-python's codec (imported on first use).

Pure helpers shared by the delayed_messages and retry packages and by standalone services: importing
this module loads neither the emulator nor kafka-python.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator


def build_batch(records: Iterable[tuple[int, bytes | None, bytes | None, list[tuple[str, bytes]]]]) -> bytes:
    """One v2 batch of (timestamp, key, value, headers) records."""
    from kafka.record.default_records import DefaultRecordBatchBuilder

    # magic 2, no compression, not transactional, no producer id/epoch/sequence, no size limit
    builder = DefaultRecordBatchBuilder(2, 0, False, -1, -1, -1, 2**31 - 1)
    for i, (timestamp, key, value, headers) in enumerate(records):
        builder.append(i, timestamp=timestamp, key=key, value=value, headers=headers)
    return bytes(builder.build())


def records(raw: bytes) -> Iterator:
    """Every record of the v2 batches in ``raw``, in order (kafka-python record objects)."""
    from kafka.record.memory_records import MemoryRecords

    batches = MemoryRecords(raw)
    while (batch := batches.next_batch()) is not None:
        yield from batch
