"""DelayedDeleteRecords: a DeleteRecords waiting for the low watermark to reach its offsets.

Kafka's ``DelayedDeleteRecords``. The leader moved its own log start offset at
once; the request completes when every replica has followed, i.e. when the
partition's *low watermark* (the least log start offset over the leader and the
followers on live brokers, as their fetches report it) reaches the offset asked
for. Each partition that was accepted starts *pending* with its error preset to
REQUEST_TIMED_OUT (what a timeout answers); partitions that failed keep their
error. ``try_complete`` asks each pending partition:

- no longer hosted here -> UNKNOWN_TOPIC_OR_PARTITION, low watermark -1;
- hosted but not led here -> NOT_LEADER_OR_FOLLOWER, low watermark -1;
- low watermark >= the requested offset -> NONE with that low watermark;
- otherwise keep waiting.

Its purgatory is ``DeleteRecords`` (``delete.records.purgatory.purge.interval.requests``,
default 1), on the broker's one timer like Produce and Fetch.
"""

from __future__ import annotations

from collections.abc import Callable

import attrs

from minibroker.broker.delayed_partitions_operation import DelayedPartitionsOperation
from minibroker.broker.partition import Partition
from minibroker.common.errors import Errors
from minibroker.common.messages import (
    DeleteRecordsResponse,
    PartitionDeleteRecordsResponse,
    TopicPartition,
)


@attrs.define(slots=True)
class DeleteRecordsPartitionStatus:
    """One partition: the offset it needs, and its answer so far."""

    required_offset: int
    error: Errors
    low_watermark: int = -1
    acks_pending: bool = False


class DelayedDeleteRecords(DelayedPartitionsOperation):
    """Completes when every partition's low watermark reaches its required offset, or on timeout."""

    __slots__ = ()

    def __init__(
        self,
        delay_ms: int,
        statuses: dict[TopicPartition, DeleteRecordsPartitionStatus],
        lookup: Callable[[TopicPartition], Partition | None],
        respond: Callable[[DeleteRecordsResponse], object],
        op_id: str | None = None,
    ) -> None:
        super().__init__(delay_ms, statuses, lookup, respond, op_id, lambda status: status.error)

    def try_complete(self) -> bool:
        for tp, status in self.statuses.items():
            if not status.acks_pending:
                continue
            partition = self.lookup(tp)
            if partition is None:
                reached, error, low = False, Errors.UNKNOWN_TOPIC_OR_PARTITION, -1
            elif not partition.is_leader:
                reached, error, low = False, Errors.NOT_LEADER_OR_FOLLOWER, -1
            else:
                low = partition.low_watermark()
                reached, error = low >= status.required_offset, Errors.NONE
            if error is not Errors.NONE or reached:
                status.low_watermark = low
                self.settle(status, error)
        if self._pending:
            return False
        return self.force_complete()

    def on_complete(self) -> None:
        responses = {
            tp: PartitionDeleteRecordsResponse(status.error, status.low_watermark)
            for tp, status in self.statuses.items()
        }
        self.respond(DeleteRecordsResponse(responses, self.cause or "condition"))
