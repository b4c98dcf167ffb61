"""Play a scenario on an emulated cluster and check its expectations.

The timeline (steps and timed expectations) is played by one driver task in
time order; items at the same ms run in file order, steps before the
expectations of that ms. A timed expectation looks at the cluster at the *end*
of its millisecond, once every task has run out of things to do at that
instant. Load generators and pollers run as tasks of their own.

Without ``end_ms`` the run ends once the timeline is done and every request
has been answered (or given up on by its client).

Virtual time (the default) is instant and, for a given seed, deterministic:
``deterministic_scheduling(seed)`` fixes trio's order among tasks woken in the
same instant. ``speed`` paces the same virtual time at that multiple of real
time (``PacedClock``: time moves only while every task waits), so a paced run
is event for event, millisecond for millisecond, the instant one.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import attrs
import trio
import trio.testing

from minibroker.broker.share.share_partition import AcknowledgeType
from minibroker.clients import ClientRequest, Consumer, Producer, TransactionalProducer
from minibroker.clients.share_consumer import ShareConsumer
from minibroker.common.messages import ProduceData, TopicPartition
from minibroker.common.record_batch import build_batch
from minibroker.runtime import PacedClock, deterministic_scheduling, quiet_gc
from minibroker.scenario import expect
from minibroker.scenario.expect_groups import check_group, check_member
from minibroker.scenario.expect_transactions import check_transaction, last_stable_offset
from minibroker.scenario.feature import FeatureRun, features
from minibroker.scenario.model import (
    BrokerFault,
    Count,
    DeleteRecords,
    ElectLeaders,
    Event,
    Expectation,
    Fetch,
    GroupState,
    LinkFault,
    ListOffsets,
    Load,
    MemberAction,
    MemberErrors,
    PartitionState,
    Poll,
    Produce,
    PurgatoryFigures,
    RequestOutcome,
    Scenario,
    SetConfig,
    ShareStep,
    Step,
    TransactionState,
    TransactionStep,
)
from minibroker.sim.cluster import Cluster, TopicSpec, open_cluster
from minibroker.sim.snapshot import ClusterView
from minibroker.trace import NULL_TRACER, RecordingTracer
from minibroker.trace import Event as TraceEvent

Progress = Callable[[int], None]


@attrs.define
class RunResult:
    scenario: Scenario
    seed: int
    end_ms: int
    requests: list[ClientRequest]
    named: dict[str, list[ClientRequest]]
    final: ClusterView
    purgatory_totals: dict[int, dict[str, dict[str, int]]]
    results: list[expect.ExpectationResult]
    trace_events: int

    @property
    def passed(self) -> bool:
        return all(result.passed for result in self.results)


class ScenarioRunner:
    """Plays one scenario; ``run`` is async so a front end (the TUI) can run beside it.

    ``ready`` is set once the cluster and clients exist (``cluster`` is then usable). Each registered
    feature (``minibroker.scenario.feature``) has its part of the run in ``features``, made with
    ``seed`` (default: the scenario's), and checks its own expectations.
    """

    def __init__(
        self,
        scenario: Scenario,
        sinks: Sequence[Callable[[TraceEvent], object]],
        progress: Progress | None,
        seed: int | None = None,
        storage: Any = None,
    ):
        self.scenario = scenario
        #: the cluster's files (``minibroker.sim.storage.DataDir``; ``serve --data-dir``), or None
        self.storage = storage
        seed = scenario.seed if seed is None else seed
        self.features: dict[str, FeatureRun] = {f.name: f.run(scenario, seed) for f in features()}
        #: each feature's expectation kinds, by model type: (kind, the feature's run)
        self._feature_checks = {
            kind.model: (kind, self.features[f.name]) for f in features() for kind in f.expectations
        }
        self.progress = progress or (lambda now: None)
        self.named: dict[str, list[ClientRequest]] = {}
        self.results: dict[int, expect.ExpectationResult] = {}
        self.kept: list[dict[str, Any]] = []
        self.keep_kinds = self._kinds_to_keep()
        self.events = 0
        sink_list = list(sinks)
        if self.keep_kinds:
            sink_list.append(self._keep)
        if sink_list:
            sink_list.append(self._count)
        self.tracer = RecordingTracer(lambda: 0, sink_list) if sink_list else NULL_TRACER
        self.cluster: Cluster | None = None
        self.ready = trio.Event()

    def _kinds_to_keep(self) -> set[str]:
        kinds = set()
        for expectation in self.scenario.expectations:
            if isinstance(expectation, Event):
                kinds.add(expectation.fields["kind"])
            elif isinstance(expectation, Count) and expectation.count == "events":
                kinds.add(expectation.filters["event"]["kind"])
        return kinds

    def _keep(self, event: TraceEvent) -> None:
        if event["kind"] in self.keep_kinds:
            self.kept.append(dict(event))

    def _count(self, event: TraceEvent) -> None:
        self.events += 1

    # --- the run ---------------------------------------------------------------------------------
    async def run(self, seed: int) -> RunResult:
        """Run the scenario; what a feature needs outside the run (a redis backend's server) is reached
        (or started) first, and released after, also when cancelled (serve's Ctrl-C)."""
        for feature in self.features.values():
            feature.prepare()
        try:
            return await self._run(seed)
        finally:
            for feature in self.features.values():
                feature.close()

    def views(self) -> dict[str, Any]:
        """Each feature's state now, for the live view (None for a feature the scenario does not use)."""
        return {name: feature.view() for name, feature in self.features.items()}

    async def _run(self, seed: int) -> RunResult:
        spec = self.scenario.cluster
        async with open_cluster(
            spec.brokers,
            [
                TopicSpec(t.name, t.partitions, t.replication_factor, t.assignment, configs=dict(t.configs))
                for t in self.scenario.topics
            ],
            spec.config,
            broker_configs={b: {**spec.config, **o} for b, o in spec.broker_overrides.items()},
            latency_ms=spec.latency_ms,
            isr_commit_delay_ms=spec.isr_commit_delay_ms,
            crash_detection_ms=spec.crash_detection_ms,
            tracer=self.tracer,
            storage=self.storage,
        ) as cluster:
            if isinstance(self.tracer, RecordingTracer):
                self.tracer.clock = cluster.now
            self.cluster = cluster
            self.clients: dict[str, Producer | Consumer | ShareConsumer] = {}
            for client in self.scenario.clients:
                if client.type == "producer":
                    self.clients[client.id] = cluster.producer(client.id, client.config)
                elif client.type == "share_consumer":
                    self.clients[client.id] = cluster.share_consumer(
                        client.id, client.subscribe, client.config
                    )
                else:
                    consumer = cluster.consumer(client.id, client.config)
                    for topic, partition, offset in client.assign:
                        consumer.assign([TopicPartition(topic, partition)], offset)
                    self.clients[client.id] = consumer
            if any(isinstance(c, TransactionalProducer) for c in self.clients.values()):
                # made at the start (Kafka: at the first FindCoordinator): its leaders are ready early
                cluster.ensure_transaction_state_topic()
            for link in self.scenario.links:
                cluster.network.set_latency(link.between[0], link.between[1], link.latency_ms)
            for feature in self.features.values():
                await feature.start(cluster)
            self.ready.set()
            async with trio.open_nursery() as members:
                self.members = members  # group memberships run until the timeline is over
                async with trio.open_nursery() as workers:
                    await self._timeline(workers)
                members.cancel_scope.cancel()
            await self._settle()
            final = cluster.snapshot()
            totals = {b.broker_id: b.purgatory_totals() for b in cluster.brokers}
            end = cluster.now()
            self.progress(end)
            requests = list(cluster.requests)
        results = [
            self.results[e.index] if e.index in self.results else self._check_at_end(e, requests, totals)
            for e in self.scenario.expectations
        ]
        return RunResult(self.scenario, seed, end, requests, self.named, final, totals, results, self.events)

    async def _timeline(self, workers: trio.Nursery) -> None:
        timed: list[tuple[int, int, int, Step | Expectation]] = [
            (s.at, 0, s.index, s) for s in self.scenario.steps
        ]
        features_timed = [model for model, (kind, _) in self._feature_checks.items() if kind.timed]
        checked_at = (PartitionState, PurgatoryFigures, GroupState, TransactionState, *features_timed)
        timed += [(e.at, 1, e.index, e) for e in self.scenario.expectations if isinstance(e, checked_at)]
        clock = self.cluster.clock
        for at, _, _, item in sorted(timed, key=lambda x: x[:3]):
            await clock.sleep_until(at)
            self.progress(at)
            if isinstance(item, Step):
                await self._step(item, workers)
            else:
                await trio.testing.wait_all_tasks_blocked()
                if isinstance(item, GroupState):
                    self.results[item.index] = check_group(item, self.cluster)
                    continue
                if isinstance(item, TransactionState):
                    self.results[item.index] = check_transaction(item, self.cluster)
                    continue
                if type(item) in self._feature_checks:
                    kind, feature = self._feature_checks[type(item)]
                    self.results[item.index] = kind.check(item, feature)
                    continue
                view = self.cluster.snapshot()
                if isinstance(item, PartitionState):
                    lso = None if item.lso is None else last_stable_offset(self.cluster, item.partition)
                    self.results[item.index] = expect.check_partition(item, view, lso)
                else:
                    assert isinstance(item, PurgatoryFigures)
                    self.results[item.index] = expect.check_purgatory(item, view)
        if self.scenario.end_ms is not None:
            await clock.sleep_until(self.scenario.end_ms)

    async def _settle(self) -> None:
        if self.scenario.end_ms is None:
            for request in list(self.cluster.requests):
                await request.wait()
        await trio.testing.wait_all_tasks_blocked()

    def _name(self, requests: list[ClientRequest], name: str | None, label: str | None = None) -> None:
        for request in requests:
            request.label = label or name
        if name is not None:
            self.named.setdefault(name, []).extend(requests)

    async def _step(self, step: Step, workers: trio.Nursery) -> None:
        cluster = self.cluster
        if isinstance(step, Produce):
            producer = self.clients[step.client]
            assert isinstance(producer, Producer)
            if step.delay_ms is not None:
                request = producer.send(
                    step.topic,
                    step.partition,
                    step.records,
                    step.bytes,
                    delay_ms=step.delay_ms,
                    name=step.id,
                    delay_via=step.delay_via,
                )
                self._name([request], step.id)
                return
            produced = ProduceData(step.records, step.bytes)
            if step.keys is not None:
                now = cluster.now()
                raw = build_batch(
                    (now, key.encode(), None if step.tombstone else f"{key}@{now}".encode(), [])
                    for key in step.keys
                )
                produced = ProduceData(len(step.keys), len(raw), raw=raw)
            data = {TopicPartition(step.topic, step.partition): produced}
            self._name(producer.produce(data, step.id), step.id)
        elif isinstance(step, Fetch):
            consumer = self.clients[step.client]
            assert isinstance(consumer, Consumer)
            self._name(consumer.fetch(step.id), step.id)
        elif isinstance(step, Poll):
            workers.start_soon(self._poll, step)
        elif isinstance(step, DeleteRecords):
            tp = TopicPartition(step.topic, step.partition)
            admin = cluster.admin(step.client)
            self._name(admin.delete_records({tp: step.offset}, step.timeout_ms, step.id), step.id)
        elif isinstance(step, ElectLeaders):
            tp = TopicPartition(step.topic, step.partition)
            admin = cluster.admin(step.client)
            request = admin.elect_leaders([tp], step.election, step.timeout_ms, step.id, step.broker)
            self._name([request], step.id)
        elif isinstance(step, ListOffsets):
            tp = TopicPartition(step.topic, step.partition)
            asker = self.clients.get(step.client) or cluster.admin(step.client)
            self._name(asker.list_offsets({tp: step.timestamp}, step.id), step.id)
        elif isinstance(step, Load):
            workers.start_soon(self._load, step)
        elif isinstance(step, BrokerFault):
            if step.action == "pause":
                cluster.pause_fetcher(step.broker)
            elif step.action == "resume":
                cluster.resume_fetcher(step.broker)
            elif step.action == "crash":
                cluster.crash(step.broker)
            elif step.action == "restart":
                await cluster.restart(step.broker)
            else:
                cluster.shutdown(step.broker)
        elif isinstance(step, LinkFault):
            a, b = step.between
            if step.action == "latency":
                cluster.set_latency(a, b, step.latency_ms)
            elif step.action == "drop":
                cluster.drop_link(a, b, one_way=step.one_way)
            else:
                cluster.heal_link(a, b, one_way=step.one_way)
        elif isinstance(step, MemberAction):
            await self._member(step)
        elif isinstance(step, TransactionStep):
            self._transaction(step)
        elif isinstance(step, ShareStep):
            self._share(step)
        elif isinstance(step, SetConfig):
            targets = [step.broker] if step.broker is not None else range(len(cluster.brokers))
            for broker in targets:
                cluster.set_broker_config(broker, step.settings)

    def _transaction(self, step: TransactionStep) -> None:
        """A transactional producer's call; it runs after the producer's earlier calls have."""
        producer = self.clients[step.client]
        assert isinstance(producer, TransactionalProducer)
        action = step.action
        if action == "begin":
            producer.begin_transaction()
        elif action == "crash":
            producer.crash()
        else:
            if action == "init":
                request = producer.init_transactions(step.id)
            elif action == "send":
                request = producer.send(step.topic, step.partition, step.records, step.bytes, step.id)
            elif action == "send_offsets":
                offsets = {}
                for label, offset in step.offsets.items():
                    topic, _, number = label.rpartition("-")
                    offsets[TopicPartition(topic, int(number))] = offset
                request = producer.send_offsets_to_transaction(offsets, step.group, step.id)
            elif action == "commit":
                request = producer.commit_transaction(step.id)
            else:
                request = producer.abort_transaction(step.id)
            self._name([request], step.id)

    def _share(self, step: ShareStep) -> None:
        consumer = self.clients[step.client]
        assert isinstance(consumer, ShareConsumer)
        if step.action == "crash":
            consumer.crash()
            return
        tp = None
        if step.partition is not None:
            topic, _, number = step.partition.rpartition("-")
            tp = TopicPartition(topic, int(number))
        consumer.acknowledge(AcknowledgeType[step.type], step.offsets, tp)

    async def _member(self, step: MemberAction) -> None:
        consumer = self.clients[step.client]
        if isinstance(consumer, ShareConsumer):
            if step.action == "join":
                if not consumer.joined:
                    consumer.joined = True
                    self.members.start_soon(consumer.run)
            elif not consumer.crashed:
                consumer.stall(True)
                if step.duration_ms is not None:
                    self.members.start_soon(self._unpause, consumer.stall, step.at + step.duration_ms)
            return
        assert isinstance(consumer, Consumer)
        membership = consumer.membership
        if step.action == "join":
            if membership is None or membership.left:
                spec = next(c for c in self.scenario.clients if c.id == step.client)
                self.members.start_soon(consumer.subscribe(spec.subscribe).run)
            return
        if membership is None or membership.left:
            return  # not (or no longer) a member: nothing to do
        if step.action == "leave":
            self.members.start_soon(membership.leave)
        elif step.action == "commit":
            self.members.start_soon(membership.commit)
        else:
            pause = membership.stall if step.action == "stall" else membership.hang
            pause(True)
            if step.duration_ms is not None:
                self.members.start_soon(self._unpause, pause, step.at + step.duration_ms)

    async def _unpause(self, pause: Callable[[bool], None], at: int) -> None:
        await self.cluster.clock.sleep_until(at)
        pause(False)

    async def _poll(self, step: Poll) -> None:
        consumer = self.clients[step.client]
        assert isinstance(consumer, Consumer)
        clock = self.cluster.clock
        end = step.at + step.duration_ms
        round_number = 0
        while clock.now_ms() < end:
            round_number += 1
            requests = consumer.fetch(None if step.id is None else f"{step.id}#{round_number}")
            self._name(requests, step.id)
            for request in requests:
                await request.wait()
            if (
                clock.now_ms() < end
                and all(not any(r.records.values()) for r in requests)
                and all(r.latency_ms == 0 for r in requests)
            ):
                await clock.sleep_until(clock.now_ms() + 1)  # an empty instant answer: don't spin

    async def _load(self, step: Load) -> None:
        producer = self.clients[step.client]
        assert isinstance(producer, Producer)
        clock = self.cluster.clock
        spec = next(t for t in self.scenario.topics if t.name == step.topic)
        partitions = step.partitions or tuple(range(spec.partitions))
        total = step.rate * step.duration_ms // 1000
        label = step.id or f"load@{step.at}"
        sent = 0
        while sent < total:
            # request k goes out at step.at + floor(k * 1000 / rate): send every one due now
            due = min(total, (clock.now_ms() - step.at) * step.rate // 1000 + 1)
            while sent < due:
                tp = TopicPartition(step.topic, partitions[sent % len(partitions)])
                if step.delay_ms is not None:
                    message = producer.send(
                        tp.topic, tp.partition, step.records, step.bytes, step.delay_ms, None, step.delay_via
                    )
                    self._name([message], step.id, label)
                else:
                    self._name(producer.produce({tp: ProduceData(step.records, step.bytes)}), step.id, label)
                sent += 1
            self.progress(clock.now_ms())
            if sent < total:
                await clock.sleep_until(step.at + (sent * 1000 + step.rate - 1) // step.rate)

    def _check_at_end(
        self,
        expectation: Expectation,
        requests: list[ClientRequest],
        totals: dict[int, dict[str, dict[str, int]]],
    ) -> expect.ExpectationResult:
        if isinstance(expectation, RequestOutcome):
            return expect.check_request(expectation, self.named.get(expectation.request, []))
        if isinstance(expectation, Event):
            return expect.check_event(expectation, self.kept)
        if type(expectation) in self._feature_checks:
            kind, feature = self._feature_checks[type(expectation)]
            return kind.check(expectation, feature)
        if isinstance(expectation, MemberErrors):
            consumer = self.clients[expectation.member]
            membership = getattr(consumer, "membership", None)
            return check_member(expectation, membership.errors if membership is not None else [])
        assert isinstance(expectation, Count)
        return expect.check_count(expectation, expect.count_value(expectation, requests, totals, self.kept))


def run_scenario(
    scenario: Scenario,
    *,
    seed: int | None = None,
    speed: float | None = None,
    sinks: Sequence[Callable[[TraceEvent], object]] = (),
    progress: Progress | None = None,
) -> RunResult:
    """Run ``scenario`` (virtual time unless ``speed`` is given) and check its expectations."""
    seed = scenario.seed if seed is None else seed
    runner = ScenarioRunner(scenario, sinks, progress, seed)
    clock = trio.testing.MockClock(autojump_threshold=0) if speed is None else PacedClock(speed)
    with quiet_gc(), deterministic_scheduling(seed):
        return trio.run(runner.run, seed, clock=clock)


__all__ = ["RunResult", "ScenarioRunner", "run_scenario"]
