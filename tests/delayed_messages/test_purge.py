"""Committed records of the delay topics are deleted (DeleteRecords): log start offsets follow the
commits on every replica, nothing uncommitted goes, and a purged log drops its old segments."""

from __future__ import annotations

from minibroker.common.messages import ProduceData, TopicPartition
from minibroker.delayed_messages.headers import DUE_MS, REAL_TOPIC, build_batch
from minibroker.sim import TopicSpec
from tests.delayed_messages.helpers import delayed_cluster, delivered_ids, events, wheel_cluster

ORDERS = [TopicSpec("orders", 1, 3)]
LEVELS = {"delay.levels": ["5s", "1m"], "delay.service.purge.interval.ms": 2_000}


def log_starts(cluster, tp):
    return sorted({b.logs[tp].log_start_offset for b in cluster.brokers if tp in b.logs})


async def test_forwarded_level_records_are_deleted_and_held_ones_stay(autojump_clock):
    async with delayed_cluster(3, ORDERS, LEVELS) as (cluster, services):
        producer = cluster.producer("app", acks=-1)
        await producer.send_and_wait("orders", 0, count=4, delay_ms=5_000)  # __delay_5s-0, offsets 0-3
        await producer.send_and_wait("orders", 0, count=2, delay_ms=60_000)  # __delay_1m-0, held a minute
        five, minute = TopicPartition("__delay_5s", 0), TopicPartition("__delay_1m", 0)
        await cluster.clock.sleep_until(4_999)
        assert log_starts(cluster, five) == [0]
        await cluster.clock.sleep_until(10_000)
        assert [e["offset"] for e in events(services, "delay.commit")] == [4]
        assert log_starts(cluster, five) == [4]  # leader and both followers
        assert log_starts(cluster, minute) == [0]  # nothing of it committed: nothing deleted
        await cluster.clock.sleep_until(65_000)
        assert delivered_ids(cluster, "orders") == [f"app-{i}" for i in range(6)]
        assert log_starts(cluster, minute) == [2]
        assert services.stats.delivered_count == 6


async def test_the_wheel_ingest_deletes_what_it_committed(autojump_clock, tmp_path):
    settings = {"delay.wheel.tick.ms": 100, "delay.wheel.slots": 100, "delay.wheel.purge.interval.ms": 500}
    async with wheel_cluster(3, ORDERS, tmp_path, settings) as (cluster, group, _):
        ingest = TopicPartition("__delay_wheel", 0)
        producer = cluster.producer("kafka-client", acks=-1)
        for i in range(3):
            due = cluster.now() + 2_000
            raw = build_batch(
                [(cluster.now(), None, b"%d" % i, [(REAL_TOPIC, b"orders"), (DUE_MS, b"%d" % due)])]
            )
            (request,) = producer.produce({ingest: ProduceData(1, len(raw), raw=raw)})
            await request.wait()
            await cluster.clock.sleep_until(cluster.now() + 400)
        await cluster.clock.sleep_until(2_000)
        # committed and deleted before any is due: the wheel's files hold them now
        assert log_starts(cluster, ingest) == [3]
        assert group.stats.delivered_count == 0
        await cluster.clock.sleep_until(4_000)
        assert delivered_ids(cluster, "orders") == [f"__delay_wheel-0@{i}" for i in range(3)]


async def test_a_purged_log_drops_its_segments_below_the_start_offset():
    from minibroker.broker.log import Log

    log = Log(segment_bytes=100)
    for _ in range(10):
        log.append_as_leader(1, 60, 0, 0)  # a segment per record
    log.maybe_increment_high_watermark(10)
    assert log.maybe_increment_log_start_offset(7)
    assert [s.base_offset for s in log.segments] == [7, 8, 9]
