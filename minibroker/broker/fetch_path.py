"""The fetch path of a ReplicaManager: reads, follower fetch state and the Fetch purgatory.

``FetchPath`` is a mixin of ``ReplicaManager``. A fetch reads at once and answers,
or parks a DelayedFetch until ``min_bytes`` or ``max_wait_ms``. A follower's fetch
also updates the leader's view of it (LEO, caught-up time, log start offset); when
that raised the HW, or the low watermark while DeleteRecords wait, every
purgatory of the partition is checked (Kafka's ``tryCompleteDelayedRequests``).
A follower asking below the leader's log start gets OFFSET_OUT_OF_RANGE with the
leader's log start offset, where it starts again (``replica_fetcher``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from minibroker.broker.delayed_fetch import DelayedFetch
from minibroker.broker.log import LogOffsetMetadata
from minibroker.broker.partition import Partition, PartitionError
from minibroker.common.errors import Errors
from minibroker.common.messages import (
    LOG_END,
    EpochEndOffset,
    FetchPartition,
    FetchRequest,
    FetchResponse,
    PartitionFetchResponse,
    TopicPartition,
)

if TYPE_CHECKING:
    from minibroker.broker.replica_manager import ReplicaManager


class FetchPath:
    """``fetch_messages``: answer at once or park a DelayedFetch."""

    def fetch_messages(self: ReplicaManager, request: FetchRequest, respond: Callable[[Any], None]) -> None:
        """Read now; answer at once or park a DelayedFetch until min_bytes or max_wait."""
        results, fetch_offsets, diverging = self._read(request, update_follower=True)
        isolation = LOG_END if request.is_from_follower else request.isolation
        size = sum(result.size for result in results.values())
        errors = any(result.error is not Errors.NONE for result in results.values())
        if (
            request.max_wait_ms <= 0
            or not request.partitions
            or size >= request.min_bytes
            or errors
            or diverging
        ):
            self._respond_fetch(request, respond, FetchResponse(results))
            return
        operation = DelayedFetch(
            request,
            fetch_offsets,
            isolation,
            self.partition,
            lambda req: self._read(req, update_follower=False)[0],
            lambda response: self._respond_fetch(request, respond, response),
            op_id=request.request_id or None,
        )
        self.fetch_purgatory.try_complete_else_watch(operation, list(request.partitions))

    def _respond_fetch(
        self: ReplicaManager, request: FetchRequest, respond: Callable[[Any], None], response: FetchResponse
    ) -> None:
        if self.tracer.enabled and not request.is_from_follower:
            for tp, part in response.partitions.items():
                self.emit(
                    "fetch.response",
                    op=request.request_id,
                    partition=str(tp),
                    error=part.error.name,
                    offset=part.batches[0].base_offset if part.batches else -1,
                    records=sum(b.count for b in part.batches),
                    bytes=part.size,
                    hw=part.high_watermark,
                    cause=response.cause,
                )
        respond(response)

    def _read(
        self: ReplicaManager, request: FetchRequest, update_follower: bool
    ) -> tuple[dict[TopicPartition, PartitionFetchResponse], dict[TopicPartition, LogOffsetMetadata], bool]:
        """Read every partition of ``request``; a follower's first read also updates its fetch state."""
        now = self.now()
        results: dict[TopicPartition, PartitionFetchResponse] = {}
        offsets: dict[TopicPartition, LogOffsetMetadata] = {}
        diverging_any = False
        remaining = request.max_bytes
        pushed_here = update_follower and not request.is_from_follower  # a client's first read
        request_error = self.pushed_errors.take("fetch", None) if pushed_here else None
        for tp, wanted in request.partitions.items():
            partition = self.partitions.get(tp)
            try:
                if partition is None:
                    raise PartitionError(self._lookup_error(tp))
                if pushed_here:
                    pushed = request_error or self.pushed_errors.take("fetch", tp)
                    if pushed is not None:
                        raise PartitionError(pushed, "pushed by a test")
                partition.require_leader()
                partition.check_leader_epoch(wanted.current_leader_epoch)
                log = partition.log
                if request.is_from_follower and wanted.last_fetched_epoch >= 0:
                    epoch, end = log.end_offset_for_epoch(wanted.last_fetched_epoch)
                    if epoch < wanted.last_fetched_epoch or end < wanted.fetch_offset:
                        diverging_any = True
                        results[tp] = PartitionFetchResponse(
                            Errors.NONE,
                            log.high_watermark,
                            log.log_start_offset,
                            log.log_end_offset,
                            (),
                            EpochEndOffset(epoch, end),
                        )
                        offsets[tp] = log.offset_metadata(wanted.fetch_offset)
                        continue
                if wanted.fetch_offset > log.log_end_offset or wanted.fetch_offset < log.log_start_offset:
                    if request.is_from_follower:  # tell it where the log starts now (see fetcher)
                        results[tp] = PartitionFetchResponse(
                            Errors.OFFSET_OUT_OF_RANGE,
                            log.high_watermark,
                            log.log_start_offset,
                            log.log_end_offset,
                        )
                        continue
                    raise PartitionError(Errors.OFFSET_OUT_OF_RANGE)
                isolation = LOG_END if request.is_from_follower else request.isolation
                data = log.read(
                    wanted.fetch_offset,
                    min(wanted.partition_max_bytes, max(remaining, 0)),
                    partition.max_offset(isolation),
                )
                remaining -= data.size
                offsets[tp] = data.fetch_offset_metadata
                if request.is_from_follower and update_follower:
                    self._update_follower(partition, request.replica_id, wanted, now)
                results[tp] = PartitionFetchResponse(
                    Errors.NONE, log.high_watermark, log.log_start_offset, log.log_end_offset, data.batches
                )
            except PartitionError as failure:
                results[tp] = PartitionFetchResponse(failure.error)
        return results, offsets, diverging_any

    def _update_follower(
        self: ReplicaManager, partition: Partition, follower: int, wanted: FetchPartition, now: int
    ) -> None:
        hw_before = partition.high_watermark
        raised, low_raised = partition.update_follower_fetch_state(
            follower,
            wanted.fetch_offset,
            now,
            wanted.log_start_offset,
            low=self.delete_records_purgatory.num_delayed() > 0,
        )
        if self.tracer.enabled:
            self.emit(
                "follower.fetch", partition=str(partition.tp), replica=follower, offset=wanted.fetch_offset
            )
        proposed = partition.isr_expansion_candidate(follower)
        if proposed is not None:
            self.isr_changes.alter_partition(partition, "expand", proposed)
        if raised:
            self.trace_hw(partition, hw_before)
        if raised or low_raised:
            self.try_complete_delayed_requests(partition.tp)
