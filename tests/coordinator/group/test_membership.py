"""The classic group protocol on one broker, in virtual time: exact ms for each timer and error."""

from __future__ import annotations

from minibroker.common.errors import Errors
from minibroker.coordinator.group.messages import (
    CommitOffset,
    LeaveGroupRequest,
    LeavingMember,
    OffsetCommitRequest,
)
from minibroker.sim import TopicSpec
from tests.coordinator.group.helpers import (
    Raw,
    heartbeat,
    join,
    member_join,
    open_group_cluster,
    sync,
)


async def test_first_join_gets_member_id_required_and_the_group_waits_for_the_initial_delay(autojump_clock):
    cm, cluster, _sink = await open_group_cluster()
    try:
        raw = Raw(cluster, "app")
        mid = await member_join(raw, 0, "g", client_id="alice")
        assert mid.startswith("alice-") and len(mid) == len("alice-") + 36
        parked = raw.send(0, join("g", mid))
        await cluster.clock.sleep_until(2999)
        assert parked.at is None
        coordinator = cluster.brokers[0].coordinator
        assert coordinator.groups["g"].state == "PreparingRebalance"
        assert coordinator.timer.deadline("join-g") == 3000
        await cluster.clock.sleep_until(3001)
        response = parked.response
        assert (parked.at, response.error.name, response.generation_id) == (3000, "NONE", 1)
        assert response.leader == mid and response.protocol_name == "range"
        assert [m.member_id for m in response.members] == [mid]
        assert [m.metadata for m in response.members] == [b"r-meta"]
        assert coordinator.groups["g"].state == "CompletingRebalance"
        assert coordinator.timer.deadline(f"heartbeat-g-{mid}") == 13_000
        assert coordinator.timer.deadline("sync-g") == 303_000
    finally:
        await cm.__aexit__(None, None, None)


async def test_three_members_one_second_apart_make_one_generation_at_6000(autojump_clock):
    cm, cluster, sink = await open_group_cluster()
    try:
        apps = [Raw(cluster, f"app{i}") for i in range(3)]
        parked = []
        for i, raw in enumerate(apps):
            await cluster.clock.sleep_until(1000 * i)
            mid = await member_join(raw, 0, "g", client_id=f"c{i}")
            parked.append((mid, raw.send(0, join("g", mid))))
        await cluster.clock.sleep_until(5999)
        assert all(p.at is None for _, p in parked)
        await cluster.clock.sleep_until(6001)
        assert [p.at for _, p in parked] == [6000, 6000, 6000]
        assert {p.response.generation_id for _, p in parked} == {1}
        leader = parked[0][0]
        assert [len(p.response.members) for _, p in parked] == [3, 0, 0]
        assert all(p.response.leader == leader for _, p in parked)
        keys = [e["deadline_ms"] for e in sink.of_kind("timer.schedule") if e["key"] == "join-g"]
        assert keys == [3000, 6000]
    finally:
        await cm.__aexit__(None, None, None)


async def test_initial_delay_is_capped_by_the_rebalance_timeout(autojump_clock):
    # delay 3000, remaining 4000 - 3000 = 1000: re-armed at 3000 for min(3000, 1000) -> 4000, then done
    cm, cluster, _sink = await open_group_cluster()
    try:
        a, b = Raw(cluster, "a"), Raw(cluster, "b")
        ma = await member_join(a, 0, "g")
        pa = a.send(0, join("g", ma, rebalance=4000))
        await cluster.clock.sleep_until(1000)
        mb = await member_join(b, 0, "g")
        pb = b.send(0, join("g", mb, rebalance=4000))
        await cluster.clock.sleep_until(4001)
        assert (pa.at, pb.at) == (4000, 4000)
    finally:
        await cm.__aexit__(None, None, None)


async def stable_group(cluster, raws, group="g", session=10_000, rebalance=300_000):
    """Join every raw client (all at the current time) and sync; return member ids and the generation."""
    ids = [await member_join(r, 0, group, session=session, rebalance=rebalance) for r in raws]
    parked = [
        r.send(0, join(group, m, session=session, rebalance=rebalance))
        for r, m in zip(raws, ids, strict=False)
    ]
    while any(p.at is None for p in parked):
        await cluster.clock.sleep_until(cluster.now() + 100)
    generation = parked[0].response.generation_id
    assignments = [(m, f"a-{m}".encode()) for m in ids]
    syncs = [
        r.send(0, sync(group, generation, m, assignments if i == 0 else ()))
        for i, (r, m) in enumerate(zip(raws, ids, strict=False))
    ]
    while any(p.at is None for p in syncs):
        await cluster.clock.sleep_until(cluster.now() + 1)
    assert [p.response.assignment for p in syncs] == [f"a-{m}".encode() for m in ids]
    stable_group.joined_at = parked[0].at
    return ids, generation


async def test_heartbeats_and_their_errors(autojump_clock):
    cm, cluster, _sink = await open_group_cluster()
    try:
        a = Raw(cluster, "a")
        (ma,), gen = await stable_group(cluster, [a])
        coordinator = cluster.brokers[0].coordinator
        assert coordinator.groups["g"].state == "Stable"
        assert (await a.call(0, heartbeat("g", gen, ma))).error.name == "NONE"
        assert (await a.call(0, heartbeat("g", gen + 1, ma))).error.name == "ILLEGAL_GENERATION"
        assert (await a.call(0, heartbeat("g", gen, "nobody"))).error.name == "UNKNOWN_MEMBER_ID"
        assert (await a.call(0, heartbeat("other", 1, ma))).error.name == "UNKNOWN_MEMBER_ID"
        assert (await a.call(0, heartbeat("", 1, ma))).error.name == "INVALID_GROUP_ID"
        b = Raw(cluster, "b")
        assert (
            await b.call(0, join("g", protocols=(("sticky", b""),)))
        ).error.name == "INCONSISTENT_GROUP_PROTOCOL"
        assert (
            await b.call(0, join("g", protocol_type="connect"))
        ).error.name == "INCONSISTENT_GROUP_PROTOCOL"
    finally:
        await cm.__aexit__(None, None, None)


async def test_join_errors(autojump_clock):
    cm, cluster, _sink = await open_group_cluster(config={"group.max.size": 1})
    try:
        a = Raw(cluster, "a")
        assert (await a.call(0, join("g", session=5999))).error.name == "INVALID_SESSION_TIMEOUT"
        assert (await a.call(0, join("g", session=1_800_001))).error.name == "INVALID_SESSION_TIMEOUT"
        assert (await a.call(0, join("", session=10_000))).error.name == "INVALID_GROUP_ID"
        assert (await a.call(0, join("g", "ghost"))).error.name == "UNKNOWN_MEMBER_ID"
        assert (await a.call(0, join("g", protocols=()))).error.name == "INCONSISTENT_GROUP_PROTOCOL"
        (_ma,), _gen = await stable_group(cluster, [a])
        b = Raw(cluster, "b")
        # the size check comes first (Kafka's acceptJoiningMember), whatever the protocols
        assert (
            await b.call(0, join("g", protocols=(("sticky", b""),)))
        ).error.name == "GROUP_MAX_SIZE_REACHED"
        assert (await b.call(0, join("g"))).error.name == "GROUP_MAX_SIZE_REACHED"
    finally:
        await cm.__aexit__(None, None, None)


async def test_a_member_that_stops_heartbeating_is_evicted_at_its_session_deadline(autojump_clock):
    cm, cluster, sink = await open_group_cluster()
    try:
        a, b = Raw(cluster, "a"), Raw(cluster, "b")
        (ma, mb), gen = await stable_group(cluster, [a, b])
        stable_at = cluster.now()
        joined_at = stable_group.joined_at  # b's session runs from the completed join (6000)
        assert joined_at == 6000
        coordinator = cluster.brokers[0].coordinator
        assert coordinator.timer.deadline(f"heartbeat-g-{mb}") == joined_at + 10_000
        # a heartbeats every 3 s; b never does
        errors = []
        for k in range(1, 5):
            await cluster.clock.sleep_until(stable_at + 3000 * k)
            errors.append((await a.call(0, heartbeat("g", gen, ma))).error.name)
        expiry = [e for e in sink.of_kind("group.session.expire") if e["member"] == mb]
        assert [e["time_ms"] for e in expiry] == [joined_at + 10_000]
        assert errors == ["NONE", "NONE", "NONE", "REBALANCE_IN_PROGRESS"]
        # a rejoins: everyone left has joined, so the join completes at once with generation 2
        rejoin = await a.call(0, join("g", ma))
        assert (rejoin.error.name, rejoin.generation_id, [m.member_id for m in rejoin.members]) == (
            "NONE",
            gen + 1,
            [ma],
        )
    finally:
        await cm.__aexit__(None, None, None)


async def test_a_member_that_does_not_rejoin_is_removed_at_the_rebalance_timeout(autojump_clock):
    cm, cluster, _sink = await open_group_cluster()
    try:
        a, b, c = Raw(cluster, "a"), Raw(cluster, "b"), Raw(cluster, "c")
        (ma, mb), gen = await stable_group(cluster, [a, b], rebalance=20_000)
        start = cluster.now()
        mc = await member_join(c, 0, "g", rebalance=20_000)
        pc = c.send(0, join("g", mc, rebalance=20_000))  # PreparingRebalance, join-g at start + 20000
        pa = a.send(0, join("g", ma, rebalance=20_000))
        # b keeps heartbeating (stalled in its poll loop) but never rejoins
        for k in range(1, 7):
            await cluster.clock.sleep_until(start + 3000 * k)
            assert (await b.call(0, heartbeat("g", gen, mb))).error.name == "REBALANCE_IN_PROGRESS"
        await cluster.clock.sleep_until(start + 20_001)
        assert (pa.at, pc.at) == (start + 20_000, start + 20_000)
        assert pa.response.generation_id == gen + 1
        assert sorted(m.member_id for m in pa.response.members) == sorted([ma, mc])
        assert (await b.call(0, heartbeat("g", gen, mb))).error.name == "UNKNOWN_MEMBER_ID"
    finally:
        await cm.__aexit__(None, None, None)


async def test_leave_group_rebalances_at_once_and_answers_per_member(autojump_clock):
    cm, cluster, _sink = await open_group_cluster()
    try:
        a, b = Raw(cluster, "a"), Raw(cluster, "b")
        (ma, mb), gen = await stable_group(cluster, [a, b])
        left = await b.call(0, LeaveGroupRequest("g", (LeavingMember(mb), LeavingMember("ghost"))))
        assert [(m, e.name) for m, _, e in left.members] == [(mb, "NONE"), ("ghost", "UNKNOWN_MEMBER_ID")]
        coordinator = cluster.brokers[0].coordinator
        assert coordinator.groups["g"].state == "PreparingRebalance"
        rejoin = await a.call(0, join("g", ma))
        assert (rejoin.error.name, rejoin.generation_id, rejoin.members[0].member_id) == ("NONE", gen + 1, ma)
    finally:
        await cm.__aexit__(None, None, None)


async def test_static_member_rejoining_with_a_new_id_fences_the_old_one(autojump_clock):
    cm, cluster, _sink = await open_group_cluster()
    try:
        a = Raw(cluster, "a")
        first = a.send(0, join("g", instance_id="i-1"))  # static: no MEMBER_ID_REQUIRED
        await cluster.clock.sleep_until(3001)
        old = first.response.member_id
        assert first.response.error.name == "NONE" and old.startswith("i-1-")
        assert (await a.call(0, sync("g", 1, old))).error.name == "NONE"
        again = await a.call(0, join("g", instance_id="i-1"))
        assert again.error.name == "NONE" and again.member_id != old and again.generation_id == 1
        fenced = await a.call(0, heartbeat("g", 1, old, instance="i-1"))
        assert fenced.error.name == "FENCED_INSTANCE_ID"
        assert (await a.call(0, heartbeat("g", 1, again.member_id, instance="i-1"))).error.name == "NONE"
    finally:
        await cm.__aexit__(None, None, None)


async def test_a_member_that_never_syncs_is_removed_when_the_sync_timeout_fires(autojump_clock):
    cm, cluster, sink = await open_group_cluster()
    try:
        a, b = Raw(cluster, "a"), Raw(cluster, "b")
        ma = await member_join(a, 0, "g", rebalance=20_000)
        mb = await member_join(b, 0, "g", rebalance=20_000)
        pa, pb = a.send(0, join("g", ma, rebalance=20_000)), b.send(0, join("g", mb, rebalance=20_000))
        await cluster.clock.sleep_until(6001)
        assert (pa.at, pb.at) == (6000, 6000)
        coordinator = cluster.brokers[0].coordinator
        assert coordinator.timer.deadline("sync-g") == 26_000
        leader = a if pa.response.leader == ma else b
        leader_id = pa.response.leader
        assert (await leader.call(0, sync("g", 1, leader_id, [(ma, b"x"), (mb, b"y")]))).error.name == "NONE"
        assert coordinator.groups["g"].state == "Stable"
        # both keep their sessions alive, but the follower never sends SyncGroup
        follower, follower_id = (b, mb) if leader is a else (a, ma)
        for k in range(1, 7):
            await cluster.clock.sleep_until(6000 + 3000 * k)
            assert (await follower.call(0, heartbeat("g", 1, follower_id))).error.name == "NONE"
            assert (await leader.call(0, heartbeat("g", 1, leader_id))).error.name == "NONE"
        await cluster.clock.sleep_until(26_001)
        removed = [(e["member"], e["reason"], e["time_ms"]) for e in sink.of_kind("group.member.remove")]
        assert removed == [(follower_id, "no SyncGroup", 26_000)]
        assert coordinator.groups["g"].state == "PreparingRebalance"
        assert (await follower.call(0, heartbeat("g", 1, follower_id))).error.name == "UNKNOWN_MEMBER_ID"
    finally:
        await cm.__aexit__(None, None, None)


async def test_a_heartbeat_waits_for_the_groups_earlier_commit_and_carries_its_error(autojump_clock):
    """Kafka runs Heartbeat as a write operation without records: its NONE waits for the group's writes
    sent before it, a refusal does not."""
    cm, cluster, _sink = await open_group_cluster(3, config={"minibroker.coordinator.load.ms.per.record": 0})
    cluster.create_topic(TopicSpec("t", 1, 1))
    raw = Raw(cluster, "app")
    try:
        (mid,), generation = await stable_group(cluster, [raw])
        await cluster.clock.sleep_until(5000)
        for follower in (1, 2):  # nothing more reaches the ISR: the commit times out after 5 s
            cluster.pause_fetcher(follower)
        commit = raw.send(0, OffsetCommitRequest("g", (CommitOffset("t", 0, 7),), generation, mid))
        await cluster.clock.sleep_until(5100)
        held = raw.send(0, heartbeat("g", generation, mid))
        refused = raw.send(0, heartbeat("g", generation + 1, mid))
        await cluster.clock.sleep_until(5200)
        assert (held.at, refused.at, refused.response.error) == (None, 5100, Errors.ILLEGAL_GENERATION)
        await cluster.clock.sleep_until(11_000)
        assert (commit.at, commit.response.partitions[0][2]) == (10_000, Errors.COORDINATOR_NOT_AVAILABLE)
        assert (held.at, held.response.error) == (10_000, Errors.COORDINATOR_NOT_AVAILABLE)
    finally:
        await cm.__aexit__(None, None, None)
