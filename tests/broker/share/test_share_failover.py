"""A share partition's state survives its leader: acknowledgements are written with acks=-1 to
``__share_group_state`` through the share coordinator, and the new leader reads them back (MockClock)."""

from __future__ import annotations

from minibroker.broker.share import AcknowledgementBatch, ShareAcknowledgeRequest, ShareFetchRequest
from minibroker.common.messages import ProduceData, ProduceRequest, TopicPartition
from minibroker.sim import TopicSpec
from tests.coordinator.group.helpers import Raw, open_group_cluster

TP = TopicPartition("t", 0)


async def _fetch(raw, cluster, member, epoch, wait=0):
    return await raw.call(cluster.leader_of(TP), ShareFetchRequest("sg", member, epoch, wait, (TP,)))


async def test_a_new_leader_resumes_the_acknowledged_and_archived_state(autojump_clock):
    config = {"share.coordinator.state.topic.num.partitions": 1}
    cm, cluster, sink = await open_group_cluster(3, config=config)
    try:
        cluster.create_topic(TopicSpec("t", 1, 3))
        await cluster.clock.sleep_until(cluster.now() + 10)
        a = Raw(cluster, "a")
        await _fetch(a, cluster, "m1", 0)  # opens the session; the window starts at the HW, 0
        await cluster.clock.sleep_until(cluster.now() + 200)  # the share coordinator answered the read
        leader = cluster.leader_of(TP)
        await a.call(leader, ProduceRequest(-1, 5000, {TP: ProduceData(4, 40)}, "p"))
        got = await _fetch(a, cluster, "m1", 1)
        assert [(r.first_offset, r.last_offset, r.delivery_count) for r in got.partitions[TP].acquired] == [
            (0, 3, 1)
        ]
        acks = {TP: (AcknowledgementBatch(0, 1, (1, 3)),)}  # ACCEPT 0, REJECT 1; 2 and 3 stay acquired
        answer = await a.call(leader, ShareAcknowledgeRequest("sg", "m1", 2, acks))
        assert answer.partitions[TP].name == "NONE"
        (write,) = [e for e in sink.of_kind("share.state.write") if e["offset"] == 2]
        assert (write["error"], write["count"]) == ("NONE", 1)

        cluster.crash(leader)
        await cluster.clock.sleep_until(cluster.now() + 1)
        assert cluster.leader_of(TP) not in (leader, -1)
        await _fetch(a, cluster, "m2", 0)
        later = await _fetch(a, cluster, "m2", 1, wait=1000)
        acquired = [(r.first_offset, r.last_offset, r.delivery_count) for r in later.partitions[TP].acquired]
        assert acquired == [(2, 3, 1)]  # a delivery is kept when released or acknowledged, not on acquisition
        new = cluster.brokers[cluster.leader_of(TP)].share_partition_manager.share_partitions[("sg", TP)]
        assert (new.start_offset, new.end_offset) == (2, 3)
    finally:
        await cm.__aexit__(None, None, None)


async def test_acknowledgements_in_a_share_fetch_are_answered_once_written(autojump_clock):
    config = {"share.coordinator.state.topic.num.partitions": 1}
    cm, cluster, sink = await open_group_cluster(3, config=config, latency_ms=5)
    try:
        cluster.create_topic(TopicSpec("t", 1, 3))
        await cluster.clock.sleep_until(cluster.now() + 100)
        a = Raw(cluster, "a")
        await _fetch(a, cluster, "m1", 0)
        await cluster.clock.sleep_until(cluster.now() + 200)
        await a.call(cluster.leader_of(TP), ProduceRequest(-1, 5000, {TP: ProduceData(2, 20)}, "p"))
        await _fetch(a, cluster, "m1", 1)
        acks = {TP: (AcknowledgementBatch(0, 1, (1,)),)}
        sent = cluster.now()
        answer = await a.call(cluster.leader_of(TP), ShareFetchRequest("sg", "m1", 2, 0, (TP,), acks))
        writes = [e for e in sink.of_kind("share.state.write") if e["time_ms"] > sent]
        assert len(writes) == 1, "the answer came before the acknowledgement was written"
        (write,) = writes
        assert answer.partitions[TP].acknowledge_error.name == "NONE" and write["offset"] == 2
        # answered once the write was in: its answer to the leader (5 ms), the leader's to the client (5 ms)
        assert cluster.now() == write["time_ms"] + 10
    finally:
        await cm.__aexit__(None, None, None)
