"""Broker: a node on the network that hosts a ReplicaManager, and can crash and restart.

The broker's logs outlive a crash (they are on disk); everything else does
not: on ``crash`` its tasks are cancelled, its purgatories and their waiting
requests vanish (requesters see their connection reset), and it drops off the
network. ``start`` builds a fresh ReplicaManager over the same logs.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from typing import Any

import trio

from minibroker.broker.config import BrokerConfig
from minibroker.broker.log import Log
from minibroker.broker.log_cleaner import KeyOf
from minibroker.broker.remote_storage_manager import RemoteStorageManager
from minibroker.broker.replica_manager import ReplicaManager
from minibroker.broker.share import ShareAcknowledgeRequest, ShareFetchRequest, SharePartitionManager
from minibroker.broker.share.persister import Persister
from minibroker.broker.views import BrokerView, PurgatoryView
from minibroker.common.errors import Errors
from minibroker.common.messages import (
    DeleteRecordsRequest,
    ElectLeadersRequest,
    FetchRequest,
    LeaderAndIsr,
    ListOffsetsRequest,
    MetadataCatchUp,
    ProduceRequest,
    TopicPartition,
)
from minibroker.common.network import NetworkClient
from minibroker.common.record_batch import COMMIT_MARKER
from minibroker.controller.broker_registrations import BrokerRegistrations
from minibroker.coordinator.group import OFFSETS_TOPIC, GroupCoordinator
from minibroker.coordinator.group import records as group_records
from minibroker.coordinator.group.messages import GroupRequest
from minibroker.coordinator.share import (
    ShareGroupCoordinator,
)
from minibroker.coordinator.share.messages import SHARE_GROUP_REQUESTS, SHARE_STATE_REQUESTS
from minibroker.coordinator.share.share_coordinator import ShareCoordinator, share_key
from minibroker.coordinator.transaction import (
    TRANSACTION_STATE_TOPIC,
    TransactionContext,
    TransactionCoordinator,
    transaction_metadata,
)
from minibroker.coordinator.transaction.messages import (
    AddPartitionsToTxnRequest,
    DescribeTransactionsRequest,
    EndTxnRequest,
    InitProducerIdRequest,
    ListTransactionsRequest,
)
from minibroker.runtime import MsClock
from minibroker.trace import NULL_TRACER, Tracer


def record_keys(topic: str) -> KeyOf | None:
    """How the log cleaner reads the keys of the coordinators' records (values without Kafka keys)."""
    if topic == OFFSETS_TOPIC:
        return group_records.compaction_key
    if topic == TRANSACTION_STATE_TOPIC:
        return transaction_metadata.compaction_key
    return None


class Broker:
    """Broker ``broker_id``: routes requests to its ReplicaManager while it is up."""

    def __init__(
        self,
        broker_id: int,
        config: BrokerConfig,
        clock: MsClock,
        network: NetworkClient,
        known: Callable[[TopicPartition], bool],
        tracer: Tracer = NULL_TRACER,
    ) -> None:
        self.broker_id = broker_id
        self.config = config
        self.clock = clock
        self.network = network
        self.known = known
        self.tracer = tracer
        self.logs: dict[TopicPartition, Log] = {}
        self.replica_manager: ReplicaManager | None = None
        self._scope: trio.CancelScope | None = None
        self.starts = 0
        #: purgatory totals of earlier lives (a crash forgets the purgatories, not what they did)
        self.retired: dict[str, dict[str, int]] = {}
        self._request_numbers = itertools.count(1)
        #: the group coordinator of the current life (None while down)
        self.coordinator: GroupCoordinator | None = None
        #: the transaction coordinator of the current life (None while down)
        self.transaction_coordinator: TransactionCoordinator | None = None
        #: the share partitions, share sessions and ShareFetch purgatory of the current life (None while down)
        self.share_partition_manager: SharePartitionManager | None = None
        #: the share groups of the current life's group coordinator (None while down)
        self.share_coordinator: ShareGroupCoordinator | None = None
        #: the share coordinator (``__share_group_state``) of the current life (None while down)
        self.share_state_coordinator: ShareCoordinator | None = None
        #: the broker coordinating a share-partition key (the cluster points this at its topics, making
        #: ``__share_group_state`` on first use); None keeps share-partition state in memory only
        self.share_coordinator_of: Callable[[str], int] | None = None
        #: a group's config overrides (the cluster points this at its group configs)
        self.group_configs: Callable[[str], dict[str, str]] = lambda group_id: {}
        #: the leader of a partition (the cluster points this at its controller)
        self.leader_of: Callable[[TopicPartition], int] = lambda tp: -1
        #: the controller's election for (partition, election type): the new leader or (error, message)
        self.elect_leader: Callable[[TopicPartition, int], int | tuple[Errors, str]] | None = None
        #: producer ids this broker's transaction coordinator hands out (a range per broker; a data dir sets
        #: its stored blocks, shared by every broker)
        self.producer_ids = itertools.count(1_000_000 * (broker_id + 1))
        #: the wall-clock time of the clock's 0 for records that outlive the process (a data dir sets it)
        self.clock_origin_ms = 0
        #: ms a transaction marker to a partition is held back from now (the control API sets it)
        self.marker_hold: Callable[[TopicPartition], int] = lambda tp: 0
        #: partitions of __consumer_offsets (the cluster points this at the topic once it exists)
        self.offsets_partitions: Callable[[], int] = lambda: self.config.offsets_topic_num_partitions
        #: a topic's config overrides (the cluster points this at its topics)
        self.topic_overrides: Callable[[str], dict[str, str]] = lambda topic: {}
        #: topic name -> partition count (the cluster points this at its topics; KIP-848's assignors read it)
        self.topic_partitions: Callable[[], dict[str, int]] = dict
        #: the remote tier of tiered storage (the cluster shares one between its brokers)
        self.remote_storage = RemoteStorageManager()
        #: called with no argument after every start and crash (e.g. a wire listener opens or closes)
        self._watchers: list[Callable[[], None]] = []
        network.register(broker_id, self)

    def watch(self, on_change: Callable[[], None]) -> None:
        """Call ``on_change()`` whenever the broker starts or stops (read ``alive`` for which)."""
        self._watchers.append(on_change)

    def _notify(self) -> None:
        for on_change in list(self._watchers):
            on_change()

    @property
    def alive(self) -> bool:
        return self.replica_manager is not None

    async def start(self, nursery: trio.Nursery) -> None:
        """Start (or restart) the broker's tasks in ``nursery``."""
        if self.alive:
            raise RuntimeError(f"broker {self.broker_id} is already running")
        manager = ReplicaManager(
            self.broker_id,
            self.config,
            self.clock,
            self.network,
            self.logs,
            self.known,
            self.tracer,
            self.remote_storage,
        )
        manager.request_numbers = self._request_numbers
        self.contain_errors(manager)
        manager.topic_overrides = self.topic_overrides
        manager.metadata_leader = self.leader_of
        manager.log_config_defaults = self.internal_topic_configs
        manager.record_keys = record_keys
        if self.elect_leader is not None:
            manager.elect_leader = self.elect_leader
        self.coordinator = GroupCoordinator(manager, self.offsets_partitions, self.tracer)
        self.coordinator.context.topic_partitions = lambda: self.topic_partitions()
        manager.leadership_listeners.append(self.coordinator.on_leadership)
        context = TransactionContext(manager, self.network, self.leader_of, self.producer_ids, self.tracer)
        context.origin_ms = self.clock_origin_ms
        self.transaction_coordinator = TransactionCoordinator(context)
        manager.add_partitions_to_txn.coordinator_of = lambda txn_id: self.leader_of(
            TopicPartition(TRANSACTION_STATE_TOPIC, context.partition_of(txn_id))
        )
        self.transaction_coordinator.marker_hold = lambda tp: self.marker_hold(tp)
        manager.leadership_listeners.append(self.transaction_coordinator.on_leadership)
        self.share_partition_manager = SharePartitionManager(manager)
        self.share_partition_manager.group_configs = lambda group_id: self.group_configs(group_id)
        self.share_coordinator = ShareGroupCoordinator(
            self.coordinator, lambda topic: self.topic_partitions().get(topic, 0)
        )
        self.share_state_coordinator = ShareCoordinator(manager)
        manager.leadership_listeners.append(self.share_state_coordinator.on_leadership)
        if self.share_coordinator_of is not None:
            locate = self.share_coordinator_of
            self.share_partition_manager.persister = Persister(
                manager, self.network, lambda group, tp: locate(share_key(group, tp.topic, tp.partition))
            )
            self.share_coordinator.persister = self.share_partition_manager.persister
        if self.tracer.enabled:
            manager.timer.tracer = self.tracer
            manager.timer.trace_context = {"broker": self.broker_id}
        self.replica_manager = manager
        self.starts += 1
        manager.broker_epoch = self.starts
        self.network.set_up(self.broker_id, True)
        scope = trio.CancelScope()
        self._scope = scope

        async def main(task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
            with scope:
                await manager.run(task_status=task_status)

        await nursery.start(main)
        self._notify()

    def internal_topic_configs(self, topic: str) -> dict[str, str]:
        """Kafka creates its internal topics compacted, with segments of their own size."""
        if topic == OFFSETS_TOPIC:
            return {
                "cleanup.policy": "compact",
                "segment.bytes": str(self.config.offsets_topic_segment_bytes),
            }
        if topic == TRANSACTION_STATE_TOPIC:
            segment = str(self.config.transaction_state_log_segment_bytes)
            return {"cleanup.policy": "compact", "segment.bytes": segment}
        return {}

    def contain_errors(self, manager: ReplicaManager | None = None) -> None:
        """Hand exceptions from the reaper's tasks to ``network.on_error`` (when set), as the network does."""
        manager = manager or self.replica_manager
        report = self.network.on_error
        if manager is not None and report is not None:
            manager.reaper.executor.on_error = lambda error: report(error, None)

    def crash(self) -> None:
        """Stop at once: waiting requests are lost, connections reset, the logs stay."""
        if not self.alive:
            return
        for name, totals in self.purgatory_totals().items():
            self.retired[name] = totals
        self.network.set_up(self.broker_id, False)
        if self._scope is not None:
            self._scope.cancel()
        self.replica_manager = None
        self.coordinator = None
        self.transaction_coordinator = None
        self.share_partition_manager = None
        self.share_coordinator = None
        self.share_state_coordinator = None
        self._scope = None
        self._notify()

    def deliver(self, src: Any, message: Any, respond: Callable[[Any], None] | None) -> None:
        manager = self.replica_manager
        if manager is None:
            return
        if isinstance(message, ProduceRequest):
            manager.append_records(message, self._marker_listener(message, respond))
        elif isinstance(message, FetchRequest):
            assert respond is not None
            manager.fetch_messages(message, respond)
        elif isinstance(message, DeleteRecordsRequest):
            assert respond is not None
            manager.delete_records(message, respond)
        elif isinstance(message, ListOffsetsRequest):
            assert respond is not None
            manager.list_offsets(message, respond)
        elif isinstance(message, ElectLeadersRequest):
            assert respond is not None
            manager.elect_leaders(message, respond)
        elif isinstance(message, LeaderAndIsr):
            manager.apply_leader_and_isr(message)
        elif isinstance(message, GroupRequest) and self.coordinator is not None:
            assert respond is not None
            self.coordinator.handle(message, respond)
        elif (
            isinstance(
                message,
                (
                    InitProducerIdRequest,
                    AddPartitionsToTxnRequest,
                    EndTxnRequest,
                    DescribeTransactionsRequest,
                    ListTransactionsRequest,
                ),
            )
            and self.transaction_coordinator is not None
        ):
            assert respond is not None
            self.transaction_coordinator.handle(message, respond)
        elif isinstance(message, SHARE_GROUP_REQUESTS):
            assert respond is not None and self.share_coordinator is not None
            self.share_coordinator.handle(message, respond)
        elif isinstance(message, SHARE_STATE_REQUESTS):
            assert respond is not None and self.share_state_coordinator is not None
            self.share_state_coordinator.handle(message, respond)
        elif isinstance(message, (ShareFetchRequest, ShareAcknowledgeRequest)):
            assert respond is not None and self.share_partition_manager is not None
            self.share_partition_manager.handle(message, respond)
        elif isinstance(message, BrokerRegistrations):
            manager.apply_registrations(message)
        elif isinstance(message, MetadataCatchUp):
            for state in message.states:
                known = manager.partitions.get(state.tp)
                have = (known.leader_id, known.leader_epoch, known.partition_epoch) if known else None
                if have != (state.leader, state.leader_epoch, state.partition_epoch):
                    manager.apply_leader_and_isr(state)
        else:
            raise TypeError(f"broker {self.broker_id} cannot handle {type(message).__name__}")

    def _marker_listener(self, request: ProduceRequest, respond: Callable[[Any], None] | None) -> Any:
        """``respond``, telling the group coordinator first of the transaction markers written to its
        ``__consumer_offsets`` partitions (Kafka's WriteTxnMarkers handler calls onTransactionCompleted)."""
        if respond is None:
            return respond
        markers = [
            (tp[1], batch.producer_id, batch.control == COMMIT_MARKER)
            for tp, data in request.data.items()
            if tp[0] == OFFSETS_TOPIC
            for batch in data.producers
            if batch.control >= 0
        ]
        if not markers:
            return respond

        def answer(response: Any) -> None:
            coordinator = self.coordinator
            for partition, producer_id, committed in markers:
                tp = TopicPartition(OFFSETS_TOPIC, partition)
                if coordinator is not None and response.partitions[tp].error is Errors.NONE:
                    coordinator.on_transaction_completed(partition, producer_id, committed)
            respond(response)

        return answer

    def purgatory_totals(self) -> dict[str, dict[str, int]]:
        """Completions, expirations, purges and purged per purgatory, over every life of the broker."""
        totals = {name: dict(values) for name, values in self.retired.items()}
        manager = self.replica_manager
        if manager is not None:
            for purgatory in manager.purgatories:
                into = totals.setdefault(
                    purgatory.name, {"completions": 0, "expirations": 0, "purges": 0, "purged": 0}
                )
                into["completions"] = into.get("completions", 0) + purgatory.completions
                into["expirations"] = into.get("expirations", 0) + purgatory.expirations
                into["purges"] = into.get("purges", 0) + purgatory.purges
                into["purged"] = into.get("purged", 0) + purgatory.purged
        return totals

    def snapshot(self) -> BrokerView:
        """The broker's timer, purgatory figures and fetcher state (empty while it is down)."""
        manager = self.replica_manager
        if manager is None:
            return BrokerView(self.broker_id, False, None, (), False)
        purgatories = tuple(
            PurgatoryView(
                p.name,
                p.watched(),
                p.num_delayed(),
                len(p.watched_keys()),
                p.completions,
                p.expirations,
                p.estimated_total,
                p.purges,
                p.purged,
                p.last_purge,
            )
            for p in manager.purgatories
        )
        coordinator = self.coordinator.snapshot() if self.coordinator is not None else None
        if coordinator is not None and not (coordinator.partitions or coordinator.loading):
            coordinator = None  # no __consumer_offsets partition led here: nothing to show
        transactions = None
        if self.transaction_coordinator is not None:
            transactions = self.transaction_coordinator.snapshot()
            if not (transactions.partitions or transactions.loading):
                transactions = None  # no __transaction_state partition led here
        return BrokerView(
            self.broker_id,
            True,
            manager.timer.snapshot(),
            purgatories,
            manager.fetchers_paused,
            coordinator,
            transactions,
        )

    def set_config(self, config: BrokerConfig) -> None:
        """Apply new settings; partitions pick up min ISR and lag at once, the rest on restart."""
        self.config = config
        manager = self.replica_manager
        if manager is None:
            return
        manager.config = config
        manager.produce_purgatory.purge_interval = config.producer_purge_interval
        manager.fetch_purgatory.purge_interval = config.fetch_purge_interval
        manager.delete_records_purgatory.purge_interval = config.delete_records_purge_interval
        manager.remote_log_manager.start()
        manager.log_cleaner.backoff_ms = config.log_cleaner_backoff_ms  # from its next pause on
        manager.log_cleaner.enabled = config.log_cleaner_enable
        for tp, partition in manager.partitions.items():
            partition.min_insync_replicas = manager.min_isr_for(tp.topic)
            partition.replica_lag_time_max_ms = config.replica_lag_time_max_ms
            partition.freeze_hw_under_min_isr = config.freeze_hw_under_min_isr
