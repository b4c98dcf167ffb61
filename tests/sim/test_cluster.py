"""The cluster end to end on the autojump clock: exact virtual times, causes and error codes."""

from __future__ import annotations

import trio

from minibroker.common.messages import TopicPartition
from minibroker.sim import TopicSpec, open_cluster
from minibroker.trace import ListSink, RecordingTracer

TP = TopicPartition("t", 0)
RF3 = [TopicSpec("t", 1, 3)]


def traced():
    sink = ListSink()
    tracer = RecordingTracer(lambda: 0, [sink])
    return tracer, sink


async def open_traced(**options):
    tracer, sink = traced()
    cm = open_cluster(3, RF3, tracer=tracer, **options)
    cluster = await cm.__aenter__()
    tracer.clock = cluster.now
    return cm, cluster, sink


async def test_acks_all_messages_3_and_4_complete_when_the_slower_follower_fetches(autojump_clock):
    tracer, sink = traced()
    async with open_cluster(3, RF3, tracer=tracer) as cluster:
        tracer.clock = cluster.now
        cluster.set_latency(0, 1, 1)
        cluster.set_latency(0, 2, 5)
        producer = cluster.producer("p", acks=-1)
        first = await producer.send_and_wait("t", 0, count=3)  # messages 0..2
        assert first.errors == {"t-0": "NONE"}
        await cluster.clock.sleep_until(100)
        assert cluster.snapshot().partition("t-0").replica(0).high_watermark == 3
        request = producer.send("t", 0, count=2)  # messages 3 and 4, appended at 100
        await cluster.clock.sleep_until(109)
        assert not request.completed
        view = cluster.snapshot().partition("t-0")
        assert (view.replica(0).log_end_offset, view.replica(0).high_watermark) == (5, 3)
        await request.wait()
        # parked fetches answered at 100 reach broker 1 at 101 and broker 2 at 105; their next
        # fetches (offset 5) reach the leader at 102 and 110: the slower one raises the HW to 5.
        assert (request.completed_ms, request.cause, request.errors) == (110, "condition", {"t-0": "NONE"})
        assert request.base_offsets == {"t-0": 3}
        hw = [e for e in sink if e["kind"] == "hw" and e["broker"] == 0 and e["hw"] == 5]
        assert [e["time_ms"] for e in hw] == [110]


async def test_paused_follower_times_out_the_produce_when_the_shrink_comes_later(autojump_clock):
    async with open_cluster(3, RF3) as cluster:
        cluster.pause_fetcher(2)
        producer = cluster.producer("p", acks=-1, request_timeout_ms=1000)
        await cluster.clock.sleep_until(10)
        request = await producer.send_and_wait("t", 0)
        assert (request.completed_ms, request.cause, request.errors) == (
            1010,
            "expiry",
            {"t-0": "REQUEST_TIMED_OUT"},
        )
        assert cluster.snapshot().partition("t-0").isr == (0, 1, 2)


async def test_paused_follower_completes_the_produce_when_the_shrink_comes_first(autojump_clock):
    config = {"replica.lag.time.max.ms": 1000, "min.insync.replicas": 2}
    async with open_cluster(3, RF3, config) as cluster:
        cluster.pause_fetcher(2)
        producer = cluster.producer("p", acks=-1)
        request = await producer.send_and_wait("t", 0)
        # broker 2 last caught up at 0; the checks at 500 and 1000 keep it (1000 is not > 1000),
        # the one at 1500 drops it and the commit raises the HW at once
        assert (request.completed_ms, request.cause, request.errors) == (1500, "condition", {"t-0": "NONE"})
        assert cluster.snapshot().partition("t-0").isr == (0, 1)


async def test_shrink_below_min_isr_while_waiting_gives_not_enough_replicas_after_append(autojump_clock):
    config = {
        "replica.lag.time.max.ms": 1000,
        "min.insync.replicas": 3,
        "minibroker.hw.freeze.under.min.isr": False,  # Kafka before 3.7
    }
    async with open_cluster(3, RF3, config) as cluster:
        cluster.pause_fetcher(2)
        producer = cluster.producer("p", acks=-1)
        request = await producer.send_and_wait("t", 0)
        assert (request.completed_ms, request.errors) == (1500, {"t-0": "NOT_ENOUGH_REPLICAS_AFTER_APPEND"})
        assert request.cause == "condition"
        rejected = await producer.send_and_wait("t", 0)
        assert (rejected.completed_ms, rejected.errors) == (1500, {"t-0": "NOT_ENOUGH_REPLICAS"})
        assert cluster.snapshot().partition("t-0").replica(0).log_end_offset == 1


async def test_with_the_hw_freeze_the_same_produce_times_out_instead(autojump_clock):
    config = {"replica.lag.time.max.ms": 1000, "min.insync.replicas": 3}
    async with open_cluster(3, RF3, config) as cluster:
        cluster.pause_fetcher(2)
        producer = cluster.producer("p", acks=-1, request_timeout_ms=5000)
        request = await producer.send_and_wait("t", 0)
        assert (request.completed_ms, request.errors) == (5000, {"t-0": "REQUEST_TIMED_OUT"})
        assert cluster.snapshot().partition("t-0").replica(0).high_watermark == 0


async def test_resumed_follower_lets_the_waiting_produce_complete(autojump_clock):
    async with open_cluster(3, RF3) as cluster:
        cluster.pause_fetcher(2)
        producer = cluster.producer("p", acks=-1)
        request = producer.send("t", 0)
        await cluster.clock.sleep_until(700)
        assert not request.completed
        cluster.resume_fetcher(2)
        await request.wait()
        assert (request.completed_ms, request.cause, request.errors) == (700, "condition", {"t-0": "NONE"})


async def test_controlled_shutdown_of_the_leader_answers_waiting_requests_not_leader(autojump_clock):
    async with open_cluster(3, RF3) as cluster:
        cluster.pause_fetcher(1)
        cluster.pause_fetcher(2)
        producer = cluster.producer("p", acks=-1)
        consumer = cluster.consumer("c", fetch_max_wait_ms=10_000, fetch_min_bytes=1_000)
        consumer.assign([TP])
        produce = producer.send("t", 0)
        (fetch,) = consumer.fetch()
        await cluster.clock.sleep_until(50)
        cluster.shutdown(0)
        await produce.wait()
        await fetch.wait()
        assert (produce.completed_ms, produce.cause, produce.errors) == (
            50,
            "leadership",
            {"t-0": "NOT_LEADER_OR_FOLLOWER"},
        )
        assert (fetch.completed_ms, fetch.cause, fetch.errors) == (
            50,
            "leadership",
            {"t-0": "NOT_LEADER_OR_FOLLOWER"},
        )
        view = cluster.snapshot().partition("t-0")
        assert (view.leader, view.leader_epoch, view.isr) == (1, 1, (1, 2))


async def test_leader_crash_resets_connections_and_a_new_leader_from_the_isr_serves(autojump_clock):
    config = {"min.insync.replicas": 2}
    async with open_cluster(3, RF3, config) as cluster:
        producer = cluster.producer("p", acks=-1)
        acked = [await producer.send_and_wait("t", 0, count=2) for _ in range(3)]
        assert all(r.errors == {"t-0": "NONE"} for r in acked)
        cluster.pause_fetcher(1)
        cluster.pause_fetcher(2)
        waiting = producer.send("t", 0)
        await cluster.clock.sleep_until(20)
        cluster.crash(0)
        await waiting.wait()
        assert (waiting.completed_ms, waiting.cause, waiting.errors) == (
            20,
            "network",
            {"t-0": "NETWORK_EXCEPTION"},
        )
        await trio.testing.wait_all_tasks_blocked()
        view = cluster.snapshot().partition("t-0")
        assert (view.leader, view.leader_epoch, view.isr) == (1, 1, (1, 2))
        cluster.resume_fetcher(1)
        cluster.resume_fetcher(2)
        after = await producer.send_and_wait("t", 0)
        # the unacknowledged record 6 reached broker 1 in a fetch already parked before the pause
        assert (after.broker, after.errors, after.base_offsets) == (1, {"t-0": "NONE"}, {"t-0": 7})
        # every record acknowledged with acks=-1 (offsets 0..5) is on every ISR member
        for broker in (1, 2):
            batches = cluster.brokers[broker].logs[TP].batches()
            assert [(b.base_offset, b.count, b.leader_epoch) for b in batches][:3] == [
                (0, 2, 0),
                (2, 2, 0),
                (4, 2, 0),
            ]


async def test_crashed_broker_restarts_truncates_and_rejoins_the_isr(autojump_clock):
    async with open_cluster(3, RF3) as cluster:
        producer = cluster.producer("p", acks=1)
        await producer.send_and_wait("t", 0, count=2)
        await trio.testing.wait_all_tasks_blocked()  # both followers have fetched again and wait
        cluster.pause_fetcher(1)
        cluster.pause_fetcher(2)
        # a fetch already parked on the leader still delivers the next record (offset 2)...
        await producer.send_and_wait("t", 0, count=1)
        await trio.testing.wait_all_tasks_blocked()
        # ...after which the paused followers ask for nothing: offsets 3..5 are only on the leader
        await producer.send_and_wait("t", 0, count=3)
        assert [cluster.brokers[b].logs[TP].log_end_offset for b in (0, 1, 2)] == [6, 3, 3]
        cluster.crash(0)
        cluster.resume_fetcher(1)
        cluster.resume_fetcher(2)
        await trio.testing.wait_all_tasks_blocked()
        await producer.send_and_wait("t", 0, count=1)  # new leader 1 writes offset 3 in epoch 1
        await cluster.restart(0)
        await cluster.clock.sleep_until(cluster.now() + 100)
        old_leader = cluster.brokers[0].logs[TP]
        assert old_leader.log_end_offset == 4  # offsets 3..5 of epoch 0 were truncated away
        assert [(b.base_offset, b.leader_epoch) for b in old_leader.batches()] == [(0, 0), (2, 0), (3, 1)]
        assert cluster.snapshot().partition("t-0").isr == (0, 1, 2)  # in replica order


async def test_consumer_fetch_completes_when_min_bytes_accumulate(autojump_clock):
    async with open_cluster(3, RF3) as cluster:
        consumer = cluster.consumer("c", fetch_min_bytes=250, fetch_max_wait_ms=5000)
        consumer.assign([TP])
        producer = cluster.producer("p", acks=-1)
        (fetch,) = consumer.fetch()
        for at in (100, 200, 300):
            await cluster.clock.sleep_until(at)
            producer.send("t", 0, count=1, size=100)
        await fetch.wait()
        assert (fetch.completed_ms, fetch.cause, fetch.records) == (300, "condition", {"t-0": 3})
        assert fetch.bytes == {"t-0": 300}


async def test_consumer_fetch_on_an_idle_partition_returns_empty_at_max_wait(autojump_clock):
    async with open_cluster(3, RF3) as cluster:
        consumer = cluster.consumer("c", fetch_max_wait_ms=500)
        consumer.assign([TP])
        await cluster.clock.sleep_until(40)
        (fetch,) = await consumer.poll()
        assert (fetch.completed_ms, fetch.cause, fetch.errors, fetch.records) == (
            540,
            "expiry",
            {"t-0": "NONE"},
            {"t-0": 0},
        )


async def test_consumer_never_sees_offsets_at_or_above_the_hw(autojump_clock):
    async with open_cluster(3, RF3) as cluster:
        cluster.pause_fetcher(2)
        producer = cluster.producer("p", acks=1)
        consumer = cluster.consumer("c", fetch_max_wait_ms=0)
        consumer.assign([TP])
        for _ in range(5):
            await producer.send_and_wait("t", 0, count=2)
            (fetch,) = await consumer.poll()
            view = cluster.snapshot().partition("t-0")
            assert all(
                offset + count <= view.replica(0).high_watermark for offset, count in consumer.received[TP]
            )
            assert fetch.high_watermarks == {"t-0": 0}
        assert consumer.received[TP] == []


async def test_acks_1_and_0_do_not_wait_for_followers(autojump_clock):
    async with open_cluster(3, RF3, latency_ms=3) as cluster:
        cluster.pause_fetcher(1)
        cluster.pause_fetcher(2)
        one = await cluster.producer("one", acks=1).send_and_wait("t", 0)
        assert (one.completed_ms, one.cause, one.errors) == (6, "immediate", {"t-0": "NONE"})
        zero = cluster.producer("zero", acks=0).send("t", 0)
        assert (zero.completed_ms, zero.errors, zero.base_offsets) == (6, {"t-0": "NONE"}, {"t-0": -1})
        await cluster.clock.sleep_until(20)
        assert cluster.snapshot().partition("t-0").replica(0).log_end_offset == 2


async def test_dropped_link_times_the_request_out_client_side(autojump_clock):
    async with open_cluster(3, RF3) as cluster:
        producer = cluster.producer("p", acks=-1, request_timeout_ms=1000)
        cluster.drop_link("p", 0)
        request = await producer.send_and_wait("t", 0)
        # the broker never got it: the client gives up after request.timeout.ms + the 1000 ms grace
        assert (request.completed_ms, request.cause, request.errors) == (
            2000,
            "network",
            {"t-0": "REQUEST_TIMED_OUT"},
        )
        cluster.heal_link("p", 0)
        again = await producer.send_and_wait("t", 0)
        assert again.errors == {"t-0": "NONE"}
