"""The control API's share-group actions and read-outs over HTTP (``expire_share_locks``,
``share_partitions``), with a confluent-kafka ``ShareConsumer`` holding records unacknowledged; and the
share-group offsets (``share_group_offsets``, ``alter_share_group_offsets``,
``delete_share_group_offsets``)."""

from __future__ import annotations

import time

import pytest

from minibroker.server.control_http import ControlServer
from tests.server.test_control_http import Api

pytest.importorskip("confluent_kafka")

WAIT_S = 20


def _until(condition, what):
    deadline = time.monotonic() + WAIT_S
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


def test_share_partitions_are_read_and_their_locks_expired_on_demand(minibroker_factory):
    from confluent_kafka import Producer, ShareConsumer

    cluster = minibroker_factory(1, topics=["t:1:1"])
    server = ControlServer(log=cluster.logs.append).start(cluster)
    host, port = server.address
    api = Api(f"http://{host}:{port}")
    consumer = ShareConsumer(
        {
            "bootstrap.servers": cluster.bootstrap_servers,
            "group.id": "sg",
            "share.acknowledgement.mode": "explicit",
        }
    )
    try:
        consumer.subscribe(["t"])
        deadline = time.monotonic() + WAIT_S
        while not api.get("share_partitions", "group=sg"):  # the window starts at the first ShareFetch
            assert time.monotonic() < deadline, "no ShareFetch reached the leader"
            consumer.poll(0.1)
        producer = Producer({"bootstrap.servers": cluster.bootstrap_servers, "acks": "all"})
        for value in (b"a", b"b", b"c"):
            producer.produce("t", value=value, partition=0)
        assert producer.flush(WAIT_S) == 0
        got: list = []
        deadline = time.monotonic() + WAIT_S
        while len(got) < 3:
            assert time.monotonic() < deadline, f"got {got}"
            got.extend(m for m in consumer.poll(0.2) if m.error() is None)

        (view,) = api.get("share_partitions", "group=sg&topic=t&partition=0")
        assert (view["group"], view["topic"], view["partition"], view["leader"]) == ("sg", "t", 0, 0)
        assert (view["spso"], view["speo"], view["acquired_total"], view["lock_expiries"]) == (0, 2, 3, 0)
        assert [(r["offset"], r["state"], r["delivery_count"]) for r in view["records"]] == [
            (0, "Acquired", 1),
            (1, "Acquired", 1),
            (2, "Acquired", 1),
        ]
        assert len({r["member"] for r in view["records"]}) == 1
        assert all(r["lock_deadline_ms"] is not None for r in view["records"])

        purgatories = api.get("purgatories", "broker=0")  # the leader has served ShareFetches
        assert list(purgatories) == ["Produce", "Fetch", "DeleteRecords", "ElectLeader", "ShareFetch"]
        assert purgatories["ShareFetch"]["completions"] >= 1
        assert api.post("expire_share_locks", {"group": "sg", "topic": "t", "partition": 0}) == (
            200,
            {"ok": True, "released": 3},
        )
        (view,) = cluster.share_partitions("sg")  # minibroker.testing reads the same
        assert view["lock_expiries"] == 1
        # released, the records are Available (or already handed out again, with delivery count 2)
        assert all(r["state"] in ("Available", "Acquired") for r in view["records"])
        assert all(r["delivery_count"] in (1, 2) for r in view["records"])
        assert cluster.expire_share_locks("other") == 0
        assert api.call("POST", "/v1/expire_share_locks", {"group": "sg", "topic": "t"}) == (
            400,
            {"error": "topic and partition: give both (one partition) or neither (every partition)"},
        )
        assert api.call("GET", "/v1/share_partitions?group=") == (
            400,
            {"error": "group '': expected a non-empty string (a share group's id)"},
        )
    finally:
        consumer.close()
        server.stop()


def test_share_group_offsets_are_read_altered_and_deleted_on_demand(minibroker_factory):
    from minibroker.server import share_messages as w
    from tests.server.conftest import RawClient

    cluster = minibroker_factory(1, topics=["t:1:1"])
    server = ControlServer(log=cluster.logs.append).start(cluster)
    host, port = server.address
    api = Api(f"http://{host}:{port}")
    raw = RawClient(int(cluster.bootstrap_servers.rsplit(":", 1)[1]))

    def heartbeat(epoch: int) -> int:
        request = w.ShareGroupHeartbeatRequest(
            group_id="sg", member_id="m1", member_epoch=epoch, subscribed_topic_names=["t"]
        )
        return raw.request(request, w.ShareGroupHeartbeatResponse, 1).error_code

    try:
        cluster._run(cluster.served.cluster.ensure_offsets_topic)
        _until(lambda: heartbeat(0) == 0, "the group's coordinator")
        assert api.get("share_group_offsets", "group=sg") == [
            {"topic": "t", "partition": 0, "start_offset": -1, "error": "NONE"}
        ]
        alter = {"group": "sg", "topic": "t", "partition": 0, "start_offset": 2}
        assert api.call("POST", "/v1/alter_share_group_offsets", alter) == (
            400,
            {"error": "group 'sg': NON_EMPTY_GROUP"},
        )
        assert heartbeat(-1) == 0
        assert api.post("alter_share_group_offsets", alter) == (200, {"ok": True})
        assert cluster.share_group_offsets("sg", "t") == [  # minibroker.testing reads the same
            {"topic": "t", "partition": 0, "start_offset": 2, "error": "NONE"}
        ]
        assert api.post("delete_share_group_offsets", {"group": "sg", "topic": "t"}) == (200, {"ok": True})
        assert api.get("share_group_offsets", "group=sg") == []
        assert api.call("GET", "/v1/share_group_offsets?group=nope") == (
            400,
            {"error": "group 'nope': GROUP_ID_NOT_FOUND"},
        )
    finally:
        raw.close()
        server.stop()
