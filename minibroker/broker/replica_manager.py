"""ReplicaManager: one broker's partitions, its three purgatories, and their triggers.

The Produce, Fetch and DeleteRecords purgatories share the broker's one timer and
one Reaper (a deliberate deviation, docs/deviations.md: Kafka gives each purgatory its own timer). The
request paths are mixins in their own modules (``produce_path``, ``fetch_path``,
``delete_records_path``); this module holds the partitions, leadership and the
fetchers. Purgatories are checked when Kafka's ``ReplicaManager`` checks them
(https://github.com/apache/kafka/blob/trunk/core/src/main/scala/kafka/server/ReplicaManager.scala):

| event                                                    | purgatories checked          |
|----------------------------------------------------------|------------------------------|
| leader append raised the HW                              | produce, fetch, deleteRecords|
| leader append left the HW unchanged (the LEO moved)      | fetch                        |
| follower fetch raised the HW or the low watermark        | fetch, produce, deleteRecords|
| ISR change committed, or becoming leader raised the HW   | fetch, produce, deleteRecords|
| leadership lost (they answer NOT_LEADER_OR_FOLLOWER)     | produce, fetch               |
| follower appended replicated data                        | fetch                        |
| broker registrations changed and the HW rose             | fetch, produce, deleteRecords|

A DelayedDeleteRecords whose leader moved away is not checked (as in Kafka): it
answers REQUEST_TIMED_OUT at its timeout. Append triggers run after the request's
own delayed operation is registered (Kafka's action queue, KAFKA-8334). ISR
proposals and commits live in ``isr_changes``; the follower side (fetching and
appending) in ``replica_fetcher``.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from typing import Any

import trio

from minibroker.broker.config import BrokerConfig
from minibroker.broker.delayed_delete_records import DelayedDeleteRecords
from minibroker.broker.delayed_fetch import DelayedFetch
from minibroker.broker.delayed_produce import DelayedProduce
from minibroker.broker.delete_records_path import DeleteRecordsPath
from minibroker.broker.fetch_path import FetchPath
from minibroker.broker.isr_changes import IsrChanges
from minibroker.broker.log import Log
from minibroker.broker.partition import Partition
from minibroker.broker.produce_path import ProducePath
from minibroker.broker.pushed_errors import PushedErrors
from minibroker.broker.replica_fetcher import ReplicaFetcher
from minibroker.common.errors import Errors
from minibroker.common.messages import LeaderAndIsr, TopicPartition
from minibroker.controller.broker_registrations import BrokerRegistrations
from minibroker.purgatory import DelayedOperationPurgatory
from minibroker.runtime import MsClock, Reaper
from minibroker.sim.network import Network
from minibroker.timer import make_timer
from minibroker.trace import NULL_TRACER, Tracer


class ReplicaManager(ProducePath, FetchPath, DeleteRecordsPath):
    """Hosts partitions of one broker and answers produce, fetch and delete-records requests."""

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
        self.delete_records_purgatory: DelayedOperationPurgatory[DelayedDeleteRecords] = (
            DelayedOperationPurgatory(
                "DeleteRecords",
                self.timer,
                broker_id=broker_id,
                purge_interval=config.delete_records_purge_interval,
                tracer=tracer,
            )
        )
        for purgatory in self.purgatories:
            self.reaper.add_hook(purgatory.maybe_purge)
        self.partitions: dict[TopicPartition, Partition] = {}
        self.fetchers: dict[int, ReplicaFetcher] = {}
        self.fetchers_paused = False
        #: the metadata cache's broker states (fenced, controlled shutdown), as the controller last said
        self.registrations = BrokerRegistrations()
        self.isr_changes = IsrChanges(self)
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

    @property
    def purgatories(self) -> tuple[DelayedOperationPurgatory, ...]:
        """Produce, Fetch and DeleteRecords, in that order (the figures list them so)."""
        return (self.produce_purgatory, self.fetch_purgatory, self.delete_records_purgatory)

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

    def _lookup_error(self, tp: TopicPartition) -> Errors:
        return Errors.NOT_LEADER_OR_FOLLOWER if self.known(tp) else Errors.UNKNOWN_TOPIC_OR_PARTITION

    def try_complete_delayed_requests(self, tp: TopicPartition) -> None:
        """Kafka's ``Partition.tryCompleteDelayedRequests``: every purgatory of ``tp``."""
        self.fetch_purgatory.check_and_complete(tp)
        self.produce_purgatory.check_and_complete(tp)
        self.delete_records_purgatory.check_and_complete(tp)

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
