"""The share coordinator's InitializeShareGroupState, ReadShareGroupStateSummary and DeleteShareGroupState:
a state epoch raised by each initialization fences older writes, a delete is a tombstone, and a new leader
of ``__share_group_state`` reads both back (MockClock)."""

from __future__ import annotations

from minibroker.common.errors import Errors
from minibroker.coordinator.share.messages import (
    DeleteShareGroupStateRequest,
    InitializeShareGroupStateRequest,
    ReadShareGroupStateSummaryRequest,
    ShareGroupState,
    WriteShareGroupStateRequest,
)
from minibroker.sim import TopicSpec
from tests.coordinator.group.helpers import Raw, open_group_cluster


async def test_initialize_fences_older_writes_and_a_new_leader_reads_epochs_and_tombstones(autojump_clock):
    config = {"share.coordinator.state.topic.num.partitions": 1}
    cm, cluster, sink = await open_group_cluster(3, config=config)
    try:
        cluster.create_topic(TopicSpec("t", 2, 3))
        coordinator = cluster.share_coordinator_for("sg:t:0")
        await cluster.clock.sleep_until(cluster.now() + 100)
        raw = Raw(cluster, "admin")

        async def summary(partition: int) -> tuple:
            answer = await raw.call(coordinator, ReadShareGroupStateSummaryRequest("sg", "t", partition))
            state = answer.state
            return answer.error, None if state is None else (
                state.start_offset,
                state.state_epoch,
                state.batches,
            )

        assert await summary(0) == (Errors.NONE, None)
        for start in (7, 9):
            answer = await raw.call(coordinator, InitializeShareGroupStateRequest("sg", "t", 0, start))
            assert answer.error is Errors.NONE
        assert await summary(0) == (Errors.NONE, (9, 2, ()))
        stale = WriteShareGroupStateRequest("sg", "t", 0, ShareGroupState(3, (), 1))
        assert (await raw.call(coordinator, stale)).error is Errors.FENCED_STATE_EPOCH
        assert (
            await raw.call(coordinator, InitializeShareGroupStateRequest("sg", "t", 1, 3))
        ).error is Errors.NONE
        assert (await raw.call(coordinator, DeleteShareGroupStateRequest("sg", "t", 1))).error is Errors.NONE
        assert await summary(1) == (Errors.NONE, None)
        assert [(e["key"], e["offset"]) for e in sink.of_kind("share.state.write")] == [
            ("sg:t:0", 7),
            ("sg:t:0", 9),
            ("sg:t:1", 3),
            ("sg:t:1", -1),  # the tombstone
        ]

        cluster.crash(coordinator)
        await cluster.clock.sleep_until(cluster.now() + 100)
        coordinator = cluster.share_coordinator_for("sg:t:0")
        assert coordinator >= 0
        assert await summary(0) == (Errors.NONE, (9, 2, ()))
        assert await summary(1) == (Errors.NONE, None)
    finally:
        await cm.__aexit__(None, None, None)
