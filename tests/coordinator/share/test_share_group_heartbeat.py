"""ShareGroupHeartbeat and ShareFetch on the emulated cluster in virtual time (trio's MockClock): members
join and get the simple assignor's partitions, a silent member's session expires at exactly
``group.share.session.timeout.ms``, and a parked ShareFetch is answered when a produce raises the HW."""

from __future__ import annotations

from minibroker.broker.share import ShareFetchRequest
from minibroker.common.messages import ProduceData, ProduceRequest, TopicPartition
from minibroker.coordinator.share import ShareGroupDescribeRequest, ShareGroupHeartbeatRequest
from minibroker.sim import TopicSpec
from tests.coordinator.group.helpers import Raw, open_group_cluster

TP = TopicPartition("t", 0)
SETTINGS = {"group.share.session.timeout.ms": 6000, "group.share.record.lock.duration.ms": 1000}


async def test_members_share_the_partitions_and_a_silent_member_expires(autojump_clock):
    cm, cluster, sink = await open_group_cluster(1, config=SETTINGS)
    try:
        cluster.create_topic(TopicSpec("t", 1, 1))
        a, b = Raw(cluster, "a"), Raw(cluster, "b")
        first = await a.call(0, ShareGroupHeartbeatRequest("sg", "", 0, ("t",)))
        second = await b.call(0, ShareGroupHeartbeatRequest("sg", "m-b", 0, ("t",)))
        assert (first.error.name, first.member_epoch, first.assignment) == ("NONE", 1, {"t": (0,)})
        assert (second.member_id, second.member_epoch, second.assignment) == ("m-b", 2, {"t": (0,)})
        (described,) = (await a.call(0, ShareGroupDescribeRequest(("sg",)))).groups
        assert [(m.member_id, m.member_epoch) for m in described.members] == [
            (first.member_id, 1),
            ("m-b", 2),
        ]
        joined = cluster.now()
        await cluster.clock.sleep_until(joined + 1000)
        again = await a.call(0, ShareGroupHeartbeatRequest("sg", first.member_id, 1))
        assert (again.member_epoch, again.assignment) == (
            2,
            {"t": (0,)},
        )  # the epoch moved: assignment resent
        stale = await a.call(0, ShareGroupHeartbeatRequest("sg", first.member_id, 1))  # its previous epoch
        assert (stale.error.name, stale.member_epoch, stale.assignment) == ("NONE", 2, {"t": (0,)})
        fenced = await a.call(0, ShareGroupHeartbeatRequest("sg", first.member_id, 7))
        assert fenced.error.name == "FENCED_MEMBER_EPOCH"
        await cluster.clock.sleep_until(joined + 6001)
        (described,) = (await a.call(0, ShareGroupDescribeRequest(("sg",)))).groups
        assert [m.member_id for m in described.members] == [first.member_id]
        assert (described.state, described.group_epoch, described.assignor) == ("Stable", 3, "simple")
        (left,) = sink.of_kind("share.group.leave")
        assert (left["member"], left["cause"], left["time_ms"]) == ("m-b", "session", joined + 6000)
        moved = await a.call(0, ShareGroupHeartbeatRequest("sg", first.member_id, 2))
        assert (moved.member_epoch, moved.assignment) == (3, {"t": (0,)})
        too_old = await a.call(0, ShareGroupHeartbeatRequest("sg", first.member_id, 1))  # neither 3 nor 2
        assert too_old.error.name == "FENCED_MEMBER_EPOCH"
    finally:
        await cm.__aexit__(None, None, None)


async def test_a_parked_share_fetch_is_answered_when_a_produce_raises_the_hw(autojump_clock):
    cm, cluster, sink = await open_group_cluster(1, config=SETTINGS)
    try:
        cluster.create_topic(TopicSpec("t", 1, 1))
        a = Raw(cluster, "a")
        opened = await a.call(0, ShareFetchRequest("sg", "m", 0, 0, (TP,)))
        assert opened.partitions[TP].acquired == ()
        parked = a.send(0, ShareFetchRequest("sg", "m", 1, 5000, (TP,), request_id="sf"))
        start = cluster.now()
        await cluster.clock.sleep_until(start + 300)
        assert parked.at is None
        await a.call(0, ProduceRequest(-1, 1000, {TP: ProduceData(2, 20)}, "p"))
        produced = cluster.now()
        while parked.at is None:
            await cluster.clock.sleep_until(cluster.now() + 1)
        acquired = [
            (r.first_offset, r.last_offset, r.delivery_count) for r in parked.response.partitions[TP].acquired
        ]
        assert acquired == [(0, 1, 1)] and parked.response.cause == "condition"
        (done,) = [e for e in sink.of_kind("op.complete") if e["purgatory"] == "ShareFetch"]
        assert done["time_ms"] == produced and parked.at == produced
        await cluster.clock.sleep_until(produced + 1001)
        (expired,) = sink.of_kind("share.lock.expire")
        assert expired["time_ms"] == produced + 1000
    finally:
        await cm.__aexit__(None, None, None)


async def test_a_parked_share_fetch_is_answered_by_a_lock_expiry_or_at_max_wait(autojump_clock):
    cm, cluster, sink = await open_group_cluster(1, config=SETTINGS)
    try:
        cluster.create_topic(TopicSpec("t", 1, 1))
        a = Raw(cluster, "a")
        await a.call(0, ShareFetchRequest("sg", "m1", 0, 0, (TP,)))
        await a.call(0, ShareFetchRequest("sg", "m2", 0, 0, (TP,)))
        await cluster.clock.sleep_until(cluster.now() + 100)  # the share coordinator answered the read
        await a.call(0, ProduceRequest(-1, 1000, {TP: ProduceData(1, 10)}, "p"))
        held = await a.call(0, ShareFetchRequest("sg", "m1", 1, 0, (TP,)))
        acquired_at = cluster.now()
        assert [(r.first_offset, r.delivery_count) for r in held.partitions[TP].acquired] == [(0, 1)]
        woken = a.send(0, ShareFetchRequest("sg", "m2", 1, 5000, (TP,), request_id="by-lock"))
        timed = a.send(0, ShareFetchRequest("sg", "m3", 0, 300, (TP,), request_id="by-time"))
        while woken.at is None:
            await cluster.clock.sleep_until(cluster.now() + 1)
        assert woken.at == acquired_at + 1000  # the lock's exact duration
        assert [(r.first_offset, r.delivery_count) for r in woken.response.partitions[TP].acquired] == [
            (0, 2)
        ]
        assert (timed.at, timed.response.cause, timed.response.partitions[TP].acquired) == (
            acquired_at + 300,
            "expiry",
            (),
        )
        causes = {e["op"]: (e["time_ms"], e["cause"]) for e in sink.of_kind("op.complete")}
        assert causes["by-lock"] == (acquired_at + 1000, "condition")
        assert causes["by-time"] == (acquired_at + 300, "expiry")
    finally:
        await cm.__aexit__(None, None, None)
