"""Cluster: N brokers, a controller, a network and a scheduler, running on trio.

Use ``open_cluster`` inside ``trio.run`` (virtual time with
``MockClock(autojump_threshold=0)``)::

    async with open_cluster(brokers=3, topics=[TopicSpec("t", 1, 3)]) as cluster:
        producer = cluster.producer("p", acks=-1)
        request = await producer.send_and_wait("t", 0, count=2)

Topics are assigned like Kafka's default: partition ``p`` is replicated on
brokers ``p, p+1, ...`` (mod N) and led by the first. Faults can be injected
at any time: ``pause_fetcher``/``resume_fetcher``, ``set_latency``,
``drop_link``/``heal_link`` (both ways or one way), ``crash``/``restart``,
``shutdown`` (controlled), ``set_broker_config``. A broker whose messages to the
controller are dropped is fenced when its session runs out (the controller's
``BrokerHeartbeatManager``).
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Callable, Iterable, Mapping, Sequence
from typing import Any

import attrs
import trio

from minibroker.broker.broker import Broker
from minibroker.broker.config import BrokerConfig, ConfigError, ConsumerConfig, ProducerConfig
from minibroker.broker.remote_storage_manager import RemoteStorageManager
from minibroker.clients import ClientRequest, Consumer, Producer
from minibroker.clients.admin import AdminClient
from minibroker.clients.share_consumer import ShareConsumer
from minibroker.clients.transactional_producer import TransactionalProducer
from minibroker.common.errors import Errors
from minibroker.common.messages import LeaderAndIsr, TopicPartition
from minibroker.controller.quorum_controller import CONTROLLER, Controller
from minibroker.coordinator.group import OFFSETS_TOPIC, partition_for
from minibroker.coordinator.share.share_coordinator import SHARE_STATE_TOPIC, state_partition_for
from minibroker.coordinator.transaction import TRANSACTION_STATE_TOPIC
from minibroker.coordinator.transaction import partition_for as transaction_partition_for
from minibroker.runtime import MsClock, Scheduler
from minibroker.sim.network import Network
from minibroker.sim.snapshot import ClusterView, PartitionView, ReplicaView
from minibroker.trace import NULL_TRACER, Tracer


@attrs.frozen
class TopicSpec:
    """A topic: ``partitions`` partitions of ``replication_factor`` replicas, optionally assigned by hand."""

    name: str
    partitions: int = 1
    replication_factor: int = 1
    assignment: tuple[tuple[int, ...], ...] | None = None
    #: an internal topic (``__delay_5s``, ...): left out of a Metadata listing of all topics, answered
    #: when named (not flagged ``is_internal``: kafka-python will not produce to a flagged topic)
    internal: bool = False
    #: topic config overrides by Kafka's names, as strings (``topic_configs``: which ones are modelled)
    configs: dict[str, str] = attrs.field(factory=dict, hash=False)


class Cluster:
    """The emulated cluster; build it with ``open_cluster``."""

    def __init__(
        self,
        brokers: int = 3,
        config: BrokerConfig | Mapping[str, Any] | None = None,
        *,
        broker_configs: Mapping[int, Mapping[str, Any]] | None = None,
        latency_ms: int = 0,
        isr_commit_delay_ms: int = 0,
        crash_detection_ms: int = 0,
        tracer: Tracer = NULL_TRACER,
        storage: Any = None,
    ) -> None:
        if brokers < 1:
            raise ConfigError("a cluster needs at least one broker")
        base = config if isinstance(config, BrokerConfig) else BrokerConfig.from_kafka(config or {})
        self.clock = MsClock()
        self.tracer = tracer
        self.scheduler = Scheduler(self.clock, name="cluster")
        self.network = Network(self.scheduler, latency_ms, tracer)
        self.brokers: list[Broker] = []
        #: tiered storage's remote tier, one for the cluster (``remote_storage_manager``)
        self.remote_storage = RemoteStorageManager()
        for broker_id in range(brokers):
            overrides = (broker_configs or {}).get(broker_id)
            broker_config = base.with_kafka(overrides, f"broker {broker_id}") if overrides else base
            broker = Broker(broker_id, broker_config, self.clock, self.network, self.known, tracer)
            broker.leader_of = self.leader_of
            broker.elect_leader = self.elect_leader
            broker.topic_overrides = self.topic_overrides
            broker.topic_partitions = self.topic_partitions
            broker.share_coordinator_of = self.share_coordinator_for
            broker.group_configs = lambda group_id: self.resource_configs.get((32, group_id), {})
            broker.remote_storage = self.remote_storage
            self.brokers.append(broker)
        #: each broker's settings as the cluster was made with them (a dynamic config deleted returns here)
        self.static_configs = {broker.broker_id: broker.config for broker in self.brokers}
        #: dynamic broker configs set through the admin API: "" (every broker) or a broker id -> settings
        self.dynamic_configs: dict[str, dict[str, Any]] = {}
        #: configs of the other resources the admin API keeps (groups, client metrics subscriptions,
        #: broker loggers): (Kafka's resource type, name) -> settings
        self.resource_configs: dict[tuple[int, str], dict[str, str]] = {}
        #: topic name -> times a topic of that name was deleted (a topic made again gets a new topic id)
        self.topic_deletions: dict[str, int] = {}
        self.controller = Controller(
            self.network,
            self.scheduler,
            self.is_alive,
            self._apply_direct,
            brokers=tuple(range(brokers)),
            isr_commit_delay_ms=isr_commit_delay_ms,
            crash_detection_ms=crash_detection_ms,
            unclean_leader_election=self._unclean,
            session_timeout_ms=lambda: base.broker_session_timeout_ms,
            heartbeat_interval_ms=lambda b: self.brokers[b].config.broker_heartbeat_interval_ms,
            heartbeat_latency_ms=lambda b: self.network.latency(b, CONTROLLER),
            tracer=tracer,
        )
        self.topics: dict[str, TopicSpec] = {}
        self.requests: list[ClientRequest] = []
        self.clients: dict[str, Producer | Consumer | AdminClient] = {}
        self._nursery: trio.Nursery | None = None
        #: services beside the brokers (``minibroker.delayed_messages``) follow each broker's life through
        #: these: ``broker_stopped(id)`` on crash/shutdown, ``await broker_started(id)`` on restart
        self.broker_hooks: list[Any] = []
        #: route ``Producer.send(..., delay_ms=...)`` by design ("levels", "wheel"); from
        #: ``minibroker.delayed_messages``
        self.delay_routers: dict[str, Any] = {}
        #: the cluster's files (``minibroker.sim.storage.DataDir``): None keeps everything in memory
        self.storage = storage
        self._adopted: set[str] = set()
        #: called after topics are created, deleted or reconfigured (a data dir stores the metadata)
        self.on_metadata_change: Callable[[], None] = lambda: None

    # --- lifecycle ---------------------------------------------------------------------------
    async def start(self, nursery: trio.Nursery) -> None:
        self._nursery = nursery
        await nursery.start(self.scheduler.run)
        if self.storage is not None:
            self.storage.load(self)
        for broker in self.brokers:
            await broker.start(nursery)
        if self.storage is not None:
            await self.storage.started(self, nursery)

    def now(self) -> int:
        return self.clock.now_ms()

    def contain_errors(self, report: Callable[[Exception, Any], object]) -> None:
        """Keep running past a bug: hand an exception from a callback to ``report(error, requester)``.

        By default an exception anywhere in the cluster ends it (and the test or run that drove it): in
        an emulation a bug must not go unnoticed. A server that real clients share (``minibroker
        serve``) calls this instead. Invariant afterwards: an ``Exception`` raised by a message's
        delivery, a response callback, or a task on the cluster's scheduler or any broker's reaper
        (a purgatory expiration, a coordinator completion; restarted brokers included) never reaches
        the cluster's nursery. It ends only that callback (its remaining effects are not applied); the
        request being delivered, if it is not answered yet, is answered ``NetworkError``
        UNKNOWN_SERVER_ERROR with the exception as ``cause`` (``requester`` names its node; None when no
        request could be failed); and ``report`` gets it with its traceback. A request whose answer was
        to come from a callback that raised elsewhere (a DelayedProduce completed by a follower's fetch,
        a coordinator timer) is not failed by it: it waits for its own timeout. The brokers'
        long-running tasks (replica fetchers, the ISR expiration loop) and services started beside the
        cluster are not covered: an exception there still ends the cluster.
        """
        self.network.on_error = report
        self.scheduler.reaper.executor.on_error = lambda error: report(error, None)
        for broker in self.brokers:
            broker.contain_errors()

    @property
    def nursery(self) -> trio.Nursery:
        """The cluster's nursery: services started in it (``minibroker.delayed_messages``) stop with it."""
        assert self._nursery is not None, "the cluster is not running"
        return self._nursery

    def is_alive(self, broker_id: int) -> bool:
        return 0 <= broker_id < len(self.brokers) and self.brokers[broker_id].alive

    def _apply_direct(self, broker_id: int, state: LeaderAndIsr) -> None:
        manager = self.brokers[broker_id].replica_manager
        if manager is not None:
            manager.apply_leader_and_isr(state)

    def _unclean(self, tp: TopicPartition) -> bool:
        override = self.topic_overrides(tp.topic).get("unclean.leader.election.enable")
        if override is not None:
            return override == "true"
        leader_config = self.brokers[self.controller.state[tp].replicas[0]].config
        return leader_config.unclean_leader_election_enable

    def topic_overrides(self, topic: str) -> dict[str, str]:
        """The topic's config overrides (empty for an unknown topic)."""
        spec = self.topics.get(topic)
        return spec.configs if spec is not None else {}

    def set_topic_configs(self, name: str, configs: dict[str, str]) -> None:
        """Replace ``name``'s overrides (checked by the caller); live partitions take min ISR at once."""
        self.topics[name] = attrs.evolve(self.topics[name], configs=dict(configs))
        self.on_metadata_change()
        for broker in self.brokers:
            manager = broker.replica_manager
            if manager is None:
                continue
            for tp, partition in manager.partitions.items():
                if tp.topic == name:
                    partition.min_insync_replicas = manager.min_isr_for(name)
                    manager.remote_log_manager.on_topic_config(tp)
        self._fault("topic_config", topic=name, settings=dict(configs))

    def topic_partitions(self) -> dict[str, int]:
        """Topic name -> partition count."""
        return {name: spec.partitions for name, spec in self.topics.items()}

    def known(self, tp: TopicPartition) -> bool:
        spec = self.topics.get(tp.topic)
        return spec is not None and 0 <= tp.partition < spec.partitions

    # --- topics ------------------------------------------------------------------------------
    def replicas_problem(self, adding: int) -> str | None:
        """Why ``adding`` more partition replicas would pass ``minibroker.partition.replicas.max``."""
        total = sum(t.partitions * t.replication_factor for t in self.topics.values()) + adding
        most = self.brokers[0].config.partition_replicas_max
        if total <= most:
            return None
        return (
            f"the cluster would hold {total:,} partition replicas, more than "
            f"minibroker.partition.replicas.max ({most:,})"
        )

    def create_topic(self, spec: TopicSpec) -> None:
        n = len(self.brokers)
        restored = self.topics.get(spec.name) if self.storage is not None else None
        if restored is not None and spec.name not in self._adopted:
            # a topic the data dir restored, asked for again: the stored one, if the layout agrees
            if (restored.partitions, restored.replication_factor) != (
                spec.partitions,
                spec.replication_factor,
            ):
                raise ConfigError(
                    f"topic {spec.name!r}: the data dir holds {restored.partitions} partitions with "
                    f"replication factor {restored.replication_factor}"
                )
            self._adopted.add(spec.name)
            return
        if spec.name in self.topics:
            raise ConfigError(f"topic {spec.name!r} exists already")
        if spec.partitions < 1:
            raise ConfigError(f"topic {spec.name!r}: partitions must be >= 1")
        if not 1 <= spec.replication_factor <= n:
            raise ConfigError(f"topic {spec.name!r}: replication factor must be between 1 and {n} (brokers)")
        # internal topics are bounded by their own settings, and the run's budget counts them
        problem = (
            None
            if spec.internal or spec.name == OFFSETS_TOPIC
            else self.replicas_problem(spec.partitions * spec.replication_factor)
        )
        if problem is not None:
            raise ConfigError(f"topic {spec.name!r}: {problem}")
        assignment = spec.assignment or tuple(
            tuple((p + i) % n for i in range(spec.replication_factor)) for p in range(spec.partitions)
        )
        if len(assignment) != spec.partitions:
            raise ConfigError(
                f"topic {spec.name!r}: assignment lists {len(assignment)} partitions, not {spec.partitions}"
            )
        for p, replicas in enumerate(assignment):
            if len(set(replicas)) != len(replicas) or any(not 0 <= b < n for b in replicas) or not replicas:
                raise ConfigError(
                    f"topic {spec.name!r} partition {p}: replicas {list(replicas)} "
                    f"must be distinct brokers 0..{n - 1}"
                )
        self.topics[spec.name] = spec
        self._adopted.add(spec.name)
        for p, replicas in enumerate(assignment):
            self.controller.create_partition(TopicPartition(spec.name, p), tuple(replicas))
        self.on_metadata_change()

    def leader_of(self, tp: TopicPartition) -> int:
        return self.controller.leader_of(tp)

    def elect_leader(self, tp: TopicPartition, election_type: int) -> int | tuple[Errors, str]:
        """The controller's side of ElectLeaders for ``tp``: the leader elected, or why none was."""
        return self.controller.elect_leaders(tp, election_type)

    # --- groups ------------------------------------------------------------------------------
    def ensure_offsets_topic(self) -> TopicSpec:
        """Create ``__consumer_offsets`` on first use, as Kafka does: ``offsets.topic.num.partitions``
        partitions, replication factor min(``offsets.topic.replication.factor``, brokers)."""
        spec = self.topics.get(OFFSETS_TOPIC)
        if spec is None:
            config = self.brokers[0].config
            rf = min(config.offsets_topic_replication_factor, len(self.brokers))
            spec = TopicSpec(OFFSETS_TOPIC, config.offsets_topic_num_partitions, rf)
            if self.tracer.enabled:
                self.tracer.emit("topic.create", topic=OFFSETS_TOPIC, partitions=spec.partitions, rf=rf)
            for broker in self.brokers:
                broker.offsets_partitions = lambda n=spec.partitions: n
            self.create_topic(spec)
        return spec

    def coordinator_for(self, group_id: str) -> int:
        """The broker coordinating ``group_id`` (leader of its partition), -1 when it has none."""
        spec = self.ensure_offsets_topic()
        return self.leader_of(TopicPartition(OFFSETS_TOPIC, partition_for(group_id, spec.partitions)))

    # --- transactions ------------------------------------------------------------------------
    def ensure_transaction_state_topic(self) -> TopicSpec:
        """Create ``__transaction_state`` on first use, as Kafka does.

        Partitions: ``transaction.state.log.num.partitions``; replication factor:
        min(``transaction.state.log.replication.factor``, brokers); min ISR:
        min(``transaction.state.log.min.isr``, that replication factor).
        """
        config = self.brokers[0].config
        return self._ensure_state_topic(
            TRANSACTION_STATE_TOPIC,
            config.transaction_state_log_num_partitions,
            config.transaction_state_log_replication_factor,
            config.transaction_state_log_min_isr,
        )

    def _ensure_state_topic(
        self, name: str, partitions: int, replication_factor: int, min_isr: int
    ) -> TopicSpec:
        """Create the internal topic ``name`` unless it exists: replication factor min(``replication_factor``,
        brokers), min ISR min(``min_isr``, that)."""
        spec = self.topics.get(name)
        if spec is None:
            rf = min(replication_factor, len(self.brokers))
            spec = TopicSpec(name, partitions, rf, configs={"min.insync.replicas": str(min(min_isr, rf))})
            if self.tracer.enabled:
                self.tracer.emit("topic.create", topic=name, partitions=spec.partitions, rf=rf)
            self.create_topic(spec)
        return spec

    def transaction_coordinator_for(self, transactional_id: str) -> int:
        """The broker coordinating ``transactional_id`` (leader of its partition), -1 when it has none."""
        spec = self.ensure_transaction_state_topic()
        partition = transaction_partition_for(transactional_id, spec.partitions)
        return self.leader_of(TopicPartition(TRANSACTION_STATE_TOPIC, partition))

    # --- share groups ------------------------------------------------------------------------
    def ensure_share_state_topic(self) -> TopicSpec:
        """Create ``__share_group_state`` on first use: ``share.coordinator.state.topic.num.partitions``
        partitions, replication factor min(``...replication.factor``, brokers), min ISR
        min(``share.coordinator.state.topic.min.isr``, that)."""
        config = self.brokers[0].config
        return self._ensure_state_topic(
            SHARE_STATE_TOPIC,
            config.share_coordinator_state_topic_num_partitions,
            config.share_coordinator_state_topic_replication_factor,
            config.share_coordinator_state_topic_min_isr,
        )

    def share_coordinator_for(self, key: str) -> int:
        """The broker keeping share-partition ``key``'s state (leader of its partition), -1 when none."""
        spec = self.ensure_share_state_topic()
        return self.leader_of(TopicPartition(SHARE_STATE_TOPIC, state_partition_for(key, spec.partitions)))

    # --- clients -----------------------------------------------------------------------------
    def producer(
        self, client_id: str, config: ProducerConfig | Mapping[str, Any] | None = None, **settings: Any
    ) -> Producer:
        producer_config = (
            config if isinstance(config, ProducerConfig) else ProducerConfig.from_kafka(config or {})
        )
        if settings:
            producer_config = attrs.evolve(producer_config, **settings)
        if producer_config.transactional_id:
            return self._add_client(TransactionalProducer(self, client_id, producer_config))
        return self._add_client(Producer(self, client_id, producer_config))

    def consumer(
        self, client_id: str, config: ConsumerConfig | Mapping[str, Any] | None = None, **settings: Any
    ) -> Consumer:
        consumer_config = (
            config if isinstance(config, ConsumerConfig) else ConsumerConfig.from_kafka(config or {})
        )
        if settings:
            consumer_config = attrs.evolve(consumer_config, **settings)
        return self._add_client(Consumer(self, client_id, consumer_config))

    def share_consumer(
        self, client_id: str, topics: Sequence[str], config: Mapping[str, Any] | None = None
    ) -> ShareConsumer:
        """A share-group member (KIP-932) on ``topics``; ``config`` needs a ``group.id``."""
        consumer_config = ConsumerConfig.from_kafka(config or {})
        if not consumer_config.group_id:
            raise ConfigError(f"share consumer {client_id}: expected a group.id in its config")
        return self._add_client(ShareConsumer(self, client_id, consumer_config, topics))

    def admin(self, client_id: str) -> AdminClient:
        """An admin client (DeleteRecords); the same one again for an id it already has."""
        existing = self.clients.get(client_id)
        if isinstance(existing, AdminClient):
            return existing
        return self._add_client(AdminClient(self, client_id))

    def _add_client(self, client: Any) -> Any:
        if client.client_id in self.clients or client.client_id == CONTROLLER:
            raise ConfigError(f"client id {client.client_id!r} is taken")
        self.clients[client.client_id] = client
        return client

    # --- faults ------------------------------------------------------------------------------
    def _broker(self, broker_id: int) -> Broker:
        if not 0 <= broker_id < len(self.brokers):
            raise ConfigError(f"no broker {broker_id}: brokers are 0..{len(self.brokers) - 1}")
        return self.brokers[broker_id]

    def _fault(self, kind: str, **fields: Any) -> None:
        if self.tracer.enabled:
            self.tracer.emit("fault", fault=kind, **fields)

    def pause_fetcher(self, broker_id: int) -> None:
        """The follower ``broker_id`` sends no new fetch until resumed."""
        self._broker(broker_id)
        self._fault("pause", broker=broker_id)
        manager = self.brokers[broker_id].replica_manager
        if manager is not None:
            manager.pause_fetchers(True)

    def resume_fetcher(self, broker_id: int) -> None:
        self._broker(broker_id)
        self._fault("resume", broker=broker_id)
        manager = self.brokers[broker_id].replica_manager
        if manager is not None:
            manager.pause_fetchers(False)

    def set_latency(self, a: Any, b: Any, latency_ms: int) -> None:
        self._fault("latency", src=str(a), dst=str(b), latency_ms=latency_ms)
        self.network.set_latency(a, b, latency_ms)

    def drop_link(self, a: Any, b: Any, one_way: bool = False) -> None:
        """Lose every message between ``a`` and ``b`` (with ``one_way``, only those from ``a`` to ``b``)."""
        self._fault("drop", src=str(a), dst=str(b), **({"one_way": True} if one_way else {}))
        heard = self._heard_brokers(a, b)
        self.network.drop(a, b, one_way)
        for broker in heard - self._heard_brokers(a, b):
            self.controller.heartbeats_lost(broker)

    def heal_link(self, a: Any, b: Any, one_way: bool = False) -> None:
        """Stop losing messages between ``a`` and ``b`` (with ``one_way``, those from ``a`` to ``b``)."""
        self._fault("heal", src=str(a), dst=str(b), **({"one_way": True} if one_way else {}))
        heard = self._heard_brokers(a, b)
        self.network.heal(a, b, one_way)
        for broker in self._heard_brokers(a, b) - heard:
            self.controller.heartbeats_resumed(broker)
        for end, other in ((a, b), (b, a)):
            if end == CONTROLLER and isinstance(other, int) and 0 <= other < len(self.brokers):
                self.controller.catch_up(other)

    def _heard_brokers(self, a: Any, b: Any) -> set[int]:
        """Of ``a`` and ``b``, the brokers whose messages reach the controller (on that link) now."""
        if CONTROLLER not in (a, b):
            return set()
        return {
            node
            for node in (a, b)
            if isinstance(node, int)
            and 0 <= node < len(self.brokers)
            and not self.network.is_dropped(node, CONTROLLER)
        }

    def crash(self, broker_id: int) -> None:
        """Kill the broker: its waiting requests are lost, its log is kept; the controller fails over."""
        broker = self._broker(broker_id)
        if not broker.alive:
            return
        self._fault("crash", broker=broker_id)
        broker.crash()
        self.controller.broker_crashed(broker_id)
        for hook in self.broker_hooks:
            hook.broker_stopped(broker_id)

    async def restart(self, broker_id: int) -> None:
        broker = self._broker(broker_id)
        if broker.alive:
            return
        assert self._nursery is not None, "the cluster is not running"
        self._fault("restart", broker=broker_id)
        await broker.start(self._nursery)
        self.controller.broker_started(broker_id)
        if self.network.is_dropped(broker_id, CONTROLLER):
            self.controller.heartbeats_lost(broker_id)
        for hook in self.broker_hooks:
            await hook.broker_started(broker_id)

    def shutdown(self, broker_id: int) -> None:
        """Controlled shutdown: leadership moves first, so waiting requests answer NOT_LEADER_OR_FOLLOWER."""
        broker = self._broker(broker_id)
        if not broker.alive:
            return
        self._fault("shutdown", broker=broker_id)
        self.controller.controlled_shutdown(broker_id)
        broker.crash()
        for hook in self.broker_hooks:
            hook.broker_stopped(broker_id)

    def move_leader(self, tp: TopicPartition, broker_id: int) -> None:
        """Elect ``broker_id`` (alive, in the ISR) leader of ``tp``; ``ConfigError`` says why not."""
        self._broker(broker_id)
        refused = self.controller.move_leader(tp, broker_id)
        if refused is not None:
            raise ConfigError(f"cannot move {tp}'s leader to broker {broker_id}: {refused}")
        self._fault("move_leader", partition=str(tp), broker=broker_id)

    def set_broker_config(self, broker_id: int, settings: Mapping[str, Any]) -> None:
        broker = self._broker(broker_id)
        broker.set_config(broker.config.with_kafka(settings, f"broker {broker_id}"))
        self._fault("config", broker=broker_id, settings={k: str(v) for k, v in settings.items()})

    def remote_storage_system_enabled(self) -> bool:
        """Whether the brokers have tiered storage on (``remote.log.storage.system.enable``)."""
        return any(broker.config.remote_log_storage_system_enable for broker in self.brokers)

    # --- views -------------------------------------------------------------------------------
    def snapshot(self) -> ClusterView:
        brokers = [broker.snapshot() for broker in self.brokers]
        partitions = []
        for tp, state in sorted(self.controller.state.items()):
            replicas = []
            for broker_id in state.replicas:
                broker = self.brokers[broker_id]
                log = broker.logs.get(tp)
                manager = broker.replica_manager
                replicas.append(
                    ReplicaView(
                        broker_id,
                        log.log_end_offset if log else 0,
                        log.high_watermark if log else 0,
                        log.log_start_offset if log else 0,
                        broker.alive,
                        manager.fetchers_paused if manager else False,
                        log.local_log_start_offset if log else 0,
                        log.last_stable_offset if log else 0,
                    )
                )
            pending = None
            leader = self.brokers[state.leader].replica_manager if state.leader >= 0 else None
            if leader is not None and tp in leader.partitions and leader.partitions[tp].pending is not None:
                pending = leader.partitions[tp].pending.proposed
            move = self.controller.reassignments.get(tp)
            partitions.append(
                PartitionView(
                    str(tp),
                    state.leader,
                    state.leader_epoch,
                    state.isr,
                    pending,
                    tuple(replicas),
                    move.adding if move else (),
                    move.removing if move else (),
                )
            )
        return ClusterView(self.now(), tuple(brokers), tuple(partitions))


@contextlib.asynccontextmanager
async def open_cluster(
    brokers: int = 3,
    topics: Iterable[TopicSpec] = (),
    config: BrokerConfig | Mapping[str, Any] | None = None,
    **options: Any,
) -> AsyncIterator[Cluster]:
    """Start a cluster in a nursery of its own; everything stops when the block exits."""
    cluster = Cluster(brokers, config, **options)
    async with trio.open_nursery() as nursery:
        await cluster.start(nursery)
        for spec in topics:
            cluster.create_topic(spec)
        try:
            yield cluster
        finally:
            nursery.cancel_scope.cancel()
