"""DelayedPartitionsOperation: a delayed operation that waits per partition (Produce, DeleteRecords).

Each partition's status starts *pending* when the broker accepted it (its error
preset to REQUEST_TIMED_OUT, what a timeout answers) and keeps its error when it
did not. Subclasses decide when a pending partition is done (``try_complete``,
calling ``settle``) and answer in ``on_complete``; on the timeout path the
partitions still pending are counted per key (Kafka's per-partition ExpiresPerSec).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from minibroker.broker.partition import Partition
from minibroker.common.errors import Errors
from minibroker.common.messages import TopicPartition
from minibroker.purgatory import DelayedOperation


class DelayedPartitionsOperation(DelayedOperation):
    """``statuses``: objects with ``acks_pending`` and ``error``; ``accepted(status)`` says which wait."""

    __slots__ = ("statuses", "lookup", "respond", "expired_partitions", "_pending")

    def __init__(
        self,
        delay_ms: int,
        statuses: dict[TopicPartition, Any],
        lookup: Callable[[TopicPartition], Partition | None],
        respond: Callable[[Any], object],
        op_id: str | None,
        accepted: Callable[[Any], Errors],
    ) -> None:
        super().__init__(delay_ms, op_id)
        self.statuses = statuses
        self.lookup = lookup
        self.respond = respond
        self.expired_partitions: list[TopicPartition] = []
        self._pending = 0
        for status in statuses.values():
            error = accepted(status)
            status.acks_pending = error is Errors.NONE
            status.error = Errors.REQUEST_TIMED_OUT if status.acks_pending else error
            self._pending += status.acks_pending

    def settle(self, status: Any, error: Errors) -> None:
        """A pending partition is done, with ``error`` (NONE when its condition held)."""
        status.acks_pending = False
        status.error = error
        self._pending -= 1

    def on_expiration(self) -> None:
        self.expired_partitions = [tp for tp, status in self.statuses.items() if status.acks_pending]
        self.count_expired(self.expired_partitions)
