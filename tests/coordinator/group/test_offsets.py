"""Committed offsets, group admin requests, coordinator placement and failover, in virtual time."""

from __future__ import annotations

import trio

from minibroker.common.messages import TopicPartition
from minibroker.coordinator.group import OFFSETS_TOPIC, java_string_hash, partition_for
from minibroker.coordinator.group.hashing import kafka_abs
from minibroker.coordinator.group.messages import (
    CommitOffset,
    DeleteGroupsRequest,
    DescribeGroupsRequest,
    ListGroupsRequest,
    OffsetCommitRequest,
    OffsetFetchGroup,
    OffsetFetchRequest,
)
from minibroker.sim import TopicSpec
from tests.coordinator.group.helpers import Raw, heartbeat, join, open_group_cluster
from tests.coordinator.group.test_membership import stable_group


def test_java_string_hash_and_kafka_abs():
    assert java_string_hash("") == 0
    assert java_string_hash("a") == 97
    assert java_string_hash("hello") == 99162322
    # a supplementary character counts as two UTF-16 code units, as in Java
    assert java_string_hash("é☃𝄞") == 18065188
    assert java_string_hash("polygenelubricants") == -(2**31)  # Integer.MIN_VALUE
    assert kafka_abs(-(2**31)) == 0 and kafka_abs(-5) == 5
    assert partition_for("polygenelubricants", 50) == 0
    assert partition_for("test-group", 50) == 627841412 % 50 == 12


def commit(group, offsets, generation=-1, member="", **kw):
    return OffsetCommitRequest(
        group, tuple(CommitOffset("t", p, o, metadata=m) for p, o, m in offsets), generation, member, **kw
    )


async def test_a_commit_waits_for_the_isr_as_a_delayed_produce(autojump_clock):
    cm, cluster, sink = await open_group_cluster(3, latency_ms=5)
    try:
        cluster.create_topic(TopicSpec("t", 2, 1))
        await cluster.clock.sleep_until(1000)
        raw = Raw(cluster, "app")
        answer = raw.send(0, commit("g", [(0, 42, "m"), (1, 7, None), (9, 1, "")]))
        await cluster.clock.sleep_until(2000)
        errors = [(p, e.name) for _, p, e in answer.response.partitions]
        assert errors == [(0, "NONE"), (1, "NONE"), (9, "UNKNOWN_TOPIC_OR_PARTITION")]
        # request at 1005, append; the followers' parked fetches return at 1010, their next
        # fetches (which raise the HW) reach the leader at 1015; the answer is back at 1020
        assert answer.at == 1020
        ops = [e for e in sink.of_kind("op.create") if e.get("purgatory") == "Produce"]
        assert [e["op"] for e in ops] == ["b0-offsets-1"]
        done = [e for e in sink.of_kind("produce.response") if e["op"] == "b0-offsets-1"]
        assert [(e["partition"], e["error"], e["cause"]) for e in done] == [
            (f"{OFFSETS_TOPIC}-0", "NONE", "condition")
        ]
        fetched = await raw.call(0, OffsetFetchRequest((OffsetFetchGroup("g", (("t", (0, 1, 2)),)),)))
        (group,) = fetched.groups
        assert [(o.partition, o.offset, o.metadata) for o in group.offsets] == [
            (0, 42, "m"),
            (1, 7, None),
            (2, -1, ""),
        ]
        everything = await raw.call(
            0, OffsetFetchRequest((OffsetFetchGroup("g"), OffsetFetchGroup("nobody")))
        )
        assert [(o.topic, o.partition, o.offset) for o in everything.groups[0].offsets] == [
            ("t", 0, 42),
            ("t", 1, 7),
        ]
        assert everything.groups[1].offsets == () and everything.groups[1].error.name == "NONE"
    finally:
        await cm.__aexit__(None, None, None)


async def test_a_stable_offset_fetch_is_answered_after_the_commits_already_in_the_log(autojump_clock):
    cm, cluster, _sink = await open_group_cluster(3, latency_ms=5)
    try:
        cluster.create_topic(TopicSpec("t", 1, 1))
        await cluster.clock.sleep_until(1000)
        raw = Raw(cluster, "app")
        await raw.call(0, commit("g", [(0, 18, "")]))
        await cluster.clock.sleep_until(2000)
        newer = raw.send(0, commit("g", [(0, 58, "")]))
        wanted = (OffsetFetchGroup("g", (("t", (0,)),)),)
        stable = raw.send(0, OffsetFetchRequest(wanted, require_stable=True))
        latest = raw.send(0, OffsetFetchRequest(wanted))
        await cluster.clock.sleep_until(3000)
        # the commit of 58 is in the log at 2005 and answered when the ISR has it (back at 2020): a plain
        # fetch reads the offset committed so far at once, a stable one waits for that write
        assert (latest.at, [o.offset for o in latest.response.groups[0].offsets]) == (2010, [18])
        assert (newer.at, stable.at) == (2020, 2020)
        assert [o.offset for o in stable.response.groups[0].offsets] == [58]
        assert cluster.brokers[0].coordinator.context.writes_in_flight == {}
    finally:
        await cm.__aexit__(None, None, None)


async def test_commit_validation_errors(autojump_clock):
    cm, cluster, _sink = await open_group_cluster(config={"offset.metadata.max.bytes": 3})
    try:
        cluster.create_topic(TopicSpec("t", 1, 1))
        a = Raw(cluster, "a")
        (ma,), gen = await stable_group(cluster, [a])

        async def error(request):
            response = await a.call(0, request)
            return [e.name for _, _, e in response.partitions]

        assert await error(commit("g", [(0, 1, "toolong")], gen, ma)) == ["OFFSET_METADATA_TOO_LARGE"]
        assert await error(commit("g", [(0, 1, "ok")], gen, ma)) == ["NONE"]
        assert await error(commit("g", [(0, 1, "")], gen + 1, ma)) == ["ILLEGAL_GENERATION"]
        assert await error(commit("g", [(0, 1, "")], gen, "ghost")) == ["UNKNOWN_MEMBER_ID"]
        assert await error(commit("g", [(0, 1, "")])) == ["UNKNOWN_MEMBER_ID"]  # not Empty: -1 is refused
        assert await error(commit("missing", [(0, 1, "")], 3, "x")) == ["GROUP_ID_NOT_FOUND"]
        assert await error(commit("missing", [(0, 1, "")], 3, "x", api_version=8)) == ["ILLEGAL_GENERATION"]
        assert await error(commit("", [(0, 1, "")])) == ["INVALID_GROUP_ID"]
        assert await error(commit("simple", [(0, 5, "")])) == ["NONE"]  # a simple group is created
        groups = await a.call(0, ListGroupsRequest())
        assert [(g.group_id, g.protocol_type, g.state) for g in groups.groups] == [
            ("g", "consumer", "Stable"),
            ("simple", "", "Empty"),
        ]
        stable = await a.call(0, ListGroupsRequest(states=("stable",)))
        assert [g.group_id for g in stable.groups] == ["g"]
    finally:
        await cm.__aexit__(None, None, None)


async def test_describe_and_delete_groups(autojump_clock):
    cm, cluster, _sink = await open_group_cluster()
    try:
        cluster.create_topic(TopicSpec("t", 1, 1))
        a = Raw(cluster, "a")
        (ma,), _gen = await stable_group(cluster, [a])
        await a.call(0, commit("simple", [(0, 5, "")]))
        described = await a.call(0, DescribeGroupsRequest(("g", "simple", "nobody")))
        g, simple, nobody = described.groups
        assert (g.state, g.protocol_type, g.protocol_data) == ("Stable", "consumer", "range")
        assert [(m.member_id, m.metadata, m.assignment) for m in g.members] == [
            (ma, b"r-meta", f"a-{ma}".encode())
        ]
        assert (simple.state, simple.members) == ("Empty", ())
        assert (nobody.error.name, nobody.state) == ("NONE", "Dead")
        # a group named twice is deleted once; both entries carry its result
        deleted = await a.call(0, DeleteGroupsRequest(("g", "simple", "nobody", "", "simple")))
        assert [(gid, e.name) for gid, e in deleted.results] == [
            ("g", "NON_EMPTY_GROUP"),
            ("simple", "NONE"),
            ("nobody", "GROUP_ID_NOT_FOUND"),
            ("", "INVALID_GROUP_ID"),
            ("simple", "NONE"),
        ]
        fetched = await a.call(0, OffsetFetchRequest((OffsetFetchGroup("simple"),)))
        assert fetched.groups[0].offsets == ()
        # the tombstones are in the log: a reload finds no trace of the group
        coordinator = cluster.brokers[0].coordinator
        coordinator.unload(0)
        coordinator.load(0, 0)
        assert coordinator.loading == {0: 0}  # reading the log: 1 ms per record
        await trio.sleep(0.1)
        assert sorted(coordinator.groups) == ["g"] and "simple" not in coordinator.offsets
    finally:
        await cm.__aexit__(None, None, None)


async def test_deleting_a_group_disarms_only_its_own_tasks(autojump_clock):
    cm, cluster, _sink = await open_group_cluster()
    try:
        cluster.create_topic(TopicSpec("t", 1, 1))
        a = Raw(cluster, "a")
        await a.call(0, commit("g", [(0, 5, "")]))
        timer = cluster.brokers[0].coordinator.timer
        # a group whose id starts with the deleted one's keeps its join and sync tasks
        timer.schedule("join-g2", 60_000, lambda: None)
        timer.schedule("sync-g2", 60_000, lambda: None)
        deleted = await a.call(0, DeleteGroupsRequest(("g",)))
        assert [(gid, e.name) for gid, e in deleted.results] == [("g", "NONE")]
        assert sorted(k for k, _ in timer.armed() if k.endswith("-g2")) == ["join-g2", "sync-g2"]
    finally:
        await cm.__aexit__(None, None, None)


async def test_offsets_of_a_simple_group_expire_after_the_retention(autojump_clock):
    config = {"offsets.retention.minutes": 1, "offsets.retention.check.interval.ms": 7000}
    cm, cluster, sink = await open_group_cluster(config=config)
    try:
        cluster.create_topic(TopicSpec("t", 1, 1))
        a = Raw(cluster, "a")
        await cluster.clock.sleep_until(1000)
        assert [e.name for *_, e in (await a.call(0, commit("simple", [(0, 5, "")]))).partitions] == ["NONE"]
        # committed at 1000, due at 61000; the checks run at 7000, 14000, ..., 63000
        await cluster.clock.sleep_until(62_999)
        assert cluster.brokers[0].coordinator.offsets["simple"]
        await cluster.clock.sleep_until(63_001)
        expired = sink.of_kind("group.offsets.expire")
        assert [(e["time_ms"], e["group"], e["partitions"]) for e in expired] == [(63_000, "simple", ["t-0"])]
        assert "simple" not in cluster.brokers[0].coordinator.groups
    finally:
        await cm.__aexit__(None, None, None)


async def test_the_coordinator_is_the_leader_of_the_groups_partition(autojump_clock):
    cm, cluster, _sink = await open_group_cluster(3, config={"offsets.topic.num.partitions": 50})
    try:
        spec = cluster.topics[OFFSETS_TOPIC]
        assert (spec.partitions, spec.replication_factor) == (50, 3)
        # "test-group" -> partition 12, led by broker 12 % 3 = 0
        assert cluster.coordinator_for("test-group") == 0
        assert cluster.coordinator_for("a") == 97 % 50 % 3
        raw = Raw(cluster, "app")
        wrong = await raw.call(1, join("test-group"))
        assert wrong.error.name == "NOT_COORDINATOR"
        assert (await raw.call(0, join("test-group"))).error.name == "MEMBER_ID_REQUIRED"
    finally:
        await cm.__aexit__(None, None, None)


async def test_a_failover_keeps_members_and_committed_offsets(autojump_clock):
    cm, cluster, sink = await open_group_cluster(3, latency_ms=1)
    try:
        cluster.create_topic(TopicSpec("t", 1, 1))
        a, b = Raw(cluster, "a"), Raw(cluster, "b")
        (ma, mb), gen = await stable_group(cluster, [a, b])
        response = await a.call(0, commit("g", [(0, 17, "x")], gen, ma))
        assert [e.name for *_, e in response.partitions] == ["NONE"]
        tp = TopicPartition(OFFSETS_TOPIC, 0)
        crash_at = cluster.now()
        cluster.crash(0)
        await cluster.clock.sleep_until(crash_at + 1)
        new = cluster.leader_of(tp)
        assert new in (1, 2)
        # the controller's LeaderAndIsr takes the 1 ms link: the new leader starts loading at crash + 1;
        # its log holds 2 records (generation 1's group metadata, the commit): 2 ms at 1 ms per record
        # a heartbeat sent at crash + 1 arrives at crash + 2 (the link): the log is still being read
        assert (await a.call(new, heartbeat("g", gen, ma))).error.name == "COORDINATOR_LOAD_IN_PROGRESS"
        assert cluster.now() == crash_at + 3  # the answer's way back
        starts = [e for e in sink.of_kind("group.load.start") if e["broker"] == new]
        assert [(e["records"], e["load_ms"], e["time_ms"]) for e in starts] == [(2, 2, crash_at + 1)]
        assert (await a.call(new, heartbeat("g", gen, ma))).error.name == "NONE"  # arrives at crash + 4
        fetched = await a.call(new, OffsetFetchRequest((OffsetFetchGroup("g"),)))
        assert [(o.partition, o.offset, o.metadata) for o in fetched.groups[0].offsets] == [(0, 17, "x")]
        group = cluster.brokers[new].coordinator.groups["g"]
        assert (group.state, group.generation_id, sorted(group.members)) == ("Stable", gen, sorted([ma, mb]))
        loads = [e for e in sink.of_kind("group.load") if e["broker"] == new]
        assert [(e["records"], e["groups"], e["time_ms"]) for e in loads] == [(2, 1, crash_at + 3)]
        # b never talks to the new coordinator: its session (armed at the load) expires 10 s later
        for k in range(1, 5):
            await cluster.clock.sleep_until(crash_at + 3000 * k)
            await a.call(new, heartbeat("g", gen, ma))
        assert [(e["member"], e["time_ms"]) for e in sink.of_kind("group.session.expire")] == [
            (mb, crash_at + 10_003)
        ]
    finally:
        await cm.__aexit__(None, None, None)
