"""ReplicaManager: one broker's partitions, its produce and fetch purgatories, and their triggers.

Both purgatories share the broker's one timer and one Reaper (the product design;
Kafka gives each purgatory its own timer). Purgatories are checked exactly as
Kafka's trigger table says (reference §4):

| event                                                  | purgatories checked         |
|--------------------------------------------------------|-----------------------------|
| leader append raised the HW                            | produce, fetch              |
| leader append left the HW unchanged (the LEO moved)    | fetch                       |
| follower fetch raised the HW                           | fetch, produce              |
| ISR change committed, or becoming leader raised the HW | fetch, produce              |
| leadership lost (they answer NOT_LEADER_OR_FOLLOWER)   | produce, fetch              |
| follower appended replicated data                      | fetch                       |
| broker registrations changed and the HW rose           | fetch, produce              |

Append triggers run after the request's own delayed operation is registered
(Kafka's action queue, KAFKA-8334). ISR proposals and commits live in
``isr_changes``; the follower side (fetching and appending) in ``fetcher``.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from typing import Any

import trio

from minibroker.cluster.config import BrokerConfig
from minibroker.cluster.delayed_fetch import DelayedFetch
from minibroker.cluster.delayed_produce import DelayedProduce, ProducePartitionStatus
from minibroker.cluster.errors import Errors
from minibroker.cluster.fetcher import ReplicaFetcher
from minibroker.cluster.isr_changes import IsrChanges
from minibroker.cluster.log import Log, LogOffsetMetadata
from minibroker.cluster.messages import (
    LOG_END,
    EpochEndOffset,
    FetchRequest,
    FetchResponse,
    LeaderAndIsr,
    PartitionFetchResponse,
    PartitionProduceResponse,
    ProduceRequest,
    ProduceResponse,
    TopicPartition,
)
from minibroker.cluster.network import Network
from minibroker.cluster.partition import Partition, PartitionError
from minibroker.cluster.registrations import BrokerRegistrations
from minibroker.purgatory import DelayedOperationPurgatory
from minibroker.runtime import MsClock, Reaper
from minibroker.timer import make_timer
from minibroker.trace import NULL_TRACER, Tracer


class ReplicaManager:
    """Hosts partitions of one broker and answers produce and fetch requests."""

    def __init__(
        self,
        broker_id: int,
        config: BrokerConfig,
        clock: MsClock,
        network: Network,
        logs: dict[TopicPartition, Log],
        known: Callable[[TopicPartition], bool],
        tracer: Tracer = NULL_TRACER,
    ) -> None:
        self.broker_id = broker_id
        self.config = config
        self.clock = clock
        self.network = network
        self.logs = logs
        self.known = known
        self.tracer = tracer
        self.timer = make_timer(
            config.timer_kind, tick_ms=config.timer_tick_ms, wheel_size=config.timer_wheel_size
        )
        self.reaper = Reaper(
            self.timer, clock, poll_interval_ms=config.reaper_poll_ms, name=f"broker-{broker_id}"
        )
        self.produce_purgatory: DelayedOperationPurgatory[DelayedProduce] = DelayedOperationPurgatory(
            "Produce",
            self.timer,
            broker_id=broker_id,
            purge_interval=config.producer_purge_interval,
            tracer=tracer,
        )
        self.fetch_purgatory: DelayedOperationPurgatory[DelayedFetch] = DelayedOperationPurgatory(
            "Fetch",
            self.timer,
            broker_id=broker_id,
            purge_interval=config.fetch_purge_interval,
            tracer=tracer,
        )
        self.reaper.add_hook(self.produce_purgatory.maybe_purge)
        self.reaper.add_hook(self.fetch_purgatory.maybe_purge)
        self.partitions: dict[TopicPartition, Partition] = {}
        self.fetchers: dict[int, ReplicaFetcher] = {}
        self.fetchers_paused = False
        #: the metadata cache's broker states (fenced, controlled shutdown), as the controller last said
        self.registrations = BrokerRegistrations()
        self.isr_changes = IsrChanges(self)
        self._nursery: trio.Nursery | None = None
        #: set once the broker's tasks have stopped (crash): late answers are ignored
        self.stopped = False
        #: numbers this broker's own requests; the Broker keeps it across restarts so ids stay unique
        self.request_numbers = itertools.count(1)
        #: called with (partition, is_leader, leader epoch) after each leadership change
        self.leadership_listeners: list[Callable[[TopicPartition, bool, int], None]] = []

    # --- lifecycle ---------------------------------------------------------------------------
    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Run the reaper, the ISR-expiration schedule and the fetchers until cancelled."""
        try:
            async with trio.open_nursery() as nursery:
                self._nursery = nursery
                await nursery.start(self.reaper.run)
                nursery.start_soon(self.isr_changes.run_expiration)
                for fetcher in self.fetchers.values():
                    nursery.start_soon(fetcher.run)
                task_status.started()
        finally:
            self._nursery = None
            self.stopped = True

    def now(self) -> int:
        return self.clock.now_ms()

    def emit(self, kind: str, **fields: Any) -> None:
        self.tracer.emit(kind, broker=self.broker_id, **fields)

    def partition(self, tp: TopicPartition) -> Partition | None:
        return self.partitions.get(tp)

    def _lookup_error(self, tp: TopicPartition) -> Errors:
        return Errors.NOT_LEADER_OR_FOLLOWER if self.known(tp) else Errors.UNKNOWN_TOPIC_OR_PARTITION

    # --- produce -----------------------------------------------------------------------------
    def append_records(self, request: ProduceRequest, respond: Callable[[Any], None] | None) -> None:
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
        hw_raised: list[TopicPartition] = []
        leo_moved: list[TopicPartition] = []
        for tp, data in request.data.items():
            partition = self.partitions.get(tp)
            try:
                if partition is None:
                    raise PartitionError(self._lookup_error(tp))
                batch, raised = partition.append_records_to_leader(
                    data.count, data.size, request.acks, now, data.values, data.raw
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
        if request.acks == -1 and (hw_raised or leo_moved):  # at least one partition appended
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
        for tp in leo_moved:
            self.fetch_purgatory.check_and_complete(tp)

    def _respond_produce(
        self, request: ProduceRequest, respond: Callable[[Any], None] | None, response: ProduceResponse
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

    # --- fetch -------------------------------------------------------------------------------
    def fetch_messages(self, request: FetchRequest, respond: Callable[[Any], None]) -> None:
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
        self, request: FetchRequest, respond: Callable[[Any], None], response: FetchResponse
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
        self, request: FetchRequest, update_follower: bool
    ) -> tuple[dict[TopicPartition, PartitionFetchResponse], dict[TopicPartition, LogOffsetMetadata], bool]:
        """Read every partition of ``request``; a follower's first read also updates its fetch state."""
        now = self.now()
        results: dict[TopicPartition, PartitionFetchResponse] = {}
        offsets: dict[TopicPartition, LogOffsetMetadata] = {}
        diverging_any = False
        remaining = request.max_bytes
        for tp, wanted in request.partitions.items():
            partition = self.partitions.get(tp)
            try:
                if partition is None:
                    raise PartitionError(self._lookup_error(tp))
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
                    self._update_follower(partition, request.replica_id, wanted.fetch_offset, now)
                results[tp] = PartitionFetchResponse(
                    Errors.NONE, log.high_watermark, log.log_start_offset, log.log_end_offset, data.batches
                )
            except PartitionError as failure:
                results[tp] = PartitionFetchResponse(failure.error)
        return results, offsets, diverging_any

    def _update_follower(self, partition: Partition, follower: int, fetch_offset: int, now: int) -> None:
        hw_before = partition.high_watermark
        raised = partition.update_follower_fetch_state(follower, fetch_offset, now)
        if self.tracer.enabled:
            self.emit("follower.fetch", partition=str(partition.tp), replica=follower, offset=fetch_offset)
        proposed = partition.isr_expansion_candidate(follower)
        if proposed is not None:
            self.isr_changes.alter_partition(partition, "expand", proposed)
        if raised:
            self.trace_hw(partition, hw_before)
            self.try_complete_delayed_requests(partition.tp)

    def try_complete_delayed_requests(self, tp: TopicPartition) -> None:
        self.fetch_purgatory.check_and_complete(tp)
        self.produce_purgatory.check_and_complete(tp)

    def trace_hw(self, partition: Partition, before: int) -> None:
        if self.tracer.enabled:
            self.emit(
                "hw",
                partition=str(partition.tp),
                hw=partition.high_watermark,
                previous=before,
                leo=partition.log_end_offset,
            )

    # --- leadership --------------------------------------------------------------------------
    def apply_leader_and_isr(self, state: LeaderAndIsr) -> None:
        """The controller's decision for one partition: lead, follow, or just a new ISR."""
        tp = state.tp
        partition = self.partitions.get(tp)
        if partition is None:
            log = self.logs.setdefault(tp, Log(self.config.log_segment_bytes))
            partition = Partition(
                tp,
                self.broker_id,
                state.replicas,
                log,
                self.config.min_insync_replicas,
                self.config.replica_lag_time_max_ms,
                self.config.freeze_hw_under_min_isr,
                self.is_replica_isr_eligible,
            )
            self.partitions[tp] = partition
        elif state.leader_epoch < partition.leader_epoch:
            return  # stale
        now = self.now()
        was_leader = partition.is_leader
        if state.leader == self.broker_id:
            if was_leader and state.leader_epoch == partition.leader_epoch:
                if state.partition_epoch > partition.partition_epoch:
                    self.isr_changes.commit_isr(partition, state)
                return
            self._remove_from_fetchers(tp)
            before = partition.high_watermark
            raised = partition.make_leader(state.leader_epoch, state.isr, state.partition_epoch, now)
            if self.tracer.enabled:
                self.emit(
                    "leader",
                    partition=str(tp),
                    leader=self.broker_id,
                    epoch=state.leader_epoch,
                    isr=list(state.isr),
                )
            if raised:
                self.trace_hw(partition, before)
                self.try_complete_delayed_requests(tp)
            self._tell_leadership(tp, True, state.leader_epoch)
            return
        partition.make_follower(state.leader, state.leader_epoch, state.isr, state.partition_epoch)
        self._tell_leadership(tp, False, state.leader_epoch)
        if was_leader:
            if self.tracer.enabled:
                self.emit("leader.lost", partition=str(tp), leader=state.leader, epoch=state.leader_epoch)
            self.produce_purgatory.check_and_complete(tp)
            self.fetch_purgatory.check_and_complete(tp)
        self._remove_from_fetchers(tp)
        if state.leader >= 0:
            self._fetcher_for(state.leader).add_partition(tp)

    def _tell_leadership(self, tp: TopicPartition, leader: bool, epoch: int) -> None:
        for listener in self.leadership_listeners:
            listener(tp, leader, epoch)

    def is_replica_isr_eligible(self, broker: int) -> bool:
        return self.registrations.is_isr_eligible(broker)

    def apply_registrations(self, registrations: BrokerRegistrations) -> None:
        """New broker states from the controller; a fenced follower stops holding the HW at once."""
        self.registrations = registrations
        now = self.now()
        for tp, partition in list(self.partitions.items()):
            if not partition.is_leader:
                continue
            before = partition.high_watermark
            if partition.maybe_increment_leader_hw(now):
                self.trace_hw(partition, before)
                self.try_complete_delayed_requests(tp)

    def stop_replica(self, tp: TopicPartition, delete: bool = False) -> None:
        """Stop hosting ``tp`` (Kafka's StopReplica); waiting requests answer NOT_LEADER_OR_FOLLOWER."""
        partition = self.partitions.pop(tp, None)
        if partition is None:
            return
        self._tell_leadership(tp, False, partition.leader_epoch)
        self._remove_from_fetchers(tp)
        if delete:
            self.logs.pop(tp, None)
        if self.tracer.enabled:
            self.emit("replica.stopped", partition=str(tp), deleted=delete)
        self.produce_purgatory.check_and_complete(tp)
        self.fetch_purgatory.check_and_complete(tp)

    def _fetcher_for(self, leader: int) -> ReplicaFetcher:
        fetcher = self.fetchers.get(leader)
        if fetcher is None:
            fetcher = ReplicaFetcher(self, leader)
            fetcher.paused = self.fetchers_paused
            self.fetchers[leader] = fetcher
            if self._nursery is not None:
                self._nursery.start_soon(fetcher.run)
        return fetcher

    def _remove_from_fetchers(self, tp: TopicPartition) -> None:
        for fetcher in self.fetchers.values():
            fetcher.remove_partition(tp)

    def pause_fetchers(self, paused: bool) -> None:
        self.fetchers_paused = paused
        for fetcher in self.fetchers.values():
            fetcher.set_paused(paused)

    # --- figures -----------------------------------------------------------------------------
    def next_request_id(self, kind: str) -> str:
        return f"b{self.broker_id}-{kind}-{next(self.request_numbers)}"
