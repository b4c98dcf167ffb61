"""The DeleteRecords path of a ReplicaManager (Kafka's ``ReplicaManager.deleteRecords``).

``DeleteRecordsPath`` is a mixin of ``ReplicaManager``. For each partition the
leader moves its own log start offset at once (``Partition.delete_records_on_leader``:
-1 means the HW; below -1 or above the HW is OFFSET_OUT_OF_RANGE; not led here is
NOT_LEADER_OR_FOLLOWER; unknown is UNKNOWN_TOPIC_OR_PARTITION; a topic whose
``cleanup.policy`` lacks ``delete`` is POLICY_VIOLATION, as Kafka). If any partition
was accepted a DelayedDeleteRecords is parked in the DeleteRecords purgatory until
the low watermark reaches every accepted offset or ``timeout_ms`` passes; if none
was, the answer goes out at once.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from minibroker.broker.delayed_delete_records import DelayedDeleteRecords, DeleteRecordsPartitionStatus
from minibroker.broker.partition import PartitionError
from minibroker.broker.topic_configs import deletes_records
from minibroker.common.errors import Errors
from minibroker.common.messages import (
    DeleteRecordsRequest,
    DeleteRecordsResponse,
    PartitionDeleteRecordsResponse,
)

if TYPE_CHECKING:
    from minibroker.broker.replica_manager import ReplicaManager


class DeleteRecordsPath:
    """``delete_records``: move log start offsets, then wait for the low watermark."""

    def delete_records(
        self: ReplicaManager, request: DeleteRecordsRequest, respond: Callable[[Any], None]
    ) -> None:
        tracing = self.tracer.enabled
        if tracing:
            self.emit(
                "delete_records.request",
                op=request.request_id,
                keys=[str(tp) for tp in request.offsets],
                offsets=list(request.offsets.values()),
                timeout_ms=request.timeout_ms,
            )
        statuses: dict = {}
        for tp, offset in request.offsets.items():
            partition = self.partitions.get(tp)
            try:
                if partition is None:
                    raise PartitionError(self._lookup_error(tp))
                if not deletes_records(self.topic_overrides(tp.topic)):
                    raise PartitionError(Errors.POLICY_VIOLATION, "cleanup.policy has no 'delete'")
                before = partition.log.log_start_offset
                required = partition.delete_records_on_leader(offset)
                statuses[tp] = DeleteRecordsPartitionStatus(required, Errors.NONE, partition.low_watermark())
                if tracing:
                    self.emit(
                        "log_start",
                        partition=str(tp),
                        op=request.request_id,
                        offset=partition.log.log_start_offset,
                        previous=before,
                    )
            except PartitionError as failure:
                statuses[tp] = DeleteRecordsPartitionStatus(offset, failure.error)

        def answer(response: DeleteRecordsResponse) -> None:
            self._respond_delete_records(request, respond, response)

        if any(status.error is Errors.NONE for status in statuses.values()):
            operation = DelayedDeleteRecords(
                request.timeout_ms, statuses, self.partition, answer, op_id=request.request_id or None
            )
            self.delete_records_purgatory.try_complete_else_watch(operation, list(request.offsets))
            return
        answer(
            DeleteRecordsResponse(
                {tp: PartitionDeleteRecordsResponse(s.error, -1) for tp, s in statuses.items()}
            )
        )

    def _respond_delete_records(
        self: ReplicaManager,
        request: DeleteRecordsRequest,
        respond: Callable[[Any], None],
        response: DeleteRecordsResponse,
    ) -> None:
        if self.tracer.enabled:
            for tp, part in response.partitions.items():
                self.emit(
                    "delete_records.response",
                    op=request.request_id,
                    partition=str(tp),
                    error=part.error.name,
                    low_watermark=part.low_watermark,
                    cause=response.cause,
                )
        respond(response)
