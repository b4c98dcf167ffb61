"""Random schedules: each run is a pure function of (profile, seed, run index, duration).

``generate(profile, seed, index, duration_ms)`` seeds one ``random.Random`` with
those four values (a string seed: stable across processes and Python runs) and
draws a cluster, topics, clients, produce requests, polls and faults from it.
Nothing else is random: the run itself is in virtual time with same-instant
scheduling seeded from the same generator. Group members and their faults
(``group_members``), faults on links to the controller (``controller_links``),
transactional load (``minibroker.chaos.txn_generate``) and a compacted topic
(``minibroker.chaos.compaction_generate``) come from generators of their own, seeded
with the same four values, so adding them left every earlier draw as it was.
"""

from __future__ import annotations

import random

import attrs

from minibroker.chaos.compaction_generate import add_compaction
from minibroker.chaos.profiles import Profile
from minibroker.chaos.schedule import (
    GRACE_MS,
    GROUP,
    FaultSpec,
    MemberSpec,
    PollSpec,
    ProduceSpec,
    Schedule,
)
from minibroker.chaos.txn_generate import add_transactions
from minibroker.controller.quorum_controller import CONTROLLER
from minibroker.scenario.model import ClientSpec, Node, TopicSpecModel

#: the shortest and longest generated fault, in ms
FAULT_MIN_MS = 50


def run_name(profile: str, seed: int, index: int) -> str:
    return f"{profile}-s{seed}-r{index}"


def _weighted(rng: random.Random, weights: dict) -> object:
    keys = sorted(weights, key=str)
    return rng.choices(keys, [weights[k] for k in keys])[0]


def generate(profile: Profile, seed: int, index: int, duration_ms: int) -> Schedule:
    """The schedule of run ``index`` of ``seed`` (faults and load within ``duration_ms``)."""
    rng = random.Random(f"minibroker-chaos:{profile.name}:{seed}:{index}:{duration_ms}")
    brokers = rng.randint(*profile.brokers)
    min_isr = rng.randint(*profile.min_isr)
    config = {
        "replica.lag.time.max.ms": rng.choice(profile.lag_ms),
        "replica.fetch.wait.max.ms": rng.choice((20, 50, 100)),
        "replica.fetch.backoff.ms": 50,
        "replica.socket.timeout.ms": rng.choice((300, 800)),
        "min.insync.replicas": min_isr,
        "unclean.leader.election.enable": profile.unclean,
    }
    topics = []
    total = 0
    for t in range(rng.randint(1, 2)):
        partitions = rng.randint(1, min(3, 6 - total))
        total += partitions
        rf = rng.randint(*profile.replication)
        topics.append(TopicSpecModel(f"t{t}", partitions, rf))
        if total >= 6:
            break
    parts = [(topic.name, p) for topic in topics for p in range(topic.partitions)]
    producers = []
    for i in range(rng.randint(1, 3)):
        config_p = {
            "acks": int(_weighted(rng, profile.acks)),  # type: ignore[call-overload]
            "request.timeout.ms": rng.choice((100, 300, 1000, 2000)),
            "minibroker.response.grace.ms": GRACE_MS,
        }
        producers.append(ClientSpec(f"p{i}", "producer", config_p))
    consumers = []
    for i in range(rng.randint(0, 2)):
        assigned = rng.sample(parts, rng.randint(1, len(parts)))
        consumers.append(
            ClientSpec(
                f"c{i}",
                "consumer",
                {
                    "fetch.min.bytes": rng.choice((1, 200, 2000)),
                    "fetch.max.wait.ms": rng.choice((10, 100, 300)),
                    "request.timeout.ms": 1000,
                    "minibroker.response.grace.ms": GRACE_MS,
                },
                tuple(sorted((topic, p, 0) for topic, p in assigned)),
            )
        )
    rate = rng.randint(10, 40)  # produce requests per second
    count = max(1, rate * duration_ms // 1000)
    produces = []
    for i in range(count):
        topic, p = rng.choice(parts)
        produces.append(
            ProduceSpec(
                f"w{i}",
                rng.randint(1, max(1, duration_ms - 1)),
                rng.choice(producers).id,
                topic,
                p,
                rng.randint(1, 4),
                100 + i,
            )
        )
    produces.sort(key=lambda s: (s.at, s.id))
    polls = []
    for consumer in consumers:
        for _ in range(rng.randint(1, 2)):
            start = rng.randint(1, max(1, duration_ms - 1))
            polls.append(PollSpec(consumer.id, start, rng.randint(100, max(100, duration_ms - start))))
    nodes: list[Node] = [*range(brokers), *(c.id for c in producers), *(c.id for c in consumers)]
    faults = []
    for _ in range(rng.randint(*profile.faults)):
        kind = str(_weighted(rng, profile.fault_weights))
        start = rng.randint(1, max(1, duration_ms * 4 // 5))
        end = min(duration_ms, start + rng.randint(FAULT_MIN_MS, max(FAULT_MIN_MS, duration_ms // 2)))
        broker = rng.randrange(brokers)
        if kind in ("pause", "crash", "shutdown"):
            faults.append(FaultSpec(kind, start, end, broker=broker))
        elif kind in ("latency", "drop"):
            other = rng.choice([n for n in nodes if n != broker])
            between = (broker, other)
            latency = rng.choice((20, 100, 400)) if kind == "latency" else 0
            faults.append(FaultSpec(kind, start, end, between=between, latency_ms=latency))
        else:
            faults.append(FaultSpec(kind, start, end, min_isr=rng.randint(1, 3)))
    if rng.random() < profile.pattern:
        faults += lagging_then_crashed(rng, brokers, parts, topics, config, duration_ms)
    if profile.acks1_pattern and rng.random() < profile.acks1_pattern:  # no draw when off: old runs stay
        faults += paused_then_leader_crashed(rng, brokers, parts, topics, config, duration_ms)
    seeded = f"minibroker-chaos-groups:{profile.name}:{seed}:{index}:{duration_ms}"
    members, member_faults = group_members(random.Random(seeded), profile, brokers, duration_ms)
    faults += member_faults
    seeded = f"minibroker-chaos-controller:{profile.name}:{seed}:{index}:{duration_ms}"
    faults += controller_links(random.Random(seeded), profile, brokers, duration_ms)
    faults.sort(key=lambda f: (f.start, f.end, f.kind))
    schedule = Schedule(
        run_name(profile.name, seed, index),
        profile.name,
        rng.randrange(2**31),
        brokers,
        config,
        rng.choice((0, 1, 2, 5)),
        rng.choice((0, 0, 10, 50)),
        rng.choice((0, 20, 100)),
        tuple(topics),
        tuple(producers),
        tuple(consumers),
        tuple(produces),
        tuple(polls),
        tuple(faults),
        duration_ms,
        tuple(members),
    )
    if (
        profile.transactions
        and rng_of("txn", profile, seed, index, duration_ms).random() < profile.transactions
    ):
        seeded = rng_of("txn-load", profile, seed, index, duration_ms)
        schedule = add_transactions(schedule, seeded, duration_ms, profile.transaction_version)
    if profile.compaction:  # no draw when off: every other profile's schedules stay as they were
        schedule = add_compaction(
            schedule, rng_of("compaction", profile, seed, index, duration_ms), duration_ms
        )
    return schedule


def rng_of(stream: str, profile: Profile, seed: int, index: int, duration_ms: int) -> random.Random:
    """A generator of its own for one part of the schedule, seeded with the run's four values."""
    return random.Random(f"minibroker-chaos-{stream}:{profile.name}:{seed}:{index}:{duration_ms}")


def controller_links(rng: random.Random, profile: Profile, brokers: int, duration_ms: int) -> list[FaultSpec]:
    """With chance ``profile.controller_links``: 1-2 faults on broker-controller links (drop or slow)."""
    if rng.random() >= profile.controller_links:
        return []
    faults = []
    for _ in range(rng.randint(1, 2)):
        kind = rng.choice(("drop", "latency"))
        start = rng.randint(1, max(1, duration_ms * 4 // 5))
        end = min(duration_ms, start + rng.randint(FAULT_MIN_MS, max(FAULT_MIN_MS, duration_ms // 2)))
        latency = rng.choice((20, 100, 400)) if kind == "latency" else 0
        between = (rng.randrange(brokers), CONTROLLER)
        faults.append(FaultSpec(kind, start, end, between=between, latency_ms=latency))
    return faults


def group_members(
    rng: random.Random, profile: Profile, brokers: int, duration_ms: int
) -> tuple[list[MemberSpec], list[FaultSpec]]:
    """With chance ``profile.groups``: 1-3 members of group ``g`` and 0-3 faults on them.

    A member fault is a stall, a hang, a leave (and join again), or a dropped or slow
    link between the member and a broker; each ends inside the window. With chance
    ``profile.consumer_protocol`` every member speaks KIP-848's consumer protocol.
    """
    if rng.random() >= profile.groups:
        return [], []
    members = []
    for i in range(rng.randint(1, 3)):
        heartbeat = rng.choice((30, 50, 100))
        config = {
            "group.id": GROUP,
            "session.timeout.ms": rng.choice((300, 500, 800)),
            "heartbeat.interval.ms": heartbeat,
            "max.poll.interval.ms": rng.choice((300, 600)),
            "auto.commit.interval.ms": rng.choice((50, 200)),
            "auto.offset.reset": "earliest",
            "fetch.min.bytes": rng.choice((1, 200, 2000)),
            "fetch.max.wait.ms": rng.choice((10, 100)),
            "request.timeout.ms": 500,
            "minibroker.response.grace.ms": GRACE_MS,
        }
        members.append(MemberSpec(f"m{i}", rng.randint(1, max(1, duration_ms // 2)), config))
    if profile.consumer_protocol and rng.random() < profile.consumer_protocol:
        # no draw from ``rng`` when off: older runs stay; one protocol per group (no mixed groups)
        members = [attrs.evolve(m, config={**m.config, "group.protocol": "consumer"}) for m in members]
    faults = []
    for _ in range(rng.randint(0, 3)):
        member = rng.choice(members)
        kind = rng.choice(("stall", "hang", "leave", "drop", "latency"))
        start = rng.randint(member.join_at, max(member.join_at, duration_ms * 4 // 5))
        end = min(duration_ms, start + rng.randint(FAULT_MIN_MS, max(FAULT_MIN_MS, duration_ms // 2)))
        if kind in ("drop", "latency"):
            between = (rng.randrange(brokers), member.id)
            latency = rng.choice((20, 100, 400)) if kind == "latency" else 0
            faults.append(FaultSpec(kind, start, end, between=between, latency_ms=latency))
        else:
            faults.append(FaultSpec(kind, start, end, member=member.id))
    return members, faults


def lagging_then_crashed(
    rng: random.Random,
    brokers: int,
    parts: list[tuple[str, int]],
    topics: list[TopicSpecModel],
    config: dict,
    duration_ms: int,
) -> list[FaultSpec]:
    """Three ordinary faults that make an unclean election lose data, if it is allowed.

    One replica of a partition is paused long enough to leave the ISR; then its leader
    crashes, and a little later the last other ISR member: the lagging replica is the only
    one alive. The shrinker treats these like any other faults.
    """
    topic, partition = rng.choice(parts)
    spec = next(t for t in topics if t.name == topic)
    replicas = [(partition + i) % brokers for i in range(spec.replication_factor)]
    if len(replicas) < 3:
        return []
    leader, follower, lagging = replicas[0], replicas[1], replicas[2]
    lag = config["replica.lag.time.max.ms"]
    start = rng.randint(1, max(1, duration_ms // 5))
    crash = min(duration_ms - 2, start + 2 * lag + rng.randint(0, max(1, duration_ms // 5)))
    second = min(duration_ms - 1, crash + rng.randint(20, 200))
    return [
        FaultSpec("pause", start, duration_ms, broker=lagging),
        FaultSpec("crash", crash, duration_ms, broker=leader),
        FaultSpec("crash", second, duration_ms, broker=follower),
    ]


def paused_then_leader_crashed(
    rng: random.Random,
    brokers: int,
    parts: list[tuple[str, int]],
    topics: list[TopicSpecModel],
    config: dict,
    duration_ms: int,
) -> list[FaultSpec]:
    """Two ordinary faults that lose acks=1 records: Kafka's documented trade-off.

    The first follower of a partition (the next leader by replica order) is paused for less
    than replica.lag.time.max.ms, so it stays in the ISR; meanwhile the leader crashes. The
    follower leads without the records the leader acknowledged during the pause.
    """
    topic, partition = rng.choice(parts)
    spec = next(t for t in topics if t.name == topic)
    if spec.replication_factor < 2:
        return []
    leader, follower = partition % brokers, (partition + 1) % brokers
    lag = config["replica.lag.time.max.ms"]
    start = rng.randint(1, max(1, duration_ms // 2))
    crash = min(duration_ms - 1, start + rng.randint(lag // 4, lag // 2))
    return [
        FaultSpec("pause", start, min(duration_ms, crash + lag // 2), broker=follower),
        FaultSpec("crash", crash, duration_ms, broker=leader),
    ]
