"""A new coordinator reads its __consumer_offsets partition in virtual time, answering
COORDINATOR_LOAD_IN_PROGRESS meanwhile (``minibroker.coordinator.load.ms.per.record``)."""

from __future__ import annotations

from minibroker.common.messages import TopicPartition
from minibroker.coordinator.group import OFFSETS_TOPIC
from minibroker.coordinator.group.messages import (
    DeleteGroupsRequest,
    DescribeGroupsRequest,
    LeaveGroupRequest,
    LeavingMember,
    ListGroupsRequest,
    OffsetFetchGroup,
    OffsetFetchRequest,
)
from minibroker.sim import TopicSpec
from tests.coordinator.group.helpers import Raw, heartbeat, join, open_group_cluster, sync
from tests.coordinator.group.test_membership import stable_group
from tests.coordinator.group.test_offsets import commit

LOADING = "COORDINATOR_LOAD_IN_PROGRESS"


async def _crashed_coordinator(ms_per_record: int):
    """Group g (one member, generation 1) with a commit, coordinated by broker 0, which crashes."""
    config = {"minibroker.coordinator.load.ms.per.record": ms_per_record}
    cm, cluster, sink = await open_group_cluster(3, config=config)
    cluster.create_topic(TopicSpec("t", 1, 1))
    a = Raw(cluster, "a")
    (member,), generation = await stable_group(cluster, [a])
    assert (await a.call(0, commit("g", [(0, 17, "x")], generation, member))).partitions[0][2].name == "NONE"
    crash_at = cluster.now()
    cluster.crash(0)
    await cluster.clock.sleep_until(crash_at + 1)
    new = cluster.leader_of(TopicPartition(OFFSETS_TOPIC, 0))
    return cm, cluster, sink, a, new, member, generation, crash_at


async def test_every_group_request_gets_coordinator_load_in_progress_until_the_log_is_read(autojump_clock):
    # 2 records (generation 1's metadata, the commit) at 100 ms each: loaded 200 ms after the crash
    # (no link latency: the controller's LeaderAndIsr reaches the new leader in the crash's ms)
    cm, cluster, sink, a, new, member, generation, crash_at = await _crashed_coordinator(100)
    try:
        coordinator = cluster.brokers[new].coordinator
        assert coordinator.loading == {0: 1} and coordinator.loaded == {}
        view = coordinator.snapshot()  # what the TUI's coordinator section shows
        assert (view.partitions, view.loading, view.timers) == ((), (0,), (("load-0", crash_at + 200),))
        (start,) = [e for e in sink.of_kind("group.load.start") if e["broker"] == new]
        assert (start["time_ms"], start["records"], start["load_ms"]) == (crash_at, 2, 200)
        answers = [
            await a.call(new, heartbeat("g", generation, member)),
            await a.call(new, join("g", member)),
            await a.call(new, sync("g", generation, member)),
            await a.call(new, LeaveGroupRequest("g", (LeavingMember(member),))),
            await a.call(new, commit("g", [(0, 18, "")], generation, member)),
            await a.call(new, ListGroupsRequest()),
        ]
        assert [x.error.name for x in answers[:4]] == [LOADING] * 4
        assert [e.name for *_, e in answers[4].partitions] == [LOADING]
        assert (answers[5].error.name, answers[5].groups) == (LOADING, ())
        fetched = await a.call(new, OffsetFetchRequest((OffsetFetchGroup("g"),)))
        assert fetched.groups[0].error.name == LOADING
        described = await a.call(new, DescribeGroupsRequest(("g",)))
        assert described.groups[0].error.name == LOADING
        deleted = await a.call(new, DeleteGroupsRequest(("g",)))
        assert [(gid, e.name) for gid, e in deleted.results] == [("g", LOADING)]
        await cluster.clock.sleep_until(crash_at + 199)
        assert (await a.call(new, heartbeat("g", generation, member))).error.name == LOADING
        await cluster.clock.sleep_until(crash_at + 200)
        assert (await a.call(new, heartbeat("g", generation, member))).error.name == "NONE"
        fetched = await a.call(new, OffsetFetchRequest((OffsetFetchGroup("g"),)))
        assert [(o.partition, o.offset) for o in fetched.groups[0].offsets] == [(0, 17)]
        (load,) = [e for e in sink.of_kind("group.load") if e["broker"] == new]
        assert (load["time_ms"], load["records"], load["groups"]) == (crash_at + 200, 2, 1)
        assert (coordinator.snapshot().partitions, coordinator.snapshot().loading) == ((0,), ())
        # the load is a keyed task on the broker's timer, traced like the coordinator's other tasks
        assert [e["time_ms"] for e in sink.of_kind("timer.expire") if e.get("key") == "load-0"] == [
            crash_at + 200
        ]
    finally:
        await cm.__aexit__(None, None, None)


async def test_losing_leadership_while_loading_abandons_the_load(autojump_clock):
    cm, cluster, sink, a, new, member, generation, crash_at = await _crashed_coordinator(100)
    try:
        coordinator = cluster.brokers[new].coordinator
        coordinator.on_leadership(TopicPartition(OFFSETS_TOPIC, 0), False, 1)
        assert coordinator.loading == {} and coordinator.loaded == {}
        assert (await a.call(new, heartbeat("g", generation, member))).error.name == "NOT_COORDINATOR"
        await cluster.clock.sleep_until(crash_at + 300)
        assert coordinator.groups == {} and sink.of_kind("group.load")[-1]["broker"] == 0
    finally:
        await cm.__aexit__(None, None, None)


async def test_zero_ms_per_record_loads_at_once(autojump_clock):
    cm, _cluster, sink, a, new, member, generation, crash_at = await _crashed_coordinator(0)
    try:
        assert sink.of_kind("group.load.start") == []
        (load,) = [e for e in sink.of_kind("group.load") if e["broker"] == new]
        assert (load["time_ms"], load["records"]) == (crash_at, 2)
        assert (await a.call(new, heartbeat("g", generation, member))).error.name == "NONE"
    finally:
        await cm.__aexit__(None, None, None)
