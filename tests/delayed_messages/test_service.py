"""DelayService on the emulated cluster, on the autojump clock: exact virtual times and counts."""

from __future__ import annotations

import pytest

from minibroker.common.messages import ProduceData, TopicPartition
from minibroker.delayed_messages import DelayError
from minibroker.delayed_messages.headers import REAL_TOPIC, build_batch, murmur2, records
from minibroker.sim import TopicSpec
from tests.delayed_messages.helpers import delayed_cluster, delivered_ids, events

ORDERS = [TopicSpec("orders", 2, 3)]
LEVELS = {"delay.levels": ["5s", "30s", "1m"]}


async def test_a_17s_delay_goes_to_the_30s_level_and_is_delivered_at_exactly_30s(autojump_clock):
    async with delayed_cluster(3, ORDERS, LEVELS) as (cluster, services):
        producer = cluster.producer("app", acks=-1)
        await cluster.clock.sleep_until(1_000)
        request = await producer.send_and_wait("orders", 1, count=3, size=30, delay_ms=17_000)
        assert request.errors == {"__delay_30s-0": "NONE"}
        await cluster.clock.sleep_until(30_999)
        assert services.stats.deliveries == []
        await cluster.clock.sleep_until(31_001)
        deliveries = services.stats.deliveries
        assert [(d.message_id, d.partition, d.due_ms, d.delivered_ms) for d in deliveries] == [
            (f"app-{i}", "orders-1", 31_000, 31_000) for i in range(3)
        ]
        assert delivered_ids(cluster, "orders", 1) == ["app-0", "app-1", "app-2"]
        assert [e["offset"] for e in events(services, "delay.commit")] == [3]


async def test_level_topics_are_internal_and_created_with_the_service(autojump_clock):
    async with delayed_cluster(3, ORDERS, LEVELS) as (cluster, _):
        internal = sorted(name for name, spec in cluster.topics.items() if spec.internal)
        assert internal == ["__delay_1m", "__delay_30s", "__delay_5s", "__delay_offsets"]
        assert cluster.topics["__delay_5s"].replication_factor == 3
        assert not cluster.topics["orders"].internal


async def test_bad_delays_fail_at_send_with_one_line(autojump_clock):
    async with delayed_cluster(3, ORDERS, LEVELS) as (cluster, _):
        producer = cluster.producer("app")
        with pytest.raises(DelayError, match=r"delay_ms: 60001 is longer than the largest level \(1m\)"):
            producer.send("orders", 0, delay_ms=60_001)
        with pytest.raises(DelayError, match="the real topic partition orders-2 does not exist"):
            producer.send("orders", 2, delay_ms=5_000)


async def test_a_delayed_send_without_delay_levels_is_refused(autojump_clock):
    from minibroker.sim import open_cluster

    async with open_cluster(1, [TopicSpec("t")]) as cluster:
        with pytest.raises(ValueError, match="delay_ms needs delayed messages on the cluster"):
            cluster.producer("p").send("t", delay_ms=5)


async def test_any_client_sends_by_the_header_contract(autojump_clock):
    """A raw v2 record with only delay.real.topic and a key: delivered at timestamp + level, by key."""
    async with delayed_cluster(3, ORDERS, LEVELS) as (cluster, services):
        raw = build_batch(
            [
                (2_000, b"user-7", b"pay", [(REAL_TOPIC, b"orders"), ("trace-id", b"abc")]),
                (2_000, None, b"broken", [("trace-id", b"def")]),
            ]
        )
        producer = cluster.producer("kafka-client", acks=-1)
        (request,) = producer.produce({TopicPartition("__delay_5s", 0): ProduceData(2, len(raw), raw=raw)})
        await request.wait()
        await cluster.clock.sleep_until(8_000)
        partition = (murmur2(b"user-7") & 0x7FFFFFFF) % 2
        (delivery,) = services.stats.deliveries
        assert (delivery.message_id, delivery.partition, delivery.due_ms, delivery.delivered_ms) == (
            "__delay_5s-0@0",
            f"orders-{partition}",
            7_000,
            7_000,
        )
        tp = TopicPartition("orders", partition)
        (batch,) = cluster.brokers[cluster.leader_of(tp)].logs[tp].batches()
        (record,) = list(records(batch.raw))
        assert (record.key, record.value, record.timestamp) == (b"user-7", b"pay", 7_000)
        assert record.headers == [
            ("trace-id", b"abc"),
            ("delay.message.id", b"__delay_5s-0@0"),
            ("delay.due.ms", b"7000"),
        ]
        (invalid,) = events(services, "delay.invalid")
        assert invalid["reason"] == "offset 1: no delay.real.topic header"
        assert services.stats.invalid == 1
        assert [e["offset"] for e in events(services, "delay.commit")] == [2]


async def test_back_pressure_pauses_a_partition_at_the_threshold_and_resumes_below(autojump_clock):
    settings = {**LEVELS, "delay.service.max.held.per.partition": 3}
    async with delayed_cluster(3, ORDERS, settings) as (cluster, services):
        producer = cluster.producer("app", acks=-1)
        for i in range(8):  # one message every 100 ms, each its own batch
            await cluster.clock.sleep_until(100 * i)
            producer.send("orders", 0, delay_ms=5_000)
        await cluster.clock.sleep_until(4_999)
        assert services.held() == {"__delay_5s-0": 3, "__delay_30s-0": 0, "__delay_1m-0": 0}
        assert services.paused() == ["__delay_5s-0"]
        await cluster.clock.sleep_until(6_000)
        pauses = [(e["time_ms"], e["held"]) for e in events(services, "delay.pause")]
        resumes = [(e["time_ms"], e["held"]) for e in events(services, "delay.resume")]
        # paused when the third message is held (200 ms); the 5000 ms forward brings it to 2 and
        # resumes it; the fetch then out for the other levels returns at its max wait (5200 ms), the
        # next one brings the five waiting messages (6 held after the 5200 ms forward: paused again)
        assert pauses == [(200, 3), (5_200, 6)]
        assert resumes == [(5_000, 2), (5_500, 2)]
        deliveries = services.stats.deliveries
        assert [d.message_id for d in deliveries] == [f"app-{i}" for i in range(8)]
        assert all(d.delivered_ms == d.due_ms for d in deliveries)  # fetched long before due
        assert services.paused() == []


async def test_a_single_broker_crash_and_restart_resumes_from_the_committed_offset(autojump_clock):
    async with delayed_cluster(1, [TopicSpec("orders")], LEVELS) as (cluster, services):
        producer = cluster.producer("app", acks=-1)
        await producer.send_and_wait("orders", 0, count=2, delay_ms=5_000)  # due 5000
        await cluster.clock.sleep_until(1_000)
        await producer.send_and_wait("orders", 0, count=2, delay_ms=5_000)  # due 6000
        await cluster.clock.sleep_until(5_500)
        assert [d.message_id for d in services.stats.deliveries] == ["app-0", "app-1"]
        cluster.crash(0)
        await cluster.clock.sleep_until(6_500)
        await cluster.restart(0)
        await cluster.clock.sleep_until(8_000)
        assert delivered_ids(cluster, "orders") == ["app-0", "app-1", "app-2", "app-3"]
        late = [(d.message_id, d.due_ms, d.delivered_ms) for d in services.stats.deliveries[2:]]
        assert late == [("app-2", 6_000, 6_500), ("app-3", 6_000, 6_500)]
        assigned = [
            (e["time_ms"], e["offset"])
            for e in events(services, "delay.assign")
            if e["partition"] == "__delay_5s-0"
        ]
        assert assigned == [(0, 0), (6_500, 2)]


async def test_a_new_leaders_service_takes_over_and_duplicates_are_the_round_in_flight(autojump_clock):
    """Broker 0 dies after its forward of a round is acknowledged and before the round's commit is.

    The round (max.in.flight 2, one round uncommitted at a time) is forwarded again by broker 1's
    service: exactly 2 duplicates.
    """
    settings = {**LEVELS, "delay.service.max.in.flight": 2, "delay.service.forward.rounds": 1}
    topics = [TopicSpec("orders", 1, 2, assignment=((2, 1),))]  # the real topic is not on broker 0
    async with delayed_cluster(3, topics, settings) as (cluster, services):
        producer = cluster.producer("app", acks=-1)
        await producer.send_and_wait("orders", 0, count=5, delay_ms=5_000)  # due 5000, held on broker 0
        # the sender's commits take 20 ms to reach broker 0 (which leads __delay_offsets)
        cluster.set_latency("delay-service-0-sender", 0, 20)
        await cluster.clock.sleep_until(5_001)
        forwarded = [(e["time_ms"], e["id"]) for e in events(services, "delay.delivered")]
        assert forwarded == [(5_000, "app-0"), (5_000, "app-1")]
        cluster.crash(0)  # the commit of offset 2 is still on its way
        await cluster.clock.sleep_until(20_000)
        assert events(services, "delay.commit")[0]["broker"] == 1
        taken = [(e["time_ms"], e["broker"], e["offset"]) for e in events(services, "delay.assign")]
        assert (5_500, 1, 0) in taken  # broker 1's next poll: it leads the level now, from offset 0
        ids = delivered_ids(cluster, "orders")
        assert ids == ["app-0", "app-1", "app-0", "app-1", "app-2", "app-3", "app-4"]
        assert len(ids) - len(set(ids)) == 2
        assert all(d.delivered_ms >= d.due_ms == 5_000 for d in services.stats.deliveries)


async def test_rounds_in_flight_go_out_together_and_duplicates_are_the_uncommitted_rounds(autojump_clock):
    """Three rounds of at most 2 are sent at once (forward.rounds 3), each partition in offset order;
    broker 0 dies before any commit is acknowledged: the new leader's service forwards all 5 again, the
    bound being forward.rounds x max.in.flight."""
    settings = {**LEVELS, "delay.service.max.in.flight": 2, "delay.service.forward.rounds": 3}
    topics = [TopicSpec("orders", 1, 2, assignment=((2, 1),))]
    async with delayed_cluster(3, topics, settings) as (cluster, services):
        producer = cluster.producer("app", acks=-1)
        await producer.send_and_wait("orders", 0, count=5, delay_ms=5_000)
        cluster.set_latency("delay-service-0-sender", 0, 20)
        await cluster.clock.sleep_until(5_001)
        forwarded = [(e["time_ms"], e["id"]) for e in events(services, "delay.delivered")]
        assert forwarded == [(5_000, f"app-{i}") for i in range(5)]
        assert delivered_ids(cluster, "orders") == [f"app-{i}" for i in range(5)]
        cluster.crash(0)
        await cluster.clock.sleep_until(20_000)
        ids = delivered_ids(cluster, "orders")
        assert ids == [f"app-{i}" for i in range(5)] * 2
        # broker 1's: the first round's answer starts a commit, the next one covers the rest
        assert [(e["broker"], e["offset"]) for e in events(services, "delay.commit")] == [(1, 2), (1, 5)]


async def test_a_message_for_a_missing_topic_is_parked_and_its_partition_flows_on(autojump_clock):
    """A typo'd real topic first in __delay_5s-0, two good messages behind it: they are delivered at
    their due time; the typo is parked in the level of the backoff (the 30s level for 20 s), tried
    twice, then dropped (no dead-letter topic): counted and traced, and the partition commits past it."""
    settings = {
        **LEVELS,
        "delay.service.undeliverable.attempts": 2,
        "delay.service.undeliverable.backoff.ms": 20_000,
    }
    async with delayed_cluster(3, ORDERS, settings) as (cluster, services):
        raw = build_batch(
            [
                (1_000, b"k", b"lost", [(REAL_TOPIC, b"ordres")]),
                (1_000, b"k", b"a", [(REAL_TOPIC, b"orders"), ("delay.real.partition", b"0")]),
                (1_500, b"k", b"b", [(REAL_TOPIC, b"orders"), ("delay.real.partition", b"0")]),
            ]
        )
        producer = cluster.producer("kafka-client", acks=-1)
        (request,) = producer.produce({TopicPartition("__delay_5s", 0): ProduceData(3, len(raw), raw=raw)})
        await request.wait()
        await cluster.clock.sleep_until(40_000)
        got = [(d.message_id, d.delivered_ms) for d in services.stats.deliveries]
        assert got == [("__delay_5s-0@1", 6_000), ("__delay_5s-0@2", 6_500)]
        (park,) = events(services, "delay.parked")
        assert (park["time_ms"], park["id"], park["attempts"], park["due_ms"]) == (
            6_000,
            "__delay_5s-0@0",
            1,
            26_000,
        )
        (drop,) = events(services, "delay.dropped")
        assert (drop["time_ms"], drop["id"], drop["topic"], drop["attempts"]) == (
            26_000,
            "__delay_5s-0@0",
            "ordres",
            2,
        )
        assert (services.stats.parked, services.stats.dropped) == (1, 1)
        commits = [(e["partition"], e["offset"]) for e in events(services, "delay.commit")]
        assert ("__delay_5s-0", 3) in commits and ("__delay_30s-0", 1) in commits
