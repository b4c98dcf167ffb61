"""The produce path of a ReplicaManager: leader appends and the Produce purgatory.

``ProducePath`` is a mixin of ``ReplicaManager`` (it uses the manager's partitions,
purgatories, tracer and pushed errors). Triggers after an append, as in Kafka's ``ReplicaManager``
(docs/kafka-model.md, "4. Replication: high watermark and ISR"):
an append that raised the HW checks the produce, fetch and delete-records
purgatories; one that only moved the LEO checks the fetch purgatory. They run
after the request's own DelayedProduce is registered (KAFKA-8334).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from minibroker.broker.delayed_produce import DelayedProduce, ProducePartitionStatus
from minibroker.broker.partition import PartitionError
from minibroker.common.errors import Errors
from minibroker.common.messages import (
    PartitionProduceResponse,
    ProduceRequest,
    ProduceResponse,
    TopicPartition,
)

if TYPE_CHECKING:
    from minibroker.broker.replica_manager import ReplicaManager


class ProducePath:
    """``append_records``: answer now, or park a DelayedProduce (acks=-1)."""

    def append_records(
        self: ReplicaManager, request: ProduceRequest, respond: Callable[[Any], None] | None
    ) -> None:
        """Append to the leader logs; answer now, or park a DelayedProduce (acks=-1)."""
        now = self.now()
        tracing = self.tracer.enabled
        if tracing:
            self.emit(
                "produce.request",
                op=request.request_id,
                keys=[str(tp) for tp in request.data],
                acks=request.acks,
                timeout_ms=request.timeout_ms,
            )
        if request.acks not in (-1, 0, 1):
            responses = {tp: PartitionProduceResponse(Errors.INVALID_REQUIRED_ACKS) for tp in request.data}
            self._respond_produce(request, respond, ProduceResponse(responses))
            return
        statuses: dict[TopicPartition, ProducePartitionStatus] = {}
        request_error = self.pushed_errors.take("produce", None)
        hw_raised: list[TopicPartition] = []
        leo_moved: list[TopicPartition] = []
        duplicates: list[TopicPartition] = []  # retried idempotent batches: answered, not appended
        for tp, data in request.data.items():
            partition = self.partitions.get(tp)
            try:
                if partition is None:
                    raise PartitionError(self._lookup_error(tp))
                pushed = request_error or self.pushed_errors.take("produce", tp)
                if pushed is not None:
                    raise PartitionError(pushed, "pushed by a test")
                batch, raised, duplicate = partition.append_records_to_leader(
                    data.count, data.size, request.acks, now, data.values, data.raw, data.producers
                )
            except PartitionError as failure:
                statuses[tp] = ProducePartitionStatus(-1, PartitionProduceResponse(failure.error))
                if tracing:
                    self.emit(
                        "append.rejected", partition=str(tp), error=failure.error.name, op=request.request_id
                    )
                continue
            log = partition.log
            statuses[tp] = ProducePartitionStatus(
                batch.next_offset,
                PartitionProduceResponse(Errors.NONE, batch.base_offset, -1, log.log_start_offset),
            )
            if duplicate:
                duplicates.append(tp)
                if tracing:
                    self.emit(
                        "append.duplicate", partition=str(tp), op=request.request_id, offset=batch.base_offset
                    )
                continue
            (hw_raised if raised else leo_moved).append(tp)
            if tracing:
                self.emit(
                    "append",
                    partition=str(tp),
                    op=request.request_id,
                    offset=batch.base_offset,
                    count=batch.count,
                    bytes=batch.size,
                    leo=log.log_end_offset,
                    hw=log.high_watermark,
                )
        if request.acks == -1 and (hw_raised or leo_moved or duplicates):  # appended or already there
            operation = DelayedProduce(
                request.timeout_ms,
                statuses,
                self.partition,
                lambda response: self._respond_produce(request, respond, response),
                op_id=request.request_id or None,
            )
            self.produce_purgatory.try_complete_else_watch(operation, list(request.data))
        else:
            responses = {tp: status.response for tp, status in statuses.items()}
            self._respond_produce(request, respond, ProduceResponse(responses))
        for tp in hw_raised:
            self.produce_purgatory.check_and_complete(tp)
            self.fetch_purgatory.check_and_complete(tp)
            self.delete_records_purgatory.check_and_complete(tp)
        for tp in leo_moved:
            self.fetch_purgatory.check_and_complete(tp)

    def _respond_produce(
        self: ReplicaManager,
        request: ProduceRequest,
        respond: Callable[[Any], None] | None,
        response: ProduceResponse,
    ) -> None:
        if self.tracer.enabled:
            for tp, part in response.partitions.items():
                self.emit(
                    "produce.response",
                    op=request.request_id,
                    partition=str(tp),
                    error=part.error.name,
                    offset=part.base_offset,
                    cause=response.cause,
                )
        if request.acks != 0 and respond is not None:
            respond(response)
