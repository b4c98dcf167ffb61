"""Which ``__consumer_offsets`` partition holds a group: Kafka's own arithmetic.

``partition_for(group_id, n) = Utils.abs(group_id.hashCode()) % n`` where
``hashCode`` is Java's ``String.hashCode`` (``s[0]*31^(k-1) + ... + s[k-1]`` over
the UTF-16 code units, wrapping at 32 bits) and ``Utils.abs`` maps
``Integer.MIN_VALUE`` to 0 (``Math.abs`` would leave it negative). So a group
lands on the same partition number as on a real Kafka cluster.
"""

from __future__ import annotations

OFFSETS_TOPIC = "__consumer_offsets"

_INT_MIN = -(2**31)


def java_string_hash(text: str) -> int:
    """Java's ``String.hashCode``: a signed 32-bit int over the UTF-16 code units."""
    h = 0
    data = text.encode("utf-16-be")
    for i in range(0, len(data), 2):
        h = (31 * h + ((data[i] << 8) | data[i + 1])) & 0xFFFFFFFF
    return h - 2**32 if h >= 2**31 else h


def kafka_abs(n: int) -> int:
    """Kafka's ``Utils.abs``: ``Math.abs`` except that ``Integer.MIN_VALUE`` maps to 0."""
    return 0 if n == _INT_MIN else abs(n)


def partition_for(group_id: str, partitions: int) -> int:
    """The ``__consumer_offsets`` partition of ``group_id`` among ``partitions``."""
    return kafka_abs(java_string_hash(group_id)) % partitions
