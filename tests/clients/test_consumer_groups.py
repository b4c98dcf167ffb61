"""The emulator's own consumers in groups, in virtual time: assignment, eviction, commits."""

from __future__ import annotations

import warnings

from minibroker.coordinator.group import consumer_protocol as cp
from minibroker.sim import TopicSpec
from tests.coordinator.group.helpers import open_group_cluster

SETTINGS = {"group.id": "g", "session.timeout.ms": 10_000, "heartbeat.interval.ms": 3000}


def test_assignors_as_the_java_client_computes_them():
    subs = {"c": ["t", "u"], "a": ["t"], "b": ["t", "u"]}
    sizes = {"t": 5, "u": 2}.__getitem__
    assert cp.range_assign(subs, sizes) == {
        "a": [("t", 0), ("t", 1)],
        "b": [("t", 2), ("t", 3), ("u", 0)],
        "c": [("t", 4), ("u", 1)],
    }
    assert cp.roundrobin_assign(subs, sizes) == {
        "a": [("t", 0), ("t", 3)],
        "b": [("t", 1), ("t", 4), ("u", 1)],
        "c": [("t", 2), ("u", 0)],
    }


def test_the_embedded_protocol_is_kafkas():
    with warnings.catch_warnings():  # kafka-python loads its schemas through a deprecated API
        warnings.simplefilter("ignore", DeprecationWarning)
        from kafka.protocol.consumer.metadata import ConsumerProtocolAssignment, ConsumerProtocolSubscription

    sub = ConsumerProtocolSubscription.decode(cp.encode_subscription(["t", "u"]), version=0)
    assert list(sub.topics) == ["t", "u"]
    data = cp.encode_assignment([("t", 0), ("t", 2), ("u", 1)])
    assert ConsumerProtocolAssignment.decode(data, version=0).partitions() == [("t", 0), ("t", 2), ("u", 1)]
    assert cp.decode_assignment(data) == [("t", 0), ("t", 2), ("u", 1)]
    assert cp.decode_subscription(cp.encode_subscription(["x"])) == ["x"]


async def test_three_consumers_one_second_apart_get_one_partition_each_at_6000(autojump_clock):
    cm, cluster, sink = await open_group_cluster()
    try:
        cluster.create_topic(TopicSpec("t", 3, 1))
        members = []
        for i in range(3):
            await cluster.clock.sleep_until(1000 * i)
            consumer = cluster.consumer(f"c{i}", SETTINGS)
            membership = consumer.subscribe(["t"])
            cluster._nursery.start_soon(membership.run)
            members.append(membership)
        await cluster.clock.sleep_until(6001)
        assigned = [
            (e["client"], e["generation"], e["partitions"], e["time_ms"])
            for e in sink.of_kind("member.assigned")
        ]
        assert sorted(assigned) == [
            ("c0", 1, ["t-0"], 6000),
            ("c1", 1, ["t-1"], 6000),
            ("c2", 1, ["t-2"], 6000),
        ]
        group = cluster.brokers[0].coordinator.groups["g"]
        assert (group.state, group.generation_id) == ("Stable", 1)
    finally:
        await cm.__aexit__(None, None, None)


def test_undecodable_embedded_protocol_bytes():
    import pytest

    with pytest.raises(ValueError):
        cp.decode_subscription(b"\x00")
    with pytest.raises(ValueError):
        cp.decode_assignment(b"\x00\x00\x00\x00\x00\x01\x00")
    assert cp.decode_assignment(b"") == []
    # the leader treats a member whose subscription does not decode as subscribed to nothing
    assert cp.subscribed_topics(b"\x00") == []
    assert cp.subscribed_topics(cp.encode_subscription(["t"])) == ["t"]
    assert cp.range_assign({"a": [], "b": ["t"]}, {"t": 2}.__getitem__) == {
        "a": [],
        "b": [("t", 0), ("t", 1)],
    }
