"""Mixed groups (KIP-848's online migration): classic members in a consumer group, upgrade, downgrade.

Topic ``t`` has 4 partitions; ``__consumer_offsets`` has 1 partition led by broker 0 (every answer comes
in the ms it is asked). Consumer protocol members: session 45 s, rebalance timeout 60 s, assignor
``uniform``. Classic members: session 10 s, rebalance timeout 300 s, protocol ``range`` with a
version 0 subscription to ``t`` (an eager member: its rejoin reports no owned partitions).
"""

from __future__ import annotations

import struct

from minibroker.coordinator.group import consumer_protocol
from minibroker.coordinator.group.messages import LeaveGroupRequest, LeavingMember
from minibroker.sim import TopicSpec
from tests.coordinator.group.helpers import Raw, heartbeat, join, member_join, open_group_cluster, sync
from tests.coordinator.group.test_consumer_groups import commit, hb, t

SUBSCRIPTION = (("range", consumer_protocol.encode_subscription(["t"])),)


def classic_join(member: str = "", **kw):
    return join("g", member, protocols=SUBSCRIPTION, **kw)


def partitions(assignment: bytes) -> list[int]:
    return [p for _, p in consumer_protocol.decode_assignment(assignment)]


async def _cluster(config: dict | None = None):
    cm, cluster, sink = await open_group_cluster(config=config)
    cluster.create_topic(TopicSpec("t", 4, 1))
    return cm, cluster, sink, cluster.brokers[0].coordinator


async def _classic_group(cluster, raw: Raw) -> str:
    """One classic member: joins at 0, generation 1 at 3000 (the initial rebalance delay), owns t-0..3."""
    mid = await member_join(raw, 0, "g", protocols=SUBSCRIPTION)
    joined = await raw.call(0, classic_join(mid))
    assert (joined.generation_id, joined.leader, cluster.now()) == (1, mid, 3000)
    own = consumer_protocol.encode_assignment([("t", p) for p in range(4)])
    assert partitions((await raw.call(0, sync("g", 1, mid, [(mid, own)]))).assignment) == [0, 1, 2, 3]
    return mid


async def test_a_classic_member_joins_a_consumer_group_and_gets_its_partitions_by_rejoining(autojump_clock):
    cm, cluster, sink, coordinator = await _cluster()
    try:
        a, c = Raw(cluster, "a"), Raw(cluster, "c")
        assert (await a.call(0, hb("m-a", 0))).assignment == t(0, 1, 2, 3)
        await cluster.clock.sleep_until(1000)
        mid = await member_join(c, 0, "g", protocols=SUBSCRIPTION)
        joined = await c.call(0, classic_join(mid))
        # group epoch 2, target a: t-0, t-1, c: t-2, t-3 (still a's): c is at epoch 2 with nothing
        assert (joined.error.name, joined.generation_id, joined.protocol_name, joined.leader) == (
            "NONE",
            2,
            "range",
            "",
        )
        assert joined.members == ()
        assert coordinator.timer.deadline(f"sync-g-{mid}") == 301_000
        synced = await c.call(0, sync("g", 2, mid))
        assert (synced.error.name, partitions(synced.assignment)) == ("NONE", [])
        assert coordinator.timer.deadline(f"sync-g-{mid}") is None
        assert coordinator.timer.deadline(f"session-timeout-g-{mid}") == 11_000
        # waiting on a's t-2, t-3: no rebalance to join yet; a stale generation is refused
        assert (await c.call(0, heartbeat("g", 2, mid))).error.name == "NONE"
        assert (await c.call(0, heartbeat("g", 1, mid))).error.name == "ILLEGAL_GENERATION"
        await cluster.clock.sleep_until(5000)
        assert (await a.call(0, hb("m-a", 1, t(0, 1, 2, 3)))).assignment == t(0, 1)
        assert (await a.call(0, hb("m-a", 1, t(0, 1)))).member_epoch == 2
        # t-2, t-3 are free: c's heartbeat asks it to rejoin, its join task runs the rebalance timeout
        await cluster.clock.sleep_until(6000)
        assert (await c.call(0, heartbeat("g", 2, mid))).error.name == "REBALANCE_IN_PROGRESS"
        assert coordinator.timer.deadline(f"join-g-{mid}") == 306_000
        rejoined = await c.call(0, classic_join(mid))
        assert (rejoined.error.name, rejoined.generation_id) == ("NONE", 2)
        assert coordinator.timer.deadline(f"join-g-{mid}") is None
        assert partitions((await c.call(0, sync("g", 2, mid))).assignment) == [2, 3]
        assert (await c.call(0, heartbeat("g", 2, mid))).error.name == "NONE"
        (view,) = coordinator.snapshot().consumer_groups
        assert (view.state, view.group_epoch) == ("Stable", 2)
        assert [(m.member_id, m.member_epoch, m.assigned) for m in view.members] == [
            ("m-a", 2, t(0, 1)),
            (mid, 2, t(2, 3)),
        ]
        # a classic member commits with its generation (any version), not a member epoch
        assert (await c.call(0, commit(mid, 2, api_version=2))).partitions[0][2].name == "NONE"
        assert (await c.call(0, commit(mid, 1, api_version=2))).partitions[0][2].name == "ILLEGAL_GENERATION"
        # a consumer protocol member cannot use the classic APIs, nor the classic member the new one
        assert (await a.call(0, heartbeat("g", 2, "m-a"))).error.name == "UNKNOWN_MEMBER_ID"
        left = await c.call(0, LeaveGroupRequest("g", (LeavingMember(mid),)))
        assert [(m, e.name) for m, _, e in left.members] == [(mid, "NONE")]
        (view,) = coordinator.snapshot().consumer_groups
        assert (view.group_epoch, [m.member_id for m in view.members]) == (3, ["m-a"])
        assert coordinator.timer.deadline(f"session-timeout-g-{mid}") is None
        kinds = [(e["api"], e["error"]) for e in sink.of_kind("group.consumer.classic")]
        assert kinds[:3] == [("join", "MEMBER_ID_REQUIRED"), ("join", "NONE"), ("sync", "NONE")]
    finally:
        await cm.__aexit__(None, None, None)


async def test_a_classic_member_of_another_protocol_is_inconsistent_and_a_silent_one_is_fenced(
    autojump_clock,
):
    cm, cluster, sink, coordinator = await _cluster()
    try:
        a, c = Raw(cluster, "a"), Raw(cluster, "c")
        await a.call(0, hb("m-a", 0))
        other = await c.call(0, join("g", protocols=SUBSCRIPTION, protocol_type="connect"))
        assert other.error.name == "INCONSISTENT_GROUP_PROTOCOL"
        mid = await member_join(c, 0, "g", protocols=SUBSCRIPTION)
        assert (await c.call(0, classic_join(mid, rebalance=5000))).generation_id == 2
        # every classic member must share a protocol
        roundrobin = (("roundrobin", SUBSCRIPTION[0][1]),)
        mixed = await c.call(0, join("g", "x", protocols=roundrobin))
        assert mixed.error.name == "INCONSISTENT_GROUP_PROTOCOL"
        # c never sends SyncGroup: its sync task fences it after its 5 s rebalance timeout (before
        # its 10 s session timeout would)
        assert coordinator.timer.deadline(f"sync-g-{mid}") == 5000
        await cluster.clock.sleep_until(5001)
        (fence,) = sink.of_kind("group.consumer.fence")
        assert (fence["time_ms"], fence["member"], fence["reason"]) == (
            5000,
            mid,
            "the member failed to sync within timeout.",
        )
        (view,) = coordinator.snapshot().consumer_groups
        assert [m.member_id for m in view.members] == ["m-a"]
    finally:
        await cm.__aexit__(None, None, None)


async def test_a_classic_group_with_members_is_upgraded_by_a_consumer_protocol_member(autojump_clock):
    cm, cluster, sink, coordinator = await _cluster()
    try:
        c, b = Raw(cluster, "c"), Raw(cluster, "b")
        mid = await _classic_group(cluster, c)
        await cluster.clock.sleep_until(4000)
        # the generation becomes the group epoch (1); b's join bumps it to 2, target c: t-0, t-1,
        # b: t-2, t-3 (c's until it rejoins)
        joined = await b.call(0, hb("m-b", 0))
        assert (joined.error.name, joined.member_epoch, joined.assignment) == ("NONE", 2, ())
        assert "g" not in coordinator.groups
        (convert,) = sink.of_kind("group.consumer.convert")
        assert (convert["time_ms"], convert["to"], convert["members"]) == (4000, "consumer", 1)
        assert coordinator.timer.deadline(f"heartbeat-g-{mid}") is None  # the classic session task
        # its classic session timeout (10 s), armed by the conversion
        assert coordinator.timer.deadline(f"session-timeout-g-{mid}") == 14_000
        (view,) = coordinator.snapshot().consumer_groups
        assert [(m.member_id, m.member_epoch, m.assigned, m.target) for m in view.members] == [
            (mid, 1, t(0, 1, 2, 3), t(0, 1)),
            ("m-b", 2, (), t(2, 3)),
        ]
        # c hears of the rebalance on its classic heartbeat, rejoins (eager: owning nothing)
        assert (await c.call(0, heartbeat("g", 1, mid))).error.name == "REBALANCE_IN_PROGRESS"
        rejoined = await c.call(0, classic_join(mid))
        assert (rejoined.error.name, rejoined.generation_id) == ("NONE", 2)
        assert partitions((await c.call(0, sync("g", 2, mid))).assignment) == [0, 1]
        assert (await b.call(0, hb("m-b", 2, ()))).assignment == t(2, 3)
        (view,) = coordinator.snapshot().consumer_groups
        assert (view.state, view.group_epoch) == ("Stable", 2)
    finally:
        await cm.__aexit__(None, None, None)


async def test_the_last_consumer_protocol_member_leaving_downgrades_the_group(autojump_clock):
    cm, cluster, sink, coordinator = await _cluster()
    try:
        c, b = Raw(cluster, "c"), Raw(cluster, "b")
        mid = await _classic_group(cluster, c)
        await cluster.clock.sleep_until(4000)
        await b.call(0, hb("m-b", 0))
        await b.call(0, hb("m-b", -1))
        # back to classic at generation 2 (the group epoch), Stable then PreparingRebalance at once
        group = coordinator.groups["g"]
        assert (group.state, group.generation_id, group.protocol_name) == ("PreparingRebalance", 2, "range")
        assert "g" not in coordinator.consumer_group_manager.groups
        assert [e["to"] for e in sink.of_kind("group.consumer.convert")] == ["consumer", "classic"]
        assert coordinator.timer.deadline(f"session-timeout-g-{mid}") is None
        assert coordinator.timer.deadline(f"heartbeat-g-{mid}") == 14_000  # its classic session
        assert (await c.call(0, heartbeat("g", 2, mid))).error.name == "REBALANCE_IN_PROGRESS"
        rejoined = await c.call(0, classic_join(mid))
        assert (rejoined.error.name, rejoined.generation_id, rejoined.leader) == ("NONE", 3, mid)
    finally:
        await cm.__aexit__(None, None, None)


async def test_the_migration_policy_keeps_groups_in_their_protocol(autojump_clock):
    cm, cluster, _sink, coordinator = await _cluster({"group.consumer.migration.policy": "disabled"})
    try:
        c, b = Raw(cluster, "c"), Raw(cluster, "b")
        await _classic_group(cluster, c)
        refused = await b.call(0, hb("m-b", 0))
        assert (refused.error.name, refused.error_message) == (
            "GROUP_ID_NOT_FOUND",
            "Group g is not a consumer group.",
        )
    finally:
        await cm.__aexit__(None, None, None)
    cm, cluster, _sink, coordinator = await _cluster({"group.consumer.migration.policy": "upgrade"})
    try:
        c, b = Raw(cluster, "c"), Raw(cluster, "b")
        mid = await _classic_group(cluster, c)
        await b.call(0, hb("m-b", 0))
        await b.call(0, hb("m-b", -1))
        # no downgrade: the consumer group goes on with its classic member, at group epoch 3
        (view,) = coordinator.snapshot().consumer_groups
        assert (view.group_epoch, [m.member_id for m in view.members]) == (3, [mid])
    finally:
        await cm.__aexit__(None, None, None)


def cooperative(*owned: int) -> tuple[tuple[str, bytes], ...]:
    """A version 1 subscription to t saying its member owns ``owned`` (a cooperative member's rejoin)."""
    topic = b"\x00\x01t"
    data = struct.pack(">hi", 1, 1) + topic + struct.pack(">i", -1)  # topics, no user data
    data += struct.pack(">i", 1) + topic + struct.pack(">i", len(owned))
    data += b"".join(struct.pack(">i", p) for p in owned)
    return (("range", data),)


async def test_a_cooperative_classic_member_keeps_its_epoch_until_its_rejoin_no_longer_owns_revoked_ones(
    autojump_clock,
):
    cm, cluster, _sink, coordinator = await _cluster()
    try:
        c, b = Raw(cluster, "c"), Raw(cluster, "b")
        mid = await _classic_group(cluster, c)
        await cluster.clock.sleep_until(4000)
        await b.call(0, hb("m-b", 0))  # group epoch 2: c's target t-0, t-1
        assert (await c.call(0, heartbeat("g", 1, mid))).error.name == "REBALANCE_IN_PROGRESS"
        # c rejoins still owning t-0..3: it must revoke t-2, t-3 first, at its epoch 1
        revoking = await c.call(0, join("g", mid, protocols=cooperative(0, 1, 2, 3)))
        assert (revoking.error.name, revoking.generation_id) == ("NONE", 1)
        assert coordinator.timer.deadline(f"rebalance-timeout-g-{mid}") == 304_000
        # revoking is no rebalance to rejoin for SyncGroup, which answers the partitions it keeps
        assert partitions((await c.call(0, sync("g", 1, mid))).assignment) == [0, 1]
        assert (await c.call(0, heartbeat("g", 1, mid))).error.name == "REBALANCE_IN_PROGRESS"
        done = await c.call(0, join("g", mid, protocols=cooperative(0, 1)))
        assert (done.error.name, done.generation_id) == ("NONE", 2)
        assert coordinator.timer.deadline(f"rebalance-timeout-g-{mid}") is None
        assert (await b.call(0, hb("m-b", 2, ()))).assignment == t(2, 3)
    finally:
        await cm.__aexit__(None, None, None)


async def test_a_new_coordinator_reloads_a_classic_member_with_its_own_session_timeout(autojump_clock):
    cm, cluster, _sink = await open_group_cluster(3, config={"minibroker.coordinator.load.ms.per.record": 0})
    try:
        cluster.create_topic(TopicSpec("t", 4, 1))
        a, c = Raw(cluster, "a"), Raw(cluster, "c")
        await a.call(0, hb("m-a", 0))
        mid = await member_join(c, 0, "g", protocols=SUBSCRIPTION)
        assert (await c.call(0, classic_join(mid))).generation_id == 2
        await cluster.clock.sleep_until(2000)
        cluster.crash(0)
        await cluster.clock.sleep_until(2001)
        new = cluster.coordinator_for("g")
        coordinator = cluster.brokers[new].coordinator
        (view,) = coordinator.snapshot().consumer_groups
        assert [(m.member_id, m.member_epoch) for m in view.members] == [("m-a", 1), (mid, 2)]
        member = coordinator.consumer_group_manager.groups["g"].members[mid]
        assert (member.classic_protocols, member.classic_session_timeout_ms) == (SUBSCRIPTION, 10_000)
        assert coordinator.timer.deadline(f"session-timeout-g-{mid}") == 2000 + 10_000
        assert coordinator.timer.deadline("session-timeout-g-m-a") == 2000 + 45_000
        assert (await c.call(new, heartbeat("g", 2, mid))).error.name == "NONE"
    finally:
        await cm.__aexit__(None, None, None)
