"""The emulator's consumer under KIP-848's consumer protocol, in virtual time: the others keep fetching
while a member joins, a fenced member joins again, leaving releases the partitions, commits carry epochs."""

from __future__ import annotations

from minibroker.clients.consumer_membership_manager import ConsumerMembershipManager, member_id_of
from minibroker.common.messages import TopicPartition
from minibroker.sim import TopicSpec
from tests.coordinator.group.helpers import open_group_cluster

SETTINGS = {"group.id": "g", "group.protocol": "consumer", "enable.auto.commit": False}
BROKER = {"group.consumer.heartbeat.interval.ms": 3000, "group.consumer.session.timeout.ms": 10_000}


def _start(cluster, client_id: str, settings: dict | None = None) -> ConsumerMembershipManager:
    consumer = cluster.consumer(client_id, settings or SETTINGS)
    membership = consumer.subscribe(["t"])
    assert isinstance(membership, ConsumerMembershipManager)
    cluster._nursery.start_soon(membership.run)
    return membership


async def test_a_joining_member_stops_none_of_the_partitions_the_others_keep(autojump_clock):
    cm, cluster, sink = await open_group_cluster(config=BROKER)
    try:
        cluster.create_topic(TopicSpec("t", 4, 1))
        c1 = _start(cluster, "c1")
        fetched: list[tuple[int, tuple[str, ...]]] = []
        c1.consumer.on_fetch = lambda request: fetched.append(
            (cluster.now(), tuple(sorted(str(tp) for tp in request.partitions)))
        )
        await cluster.clock.sleep_until(1000)
        c2 = _start(cluster, "c2")
        await cluster.clock.sleep_until(4001)
        # c1 fetched t-0 and t-1 in every fetch from its join to c2's stable assignment at 4000
        during = [parts for at, parts in fetched if 1000 <= at <= 4000]
        assert during and all({"t-0", "t-1"} <= set(parts) for parts in during)
        assert {parts for at, parts in fetched if at > 3000} == {("t-0", "t-1")}
        assert (c1.member_epoch, sorted(map(str, c1.owned))) == (2, ["t-0", "t-1"])
        assert (c2.member_epoch, sorted(map(str, c2.owned))) == (2, ["t-2", "t-3"])
        revoked = [(e["client"], e["time_ms"], e["partitions"]) for e in sink.of_kind("member.revoked")]
        assert revoked == [("c1", 3000, ["t-2", "t-3"])]
    finally:
        await cm.__aexit__(None, None, None)


async def test_a_fenced_member_joins_again_with_epoch_0_and_gets_its_partitions_back(autojump_clock):
    cm, cluster, sink = await open_group_cluster(config=BROKER)
    try:
        cluster.create_topic(TopicSpec("t", 2, 1))
        c1 = _start(cluster, "c1")
        await cluster.clock.sleep_until(1000)
        group = cluster.brokers[0].coordinator.consumer_group_manager
        assert group.fence("g", c1.member_id)
        await cluster.clock.sleep_until(3001)
        # its 3000 heartbeat hears UNKNOWN_MEMBER_ID: partitions lost, joined again at once (epoch 3)
        assert c1.errors == [(3000, "ConsumerGroupHeartbeat", "UNKNOWN_MEMBER_ID")]
        assert [(e["time_ms"], e["partitions"]) for e in sink.of_kind("member.lost")] == [
            (3000, ["t-0", "t-1"])
        ]
        assert (c1.member_epoch, sorted(map(str, c1.owned))) == (3, ["t-0", "t-1"])
    finally:
        await cm.__aexit__(None, None, None)


async def test_leave_commits_and_empties_the_group(autojump_clock):
    cm, cluster, _sink = await open_group_cluster(config=BROKER)
    try:
        cluster.create_topic(TopicSpec("t", 1, 1))
        c1 = _start(cluster, "c1", {**SETTINGS, "enable.auto.commit": True})
        await cluster.clock.sleep_until(500)
        c1.consumer.seek(TopicPartition("t", 0), 0)
        await c1.leave()
        group = cluster.brokers[0].coordinator.consumer_group_manager.groups["g"]
        assert (group.state, group.group_epoch) == ("Empty", 2)
        offsets = cluster.brokers[0].coordinator.offsets["g"]
        assert offsets[TopicPartition("t", 0)].offset == 0
        assert c1.consumer.positions == {}
    finally:
        await cm.__aexit__(None, None, None)


async def test_a_lookup_refused_to_a_fenced_member_is_tried_again_after_the_backoff(autojump_clock):
    cm, cluster, sink = await open_group_cluster(config=BROKER)
    try:
        cluster.create_topic(TopicSpec("t", 4, 1))
        c1 = _start(cluster, "c1")
        await cluster.clock.sleep_until(1000)
        c2 = _start(cluster, "c2")
        await cluster.clock.sleep_until(4500)
        c1.stall()
        await c2.leave()
        await cluster.clock.sleep_until(6001)
        # c1's 6000 heartbeat brought t-2 and t-3 back; stalled, it has not taken them on
        assert (c1.member_epoch, sorted(map(str, c1.owned))) == (3, ["t-0", "t-1"])
        assert c1.target is not None
        group = cluster.brokers[0].coordinator.consumer_group_manager
        assert group.fence("g", c1.member_id)
        await cluster.clock.sleep_until(7000)
        c1.stall(False)
        await cluster.clock.sleep_until(9001)
        # reading t-2's and t-3's offsets is refused every retry.backoff.ms (100 ms) up to the 9000
        # heartbeat hears the fence; then c1 joins again with epoch 0 and gets all four partitions
        lookups = [at for at, api, error in c1.errors if api == "OffsetFetch"]
        assert lookups == list(range(7000, 9001, 100))
        assert {error for _, api, error in c1.errors if api == "OffsetFetch"} == {"UNKNOWN_MEMBER_ID"}
        assert [e for e in c1.errors if e[1] == "ConsumerGroupHeartbeat"] == [
            (9000, "ConsumerGroupHeartbeat", "UNKNOWN_MEMBER_ID")
        ]
        assert [(e["time_ms"], e["partitions"]) for e in sink.of_kind("member.lost")] == [
            (9000, ["t-0", "t-1"])
        ]
        # the lookup sent at 9000 backs off to 9100 too; then the new epoch's assignment is taken on
        await cluster.clock.sleep_until(9101)
        assigned = [(e["time_ms"], e["generation"], e["added"]) for e in sink.of_kind("member.assigned")]
        assert assigned[-1] == (9100, c1.member_epoch, ["t-0", "t-1", "t-2", "t-3"])
        assert sorted(map(str, c1.owned)) == ["t-0", "t-1", "t-2", "t-3"]
    finally:
        await cm.__aexit__(None, None, None)


def test_member_ids_are_the_clients_own_and_reproducible():
    assert member_id_of("g", "c1") == member_id_of("g", "c1") != member_id_of("g", "c2")
    assert len(member_id_of("g", "c1")) == 36


async def test_a_join_answered_load_in_progress_is_sent_again_after_the_backoff(autojump_clock):
    config = {**BROKER, "minibroker.coordinator.load.ms.per.record": 100}
    cm, cluster, sink = await open_group_cluster(3, config=config, latency_ms=1)
    try:
        cluster.create_topic(TopicSpec("t", 2, 1))
        _start(cluster, "c1")
        await cluster.clock.sleep_until(1000)
        cluster.crash(0)
        while not sink.of_kind("group.load.start"):
            await cluster.clock.sleep_until(cluster.now() + 1)
        (load,) = sink.of_kind("group.load.start")
        c2 = _start(cluster, "c2")
        await cluster.clock.sleep_until(load["time_ms"] + load["load_ms"] + 300)
        # broker 1 reads 4 records for 400 ms (1001 to 1401); c2's join is refused, then sent again
        # every retry.backoff.ms (100) plus the 2 ms round trip, never in the instant it was refused
        assert (load["time_ms"], load["load_ms"]) == (1001, 400)
        assert c2.errors == [
            (at, "ConsumerGroupHeartbeat", "COORDINATOR_LOAD_IN_PROGRESS") for at in (1004, 1106, 1208, 1310)
        ]
        assert (c2.member_epoch, sorted(map(str, c2.owned))) == (2, [])
    finally:
        await cm.__aexit__(None, None, None)
