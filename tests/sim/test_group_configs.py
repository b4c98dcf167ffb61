"""Share-group configs on GROUP resources (32): a group's ``share.auto.offset.reset`` and
``share.record.lock.duration.ms`` take effect on its share partitions; bad names and values are refused."""

from __future__ import annotations

import pytest

from minibroker.broker.share import ShareFetchRequest
from minibroker.common.errors import Errors
from minibroker.common.messages import ProduceData, ProduceRequest, TopicPartition
from minibroker.sim import TopicSpec
from minibroker.sim.dynamic_configs import (
    DEFAULT_CONFIG,
    GROUP,
    GROUP_CONFIG,
    SET,
    alter_configs,
    describe_configs,
)
from minibroker.sim.topic_admin import AdminError
from tests.coordinator.group.helpers import Raw, open_group_cluster

TP = TopicPartition("t", 0)


async def test_a_group_reads_from_the_earliest_offset_under_its_own_lock_duration(autojump_clock):
    cm, cluster, sink = await open_group_cluster(1)
    try:
        cluster.create_topic(TopicSpec("t", 1, 1))
        a = Raw(cluster, "a")
        await a.call(0, ProduceRequest(-1, 1000, {TP: ProduceData(3, 30)}, "p"))
        ops = [("share.auto.offset.reset", SET, "earliest"), ("share.record.lock.duration.ms", SET, "15000")]
        alter_configs(cluster, GROUP, "sg", ops)
        entries = {e.name: (e.value, e.source) for e in describe_configs(cluster, GROUP, "sg")}
        assert {
            k: v
            for k, v in entries.items()
            if k.startswith("share.") and "session" not in k and "heartbeat" not in k
        } == {
            "share.auto.offset.reset": ("earliest", GROUP_CONFIG),
            "share.record.lock.duration.ms": ("15000", GROUP_CONFIG),
            "share.isolation.level": ("read_uncommitted", DEFAULT_CONFIG),
        }
        await a.call(0, ShareFetchRequest("sg", "m", 0, 0, (TP,)))
        got = await a.call(0, ShareFetchRequest("sg", "m", 1, 1000, (TP,)))
        acquired_at = cluster.now()
        assert [(r.first_offset, r.last_offset) for r in got.partitions[TP].acquired] == [(0, 2)]
        assert got.acquisition_lock_timeout_ms == 15_000
        await cluster.clock.sleep_until(acquired_at + 15_001)
        (expired,) = sink.of_kind("share.lock.expire")
        assert expired["time_ms"] == acquired_at + 15_000
    finally:
        await cm.__aexit__(None, None, None)


@pytest.mark.parametrize(
    ("op", "message"),
    [
        (
            ("share.auto.offset.reset", SET, "soon"),
            "share.auto.offset.reset: expected one of latest, earliest",
        ),
        (
            ("share.record.lock.duration.ms", SET, "0"),
            "share.record.lock.duration.ms: expected a number in 15000..60000",
        ),
        (("group.id", SET, "x"), "Unknown group config name: group.id"),
    ],
)
async def test_bad_group_configs_are_refused(autojump_clock, op, message):
    cm, cluster, _sink = await open_group_cluster(1)
    try:
        with pytest.raises(AdminError) as refused:
            alter_configs(cluster, GROUP, "sg", [op])
        assert refused.value.error is Errors.INVALID_CONFIG and str(refused.value).startswith(message)
        assert (GROUP, "sg") not in cluster.resource_configs
    finally:
        await cm.__aexit__(None, None, None)
