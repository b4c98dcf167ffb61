"""KIP-848's consumer group protocol on one broker, in virtual time: epochs, assignments, timers, errors.

Topic ``t`` has 4 partitions; ``__consumer_offsets`` has 1 partition led by broker 0 (an ISR of one, no
link latency: every heartbeat is answered in the ms it is sent). Kafka's defaults unless a test says
otherwise: session timeout 45 s, heartbeat interval 5 s, assignor ``uniform``.
"""

from __future__ import annotations

from minibroker.common.errors import Errors
from minibroker.common.messages import TopicPartition
from minibroker.coordinator.group.messages import (
    CommitOffset,
    ConsumerGroupDescribeRequest,
    ConsumerGroupHeartbeatRequest,
    DescribeGroupsRequest,
    ListGroupsRequest,
    OffsetCommitRequest,
    OffsetFetchGroup,
    OffsetFetchRequest,
)
from minibroker.sim import TopicSpec
from tests.coordinator.group.helpers import Raw, join, open_group_cluster


def hb(member: str, epoch: int, owned=None, **kw):
    """A heartbeat of ``member`` in group g; a join (epoch 0) subscribes to t, rebalance timeout 60 s."""
    if epoch == 0:
        kw.setdefault("subscribed_topic_names", ("t",))
        kw.setdefault("rebalance_timeout_ms", 60_000)
        owned = () if owned is None else owned
    return ConsumerGroupHeartbeatRequest(
        kw.pop("group", "g"), member, epoch, owned_partitions=owned, client_id=member, **kw
    )


def t(*partitions: int):
    """Partitions of topic t, as heartbeats and answers carry them."""
    return (("t", tuple(partitions)),) if partitions else ()


def commit(member: str, epoch: int, offset: int = 5, api_version: int = 9):
    return OffsetCommitRequest("g", (CommitOffset("t", 0, offset),), epoch, member, api_version=api_version)


async def _cluster(config: dict | None = None):
    cm, cluster, sink = await open_group_cluster(config=config)
    cluster.create_topic(TopicSpec("t", 4, 1))
    return cm, cluster, sink, cluster.brokers[0].coordinator


async def _stable_pair(cluster, a: Raw, b: Raw) -> None:
    """a joins at 0 (epoch 1, t-0..3); b joins at 1000; a revokes t-2, t-3 at 5000; b gets them at 6000."""
    assert (await a.call(0, hb("m-a", 0))).assignment == t(0, 1, 2, 3)
    await cluster.clock.sleep_until(1000)
    await b.call(0, hb("m-b", 0))
    await cluster.clock.sleep_until(5000)
    await a.call(0, hb("m-a", 1, t(0, 1, 2, 3)))
    await a.call(0, hb("m-a", 1, t(0, 1)))
    await cluster.clock.sleep_until(6000)
    assert (await b.call(0, hb("m-b", 2, ()))).assignment == t(2, 3)


async def test_the_first_member_gets_every_partition_at_epoch_1_and_its_session_runs_45_s(autojump_clock):
    cm, cluster, sink, coordinator = await _cluster()
    try:
        a = Raw(cluster, "a")
        answer = await a.call(0, hb("m-a", 0))
        assert (answer.error.name, answer.member_id, answer.member_epoch) == ("NONE", "m-a", 1)
        assert (answer.heartbeat_interval_ms, answer.assignment) == (5000, t(0, 1, 2, 3))
        assert coordinator.timer.deadline("session-timeout-g-m-a") == 45_000
        (group,) = coordinator.snapshot().consumer_groups
        assert (group.state, group.group_epoch, group.assignment_epoch, group.assignor) == (
            "Stable",
            1,
            1,
            "uniform",
        )
        epochs = sink.of_kind("group.consumer.epoch")
        assert [(e["time_ms"], e["group_epoch"], e["reason"]) for e in epochs] == [
            (0, 1, "member m-a joined")
        ]
        (target,) = sink.of_kind("group.consumer.target")
        assert target["targets"] == {"m-a": ["t-0", "t-1", "t-2", "t-3"]}
        # a steady heartbeat: no assignment in the answer, the session re-armed for 45 s more
        await cluster.clock.sleep_until(5000)
        steady = await a.call(0, hb("m-a", 1))
        assert (steady.member_epoch, steady.assignment) == (1, None)
        assert coordinator.timer.deadline("session-timeout-g-m-a") == 50_000
        described = (await a.call(0, ConsumerGroupDescribeRequest(("g", "nope")))).groups
        assert [(g.error.name, g.state, g.group_epoch, g.assignment_epoch) for g in described] == [
            ("NONE", "Stable", 1, 1),
            ("GROUP_ID_NOT_FOUND", "", -1, -1),
        ]
        assert (
            described[0].members[0].assignment == described[0].members[0].target_assignment == t(0, 1, 2, 3)
        )
    finally:
        await cm.__aexit__(None, None, None)


async def test_a_joining_member_gets_partitions_only_once_revoked_and_the_others_keep_theirs(autojump_clock):
    cm, cluster, sink, coordinator = await _cluster()
    try:
        a, b = Raw(cluster, "a"), Raw(cluster, "b")
        await a.call(0, hb("m-a", 0))
        await cluster.clock.sleep_until(1000)
        joined = await b.call(0, hb("m-b", 0))
        # epoch 2, target a: t-0, t-1; b: t-2, t-3, still owned by a: b waits with nothing
        assert (joined.member_epoch, joined.assignment) == (2, ())
        (view,) = coordinator.snapshot().consumer_groups
        assert view.state == "Reconciling"
        assert [(m.member_id, m.state, m.member_epoch, m.target) for m in view.members] == [
            ("m-a", "STABLE", 1, t(0, 1)),
            ("m-b", "UNRELEASED_PARTITIONS", 2, t(2, 3)),
        ]
        await cluster.clock.sleep_until(5000)
        revoke = await a.call(0, hb("m-a", 1, t(0, 1, 2, 3)))
        assert (revoke.member_epoch, revoke.assignment) == (1, t(0, 1))
        assert coordinator.timer.deadline("rebalance-timeout-g-m-a") == 65_000
        # b asks before a has let go: still nothing
        assert (await b.call(0, hb("m-b", 2, ()))).assignment is None
        revoked = await a.call(0, hb("m-a", 1, t(0, 1)))
        assert (revoked.member_epoch, revoked.assignment) == (2, None)
        assert coordinator.timer.deadline("rebalance-timeout-g-m-a") is None
        await cluster.clock.sleep_until(6000)
        got = await b.call(0, hb("m-b", 2, ()))
        assert (got.member_epoch, got.assignment) == (2, t(2, 3))
        assert coordinator.snapshot().consumer_groups[0].state == "Stable"
        members = [
            (e["time_ms"], e["member"], e["state"], e["assigned"])
            for e in sink.of_kind("group.consumer.member")
        ]
        assert members == [
            (0, "m-a", "STABLE", ["t-0", "t-1", "t-2", "t-3"]),
            (1000, "m-b", "UNRELEASED_PARTITIONS", []),
            (5000, "m-a", "UNREVOKED_PARTITIONS", ["t-0", "t-1"]),
            (5000, "m-a", "STABLE", ["t-0", "t-1"]),
            (6000, "m-b", "STABLE", ["t-2", "t-3"]),
        ]
        # a never lost t-0 or t-1: every state of a holds them
        assert all({"t-0", "t-1"} <= set(assigned) for _, m, _, assigned in members if m == "m-a")
    finally:
        await cm.__aexit__(None, None, None)


async def test_a_silent_member_is_fenced_at_its_session_timeout_and_its_partitions_move(autojump_clock):
    cm, cluster, sink, coordinator = await _cluster({"group.consumer.session.timeout.ms": 10_000})
    try:
        a, b = Raw(cluster, "a"), Raw(cluster, "b")
        await _stable_pair(cluster, a, b)
        # a heartbeats every 5 s; b's last heartbeat was at 6000
        for at in (10_000, 15_000):
            await cluster.clock.sleep_until(at)
            await a.call(0, hb("m-a", 2))
        assert coordinator.timer.deadline("session-timeout-g-m-b") == 16_000
        await cluster.clock.sleep_until(16_001)
        (fence,) = sink.of_kind("group.consumer.fence")
        assert (fence["time_ms"], fence["member"], fence["reason"]) == (16_000, "m-b", "session timeout")
        assert coordinator.snapshot().consumer_groups[0].group_epoch == 3
        await cluster.clock.sleep_until(20_000)
        answer = await a.call(0, hb("m-a", 2))
        assert (answer.member_epoch, answer.assignment) == (3, t(0, 1, 2, 3))
        late = await b.call(0, hb("m-b", 2))
        assert late.error.name == "UNKNOWN_MEMBER_ID"
    finally:
        await cm.__aexit__(None, None, None)


async def test_a_member_that_does_not_revoke_is_fenced_at_its_rebalance_timeout(autojump_clock):
    cm, cluster, sink, coordinator = await _cluster()
    try:
        a, b = Raw(cluster, "a"), Raw(cluster, "b")
        await a.call(0, hb("m-a", 0))
        await cluster.clock.sleep_until(1000)
        await b.call(0, hb("m-b", 0))
        # a is asked at 5000 to revoke t-2, t-3 and keeps reporting them: rebalance timeout 60 s
        for at in range(5000, 65_000, 5000):
            await cluster.clock.sleep_until(at)
            answer = await a.call(0, hb("m-a", 1, t(0, 1, 2, 3)))
            assert (answer.error.name, answer.member_epoch) == ("NONE", 1)
            await b.call(0, hb("m-b", 2, ()))
        assert coordinator.timer.deadline("rebalance-timeout-g-m-a") == 65_000
        await cluster.clock.sleep_until(65_001)
        (fence,) = sink.of_kind("group.consumer.fence")
        assert (fence["time_ms"], fence["member"]) == (65_000, "m-a")
        assert fence["reason"] == "rebalance timeout: partitions not revoked"
        assert (await a.call(0, hb("m-a", 1, t(0, 1, 2, 3)))).error.name == "UNKNOWN_MEMBER_ID"
        got = await b.call(0, hb("m-b", 2, ()))
        assert (got.member_epoch, got.assignment) == (3, t(0, 1, 2, 3))
    finally:
        await cm.__aexit__(None, None, None)


async def test_a_static_member_leaves_with_epoch_minus_2_and_its_new_id_takes_its_partitions(autojump_clock):
    cm, cluster, sink, coordinator = await _cluster()
    try:
        a, b = Raw(cluster, "a"), Raw(cluster, "b")
        assert (await a.call(0, hb("m-a", 0, instance_id="i-a"))).member_epoch == 1
        await cluster.clock.sleep_until(1000)
        await b.call(0, hb("m-b", 0))
        await cluster.clock.sleep_until(5000)
        await a.call(0, hb("m-a", 1, t(0, 1, 2, 3), instance_id="i-a"))
        await a.call(0, hb("m-a", 1, t(0, 1), instance_id="i-a"))
        # another process with the same instance id while a is in the group
        taken = await b.call(0, hb("m-x", 0, instance_id="i-a"))
        assert taken.error.name == "UNRELEASED_INSTANCE_ID"
        await cluster.clock.sleep_until(10_000)
        left = await a.call(0, hb("m-a", -2, instance_id="i-a"))
        assert (left.error.name, left.member_epoch) == ("NONE", -2)
        assert coordinator.timer.deadline("session-timeout-g-m-a") == 50_000  # its partitions wait for it
        await cluster.clock.sleep_until(12_000)
        back = await a.call(0, hb("m-a2", 0, instance_id="i-a"))
        assert (back.error.name, back.member_epoch, back.assignment) == ("NONE", 2, t(0, 1))
        assert coordinator.timer.deadline("session-timeout-g-m-a") is None
        assert coordinator.timer.deadline("session-timeout-g-m-a2") == 57_000
        (view,) = coordinator.snapshot().consumer_groups
        assert (view.group_epoch, [m.member_id for m in view.members]) == (2, ["m-b", "m-a2"])
        (replace,) = sink.of_kind("group.consumer.replace")
        assert (replace["previous"], replace["member"], replace["member_epoch"]) == ("m-a", "m-a2", 2)
    finally:
        await cm.__aexit__(None, None, None)


async def test_range_assignor_and_a_regex_subscription(autojump_clock):
    cm, cluster, _sink, coordinator = await _cluster()
    try:
        cluster.create_topic(TopicSpec("t2", 2, 1))
        cluster.create_topic(TopicSpec("other", 2, 1))
        a, b = Raw(cluster, "a"), Raw(cluster, "b")
        sub = {"subscribed_topic_names": None, "subscribed_topic_regex": "t.*", "server_assignor": "range"}
        assert (await a.call(0, hb("m-a", 0, **sub))).assignment == (("t", (0, 1, 2, 3)), ("t2", (0, 1)))
        joined = await b.call(0, hb("m-b", 0, **sub))
        assert joined.assignment == ()
        (view,) = coordinator.snapshot().consumer_groups
        assert view.assignor == "range"
        assert [m.target for m in view.members] == [
            (("t", (0, 1)), ("t2", (0,))),
            (("t", (2, 3)), ("t2", (1,))),
        ]
        bad = await a.call(0, hb("m-c", 0, subscribed_topic_regex="t(", subscribed_topic_names=None))
        assert bad.error.name == "INVALID_REGULAR_EXPRESSION"
    finally:
        await cm.__aexit__(None, None, None)


async def test_heartbeat_errors_as_kafka_sends_them(autojump_clock):
    cm, cluster, _sink, _coordinator = await _cluster({"group.consumer.max.size": 2})
    try:
        a = Raw(cluster, "a")
        assert (await a.call(0, hb("m-a", 0))).member_epoch == 1
        unknown = await a.call(0, hb("m-z", 3))  # checked while the group has room
        assert unknown.error.name == "UNKNOWN_MEMBER_ID"
        await a.call(0, hb("m-b", 0))
        cases = {
            "FENCED_MEMBER_EPOCH": hb("m-a", 7),
            "GROUP_MAX_SIZE_REACHED": hb("m-c", 0),  # before its id is looked at, as Kafka checks
            "GROUP_ID_NOT_FOUND": hb("m-z", 3, group="g2"),
            "UNSUPPORTED_ASSIGNOR": hb("m-a", 2, server_assignor="sticky"),
            "INVALID_REQUEST": hb("", 0),
        }
        got = {name: (await a.call(0, request)).error.name for name, request in cases.items()}
        assert got == {name: name for name in cases}
        no_timeout = ConsumerGroupHeartbeatRequest("g", "m-q", 0, subscribed_topic_names=("t",))
        refused = await a.call(0, no_timeout)
        assert (refused.error.name, refused.error_message) == (
            "INVALID_REQUEST",
            "RebalanceTimeoutMs must be provided in first request.",
        )
        # a's previous epoch is accepted with owned partitions within its assignment (a lost answer)
        assert (await a.call(0, hb("m-a", 1, t(0, 1)))).error.name == "NONE"
    finally:
        await cm.__aexit__(None, None, None)


async def test_offset_commit_and_fetch_check_the_member_epoch(autojump_clock):
    cm, cluster, _sink, coordinator = await _cluster()
    try:
        a = Raw(cluster, "a")
        await a.call(0, hb("m-a", 0))
        errors = [
            (await a.call(0, commit("m-a", 1))).partitions[0][2].name,
            (await a.call(0, commit("m-a", 0))).partitions[0][2].name,
            (await a.call(0, commit("m-a", 1, api_version=8))).partitions[0][2].name,
            (await a.call(0, commit("m-z", 1))).partitions[0][2].name,
            (await a.call(0, commit("", -1))).partitions[0][2].name,  # an admin commit: group not empty
        ]
        assert errors == [
            "NONE",
            "STALE_MEMBER_EPOCH",
            "UNSUPPORTED_VERSION",
            "UNKNOWN_MEMBER_ID",
            "UNKNOWN_MEMBER_ID",
        ]

        async def fetch(member, epoch):
            group = OffsetFetchGroup("g", (("t", (0,)),), member, epoch)
            (result,) = (await a.call(0, OffsetFetchRequest((group,)))).groups
            return result.error.name, [o.offset for o in result.offsets]

        assert await fetch("m-a", 1) == ("NONE", [5])
        assert await fetch("m-a", 2) == ("STALE_MEMBER_EPOCH", [])
        assert await fetch(None, -1) == ("NONE", [5])
        assert "g" not in coordinator.groups  # no classic group was made for the commits
    finally:
        await cm.__aexit__(None, None, None)


async def test_an_empty_classic_group_is_upgraded_and_an_empty_consumer_group_downgraded(autojump_clock):
    cm, cluster, sink, coordinator = await _cluster()
    try:
        a = Raw(cluster, "a")
        # an admin commit makes an empty classic group with an offset
        assert (await a.call(0, commit("", -1, offset=42))).partitions[0][2].name == "NONE"
        assert coordinator.groups["g"].state == "Empty"
        assert (await a.call(0, hb("m-a", 0))).member_epoch == 1
        assert "g" not in coordinator.groups and "g" in coordinator.consumer_group_manager.groups
        (result,) = (await a.call(0, OffsetFetchRequest((OffsetFetchGroup("g", (("t", (0,)),)),)))).groups
        assert [o.offset for o in result.offsets] == [42]  # the offsets stay
        # a classic member joins the consumer group with members (it is asked for a member id first)
        classic = await a.call(0, join("g"))
        assert classic.error.name == "MEMBER_ID_REQUIRED"
        assert list(coordinator.consumer_group_manager.groups["g"].members) == ["m-a"]
        listed = (await a.call(0, ListGroupsRequest())).groups
        assert [(g.group_id, g.group_type, g.protocol_type, g.state) for g in listed] == [
            ("g", "consumer", "consumer", "Stable")
        ]
        assert (await a.call(0, ListGroupsRequest(types=("classic",)))).groups == ()
        (described,) = (await a.call(0, DescribeGroupsRequest(("g",)))).groups
        assert (described.state, described.protocol_type, described.protocol_data) == (
            "Stable",
            "consumer",
            "uniform",
        )
        assert (await a.call(0, hb("m-a", -1))).member_epoch == -1
        # empty now: the classic join converts it back (and gets the usual MEMBER_ID_REQUIRED)
        assert (await a.call(0, join("g"))).error.name == "MEMBER_ID_REQUIRED"
        assert "g" in coordinator.groups and "g" not in coordinator.consumer_group_manager.groups
        assert [e["to"] for e in sink.of_kind("group.consumer.convert")] == ["consumer", "classic"]
    finally:
        await cm.__aexit__(None, None, None)


async def test_a_classic_group_with_members_is_not_upgraded(autojump_clock):
    cm, cluster, _sink, _coordinator = await _cluster()
    try:
        a = Raw(cluster, "a")
        first = await a.call(0, join("g"))
        a.send(0, join("g", first.member_id))  # parked for the initial rebalance delay
        refused = await a.call(0, hb("m-a", 0))
        assert refused.error.name == "GROUP_ID_NOT_FOUND"
    finally:
        await cm.__aexit__(None, None, None)


async def _pair_on_three_brokers():
    """Three brokers (a load takes no time), topic t, and ``_stable_pair``'s group on broker 0."""
    cm, cluster, sink = await open_group_cluster(3, config={"minibroker.coordinator.load.ms.per.record": 0})
    cluster.create_topic(TopicSpec("t", 4, 1))
    a, b = Raw(cluster, "a"), Raw(cluster, "b")
    await _stable_pair(cluster, a, b)
    return cm, cluster, sink, a, b


async def test_a_new_coordinator_reloads_the_group_from_its_records_and_rearms_the_sessions(autojump_clock):
    cm, cluster, _sink, a, _b = await _pair_on_three_brokers()
    try:
        before = cluster.brokers[0].coordinator.snapshot().consumer_groups
        await cluster.clock.sleep_until(7000)
        cluster.crash(0)
        await cluster.clock.sleep_until(7001)
        new = cluster.coordinator_for("g")
        assert new != 0
        coordinator = cluster.brokers[new].coordinator
        after = coordinator.snapshot().consumer_groups
        strip = [
            (
                g.group_epoch,
                g.assignment_epoch,
                [(m.member_id, m.member_epoch, m.assigned) for m in g.members],
            )
            for g in after
        ]
        assert strip == [(2, 2, [("m-a", 2, t(0, 1)), ("m-b", 2, t(2, 3))])]
        assert strip == [
            (
                g.group_epoch,
                g.assignment_epoch,
                [(m.member_id, m.member_epoch, m.assigned) for m in g.members],
            )
            for g in before
        ]
        assert coordinator.timer.deadline("session-timeout-g-m-a") == 7000 + 45_000
        answer = await a.call(new, hb("m-a", 2))
        assert (answer.error.name, answer.member_epoch) == ("NONE", 2)
    finally:
        await cm.__aexit__(None, None, None)


def _refuse_next_write(cluster, broker: int = 0) -> None:
    """The next append to ``__consumer_offsets-0`` on ``broker`` is refused: NOT_ENOUGH_REPLICAS."""
    offsets = TopicPartition("__consumer_offsets", 0)
    cluster.brokers[broker].replica_manager.pushed_errors.push(
        "produce", offsets, [Errors.NOT_ENOUGH_REPLICAS]
    )


def _group_state(coordinator) -> list:
    return [
        (
            g.state,
            g.group_epoch,
            g.assignment_epoch,
            [(m.member_id, m.member_epoch, m.assigned) for m in g.members],
        )
        for g in coordinator.snapshot().consumer_groups
    ]


async def test_a_leave_whose_write_is_refused_is_undone_and_the_next_coordinator_agrees(autojump_clock):
    cm, cluster, sink, a, b = await _pair_on_three_brokers()
    try:
        coordinator = cluster.brokers[0].coordinator
        stable = [("Stable", 2, 2, [("m-a", 2, t(0, 1)), ("m-b", 2, t(2, 3))])]
        assert _group_state(coordinator) == stable
        await cluster.clock.sleep_until(7000)
        _refuse_next_write(cluster)
        left = await b.call(0, hb("m-b", -1))
        assert left.error.name == "COORDINATOR_NOT_AVAILABLE"
        # the leave's fencing and epoch bump were applied, then undone: m-b is back with its session
        (revert,) = sink.of_kind("group.consumer.revert")
        assert (revert["time_ms"], revert["group_epoch"]) == (7000, 2)
        assert revert["owned"] == {"m-a": ["t-0", "t-1"], "m-b": ["t-2", "t-3"]}
        assert _group_state(coordinator) == stable
        assert coordinator.timer.deadline("session-timeout-g-m-b") == 7000 + 45_000
        # a's heartbeat computes nothing new: the group epoch the log holds is still 2
        assert (await a.call(0, hb("m-a", 2))).member_epoch == 2
        assert [e["assignment_epoch"] for e in sink.of_kind("group.consumer.target")] == [1, 2]
        await cluster.clock.sleep_until(8000)
        cluster.crash(0)
        await cluster.clock.sleep_until(8001)
        new = cluster.coordinator_for("g")
        assert new != 0
        assert _group_state(cluster.brokers[new].coordinator) == stable
    finally:
        await cm.__aexit__(None, None, None)


async def test_a_session_timeout_whose_write_is_refused_fences_again_500_ms_later(autojump_clock):
    cm, cluster, sink, coordinator = await _cluster({"group.consumer.session.timeout.ms": 10_000})
    a = Raw(cluster, "a")
    try:
        await a.call(0, hb("m-a", 0))  # alone: t-0..3 at epoch 1, its session due at 10000
        await cluster.clock.sleep_until(9999)
        _refuse_next_write(cluster)
        await cluster.clock.sleep_until(10_001)
        reverts = sink.of_kind("group.consumer.revert")
        assert [(e["time_ms"], e["owned"]) for e in reverts] == [
            (10_000, {"m-a": ["t-0", "t-1", "t-2", "t-3"]})
        ]
        assert _group_state(coordinator) == [("Stable", 1, 1, [("m-a", 1, t(0, 1, 2, 3))])]
        assert coordinator.timer.deadline("session-timeout-g-m-a") == 10_500
        await cluster.clock.sleep_until(10_501)
        fences = sink.of_kind("group.consumer.fence")
        assert [(f["time_ms"], f["member"], f["reason"]) for f in fences] == [
            (10_000, "m-a", "session timeout"),
            (10_500, "m-a", "session timeout"),
        ]
        assert _group_state(coordinator) == [("Empty", 2, 1, [])]
    finally:
        await cm.__aexit__(None, None, None)


async def test_the_first_configured_assignor_is_the_default_and_an_unknown_one_is_refused(autojump_clock):
    import pytest

    from minibroker.broker.config import BrokerConfig, ConfigError

    with pytest.raises(ConfigError) as refused:
        BrokerConfig.from_kafka({"group.consumer.assignors": "uniform,sticky"})
    assert str(refused.value) == (
        "config.group.consumer.assignors: expected a comma-separated list of uniform, range, "
        "got 'uniform,sticky'"
    )
    cm, cluster, _sink, coordinator = await _cluster({"group.consumer.assignors": "range,uniform"})
    try:
        await Raw(cluster, "a").call(0, hb("m-a", 0))
        assert coordinator.snapshot().consumer_groups[0].assignor == "range"
    finally:
        await cm.__aexit__(None, None, None)


async def test_a_classic_group_left_empty_is_upgraded_by_the_first_heartbeat_and_keeps_its_offsets(
    autojump_clock,
):
    from minibroker.coordinator.group.messages import LeaveGroupRequest, LeavingMember
    from tests.coordinator.group.test_membership import stable_group

    cm, cluster, sink, coordinator = await _cluster()
    try:
        a = Raw(cluster, "a")
        (member,), generation = await stable_group(cluster, [a])
        assert (stable_group.joined_at, generation) == (3000, 1)  # the initial rebalance delay
        committed = await a.call(0, commit(member, generation, offset=17))
        assert committed.partitions[0][2].name == "NONE"
        await cluster.clock.sleep_until(5000)
        await a.call(0, LeaveGroupRequest("g", (LeavingMember(member),)))
        assert coordinator.groups["g"].state == "Empty"
        await cluster.clock.sleep_until(6000)
        answer = await a.call(0, hb("m-new", 0))
        assert (answer.error.name, answer.member_epoch, answer.assignment) == ("NONE", 1, t(0, 1, 2, 3))
        (convert,) = sink.of_kind("group.consumer.convert")
        assert (convert["time_ms"], convert["to"]) == (6000, "consumer")
        assert coordinator.timer.deadline("session-timeout-g-m-new") == 51_000
        fetch = OffsetFetchRequest((OffsetFetchGroup("g", (("t", (0,)),), "m-new", 1),))
        (result,) = (await a.call(0, fetch)).groups
        assert [o.offset for o in result.offsets] == [17]
        assert (await a.call(0, commit("m-new", 1, offset=18))).partitions[0][2].name == "NONE"
    finally:
        await cm.__aexit__(None, None, None)


async def test_delete_groups_refuses_a_consumer_group_with_members_and_deletes_an_empty_one(autojump_clock):
    from minibroker.coordinator.group.messages import DeleteGroupsRequest

    cm, cluster, _sink, coordinator = await _cluster()
    try:
        a = Raw(cluster, "a")
        await a.call(0, hb("m-a", 0))
        await a.call(0, commit("m-a", 1))
        assert (await a.call(0, DeleteGroupsRequest(("g",)))).results == (("g", Errors.NON_EMPTY_GROUP),)
        await a.call(0, hb("m-a", -1))
        assert (await a.call(0, DeleteGroupsRequest(("g",)))).results == (("g", Errors.NONE),)
        assert "g" not in coordinator.consumer_group_manager.groups and "g" not in coordinator.offsets
        rejoined = await a.call(0, hb("m-a", 0))  # a new group, from epoch 1
        assert (rejoined.member_epoch, rejoined.assignment) == (1, t(0, 1, 2, 3))
    finally:
        await cm.__aexit__(None, None, None)


async def test_offsets_of_unsubscribed_topics_expire_and_an_empty_group_without_offsets_is_deleted(
    autojump_clock,
):
    config = {"offsets.retention.minutes": 1, "offsets.retention.check.interval.ms": 10_000}
    cm, cluster, sink, coordinator = await _cluster(config)
    try:
        cluster.create_topic(TopicSpec("u", 1, 1))
        a = Raw(cluster, "a")
        await a.call(0, hb("m-a", 0))
        offsets = (CommitOffset("t", 0, 5), CommitOffset("u", 0, 7))
        await a.call(0, OffsetCommitRequest("g", offsets, 1, "m-a"))
        for at in (30_000, 59_000):  # within the 45 s session timeout
            await cluster.clock.sleep_until(at)
            assert (await a.call(0, hb("m-a", 1))).error.name == "NONE"
        await cluster.clock.sleep_until(61_000)
        assert sorted(str(tp) for tp in coordinator.offsets["g"]) == ["t-0"]  # u is not subscribed
        await a.call(0, hb("m-a", -1))
        await cluster.clock.sleep_until(70_001)
        assert "g" not in coordinator.offsets and "g" not in coordinator.consumer_group_manager.groups
        expired = [(e["time_ms"], e["partitions"]) for e in sink.of_kind("group.offsets.expire")]
        assert expired == [(60_000, ["u-0"]), (70_000, ["t-0"])]
    finally:
        await cm.__aexit__(None, None, None)


async def test_a_heartbeat_without_records_waits_for_the_groups_earlier_writes_and_carries_their_error(
    autojump_clock,
):
    """Kafka's CoordinatorRuntime: an answer read from state that pending writes changed is held until
    those writes are answered (not later ones), and a failed one's error is the answer's."""
    cm, cluster, sink = await open_group_cluster(3, config={"minibroker.coordinator.load.ms.per.record": 0})
    cluster.create_topic(TopicSpec("t", 4, 1))
    a, b, c = Raw(cluster, "a"), Raw(cluster, "b"), Raw(cluster, "c")
    try:
        assert (await a.call(0, hb("m-a", 0))).member_epoch == 1
        await cluster.clock.sleep_until(1000)
        for follower in (1, 2):  # nothing more reaches the ISR: every write times out after 5 s
            cluster.pause_fetcher(follower)
        joined = b.send(0, hb("m-b", 0))  # its records (group epoch 2) wait in the purgatory
        await cluster.clock.sleep_until(1100)
        # b asks again (its first answer never came): nothing new to write, the answer is read from
        # the epoch-2 state that the pending write holds
        again = b.send(0, hb("m-b", 0))
        await cluster.clock.sleep_until(1200)
        later = c.send(0, hb("m-c", 0))  # written after b's second heartbeat: not waited for
        await cluster.clock.sleep_until(7000)
        (answered,) = [e for e in sink.of_kind("group.consumer.heartbeat") if e["time_ms"] == 1100]
        assert (answered["member"], answered["error"], answered["member_epoch"]) == ("m-b", "NONE", 2)
        assert (joined.at, joined.response.error) == (6000, Errors.COORDINATOR_NOT_AVAILABLE)
        assert (again.at, again.response.error) == (6000, Errors.COORDINATOR_NOT_AVAILABLE)
        assert (again.response.member_id, again.response.assignment) == (None, None)
        assert (later.at, later.response.error) == (6200, Errors.COORDINATOR_NOT_AVAILABLE)
        assert cluster.brokers[0].coordinator.context.writes_in_flight == {}
    finally:
        await cm.__aexit__(None, None, None)
