"""DelayedProduce: an acks=-1 produce waiting for the ISR to reach its offsets.

Kafka's class: https://github.com/apache/kafka/blob/trunk/server/src/main/java/org/apache/kafka/server/purgatory/DelayedProduce.java
(docs/kafka-model.md, "3. DelayedProduce and DelayedFetch").

Each partition that appended without error starts *pending* with its error
preset to REQUEST_TIMED_OUT; partitions that failed keep their error and are
not pending. ``try_complete`` asks each pending partition whether the HW has
reached ``required_offset`` (= last appended offset + 1):

- not hosted here any more, or no longer leader -> NOT_LEADER_OR_FOLLOWER (cause "leadership");
- HW reached and the maximal ISR >= effective min ISR -> NONE;
- HW reached but the maximal ISR shrank below it -> NOT_ENOUGH_REPLICAS_AFTER_APPEND;
- otherwise keep waiting.

When no partition is pending the operation completes. On timeout ``on_complete``
answers with the statuses as they stand, so still-pending partitions report
REQUEST_TIMED_OUT, and ``on_expiration`` counts them (ExpiresPerSec per partition).
"""

from __future__ import annotations

from collections.abc import Callable

import attrs

from minibroker.broker.delayed_partitions_operation import DelayedPartitionsOperation
from minibroker.broker.partition import Partition
from minibroker.common.errors import Errors
from minibroker.common.messages import PartitionProduceResponse, ProduceResponse, TopicPartition


@attrs.define(slots=True)
class ProducePartitionStatus:
    """One partition of a delayed produce: the offset it needs, the append's answer, and its error so far."""

    required_offset: int
    response: PartitionProduceResponse
    acks_pending: bool = False
    error: Errors | None = None  # while waiting: REQUEST_TIMED_OUT, what a timeout answers


class DelayedProduce(DelayedPartitionsOperation):
    """Completes when every partition's HW reaches its required offset, or on timeout."""

    __slots__ = ()

    #: its check reads the partitions' state only: watching it changes nothing the check sees
    recheck_after_watch = False

    def __init__(
        self,
        delay_ms: int,
        statuses: dict[TopicPartition, ProducePartitionStatus],
        lookup: Callable[[TopicPartition], Partition | None],
        respond: Callable[[ProduceResponse], object],
        op_id: str | None = None,
    ) -> None:
        super().__init__(delay_ms, statuses, lookup, respond, op_id, lambda status: status.response.error)

    def try_complete(self) -> bool:
        leadership = False
        lookup = self.lookup
        for tp, status in self.statuses.items():
            if not status.acks_pending:
                continue
            partition = lookup(tp)
            if partition is None:
                enough, error = False, Errors.NOT_LEADER_OR_FOLLOWER
            elif (
                partition.leader_id == partition.broker_id
                and partition.log.high_watermark < status.required_offset
            ):
                continue  # still the leader, HW not there yet (check_enough_replicas_reach_offset's wait)
            else:
                enough, error = partition.check_enough_replicas_reach_offset(status.required_offset)
            if error is not Errors.NONE or enough:
                self.settle(status, error)
                leadership = leadership or error is Errors.NOT_LEADER_OR_FOLLOWER
        if self._pending:
            return False
        if leadership and self.cause is None:
            self.cause = "leadership"
        return self.force_complete()

    def on_complete(self) -> None:
        responses = {}
        for tp, status in self.statuses.items():
            response = status.response
            if status.error is not response.error:
                response = PartitionProduceResponse(
                    status.error, response.base_offset, response.log_append_time_ms, response.log_start_offset
                )
            responses[tp] = response
        self.respond(ProduceResponse(responses, self.cause or "condition"))
