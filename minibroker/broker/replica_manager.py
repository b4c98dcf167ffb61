"""ReplicaManager: one broker's partitions, its four purgatories, its replica fetchers and ISR changes.

Kafka's ``ReplicaManager`` with the leader-side parts of its ``Partition`` in one class, in sections:
``append_records`` (the produce path), ``fetch_messages`` (reads, and the leader's view of each
follower), ``delete_records``, leadership (Kafka's ``becomeLeaderOrFollower`` and ``stopReplicas``),
ISR changes (``maybe_shrink_isr``, ``alter_partition``, ``commit_isr``) and the replica fetchers.

- https://github.com/apache/kafka/blob/trunk/core/src/main/scala/kafka/server/ReplicaManager.scala
- https://github.com/apache/kafka/blob/trunk/core/src/main/scala/kafka/cluster/Partition.scala

It holds the partitions this broker hosts (``partitions``, over the broker's ``logs``, which outlive it
across restarts), one ``ReplicaFetcher`` per leader it follows, the broker registrations the controller
last sent, and the Produce, Fetch, DeleteRecords and ElectLeader purgatories. The purgatories share
the broker's one timer and one Reaper (a deliberate deviation, docs/deviations.md: Kafka gives each
purgatory its own timer). Purgatories are checked when Kafka's ``ReplicaManager`` checks them:

| event                                                    | purgatories checked          |
|----------------------------------------------------------|------------------------------|
| leader append raised the HW                              | produce, fetch, deleteRecords|
| leader append left the HW unchanged (the LEO moved)      | fetch                        |
| follower fetch raised the HW or the low watermark        | fetch, produce, deleteRecords|
| ISR change committed, or becoming leader raised the HW   | fetch, produce, deleteRecords|
| leadership lost (they answer NOT_LEADER_OR_FOLLOWER)     | produce, fetch               |
| follower appended replicated data                        | fetch                        |
| broker registrations changed and the HW rose             | fetch, produce, deleteRecords|
| a partition's metadata changed (LeaderAndIsr, stop)      | electLeader                  |

Invariants:

- append triggers run after the request's own delayed operation is registered (Kafka's action queue,
  KAFKA-8334);
- a DelayedDeleteRecords whose leader moved away is not checked (as in Kafka): it answers
  REQUEST_TIMED_OUT at its timeout;
- an ISR proposal stays pending on its partition (the maximal ISR counts it) until the controller
  answers; answers for an older leader epoch, or after the broker stopped, are ignored;
- once ``stopped`` (the broker crashed), late answers change nothing.

The follower side (fetching and appending) is ``replica_fetcher``.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from typing import Any

import trio

from minibroker.broker.add_partitions_to_txn_manager import AddPartitionsToTxnManager
from minibroker.broker.config import BrokerConfig
from minibroker.broker.delayed_delete_records import DelayedDeleteRecords, DeleteRecordsPartitionStatus
from minibroker.broker.delayed_elect_leader import DelayedElectLeader
from minibroker.broker.delayed_fetch import DelayedFetch
from minibroker.broker.delayed_produce import DelayedProduce, ProducePartitionStatus
from minibroker.broker.delayed_remote_fetch import DelayedRemoteFetch
from minibroker.broker.delayed_remote_list_offsets import DelayedRemoteListOffsets
from minibroker.broker.log import Log, LogOffsetMetadata
from minibroker.broker.log_cleaner import Cleaner, KeyOf, LogCleaner
from minibroker.broker.log_config import LogConfig
from minibroker.broker.partition import Partition, PartitionError
from minibroker.broker.pushed_errors import PushedErrors
from minibroker.broker.remote_log_manager import RemoteLogManager
from minibroker.broker.remote_storage_manager import RemoteStorageManager
from minibroker.broker.replica_fetcher import ReplicaFetcher
from minibroker.broker.topic_configs import deletes_records
from minibroker.common.errors import Errors
from minibroker.common.messages import (
    EARLIEST_LOCAL_TIMESTAMP,
    EARLIEST_TIMESTAMP,
    LATEST_TIERED_TIMESTAMP,
    LATEST_TIMESTAMP,
    LOG_END,
    TXN_COMMITTED,
    AlterPartitionRequest,
    AlterPartitionResponse,
    DeleteRecordsRequest,
    DeleteRecordsResponse,
    ElectLeadersRequest,
    ElectLeadersResponse,
    EpochEndOffset,
    FetchPartition,
    FetchRequest,
    FetchResponse,
    LeaderAndIsr,
    ListOffsetsRequest,
    ListOffsetsResponse,
    NetworkError,
    PartitionDeleteRecordsResponse,
    PartitionElectLeaderResponse,
    PartitionFetchResponse,
    PartitionListOffsetsResponse,
    PartitionProduceResponse,
    ProduceRequest,
    ProduceResponse,
    TopicPartition,
)
from minibroker.common.network import NetworkClient
from minibroker.controller.broker_registrations import BrokerRegistrations
from minibroker.controller.quorum_controller import CONTROLLER
from minibroker.purgatory import DelayedOperationPurgatory
from minibroker.runtime import MsClock, Reaper
from minibroker.timer import TimerTask, make_timer
from minibroker.trace import NULL_TRACER, Tracer

#: Kafka's AlterPartitionManager sends an unanswered AlterPartition again this much later
ALTER_PARTITION_RETRY_BACKOFF_MS = 50


class ReplicaManager:
    """Hosts partitions of one broker and answers produce, fetch and delete-records requests."""

    def __init__(
        self,
        broker_id: int,
        config: BrokerConfig,
        clock: MsClock,
        network: NetworkClient,
        logs: dict[TopicPartition, Log],
        known: Callable[[TopicPartition], bool],
        tracer: Tracer = NULL_TRACER,
        remote_storage: RemoteStorageManager | None = None,
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
        self.delete_records_purgatory: DelayedOperationPurgatory[DelayedDeleteRecords] = (
            DelayedOperationPurgatory(
                "DeleteRecords",
                self.timer,
                broker_id=broker_id,
                purge_interval=config.delete_records_purge_interval,
                tracer=tracer,
            )
        )
        #: tiered storage (KIP-405): fetches and ListOffsets waiting on the remote tier
        self.remote_fetch_purgatory: DelayedOperationPurgatory[DelayedRemoteFetch] = (
            DelayedOperationPurgatory("RemoteFetch", self.timer, broker_id=broker_id, tracer=tracer)
        )
        self.remote_list_offsets_purgatory: DelayedOperationPurgatory[DelayedRemoteListOffsets] = (
            DelayedOperationPurgatory("RemoteListOffsets", self.timer, broker_id=broker_id, tracer=tracer)
        )
        #: ElectLeaders waiting for the elected leaders in this broker's metadata (Kafka's default purge
        #: interval: the ElectLeader purgatory has no setting of its own)
        self.elect_leader_purgatory: DelayedOperationPurgatory[DelayedElectLeader] = (
            DelayedOperationPurgatory("ElectLeader", self.timer, broker_id=broker_id, tracer=tracer)
        )
        #: the ShareFetch purgatory (KIP-932, ``SharePartitionManager``), listed once a ShareFetch arrived
        self.share_fetch_purgatory: DelayedOperationPurgatory | None = None
        for purgatory in (
            *self.purgatories[:4],
            self.remote_fetch_purgatory,
            self.remote_list_offsets_purgatory,
        ):
            self.reaper.add_hook(purgatory.maybe_purge)
        self.partitions: dict[TopicPartition, Partition] = {}
        self.fetchers: dict[int, ReplicaFetcher] = {}
        self.fetchers_paused = False
        #: the metadata cache's broker states (fenced, controlled shutdown), as the controller last said
        self.registrations = BrokerRegistrations()
        #: errors a test pushed for the next produce/fetch of a partition (``pushed_errors``)
        self.pushed_errors = PushedErrors()
        self._nursery: trio.Nursery | None = None
        #: set once the broker's tasks have stopped (crash): late answers are ignored
        self.stopped = False
        #: numbers this broker's own requests; the Broker keeps it across restarts so ids stay unique
        self.request_numbers = itertools.count(1)
        #: this life of the broker (set by ``Broker.start``): AlterPartition carries it
        self.broker_epoch = 1
        #: a topic's config overrides (Kafka names, strings); the broker points this at the cluster's
        self.topic_overrides: Callable[[str], dict[str, str]] = lambda topic: {}
        #: called with (partition, is_leader, leader epoch) after each leadership change
        self.leadership_listeners: list[Callable[[TopicPartition, bool, int], None]] = []
        #: KIP-890's partition verification of transactional batches
        self.add_partitions_to_txn = AddPartitionsToTxnManager(self)
        #: called with a partition whose high watermark rose (the ShareFetch purgatory watches this)
        self.high_watermark_listeners: list[Callable[[TopicPartition], None]] = []
        #: partition -> (LSO, HW) of its last ``lso`` event while an open transaction held the LSO back
        self._lso_lagging: dict[TopicPartition, tuple[int, int]] = {}
        #: per partition, the last answer to a follower with every record (``_read``): NONE, no records
        self._idle_answers: dict[TopicPartition, PartitionFetchResponse] = {}
        #: tiered storage: copies to the remote tier (shared by a cluster's brokers), remote reads
        self.remote_log_manager = RemoteLogManager(self, remote_storage or RemoteStorageManager())
        self.leadership_listeners.append(self.remote_log_manager.on_leadership)
        #: the controller's election for (partition, election type): the leader it elected, or
        #: (error, message) when it elects none (the broker points this at the controller)
        self.elect_leader: Callable[[TopicPartition, int], int | tuple[Errors, str]] = lambda tp, kind: (
            Errors.UNKNOWN_TOPIC_OR_PARTITION,
            f"partition {tp} does not exist",
        )
        #: the leader of a partition this broker does not host, as its metadata shows it
        self.metadata_leader: Callable[[TopicPartition], int] = lambda tp: -1
        #: the configs a topic has without overrides when Kafka creates it so (the internal topics)
        self.log_config_defaults: Callable[[str], dict[str, str]] = lambda topic: {}
        #: how the log cleaner reads the keys of a topic's values (the coordinators' internal topics)
        self.record_keys: Callable[[str], KeyOf | None] = lambda topic: None
        #: compacts this broker's cleanup.policy=compact logs (leaders' and followers' alike)
        self.log_cleaner = LogCleaner(
            broker_id,
            self.timer,
            self.now,
            self._compacted_logs,
            config.log_cleaner_backoff_ms,
            Cleaner(lambda topic: self.record_keys(topic)),
            tracer,
        )
        self.log_cleaner.enabled = config.log_cleaner_enable

    # ---- lifecycle and shared helpers ----------------------------------------------------------------------
    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Run the reaper, the ISR-expiration schedule and the fetchers until cancelled."""
        try:
            async with trio.open_nursery() as nursery:
                self._nursery = nursery
                await nursery.start(self.reaper.run)
                self.remote_log_manager.start()
                self.log_cleaner.wake()
                nursery.start_soon(self.run_isr_expiration)
                for fetcher in self.fetchers.values():
                    nursery.start_soon(fetcher.run)
                task_status.started()
        finally:
            self._nursery = None
            self.stopped = True

    @property
    def purgatories(self) -> tuple[DelayedOperationPurgatory, ...]:
        """Produce, Fetch, DeleteRecords and ElectLeader, in that order (the figures list them so); then
        RemoteFetch and RemoteListOffsets when the broker enables tiered storage, and ShareFetch once a
        ShareFetch arrived."""
        local = (
            self.produce_purgatory,
            self.fetch_purgatory,
            self.delete_records_purgatory,
            self.elect_leader_purgatory,
        )
        if self.config.remote_log_storage_system_enable:
            local = (*local, self.remote_fetch_purgatory, self.remote_list_offsets_purgatory)
        if self.share_fetch_purgatory is not None:
            local = (*local, self.share_fetch_purgatory)
        return local

    def now(self) -> int:
        return self.clock.now_ms()

    def emit(self, kind: str, **fields: Any) -> None:
        self.tracer.emit(kind, broker=self.broker_id, **fields)

    def min_isr_for(self, topic: str) -> int:
        """``min.insync.replicas``: the topic's override, else this broker's setting."""
        override = self.topic_overrides(topic).get("min.insync.replicas")
        return int(override) if override is not None else self.config.min_insync_replicas

    def partition(self, tp: TopicPartition) -> Partition | None:
        return self.partitions.get(tp)

    def log_config(self, topic: str) -> LogConfig:
        """The topic's log settings: its overrides over Kafka's defaults for it and this broker's."""
        return LogConfig.of({**self.log_config_defaults(topic), **self.topic_overrides(topic)}, self.config)

    def _rolled(self, tp: TopicPartition) -> None:
        """A log rolled a segment: a compacted one may give the cleaner work."""
        if self.log_config(tp.topic).compact:
            self.log_cleaner.wake()

    def _compacted_logs(self) -> list[tuple[TopicPartition, Log, LogConfig]]:
        """The logs the cleaner looks at: all but those kept in files (their files hold every record)."""
        return [
            (tp, p.log, self.log_config(tp.topic)) for tp, p in self.partitions.items() if p.log.store is None
        ]

    def _lookup_error(self, tp: TopicPartition) -> Errors:
        return Errors.NOT_LEADER_OR_FOLLOWER if self.known(tp) else Errors.UNKNOWN_TOPIC_OR_PARTITION

    def try_complete_delayed_requests(self, tp: TopicPartition) -> None:
        """Kafka's ``Partition.tryCompleteDelayedRequests``: every purgatory of ``tp``."""
        self.fetch_purgatory.check_and_complete(tp)
        self.produce_purgatory.check_and_complete(tp)
        self.delete_records_purgatory.check_and_complete(tp)
        for listener in self.high_watermark_listeners:
            listener(tp)

    def trace_hw(self, partition: Partition, before: int) -> None:
        if self.tracer.enabled:
            self.emit(
                "hw",
                partition=str(partition.tp),
                hw=partition.high_watermark,
                previous=before,
                leo=partition.log_end_offset,
            )
            self.trace_lso(partition.tp, partition.log)

    def trace_lso(self, tp: TopicPartition, log: Any) -> None:
        """An ``lso`` event each time the leader's (LSO, HW) moves while an open transaction holds the
        LSO below the HW, and one when the LSO is back at the HW (only in traces with transactions)."""
        lso, hw = log.last_stable_offset, log.high_watermark
        if lso < hw:
            if self._lso_lagging.get(tp) != (lso, hw):
                self._lso_lagging[tp] = (lso, hw)
                self.emit("lso", partition=str(tp), lso=lso, hw=hw)
        elif self._lso_lagging.pop(tp, None) is not None:
            self.emit("lso", partition=str(tp), lso=lso, hw=hw)

    # ---- appendRecords (the produce path) ------------------------------------------------------------------
    # An append that raised the HW checks the produce, fetch and delete-records purgatories; one that
    # only moved the LEO checks the fetch purgatory; both after the request's DelayedProduce is watched.
    def append_records(self, request: ProduceRequest, respond: Callable[[Any], None] | None) -> None:
        """Append to the leader logs; answer now, or park a DelayedProduce (acks=-1). A transaction's
        first batch on a partition waits for its coordinator's verification first (KIP-890)."""
        if self.tracer.enabled:
            self.emit(
                "produce.request",
                op=request.request_id,
                keys=[str(tp) for tp in request.data],
                acks=request.acks,
                timeout_ms=request.timeout_ms,
            )
        unverified = (
            self.add_partitions_to_txn.unverified(request)
            if request.transactional_id is not None and request.acks in (-1, 0, 1)
            else None
        )
        if unverified:
            self.add_partitions_to_txn.verify(
                request, unverified, lambda refused: self._append_records(request, respond, refused)
            )
        else:
            self._append_records(request, respond, {})

    def _append_records(
        self,
        request: ProduceRequest,
        respond: Callable[[Any], None] | None,
        refused: dict[TopicPartition, Errors],
    ) -> None:
        now = self.clock.now_ms()
        tracing = self.tracer.enabled
        if request.acks not in (-1, 0, 1):
            responses = {tp: PartitionProduceResponse(Errors.INVALID_REQUIRED_ACKS) for tp in request.data}
            self._respond_produce(request, respond, ProduceResponse(responses))
            return
        statuses: dict[TopicPartition, ProducePartitionStatus] = {}
        pushed_errors = self.pushed_errors.any()  # nothing pushes while the request appends
        request_error = self.pushed_errors.take("produce", None) if pushed_errors else None
        hw_raised: list[TopicPartition] = []
        leo_moved: list[TopicPartition] = []
        duplicates: list[TopicPartition] = []  # retried idempotent batches: answered, not appended
        for tp, data in request.data.items():
            partition = self.partitions.get(tp)
            try:
                if partition is None:
                    raise PartitionError(self._lookup_error(tp))
                if pushed_errors:
                    pushed = request_error or self.pushed_errors.take("produce", tp)
                    if pushed is not None:
                        raise PartitionError(pushed, "pushed by a test")
                if refused and tp in refused:
                    raise PartitionError(refused[tp], "refused by the transaction coordinator's verification")
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
                self.trace_lso(tp, log)
        if request.acks == -1 and (hw_raised or leo_moved or duplicates):  # appended or already there
            operation = DelayedProduce(
                request.timeout_ms,
                statuses,
                self.partitions.get,
                lambda response: self._respond_produce(request, respond, response),
                op_id=request.request_id or None,
            )
            completed = self.produce_purgatory.try_complete_else_watch(operation, list(request.data))
            if not completed and request.timeout_ms <= 0:
                # already due: Kafka's timer hands it to its executor at once, before any follower can
                # fetch, so it always expires (REQUEST_TIMED_OUT); run that expiry now, not after a race
                operation.run()
        else:
            responses = {tp: status.response for tp, status in statuses.items()}
            self._respond_produce(request, respond, ProduceResponse(responses))
        for tp in hw_raised:
            self.produce_purgatory.check_and_complete(tp)
            self.fetch_purgatory.check_and_complete(tp)
            self.delete_records_purgatory.check_and_complete(tp)
            for listener in self.high_watermark_listeners:
                listener(tp)
        for tp in leo_moved:
            self.fetch_purgatory.check_and_complete(tp)

    def await_high_watermark(
        self, tp: TopicPartition, offset: int, timeout_ms: int, op_id: str, respond: Callable[[Errors], Any]
    ) -> None:
        """Answer ``respond(error)`` once the HW of ``tp`` (led here) passes ``offset``: a DelayedProduce
        for a record already in the log, as an acks=-1 append of it would wait (NONE, or its errors)."""
        status = ProducePartitionStatus(offset + 1, PartitionProduceResponse(Errors.NONE, offset))
        operation = DelayedProduce(
            timeout_ms, {tp: status}, self.partitions.get, lambda r: respond(r.partitions[tp].error), op_id
        )
        self.produce_purgatory.try_complete_else_watch(operation, [tp])

    def _respond_produce(
        self,
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

    # ---- fetchMessages (the fetch path and the leader's view of its followers) -----------------------------
    # A fetch reads at once and answers, or parks a DelayedFetch until ``min_bytes`` or ``max_wait_ms``.
    # A follower's fetch also updates the leader's view of it (LEO, caught-up time, log start offset);
    # when that raised the HW, or the low watermark while DeleteRecords wait, every purgatory of the
    # partition is checked. A follower asking below the log start gets OFFSET_OUT_OF_RANGE with the
    # leader's log start offset, where it starts again.
    def fetch_messages(self, request: FetchRequest, respond: Callable[[Any], None]) -> None:
        """Read now; answer at once, park a DelayedRemoteFetch for data only in the remote tier, or
        park a DelayedFetch until min_bytes or max_wait."""
        remote: list[TopicPartition] = []
        results, fetch_offsets, diverging = self._read(request, update_follower=True, remote=remote)
        if remote:
            self._fetch_remote(request, respond, results, remote[0])
            return
        isolation = LOG_END if request.is_from_follower else request.isolation
        size = sum(result.size for result in results.values() if result.batches)
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
            self.partitions.get,
            lambda req: self._read(req, update_follower=False)[0],
            lambda response: self._respond_fetch(request, respond, response),
            op_id=request.request_id or None,
        )
        self.fetch_purgatory.try_complete_else_watch(operation, list(request.partitions))

    def _fetch_remote(
        self,
        request: FetchRequest,
        respond: Callable[[Any], None],
        results: dict[TopicPartition, PartitionFetchResponse],
        tp: TopicPartition,
    ) -> None:
        """Kafka's ``processRemoteFetches``: read the first remote partition from the remote tier and
        wait in the RemoteFetch purgatory for ``remote.fetch.max.wait.ms`` (other remote partitions
        answer no records)."""
        operation = DelayedRemoteFetch(
            self.config.remote_fetch_max_wait_ms,
            request,
            tp,
            results,
            self.partition,
            lambda response: self._respond_fetch(request, respond, response),
            op_id=request.request_id or None,
        )

        def read_done(result: Any) -> None:
            operation.read_done(result)
            self.remote_fetch_purgatory.check_and_complete(tp)

        wanted = request.partitions[tp]
        self.remote_log_manager.async_read(tp, wanted.fetch_offset, wanted.partition_max_bytes, read_done)
        self.remote_fetch_purgatory.try_complete_else_watch(operation, list(request.partitions))

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
        self,
        request: FetchRequest,
        update_follower: bool,
        remote: list[TopicPartition] | None = None,
    ) -> tuple[dict[TopicPartition, PartitionFetchResponse], dict[TopicPartition, LogOffsetMetadata], bool]:
        """Read every partition of ``request``; a follower's first read also updates its fetch state.
        The positions (second answer) are complete for the first read (``update_follower``) only.
        A follower's partition that has every record gets the answer made last time that was so for the
        partition, while it is still equal (the answers are immutable; most partitions of a follower fetch
        are idle ones, read again at every fetch).

        A consumer's offset between the log start offset and the local log start offset of a topic in
        tiered storage reads nothing locally: the partition answers no records yet and is added to
        ``remote`` (when given) for a remote read. A follower gets OFFSET_MOVED_TO_TIERED_STORAGE.
        """
        now = self.now()
        results: dict[TopicPartition, PartitionFetchResponse] = {}
        offsets: dict[TopicPartition, LogOffsetMetadata] = {}
        diverging_any = False
        remaining = request.max_bytes
        follower = request.is_from_follower
        isolation = LOG_END if follower else request.isolation
        pushed_here = update_follower and not follower  # a client's first read
        request_error = self.pushed_errors.take("fetch", None) if pushed_here else None
        hosted = self.partitions
        idle = self._idle_answers
        none = Errors.NONE
        for tp, wanted in request.partitions.items():
            partition = hosted.get(tp)
            if follower and partition is not None:
                # a follower with every record, the common case, checked as the general path below
                # would (leader, epoch, no diverging epoch, in the local log): what ``Log.read``
                # answers, without reading (and without the position, which only the first read's
                # caller uses)
                log = partition.log
                fetch_offset = wanted.fetch_offset
                if (
                    fetch_offset == log.log_end_offset
                    and partition.leader_id == partition.broker_id
                    and ((epoch := wanted.current_leader_epoch) < 0 or epoch == partition.leader_epoch)
                    and (
                        (last := wanted.last_fetched_epoch) < 0
                        or ((epochs := log.epochs) and last == epochs[-1][0])
                    )
                    and fetch_offset >= log.log_start_offset
                    and fetch_offset >= log.segments[0].base_offset  # the local log start offset
                ):
                    if update_follower:
                        offsets[tp] = log.offset_metadata(fetch_offset)
                        try:
                            self._update_follower(partition, request.replica_id, wanted, now)
                        except PartitionError as failure:
                            results[tp] = PartitionFetchResponse(failure.error)
                            continue
                    answer = idle.get(tp)
                    if (
                        answer is None
                        or answer.log_end_offset != fetch_offset
                        or answer.high_watermark != log.high_watermark
                        or answer.log_start_offset != log.log_start_offset
                    ):
                        answer = idle[tp] = PartitionFetchResponse(
                            none, log.high_watermark, log.log_start_offset, fetch_offset
                        )
                    results[tp] = answer
                    continue
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
                fetch_offset = wanted.fetch_offset
                if follower and wanted.last_fetched_epoch >= 0:
                    epoch, end = log.end_offset_for_epoch(wanted.last_fetched_epoch)
                    if epoch < wanted.last_fetched_epoch or end < fetch_offset:
                        diverging_any = True
                        results[tp] = PartitionFetchResponse(
                            Errors.NONE,
                            log.high_watermark,
                            log.log_start_offset,
                            log.log_end_offset,
                            (),
                            EpochEndOffset(epoch, end),
                        )
                        offsets[tp] = log.offset_metadata(fetch_offset)
                        continue
                if (
                    log.log_start_offset <= fetch_offset < log.local_log_start_offset
                    and self.remote_log_manager.enabled_for(tp)
                ):
                    if follower:
                        results[tp] = PartitionFetchResponse(
                            Errors.OFFSET_MOVED_TO_TIERED_STORAGE,
                            log.high_watermark,
                            log.log_start_offset,
                            log.log_end_offset,
                            local_log_start_offset=log.local_log_start_offset,
                        )
                        continue
                    if remote is not None:
                        remote.append(tp)
                    offsets[tp] = LogOffsetMetadata(fetch_offset)
                    results[tp] = PartitionFetchResponse(
                        Errors.NONE, log.high_watermark, log.log_start_offset, log.log_end_offset
                    )
                    continue
                if fetch_offset > log.log_end_offset or fetch_offset < log.log_start_offset:
                    if follower:  # tell it where the log starts now (see fetcher)
                        results[tp] = PartitionFetchResponse(
                            Errors.OFFSET_OUT_OF_RANGE,
                            log.high_watermark,
                            log.log_start_offset,
                            log.log_end_offset,
                        )
                        continue
                    raise PartitionError(Errors.OFFSET_OUT_OF_RANGE)
                if follower and fetch_offset == log.log_end_offset:
                    # a follower with every record (as above)
                    if update_follower:
                        offsets[tp] = log.offset_metadata(fetch_offset)
                        self._update_follower(partition, request.replica_id, wanted, now)
                    results[tp] = PartitionFetchResponse(
                        Errors.NONE, log.high_watermark, log.log_start_offset, fetch_offset
                    )
                    continue
                data = log.read(
                    fetch_offset,
                    min(wanted.partition_max_bytes, max(remaining, 0)),
                    partition.max_offset(isolation),
                )
                remaining -= data.size
                offsets[tp] = data.fetch_offset_metadata
                if follower and update_follower:
                    self._update_follower(partition, request.replica_id, wanted, now)
                aborted: tuple[tuple[int, int], ...] = ()
                if isolation == TXN_COMMITTED and data.batches:
                    found = log.producer_state.aborted_between(
                        data.batches[0].base_offset, data.batches[-1].next_offset
                    )
                    aborted = tuple((txn.producer_id, txn.first_offset) for txn in found)
                results[tp] = PartitionFetchResponse(
                    Errors.NONE,
                    log.high_watermark,
                    log.log_start_offset,
                    log.log_end_offset,
                    data.batches,
                    aborted=aborted,
                )
            except PartitionError as failure:
                results[tp] = PartitionFetchResponse(failure.error)
        return results, offsets, diverging_any

    def _update_follower(self, partition: Partition, follower: int, wanted: FetchPartition, now: int) -> None:
        hw_before = partition.log.high_watermark
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
        if partition.pending is None and follower not in partition.isr:  # else no candidate
            proposed = partition.isr_expansion_candidate(follower)
            if proposed is not None:
                self.alter_partition(partition, "expand", proposed)
        if raised:
            self.trace_hw(partition, hw_before)
        if raised or low_raised:
            self.try_complete_delayed_requests(partition.tp)

    # ---- fetchOffset (ListOffsets) -------------------------------------------------------------------------
    # Answered from the leader's log at once: -1 the HW (the LSO for READ_COMMITTED), -2 the log start
    # offset, -4 the local log start offset, -5 the highest offset in remote storage (-1: none or no
    # tiered storage), a timestamp the first batch appended at or after it below the HW. A timestamp on
    # a topic in tiered storage is looked up in the remote tier first (``async_offset_read``): the
    # request waits in the RemoteListOffsets purgatory for ``remote.list.offsets.request.timeout.ms``.
    def list_offsets(self, request: ListOffsetsRequest, respond: Callable[[Any], None]) -> None:
        responses: dict[TopicPartition, PartitionListOffsetsResponse] = {}
        lookups: dict[TopicPartition, Any] = {}
        for tp, timestamp in request.timestamps.items():
            partition = self.partitions.get(tp)
            try:
                if partition is None:
                    raise PartitionError(self._lookup_error(tp))
                partition.require_leader()
                partition.check_leader_epoch(request.current_leader_epochs.get(tp, -1))
            except PartitionError as failure:
                responses[tp] = PartitionListOffsetsResponse(failure.error)
                continue
            log = partition.log
            epoch = partition.leader_epoch
            tiered = self.remote_log_manager.enabled_for(tp)
            highest_remote = self.remote_log_manager.storage.highest_offset(tp) if tiered else -1
            latest = log.last_stable_offset if request.isolation == TXN_COMMITTED else log.high_watermark
            special = {  # the offset and its leader epoch (Kafka's epoch cache lookups; the HW: this epoch)
                LATEST_TIMESTAMP: (latest, epoch),
                EARLIEST_TIMESTAMP: (log.log_start_offset, _epoch_at(log, log.log_start_offset)),
                EARLIEST_LOCAL_TIMESTAMP: (
                    log.local_log_start_offset,
                    _epoch_at(log, log.local_log_start_offset),
                ),
                LATEST_TIERED_TIMESTAMP: (highest_remote, _epoch_at(log, highest_remote)),
            }
            if timestamp in special:
                responses[tp] = PartitionListOffsetsResponse(Errors.NONE, -1, *special[timestamp])
            elif timestamp < 0:
                responses[tp] = PartitionListOffsetsResponse(Errors.INVALID_REQUEST)
            elif tiered and log.log_end_offset > log.log_start_offset:
                lookups[tp] = (timestamp, log)
            else:
                found = _offset_for_time(log, log.local_log_start_offset, timestamp)
                responses[tp] = (
                    PartitionListOffsetsResponse(Errors.NONE, *found)
                    if found is not None
                    else PartitionListOffsetsResponse(Errors.NONE)
                )
        if not lookups:
            respond(ListOffsetsResponse(responses))
            return
        operation = DelayedRemoteListOffsets(
            self.config.remote_list_offsets_request_timeout_ms,
            responses,
            set(lookups),
            respond,
            op_id=request.request_id or None,
        )
        for tp, (timestamp, log) in lookups.items():

            def done(result: Any, tp: TopicPartition = tp) -> None:
                operation.lookup_done(tp, result)
                self.remote_list_offsets_purgatory.check_and_complete(tp)

            self.remote_log_manager.async_offset_read(
                tp,
                timestamp,
                log,
                lambda log=log, timestamp=timestamp: _offset_for_time(
                    log, log.local_log_start_offset, timestamp
                ),
                done,
            )
        self.remote_list_offsets_purgatory.try_complete_else_watch(operation, list(request.timestamps))

    # ---- deleteRecords -------------------------------------------------------------------------------------
    # The leader moves its log start offset at once (``Partition.delete_records_on_leader``: -1 means the
    # HW; below -1 or above the HW is OFFSET_OUT_OF_RANGE; a topic whose ``cleanup.policy`` lacks
    # ``delete`` is POLICY_VIOLATION); if any partition was accepted, a DelayedDeleteRecords waits for
    # the low watermark to reach every accepted offset or ``timeout_ms``, else the answer goes out now.
    def delete_records(self, request: DeleteRecordsRequest, respond: Callable[[Any], None]) -> None:
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
        self,
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

    # ---- electLeaders -------------------------------------------------------------------------------------
    # The controller elects at once (``elect_leader``); the partitions it elected a leader for wait in the
    # ElectLeader purgatory until this broker's metadata shows that leader, or ``timeout_ms``; the ones it
    # refused keep its error. With none elected the answer goes out now.
    def elect_leaders(self, request: ElectLeadersRequest, respond: Callable[[Any], None]) -> None:
        """Kafka's ``ReplicaManager.electLeaders``: elect, then wait for the leaders in the metadata."""
        tracing = self.tracer.enabled
        if tracing:
            self.emit(
                "elect_leaders.request",
                op=request.request_id,
                keys=[str(tp) for tp in request.partitions],
                election=request.election_type,
                timeout_ms=request.timeout_ms,
            )
        expected: dict[TopicPartition, int] = {}
        refused: dict[TopicPartition, PartitionElectLeaderResponse] = {}
        for tp in request.partitions:
            outcome = self.elect_leader(tp, request.election_type)
            if isinstance(outcome, int):
                expected[tp] = outcome
            else:
                refused[tp] = PartitionElectLeaderResponse(*outcome)

        def answer(response: ElectLeadersResponse) -> None:
            if self.tracer.enabled:
                for tp, part in response.partitions.items():
                    self.emit(
                        "elect_leaders.response",
                        op=request.request_id,
                        partition=str(tp),
                        error=part.error.name,
                        cause=response.cause,
                    )
            respond(response)

        if not expected:
            answer(ElectLeadersResponse(refused))
            return
        operation = DelayedElectLeader(
            request.timeout_ms, expected, refused, self.leader_in_metadata, answer, request.request_id or None
        )
        self.elect_leader_purgatory.try_complete_else_watch(operation, list(expected))

    def leader_in_metadata(self, tp: TopicPartition) -> int:
        """The leader of ``tp`` as this broker knows it: its replica's, else the metadata's."""
        partition = self.partitions.get(tp)
        return partition.leader_id if partition is not None else self.metadata_leader(tp)

    # ---- becomeLeaderOrFollower and stopReplicas (leadership) ----------------------------------------------
    def apply_leader_and_isr(self, state: LeaderAndIsr) -> None:
        """The controller's decision for one partition; an ElectLeaders waiting on it is checked after."""
        self._become_leader_or_follower(state)
        if self.elect_leader_purgatory.num_delayed():
            self.elect_leader_purgatory.check_and_complete(state.tp)

    def _become_leader_or_follower(self, state: LeaderAndIsr) -> None:
        """The controller's decision for one partition: lead, follow, or just a new ISR."""
        tp = state.tp
        partition = self.partitions.get(tp)
        if self.broker_id not in state.replicas:
            if partition is not None and state.leader_epoch >= partition.leader_epoch:
                self.stop_replica(tp, delete=True)  # a completed or cancelled reassignment removed it
            return
        if partition is None:
            settings = self.log_config(tp.topic)
            log = self.logs.setdefault(tp, Log(settings.segment_bytes, settings.segment_ms))
            log.segment_bytes, log.segment_ms = settings.segment_bytes, settings.segment_ms
            log.on_roll = lambda: self._rolled(tp)
            if len(log.segments) > 1:
                self.log_cleaner.wake()
            partition = Partition(
                tp,
                self.broker_id,
                state.replicas,
                log,
                self.min_isr_for(tp.topic),
                self.config.replica_lag_time_max_ms,
                self.config.freeze_hw_under_min_isr,
                self.is_replica_isr_eligible,
                self.registrations_alive,
            )
            self.partitions[tp] = partition
        elif state.leader_epoch < partition.leader_epoch:
            return  # stale
        now = self.now()
        if state.replicas != partition.replicas:
            partition.update_replicas(state.replicas, now)
        was_leader = partition.is_leader
        if state.leader == self.broker_id:
            if was_leader and state.leader_epoch == partition.leader_epoch:
                if state.partition_epoch > partition.partition_epoch:
                    self.commit_isr(partition, state)
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

    def registrations_alive(self, broker: int) -> bool:
        """Kafka's ``metadataCache.hasAliveBroker``: registered and not fenced."""
        return broker not in self.registrations.fenced

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
        self.remote_fetch_purgatory.check_and_complete(tp)
        self.elect_leader_purgatory.check_and_complete(tp)

    # ---- ISR changes (maybeShrinkIsr, AlterPartition, commits) ---------------------------------------------
    # Every ``isr_expiration_period_ms`` (Kafka: half of ``replica.lag.time.max.ms``) each led partition
    # proposes to drop the followers that are not caught up; a follower fetch that brings an ISR-eligible
    # follower up to the HW proposes to add it. A commit sets the ISR and may raise the HW; a rejection
    # drops the pending change; a lost answer drops it and sends it again ALTER_PARTITION_RETRY_BACKOFF_MS
    # later (Kafka's AlterPartitionManager sends the proposals, and again until answered).
    async def run_isr_expiration(self) -> None:
        """Kafka's isr-expiration task: check every partition for a shrink, once a period."""
        period = self.config.isr_expiration_period_ms
        next_check = self.clock.now_ms() + period
        while True:
            await self.clock.sleep_until(next_check)
            next_check += period
            self.maybe_shrink_isr()

    def maybe_shrink_isr(self) -> None:
        """Propose to drop the lagging followers of every partition this broker leads."""
        now = self.now()
        for partition in self.partitions.values():
            proposed = partition.isr_shrink_candidate(now)
            if proposed is not None:
                self.alter_partition(partition, "shrink", proposed)

    def alter_partition(self, partition: Partition, kind: str, proposed: tuple[int, ...]) -> None:
        """Mark ``proposed`` pending on ``partition`` and send it to the controller."""
        partition.propose(kind, proposed)
        if self.tracer.enabled:
            self.emit(
                "isr.propose",
                partition=str(partition.tp),
                change=kind,
                isr=list(proposed),
                current=list(partition.isr),
            )
        request = AlterPartitionRequest(
            self.broker_id,
            partition.tp,
            partition.leader_epoch,
            partition.partition_epoch,
            proposed,
            self.broker_epoch,
        )
        epoch = partition.leader_epoch
        partition_epoch = partition.partition_epoch

        def retry() -> None:
            # the same change again, unless the partition moved on meanwhile
            if (
                not self.stopped
                and partition.is_leader
                and partition.leader_epoch == epoch
                and partition.partition_epoch == partition_epoch
                and partition.pending is None
                and self.partitions.get(partition.tp) is partition
            ):
                self.alter_partition(partition, kind, proposed)

        def on_response(response: Any) -> None:
            if self.stopped or partition.leader_epoch != epoch or not partition.is_leader:
                return
            if (
                isinstance(response, AlterPartitionResponse)
                and response.error is Errors.NONE
                and response.state
            ):
                self.commit_isr(partition, response.state)
            else:
                partition.pending = None
                error = (
                    response.error.name
                    if isinstance(response, (AlterPartitionResponse, NetworkError))
                    else "?"
                )
                if self.tracer.enabled:
                    self.emit("isr.rejected", partition=str(partition.tp), error=error)
                if isinstance(response, NetworkError):
                    # no answer (lost, or later than the request timeout): the controller may have
                    # committed it, and only an answer tells this leader so; Kafka's
                    # AlterPartitionManager sends it again (a commit now answers INVALID_UPDATE_VERSION
                    # with the state the controller has)
                    self.timer.add(TimerTask(ALTER_PARTITION_RETRY_BACKOFF_MS, retry))

        self.network.request(
            self.broker_id, CONTROLLER, request, self.config.replica_socket_timeout_ms, on_response
        )

    def commit_isr(self, partition: Partition, state: LeaderAndIsr) -> None:
        """The controller's ISR for a partition this broker leads (an answer or a LeaderAndIsr)."""
        if state.leader_epoch > partition.leader_epoch:
            self.apply_leader_and_isr(state)  # a reassignment that removed replicas bumped the epoch
            return
        if state.replicas != partition.replicas:
            partition.update_replicas(state.replicas, self.now())
        before = partition.high_watermark
        raised = partition.commit_isr(state.isr, state.partition_epoch, self.now())
        if self.tracer.enabled:
            self.emit(
                "isr.commit", partition=str(partition.tp), isr=list(state.isr), epoch=state.leader_epoch
            )
        if raised:
            self.trace_hw(partition, before)
        self.try_complete_delayed_requests(partition.tp)

    # ---- replica fetchers (the follower side) --------------------------------------------------------------
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

    # ---- figures -------------------------------------------------------------------------------------------
    def next_request_id(self, kind: str) -> str:
        return f"b{self.broker_id}-{kind}-{next(self.request_numbers)}"


def _offset_for_time(log: Log, start: int, target_ms: int) -> tuple[int, int, int] | None:
    """(append time, offset, leader epoch) of the first local batch from ``start`` appended at or after
    ``target_ms``, below the HW; None if there is none."""
    for batch in log.read(start, 2**62, log.high_watermark).batches:
        if batch.append_time_ms >= target_ms:
            return batch.append_time_ms, max(batch.base_offset, start), batch.leader_epoch
    return None


def _epoch_at(log: Log, offset: int) -> int:
    """The leader epoch of ``offset`` by the leader epoch cache (-1 before the first entry)."""
    epoch = -1
    for candidate, start in log.epochs:
        if start > offset:
            break
        epoch = candidate
    return epoch
