"""A chaos schedule: the random parts of one run, in a form the shrinker can cut down.

A ``Schedule`` is a cluster, topics, clients, produce requests, consumer polls and
*faults*; every fault has a start and an end (pause/resume, latency/restore,
drop/heal, crash/restart, shutdown/restart, a min.insync.replicas change and its
restoration), and every fault ends by ``heal_ms``. ``compile_schedule`` turns it
into an ordinary scenario model (the scenario layer) with the checking phase appended:

- at ``heal_ms + settle_ms`` (``settle_ms`` is the liveness bound, see
  ``liveness_bound``) a probe producer sends one acks=-1 produce to every
  partition, each expected to answer NONE, and every partition's ISR is expected
  to be all its replicas (invariant 6, as ordinary ``[[expect]]`` entries);
- at the same time the ``reader`` consumer polls every partition from offset 0
  (invariants 2 and 3 compare what it reads with what was acknowledged);
- with group members (consumers of group ``g`` that subscribe to every topic), at
  ``group_check_ms`` (``check_ms`` plus ``group_bound``) the group is expected
  Stable with every member (invariant 7, an ordinary ``group`` expectation).

Group faults act on one member: ``stall`` (stops polling, keeps heartbeating) and
``hang`` (stops both) until ``end``; ``leave`` sends LeaveGroup at ``start`` and
joins again at ``end``.

Produce ``i`` writes ``100 + i`` bytes, so a batch's size names the request that
wrote it: a record read back is the record acknowledged, not one written later at
the same offset.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import attrs

from minibroker.chaos.txn_schedule import transaction_bound, transactional_clients
from minibroker.scenario.model import (
    BrokerFault,
    ClientSpec,
    ClusterSpec,
    Expectation,
    GroupState,
    LinkFault,
    MemberAction,
    Node,
    PartitionState,
    Poll,
    Produce,
    RequestOutcome,
    Scenario,
    SetConfig,
    Step,
    TopicSpecModel,
)

if TYPE_CHECKING:
    from minibroker.chaos.txn_schedule import TransformSpec, TxnSpec

READER = "reader"
#: the READ_COMMITTED reader of runs with transactions (reads every partition with the ``reader``)
RC_READER = "rc-reader"
PROBE = "probe"
#: the acks=-1 producer of a run's compacted topic
COMPACTOR = "compactor"
#: how long the reader polls once the cluster has settled
READ_MS = 300
#: probes' request.timeout.ms and the grace every generated client waits beyond its timeout
PROBE_TIMEOUT_MS = 1000
GRACE_MS = 200
RC_READER_CONFIG = {
    "isolation.level": "read_committed",
    "fetch.max.wait.ms": 10,
    "minibroker.response.grace.ms": 200,
}
GROUP_FAULT_KINDS = ("stall", "hang", "leave")
FAULT_KINDS = ("pause", "latency", "drop", "crash", "shutdown", "min_isr", *GROUP_FAULT_KINDS)
GROUP = "g"
#: broker settings a run with group members adds (none otherwise: older runs compile unchanged)
GROUP_CLUSTER_CONFIG = {
    "offsets.topic.num.partitions": 2,
    "group.initial.rebalance.delay.ms": 0,
    "group.min.session.timeout.ms": 100,
}
#: and those a run whose members speak KIP-848's consumer protocol adds (the coordinator's to choose)
CONSUMER_GROUP_CLUSTER_CONFIG = {
    "group.consumer.session.timeout.ms": 500,
    "group.consumer.heartbeat.interval.ms": 50,
}


def consumer_protocol(member: MemberSpec) -> bool:
    return member.config.get("group.protocol") == "consumer"


@attrs.frozen
class FaultSpec:
    """One fault from ``start`` to ``end`` (ms); which fields matter depends on ``kind``."""

    kind: str  # one of FAULT_KINDS
    start: int
    end: int
    broker: int | None = None
    between: tuple[Node, Node] | None = None
    latency_ms: int = 0
    min_isr: int = 0
    member: str | None = None  # group faults: the member's client id


@attrs.frozen
class ProduceSpec:
    id: str
    at: int
    producer: str
    topic: str
    partition: int
    records: int
    bytes: int
    #: one record per key (a compacted topic's produce); ``tombstone``: null values
    keys: tuple[str, ...] | None = None
    tombstone: bool = False


@attrs.frozen
class PollSpec:
    consumer: str
    at: int
    duration_ms: int


@attrs.frozen
class MemberSpec:
    """A member of group ``g``: a consumer that subscribes to every topic and joins at ``join_at``."""

    id: str
    join_at: int
    config: dict[str, Any]


@attrs.frozen
class Schedule:
    """Everything random about one run; ``compile_schedule`` makes the scenario."""

    name: str
    profile: str
    seed: int  # same-instant scheduling seed
    brokers: int
    config: dict[str, Any]
    latency_ms: int
    isr_commit_delay_ms: int
    crash_detection_ms: int
    topics: tuple[TopicSpecModel, ...]
    producers: tuple[ClientSpec, ...]
    consumers: tuple[ClientSpec, ...]
    produces: tuple[ProduceSpec, ...]
    polls: tuple[PollSpec, ...]
    faults: tuple[FaultSpec, ...]
    heal_ms: int
    members: tuple[MemberSpec, ...] = ()
    #: transactions (``minibroker.chaos.txn_schedule``): their steps, and the transform loop
    txns: tuple[TxnSpec, ...] = ()
    transform: TransformSpec | None = None
    #: a ``cleanup.policy=compact`` topic (``minibroker.chaos.compaction_generate``), written by
    #: ``COMPACTOR`` only; not among ``topics``: the probes, the reader and invariants 2-5 leave it out
    compacted: TopicSpecModel | None = None

    @property
    def transactional(self) -> bool:
        return bool(self.txns) or self.transform is not None

    @property
    def settle_ms(self) -> int:
        """The liveness bound; with transactions, the transaction bound (every one has ended)."""
        bound = liveness_bound(self)
        if not self.transactional:
            return bound
        producers = [c.config for c in transactional_clients(self.producers)]
        if self.transform is not None:
            producers.append(self.transform.producer)
        return transaction_bound(self.config, producers, self.latency_ms, bound)

    @property
    def group_check_ms(self) -> int:
        """When the group must be Stable with every member (only with members)."""
        return self.check_ms + group_bound(self)

    @property
    def check_ms(self) -> int:
        """When the probes, the ISR check and the reader start."""
        return self.heal_ms + self.settle_ms

    @property
    def end_ms(self) -> int:
        end = self.check_ms + max(READ_MS, PROBE_TIMEOUT_MS + GRACE_MS) + 1
        return max(end, self.group_check_ms + 1) if self.members else end

    def partitions(self) -> list[tuple[str, int]]:
        return [(t.name, p) for t in self.topics for p in range(t.partitions)]

    def replicas(self, topic: str, partition: int) -> tuple[int, ...]:
        spec = next(t for t in self.topics if t.name == topic)
        if spec.assignment is not None:
            return spec.assignment[partition]
        return tuple((partition + i) % self.brokers for i in range(spec.replication_factor))


def liveness_bound(schedule: Schedule) -> int:
    """ms after the last heal by which every produce succeeds and every ISR is whole again.

    2 x replica.lag.time.max.ms (a follower is noticed and caught up), plus one
    replica.socket.timeout.ms and replica.fetch.backoff.ms (a fetch lost on a dropped
    link is given up on and retried), crash detection, the controller's ISR-commit
    delay, a round trip on the slowest link, and 100 ms of slack.
    """
    config = schedule.config
    return (
        2 * config["replica.lag.time.max.ms"]
        + config["replica.socket.timeout.ms"]
        + config["replica.fetch.backoff.ms"]
        + schedule.crash_detection_ms
        + schedule.isr_commit_delay_ms
        + 2 * schedule.latency_ms
        + 100
    )


def group_bound(schedule: Schedule) -> int:
    """ms after ``check_ms`` by which the group is Stable with every member again.

    Every fault has ended and the cluster settled by ``check_ms``. A member evicted
    meanwhile learns it at its next heartbeat (heartbeat.interval.ms) or is dropped by
    its session timeout; a rebalance waits at most the rebalance timeout
    (max.poll.interval.ms) for members to rejoin, then a SyncGroup round and the
    OffsetFetch; twice that for a rebalance that starts during the first, plus a
    request timeout for a call lost before the heal. A consumer protocol member
    (KIP-848) is bounded alike with the broker's session timeout and heartbeat
    interval: a revocation waits at most its rebalance timeout (max.poll.interval.ms)
    before the member is fenced and its partitions handed on at the next heartbeats.
    """
    if not schedule.members:
        return 0

    def timeouts(m: MemberSpec) -> tuple[int, int]:
        """(session timeout, heartbeat interval): the broker's for a consumer protocol member."""
        if consumer_protocol(m):
            return (
                CONSUMER_GROUP_CLUSTER_CONFIG["group.consumer.session.timeout.ms"],
                CONSUMER_GROUP_CLUSTER_CONFIG["group.consumer.heartbeat.interval.ms"],
            )
        return m.config["session.timeout.ms"], m.config["heartbeat.interval.ms"]

    worst = max(
        2 * (m.config["max.poll.interval.ms"] + timeouts(m)[1])
        + timeouts(m)[0]
        + m.config["request.timeout.ms"]
        + GRACE_MS
        for m in schedule.members
    )
    return worst + 4 * schedule.latency_ms + 100


def _fault_steps(fault: FaultSpec, schedule: Schedule) -> list[tuple[int, Step]]:
    """(time, step) pairs, index filled in later."""
    if fault.kind in GROUP_FAULT_KINDS:
        assert fault.member is not None
        if fault.kind == "leave":
            return [
                (fault.start, MemberAction(fault.start, 0, "leave", fault.member)),
                (fault.end, MemberAction(fault.end, 0, "join", fault.member)),
            ]
        duration = fault.end - fault.start
        return [(fault.start, MemberAction(fault.start, 0, fault.kind, fault.member, duration))]
    if fault.kind in ("pause", "crash", "shutdown"):
        begin, finish = {
            "pause": ("pause", "resume"),
            "crash": ("crash", "restart"),
            "shutdown": ("shutdown", "restart"),
        }[fault.kind]
        assert fault.broker is not None
        return [
            (fault.start, BrokerFault(fault.start, 0, begin, fault.broker)),
            (fault.end, BrokerFault(fault.end, 0, finish, fault.broker)),
        ]
    if fault.kind == "latency":
        assert fault.between is not None
        return [
            (fault.start, LinkFault(fault.start, 0, "latency", fault.between, fault.latency_ms)),
            (fault.end, LinkFault(fault.end, 0, "latency", fault.between, schedule.latency_ms)),
        ]
    if fault.kind == "drop":
        assert fault.between is not None
        return [
            (fault.start, LinkFault(fault.start, 0, "drop", fault.between, 0)),
            (fault.end, LinkFault(fault.end, 0, "heal", fault.between, 0)),
        ]
    base = schedule.config["min.insync.replicas"]
    return [
        (fault.start, SetConfig(fault.start, 0, {"min.insync.replicas": fault.min_isr}, None)),
        (fault.end, SetConfig(fault.end, 0, {"min.insync.replicas": base}, None)),
    ]


def probe_id(topic: str, partition: int) -> str:
    return f"probe-{topic}-{partition}"


def compile_schedule(
    schedule: Schedule,
    extra_clients: tuple[ClientSpec, ...] = (),
    extra_steps: tuple[Step, ...] = (),
    extra_expectations: tuple[Expectation, ...] = (),
    description: str = "",
) -> Scenario:
    """The scenario that plays ``schedule`` and then checks it; extras come from the TOML writer."""
    partitions = schedule.partitions()
    topics = tuple(t.name for t in schedule.topics)
    clients = (
        *schedule.producers,
        *schedule.consumers,
        ClientSpec(
            PROBE,
            "producer",
            {"acks": -1, "request.timeout.ms": PROBE_TIMEOUT_MS, "minibroker.response.grace.ms": GRACE_MS},
        ),
        *(ClientSpec(m.id, "consumer", m.config, subscribe=topics) for m in schedule.members),
        ClientSpec(
            READER,
            "consumer",
            {"fetch.max.wait.ms": 10, "minibroker.response.grace.ms": GRACE_MS},
            tuple((topic, p, 0) for topic, p in partitions),
        ),
        *(
            (
                ClientSpec(
                    RC_READER, "consumer", {**RC_READER_CONFIG}, tuple((t, p, 0) for t, p in partitions)
                ),
            )
            if schedule.transactional
            else ()
        ),
        *(
            (ClientSpec(COMPACTOR, "producer", {"acks": -1, "minibroker.response.grace.ms": GRACE_MS}),)
            if schedule.compacted is not None
            else ()
        ),
        *extra_clients,
    )
    timed: list[tuple[int, int, Step]] = []  # (at, order, step): faults first, then traffic
    for fault in schedule.faults:
        for at, step in _fault_steps(fault, schedule):
            timed.append((at, 0, step))
    for produce in schedule.produces:
        timed.append(
            (
                produce.at,
                1,
                Produce(
                    produce.at,
                    0,
                    produce.producer,
                    produce.topic,
                    produce.partition,
                    produce.records,
                    produce.bytes if produce.keys is None else 100,  # keyed: one record per key
                    produce.id,
                    keys=produce.keys,
                    tombstone=produce.tombstone,
                ),
            )
        )
    for poll in schedule.polls:
        timed.append((poll.at, 1, Poll(poll.at, 0, poll.consumer, poll.duration_ms)))
    for member in schedule.members:
        timed.append((member.join_at, 1, MemberAction(member.join_at, 0, "join", member.id)))
    for txn in schedule.txns:
        for step in txn.steps:
            timed.append((step.at, 1, step))
    check = schedule.check_ms
    for topic, p in partitions:
        timed.append((check, 2, Produce(check, 0, PROBE, topic, p, 1, 1, probe_id(topic, p))))
    timed.append((check, 3, Poll(check, 0, READER, READ_MS)))
    if schedule.transactional:
        timed.append((check, 3, Poll(check, 0, RC_READER, READ_MS)))
    for step in extra_steps:
        timed.append((step.at, 4, step))
    timed.sort(key=lambda item: (item[0], item[1]))
    steps = tuple(attrs.evolve(step, index=i) for i, (_, _, step) in enumerate(timed))
    expectations: list[Expectation] = []
    for topic, p in partitions:
        expectations.append(RequestOutcome(0, "", probe_id(topic, p), "NONE"))
        expectations.append(PartitionState(0, "", check, f"{topic}-{p}", isr=schedule.replicas(topic, p)))
    if schedule.members:
        members = tuple(sorted(m.id for m in schedule.members))
        expectations.append(GroupState(0, "", schedule.group_check_ms, GROUP, "Stable", members=members))
    expectations.extend(extra_expectations)
    numbered = tuple(attrs.evolve(e, index=i, where=f"expect[{i}]") for i, e in enumerate(expectations))
    config = {**schedule.config, **(GROUP_CLUSTER_CONFIG if schedule.members else {})}
    if any(consumer_protocol(m) for m in schedule.members):
        config.update(CONSUMER_GROUP_CLUSTER_CONFIG)
    cluster = ClusterSpec(
        schedule.brokers,
        config,
        {},
        schedule.latency_ms,
        schedule.isr_commit_delay_ms,
        schedule.crash_detection_ms,
    )
    end = max([schedule.end_ms, *(s.at + 1 for s in extra_steps)])
    return Scenario(
        schedule.name,
        description or f"chaos run {schedule.name} ({schedule.profile} profile)",
        f"<chaos {schedule.name}>",
        schedule.seed,
        end,
        cluster,
        (),
        (*schedule.topics, *((schedule.compacted,) if schedule.compacted is not None else ())),
        clients,
        steps,
        numbered,
    )
