"""DelayedShareFetch: a ShareFetch with nothing to acquire, parked until records can be acquired.

Kafka's class: https://github.com/apache/kafka/blob/trunk/core/src/main/java/kafka/server/share/DelayedShareFetch.java
It waits in the broker's ShareFetch purgatory (its own, beside Produce, Fetch and DeleteRecords), watched on
two keys per partition, as Kafka's: ``DelayedShareFetchGroupKey`` (group, partition), checked when a lock
expires or records are released or acknowledged, and ``DelayedShareFetchPartitionKey`` (partition), checked
when the partition's high watermark rises. It completes, exactly once, when a partition can acquire at least
one record, when a partition is no longer led here (its answer carries NOT_LEADER_OR_FOLLOWER), or at
``max_wait_ms``; ``on_complete`` then acquires what it can and answers, perhaps with nothing.
"""

from __future__ import annotations

from collections.abc import Callable

import attrs

from minibroker.common.messages import TopicPartition
from minibroker.purgatory import DelayedOperation


@attrs.frozen(slots=True)
class DelayedShareFetchGroupKey:
    group_id: str
    topic: str
    partition: int

    def __str__(self) -> str:
        return f"{self.group_id}-{self.topic}-{self.partition}"


@attrs.frozen(slots=True)
class DelayedShareFetchPartitionKey:
    topic: str
    partition: int

    def __str__(self) -> str:
        return f"{self.topic}-{self.partition}"


def watch_keys(group_id: str, partitions: list[TopicPartition]) -> list[object]:
    """Both keys of every partition, group keys first."""
    keys: list[object] = [DelayedShareFetchGroupKey(group_id, tp.topic, tp.partition) for tp in partitions]
    keys.extend(DelayedShareFetchPartitionKey(tp.topic, tp.partition) for tp in partitions)
    return keys


class DelayedShareFetch(DelayedOperation):
    """``ready()``: can a partition acquire (or has one failed)? ``complete(cause)`` acquires and answers."""

    __slots__ = ("ready", "complete")

    def __init__(
        self,
        max_wait_ms: int,
        ready: Callable[[], bool],
        complete: Callable[[str], object],
        op_id: str | None = None,
    ) -> None:
        super().__init__(max_wait_ms, op_id)
        self.ready = ready
        self.complete = complete

    def try_complete(self) -> bool:
        if self.ready():
            return self.force_complete()
        return False

    def on_complete(self) -> None:
        self.complete(self.cause or "condition")

    def on_expiration(self) -> None:
        """Nothing more: ``on_complete`` already answered with what could be acquired."""
