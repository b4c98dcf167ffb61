"""confluent-kafka ``ShareConsumer``s (librdkafka 2.16, KIP-932) against ``minibroker serve``.

Two share consumers of one group share a partition: the records the first one acquired and never
acknowledged come back to the second once their acquisition locks expire, with delivery count 2; a REJECTed
record and one RELEASEd at the delivery-count limit are archived; the share partition's start offset ends past
every record.
"""

from __future__ import annotations

import time

import pytest

from minibroker.common.messages import TopicPartition
from tests.server.conftest import WAIT_S, scenario

pytest.importorskip("confluent_kafka")

TP = TopicPartition("t", 0)
LOCK_MS = 1500
CONFIG = f'"group.share.record.lock.duration.ms" = {LOCK_MS}, "group.share.delivery.count.limit" = 2'
VALUES = [b"a", b"poison", b"retry", b"b", b"c", b"d"]


def _share_partition(server):
    def find():
        leader = server.cluster.brokers[server.cluster.leader_of(TP)]
        manager = leader.share_partition_manager
        return manager.share_partitions.get(("sg", TP)) if manager is not None else None

    return server.call(find)


def _consumer(server, errors):
    from confluent_kafka import ShareConsumer

    consumer = ShareConsumer(
        {
            "bootstrap.servers": server.bootstrap,
            "group.id": "sg",
            "share.acknowledgement.mode": "explicit",
            "error_cb": errors.append,
        }
    )
    consumer.subscribe(["t"])
    return consumer


def _start_and_produce(server, consumer) -> None:
    """Poll until the share partition's window has started (at the HW: latest), then produce ``VALUES``."""
    from confluent_kafka import Producer

    deadline = time.monotonic() + WAIT_S
    while _share_partition(server) is None or not _share_partition(server).initialized:
        assert time.monotonic() < deadline, "no ShareFetch reached the leader"
        consumer.poll(0.1)
    producer = Producer({"bootstrap.servers": server.bootstrap, "acks": "all"})
    for value in VALUES:
        producer.produce("t", value=value, partition=0)
    assert producer.flush(WAIT_S) == 0


def _poll_until(consumer, condition, what):
    got = []
    deadline = time.monotonic() + WAIT_S
    while not condition(got):
        assert time.monotonic() < deadline, f"timed out waiting for {what}; got {got}"
        got.extend(m for m in consumer.poll(0.2) if m.error() is None)
    return got


def test_share_consumers_share_a_partition(serve):
    from confluent_kafka import AcknowledgeType

    server = serve(scenario(brokers=3, config=CONFIG))
    errors: list = []
    first = _consumer(server, errors)
    _start_and_produce(server, first)

    held = _poll_until(first, lambda got: len(got) == len(VALUES), "the first consumer's records")
    assert [(m.offset(), m.delivery_count()) for m in held] == [(i, 1) for i in range(len(VALUES))]
    # the first consumer stalls: it never acknowledges, so its locks expire LOCK_MS after acquisition

    second = _consumer(server, errors)
    seen = []

    def settle(got):
        for message in got[len(seen) :]:
            seen.append(message)
            kind = {b"poison": AcknowledgeType.REJECT, b"retry": AcknowledgeType.RELEASE}.get(
                message.value(), AcknowledgeType.ACCEPT
            )
            second.acknowledge(message, kind)
        return len(seen) >= len(VALUES)

    redelivered = _poll_until(second, settle, "the redeliveries")
    second.commit_sync(WAIT_S)
    assert sorted((m.offset(), m.delivery_count()) for m in redelivered) == [
        (i, 2) for i in range(len(VALUES))
    ]

    sp = _share_partition(server)
    server.wait_for(lambda: sp.start_offset == len(VALUES), "the start offset past every record")
    assert sp.records == {} and sp.lock_expiries >= 1
    assert sp.archived_total == 2  # REJECTed "poison"; "retry" RELEASEd at the delivery-count limit (2)
    assert (sp.acknowledged["ACCEPT"], sp.acknowledged["REJECT"], sp.acknowledged["RELEASE"]) == (4, 1, 1)
    for consumer in (first, second):
        consumer.close()
    assert not [e for e in errors if "Preview" not in str(e)]


def test_nothing_is_lost_across_a_leader_crash(serve):
    server = serve(scenario(brokers=3, config=CONFIG))
    errors: list = []
    consumer = _consumer(server, errors)
    _start_and_produce(server, consumer)

    first = _poll_until(consumer, lambda got: len(got) == len(VALUES), "the records")
    for message in first[:3]:
        consumer.acknowledge(message)
    assert all(error is None for error in consumer.commit_sync(WAIT_S).values())
    leader = server.call(server.cluster.leader_of, TP)
    server.call(server.cluster.crash, leader)  # offsets 3..5 were acquired, never acknowledged

    survivor = _consumer(server, errors)
    rest = _poll_until(survivor, lambda got: len(got) == 3, "the records the crash released")
    assert sorted((m.offset(), m.value()) for m in rest) == [(3, b"b"), (4, b"c"), (5, b"d")]
    for message in rest:
        survivor.acknowledge(message)
    survivor.commit_sync(WAIT_S)
    sp = _share_partition(server)
    server.wait_for(lambda: sp.start_offset == len(VALUES), "every record acknowledged on the new leader")
    assert server.call(server.cluster.leader_of, TP) != leader
    survivor.close()


def test_share_apis_over_a_raw_socket(serve):
    from minibroker.server import share_messages as w
    from minibroker.server.metadata import topic_id
    from tests.server.conftest import RawClient

    server = serve(scenario(brokers=1, config=CONFIG, topics='name = "t"\npartitions = 1'))
    server.call(server.cluster.ensure_offsets_topic)
    server.wait_for(lambda: server.cluster.coordinator_for("sg") == 0, "the group's coordinator")
    client = RawClient(server.port(0))
    try:
        joined = client.request(
            w.ShareGroupHeartbeatRequest(
                group_id="sg", member_id="m1", member_epoch=0, subscribed_topic_names=["t"]
            ),
            w.ShareGroupHeartbeatResponse,
            1,
        )
        assert (joined.error_code, joined.member_id, joined.member_epoch, joined.heartbeat_interval_ms) == (
            0,
            "m1",
            1,
            5000,
        )
        assert [(t.topic_id, t.partitions) for t in joined.assignment.topic_partitions] == [
            (topic_id("t"), [0])
        ]
        (group,) = client.request(
            w.ShareGroupDescribeRequest(group_ids=["sg"], include_authorized_operations=False),
            w.ShareGroupDescribeResponse,
            1,
        ).groups
        assert (group.error_code, group.group_state, group.group_epoch, group.assignor_name) == (
            0,
            "Stable",
            1,
            "simple",
        )
        assert [(m.member_id, m.subscribed_topic_names) for m in group.members] == [("m1", ["t"])]

        def share_fetch(epoch, topic):
            part = w.ShareFetchRequest.FetchTopic.FetchPartition(
                partition_index=0, acknowledgement_batches=[]
            )
            request = w.ShareFetchRequest(
                group_id="sg",
                member_id="m1",
                share_session_epoch=epoch,
                max_wait_ms=0,
                min_bytes=1,
                max_bytes=1 << 20,
                max_records=10,
                batch_size=10,
                topics=[w.ShareFetchRequest.FetchTopic(topic_id=topic, partitions=[part])],
                forgotten_topics_data=[],
            )
            return client.request(request, w.ShareFetchResponse, 1)

        assert share_fetch(3, topic_id("t")).error_code == 122  # SHARE_SESSION_NOT_FOUND
        opened = share_fetch(0, topic_id("t"))
        assert (opened.error_code, opened.acquisition_lock_timeout_ms) == (0, LOCK_MS)
        unknown = share_fetch(1, topic_id("nope"))
        assert [(t.topic_id, [p.error_code for p in t.partitions]) for t in unknown.responses] == [
            (topic_id("nope"), [100])  # UNKNOWN_TOPIC_ID
        ]
        assert share_fetch(7, topic_id("t")).error_code == 123  # INVALID_SHARE_SESSION_EPOCH
    finally:
        client.close()
