"""The header contract of a delayed message, and its records in Kafka's format v2.

Any Kafka client sends a delayed message by producing it to a level's topic
(``__delay_30s``) with these record headers (values are UTF-8 text):

- ``delay.real.topic`` (required): the topic to deliver to;
- ``delay.real.partition`` (optional, a decimal number): the partition to deliver
  to; without it the record's key picks one (Kafka's murmur2 partitioner), and
  with no key either, the message id does;
- ``delay.due.ms`` (optional, epoch milliseconds): when to deliver; without it,
  the record's timestamp plus the level's delay;
- ``delay.message.id`` (optional): a unique id; without it ``<topic>-<partition>@<offset>``
  of the level record.

The key, the value and every other header are delivered unchanged; the
delivered record also carries ``delay.message.id`` and ``delay.due.ms`` so a
consumer can deduplicate and see how late it was. Records are built and read
with kafka-python's v2 codec, so the emulator's own producers, the wire front
end and real clients write the same bytes.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

import attrs

from minibroker.common.record_batch import build_batch, records

# kafka-python is imported on first use: a scenario without delayed messages does not load it

REAL_TOPIC = "delay.real.topic"
REAL_PARTITION = "delay.real.partition"
DUE_MS = "delay.due.ms"
MESSAGE_ID = "delay.message.id"
_ROUTING = frozenset((REAL_TOPIC, REAL_PARTITION, DUE_MS, MESSAGE_ID))


def murmur2(data: bytes) -> int:
    """Kafka's murmur2 hash (its default partitioner's)."""
    from kafka.partitioner.default import murmur2 as kafka_murmur2

    return kafka_murmur2(data)


@attrs.frozen(slots=True)
class DelayedMessage:
    """One delayed message; ``due_ms`` and ``timestamp_ms`` on the records' (epoch) time scale."""

    message_id: str
    real_topic: str
    real_partition: int | None
    due_ms: int
    timestamp_ms: int
    key: bytes | None = None
    value: bytes | None = None
    #: the application's own headers, delivered unchanged
    headers: tuple[tuple[str, bytes], ...] = ()

    def partition_in(self, partitions: int) -> int:
        """The real partition: the header's, else murmur2 of the key, else of the message id."""
        if self.real_partition is not None:
            return self.real_partition
        basis = self.key if self.key is not None else self.message_id.encode()
        return (murmur2(basis) & 0x7FFFFFFF) % partitions


def encode_delayed(messages: Iterable[DelayedMessage]) -> bytes:
    """The level records for ``messages``: every routing header written out."""
    records = []
    for m in messages:
        headers = [(REAL_TOPIC, m.real_topic.encode()), (DUE_MS, str(m.due_ms).encode())]
        if m.real_partition is not None:
            headers.append((REAL_PARTITION, str(m.real_partition).encode()))
        headers.append((MESSAGE_ID, m.message_id.encode()))
        records.append((m.timestamp_ms, m.key, m.value, headers + list(m.headers)))
    return build_batch(records)


def encode_forward(messages: Iterable[DelayedMessage], now_ms: int) -> bytes:
    """The records delivered to the real topic, stamped ``now_ms``: the message id and due time added."""
    return build_batch(
        (
            now_ms,
            m.key,
            m.value,
            [*m.headers, (MESSAGE_ID, m.message_id.encode()), (DUE_MS, str(m.due_ms).encode())],
        )
        for m in messages
    )


def decode_delayed(
    raw: bytes, base_offset: int, label: str, level_ms: int
) -> Iterator[tuple[int, DelayedMessage | str]]:
    """(offset, message) per record of a level batch written at ``base_offset``; a record that breaks
    the contract gives (offset, reason) instead."""
    for i, record in enumerate(records(raw)):
        offset = base_offset + i
        found = {name: value for name, value in record.headers if name in _ROUTING and value is not None}
        try:
            real_topic = found[REAL_TOPIC].decode()
            partition = found.get(REAL_PARTITION)
            real_partition = int(partition) if partition is not None else None
            due = found.get(DUE_MS)
            due_ms = int(due) if due is not None else record.timestamp + level_ms
            message_id = found[MESSAGE_ID].decode() if MESSAGE_ID in found else f"{label}@{offset}"
        except KeyError:
            yield offset, f"offset {offset}: no {REAL_TOPIC} header"
            continue
        except (ValueError, UnicodeDecodeError) as error:
            yield offset, f"offset {offset}: a delay header is not UTF-8 text or a number ({error})"
            continue
        if real_partition is not None and real_partition < 0:
            yield offset, f"offset {offset}: {REAL_PARTITION} is negative"
            continue
        other = tuple((name, value) for name, value in record.headers if name not in _ROUTING)
        yield (
            offset,
            DelayedMessage(
                message_id,
                real_topic,
                real_partition,
                due_ms,
                record.timestamp,
                record.key,
                record.value,
                other,
            ),
        )
