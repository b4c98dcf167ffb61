"""Watch keys. Any hashable value can key a purgatory; these are Kafka's common ones."""

from __future__ import annotations

import attrs


@attrs.frozen(slots=True)
class TopicPartitionOperationKey:
    """Kafka's key for produce, fetch and delete-records operations on one partition."""

    topic: str
    partition: int

    def key_label(self) -> str:
        return f"{self.topic}-{self.partition}"

    def __str__(self) -> str:
        return self.key_label()
