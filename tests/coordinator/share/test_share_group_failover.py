"""A share group's records in ``__consumer_offsets``: a new group coordinator replays them, so members,
epochs, the target assignment and the topics the group has state on survive a coordinator failover."""

from __future__ import annotations

from minibroker.common.messages import TopicPartition
from minibroker.coordinator.group import OFFSETS_TOPIC, records
from minibroker.coordinator.share import ShareGroupDescribeRequest, ShareGroupHeartbeatRequest
from minibroker.coordinator.share.messages import (
    AlterShareGroupOffsetsRequest,
    DeleteShareGroupOffsetsRequest,
    DescribeShareGroupOffsetsRequest,
)
from minibroker.sim import TopicSpec
from tests.coordinator.group.helpers import Raw, open_group_cluster

SETTINGS = {
    "group.share.session.timeout.ms": 6000,
    "minibroker.coordinator.load.ms.per.record": 10,
}


def _logged(cluster, broker: int) -> list[tuple[str, str | None]]:
    log = cluster.brokers[broker].replica_manager.logs[TopicPartition(OFFSETS_TOPIC, 0)]
    decoded = [records.decode(v) for b in log.batches() for v in b.values or ()]
    return [(r["type"], r.get("member")) for r in decoded]


async def test_a_new_coordinator_replays_the_share_group(autojump_clock):
    cm, cluster, sink = await open_group_cluster(3, config=SETTINGS)
    try:
        cluster.create_topic(TopicSpec("t", 2, 3))
        cluster.ensure_share_state_topic()
        a = Raw(cluster, "a")
        first = await a.call(0, ShareGroupHeartbeatRequest("sg", "m-a", 0, ("t",), client_id="ca"))
        second = await a.call(0, ShareGroupHeartbeatRequest("sg", "m-b", 0, ("t",), "r1", "cb"))
        again = await a.call(0, ShareGroupHeartbeatRequest("sg", "m-a", 1))
        assert [(r.member_epoch, r.assignment) for r in (first, second, again)] == [
            (1, {"t": (0, 1)}),
            (2, {"t": (1,)}),
            (2, {"t": (0,)}),
        ]
        # each heartbeat that changed something wrote its records before it was answered
        assert _logged(cluster, 0) == [
            ("share_state_partitions", None),
            ("share_group", None),
            ("share_target", None),
            ("share_member", "m-a"),
            ("share_group", None),
            ("share_target", None),
            ("share_member", "m-b"),
            ("share_member", "m-a"),
        ]
        crash_at = cluster.now()
        cluster.crash(0)
        await cluster.clock.sleep_until(crash_at + 1)
        new = cluster.leader_of(TopicPartition(OFFSETS_TOPIC, 0))
        assert new != 0
        loading = await a.call(new, ShareGroupDescribeRequest(("sg",)))
        assert loading.groups[0].error.name == "COORDINATOR_LOAD_IN_PROGRESS"
        await cluster.clock.sleep_until(crash_at + 81)  # 8 records at 10 ms each: loaded at + 80
        (load,) = [e for e in sink.of_kind("group.load") if e["broker"] == new]
        assert (load["time_ms"], load["records"], load["groups"]) == (crash_at + 80, 8, 1)
        (described,) = (await a.call(new, ShareGroupDescribeRequest(("sg",)))).groups
        assert (described.error.name, described.state, described.group_epoch, described.assignment_epoch) == (
            "NONE",
            "Stable",
            2,
            2,
        )
        assert [
            (m.member_id, m.member_epoch, m.client_id, m.rack_id, m.subscribed_topics, m.assignment)
            for m in described.members
        ] == [
            ("m-a", 2, "ca", None, ("t",), {"t": (0,)}),
            ("m-b", 2, "cb", "r1", ("t",), {"t": (1,)}),
        ]
        # without topics: the group's subscribed topics, replayed
        offsets = await a.call(new, DescribeShareGroupOffsetsRequest("sg"))
        assert {tp: (o.error.name, o.start_offset) for tp, o in offsets.partitions.items()} == {
            TopicPartition("t", 0): ("NONE", -1),
            TopicPartition("t", 1): ("NONE", -1),
        }
        # m-a's previous epoch is still accepted, a later one is fenced; m-a keeps heartbeating, m-b is
        # silent: the sessions re-armed at the load expire m-b at exactly the load + the session timeout
        previous = await a.call(new, ShareGroupHeartbeatRequest("sg", "m-a", 1))
        assert (previous.error.name, previous.member_epoch, previous.assignment) == ("NONE", 2, {"t": (0,)})
        fenced = await a.call(new, ShareGroupHeartbeatRequest("sg", "m-a", 3))
        assert fenced.error.name == "FENCED_MEMBER_EPOCH"
        for at in (crash_at + 3000, crash_at + 6000):
            await cluster.clock.sleep_until(at)
            assert (await a.call(new, ShareGroupHeartbeatRequest("sg", "m-a", 2))).error.name == "NONE"
        await cluster.clock.sleep_until(crash_at + 80 + 6001)
        (left,) = sink.of_kind("share.group.leave")
        assert (left["member"], left["cause"], left["broker"], left["time_ms"]) == (
            "m-b",
            "session",
            new,
            crash_at + 80 + 6000,
        )
        (described,) = (await a.call(new, ShareGroupDescribeRequest(("sg",)))).groups
        assert [(m.member_id, m.member_epoch) for m in described.members] == [("m-a", 2)]
        assert described.group_epoch == 3
    finally:
        await cm.__aexit__(None, None, None)


async def test_the_topics_altered_and_deleted_survive_a_failover(autojump_clock):
    cm, cluster, _sink = await open_group_cluster(3, config=SETTINGS)
    try:
        cluster.create_topic(TopicSpec("t", 1, 3))
        cluster.create_topic(TopicSpec("u", 2, 3))
        cluster.ensure_share_state_topic()
        a = Raw(cluster, "a")
        assert (await a.call(0, ShareGroupHeartbeatRequest("sg", "m", 0, ("t",)))).error.name == "NONE"
        assert (await a.call(0, ShareGroupHeartbeatRequest("sg", "m", -1))).error.name == "NONE"
        altered = await a.call(0, AlterShareGroupOffsetsRequest("sg", {TopicPartition("u", 1): 5}))
        assert {tp: (o.error.name, o.start_offset) for tp, o in altered.partitions.items()} == {
            TopicPartition("u", 1): ("NONE", 5)
        }
        deleted = await a.call(0, DeleteShareGroupOffsetsRequest("sg", ("t",)))
        assert deleted.error.name == "NONE"
        # t's state partitions, then u added, then t deleted: one topics record each
        topics = [
            records.decode(v)["value"]["topics"]
            for b in cluster.brokers[0].replica_manager.logs[TopicPartition(OFFSETS_TOPIC, 0)].batches()
            for v in b.values or ()
            if records.decode(v)["type"] == "share_state_partitions"
        ]
        assert topics == [["t"], ["t", "u"], ["u"]]
        crash_at = cluster.now()
        cluster.crash(0)
        await cluster.clock.sleep_until(crash_at + 1000)
        new = cluster.leader_of(TopicPartition(OFFSETS_TOPIC, 0))
        (described,) = (await a.call(new, ShareGroupDescribeRequest(("sg",)))).groups
        assert (described.state, described.group_epoch, described.members) == ("Empty", 2, ())
        offsets = await a.call(new, DescribeShareGroupOffsetsRequest("sg"))
        assert {tp: (o.error.name, o.start_offset) for tp, o in offsets.partitions.items()} == {
            TopicPartition("u", 0): ("NONE", -1),
            TopicPartition("u", 1): ("NONE", 5),
        }
    finally:
        await cm.__aexit__(None, None, None)
