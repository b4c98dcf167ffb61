"""The emulated share consumer (KIP-932) in trio's virtual time: acknowledgements by rule ride on the next
ShareFetch, a stalled member's late acknowledgements are refused, a crashed one's records come back when
their lock expires."""

from __future__ import annotations

from minibroker.broker.share import AcknowledgeType
from minibroker.common.messages import ProduceData, TopicPartition
from minibroker.sim import TopicSpec
from tests.coordinator.group.helpers import open_group_cluster

TP = TopicPartition("t", 0)
CONFIG = {
    "share.coordinator.state.topic.num.partitions": 1,
    "group.share.record.lock.duration.ms": 2000,
}


async def _cluster():
    cm, cluster, sink = await open_group_cluster(1, config=CONFIG)
    cluster.create_topic(TopicSpec("t", 1, 1))
    return cm, cluster, sink


async def test_rules_decide_each_acknowledgement_and_they_ride_on_the_next_share_fetch(autojump_clock):
    cm, cluster, sink = await _cluster()
    try:
        s = cluster.share_consumer("s", ["t"], {"group.id": "sg"})
        s.acknowledge(AcknowledgeType.REJECT)
        s.acknowledge(AcknowledgeType.RELEASE, [1])
        s.acknowledge(AcknowledgeType.ACCEPT, [0])
        await cluster.nursery.start(s.run)
        await cluster.clock.sleep_until(100)
        cluster.producer("p").produce({TP: ProduceData(3, 30)})
        await cluster.clock.sleep_until(101)
        first = [(a.offset, a.delivery_count, a.type.name, a.error.name) for a in s.acknowledgements[:3]]
        assert first == [(0, 1, "ACCEPT", "NONE"), (1, 1, "RELEASE", "NONE"), (2, 1, "REJECT", "NONE")]
        (ack,) = [e for e in sink.of_kind("share.ack") if e["offset"] == 0]
        assert (ack["time_ms"], ack["last_offset"], ack["types"]) == (100, 2, ["ACCEPT", "RELEASE", "REJECT"])
        # offset 1 comes back at once, is released again, ... until the delivery-count limit (5) archives it
        assert [d.delivery_count for d in s.deliveries if d.offset == 1] == [1, 2, 3, 4, 5]
        (archived,) = [e for e in sink.of_kind("share.archive") if e["cause"] == "limit"]
        assert (archived["offset"], archived["time_ms"]) == (1, 100)
        s.crash()
    finally:
        await cm.__aexit__(None, None, None)


async def test_a_stalled_members_late_acknowledgements_are_refused(autojump_clock):
    cm, cluster, _ = await _cluster()
    try:
        s1 = cluster.share_consumer("s1", ["t"], {"group.id": "sg"})
        s2 = cluster.share_consumer("s2", ["t"], {"group.id": "sg"})
        await cluster.nursery.start(s1.run)
        await cluster.clock.sleep_until(1100)
        s1.stall()  # its ShareFetch parked at 1000 is still out
        await cluster.clock.sleep_until(1200)
        cluster.producer("p").produce({TP: ProduceData(2, 20)})
        await cluster.clock.sleep_until(1300)
        await cluster.nursery.start(s2.run)
        await cluster.clock.sleep_until(4000)
        assert [(d.at_ms, d.offset, d.delivery_count) for d in s1.deliveries] == [(1200, 0, 1), (1200, 1, 1)]
        # the lock (2000 ms) ran out at 3200: s2 got both with delivery count 2
        assert [(d.at_ms, d.offset, d.delivery_count) for d in s2.deliveries] == [(3200, 0, 2), (3200, 1, 2)]
        s1.stall(False)
        await cluster.clock.sleep_until(4600)
        # sent at 4000 on a ShareFetch that found nothing to acquire: answered when it expired, 500 ms later
        assert [(a.at_ms, a.answered_ms, a.offset, a.error.name) for a in s1.acknowledgements] == [
            (4000, 4500, 0, "INVALID_RECORD_STATE"),
            (4000, 4500, 1, "INVALID_RECORD_STATE"),
        ]
        assert s1.errors == [("ShareAcknowledge", "INVALID_RECORD_STATE")]
        s1.crash()
        s2.crash()
    finally:
        await cm.__aexit__(None, None, None)


async def test_a_crashed_members_records_come_back_when_the_lock_expires(autojump_clock):
    cm, cluster, sink = await _cluster()
    try:
        s1 = cluster.share_consumer("s1", ["t"], {"group.id": "sg"})
        await cluster.nursery.start(s1.run)
        await cluster.clock.sleep_until(10)
        s1.crash()
        cluster.producer("p").produce({TP: ProduceData(1, 10)})  # its ShareFetch parked at 0 acquires it
        await cluster.clock.sleep_until(20)
        s2 = cluster.share_consumer("s2", ["t"], {"group.id": "sg"})
        await cluster.nursery.start(s2.run)
        await cluster.clock.sleep_until(3000)
        (expired,) = sink.of_kind("share.lock.expire")
        assert (expired["member"], expired["time_ms"]) == ("s1", 2010)
        assert [(d.at_ms, d.offset, d.delivery_count) for d in s2.deliveries] == [(2010, 0, 2)]
        assert s1.deliveries == []  # the answer to the crashed client is never read
        s2.crash()
    finally:
        await cm.__aexit__(None, None, None)
